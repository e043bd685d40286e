"""Buffers: a typed view of memory (data pointer, shape, strides, element offset, scope)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..ir import dtype as dt
from ..ir.node import Node
from .expr import BufferLoad, Call, PrimExpr, Var, const, convert

if TYPE_CHECKING:
    from .stmt import BufferStore

__all__ = ["Buffer", "decl_buffer"]


class Buffer(Node):
    """Memory with a shape. ``strides`` empty means compact row-major.

    ``scope``: "global" (function arguments, heap), "local" (registers / stack), "shared" etc.
    ``elem_offset``: offset of element 0 from ``data``, in elements (a Var for tensorize inputs).
    ``offset_factor``: elem_offset is a multiple of this (tensorize matching); 0 = unknown.
    """

    __slots__ = ("data", "dtype", "shape", "strides", "elem_offset", "name", "scope",
                 "data_alignment", "offset_factor")
    data: Var
    dtype: str
    shape: tuple[PrimExpr, ...]
    strides: tuple[PrimExpr, ...]
    elem_offset: PrimExpr
    name: str
    scope: str
    data_alignment: int
    offset_factor: int
    _fields = ("data", "shape", "strides", "elem_offset")

    def __init__(self, data: Var, dtype: str, shape: Sequence[Any], strides: Sequence[Any] = (),
                 elem_offset: Any = 0, name: str = "buf", scope: str = "global",
                 data_alignment: int = 64, offset_factor: int = 1):
        dt.parse(dtype)
        self._init(data=data, dtype=dtype, shape=tuple(convert(s) for s in shape),
                   strides=tuple(convert(s) for s in strides), elem_offset=convert(elem_offset),
                   name=name, scope=scope, data_alignment=int(data_alignment),
                   offset_factor=int(offset_factor))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, indices)

    def vload(self, indices: Any, dtype: str | None = None) -> BufferLoad:
        """Load starting at ``indices``: one element, or with a vector ``dtype`` (TVM's
        ``"float32x16"``, lanes a multiple of the buffer's) that many consecutive elements along
        the last axis (its index becomes a Ramp)."""
        from .expr import Ramp

        if not isinstance(indices, (tuple, list)):
            indices = (indices,)
        if dtype is None or dtype == self.dtype:
            return self[indices]
        elem, lanes = dt.element_of(dtype), dt.lanes_of(dtype)
        blanes = dt.lanes_of(self.dtype)
        if elem != dt.element_of(self.dtype) or lanes % blanes:
            raise ValueError(f"vload: cannot load {dtype} from a {self.dtype} buffer {self.name!r} "
                             f"(same element type, lanes a multiple of the buffer's)")
        if not indices:
            raise ValueError(f"vload of {dtype} from {self.name!r} needs at least one index")
        n = lanes // blanes
        return BufferLoad(self, [*indices[:-1], Ramp(indices[-1], 1, n)])

    def vstore(self, indices: Any, value: Any) -> BufferStore:
        """Store ``value`` at ``indices``; a vector value (lanes a multiple of the buffer's)
        fills that many consecutive elements along the last axis (its index becomes a Ramp)."""
        from .expr import Ramp
        from .stmt import BufferStore

        if not isinstance(indices, (tuple, list)):
            indices = (indices,)
        value = convert(value)
        lanes, blanes = dt.lanes_of(value.dtype), dt.lanes_of(self.dtype)
        if lanes != blanes and indices:
            if dt.element_of(value.dtype) != dt.element_of(self.dtype) or lanes % blanes:
                raise ValueError(f"vstore: cannot store {value.dtype} into a {self.dtype} buffer "
                                 f"{self.name!r} (same element type, lanes a multiple of the "
                                 f"buffer's)")
            indices = [*indices[:-1], Ramp(indices[-1], 1, lanes // blanes)]
        return BufferStore(self, value, indices)

    def compact_strides(self) -> tuple[PrimExpr, ...]:
        """Row-major strides (in elements) when ``strides`` is empty."""
        if self.strides:
            return self.strides
        out: list[PrimExpr] = []
        acc: PrimExpr = const(1, self.shape[-1].dtype if self.shape else "int32")
        for s in reversed(self.shape):
            out.append(acc)
            acc = acc * s
        return tuple(reversed(out))

    def elem_offset_of(self, indices: Sequence[Any]) -> PrimExpr:
        """Flat element offset of ``indices`` (including elem_offset)."""
        off: PrimExpr = self.elem_offset
        for i, s in zip(indices, self.compact_strides()):
            off = off + convert(i) * s
        return off

    def access_ptr(self, access_mask: Any = "rw", ptr_type: str = "handle", content_lanes: int = 1,
                   offset: Any = 0, extent: Any = None) -> Call:
        """A pointer into this buffer, for external calls (tensorize): ``data + elem_offset + offset``.

        Lowered by codegen; printed as ``tvm_access_ptr(dtype, data, offset, extent, mask)``.
        """
        if isinstance(access_mask, str):
            access_mask = (1 if "r" in access_mask else 0) | (2 if "w" in access_mask else 0)
        if extent is None:
            extent = const(1)
            for s in self.shape:
                extent = extent * s
        return Call("handle", "tvm_access_ptr",
                    [Call("handle", "type_annotation", [const(0, self.dtype)]), self.data,
                     self.elem_offset + offset, extent, access_mask])


def decl_buffer(shape: Sequence[Any], dtype: str = "float32", name: str = "buffer",
                data: Var | None = None, strides: Sequence[Any] = (), elem_offset: Any = None,
                scope: str = "global", data_alignment: int = -1, offset_factor: int = 0) -> Buffer:
    """Declare a buffer (TVM's ``tvm.tir.decl_buffer``). ``elem_offset=None`` with
    ``offset_factor > 0`` makes the offset a symbolic variable (for tensor intrinsics)."""
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    if data is None:
        data = Var(name, "handle")
    if elem_offset is None:
        elem_offset = Var(name + "_elem_offset", "int32") if offset_factor else 0
    return Buffer(data, dtype, shape, strides, elem_offset, name, scope,
                  64 if data_alignment < 0 else data_alignment, offset_factor)
