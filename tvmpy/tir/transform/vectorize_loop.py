"""VectorizeLoop: ``For`` loops of kind VECTORIZED become vector IR, or serial loops.

What it does
    For a vectorized loop over ``x`` in ``[m, m + L)`` with a constant extent ``L``, the body is
    rewritten once with ``x = ramp(m, 1, L)``: integer ``+ - *`` of a ramp and a loop-invariant
    scalar stay ramps (so indices stay ``ramp(base, stride, L)``); other operations broadcast
    their scalar operands; loads and stores with a ramp index become vector accesses (contiguous
    or strided); loop-invariant loads stay scalar and are broadcast where needed; elementwise
    intrinsics get vector types; a ``let`` bound to a vector gets a vector variable. An inner
    serial loop whose bounds do not depend on ``x`` is kept, with the vector body inside (loop
    interchange), when the dependence check below allows it. Extents above 64 lanes are cut into
    a serial loop of 64-lane vectors plus a vector remainder.

    A condition that depends on ``x`` becomes a lane mask: ``if_then_else(c, a, b)`` becomes
    ``select(c, a, b)`` with the loads of ``a`` predicated by ``c`` (those of ``b`` by ``not
    c``), so masked-off lanes never touch memory (padding reads stay in bounds); an ``if c:``
    statement whose branches are stores becomes predicated stores (``c`` must not read memory).

    A load whose vector index is not a ramp (``x % 8``, ``x // 4 * c + x % 4``: broadcasting
    reads of a fused loop nest) is split into a lane-invariant base and per-lane offsets: when
    every offset is a constant (the analyzer proves ``index(lane k) - index(lane 0)`` constant,
    knowing the enclosing loops' ranges) and they span a small window, it becomes one
    contiguous load of that window plus a ``Shuffle`` picking the lanes (the window's two ends
    are read by some lane, so it stays in bounds); otherwise a gather (a load with a vector
    index). Under a vector condition it is always a gather with the condition as its mask.

    The loop is *scalarized* (kept as a SERIAL loop) when it cannot be vectorized: symbolic
    extent; a store whose vector index is not a ramp (lanes could collide); a vector value
    stored to one scalar address (a reduction into the same element); loops, lets, scalar
    accesses or a memory-reading condition under a vector condition; external calls;
    allocations inside; bodies that already contain vector IR; a zero or symbolic store stride.

When valid (the dependence check)
    Vectorizing runs statement 1 for all lanes before statement 2, and interchanges with inner
    loops. Both preserve the sequential meaning when lanes do not communicate through memory. We
    require, for every buffer *written* in the body, that all its loads and stores use the same
    (vectorized) index, a ramp with a non-zero constant stride, or the same invariant scalar
    address with a value that reads no memory. Otherwise the loop is scalarized.

Example
    before:  for j in vectorized(0, 16): C[i * 16 + j] = B[j] + 1.0f
    after:   C[ramp(i * 16, 1, 16)] = B[ramp(0, 1, 16)] + broadcast(1.0f, 16)
"""

from __future__ import annotations

import math
from typing import Any

from ...ir import dtype as dt
from ...ir.node import structural_equal
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, post_order_visit, reads_memory
from ..op import FLOAT_BINARY, FLOAT_PREDICATE, FLOAT_UNARY, INT_BINARY, INT_UNARY
from .common import fresh_copy, make_analyzer
from .function_pass import PrimFuncPass

__all__ = ["VectorizeLoop", "vectorize_loop_func", "MAX_LANES"]

MAX_LANES = 64
MAX_WINDOW = 64  # widest contiguous load that replaces a gather (then shuffled into lanes)
_ELEMENTWISE = set(FLOAT_UNARY) | set(FLOAT_BINARY) | set(FLOAT_PREDICATE) | set(INT_UNARY) \
    | set(INT_BINARY) | {"likely", "fabs", "abs"}


_INT_DIVISIONS = (E.Div, E.Mod, E.FloorDiv, E.FloorMod)


