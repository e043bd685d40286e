"""Constant integer bounds: for an integer expression, ``[min_value, max_value]`` such that every
value it takes (under the analyzer's variable bindings and constraints) lies inside.

Internally bounds are Python ints with ``math.inf`` for unbounded ends; the public
:class:`ConstIntBound` reports unbounded ends as the sentinels ``POS_INF`` / ``NEG_INF``.
Bounds assume index arithmetic does not overflow (as TVM does); the result is clipped to the
dtype's range.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..ir import dtype as dt
from ..ir.functor import CHAIN_DEPTH, memo_post_order
from ..tir import expr as E
from .const_fold import dtype_int_range, trunc_div

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

__all__ = ["ConstIntBound", "BoundAnalyzer"]

INF = math.inf
Bound = tuple  # (lo, hi): int or +-inf


class ConstIntBound:
    """``min_value <= expr <= max_value``; unbounded ends are ``NEG_INF`` / ``POS_INF``."""

    POS_INF = (1 << 63) - 1
    NEG_INF = -POS_INF
    __slots__ = ("min_value", "max_value")

    def __init__(self, min_value: int, max_value: int):
        self.min_value = int(min_value)
        self.max_value = int(max_value)

    @classmethod
    def _from_internal(cls, b: Bound) -> ConstIntBound:
        lo, hi = b
        lo = cls.NEG_INF if lo == -INF or lo < cls.NEG_INF else lo
        hi = cls.POS_INF if hi == INF or hi > cls.POS_INF else hi
        return cls(lo, hi)

    def __repr__(self) -> str:
        def s(v: int) -> str:
            return "+inf" if v == self.POS_INF else "-inf" if v == self.NEG_INF else str(v)

        return f"ConstIntBound[{s(self.min_value)}, {s(self.max_value)}]"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ConstIntBound):
            return (self.min_value, self.max_value) == (other.min_value, other.max_value)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.min_value, self.max_value))


def _mul(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def _corners(f, a: Bound, b: Bound) -> Bound:
    vals = [f(x, y) for x in a for y in b]
    return min(vals), max(vals)


def _floordiv_val(x, y):
    if isinstance(x, float) or isinstance(y, float):  # an infinite end
        if not isinstance(y, float):
            return INF if (x > 0) == (y > 0) else -INF
        if not isinstance(x, float):  # finite / inf -> 0 from above or below
            return 0 if x == 0 or (x > 0) == (y > 0) else -1
        return INF if (x > 0) == (y > 0) else -INF
    return x // y


def _truncdiv_val(x, y):
    if isinstance(x, float) or isinstance(y, float):
        if not isinstance(x, float):
            return 0
        return INF if (x > 0) == (y > 0) else -INF
    return trunc_div(x, y)


def dtype_bound(dtype: str) -> Bound:
    d = dt.parse(dtype)
    if d.kind in ("int", "uint", "bool"):
        lo, hi = dtype_int_range(dtype)
        if d.bits >= 64:
            return (lo if d.kind == "uint" else -INF), INF
        return lo, hi
    return -INF, INF


def intersect(a: Bound, b: Bound) -> Bound:
    return max(a[0], b[0]), min(a[1], b[1])


#: the nodes whose bound is a function of their operands' bounds only: chains of them (an
#: unrolled reduction's index) are bounded children first, with an explicit stack
_CHAIN_KINDS = frozenset({E.Add, E.Sub, E.Mul, E.FloorDiv, E.Div, E.FloorMod, E.Mod, E.Min,
                          E.Max, E.Cast})


def _chain_children(e: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(e, E.Cast):
        return [e.value] if type(e.value) in _CHAIN_KINDS else []
    return [c for c in (e.a, e.b) if type(c) in _CHAIN_KINDS]  # type: ignore[attr-defined]


class BoundAnalyzer:
    """Computes constant bounds, using the owning Analyzer's variable facts; memoized per
    analyzer generation (the cache is cleared whenever a binding or constraint changes).
    Past ``CHAIN_DEPTH`` nested calls, the chain below is bounded children first into the
    cache (``memo_post_order``), so the recursion stays shallow at any depth."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer
        self.cache: dict[int, tuple[E.PrimExpr, Bound]] = {}
        self._depth = 0

    def bound(self, e: E.PrimExpr) -> Bound:
        hit = self.cache.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        depth = self._depth
        if depth >= CHAIN_DEPTH and type(e) in _CHAIN_KINDS:
            self._depth = 0
            memo_post_order(e, _chain_children, self.bound, self.cache)
        self._depth = depth + 1  # no try/finally: after an exception it is only too high
        b = self._compute(e)
        self._depth = depth
        b = intersect(b, dtype_bound(e.dtype))
        if b[0] > b[1]:  # contradictory facts: keep the dtype range rather than an empty set
            b = dtype_bound(e.dtype)
        if len(self.cache) > 200_000:
            self.cache.clear()
        self.cache[id(e)] = (e, b)
        return b

    # ------------------------------------------------------------------------------------------
    def _compute(self, e: E.PrimExpr) -> Bound:
        if isinstance(e, E.IntImm):
            return e.value, e.value
        if not dt.is_integer(e.dtype):
            return -INF, INF
        if isinstance(e, E.Var):
            return self.analyzer._var_bound(e)
        if isinstance(e, E.Add):
            a, b = self.bound(e.a), self.bound(e.b)
            return a[0] + b[0], a[1] + b[1]
        if isinstance(e, E.Sub):
            a, b = self.bound(e.a), self.bound(e.b)
            return a[0] - b[1], a[1] - b[0]
        if isinstance(e, E.Mul):
            return _corners(_mul, self.bound(e.a), self.bound(e.b))
        if isinstance(e, (E.FloorDiv, E.Div)):
            a, b = self.bound(e.a), self.bound(e.b)
            if b[0] <= 0 <= b[1]:
                if b[0] == 0 and b[1] > 0:  # divisor assumed nonzero: > 0
                    b = (1, b[1])
                elif b[1] == 0 and b[0] < 0:
                    b = (b[0], -1)
                else:
                    return -INF, INF
            f = _floordiv_val if isinstance(e, E.FloorDiv) else _truncdiv_val
            return _corners(f, a, b)
        if isinstance(e, E.FloorMod):
            a, b = self.bound(e.a), self.bound(e.b)
            if b[0] > 0:
                if a[0] >= 0 and a[1] < b[0]:
                    return a
                hi = b[1] - 1
                if a[0] >= 0:
                    hi = min(hi, a[1])
                return 0, hi
            if b[1] < 0:
                return b[0] + 1, 0
            return -INF, INF
        if isinstance(e, E.Mod):
            a, b = self.bound(e.a), self.bound(e.b)
            m = max(abs(b[0]), abs(b[1]))
            if b[0] <= 0 <= b[1] and b[0] == b[1]:
                return -INF, INF
            lim = m - 1
            if a[0] >= 0:
                return 0, min(a[1], lim)
            if a[1] <= 0:
                return max(a[0], -lim), 0
            return max(a[0], -lim), min(a[1], lim)
        if isinstance(e, E.Min):
            a, b = self.bound(e.a), self.bound(e.b)
            return min(a[0], b[0]), min(a[1], b[1])
        if isinstance(e, E.Max):
            a, b = self.bound(e.a), self.bound(e.b)
            return max(a[0], b[0]), max(a[1], b[1])
        if isinstance(e, E.Select):
            a, b = self.bound(e.true_value), self.bound(e.false_value)
            return min(a[0], b[0]), max(a[1], b[1])
        if isinstance(e, E.Cast):
            return self._cast(e)
        if isinstance(e, (E.CmpOp, E.And, E.Or, E.Not)):
            return 0, 1
        if isinstance(e, E.Let):
            with self.analyzer._let_scope(e.var, e.value):
                return self.analyzer._bound(e.body)  # the scoped state's cache
        if isinstance(e, E.Ramp):
            base, stride = self.bound(e.base), self.bound(e.stride)
            last = _corners(_mul, stride, (0, e.lanes - 1))
            return base[0] + last[0], base[1] + last[1]
        if isinstance(e, E.Broadcast):
            return self.bound(e.value)
        if isinstance(e, E.Call):
            return self._call(e)
        return dtype_bound(e.dtype)

    def _cast(self, e: E.Cast) -> Bound:
        target = dtype_bound(e.dtype)
        if dt.is_integer(e.value.dtype):
            a = self.bound(e.value)
            if target[0] <= a[0] and a[1] <= target[1]:
                return a
        return target

    def _call(self, e: E.Call) -> Bound:
        op = e.op
        if op == "if_then_else":
            a, b = self.bound(e.args[1]), self.bound(e.args[2])
            return min(a[0], b[0]), max(a[1], b[1])
        if op == "likely":
            return self.bound(e.args[0])
        if op == "popcount":
            return 0, dt.bits_of(e.dtype)
        if op == "bitwise_and":
            a, b = self.bound(e.args[0]), self.bound(e.args[1])
            if a[0] >= 0 and b[0] >= 0:
                return 0, min(a[1], b[1])
            if a[0] >= 0:
                return 0, a[1]
            if b[0] >= 0:
                return 0, b[1]
        if op == "shift_right":
            a, b = self.bound(e.args[0]), self.bound(e.args[1])
            if a[0] >= 0 and b[0] >= 0 and b[1] < 64:
                return a[0] >> b[1] if b[1] != INF else 0, a[1]
        if op == "shift_left":
            a, b = self.bound(e.args[0]), self.bound(e.args[1])
            if a[0] >= 0 and b[0] >= 0 and b[1] < 63 and a[1] != INF:
                return a[0] << b[0], a[1] << b[1]
        return dtype_bound(e.dtype)
