"""LegalizeStorageDtypes: storage-only dtypes become their bits in memory and float32 / int32
in arithmetic, so that no code generator sees bfloat16, float8 or the sub-byte integers.

What it does
    For the dtypes of :data:`tvmpy.ir.dtype.STORAGE_ONLY` (TVM's BF16/FP8 "storage" and
    "compute" legalization in one pass):

    - every Buffer of such a dtype used in the body (loads, stores, ``Allocate``) is replaced by
      one of its storage dtype (``storage_of``: uint16, uint8, int8) sharing its ``data`` Var,
      the parameters' buffers in ``func.buffer_map`` too, so that code generators type the
      pointers as integers; the attribute ``tir.logical_dtypes`` (parameter index -> dtype)
      keeps the parameters' own dtypes, which the ABI checks arguments against;
    - a load becomes :func:`tvmpy.tir.low_precision.decode` of the loaded bits (a float32 or
      int32 value), a store :func:`~tvmpy.tir.low_precision.encode` of the stored value (round
      to nearest even, non-saturating; a value just loaded or just rounded is stored as its
      bits, without a second conversion);
    - ``Cast(T, x)`` rounds ``x`` (cast to the compute type first) to ``T``'s values;
      ``Cast(D, x)`` from such a dtype casts the compute value; arithmetic and intrinsic calls
      typed ``T`` compute in the compute type and round the result to ``T`` (one rounding per
      operation, as a native ``T`` unit would); constants and variables of ``T`` take the
      compute type.

When valid
    Always; it runs first in phase 1 (before StorageFlatten), so that later passes
    (simplification, vectorization, storage rewriting) only meet standard dtypes. A float64
    value cast to a low float goes through float32 (double rounding in rare halfway cases;
    ONNX casts from float32 and float16 only, which are exact).

Example
    before:  B[i] = A[i] + 1.0bf16                                # A, B: bfloat16
    after:   B[i] = encode_bf16(decode_bf16(A[i]) + 1.0f)         # A, B: uint16 bits
"""

from __future__ import annotations

from typing import Any

from ...ir import dtype as dt
from .. import expr as E
from .. import low_precision as lp
from .. import stmt as S
from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import Mutator
from .function_pass import PrimFuncPass

__all__ = ["LegalizeStorageDtypes", "legalize_storage_dtypes_func"]

_NO_ROUND = {"if_then_else", "likely", "reinterpret"}


def _special(dtype: str) -> bool:
    return dt.is_storage_only(dtype)


