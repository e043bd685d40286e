"""The DRAM model shared by the VTA runtime (which allocates) and the simulator (which reads and
writes through DMA): page-aligned buffers at physical addresses, each one numpy array, so a
DMA that strays outside every allocated buffer is caught and named instead of corrupting memory.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from ..hw_config import PAGE_BYTES


class DramAccessError(RuntimeError):
    """A DMA transfer that reaches outside the allocated DRAM buffers."""


class DramBuffer:
    """One allocation: ``addr`` (physical byte address) and ``nbytes`` bytes in ``data``."""

    def __init__(self, addr: int, nbytes: int) -> None:
        self.addr = addr
        self.nbytes = nbytes
        self.data = np.zeros(nbytes, dtype=np.uint8)

    def view(self, dtype: Any = "uint8") -> np.ndarray:
        """A numpy view of the buffer's bytes as ``dtype`` (writes go to DRAM)."""
        return self.data.view(np.dtype(dtype))

    def __repr__(self) -> str:
        return f"DramBuffer(addr={self.addr:#x}, nbytes={self.nbytes})"


class Dram:
    """Physical memory: page-aligned buffers, first fit (freed ranges are reused)."""

    def __init__(self, base: int = PAGE_BYTES) -> None:
        self._base = base
        self._bases: list[int] = []
        self._buffers: list[DramBuffer] = []

    def alloc(self, nbytes: int, align: int = PAGE_BYTES) -> DramBuffer:
        """A new buffer at a multiple of ``align`` (a power of two, at least a page)."""
        if int(nbytes) <= 0:
            raise ValueError(f"a DRAM buffer needs a positive size, got {nbytes}")
        align = max(int(align), PAGE_BYTES)
        if align & (align - 1):
            raise ValueError(f"DRAM alignment must be a power of two, got {align}")
        nbytes = int(nbytes)
        addr, i = -(-self._base // align) * align, 0
        while i < len(self._buffers):                # first gap that fits
            buf = self._buffers[i]
            if addr + nbytes <= buf.addr:
                break
            addr = -(-(buf.addr + buf.nbytes) // align) * align
            i += 1
        buf = DramBuffer(addr, nbytes)
        self._bases.insert(i, addr)
        self._buffers.insert(i, buf)
        return buf

    def free(self, buf: DramBuffer) -> None:
        i = bisect.bisect_left(self._bases, buf.addr)
        if i == len(self._bases) or self._buffers[i] is not buf:
            raise ValueError(f"{buf!r} is not allocated in this DRAM")
        del self._bases[i], self._buffers[i]

    def find(self, addr: int, nbytes: int, what: str = "access") -> tuple[DramBuffer, int]:
        """The buffer holding bytes ``[addr, addr + nbytes)`` and the offset of ``addr``."""
        i = bisect.bisect_right(self._bases, addr) - 1
        if i >= 0:
            buf = self._buffers[i]
            if addr + nbytes <= buf.addr + buf.nbytes:
                return buf, addr - buf.addr
        raise DramAccessError(f"{what}: DRAM bytes [{addr:#x}, {addr + nbytes:#x}) lie outside "
                              f"every allocated buffer")

    def region_2d(self, addr: int, y_size: int, x_bytes: int, row_bytes: int,
                  what: str = "access") -> np.ndarray:
        """A writable (y_size, x_bytes) uint8 view of rows ``row_bytes`` apart from ``addr``."""
        span = (y_size - 1) * row_bytes + x_bytes
        buf, off = self.find(addr, span, what)
        base = buf.data[off:off + span]
        return np.lib.stride_tricks.as_strided(base, shape=(y_size, x_bytes),
                                               strides=(row_bytes, 1))
