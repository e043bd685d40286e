"""A fake CUDA driver (the methods of runtime.cuda_module.CtypesDriver) backed by host memory, whose
kernels are Python functions: runs the runtime's launch, packing and copy paths without a GPU."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

_CT = {"handle": ctypes.c_uint64, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
       "float32": ctypes.c_float, "float64": ctypes.c_double}


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