class _Legalizer(Mutator):
    def __init__(self) -> None:
        self.buffers: dict[int, Buffer] = {}
        self.vars: dict[int, E.Var] = {}
        # id(compute expr) -> (its storage bits, its dtype): stored as is, without re-encoding
        self.bits: dict[int, tuple[E.PrimExpr, str]] = {}
        self.keep: list[E.PrimExpr] = []  # keeps the ids in ``bits`` alive

    def twin(self, b: Buffer) -> Buffer:
        t = self.buffers.get(id(b))
        if t is None:
            t = self.buffers[id(b)] = Buffer(
                b.data, dt.storage_of(b.dtype), b.shape, b.strides, b.elem_offset, b.name,
                b.scope, b.data_alignment, b.offset_factor)
        return t

    def decoded(self, bits: E.PrimExpr, dtype: str) -> E.PrimExpr:
        v = lp.decode(bits, dtype)
        self.bits[id(v)] = (bits, dt.element_of(dtype))
        self.keep.append(v)
        return v

    def rounded(self, x: E.PrimExpr, dtype: str) -> E.PrimExpr:
        return self.decoded(lp.encode(x, dtype), dtype)

    def encoded(self, v: E.PrimExpr, dtype: str) -> E.PrimExpr:
        known = self.bits.get(id(v))
        if known is not None and known[1] == dt.element_of(dtype):
            return known[0]
        return lp.encode(v, dtype)

    # ---- leaves ------------------------------------------------------------------------------
    def visit_Var(self, v: E.Var) -> E.Var:
        if not _special(v.dtype):
            return v
        nv = self.vars.get(id(v))
        if nv is None:
            nv = self.vars[id(v)] = E.Var(v.name, dt.compute_of(v.dtype))
        return nv

    def visit_FloatImm(self, e: E.FloatImm) -> E.PrimExpr:
        if not _special(e.dtype):
            return e
        return self.rounded(E.const(e.value, dt.compute_of(e.dtype)), e.dtype)

    def visit_IntImm(self, e: E.IntImm) -> E.PrimExpr:
        if not _special(e.dtype):
            return e
        return self.rounded(E.const(e.value, dt.compute_of(e.dtype)), e.dtype)

    # ---- memory ------------------------------------------------------------------------------
    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        indices = tuple(self.visit(i) for i in e.indices)
        pred = self.visit(e.predicate) if e.predicate is not None else None
        if _special(e.buffer.dtype):
            return self.decoded(E.BufferLoad(self.twin(e.buffer), indices, pred), e.dtype)
        if all(a is b for a, b in zip(indices, e.indices)) and pred is e.predicate:
            return e
        return E.BufferLoad(e.buffer, indices, pred)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        value = self.visit(s.value)
        indices = tuple(self.visit(i) for i in s.indices)
        pred = self.visit(s.predicate) if s.predicate is not None else None
        if _special(s.buffer.dtype):
            return S.BufferStore(self.twin(s.buffer), self.encoded(value, s.value.dtype),
                                 indices, pred)
        if value is s.value and all(a is b for a, b in zip(indices, s.indices)) \
                and pred is s.predicate:
            return s
        return S.BufferStore(s.buffer, value, indices, pred)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        body = self.visit(s.body)
        cond = self.visit(s.condition)
        buf = self.twin(s.buffer) if _special(s.buffer.dtype) else s.buffer
        if body is s.body and cond is s.condition and buf is s.buffer:
            return s
        return S.Allocate(buf, body, cond)

    # ---- arithmetic --------------------------------------------------------------------------
    def visit_Cast(self, e: E.Cast) -> E.PrimExpr:
        v = self.visit(e.value)
        if _special(e.dtype):
            known = self.bits.get(id(v))
            if known is not None and known[1] == dt.element_of(e.dtype):
                return v  # already of e.dtype's values
            return self.rounded(E.cast(v, dt.compute_of(e.dtype)), e.dtype)
        return E.cast(v, e.dtype)

    def visit_BinaryOp(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        if a is e.a and b is e.b:
            return e
        if a.dtype != b.dtype:
            a, b = E.binary_match(a, b)
        out = type(e)(a, b)
        return self.rounded(out, e.dtype) if _special(e.dtype) else out

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        if e.op in ("type_annotation", "tir.type_annotation") and e.args \
                and _special(e.args[0].dtype):  # an access pointer's element type: the bits'
            return E.Call(e.dtype, e.op, [E.const(0, dt.storage_of(e.args[0].dtype))])
        args = [self.visit(a) for a in e.args]
        if not _special(e.dtype):
            if all(a is b for a, b in zip(args, e.args)):
                return e
            return E.Call(e.dtype, e.op, args)
        out = E.Call(dt.compute_of(e.dtype), e.op, args)
        return out if e.op in _NO_ROUND else self.rounded(out, e.dtype)

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        c, t, f = self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value)
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(c, t, f)

    # ---- scopes ------------------------------------------------------------------------------
    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        var = self.visit_Var(e.var)
        value, body = self.visit(e.value), self.visit(e.body)
        if var is e.var and value is e.value and body is e.body:
            return e
        return E.Let(var, value, body)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        var = self.visit_Var(s.var)
        value, body = self.visit(s.value), self.visit(s.body)
        if var is s.var and value is s.value and body is s.body:
            return s
        return S.LetStmt(var, value, body)


def _uses_special(func: PrimFunc) -> bool:
    from ..functor import post_order_visit

    found = []

    def visit(n: Any) -> None:
        d = getattr(n, "dtype", None)
        if isinstance(d, str) and d != "handle" and _special(d):
            found.append(n)
        b = getattr(n, "buffer", None)
        if isinstance(b, Buffer) and _special(b.dtype):
            found.append(n)

    post_order_visit(func.body, visit)
    return bool(found)


def legalize_storage_dtypes_func(func: PrimFunc) -> PrimFunc:
    """``func`` with every storage-only dtype legalized (see the module docstring)."""
    if not _uses_special(func):
        return func
    leg = _Legalizer()
    body = leg.visit(func.body)
    logical = dict(func.attrs.get("tir.logical_dtypes", {}))
    bmap = {}
    for i, p in enumerate(func.params):
        b = func.buffer_map.get(p)
        if b is None:
            continue
        if _special(b.dtype):
            logical[i] = b.dtype
            b = leg.twin(b)
        bmap[p] = b
    attrs = dict(func.attrs)
    if logical:
        attrs["tir.logical_dtypes"] = logical
    return PrimFunc(func.params, body, bmap, attrs)


def LegalizeStorageDtypes() -> PrimFuncPass:  # noqa: N802 -- TVM's pass naming
    return PrimFuncPass.from_func(legalize_storage_dtypes_func, "LegalizeStorageDtypes")