class _CannotVectorize(Exception):
    pass


def _lanes(e: E.PrimExpr) -> int:
    return dt.lanes_of(e.dtype)


def _bcast(e: E.PrimExpr, lanes: int) -> E.PrimExpr:
    if _lanes(e) == lanes:
        return e
    if _lanes(e) != 1:
        raise _CannotVectorize(f"lane mismatch {e.dtype} vs {lanes}")
    return E.Broadcast(e, lanes)


def _has_load(e: Any) -> bool:
    found = False

    def f(n: Any) -> None:
        nonlocal found
        if isinstance(n, E.BufferLoad) or (isinstance(n, E.Call) and n.op not in _ELEMENTWISE):
            found = True

    post_order_visit(e, f)
    return found


class _Vectorizer(Mutator):
    """Rewrites one loop body for ``lanes`` lanes; raises _CannotVectorize."""

    def __init__(self, var: E.Var, base: E.PrimExpr, lanes: int, ana: Any):
        self.lanes = lanes
        self.ana = ana
        self.vmap: dict[int, E.PrimExpr] = {id(var): E.Ramp(base, E.const(1, base.dtype), lanes)}
        self.accesses: dict[int, list[E.PrimExpr]] = {}
        self.written: dict[int, str] = {}
        self.pred: E.PrimExpr | None = None  # lanes that are active (inside a vector branch)

    def _under(self, cond: E.PrimExpr, fn: Any, node: Any) -> Any:
        """Visit ``node`` with only the lanes where ``cond`` holds active."""
        saved = self.pred
        self.pred = cond if saved is None else E.And(saved, cond)
        try:
            return fn(node)
        finally:
            self.pred = saved

    def _no_pred(self, what: str) -> None:
        if self.pred is not None:
            raise _CannotVectorize(f"{what} under a vector condition")

    # ---- expressions --------------------------------------------------------------------------
    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        return self.vmap.get(id(v), v)

    def visit_IntImm(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    visit_FloatImm = visit_IntImm
    visit_StringImm = visit_IntImm

    def visit_Ramp(self, e: E.PrimExpr) -> E.PrimExpr:
        raise _CannotVectorize("body already holds vector expressions")

    visit_Broadcast = visit_Ramp
    visit_Shuffle = visit_Ramp

    def visit_BinaryOp(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        if _lanes(a) == 1 and _lanes(b) == 1:
            return e if (a is e.a and b is e.b) else type(e)(a, b)
        # lane-invariant operands: compute once, broadcast the result
        sa = a.value if isinstance(a, E.Broadcast) else a if _lanes(a) == 1 else None
        sb = b.value if isinstance(b, E.Broadcast) else b if _lanes(b) == 1 else None
        if sa is not None and sb is not None:
            return E.Broadcast(type(e)(sa, sb), self.lanes)
        if isinstance(a, E.Ramp) and sb is not None:
            b = sb
        if isinstance(b, E.Ramp) and sa is not None:
            a = sa
        if isinstance(e, (E.Add, E.Sub, E.Mul)) and dt.is_int(dt.element_of(a.dtype)):
            r = _ramp_arith(type(e), a, b)
            if r is not None:
                return r
        if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(a, E.Ramp) \
                and isinstance(b, E.IntImm):
            r = self._ramp_divmod(type(e), a, b)
            if r is not None:
                return r
        if self.pred is not None and isinstance(e, _INT_DIVISIONS) and _lanes(b) > 1 \
                and dt.is_int(dt.element_of(b.dtype)):
            # masked-off lanes load 0: their divisor must not trap (SIGFPE); their results
            # are never stored
            one = E.Broadcast(E.const(1, dt.element_of(b.dtype)), self.lanes)
            b = E.Select(_bcast(self.pred, self.lanes), b, one)
        return type(e)(_bcast(a, self.lanes), _bcast(b, self.lanes))

    def _ramp_divmod(self, op: type, a: E.Ramp, b: E.IntImm) -> E.PrimExpr | None:
        """``ramp // c`` and ``ramp % c`` when no lane crosses a multiple of ``c`` (the base's
        residue modulo ``c`` is known and the ramp fits before the next multiple)."""
        c = b.value
        if c <= 0 or not isinstance(a.stride, E.IntImm) or a.stride.value < 0:
            return None
        ms = self.ana.modular_set(a.base)
        # base = coeff * k + r: its residue mod c is r mod g + a multiple of g (g = gcd), so
        # the largest possible residue is c - g + r mod g
        g = math.gcd(ms.coeff, c) if ms.coeff else c
        if ms.base % g + (a.lanes - 1) * a.stride.value >= g:
            return None
        if op is E.FloorDiv:
            return E.Broadcast(E.FloorDiv(a.base, b), a.lanes)
        return E.Ramp(E.FloorMod(a.base, b), a.stride, a.lanes)

    def visit_Not(self, e: E.Not) -> E.PrimExpr:
        a = self.visit(e.a)
        return e if a is e.a else E.Not(a)

    def visit_Cast(self, e: E.Cast) -> E.PrimExpr:
        v = self.visit(e.value)
        if v is e.value:
            return e
        return E.Cast(dt.with_lanes(e.dtype, _lanes(v)), v)

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        c, t, f = self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value)
        if all(_lanes(x) == 1 for x in (c, t, f)):
            return e if (c is e.condition and t is e.true_value and f is e.false_value) \
                else E.Select(c, t, f)
        return E.Select(_bcast(c, self.lanes), _bcast(t, self.lanes), _bcast(f, self.lanes))

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        if e.op == "if_then_else":
            c = self.visit(e.args[0])
            if _lanes(c) == 1:
                t, f = self.visit(e.args[1]), self.visit(e.args[2])
                if _lanes(t) == 1 and _lanes(f) == 1:
                    return E.Call(e.dtype, e.op, [c, t, f])
                vt = _bcast(t, self.lanes)
                return E.Call(vt.dtype, e.op, [c, vt, _bcast(f, self.lanes)])
            # both branches computed on all lanes; their loads are masked by the condition
            t = self._under(c, self.visit, e.args[1])
            f = self._under(E.Not(c), self.visit, e.args[2])
            return E.Select(c, _bcast(t, self.lanes), _bcast(f, self.lanes))
        if e.op not in _ELEMENTWISE:
            raise _CannotVectorize(f"call {e.op} has no vector form")
        args = [self.visit(a) for a in e.args]
        if e.op == "likely" and _lanes(args[0]) != 1:
            return args[0]  # a branch hint has no meaning per lane
        if all(_lanes(a) == 1 for a in args):
            return e if all(a is b for a, b in zip(args, e.args)) else E.Call(e.dtype, e.op, args)
        args = [_bcast(a, self.lanes) for a in args]
        return E.Call(dt.with_lanes(e.dtype, self.lanes), e.op, args)

    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        v = self.visit(e.value)
        if _lanes(v) != 1:
            nv = E.Var(e.var.name, v.dtype)
            self.vmap[id(e.var)] = nv
            return E.Let(nv, v, self.visit(e.body))
        return E.Let(e.var, v, self.visit(e.body))

    def _index(self, buf: Any, indices: tuple, write: bool) -> E.PrimExpr:
        if len(indices) != 1:
            raise _CannotVectorize("buffer not flattened")
        idx = self.visit(indices[0])
        if isinstance(idx, E.Broadcast):
            idx = idx.value  # the same element on every lane: a scalar access
        if _lanes(idx) != 1 and write:
            if not isinstance(idx, E.Ramp):
                raise _CannotVectorize(f"store at vector index {idx}, not a ramp")
            if not isinstance(idx.stride, E.IntImm):  # a constant product (1 * 2): folded
                idx = E.Ramp(idx.base, self.ana.simplify(idx.stride), idx.lanes)
            if not (isinstance(idx.stride, E.IntImm) and idx.stride.value != 0):
                raise _CannotVectorize("store with a zero or symbolic stride")
        self.accesses.setdefault(id(buf.data), []).append(idx)
        return idx

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        if e.predicate is not None:
            raise _CannotVectorize("predicated load")
        idx = self._index(e.buffer, e.indices, False)
        if self.pred is not None:
            if _lanes(idx) == 1:
                raise _CannotVectorize("scalar load under a vector condition")
            return E.BufferLoad(e.buffer, (idx,), self.pred)
        if idx is e.indices[0]:
            return e
        if _lanes(idx) != 1 and not isinstance(idx, E.Ramp):
            return self._gather(e.buffer, idx)
        return E.BufferLoad(e.buffer, (idx,))

    def _gather(self, buf: Any, idx: E.PrimExpr) -> E.PrimExpr:
        """A load at a vector index that is not a ramp: a window load + shuffle when the lanes'
        offsets from lane 0 are constants spanning at most ``MAX_WINDOW`` elements, else a
        gather."""
        found = self._lane_offsets(idx)
        if found is not None:
            base, offsets = found
            lo, hi = min(offsets), max(offsets)
            if lo == hi:
                return E.Broadcast(E.BufferLoad(buf, (self.ana.simplify(base + lo),)), self.lanes)
            width = hi - lo + 1
            if width <= MAX_WINDOW:
                start = self.ana.simplify(base + lo) if lo else base
                window = E.BufferLoad(buf, (E.Ramp(start, E.const(1, start.dtype), width),))
                return E.Shuffle([window], [E.const(o - lo, "int32") for o in offsets])
        return E.BufferLoad(buf, (idx,))

    def _lane_offsets(self, idx: E.PrimExpr) -> tuple[E.PrimExpr, list[int]] | None:
        """``(index at lane 0, [index(lane k) - index(lane 0) for each k])`` when every offset
        simplifies to a constant, else None."""
        base = _lane_expr(idx, 0)
        if base is None:
            return None
        base = self.ana.simplify(base)
        offsets = [0] * self.lanes
        # the last lane first: most non-constant patterns fail there, before 60 more proofs
        for k in [self.lanes - 1, *range(1, self.lanes - 1)]:
            d = self.ana.simplify(_lane_expr(idx, k) - base)
            if not isinstance(d, E.IntImm):
                return None
            offsets[k] = d.value
        return base, offsets

    # ---- statements ---------------------------------------------------------------------------
    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        if s.predicate is not None:
            raise _CannotVectorize("predicated store")
        idx = self._index(s.buffer, s.indices, True)
        val = self.visit(s.value)
        if _lanes(idx) == 1:
            if _lanes(val) != 1:
                raise _CannotVectorize("vector value stored to one address (reduction)")
            if _has_load(val):
                raise _CannotVectorize("loop-invariant store that reads memory")
            self._no_pred("scalar store")
        else:
            val = _bcast(val, self.lanes)
        self.written[id(s.buffer.data)] = s.buffer.name
        if self.pred is not None:
            return S.BufferStore(s.buffer, val, (idx,), self.pred)
        if idx is s.indices[0] and val is s.value:
            return s
        return S.BufferStore(s.buffer, val, (idx,))

    def _scalar(self, e: E.PrimExpr, what: str) -> E.PrimExpr:
        v = self.visit(e)
        if _lanes(v) != 1:
            raise _CannotVectorize(f"{what} depends on the vectorized variable")
        return v

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        c = self.visit(s.condition)
        if _lanes(c) == 1:
            t = self.visit(s.then_case)
            f = self.visit(s.else_case) if s.else_case is not None else None
            return S.IfThenElse(c, t, f)
        # a vector condition: both branches become predicated stores. The condition is
        # re-evaluated by each store, so it must not read memory (the stores could change it).
        if _has_load(c):
            raise _CannotVectorize("vector if condition reads memory")
        t = self._under(c, self.visit, s.then_case)
        if s.else_case is None:
            return t
        return S.seq(t, self._under(E.Not(c), self.visit, s.else_case))

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        self._no_pred("let")
        v = self.visit(s.value)
        if isinstance(v, (E.Ramp, E.Broadcast)) and not reads_memory(v):
            self.vmap[id(s.var)] = v  # keep index arithmetic visible (ramps stay ramps)
            return self.visit(s.body)
        if _lanes(v) != 1:
            nv = E.Var(s.var.name, v.dtype)
            self.vmap[id(s.var)] = nv
            return S.LetStmt(nv, v, self.visit(s.body))
        return S.LetStmt(s.var, v, self.visit(s.body))

    def visit_For(self, f: S.For) -> S.Stmt:
        self._no_pred("inner loop")
        if f.kind not in (S.ForKind.SERIAL, S.ForKind.UNROLLED):
            raise _CannotVectorize(f"inner {f.kind.name} loop")
        mn = self._scalar(f.min, "inner loop bound")
        ext = self._scalar(f.extent, "inner loop bound")
        return f.replace(min=mn, extent=ext, body=self.visit(f.body))

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        self._no_pred("attribute")
        v = self._scalar(s.value, "attribute value")
        return S.AttrStmt(s.node, s.attr_key, v, self.visit(s.body))

    def visit_AssertStmt(self, s: S.AssertStmt) -> S.Stmt:
        self._no_pred("assert")
        c = self._scalar(s.condition, "assert condition")
        return S.AssertStmt(c, s.message, self.visit(s.body))

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        if isinstance(s.value, E.IntImm):
            return s
        raise _CannotVectorize("statement with side effects (call)")

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        raise _CannotVectorize("allocation inside a vectorized loop")

    def visit_Prefetch(self, s: S.Stmt) -> S.Stmt:
        return S.no_op()

    def check_dependences(self) -> None:
        for data_id, name in self.written.items():
            idxs = self.accesses.get(data_id, [])
            first = idxs[0]
            for other in idxs[1:]:
                if not structural_equal(first, other):
                    raise _CannotVectorize(f"buffer {name} is written and accessed at "
                                           "different indices")


def _lane_expr(e: E.PrimExpr, k: int) -> E.PrimExpr | None:
    """Lane ``k`` of the pure vector expression ``e`` as a scalar expression; None where a lane
    cannot be named without evaluating (memory reads, calls, vector variables)."""
    if _lanes(e) == 1:
        return e
    if isinstance(e, E.Ramp):
        return e.base + e.stride * k if k else e.base
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.BinaryOp):
        a, b = _lane_expr(e.a, k), _lane_expr(e.b, k)
        return None if a is None or b is None else type(e)(a, b)
    if isinstance(e, E.Cast):
        v = _lane_expr(e.value, k)
        return None if v is None else E.Cast(dt.element_of(e.dtype), v)
    if isinstance(e, E.Select):
        c, t, f = (_lane_expr(x, k) for x in (e.condition, e.true_value, e.false_value))
        return None if c is None or t is None or f is None else E.Select(c, t, f)
    if isinstance(e, E.Not):
        v = _lane_expr(e.a, k)
        return None if v is None else E.Not(v)
    return None


