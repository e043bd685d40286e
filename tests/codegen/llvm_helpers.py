"""Helpers for the LLVM backend tests: build hand-written IR-form-2 PrimFuncs and run them.

``run_llvm`` compiles through :func:`tvmpy.codegen.llvm.compile_funcs`, links with the runtime's
linker into a temporary shared library and calls the function through ctypes with numpy arrays
(``cases.CtypesLib``, shared with the C backend tests), so these tests do not depend on the
runtime Module (tested elsewhere).
"""

from __future__ import annotations

import numpy as np

from tvmpy.codegen.llvm import compile_funcs
from tvmpy.ir import dtype as dt
from tvmpy.tir.function import PrimFunc

from .cases import CtypesLib, aligned, buf, func

__all__ = ["Lib", "run_llvm", "aligned", "buf", "func", "rand"]


class Lib(CtypesLib):
    """``funcs`` compiled by the LLVM backend and loaded through ctypes; ``ir`` is the LLVM IR."""

    def __init__(self, funcs, target=None):
        c = compile_funcs(funcs, target)
        super().__init__(funcs, [c.object], c.link_libs, c.cpu)
        self.ir = c.ir


def run_llvm(f: PrimFunc, *args, target=None) -> int:
    return Lib([f], target)(f.name, *args)


def rand(n: int, dtype: str, rng, lo=-10, hi=10) -> np.ndarray:
    npd = dt.to_numpy(dtype)
    if dt.is_float(dtype):
        return aligned(rng.uniform(lo, hi, n).astype(npd))
    if dt.is_bool(dtype):
        return aligned(rng.integers(0, 2, n).astype(bool))
    info = np.iinfo(npd)
    return aligned(rng.integers(max(info.min, lo), min(info.max, hi) + 1, n).astype(npd))
