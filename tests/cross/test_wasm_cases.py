"""The backend-independent codegen cases (tests/codegen/cases.py: every dtype's arithmetic,
casts, math intrinsics, vectors, asserts ...) compiled for wasm32 with simd128 and run in
wasmtime, as the host LLVM and C backends run them. Cases that call host C code (extra_c) are
left out: that code is compiled for the host."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.codegen import cases
from tvmpy.codegen.llvm import build
from tvmpy.tir.function import PrimFunc

TARGET = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128"
WASM_CASES = [n for n in cases.CASE_NAMES if not cases.make_case(n).extra_c]


class WasmLib:
    """``lib(name, *args) -> int32`` over a WebAssembly module (the protocol of cases.py)."""

    def __init__(self, funcs: list[PrimFunc]):
        self.mod = build(funcs, TARGET)

    def last_error(self) -> str:
        return self.mod._last_error() or ""

    def __call__(self, name: str, *args: Any) -> int:
        f = self.mod.get_function(name)
        raw, writeback = f.prepare(args)
        rc = f._cfunc(*raw)
        for dst, src in writeback:
            if dst is not None:
                np.copyto(dst, src)
        return rc


@pytest.fixture(scope="module")
def wasm_lib() -> WasmLib:
    funcs = []
    for name in WASM_CASES:
        c = cases.make_case(name)
        funcs += [c.func, *c.extra_funcs]
    return WasmLib(funcs)


@pytest.mark.parametrize("name", WASM_CASES)
def test_case_on_wasm(name: str, wasm_lib: WasmLib) -> None:
    cases.run_case(cases.make_case(name), lambda funcs, extra: wasm_lib)


def test_most_cases_run_on_wasm() -> None:
    assert len(WASM_CASES) >= len(cases.CASE_NAMES) - 5
