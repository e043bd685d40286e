"""Helpers for the LLVM backend tests: build hand-written IR-form-2 PrimFuncs and run them.

``run_llvm`` compiles through :func:`tvmpy.codegen.llvm.compile_funcs`, links with the runtime's
linker into a temporary shared library and calls the function through ctypes with numpy arrays,
so these tests do not depend on the runtime Module (tested elsewhere).
"""

from __future__ import annotations

import ctypes
import os
import tempfile

import numpy as np

from tvmpy.codegen import abi
from tvmpy.codegen.llvm import compile_funcs
from tvmpy.ir import dtype as dt
from tvmpy.runtime.linker import link_shared
from tvmpy.tir import expr as E
from tvmpy.tir.buffer import decl_buffer
from tvmpy.tir.function import PrimFunc

_CTYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
           "uint32": ctypes.c_uint32, "float32": ctypes.c_float, "float64": ctypes.c_double,
           "bool": ctypes.c_bool}


def buf(name: str, n, dtype: str = "float32", scope: str = "global"):
    return decl_buffer((n,), dtype, name, scope=scope)


def func(name: str, params, body, buffers=()) -> PrimFunc:
    """PrimFunc with ``params`` (Buffers or scalar Vars) and ``body``."""
    ps, bmap = [], {}
    for p in params:
        if isinstance(p, E.Var):
            ps.append(p)
        else:
            ps.append(p.data)
            bmap[p.data] = p
    return PrimFunc(ps, body, bmap, {"global_symbol": name, "tir.lowered": True})


class Lib:
    def __init__(self, funcs, target=None):
        self.funcs = {f.name: f for f in funcs}
        self.sigs = {f.name: abi.signature(f) for f in funcs}
        c = compile_funcs(funcs, target)
        self.ir = c.ir
        self.tmp = tempfile.mkdtemp(prefix="tvmpy_llvm_test_")
        path = os.path.join(self.tmp, "lib.so")
        link_shared([c.object], abi.module_metadata(funcs), path, c.link_libs)
        self.lib = ctypes.CDLL(path)

    def last_error(self) -> str:
        p = ctypes.c_char_p.in_dll(self.lib, abi.ERROR_SYMBOL)
        return p.value.decode() if p.value else ""

    def __call__(self, name: str, *args) -> int:
        sig = self.sigs[name]
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int32
        cargs = []
        arrays = []
        for p, a in zip(sig.params, args):
            if p.kind == "buffer":
                assert isinstance(a, np.ndarray) and a.flags.c_contiguous
                arrays.append(a)
                cargs.append(ctypes.c_void_p(a.ctypes.data))
            else:
                cargs.append(_CTYPES[p.dtype](a))
        for sv in sig.shape_vars:
            cargs.append(_CTYPES[sv.dtype](args[sv.arg_index].shape[sv.dim]))
        return fn(*cargs)


def run_llvm(f: PrimFunc, *args, target=None) -> int:
    return Lib([f], target)(f.name, *args)


def aligned(a: np.ndarray) -> np.ndarray:
    """A 64-byte aligned copy of ``a`` (the ABI promises aligned buffers)."""
    a = np.ascontiguousarray(a)
    raw = np.empty(a.nbytes + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def rand(n: int, dtype: str, rng, lo=-10, hi=10) -> np.ndarray:
    npd = dt.to_numpy(dtype)
    if dt.is_float(dtype):
        return aligned(rng.uniform(lo, hi, n).astype(npd))
    if dt.is_bool(dtype):
        return aligned(rng.integers(0, 2, n).astype(bool))
    info = np.iinfo(npd)
    return aligned(rng.integers(max(info.min, lo), min(info.max, hi) + 1, n).astype(npd))
