"""Symbolic integer intervals ``[min_value, max_value]`` (both ends inclusive) and ``eval_set``:
the interval an expression ranges over when some of its variables range over intervals.

Ends are PrimExprs, or the markers :data:`pos_inf` / :data:`neg_inf` for unbounded ends. Bound
inference uses this to compute the region of a tensor a loop nest touches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..ir import dtype as dt
from ..tir import expr as E

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

__all__ = ["IntervalSet", "pos_inf", "neg_inf", "eval_set"]

pos_inf = E.Var("pos_inf", "int64")
neg_inf = E.Var("neg_inf", "int64")


def _is_inf(x: Any) -> bool:
    return x is pos_inf or x is neg_inf


def _default_analyzer(analyzer: Analyzer | None) -> Analyzer:
    if analyzer is None:
        from .analyzer import Analyzer

        analyzer = Analyzer()
    return analyzer


class IntervalSet:
    """The integers ``min_value <= x <= max_value``; ends may be ``neg_inf`` / ``pos_inf``.
    The empty set is ``[pos_inf, neg_inf]``."""

    __slots__ = ("min_value", "max_value")

    def __init__(self, min_value: Any, max_value: Any):
        self.min_value = min_value if _is_inf(min_value) else E.convert(min_value)
        self.max_value = max_value if _is_inf(max_value) else E.convert(max_value)

    # ---- constructors ------------------------------------------------------------------------
    @classmethod
    def everything(cls) -> IntervalSet:
        return cls(neg_inf, pos_inf)

    @classmethod
    def empty(cls) -> IntervalSet:
        return cls(pos_inf, neg_inf)

    @classmethod
    def single_point(cls, value: Any) -> IntervalSet:
        value = E.convert(value)
        return cls(value, value)

    @classmethod
    def interval(cls, lo: Any, hi: Any) -> IntervalSet:
        return cls(lo, hi)

    @classmethod
    def from_range(cls, rng: E.Range, analyzer: Analyzer | None = None) -> IntervalSet:
        """``[min, min + extent - 1]``."""
        if not isinstance(rng, E.Range):
            raise TypeError(f"IntervalSet.from_range expects a Range, got {type(rng).__name__}")
        ana = _default_analyzer(analyzer)
        if isinstance(rng.extent, E.IntImm) and rng.extent.value == 1:
            return cls.single_point(rng.min)
        return cls(rng.min, ana.simplify(rng.min + rng.extent - 1))

    # ---- queries -----------------------------------------------------------------------------
    def has_lower_bound(self) -> bool:
        return self.min_value is not neg_inf and self.min_value is not pos_inf

    def has_upper_bound(self) -> bool:
        return self.max_value is not pos_inf and self.max_value is not neg_inf

    def is_everything(self) -> bool:
        return self.min_value is neg_inf and self.max_value is pos_inf

    def is_empty(self) -> bool:
        if self.min_value is pos_inf or self.max_value is neg_inf:
            return True
        if isinstance(self.min_value, E.IntImm) and isinstance(self.max_value, E.IntImm):
            return self.min_value.value > self.max_value.value
        return False

    def is_single_point(self) -> bool:
        if not (self.has_lower_bound() and self.has_upper_bound()):
            return False
        if self.min_value is self.max_value:
            return True
        from .sum_form import skey

        return skey(self.min_value) == skey(self.max_value)

    def to_range(self, analyzer: Analyzer | None = None) -> E.Range:
        """``Range(min, extent = max - min + 1)``; raises ValueError when unbounded."""
        if not (self.has_lower_bound() and self.has_upper_bound()):
            raise ValueError(f"cannot convert the unbounded interval {self} to a Range")
        if self.is_single_point():
            return E.Range.from_min_extent(self.min_value, E.const(1, self.min_value.dtype))
        ana = _default_analyzer(analyzer)
        lo, hi = E.binary_match(self.min_value, self.max_value)
        return E.Range.from_min_extent(lo, ana.simplify(hi - lo + 1))

    # ---- set algebra -------------------------------------------------------------------------
    def union(self, other: IntervalSet, analyzer: Analyzer | None = None) -> IntervalSet:
        if self.is_empty():
            return other
        if other.is_empty():
            return self
        ana = _default_analyzer(analyzer)
        return IntervalSet(
            _min(self.min_value, other.min_value, ana), _max(self.max_value, other.max_value, ana)
        )

    def intersect(self, other: IntervalSet, analyzer: Analyzer | None = None) -> IntervalSet:
        ana = _default_analyzer(analyzer)
        lo = _max(self.min_value, other.min_value, ana)
        hi = _min(self.max_value, other.max_value, ana)
        return IntervalSet(lo, hi)

    def __repr__(self) -> str:
        return f"IntervalSet[{self.min_value}, {self.max_value}]"


# ---- end-point arithmetic with infinities ---------------------------------------------------
def _min(a: Any, b: Any, ana: Analyzer) -> Any:
    if a is neg_inf or b is neg_inf:
        return neg_inf
    if a is pos_inf:
        return b
    if b is pos_inf:
        return a
    a, b = E.binary_match(a, b)
    return ana.simplify(E.Min(a, b))


def _max(a: Any, b: Any, ana: Analyzer) -> Any:
    if a is pos_inf or b is pos_inf:
        return pos_inf
    if a is neg_inf:
        return b
    if b is neg_inf:
        return a
    a, b = E.binary_match(a, b)
    return ana.simplify(E.Max(a, b))


def _add(a: Any, b: Any, ana: Analyzer) -> Any:
    if _is_inf(a) or _is_inf(b):
        if _is_inf(a) and _is_inf(b) and a is not b:
            return None
        return a if _is_inf(a) else b
    return ana.simplify(a + b)


def _neg(a: Any, ana: Analyzer) -> Any:
    if a is pos_inf:
        return neg_inf
    if a is neg_inf:
        return pos_inf
    return ana.simplify(E.const(0, a.dtype) - a)


def _sign(x: E.PrimExpr, ana: Analyzer) -> int | None:
    """+1 / -1 / 0 when the sign of x is provable, else None."""
    b = ana.const_int_bound(x) if dt.is_integer(x.dtype) else None
    if isinstance(x, E.FloatImm):
        return (x.value > 0) - (x.value < 0)
    if b is None:
        return None
    if b.min_value == b.max_value == 0:
        return 0
    if b.min_value >= 0:
        return 1
    if b.max_value <= 0:
        return -1
    return None


def _scale(s: IntervalSet, c: E.PrimExpr, ana: Analyzer) -> IntervalSet:
    """s * c for a point c of known sign."""
    sign = _sign(c, ana)
    if sign is None:
        return IntervalSet.everything()
    if sign == 0:
        return IntervalSet.single_point(E.const(0, c.dtype))

    def mul(x: Any) -> Any:
        if _is_inf(x):
            return x if sign > 0 else (neg_inf if x is pos_inf else pos_inf)
        return ana.simplify(x * c)

    lo, hi = mul(s.min_value), mul(s.max_value)
    return IntervalSet(lo, hi) if sign > 0 else IntervalSet(hi, lo)


def _points_const(s: IntervalSet) -> bool:
    return isinstance(s.min_value, E.IntImm) and isinstance(s.max_value, E.IntImm)


class _SetEvaluator:
    def __init__(self, dom: dict, ana: Analyzer):
        self.dom = dom
        self.ana = ana

    def uses_dom(self, e: E.PrimExpr) -> bool:
        from ..tir.functor import uses_var

        return uses_var(e, lambda v: v in self.dom)

    def point(self, e: E.PrimExpr) -> IntervalSet:
        return IntervalSet.single_point(e)

    def eval(self, e: E.PrimExpr) -> IntervalSet:
        ana = self.ana
        if isinstance(e, (E.IntImm, E.FloatImm)):
            return self.point(e)
        if isinstance(e, E.Var):
            s = self.dom.get(e)
            return self.point(e) if s is None else s
        if isinstance(e, (E.Add, E.Sub)):
            a, b = self.eval(e.a), self.eval(e.b)
            if a.is_empty() or b.is_empty():
                return IntervalSet.empty()
            if a.is_single_point() and b.is_single_point():
                return self.point(ana.simplify(type(e)(a.min_value, b.min_value)))
            if isinstance(e, E.Sub):
                b = IntervalSet(_neg(b.max_value, ana), _neg(b.min_value, ana))
            lo, hi = _add(a.min_value, b.min_value, ana), _add(a.max_value, b.max_value, ana)
            return IntervalSet(neg_inf if lo is None else lo, pos_inf if hi is None else hi)
        if isinstance(e, E.Mul):
            a, b = self.eval(e.a), self.eval(e.b)
            if a.is_single_point() and b.is_single_point():
                return self.point(ana.simplify(E.Mul(a.min_value, b.min_value)))
            if b.is_single_point():
                return _scale(a, b.min_value, ana)
            if a.is_single_point():
                return _scale(b, a.min_value, ana)
            if _points_const(a) and _points_const(b):
                vals = [
                    x.value * y.value
                    for x in (a.min_value, a.max_value)
                    for y in (b.min_value, b.max_value)
                ]
                return IntervalSet(E.const(min(vals), e.dtype), E.const(max(vals), e.dtype))
            return IntervalSet.everything()
        if isinstance(e, (E.FloorDiv, E.Div)):
            return self._div(e)
        if isinstance(e, (E.FloorMod, E.Mod)):
            return self._mod(e)
        if isinstance(e, (E.Min, E.Max)):
            a, b = self.eval(e.a), self.eval(e.b)
            pick = _min if isinstance(e, E.Min) else _max
            return IntervalSet(pick(a.min_value, b.min_value, ana), pick(a.max_value, b.max_value, ana))
        if isinstance(e, E.Select) or (isinstance(e, E.Call) and e.op == "if_then_else"):
            cond, t, f = (
                (e.condition, e.true_value, e.false_value) if isinstance(e, E.Select) else e.args
            )
            if not self.uses_dom(cond):
                c = ana.simplify(cond)
                if isinstance(c, E.IntImm):
                    return self.eval(t if c.value else f)
            return self.eval(t).union(self.eval(f), ana)
        if isinstance(e, E.Cast):
            return self._cast(e)
        if isinstance(e, E.Ramp):
            base, stride = self.eval(e.base), self.eval(e.stride)
            if stride.is_single_point():
                span = self.point(ana.simplify(stride.min_value * (e.lanes - 1)))
                sign = _sign(span.min_value, ana)
                if sign is not None:
                    zero = E.const(0, e.base.dtype)
                    lo_add = zero if sign >= 0 else span.min_value
                    hi_add = span.min_value if sign >= 0 else zero
                    lo, hi = _add(base.min_value, lo_add, ana), _add(base.max_value, hi_add, ana)
                    return IntervalSet(neg_inf if lo is None else lo, pos_inf if hi is None else hi)
            return IntervalSet.everything()
        if isinstance(e, E.Broadcast):
            return self.eval(e.value)
        if isinstance(e, E.Call) and e.op == "likely":
            return self.eval(e.args[0])
        if not self.uses_dom(e):
            return self.point(ana.simplify(e))
        if dt.is_bool(e.dtype):
            return IntervalSet(E.const(False), E.const(True))
        if dt.is_integer(e.dtype):
            cb = ana.const_int_bound(e)
            lo = neg_inf if cb.min_value == cb.NEG_INF else E.const(cb.min_value, e.dtype)
            hi = pos_inf if cb.max_value == cb.POS_INF else E.const(cb.max_value, e.dtype)
            return IntervalSet(lo, hi)
        return IntervalSet.everything()

    def _div(self, e: E.BinaryOp) -> IntervalSet:
        ana = self.ana
        a, b = self.eval(e.a), self.eval(e.b)
        if a.is_single_point() and b.is_single_point():
            return self.point(ana.simplify(type(e)(a.min_value, b.min_value)))
        if not b.is_single_point():
            return IntervalSet.everything()
        d = b.min_value
        sign = _sign(d, ana)
        if not sign:
            return IntervalSet.everything()

        def div(x: Any) -> Any:
            if _is_inf(x):
                return x if sign > 0 else (neg_inf if x is pos_inf else pos_inf)
            return ana.simplify(type(e)(x, d))

        lo, hi = div(a.min_value), div(a.max_value)  # floor/trunc division is monotone
        return IntervalSet(lo, hi) if sign > 0 else IntervalSet(hi, lo)

    def _mod(self, e: E.BinaryOp) -> IntervalSet:
        ana = self.ana
        a, b = self.eval(e.a), self.eval(e.b)
        if a.is_single_point() and b.is_single_point():
            return self.point(ana.simplify(type(e)(a.min_value, b.min_value)))
        if not b.is_single_point():
            return IntervalSet.everything()
        d = b.min_value
        sign = _sign(d, ana)
        if not sign:
            return IntervalSet.everything()
        one = E.const(1, d.dtype)
        zero = E.const(0, d.dtype)
        floor = isinstance(e, E.FloorMod)
        if sign > 0 and a.has_lower_bound() and a.has_upper_bound():
            nonneg = floor or ana.can_prove(a.min_value >= 0)
            if nonneg and ana.can_prove_equal(
                E.FloorDiv(a.min_value, d), E.FloorDiv(a.max_value, d)
            ):
                return IntervalSet(
                    ana.simplify(E.FloorMod(a.min_value, d)),
                    ana.simplify(E.FloorMod(a.max_value, d)),
                )
        if floor:
            if sign > 0:
                return IntervalSet(zero, ana.simplify(d - one))
            return IntervalSet(ana.simplify(d + one), zero)
        # truncmod: the sign follows the dividend
        absd = d if sign > 0 else ana.simplify(zero - d)
        lo = (
            zero
            if a.has_lower_bound() and ana.can_prove(a.min_value >= 0)
            else ana.simplify(one - absd)
        )
        return IntervalSet(lo, ana.simplify(absd - one))

    def _cast(self, e: E.Cast) -> IntervalSet:
        ana = self.ana
        a = self.eval(e.value)
        if a.is_single_point():
            return self.point(ana.simplify(E.Cast(e.dtype, a.min_value)))
        src, dst = dt.parse(e.value.dtype), dt.parse(e.dtype)
        widening = (src.kind == dst.kind and dst.bits >= src.bits) or (
            src.kind in ("int", "uint") and dst.kind == "float"
        )
        if widening:
            lo = a.min_value if _is_inf(a.min_value) else ana.simplify(E.Cast(e.dtype, a.min_value))
            hi = a.max_value if _is_inf(a.max_value) else ana.simplify(E.Cast(e.dtype, a.max_value))
            return IntervalSet(lo, hi)
        return IntervalSet.everything()


def _to_set(v: Any, ana: Analyzer) -> IntervalSet:
    if isinstance(v, IntervalSet):
        return v
    if isinstance(v, E.Range):
        return IntervalSet.from_range(v, ana)
    if isinstance(v, E.IterVar) and v.dom is not None:
        return IntervalSet.from_range(v.dom, ana)
    if isinstance(v, E.PrimExpr):
        return IntervalSet.single_point(v)
    raise TypeError(f"domain values must be Range or IntervalSet, got {type(v).__name__}")


def eval_set(expr: Any, dom_map: dict, analyzer: Analyzer | None = None) -> IntervalSet:
    """The interval ``expr`` takes when each variable in ``dom_map`` (keys: Var or IterVar;
    values: Range or IntervalSet) ranges over its set."""
    ana = _default_analyzer(analyzer)
    dom: dict[E.Var, IntervalSet] = {}
    for k, v in (dom_map or {}).items():
        var = k.var if isinstance(k, E.IterVar) else k
        if not isinstance(var, E.Var):
            raise TypeError(f"dom_map keys must be Var or IterVar, got {type(k).__name__}")
        dom[var] = _to_set(v, ana)
    expr = E.convert(expr)
    if isinstance(expr, E.Range):
        raise TypeError("eval_set expects an expression; use IntervalSet.from_range for a Range")
    return _SetEvaluator(dom, ana).eval(expr)
