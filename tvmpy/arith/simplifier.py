"""The simplifier: a bottom-up rewrite of expressions using the Analyzer's facts.

Integer index arithmetic (signed 32/64-bit scalars, assumed not to overflow, as in TVM) is put
in the canonical sum form of :mod:`.sum_form`; floordiv/floormod by positive constants are
simplified by splitting the dividend into a multiple of (a divisor of) the divisor plus a
residual whose bounds are known; min/max/comparisons/select are decided by proofs on
differences (constant bounds, then the constraint facts). Other integer dtypes (int8/16,
unsigned, bool) only get constant folding with wraparound and exact identities. Floating point is
only folded when all operands are constants: it is never reassociated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from ..ir import dtype as dt
from ..ir.functor import CHAIN_DEPTH
from ..tir import expr as E
from ..tir.functor import Mutator
from . import simplify_memo
from .const_fold import fold_binary, fold_cast, wrap_int
from .divmod_rules import DivModRules
from .sum_form import Sum, fold_sum, merge_splits, mul_sums, okey, remember_sum, skey, to_sum
from .vector_splits import fold_vector_splits

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

__all__ = ["Simplifier"]

_TRUE = E.IntImm("bool", 1)
_FALSE = E.IntImm("bool", 0)


def _bool(v: bool, lanes: int = 1) -> E.PrimExpr:
    c = E.IntImm("bool", 1 if v else 0)
    return c if lanes == 1 else E.Broadcast(c, lanes)


def _is_index(dtype: str) -> bool:
    d = dt.parse(dtype)
    return d.kind == "int" and d.bits >= 32 and d.lanes == 1


def _is_int_const(e: E.PrimExpr, v: int | None = None) -> TypeGuard[E.IntImm]:
    return isinstance(e, E.IntImm) and (v is None or e.value == v)


class Simplifier(DivModRules, Mutator):
    """Expression simplifier bound to one Analyzer (whose facts it uses)."""

    def __init__(self, analyzer: Analyzer):
        self.an = analyzer
        self._memo_depth = 0  # > 0 inside the computation of a memoised expression
        self._index_depth = 0  # > 0 inside that of a memoised scalar integer expression


    # ---- entry with memo ---------------------------------------------------------------------
    def visit(self, node):
        if not isinstance(node, E.PrimExpr):
            return super().visit(node)
        cache = self.an._st.simplify_cache
        hit = cache.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        kind = simplify_memo.candidate(node)
        if (kind == 2 and self._index_depth == 0) or (kind == 1 and self._memo_depth == 0):
            out = self._memo_visit(node, kind == 2)
        else:
            out = super().visit(node)
        cache = self.an._st.simplify_cache  # the state may have been replaced meanwhile
        if len(cache) > 200_000:
            cache.clear()
        cache[id(node)] = (node, out)
        if out is not node:  # results are (almost always) fixpoints: do not redo them
            cache[id(out)] = (out, out)
        return out

    def _memo_visit(self, node: E.PrimExpr, index: bool) -> E.PrimExpr:
        """``node`` simplified, through the process-wide memo (see :mod:`.simplify_memo`):
        looked up for the outermost expression and, within one that is not an index
        expression, for the outermost index expressions."""
        k = simplify_memo.lookup_key(node, self.an._st)
        if k is None:
            return super().visit(node)
        key, vs = k
        out = simplify_memo.get(key, vs)
        if out is not None:
            return out
        self._memo_depth += 1
        self._index_depth += index
        try:
            out = super().visit(node)
        finally:
            self._memo_depth -= 1
            self._index_depth -= index
        simplify_memo.put(key, vs, out)
        return out

    # ---- helpers -----------------------------------------------------------------------------
    def _canon(self, s: Sum) -> E.PrimExpr:
        """A Sum back to an expression, after merging div/mod splits."""
        for _ in range(4):
            if not merge_splits(s, lambda e: to_sum(self.visit(e))):
                break
        out = s.to_expr()
        if not isinstance(out, E.IntImm):
            remember_sum(out, s)
        return out

    def _sum(self, e: E.PrimExpr) -> Sum:
        return to_sum(e)

    def prove_nonpos(self, s: Sum) -> bool:
        return self.an._prove_nonpos(s)

    def prove_lt(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        """a < b for index expressions."""
        d = self._sum(a).iadd(self._sum(b), -1)
        d.const += 1
        return self.prove_nonpos(d)

    def prove_le(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        return self.prove_nonpos(self._sum(a).iadd(self._sum(b), -1))

    def bound(self, e: E.PrimExpr) -> tuple:
        return self.an._bound(e)

    # ---- leaves ------------------------------------------------------------------------------
    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        val = self.an._st.var_value.get(v)
        if val is not None:
            return val
        if dt.is_integer(v.dtype) and dt.lanes_of(v.dtype) == 1:
            lo, hi = self.bound(v)
            if lo == hi:  # pinned by a constraint (x == 5) or a range of extent 1
                return E.IntImm(v.dtype, int(lo))
        return v

    def visit_IntImm(self, e: E.IntImm) -> E.PrimExpr:
        return e

    visit_FloatImm = visit_IntImm
    visit_StringImm = visit_IntImm

    # ---- arithmetic --------------------------------------------------------------------------
    def _children(self, e: E.BinaryOp) -> tuple[E.PrimExpr, E.PrimExpr]:
        a, b = self.visit(e.a), self.visit(e.b)
        if a.dtype != b.dtype:  # a child simplified to another dtype: keep the original
            return e.a, e.b
        return a, b

    def _rebuild(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        if a is e.a and b is e.b:
            return e
        return type(e)(a, b)

    def visit_Add(self, e: E.Add) -> E.PrimExpr:
        return self._arith(e)

    visit_Sub = visit_Add
    visit_Mul = visit_Add

    def _index_sum(self, e: E.PrimExpr, depth: int = 0) -> Sum:
        """The canonical Sum of an index expression. A chain of + - * is read in one go (no
        intermediate expressions are built; past ``CHAIN_DEPTH`` nested calls, with an explicit
        stack); other nodes are simplified and read as atoms. Each node's Sum is memoised."""
        if not isinstance(e, (E.Add, E.Sub, E.Mul)):
            return to_sum(self.visit(e))
        memo = self.an._st.sum_memo
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1].copy()
        if depth >= CHAIN_DEPTH:
            return fold_sum(e, self._sum_leaf, self._sum_product, self._sum_done)
        sa, sb = self._index_sum(e.a, depth + 1), self._index_sum(e.b, depth + 1)
        if isinstance(e, E.Add):
            s = sa.iadd(sb)
        elif isinstance(e, E.Sub):
            s = sa.iadd(sb, -1)
        else:
            s = self._sum_product(e, sa, sb)
        if len(memo) > 200_000:
            memo.clear()
        memo[id(e)] = (e, s.copy())
        return s

    def _sum_leaf(self, e: E.PrimExpr) -> Sum | None:
        """``_index_sum``'s explicit stack: the Sum of a node it does not enter, else None."""
        if not isinstance(e, (E.Add, E.Sub, E.Mul)):
            return to_sum(self.visit(e))
        hit = self.an._st.sum_memo.get(id(e))
        return hit[1].copy() if hit is not None and hit[0] is e else None

    def _sum_product(self, e: E.Mul, sa: Sum, sb: Sum) -> Sum:
        s = mul_sums(sa, sb, 16)
        if s is None:  # too many terms to expand: one opaque product
            s = Sum.atom(E.Mul(self._canon(sa), self._canon(sb)))
        return s

    def _sum_done(self, e: E.PrimExpr, s: Sum) -> Sum:
        memo = self.an._st.sum_memo
        if len(memo) > 200_000:
            memo.clear()
        memo[id(e)] = (e, s.copy())
        return s

    def _arith(self, e: E.BinaryOp) -> E.PrimExpr:
        if _is_index(e.dtype):
            return self._canon(self._index_sum(e))
        a, b = self._children(e)
        c = fold_binary(type(e), a, b)
        if c is not None:
            return c
        if dt.lanes_of(e.dtype) > 1:
            v = self._vector_arith(e, a, b)
            if v is not None:
                return v
            if isinstance(e, (E.Add, E.Sub)) and dt.is_int(dt.element_of(e.dtype)):
                v = fold_vector_splits(self._rebuild(e, a, b), self.visit)
                if v is not None:
                    return v
        if dt.is_integer(e.dtype) and not dt.is_bool(e.dtype):
            # exact identities under wraparound
            if isinstance(e, E.Add):
                if _is_zero(b):
                    return a
                if _is_zero(a):
                    return b
            elif isinstance(e, E.Sub):
                if _is_zero(b):
                    return a
                if skey(a) == skey(b):
                    return _zero(e.dtype)
            elif isinstance(e, E.Mul):
                if _is_one(b):
                    return a
                if _is_one(a):
                    return b
                if _is_zero(a) or _is_zero(b):
                    return _zero(e.dtype)
        return self._rebuild(e, a, b)

    def _vector_arith(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
        cls = type(e)
        if isinstance(a, E.Broadcast) and isinstance(b, E.Broadcast):
            return E.Broadcast(self.visit(cls(a.value, b.value)), a.lanes)
        if not dt.is_integer(e.dtype):
            return None
        if cls in (E.Add, E.Sub):
            if isinstance(a, E.Ramp) and isinstance(b, E.Ramp):
                return self._ramp(
                    self.visit(cls(a.base, b.base)), self.visit(cls(a.stride, b.stride)), a.lanes
                )
            if isinstance(a, E.Ramp) and isinstance(b, E.Broadcast):
                return self._ramp(self.visit(cls(a.base, b.value)), a.stride, a.lanes)
            if isinstance(a, E.Broadcast) and isinstance(b, E.Ramp):
                stride = (
                    b.stride if cls is E.Add else self.visit(E.Sub(_zero(b.stride.dtype), b.stride))
                )
                return self._ramp(self.visit(cls(a.value, b.base)), stride, b.lanes)
        if cls is E.Mul:
            if isinstance(a, E.Broadcast) and isinstance(b, E.Ramp):
                a, b = b, a
            if isinstance(a, E.Ramp) and isinstance(b, E.Broadcast):
                return self._ramp(
                    self.visit(E.Mul(a.base, b.value)),
                    self.visit(E.Mul(a.stride, b.value)),
                    a.lanes,
                )
        return None

    def _ramp(self, base: E.PrimExpr, stride: E.PrimExpr, lanes: int) -> E.PrimExpr:
        if _is_zero(stride):
            return E.Broadcast(base, lanes)
        return E.Ramp(base, stride, lanes)

    # ---- min / max ---------------------------------------------------------------------------
    def visit_Min(self, e: E.Min) -> E.PrimExpr:
        return self._minmax(e)

    visit_Max = visit_Min

    def _minmax(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self._children(e)
        c = fold_binary(type(e), a, b)
        if c is not None:
            return c
        is_min = isinstance(e, E.Min)
        if dt.lanes_of(e.dtype) > 1:
            if isinstance(a, E.Broadcast) and isinstance(b, E.Broadcast):
                return E.Broadcast(self.visit(type(e)(a.value, b.value)), a.lanes)
            return self._rebuild(e, a, b)
        if not dt.is_integer(e.dtype):
            return self._rebuild(e, a, b)
        if skey(a) == skey(b):
            return a
        if not _is_index(e.dtype):
            lo_a, hi_a = self.bound(a)
            lo_b, hi_b = self.bound(b)
            if hi_a <= lo_b:
                return a if is_min else b
            if hi_b <= lo_a:
                return b if is_min else a
            return self._rebuild(e, a, b)
        if self.prove_le(a, b):
            return a if is_min else b
        if self.prove_le(b, a):
            return b if is_min else a
        # constant second, otherwise operands in printed-name order (stable output);
        # nested constants combine: min(min(x, c1), c2) -> min(x, min(c1, c2))
        if isinstance(a, E.IntImm) or (not isinstance(b, E.IntImm) and okey(a) > okey(b)):
            a, b = b, a
        if isinstance(b, E.IntImm) and type(a) is type(e) and isinstance(a.b, E.IntImm):
            nb = fold_binary(type(e), a.b, b)
            if nb is not None:
                return self.visit(type(e)(a.a, nb))
        # min(x // c, y // c) -> min(x, y) // c and min(x * c, y * c) -> min(x, y) * c (c > 0;
        # floor division and positive scaling are monotone)
        if (
            type(a) is type(b)
            and isinstance(a, (E.FloorDiv, E.Mul))
            and isinstance(b, (E.FloorDiv, E.Mul))
            and isinstance(a.b, E.IntImm)
            and isinstance(b.b, E.IntImm)
            and a.b.value == b.b.value
            and a.b.value > 0
        ):
            return self.visit(type(a)(type(e)(a.a, b.a), a.b))
        # min(x + c1, y + c1) -> min(x, y) + c1 style: common constant offset
        sa, sb = self._sum(a), self._sum(b)
        if sa.const and sa.const == sb.const and not sa.is_const() and not sb.is_const():
            k = sa.const
            sa.const = sb.const = 0
            inner = self.visit(type(e)(self._canon(sa), self._canon(sb)))
            return self._canon(self._sum(inner).iadd(Sum(e.dtype, k)))
        return self._rebuild(e, a, b)

    # ---- comparisons -------------------------------------------------------------------------
    def visit_CmpOp(self, e: E.CmpOp) -> E.PrimExpr:
        a, b = self._children(e)
        c = fold_binary(type(e), a, b)
        if c is not None:
            return c
        lanes = dt.lanes_of(e.dtype)
        if lanes > 1:
            if isinstance(a, E.Broadcast) and isinstance(b, E.Broadcast):
                return E.Broadcast(self.visit(type(e)(a.value, b.value)), lanes)
            v = self._vector_cmp(e, a, b)
            if v is not None:
                return _bool(v, lanes)
            return self._rebuild(e, a, b)
        if not dt.is_integer(a.dtype):
            return self._rebuild(e, a, b)
        if _is_index(a.dtype):
            v = self._decide_cmp(e, self._sum(a), self._sum(b))
            if v is None:
                v = self._decide_div_cmp(e, a, b)
            if v is not None:
                return _bool(v)
            if isinstance(e, (E.EQ, E.NE)) and (
                isinstance(a, E.IntImm) or (not isinstance(b, E.IntImm) and okey(a) > okey(b))
            ):
                return type(e)(b, a)  # symmetric: constant second, else name order
            if isinstance(a, E.IntImm) and not isinstance(b, E.IntImm):  # 0 < x -> x > 0
                flip = {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT, E.GE: E.LE}
                return flip[type(e)](b, a)
            return self._rebuild(e, a, b)
        # other integer dtypes: decide from constant bounds (no arithmetic on the operands)
        la, ha = self.bound(a)
        lb, hb = self.bound(b)
        v = _decide_by_bounds(type(e), la, ha, lb, hb)
        if v is None and skey(a) == skey(b):
            v = type(e) in (E.EQ, E.LE, E.GE)
        if v is not None:
            return _bool(v)
        return self._rebuild(e, a, b)

    def _vector_cmp(self, e: E.CmpOp, a: E.PrimExpr, b: E.PrimExpr) -> bool | None:
        """A comparison of ramps/broadcasts that has the same outcome on every lane."""
        lanes_a = self._lane_extremes(a)
        lanes_b = self._lane_extremes(b)
        if lanes_a is None or lanes_b is None or not _is_index(lanes_a[0].dtype):
            return None
        (amin, amax), (bmin, bmax) = lanes_a, lanes_b
        cls = type(e)
        flip: type[E.CmpOp]
        if cls in (E.LT, E.LE):
            if self._decide_cmp(cls(amax, bmin), self._sum(amax), self._sum(bmin)) is True:
                return True
            flip = E.GE if cls is E.LT else E.GT
            if self._decide_cmp(flip(amin, bmax), self._sum(amin), self._sum(bmax)) is True:
                return False
        elif cls in (E.GT, E.GE):
            if self._decide_cmp(cls(amin, bmax), self._sum(amin), self._sum(bmax)) is True:
                return True
            flip = E.LE if cls is E.GT else E.LT
            if self._decide_cmp(flip(amax, bmin), self._sum(amax), self._sum(bmin)) is True:
                return False
        return None

    def _lane_extremes(self, v: E.PrimExpr):
        """(smallest lane, largest lane) of a Broadcast or a Ramp with constant stride."""
        if isinstance(v, E.Broadcast):
            return v.value, v.value
        if isinstance(v, E.Ramp) and isinstance(v.stride, E.IntImm):
            last = self.visit(v.base + v.stride.value * (v.lanes - 1))
            return (v.base, last) if v.stride.value >= 0 else (last, v.base)
        return None

    def _decide_div_cmp(self, e: E.CmpOp, a: E.PrimExpr, b: E.PrimExpr) -> bool | None:
        """``floordiv(x, d) < y  <=>  x < y * d`` for ``d > 0`` (and the other comparisons alike):
        decides guards such as ``fused // m < n`` from ``fused < n * m``."""
        cls = type(e)
        if not isinstance(a, E.FloorDiv):
            if not isinstance(b, E.FloorDiv):
                return None
            a, b = b, a
            cls = {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT, E.GE: E.LE, E.EQ: E.EQ, E.NE: E.NE}[cls]
        if cls in (E.EQ, E.NE):
            return None
        x, d = a.a, a.b
        if self.bound(d)[0] < 0:
            return None  # d >= 0 where the division is defined means d >= 1
        # x//d < y <=> x < y*d ; x//d <= y <=> x < (y+1)*d ; > and >= are the negations
        if cls in (E.LT, E.GE):
            rhs = self._sum(b).mul(self._sum(d))
        else:
            rhs = self._sum(b).iadd(Sum(b.dtype, 1)).mul(self._sum(d))
        lt = self._decide_cmp(E.LT(x, x), self._sum(x), rhs)  # only the class and sums matter
        if lt is None and isinstance(x, E.FloorDiv):
            # nested divisions (a fused loop's outer index: fused // S // 4 < 1): the same rule
            # on the inner one, x // e < y * d
            rhs_e = self.visit(b * d if cls in (E.LT, E.GE) else (b + 1) * d)
            lt = self._decide_div_cmp(E.LT(x, rhs_e), x, rhs_e)
        if lt is None:
            return None
        return lt if cls in (E.LT, E.LE) else not lt

    def _decide_cmp(self, e: E.CmpOp, sa: Sum, sb: Sum) -> bool | None:
        d = sa.iadd(sb, -1)  # a - b
        if d.is_const():
            return _cmp_const(type(e), d.const)
        neg = d.scaled(-1)

        def lt0(x: Sum) -> bool:  # x < 0
            y = x.copy()
            y.const += 1
            return self.prove_nonpos(y)

        cls = type(e)
        if cls is E.LT:
            return True if lt0(d) else (False if self.prove_nonpos(neg) else None)
        if cls is E.LE:
            return True if self.prove_nonpos(d) else (False if lt0(neg) else None)
        if cls is E.GT:
            return True if lt0(neg) else (False if self.prove_nonpos(d) else None)
        if cls is E.GE:
            return True if self.prove_nonpos(neg) else (False if lt0(d) else None)
        # EQ / NE
        differ = lt0(d) or lt0(neg)
        if not differ:
            ms = self.an._st.modular.modular(d.to_expr())
            differ = ms.coeff != 0 and ms.base != 0
        if differ:
            return cls is E.NE
        if self.prove_nonpos(d) and self.prove_nonpos(neg):
            return cls is E.EQ
        return None

    # ---- logic -------------------------------------------------------------------------------
    def visit_And(self, e: E.And) -> E.PrimExpr:
        a, b = self._children(e)
        for x, y in ((a, b), (b, a)):
            if _is_int_const(x):
                if dt.lanes_of(e.dtype) == 1:
                    return y if x.value else _FALSE
        if skey(a) == skey(b):
            return a
        if dt.lanes_of(e.dtype) == 1:
            if self._implied(a, b) is False or self._implied(b, a) is False:
                return _FALSE
            if self._implied(a, b) is True:
                return a
            if self._implied(b, a) is True:
                return b
        return self._rebuild(e, a, b)

    def visit_Or(self, e: E.Or) -> E.PrimExpr:
        a, b = self._children(e)
        for x, y in ((a, b), (b, a)):
            if _is_int_const(x):
                if dt.lanes_of(e.dtype) == 1:
                    return _TRUE if x.value else y
        if skey(a) == skey(b):
            return a
        if dt.lanes_of(e.dtype) == 1:
            na, nb = _negate(a), _negate(b)
            if na is not None and self._implied(na, b) is True:
                return _TRUE  # not a -> b: a or b holds
            if na is not None and self._implied(na, b) is False:
                return a  # not a -> not b: b implies a
            if nb is not None and self._implied(nb, a) is False:
                return b
        return self._rebuild(e, a, b)

    def _implied(self, fact: E.PrimExpr, cond: E.PrimExpr) -> bool | None:
        """Under ``fact``, is ``cond`` provably True / False (None: unknown)? Only for index
        comparisons (cheap; avoids re-simplifying large conditions)."""
        if not (_is_index_cmp(fact) and _is_index_cmp(cond)):
            return None
        with self.an.constraint_scope(fact):
            v = self._decide_cmp(cond, self._sum(cond.a), self._sum(cond.b))
        return v

    def visit_Not(self, e: E.Not) -> E.PrimExpr:
        a = self.visit(e.a)
        if _is_int_const(a):
            return _bool(not a.value)
        if isinstance(a, E.Not):
            return a.a
        if dt.lanes_of(e.dtype) == 1:
            n = _negate(a)
            if n is not None:
                return self.visit(n)
        return e if a is e.a else E.Not(a)

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        cond = self.visit(e.condition)
        if isinstance(cond, E.Broadcast) and _is_int_const(cond.value):
            cond = cond.value  # the same choice in every lane (a vectorized constant condition)
        if _is_int_const(cond):
            return self.visit(e.true_value if cond.value else e.false_value)
        t, f = self.visit(e.true_value), self.visit(e.false_value)
        if skey(t) == skey(f):
            return t
        if t.dtype != f.dtype:
            t, f = e.true_value, e.false_value
        mm = self._select_minmax(cond, t, f)
        if mm is not None:
            return mm
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f)

    def _select_minmax(self, cond: E.PrimExpr, t: E.PrimExpr, f: E.PrimExpr) -> E.PrimExpr | None:
        """``select(a < b, a, b)`` -> ``min(a, b)`` and the like (integers only: with floats
        NaN makes select and min differ)."""
        if not isinstance(cond, (E.LT, E.LE, E.GT, E.GE)) or not _is_index(t.dtype):
            return None
        ka, kb, kt, kf = skey(cond.a), skey(cond.b), skey(t), skey(f)
        if (ka, kb) == (kt, kf):  # a < b ? a : b
            cls = E.Min if isinstance(cond, (E.LT, E.LE)) else E.Max
        elif (ka, kb) == (kf, kt):  # a < b ? b : a
            cls = E.Max if isinstance(cond, (E.LT, E.LE)) else E.Min
        else:
            return None
        return self.visit(cls(t, f))

    # ---- calls, casts, lets, loads -----------------------------------------------------------
    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        if e.op == "if_then_else" and len(e.args) == 3:
            cond = self.visit(e.args[0])
            if _is_int_const(cond):
                return self.visit(e.args[1] if cond.value else e.args[2])
            if _has_index_fact(cond) and dt.lanes_of(cond.dtype) == 1:
                # only the chosen branch is evaluated: each may assume its condition
                with self.an.constraint_scope(cond):
                    t = self.visit(e.args[1])
                with self.an.constraint_scope(E.Not(cond)):
                    f = self.visit(e.args[2])
            else:
                t, f = self.visit(e.args[1]), self.visit(e.args[2])
            if skey(t) == skey(f):
                return t
            if t.dtype != f.dtype:
                t, f = e.args[1], e.args[2]
            if cond is e.args[0] and t is e.args[1] and f is e.args[2]:
                return e
            return E.Call(e.dtype, e.op, [cond, t, f])
        if e.op == "likely" and len(e.args) == 1:
            cond = self.visit(e.args[0])
            if _is_int_const(cond) or (isinstance(cond, E.Broadcast) and _is_int_const(cond.value)):
                return cond
            return e if cond is e.args[0] else E.Call(e.dtype, "likely", [cond])
        args = [self.visit(a) for a in e.args]
        folded = _fold_call(e.op, e.dtype, args)
        if folded is not None:
            return folded
        if all(x is y for x, y in zip(args, e.args)):
            return e
        return E.Call(e.dtype, e.op, args)

    def visit_Cast(self, e: E.Cast) -> E.PrimExpr:
        v = self.visit(e.value)
        if v.dtype == e.dtype:
            return v
        c = fold_cast(e.dtype, v)
        if c is not None:
            return c
        if isinstance(v, E.Broadcast) and dt.lanes_of(e.dtype) > 1:
            return E.Broadcast(self.visit(E.Cast(dt.element_of(e.dtype), v.value)), v.lanes)
        if isinstance(v, E.Cast) and v.value.dtype == e.dtype and _is_widening(e.dtype, v.dtype):
            return v.value  # T(U(x)) == x when U holds every value of T
        return e if v is e.value else E.Cast(e.dtype, v)

    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        value = self.visit(e.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            from ..tir.functor import substitute

            return self.visit(substitute(e.body, {e.var: value}))
        with self.an._let_scope(e.var, value):
            body = self.visit(e.body)
        if value is e.value and body is e.body:
            return e
        return E.Let(e.var, value, body)

    def visit_Ramp(self, e: E.Ramp) -> E.PrimExpr:
        base, stride = self.visit(e.base), self.visit(e.stride)
        if base.dtype != stride.dtype:
            base, stride = e.base, e.stride
        if _is_zero(stride):
            return E.Broadcast(base, e.lanes)
        if base is e.base and stride is e.stride:
            return e
        return E.Ramp(base, stride, e.lanes)

    def visit_Broadcast(self, e: E.Broadcast) -> E.PrimExpr:
        v = self.visit(e.value)
        return e if v is e.value else E.Broadcast(v, e.lanes)


# ---- small helpers ---------------------------------------------------------------------------
def _zero(dtype: str) -> E.PrimExpr:
    return E.const(0, dtype)


def _is_zero(e: E.PrimExpr) -> bool:
    if isinstance(e, E.Broadcast):
        e = e.value
    return isinstance(e, E.IntImm) and e.value == 0


def _is_one(e: E.PrimExpr) -> bool:
    if isinstance(e, E.Broadcast):
        e = e.value
    return isinstance(e, (E.IntImm, E.FloatImm)) and e.value == 1


def _is_widening(src: str, dst: str) -> bool:
    """Every value of ``src`` is exactly representable in ``dst``."""
    a, b = dt.parse(src), dt.parse(dst)
    if a.lanes != b.lanes:
        return False
    if a.kind == "bool":
        return b.kind in ("int", "uint", "bool", "float")
    if a.kind == b.kind:
        return b.bits >= a.bits
    if a.kind == "uint" and b.kind == "int":
        return b.bits > a.bits
    if a.kind in ("int", "uint") and b.kind == "float":
        return {16: 11, 32: 24, 64: 53}[b.bits] >= a.bits
    return False


def _cmp_const(cls: type[E.CmpOp], d: int) -> bool:
    return {E.EQ: d == 0, E.NE: d != 0, E.LT: d < 0, E.LE: d <= 0, E.GT: d > 0, E.GE: d >= 0}[cls]


def _decide_by_bounds(cls: type, la, ha, lb, hb) -> bool | None:
    if cls is E.LT:
        return True if ha < lb else (False if la >= hb else None)
    if cls is E.LE:
        return True if ha <= lb else (False if la > hb else None)
    if cls is E.GT:
        return True if la > hb else (False if ha <= lb else None)
    if cls is E.GE:
        return True if la >= hb else (False if ha < lb else None)
    if cls is E.EQ:
        if ha < lb or hb < la:
            return False
        if la == ha == lb == hb:
            return True
        return None
    if cls is E.NE:
        if ha < lb or hb < la:
            return True
        if la == ha == lb == hb:
            return False
    return None


def _is_index_cmp(e: E.PrimExpr) -> TypeGuard[E.CmpOp]:
    return isinstance(e, E.CmpOp) and _is_index(e.a.dtype)


def _has_index_fact(c: E.PrimExpr) -> bool:
    """Does the condition (or its negation) give the analyzer a usable fact?"""
    if isinstance(c, (E.And, E.Or)):
        return _has_index_fact(c.a) or _has_index_fact(c.b)
    if isinstance(c, E.Not):
        return _has_index_fact(c.a)
    if isinstance(c, E.Call) and c.op == "likely":
        return _has_index_fact(c.args[0])
    return _is_index_cmp(c)


def _negate(e: E.PrimExpr) -> E.PrimExpr | None:
    """``not e`` without a Not node, for integer comparisons (floats: NaN breaks it)."""
    if isinstance(e, E.CmpOp) and dt.is_integer(e.a.dtype):
        flip = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.EQ: E.NE, E.NE: E.EQ}
        return flip[type(e)](e.a, e.b)
    if isinstance(e, E.Not):
        return e.a
    return None


def _fold_call(op: str, dtype: str, args: list) -> E.PrimExpr | None:
    """Fold integer intrinsics on constants (float math is left to the target's libm)."""
    if not args or not all(isinstance(a, E.IntImm) for a in args) or dt.lanes_of(dtype) != 1:
        return None
    if not dt.is_integer(dtype):
        return None
    v = [a.value for a in args]
    bits = dt.bits_of(dtype)
    if op == "bitwise_and":
        r = v[0] & v[1]
    elif op == "bitwise_or":
        r = v[0] | v[1]
    elif op == "bitwise_xor":
        r = v[0] ^ v[1]
    elif op == "bitwise_not":
        r = ~v[0]
    elif op == "shift_left":
        if not 0 <= v[1] < bits:
            return None
        r = v[0] << v[1]
    elif op == "shift_right":
        if not 0 <= v[1] < bits:
            return None
        x = v[0]
        if dt.is_uint(dtype):
            x &= (1 << bits) - 1
        r = x >> v[1]  # arithmetic for signed, logical for unsigned
    elif op == "popcount":
        r = bin(v[0] & ((1 << bits) - 1)).count("1")
    else:
        return None
    return E.IntImm(dtype, wrap_int(r, dtype))
