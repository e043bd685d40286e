"""Modular sets: an integer expression takes only values ``coeff * k + base`` (k any integer).

``coeff == 0`` means the constant ``base``; ``coeff == 1, base == 0`` means nothing is known.
Used to prove alignment (e.g. that a vector load's index is a multiple of the lane count).
"""

from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING

from ..ir import dtype as dt
from ..ir.functor import CHAIN_DEPTH, memo_post_order
from ..tir import expr as E

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

__all__ = ["ModularSet", "ModularSetAnalyzer"]


class ModularSet:
    """The set ``{coeff * k + base}``; ``base`` is normalised into ``[0, coeff)`` when coeff > 0."""

    __slots__ = ("coeff", "base")

    def __init__(self, coeff: int, base: int):
        coeff = abs(int(coeff))
        base = int(base)
        if coeff:
            base %= coeff
        self.coeff = coeff
        self.base = base

    @classmethod
    def everything(cls) -> ModularSet:
        return cls(1, 0)

    def is_everything(self) -> bool:
        return self.coeff == 1

    def __repr__(self) -> str:
        return f"ModularSet(coeff={self.coeff}, base={self.base})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ModularSet):
            return (self.coeff, self.base) == (other.coeff, other.base)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.coeff, self.base))


def union(a: ModularSet, b: ModularSet) -> ModularSet:
    """Smallest modular set containing both."""
    c = gcd(gcd(a.coeff, b.coeff), abs(a.base - b.base))
    return ModularSet(c, a.base)


def intersect_mod(a: ModularSet, b: ModularSet) -> ModularSet:
    """A modular set contained in both when one refines the other (else the finer of the two)."""
    if a.coeff == 0:
        return a
    if b.coeff == 0:
        return b
    if a.coeff % b.coeff == 0 and a.base % b.coeff == b.base:
        return a
    if b.coeff % a.coeff == 0 and b.base % a.coeff == a.base:
        return b
    # general case (CRT) is rare for index math; keep the one with the larger modulus
    return a if a.coeff >= b.coeff else b


#: the nodes whose modular set is a function of their operands' only: chains of them (an
#: unrolled reduction's index) are analysed children first, with an explicit stack
_CHAIN_KINDS = frozenset({E.Add, E.Sub, E.Mul, E.FloorDiv, E.Div, E.FloorMod, E.Mod, E.Min,
                          E.Max})


def _chain_children(e: E.PrimExpr) -> list[E.PrimExpr]:
    return [c for c in (e.a, e.b) if type(c) in _CHAIN_KINDS]  # type: ignore[attr-defined]


class ModularSetAnalyzer:
    """Computes modular sets, using the owning Analyzer's variable facts; memoized like the
    bound analyzer, and like it shallow at any depth: past ``CHAIN_DEPTH`` nested calls, the
    chain below is analysed children first into the cache (``memo_post_order``)."""

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer
        self.cache: dict[int, tuple[E.PrimExpr, ModularSet]] = {}
        self._depth = 0

    def modular(self, e: E.PrimExpr) -> ModularSet:
        hit = self.cache.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        depth = self._depth
        if depth >= CHAIN_DEPTH and type(e) in _CHAIN_KINDS:
            self._depth = 0
            memo_post_order(e, _chain_children, self.modular, self.cache)
        self._depth = depth + 1  # no try/finally: after an exception it is only too high
        m = self._compute(e)
        self._depth = depth
        if len(self.cache) > 200_000:
            self.cache.clear()
        self.cache[id(e)] = (e, m)
        return m

    def _compute(self, e: E.PrimExpr) -> ModularSet:
        if isinstance(e, E.IntImm):
            return ModularSet(0, e.value)
        if not dt.is_integer(e.dtype) or dt.lanes_of(e.dtype) != 1:
            return ModularSet.everything()
        if isinstance(e, E.Var):
            return self.analyzer._var_modular(e)
        if isinstance(e, (E.Add, E.Sub)):
            a, b = self.modular(e.a), self.modular(e.b)
            base = a.base + b.base if isinstance(e, E.Add) else a.base - b.base
            return ModularSet(gcd(a.coeff, b.coeff), base)
        if isinstance(e, E.Mul):
            a, b = self.modular(e.a), self.modular(e.b)
            c = gcd(gcd(a.coeff * b.coeff, a.coeff * b.base), b.coeff * a.base)
            return ModularSet(c, a.base * b.base)
        if isinstance(e, (E.FloorDiv, E.Div)):
            a = self.modular(e.a)
            if isinstance(e.b, E.IntImm) and e.b.value > 0:
                c = e.b.value
                if isinstance(e, E.Div) and self.analyzer._bound(e.a)[0] < 0:
                    return ModularSet.everything()
                if a.coeff % c == 0:
                    return ModularSet(a.coeff // c, a.base // c)
            return ModularSet.everything()
        if isinstance(e, (E.FloorMod, E.Mod)):
            a = self.modular(e.a)
            if isinstance(e.b, E.IntImm) and e.b.value > 0:
                c = e.b.value
                if isinstance(e, E.Mod) and self.analyzer._bound(e.a)[0] < 0:
                    return ModularSet.everything()
                if a.coeff % c == 0:
                    return ModularSet(0, a.base % c)
                return ModularSet(gcd(a.coeff, c), a.base)
            return ModularSet.everything()
        if isinstance(e, (E.Min, E.Max)):
            return union(self.modular(e.a), self.modular(e.b))
        if isinstance(e, E.Select):
            return union(self.modular(e.true_value), self.modular(e.false_value))
        if isinstance(e, E.Call) and e.op == "shift_left" and isinstance(e.args[1], E.IntImm):
            k = e.args[1].value
            if 0 <= k < dt.bits_of(e.dtype) - 1:  # x << k == x * 2**k (no overflow assumed)
                a = self.modular(e.args[0])
                return ModularSet(a.coeff << k, a.base << k)
        if isinstance(e, E.Call) and e.op == "if_then_else":
            return union(self.modular(e.args[1]), self.modular(e.args[2]))
        if isinstance(e, E.Let):
            with self.analyzer._let_scope(e.var, e.value):
                return self.analyzer.modular_set(e.body)  # the scoped state's cache
        if isinstance(e, E.Cast) and dt.is_integer(e.value.dtype):
            lo, hi = self.analyzer._bound(e.value)
            from .const_int_bound import dtype_bound

            tlo, thi = dtype_bound(e.dtype)
            if tlo <= lo and hi <= thi:
                return self.modular(e.value)
        return ModularSet.everything()
