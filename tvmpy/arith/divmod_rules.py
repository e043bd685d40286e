"""Division and modulo rules of the simplifier (a mixin of :class:`.simplifier.Simplifier`).

For ``floordiv(s, c)`` / ``floormod(s, c)`` with a constant ``c > 0`` and ``s`` a canonical sum,
the dividend is split as ``s = g*q + r`` with ``g | c`` and the residual ``r`` provably within
one block ``[m*g, (m+1)*g)``; then ``floordiv(s, c) = floordiv(q + m, c/g)`` and
``floormod(s, c) = g*floormod(q + m, c/g) + r - m*g``. Otherwise exact multiples of ``c`` are
taken out. Truncating division is treated as floor division where the dividend is provably
non-negative, and only rewritten exactly elsewhere. Symbolic divisors (``fused // m``) use
``floordiv(d*q + r, d) = q + floordiv(r, d)``. Ramps divided by a broadcast constant become
ramps or broadcasts when no lane crosses a block boundary.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypeGuard

from ..ir import dtype as dt
from ..tir import expr as E
from .const_fold import fold_binary
from .sum_form import INF, Sum, skey, split_info, to_sum

if TYPE_CHECKING:
    from .analyzer import Analyzer

__all__ = ["DivModRules"]


def _is_index(dtype: str) -> bool:
    d = dt.parse(dtype)
    return d.kind == "int" and d.bits >= 32 and d.lanes == 1


def _is_int_const(e: E.PrimExpr) -> TypeGuard[E.IntImm]:
    return isinstance(e, E.IntImm)


def _zero(dtype: str) -> E.PrimExpr:
    return E.const(0, dtype)


def _is_one(e: E.PrimExpr) -> bool:
    if isinstance(e, E.Broadcast):
        e = e.value
    return isinstance(e, (E.IntImm, E.FloatImm)) and e.value == 1


def _exact_div(s: Sum, c: int) -> Sum:
    out = Sum(s.dtype, s.const // c)
    for coeff, atoms in s.items():
        out.add_mono(atoms, coeff // c)
    return out


class DivModRules:
    """Mixin of the Simplifier, which provides the members declared below."""

    if TYPE_CHECKING:
        an: Analyzer

        def visit(self, node: Any) -> Any: ...
        def _sum(self, e: E.PrimExpr) -> Sum: ...
        def _canon(self, s: Sum) -> E.PrimExpr: ...
        def _ramp(self, base: E.PrimExpr, stride: E.PrimExpr, lanes: int) -> E.PrimExpr: ...
        def _children(self, e: E.BinaryOp) -> tuple[E.PrimExpr, E.PrimExpr]: ...
        def _rebuild(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr: ...
        def bound(self, e: E.PrimExpr) -> tuple: ...
        def prove_nonpos(self, s: Sum) -> bool: ...
        def prove_lt(self, a: E.PrimExpr, b: E.PrimExpr) -> bool: ...
        def prove_le(self, a: E.PrimExpr, b: E.PrimExpr) -> bool: ...

    def visit_FloorDiv(self, e: E.FloorDiv) -> E.PrimExpr:
        return self._divmod(e)

    visit_FloorMod = visit_FloorDiv
    visit_Div = visit_FloorDiv
    visit_Mod = visit_FloorDiv

    def _divmod(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self._children(e)
        c = fold_binary(type(e), a, b)
        if c is not None:
            return c
        is_div = isinstance(e, (E.FloorDiv, E.Div))
        if dt.lanes_of(e.dtype) > 1:
            v = self._vector_divmod(e, a, b)
            return v if v is not None else self._rebuild(e, a, b)
        if not dt.is_integer(e.dtype) or dt.is_bool(e.dtype):
            if isinstance(e, E.Div) and _is_one(b) and dt.is_float(e.dtype):
                return a  # x / 1.0 == x exactly (NaN and -0 included)
            return self._rebuild(e, a, b)
        if not _is_index(e.dtype):
            if is_div and _is_one(b):
                return a
            if not is_div and _is_one(b):
                return _zero(e.dtype)
            return self._rebuild(e, a, b)
        if not (isinstance(b, E.IntImm) and b.value > 0):
            if isinstance(b, E.IntImm) and b.value == -1 and is_div:
                return self._canon(self._sum(a).scaled(-1))
            if skey(a) == skey(b) and self.an._bound(b)[0] > 0:
                return E.IntImm(e.dtype, 1) if is_div else _zero(e.dtype)
            if not isinstance(b, E.IntImm):
                out = self._symbolic_divmod(e, a, b)
                if out is not None:
                    return out
            return self._rebuild(e, a, b)
        cval = b.value
        if cval == 1:
            return a if is_div else _zero(e.dtype)
        if isinstance(e, (E.Div, E.Mod)) and self.bound(a)[0] < 0:
            return self._trunc_divmod(e, a, b)
        # floor division, or truncation of a non-negative dividend (the two agree there)
        s = self._sum(a)
        return self._floordiv_sum(s, cval) if is_div else self._floormod_sum(s, cval)

    def _symbolic_divmod(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
        """Division by a symbolic monomial ``d`` (e.g. a symbolic extent after fuse):
        ``floordiv(d*q + r, d) = q + floordiv(r, d)``, and ``q`` (or ``q - 1``) when ``r`` is
        within ``[0, d)`` (or ``[-d, 0)``). A non-negative ``d`` is >= 1 where the division is
        defined, which the proofs may assume."""
        if self.bound(b)[0] == 0 and _is_index(b.dtype):
            with self.an.constraint_scope(E.GE(b, E.IntImm(b.dtype, 1))):
                return self._symbolic_divmod_impl(e, a, b)
        return self._symbolic_divmod_impl(e, a, b)

    def _symbolic_divmod_impl(
        self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr
    ) -> E.PrimExpr | None:
        sd = self._sum(b)
        if sd.const != 0 or len(sd.terms) != 1:
            return None
        ((dc, datoms),) = sd.terms.values()
        if dc != 1:
            return None
        is_div = isinstance(e, (E.FloorDiv, E.Div))
        sa = self._sum(a)
        nonneg_a = self.prove_nonpos(sa.scaled(-1))
        d_pos = self.prove_le(_zero(b.dtype), b)  # d >= 0 and defined (d != 0): d > 0
        if isinstance(e, (E.Div, E.Mod)) and not (nonneg_a and d_pos):
            return None  # truncation: only where it agrees with floor
        dkeys = [skey(x) for x in datoms]
        q, r = Sum(a.dtype), Sum(a.dtype, sa.const)
        for c, atoms in sa.items():
            keys = [skey(x) for x in atoms]
            rest = list(atoms)
            ok = True
            for k in dkeys:
                if k in keys:
                    n = keys.index(k)
                    del keys[n]
                    del rest[n]
                else:
                    ok = False
                    break
            if ok:
                if rest:
                    q.add_mono(tuple(rest), c)
                else:
                    q.const += c
            else:
                r.add_mono(atoms, c)
        if d_pos and self.prove_nonpos(r.scaled(-1)) and self.prove_lt(self._canon(r.copy()), b):
            return self._canon(q) if is_div else self._canon(r)  # 0 <= r < d
        if (
            d_pos
            and self.prove_lt(self._canon(r.copy()), _zero(b.dtype))
            and self.prove_nonpos(self._sum(b).iadd(r).scaled(-1))
        ):
            if is_div:  # -d <= r < 0
                q.const -= 1
                return self._canon(q)
            return self._canon(r.iadd(self._sum(b)))
        if not q.terms:
            return None  # nothing gained by splitting off a constant
        rest_e = self._canon(r)
        if is_div:
            return self._canon(q.iadd(Sum.atom(E.FloorDiv(rest_e, b))))
        return E.FloorMod(rest_e, b)

    def _trunc_divmod(self, e: E.BinaryOp, a: E.PrimExpr, b: E.IntImm) -> E.PrimExpr:
        """truncdiv/truncmod with a possibly negative dividend: only exact rewrites."""
        s = self._sum(a)
        c = b.value
        if isinstance(e, E.Div):
            if s.coeff_gcd() % c == 0 and s.const % c == 0 and s.terms:
                return self._canon(_exact_div(s, c))
            lo, hi = self.bound(a)
            if -c < lo and hi < c:
                return _zero(e.dtype)
        else:
            if s.coeff_gcd() % c == 0 and s.const % c == 0:
                return _zero(e.dtype)
            lo, hi = self.bound(a)
            if -c < lo and hi < c:
                return a
        inner = self.an._st.modular.modular(a)
        if isinstance(e, E.Mod) and inner.coeff and inner.coeff % c == 0 and inner.base % c == 0:
            return _zero(e.dtype)
        return self._rebuild(e, a, b)

    def _residual_candidates(self, s: Sum, c: int) -> list[int]:
        gs = {c}
        for coeff, _ in s.items():
            g = math.gcd(coeff, c)
            if g > 1:
                gs.add(g)
        return sorted(gs, reverse=True)

    def _split_sum(self, s: Sum, c: int):
        """Find ``g | c`` and ``m`` such that ``s = g*(q + m) + r`` with ``0 <= r < g``, where
        ``q`` collects the terms whose coefficients ``g`` divides. Returns ``(g, q_plus_m, r)``."""
        for g in self._residual_candidates(s, c):
            q = Sum(s.dtype)
            r = Sum(s.dtype, s.const)
            for coeff, atoms in s.items():
                if coeff % g == 0:
                    q.add_mono(atoms, coeff // g)
                else:
                    r.add_mono(atoms, coeff)
            lo, hi = self.an._sum_bound(r)
            if lo == -INF or hi == INF:
                continue
            m = lo // g
            if hi < (m + 1) * g:
                q.const += m
                r.const -= m * g
                return g, q, r
        return None

    def _floordiv_sum(self, s: Sum, c: int) -> E.PrimExpr:
        found = self._split_sum(s, c)
        if found is not None:
            g, q, _r = found
            # floordiv(s, c) == floordiv(q, c // g)
            c2 = c // g
            if c2 == 1:
                return self._canon(q)
            return self._floordiv_plain(q, c2)
        # extract exact multiples of c (and of the constant)
        return self._floordiv_plain(s, c)

    def _floordiv_plain(self, s: Sum, c: int) -> E.PrimExpr:
        """floordiv(s, c) = sum(multiples)/c + floordiv(rest, c); rest bounded -> folded."""
        dtype = s.dtype
        q = Sum(dtype, s.const // c)
        r = Sum(dtype, s.const % c)
        for coeff, atoms in s.items():
            if coeff % c == 0:
                q.add_mono(atoms, coeff // c)
            else:
                r.add_mono(atoms, coeff)
        if r.is_const():
            return self._canon(q)
        lo, hi = self.an._sum_bound(r)
        if lo != -INF and hi != INF and lo // c == hi // c:
            q.const += lo // c
            return self._canon(q)
        rest = self._canon(r)
        inner = self._nested_div(rest, c)
        if inner is None:
            inner = E.FloorDiv(rest, E.IntImm(dtype, c))
        q.iadd(to_sum(inner))
        return self._canon(q)

    def _nested_div(self, rest: E.PrimExpr, c: int) -> E.PrimExpr | None:
        # floordiv(floordiv(x, c1), c) -> floordiv(x, c1*c)
        if isinstance(rest, E.FloorDiv) and _is_int_const(rest.b) and rest.b.value > 0:
            return self.visit(E.FloorDiv(rest.a, E.IntImm(rest.dtype, rest.b.value * c)))
        # floordiv(floormod(x, m), c) with m | c ... -> 0 handled by bounds; nothing else
        return None

    def _floormod_sum(self, s: Sum, c: int) -> E.PrimExpr:
        dtype = s.dtype
        found = self._split_sum(s, c)
        if found is not None:
            g, q, r = found
            # floormod(s, c) == g * floormod(q, c // g) + r
            c2 = c // g
            out = Sum(dtype)
            out.iadd(r)
            if c2 != 1:
                out.iadd(to_sum(self._floormod_plain(q, c2)), g)
            return self._canon(out)
        return self._floormod_plain(s, c)

    def _floormod_plain(self, s: Sum, c: int) -> E.PrimExpr:
        dtype = s.dtype
        r = Sum(dtype, s.const % c)
        for coeff, atoms in s.items():
            cm = coeff if -c < coeff < c else coeff % c
            if cm:
                r.add_mono(atoms, cm)
        if r.is_const():
            return E.IntImm(dtype, r.const % c)
        lo, hi = self.an._sum_bound(r)
        if lo != -INF and hi != INF and lo // c == hi // c:
            r.const -= (lo // c) * c
            return self._canon(r)
        rest = self._canon(r)
        ms = self.an._st.modular.modular(rest)
        if ms.coeff and ms.coeff % c == 0:
            return E.IntImm(dtype, ms.base % c)
        nested = self._nested_mod(rest, c)
        if nested is not None:
            return nested
        return E.FloorMod(rest, E.IntImm(dtype, c))

    def _nested_mod(self, rest: E.PrimExpr, c: int) -> E.PrimExpr | None:
        dtype = rest.dtype
        # floormod(floormod(x, m), c) with c | m -> floormod(x, c)
        if isinstance(rest, E.FloorMod) and _is_int_const(rest.b) and rest.b.value % c == 0:
            return self.visit(E.FloorMod(rest.a, E.IntImm(dtype, c)))
        # floormod(floordiv(x, k), c) -> floordiv(floormod(x, k*c), k)
        info = split_info(rest)
        if (
            info is not None
            and info[0] == "floor"
            and info[3] == INF
            and isinstance(rest, E.FloorDiv)
        ):
            _, x, k, _ = info
            inner = self.visit(E.FloorMod(x, E.IntImm(dtype, k * c)))
            return self.visit(E.FloorDiv(inner, E.IntImm(dtype, k)))
        return None

    def _vector_divmod(self, e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
        cls = type(e)
        if isinstance(a, E.Broadcast) and isinstance(b, E.Broadcast):
            return E.Broadcast(self.visit(cls(a.value, b.value)), a.lanes)
        if not (isinstance(a, E.Ramp) and isinstance(b, E.Broadcast) and _is_index(a.base.dtype)):
            return None
        if not (
            isinstance(b.value, E.IntImm) and b.value.value > 0 and isinstance(a.stride, E.IntImm)
        ):
            return None
        c, st, lanes = b.value.value, a.stride.value, a.lanes
        if cls is E.FloorDiv or (cls is E.Div and self.bound(a.base)[0] >= 0 and st >= 0):
            if st % c == 0:
                return self._ramp(
                    self.visit(E.FloorDiv(a.base, b.value)), E.IntImm(a.base.dtype, st // c), lanes
                )
            if st >= 0:
                lo, hi = self.bound(self.visit(E.FloorMod(a.base, b.value)))
                if hi + st * (lanes - 1) < c:
                    return E.Broadcast(self.visit(E.FloorDiv(a.base, b.value)), lanes)
        if cls is E.FloorMod or (cls is E.Mod and self.bound(a.base)[0] >= 0 and st >= 0):
            if st % c == 0:
                return E.Broadcast(self.visit(E.FloorMod(a.base, b.value)), lanes)
            if st >= 0:
                base = self.visit(E.FloorMod(a.base, b.value))
                lo, hi = self.bound(base)
                if hi + st * (lanes - 1) < c:
                    return E.Ramp(base, a.stride, lanes)
        return None
