"""A fake CUDA driver (the methods of runtime.cuda_module.CtypesDriver) backed by host memory, whose
kernels are Python functions: runs the runtime's launch, packing and copy paths without a GPU.
:class:`HostKernels` supplies such kernels from generated CUDA C compiled for the host."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

_CT = {"handle": ctypes.c_uint64, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
       "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
       "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
       "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
       "float16": ctypes.c_uint16}


class FakeDriver:
    """``kernels``: name -> (param dtypes, fn(driver, grid, block, shared, *values))."""

    def __init__(self, kernels: dict[str, tuple[list[str], Callable]] | None = None,
                 arch: tuple[int, int] = (9, 0), ndev: int = 1):
        self.kernels = dict(kernels or {})
        self.arch = arch
        self.ndev = ndev
        self.mem: dict[int, np.ndarray] = {}
        self.loaded: list[bytes] = []
        self.launches: list[tuple] = []
        self.syncs = 0
        self.events = 0
        self.dyn_shared: dict[str, int] = {}

    def device_count(self) -> int:
        return self.ndev

    def device_name(self, dev: int) -> str:
        return "Fake H100"

    def device_attribute(self, dev: int, attr: int) -> int:
        return {75: self.arch[0], 76: self.arch[1], 1: 1024, 8: 49152, 10: 32}.get(attr, 0)

    def mem_alloc(self, dev: int, nbytes: int) -> int:
        buf = np.zeros(max(nbytes, 1) + 256, np.uint8)
        ptr = buf.ctypes.data + (-buf.ctypes.data) % 256
        self.mem[ptr] = buf
        return ptr

    def mem_free(self, dev: int, ptr: int) -> None:
        self.mem.pop(ptr)

    def _check(self, ptr: int) -> None:
        assert any(p <= ptr < p + b.size for p, b in self.mem.items()), "not device memory"

    def memcpy_htod(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._check(dst)
        ctypes.memmove(dst, src, nbytes)

    def memcpy_dtoh(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._check(src)
        ctypes.memmove(dst, src, nbytes)

    def memcpy_dtod(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._check(src)
        self._check(dst)
        ctypes.memmove(dst, src, nbytes)

    def module_load(self, dev: int, image: bytes) -> Any:
        self.loaded.append(image)
        return len(self.loaded)

    def module_function(self, dev: int, module: Any, name: str) -> Any:
        if name not in self.kernels:
            raise RuntimeError(f"CUDA cuModuleGetFunction({name}) failed: CUDA_ERROR_NOT_FOUND")
        return name

    def set_max_dynamic_shared(self, dev: int, func: Any, nbytes: int) -> None:
        self.dyn_shared[func] = nbytes

    def launch(self, dev: int, func: Any, grid: Any, block: Any, shared: int, params: Any) -> None:
        types, fn = self.kernels[func]
        vals = [_CT[t].from_address(params[i]).value for i, t in enumerate(types)]
        self.launches.append((func, tuple(grid), tuple(block), shared, vals))
        fn(self, tuple(grid), tuple(block), shared, *vals)

    def synchronize(self, dev: int) -> None:
        self.syncs += 1

    def event_create(self, dev: int) -> Any:
        self.events += 1
        return self.events

    def event_record(self, dev: int, ev: Any) -> None:
        pass

    def event_elapsed_ms(self, dev: int, start: Any, end: Any) -> float:
        return 1.0

    def event_destroy(self, dev: int, ev: Any) -> None:
        pass


def view(ptr: int, n: int, dtype: str) -> np.ndarray:
    """A numpy view of n elements of fake device memory at ``ptr``."""
    return np.ctypeslib.as_array((ctypes.c_char * (n * np.dtype(dtype).itemsize)).from_address(
        ptr)).view(dtype)


# ---- CUDA C kernels run on the host ---------------------------------------------------------
HOST_HEADER = r"""
#include <cstring>
#include <cmath>
using std::isfinite;
using std::isinf;
using std::isnan;
struct tvmpy_dim3 { unsigned x, y, z; };
extern "C" { tvmpy_dim3 blockIdx, threadIdx; }
#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __align__(n) alignas(n)
#define __syncthreads() ((void)0)
#define __syncwarp() ((void)0)
static inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
"""


class HostKernels:
    """The CUDA C of a built module compiled for the host with g++ (HOST_HEADER emulates the
    CUDA keywords): ``kernels`` plugs into :class:`FakeDriver`, which then runs each launch
    thread by thread (exact for kernels without barriers, or with one thread per block)."""

    def __init__(self, source: str, kernel_params: dict[str, list[str]], workdir: str):
        import os
        import shutil
        import subprocess

        cxx = shutil.which("g++") or shutil.which("c++")
        if cxx is None:
            raise RuntimeError("no C++ compiler (g++) to emulate CUDA kernels on the host")
        import hashlib

        tag = hashlib.sha256(source.encode()).hexdigest()[:16]  # dlopen caches by path
        src, lib = (os.path.join(workdir, f"kernels_{tag}.cc"),
                    os.path.join(workdir, f"kernels_{tag}.so"))
        with open(src, "w") as f:
            f.write(HOST_HEADER + source)
        proc = subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-w", "-o", lib, src],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"host compile of the CUDA C failed:\n{proc.stderr[:4000]}")
        self.lib = ctypes.CDLL(lib)
        self.barriers = "__syncthreads" in source
        self.kernels = {name: (types, self._runner(name, types))
                        for name, types in kernel_params.items()}

    def _runner(self, name: str, types: list[str]) -> Callable:
        fn = getattr(self.lib, name)
        fn.argtypes = [ctypes.c_void_p if t == "handle" else _CT[t] for t in types]
        fn.restype = None
        bidx = _Dim3.in_dll(self.lib, "blockIdx")
        tidx = _Dim3.in_dll(self.lib, "threadIdx")

        def run(drv: Any, grid: tuple, block: tuple, shared: int, *vals: Any) -> None:
            if self.barriers and block != (1, 1, 1):
                raise RuntimeError(f"{name}: kernels with barriers emulate only one thread per "
                                   "block")
            for bz in range(grid[2]):
                for by in range(grid[1]):
                    for bx in range(grid[0]):
                        for tz in range(block[2]):
                            for ty in range(block[1]):
                                for tx in range(block[0]):
                                    bidx.x, bidx.y, bidx.z = bx, by, bz
                                    tidx.x, tidx.y, tidx.z = tx, ty, tz
                                    fn(*vals)
        return run


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]
