"""The backend-independent codegen cases (tests/codegen/cases.py: every dtype's arithmetic,
casts, math intrinsics, vectors, asserts ...) compiled for wasm32 with simd128 and run in
wasmtime, as the host LLVM and C backends run them. Cases that call host C code (extra_c) are
left out: that code is compiled for the host. The float16 cases build as a module of their own:
LLVM's wasm backend hangs on vector half compares, so a module with any is compiled without
simd128 (codegen/llvm_wasm.py); every other case keeps simd128 (checked)."""

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


def _half(name: str) -> bool:
    return "float16" in name


@pytest.fixture(scope="module")
def wasm_libs() -> dict[bool, WasmLib]:
    libs = {}
    for half in (False, True):
        funcs = []
        for name in WASM_CASES:
            if _half(name) == half:
                c = cases.make_case(name)
                funcs += [c.func, *c.extra_funcs]
        libs[half] = WasmLib(funcs)
    return libs


@pytest.mark.parametrize("name", WASM_CASES)
def test_case_on_wasm(name: str, wasm_libs: dict[bool, WasmLib]) -> None:
    lib = wasm_libs[_half(name)]
    cases.run_case(cases.make_case(name), lambda funcs, extra: lib)


def test_simd128_kept(wasm_libs: dict[bool, WasmLib]) -> None:
    assert '"target-features"="+simd128"' in wasm_libs[False].mod.get_source("ll")
    assert '"target-features"="-simd128"' in wasm_libs[True].mod.get_source("ll")


def test_most_cases_run_on_wasm() -> None:
    assert len(WASM_CASES) >= len(cases.CASE_NAMES) - 5
