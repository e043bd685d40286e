"""The CPU backends' expression and statement cases (tests/codegen/cases.py) as one-thread CUDA
kernels (the wrapping of test_opencl_cases.py), compiled without a GPU: every intrinsic, cast,
wrap-around and vector form the C backend prints must go through NVRTC (target "cuda") and
LLVM's NVPTX back end with libdevice (target "nvptx"), and the PTX through ptxas for sm_80 and
sm_90. (Running them needs a GPU: bench/gpu_check.py.)"""

from __future__ import annotations

import pytest

from tvmpy.codegen import cuda, nvptx

from .test_opencl_cases import ALL, _as_gpu, _refusal

# on CUDA float16 is supported; what no GPU kernel can express stays refused
COMPILABLE = [n for n, c in ALL.items() if _refusal(c) in (None, "float16")]


def _pairs(names):
    return [x for n in names for x in _as_gpu(ALL[n].func)]


@pytest.mark.parametrize("backend", ["cuda", "nvptx"])
def test_all_cases_compile(backend):
    mod = (cuda if backend == "cuda" else nvptx).build(_pairs(COMPILABLE))
    dm = mod.imported_modules[0]
    kernels = {f"{ALL[n].func.name}_kernel" for n in COMPILABLE}
    for arch in ("sm_80", "sm_90"):
        assert set(dm.ptxas_info[arch]) == kernels
        assert all(i.spill_stores == 0 for i in dm.ptxas_info[arch].values())
    assert set(mod.function_names()) == {ALL[n].func.name for n in COMPILABLE}


def test_enough_cases():
    assert len(COMPILABLE) > 0.75 * len(ALL), len(COMPILABLE)
