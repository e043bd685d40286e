"""StorageFlatten: multi-dimensional buffers become 1-D; every access gets one linear index.

What it does
    Every Buffer used in the body (loads, stores, ``Allocate``) is replaced by a flat Buffer of
    shape ``(size,)`` that shares the original's ``data`` Var, dtype element and scope. An access
    ``B[i0, ..., in]`` becomes ``B[elem_offset + i0*s0 + ... + in*sn]`` with the Buffer's own
    ``strides`` (storage_align), or compact row-major strides when it has none. A buffer of a
    vector dtype (``float32x4``) becomes a buffer of its element type, accessed with a Ramp.
    ``Prefetch`` hints are dropped.

The ABI keeps the original shapes
    ``func.buffer_map`` is left untouched: its Buffers keep their multi-dimensional shapes (and
    strides), because ``tvmpy.codegen.abi.signature`` reads them to check the arguments' shapes
    and to find the shape variables. Only the buffers *used in the body* are flattened; they
    share the parameter's ``data`` Var, so code generators key memory by the data Var.

When valid
    On form-1 IR (after schedule lowering), indices relative to the buffer's start. Indices are
    not bounds-checked here. Run Simplify afterwards to canonicalize the linear indices.

Example
    before:  B = allocate((1, 16), 'float32'); B[0, j] = A[i, j] * 2.0f    # A: (10, 16)
    after:   B = allocate((16,), 'float32'); B[j] = A[i * 16 + j] * 2.0f
"""

from __future__ import annotations

from ...ir import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import Mutator
from .common import flat_size, fold_add, fold_mul
from .function_pass import PrimFuncPass

__all__ = ["StorageFlatten", "storage_flatten_func", "flatten_index"]


def _strides(buf: Buffer) -> tuple[E.PrimExpr, ...]:
    if buf.strides:
        if len(buf.strides) != len(buf.shape):
            raise ValueError(f"buffer {buf.name}: {len(buf.strides)} strides for a "
                             f"{len(buf.shape)}-d shape")
        return buf.strides
    out: list[E.PrimExpr] = []
    acc: E.PrimExpr = E.const(1, buf.shape[-1].dtype if buf.shape else "int32")
    for s in reversed(buf.shape):
        out.append(acc)
        acc = fold_mul(acc, s)
    return tuple(reversed(out))


def flatten_index(buf: Buffer, indices: tuple) -> E.PrimExpr:
    """The linear element index of ``buf[indices]`` (before vector-dtype widening)."""
    if len(indices) != len(buf.shape):
        raise IndexError(f"buffer {buf.name} has {len(buf.shape)} dimensions, accessed with "
                         f"{len(indices)} indices")
    off: E.PrimExpr = buf.elem_offset
    for i, s in zip(indices, _strides(buf)):
        i = E.convert(i)
        if s.dtype != i.dtype and dt.lanes_of(i.dtype) == 1:
            s = E.cast(s, i.dtype) if not isinstance(s, E.IntImm) else E.const(s.value, i.dtype)
        term = fold_mul(i, s)
        if off.dtype != term.dtype and isinstance(off, E.IntImm):
            off = E.const(off.value, dt.element_of(term.dtype))
        off = fold_add(off, term)
    return off


class _Flattener(Mutator):
    def __init__(self) -> None:
        self.flat: dict[int, Buffer] = {}

    def flat_buffer(self, buf: Buffer) -> Buffer:
        fb = self.flat.get(id(buf))
        if fb is None:
            lanes = dt.lanes_of(buf.dtype)
            size = flat_size(buf)
            if buf.elem_offset is not None and not (isinstance(buf.elem_offset, E.IntImm)
                                                    and buf.elem_offset.value == 0):
                size = fold_add(size, buf.elem_offset)
            if lanes > 1:
                size = fold_mul(size, E.const(lanes, size.dtype))
            fb = Buffer(buf.data, dt.element_of(buf.dtype), (size,), (), 0, buf.name, buf.scope,
                        buf.data_alignment, 1)
            self.flat[id(buf)] = fb
        return fb

    def index(self, buf: Buffer, indices: tuple) -> E.PrimExpr:
        off = flatten_index(buf, indices)
        lanes = dt.lanes_of(buf.dtype)
        if lanes > 1:
            if dt.lanes_of(off.dtype) != 1:
                raise NotImplementedError(f"vector index into vector-typed buffer {buf.name}")
            return E.Ramp(fold_mul(off, E.const(lanes, off.dtype)), 1, lanes)
        return off

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        idx = tuple(self.visit(i) for i in e.indices)
        pred = self.visit(e.predicate) if e.predicate is not None else None
        return E.BufferLoad(self.flat_buffer(e.buffer), (self.index(e.buffer, idx),), pred)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        idx = tuple(self.visit(i) for i in s.indices)
        pred = self.visit(s.predicate) if s.predicate is not None else None
        return S.BufferStore(self.flat_buffer(s.buffer), self.visit(s.value),
                             (self.index(s.buffer, idx),), pred)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        return S.Allocate(self.flat_buffer(s.buffer), self.visit(s.body), s.condition)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        node = self.flat_buffer(s.node) if isinstance(s.node, Buffer) else s.node
        return S.AttrStmt(node, s.attr_key, self.visit(s.value), self.visit(s.body))

    def visit_Prefetch(self, s: S.Prefetch) -> S.Stmt:
        return S.no_op()


def storage_flatten_func(func: PrimFunc) -> PrimFunc:
    """Flatten every buffer accessed in ``func``'s body to 1-D (``buffer_map`` keeps shapes)."""
    return func.with_body(_Flattener().visit(func.body))


def StorageFlatten(cache_line_size: int = 64,
                   create_bound_attribute: bool = False) -> PrimFuncPass:
    """``tvm.tir.transform.StorageFlatten(64)``: flatten multi-dimensional buffers to 1-D, as a
    pass (the pass form of :func:`storage_flatten_func`). TVM's arguments are accepted:
    ``cache_line_size`` does not change the flattened layout here (strides come from the
    buffers and ``storage_align``); ``create_bound_attribute=True`` (bound attributes for
    InstrumentBoundCheckers, which tvmpy does not have) is refused."""
    if isinstance(cache_line_size, bool) or not isinstance(cache_line_size, int) or \
            cache_line_size < 1:
        raise TypeError(f"StorageFlatten: cache_line_size must be a positive int, got "
                        f"{cache_line_size!r}")
    if create_bound_attribute:
        raise ValueError("StorageFlatten(create_bound_attribute=True): tvmpy has no "
                         "InstrumentBoundCheckers pass to consume bound attributes")
    return PrimFuncPass.from_func(storage_flatten_func, "StorageFlatten")
