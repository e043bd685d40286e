"""The CPU backends' expression and statement cases (tests/codegen/cases.py) as one-thread Vulkan
kernels on lavapipe, checked against the same numpy results: every intrinsic, cast, wrap-around
and vector form the SPIR-V emitter supports. Cases it cannot express must be refused at build
time with a clear error: failure returns / asserts, heap allocations, parallel loops (as on
OpenCL), float64 transcendentals (GLSL.std.450 has none). float16, 8/16-bit and bool storage run
(lavapipe reports shaderFloat16/Int8/Int16 and 8/16-bit storage)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from vkt_common import vulkan_device

from tvmpy.codegen import vulkan
from tvmpy.codegen.gpu_source import GPUCodegenError
from tvmpy.tir.function import PrimFunc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: the codegen cases
from codegen import cases  # noqa: E402
from codegen.test_opencl_cases import _as_gpu, _refusal  # noqa: E402


@pytest.fixture(scope="module")
def dev():
    return vulkan_device()


ALL = {name: cases.make_case(name) for name in cases.CASE_NAMES}
# what the Vulkan back end refuses beyond OpenCL's refusals (the message names it)
_VK_REFUSED = re.compile(r"on float64 \(GLSL.std.450 defines it for 16/32-bit floats only\)")


class _Lib:
    def __init__(self, funcs: list[PrimFunc]):
        pairs = [_as_gpu(f) for f in funcs]
        self.mod = vulkan.build([x for pair in pairs for x in pair])

    def __call__(self, name: str, *args: Any) -> int:
        self.mod[name](*args)
        return 0

    def last_error(self) -> str:
        return ""


def _vk_refusal(name: str) -> str | None:
    try:
        _Lib([ALL[name].func])
    except GPUCodegenError as err:
        return str(err)
    return None


RUNNABLE = [n for n, c in ALL.items() if _refusal(c) in (None, "float16")]


@pytest.mark.parametrize("name", RUNNABLE)
def test_case_on_vulkan(name: str, dev) -> None:
    why = _vk_refusal(name)
    if why is not None:
        assert _VK_REFUSED.search(why), why  # refused with a reason of the documented kinds
        assert "compute in float32" in why and "float64" in name, why
        return
    lib = _Lib([ALL[name].func])
    cases.run_case(ALL[name], lambda funcs, extra: lib)


def test_only_float64_math_is_refused():
    refused = [n for n in RUNNABLE if _vk_refusal(n) is not None]
    assert all("float64" in n for n in refused), refused
    assert len(refused) < 0.1 * len(RUNNABLE), refused