def _ramp_arith(op: type, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
    """Keep ``ramp op scalar`` (and ramp +- ramp) a ramp for integer + - *."""
    sa, sb = _lanes(a) == 1, _lanes(b) == 1
    if op is E.Add:
        if isinstance(a, E.Ramp) and sb:
            return E.Ramp(a.base + b, a.stride, a.lanes)
        if sa and isinstance(b, E.Ramp):
            return E.Ramp(a + b.base, b.stride, b.lanes)
        if isinstance(a, E.Ramp) and isinstance(b, E.Ramp):
            return E.Ramp(a.base + b.base, a.stride + b.stride, a.lanes)
    elif op is E.Sub:
        if isinstance(a, E.Ramp) and sb:
            return E.Ramp(a.base - b, a.stride, a.lanes)
        if sa and isinstance(b, E.Ramp):
            return E.Ramp(a - b.base, E.const(0, b.stride.dtype) - b.stride, b.lanes)
        if isinstance(a, E.Ramp) and isinstance(b, E.Ramp):
            return E.Ramp(a.base - b.base, a.stride - b.stride, a.lanes)
    elif op is E.Mul:
        if isinstance(a, E.Ramp) and sb:
            return E.Ramp(a.base * b, a.stride * b, a.lanes)
        if sa and isinstance(b, E.Ramp):
            return E.Ramp(a * b.base, a * b.stride, b.lanes)
    return None


def _vectorize(f: S.For, ana: Any) -> S.Stmt:
    """The vector form of one VECTORIZED loop (whose inner loops are already processed)."""
    if not isinstance(f.extent, E.IntImm):
        return f.replace(kind=S.ForKind.SERIAL)
    lanes = f.extent.value
    if lanes <= 0:
        return S.no_op()
    if lanes == 1:
        return fresh_copy(f.body, {f.loop_var: f.min})
    if lanes > MAX_LANES:
        return _vectorize_chunked(f, lanes, ana)
    vec = _Vectorizer(f.loop_var, f.min, lanes, ana)
    try:
        body = vec.visit(f.body)
        vec.check_dependences()
    except _CannotVectorize:
        return f.replace(kind=S.ForKind.SERIAL)
    return _simplify_vector(body, ana)


def _vectorize_chunked(f: S.For, n: int, ana: Any) -> S.Stmt:
    """Loop ``f`` of constant extent ``n`` > MAX_LANES as vector chunks of MAX_LANES lanes."""
    chunks, rest = divmod(n, MAX_LANES)
    xo = E.Var(f.loop_var.name + ".outer", f.loop_var.dtype)
    inner_var = E.Var(f.loop_var.name, f.loop_var.dtype)
    inner = f.replace(loop_var=inner_var, min=f.min + xo * MAX_LANES,
                      extent=E.const(MAX_LANES, f.extent.dtype),
                      body=fresh_copy(f.body, {f.loop_var: inner_var}))
    parts: list[S.Stmt] = [S.For(xo, 0, chunks, S.ForKind.SERIAL, _vectorize(inner, ana))]
    if rest:
        tail = f.replace(min=f.min + chunks * MAX_LANES, extent=E.const(rest, f.extent.dtype))
        parts.append(_vectorize(tail, ana))
    return S.seq(*parts)


def _simplify_vector(body: S.Stmt, ana: Any) -> S.Stmt:
    """Fold the bases and strides of the ramps just built (cheap, local)."""

    class _R(Mutator):
        def visit_Ramp(self, e: E.Ramp) -> E.PrimExpr:
            return E.Ramp(ana.simplify(e.base), ana.simplify(e.stride), e.lanes)

    return _R().visit(body)


class _LoopVectorizer(Mutator):
    def __init__(self, func: PrimFunc) -> None:
        self.ana = make_analyzer(func)

    def visit_For(self, f: S.For) -> S.Stmt:
        # the loop's range helps prove a gather's lane offsets constant; scoped: what it
        # implies (e.g. a symbolic extent >= 1) holds only inside the loop, not after it
        with self.ana.constraint_scope(E.const(True)):
            self.ana.bind(f.loop_var, E.Range.from_min_extent(f.min, f.extent))
            body = self.visit(f.body)
            if body is not f.body:
                f = f.replace(body=body)
            if f.kind == S.ForKind.VECTORIZED:
                return _vectorize(f, self.ana)
        return f


def vectorize_loop_func(func: PrimFunc) -> PrimFunc:
    """Lower every VECTORIZED loop of ``func`` to vector IR or a serial loop."""
    body = _LoopVectorizer(func).visit(func.body)
    return func if body is func.body else func.with_body(body)


def VectorizeLoop() -> PrimFuncPass:
    """``tvm.tir.transform.VectorizeLoop()``: turn VECTORIZED loops into vector IR, as a pass
    (the pass form of :func:`vectorize_loop_func`)."""
    return PrimFuncPass.from_func(vectorize_loop_func, "VectorizeLoop")
