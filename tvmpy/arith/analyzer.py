"""The Analyzer: one object holding what is known about variables (bindings, loop ranges,
constraints) and the analyses that use it: simplification, proofs, constant bounds, modular sets,
symbolic integer sets.

Typical use in a pass::

    ana = Analyzer()
    ana.bind(loop.loop_var, Range.from_min_extent(loop.min, loop.extent))
    with ana.constraint_scope(cond):          # inside `if cond:`
        index = ana.simplify(index)
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..ir import dtype as dt
from ..tir import expr as E
from .const_int_bound import INF, BoundAnalyzer, ConstIntBound, dtype_bound, intersect
from .modular_set import ModularSet, ModularSetAnalyzer, intersect_mod
from .sum_form import Sum, merge_splits, skey, to_sum

if TYPE_CHECKING:  # pragma: no cover
    from .int_set import IntervalSet

__all__ = ["Analyzer"]


def is_index_dtype(dtype: str) -> bool:
    """Signed 32/64-bit scalars: the dtypes the canonical (no-overflow) rules apply to."""
    d = dt.parse(dtype)
    return d.kind == "int" and d.bits >= 32 and d.lanes == 1


class _State:
    """What is known at one point; constraint scopes push a copy and pop it back."""

    __slots__ = (
        "var_bound",
        "var_value",
        "var_mod",
        "var_range",
        "atom_bound",
        "facts",
        "range_facts",
        "simplify_cache",
        "sum_memo",
        "bound",
        "modular",
        "memo_key",
    )

    def __init__(self, analyzer: Analyzer, parent: _State | None = None):
        if parent is None:
            self.var_bound: dict[E.Var, tuple] = {}
            self.var_value: dict[E.Var, E.PrimExpr] = {}
            self.var_mod: dict[E.Var, ModularSet] = {}
            self.var_range: dict[E.Var, tuple[E.PrimExpr, E.PrimExpr]] = {}
            self.atom_bound: dict[Any, tuple] = {}
            self.facts: list[Sum] = []  # each fact: sum <= 0 (from constraints)
            self.range_facts: dict[E.Var, list[Sum]] = {}  # from symbolic loop ranges
        else:
            self.var_bound = dict(parent.var_bound)
            self.var_value = dict(parent.var_value)
            self.var_mod = dict(parent.var_mod)
            self.var_range = dict(parent.var_range)
            self.atom_bound = dict(parent.atom_bound)
            self.facts = list(parent.facts)
            self.range_facts = dict(parent.range_facts)
        self.simplify_cache: dict[int, tuple[E.PrimExpr, E.PrimExpr]] = {}
        self.sum_memo: dict[int, tuple[E.PrimExpr, Sum]] = {}
        self.bound = BoundAnalyzer(analyzer)
        self.modular = ModularSetAnalyzer(analyzer)
        self.memo_key: Any = None  # simplify_memo.state_key's, until the state changes

    def invalidate(self) -> None:
        self.memo_key = None
        self.simplify_cache.clear()
        self.sum_memo.clear()
        self.bound.cache.clear()
        self.modular.cache.clear()


class Analyzer:
    """Integer arithmetic analysis under a set of variable facts (TVM's ``arith.Analyzer``)."""

    def __init__(self) -> None:
        from .simplifier import Simplifier

        self._stack: list[_State] = [_State(self)]
        self._simplifier = Simplifier(self)
        self._active: set[E.Var] = set()

    @property
    def _st(self) -> _State:
        return self._stack[-1]

    # ---- facts -------------------------------------------------------------------------------
    def bind(
        self, var: E.Var, value: E.PrimExpr | E.Range | Any, allow_override: bool = True
    ) -> None:
        """Bind ``var`` to an expression (it is replaced by it when simplifying) or to a Range
        (``min <= var < min + extent``)."""
        if not isinstance(var, E.Var):
            var = E.convert(var)
            if not isinstance(var, E.Var):
                raise TypeError(f"Analyzer.bind expects a Var, got {type(var).__name__}")
        if not allow_override and (var in self._st.var_value or var in self._st.var_range):
            raise ValueError(f"variable {var.name} is already bound")
        st = self._st
        st.invalidate()
        if isinstance(value, E.Range):
            self._bind_range(var, value)
            return
        if isinstance(value, E.IterVar):
            raise TypeError(
                "Analyzer.bind: pass an IterVar's .dom (a Range) or .var, not the IterVar"
            )
        value = E.convert(value)
        if not isinstance(value, E.PrimExpr) or isinstance(value, E.StringImm):
            raise TypeError(
                f"Analyzer.bind expects a PrimExpr or Range, got {type(value).__name__}"
            )
        value = _as_dtype(value, var.dtype, "bind value")
        value = self.simplify(value)
        st.invalidate()
        st.var_value[var] = value  # bounds and modular sets follow from it when asked
        st.var_range.pop(var, None)
        st.range_facts.pop(var, None)
        st.var_bound.pop(var, None)
        st.var_mod.pop(var, None)
        st.invalidate()

    def _bind_range(self, var: E.Var, rng: E.Range) -> None:
        st = self._st
        lo = self.simplify(_as_dtype(rng.min, var.dtype, "range min"))
        ext = self.simplify(_as_dtype(rng.extent, var.dtype, "range extent"))
        st.invalidate()
        st.var_value.pop(var, None)
        st.var_mod.pop(var, None)
        st.range_facts.pop(var, None)
        st.var_bound.pop(var, None)  # facts about an earlier binding no longer apply
        if isinstance(ext, E.IntImm) and ext.value <= 0:
            # empty loop: nothing can be said about values (the body never runs)
            st.var_range.pop(var, None)
            return
        hi = (
            self.simplify(lo + ext - 1)
            if not isinstance(lo, E.IntImm) or not isinstance(ext, E.IntImm)
            else E.IntImm(lo.dtype, lo.value + ext.value - 1)
        )
        st.var_range[var] = (lo, hi)  # the constant bound follows from lo and hi when asked
        if not (isinstance(lo, E.IntImm) and isinstance(hi, E.IntImm)) and is_index_dtype(
            var.dtype
        ):
            # symbolic range: remember lo - var <= 0 and var - hi <= 0 for proofs
            v = Sum.atom(var)
            st.range_facts[var] = [to_sum(lo).iadd(v, -1), v.copy().iadd(to_sum(hi), -1)]
        st.invalidate()

    def update(self, var: E.Var, info: ConstIntBound | ModularSet) -> None:
        """Record a known constant bound or modular set of ``var`` (TVM's ``Analyzer.update``)."""
        if isinstance(info, ConstIntBound):
            lo = None if info.min_value == ConstIntBound.NEG_INF else info.min_value
            hi = None if info.max_value == ConstIntBound.POS_INF else info.max_value
            self.update_bound(var, lo, hi)
        elif isinstance(info, ModularSet):
            self._st.var_mod[var] = info
            self._st.invalidate()
        else:
            raise TypeError(
                f"Analyzer.update expects ConstIntBound or ModularSet, got {type(info).__name__}"
            )

    def update_bound(self, var: E.Var, lo: int | None = None, hi: int | None = None) -> None:
        """Tighten the constant bound of ``var`` (``lo <= var <= hi``)."""
        st = self._st
        cur = st.var_bound.get(var, self._var_bound(var))
        st.var_bound[var] = (
            cur[0] if lo is None else max(cur[0], lo),
            cur[1] if hi is None else min(cur[1], hi),
        )
        st.invalidate()

    @contextlib.contextmanager
    def constraint_scope(self, cond: Any) -> Iterator[None]:
        """Within the block, ``cond`` (a boolean expression) is assumed true."""
        cond = E.convert(cond)
        self._stack.append(_State(self, self._st))
        try:
            self._add_constraint(cond)
            yield
        finally:
            self._stack.pop()

    @contextlib.contextmanager
    def _let_scope(self, var: E.Var, value: E.PrimExpr) -> Iterator[None]:
        st = _State(self, self._st)
        b = self._bound(value)
        m = self.modular_set(value)
        self._stack.append(st)
        st.var_value.pop(var, None)
        st.var_range.pop(var, None)
        st.var_bound[var] = b
        st.var_mod[var] = m
        try:
            yield
        finally:
            self._stack.pop()

    def _add_constraint(self, cond: E.PrimExpr) -> None:
        if isinstance(cond, E.IntImm) or not isinstance(cond, E.PrimExpr):
            return
        if isinstance(cond, E.And):
            self._add_constraint(cond.a)
            self._add_constraint(cond.b)
            return
        if isinstance(cond, E.Call) and cond.op == "likely":
            self._add_constraint(cond.args[0])
            return
        if isinstance(cond, E.Not):
            neg = _negate_cmp(cond.a)
            if neg is not None:
                self._add_constraint(neg)
            elif isinstance(cond.a, E.Or):
                self._add_constraint(E.Not(cond.a.a))
                self._add_constraint(E.Not(cond.a.b))
            return
        if not isinstance(cond, E.CmpOp) or not is_index_dtype(cond.a.dtype):
            return
        a = self.simplify(cond.a)
        b = self.simplify(cond.b)
        if isinstance(cond, E.EQ):
            self._add_eq_modular(a, b)
        for fact in _cmp_to_facts(cond, to_sum(a), to_sum(b)):
            self._add_fact(fact)
        self._st.invalidate()

    def _add_eq_modular(self, a: E.PrimExpr, b: E.PrimExpr) -> None:
        # floormod(x, c) == k  ->  x in {c*n + k}
        for lhs, rhs in ((a, b), (b, a)):
            if (
                isinstance(lhs, (E.FloorMod, E.Mod))
                and isinstance(lhs.b, E.IntImm)
                and isinstance(rhs, E.IntImm)
                and isinstance(lhs.a, E.Var)
                and lhs.b.value > 0
            ):
                if isinstance(lhs, E.Mod) and rhs.value != 0:
                    continue
                v = lhs.a
                st = self._st
                new = ModularSet(lhs.b.value, rhs.value)
                old = st.var_mod.get(v)
                st.var_mod[v] = new if old is None else intersect_mod(old, new)

    def _add_fact(self, fact: Sum) -> None:
        st = self._st
        if fact.is_const():
            return
        st.facts.append(fact)
        if len(fact.terms) == 1:
            ((c, atoms),) = fact.terms.values()
            if len(atoms) != 1:
                return
            atom = atoms[0]
            k = fact.const
            # c*atom + k <= 0
            if c > 0:
                lo, hi = -INF, (-k) // c
            else:
                lo, hi = -((-k) // (-c)), INF  # atom >= ceil(k / |c|)
            if isinstance(atom, E.Var):
                cur = st.var_bound.get(atom, self._var_bound(atom))
                st.var_bound[atom] = intersect(cur, (lo, hi))
            else:
                key = skey(atom)
                cur = st.atom_bound.get(key, (-INF, INF))
                st.atom_bound[key] = intersect(cur, (lo, hi))

    # ---- per-variable queries used by the analyses ---------------------------------------
    def _var_bound(self, v: E.Var) -> tuple:
        """From the variable's bound value or range (computed now, so that rebinding another
        variable it depends on is seen), tightened by constraint facts."""
        st = self._st
        b = dtype_bound(v.dtype)
        if v not in self._active:
            self._active.add(v)  # guards against a binding that mentions the var itself
            try:
                value = st.var_value.get(v)
                if value is not None:
                    b = intersect(b, self._bound(value))
                else:
                    rng = st.var_range.get(v)
                    if rng is not None:
                        b = intersect(b, (self._bound(rng[0])[0], self._bound(rng[1])[1]))
            finally:
                self._active.discard(v)
        fact = st.var_bound.get(v)
        if fact is not None:
            b = intersect(b, fact)
        if isinstance(v, E.SizeVar):
            b = (max(b[0], 0), b[1])
        return b

    def _var_modular(self, v: E.Var) -> ModularSet:
        st = self._st
        m = st.var_mod.get(v)
        value = st.var_value.get(v)
        if value is not None and v not in self._active:
            self._active.add(v)
            try:
                mv = self.modular_set(value)
            finally:
                self._active.discard(v)
            m = mv if m is None else intersect_mod(m, mv)
        return m if m is not None else ModularSet.everything()

    def _bound(self, e: E.PrimExpr) -> tuple:
        st = self._st
        b = st.bound.bound(e)
        if st.atom_bound and not isinstance(e, E.IntImm):
            ab = st.atom_bound.get(skey(e))
            if ab is not None:
                nb = intersect(b, ab)
                if nb[0] <= nb[1]:
                    b = nb
        return b

    def _sum_bound(self, s: Sum) -> tuple:
        lo = hi = s.const
        for c, atoms in s.items():
            b = (1, 1)
            for a in atoms:
                ab = self._bound(a)
                vals = [_mul(x, y) for x in b for y in ab]
                b = (min(vals), max(vals))
            if c > 0:
                lo, hi = lo + _mul(c, b[0]), hi + _mul(c, b[1])
            else:
                lo, hi = lo + _mul(c, b[1]), hi + _mul(c, b[0])
            if lo == -INF and hi == INF:
                break
        return lo, hi

    # ---- public analyses ---------------------------------------------------------------------
    def simplify(self, expr: Any) -> Any:
        """Simplify an expression (canonical form for integer index arithmetic, constant folding,
        bound-based rewrites). Statements and Ranges are simplified expression-wise."""
        expr = E.convert(expr)
        if isinstance(expr, E.Range):
            return E.Range.from_min_extent(self.simplify(expr.min), self.simplify(expr.extent))
        if not isinstance(expr, E.PrimExpr):
            raise TypeError(f"Analyzer.simplify expects a PrimExpr, got {type(expr).__name__}")
        return self._simplifier.visit(expr)

    def canonical_simplify(self, expr: Any) -> Any:
        """Canonical form of ``expr`` (sums of monomials in a fixed order). Same engine as
        :meth:`simplify`."""
        return self.simplify(expr)

    def rewrite_simplify(self, expr: Any) -> Any:
        """Rule-based simplification (same engine as :meth:`simplify`)."""
        return self.simplify(expr)

    def can_prove(self, cond: Any) -> bool:
        """True only when ``cond`` holds for every value the variables can take."""
        cond = E.convert(cond)
        if isinstance(cond, bool):
            return cond
        if not isinstance(cond, E.PrimExpr):
            raise TypeError(f"can_prove expects a boolean PrimExpr, got {type(cond).__name__}")
        if not dt.is_bool(cond.dtype):
            raise TypeError(
                f"can_prove expects a boolean expression, got dtype {cond.dtype}: {cond}"
            )
        s = self.simplify(cond)
        return isinstance(s, E.IntImm) and s.value == 1

    def can_prove_equal(self, a: Any, b: Any) -> bool:
        a, b = E.binary_match(a, b)
        if (
            dt.is_integer(a.dtype)
            and dt.lanes_of(a.dtype) == 1
            and dt.parse(a.dtype).kind != "bool"
        ):
            d = self.simplify(a - b)
            return isinstance(d, E.IntImm) and d.value == 0
        sa, sb = self.simplify(a), self.simplify(b)
        return skey(sa) == skey(sb)

    def const_int_bound(self, expr: Any) -> ConstIntBound:
        expr = E.convert(expr)
        if not dt.is_integer(expr.dtype):
            raise TypeError(f"const_int_bound needs an integer expression, got {expr.dtype}")
        return ConstIntBound._from_internal(self._bound(expr))

    def modular_set(self, expr: Any) -> ModularSet:
        expr = E.convert(expr)
        return self._st.modular.modular(expr)

    def int_set(self, expr: Any, dom_map: dict | None = None) -> IntervalSet:
        """The symbolic interval ``expr`` ranges over when each var in ``dom_map`` ranges over its
        Range / IntervalSet (other variables: their bound Range if any, else themselves)."""
        from .int_set import eval_set

        return eval_set(expr, dom_map or {}, self)

    # ---- proofs used by the simplifier -------------------------------------------------------
    def _all_facts(self) -> list[Sum]:
        st = self._st
        if not st.range_facts:
            return st.facts
        out = list(st.facts)
        for fs in st.range_facts.values():
            out.extend(fs)
        return out

    def _atom_facts(self, s: Sum) -> list[Sum]:
        """Facts implied by the atoms of ``s`` themselves: min/max against their operands,
        ``0 <= floormod(a, d) < d`` for a symbolic positive ``d``."""
        out: list[Sum] = []
        for _, atoms in s.items():
            if len(atoms) != 1:
                continue
            x = atoms[0]
            if isinstance(x, (E.Min, E.Max)) and is_index_dtype(x.dtype):
                sx = Sum.atom(x)
                for operand in (x.a, x.b):
                    f = sx.copy().iadd(to_sum(operand), -1)  # min - operand <= 0
                    out.append(f if isinstance(x, E.Min) else f.scaled(-1))
            elif (
                isinstance(x, E.FloorMod)
                and not isinstance(x.b, E.IntImm)
                and is_index_dtype(x.dtype)
                and self._bound(x.b)[0] >= 0
            ):  # d != 0: defined
                sx = Sum.atom(x)
                out.append(sx.scaled(-1))
                f = sx.copy().iadd(to_sum(x.b), -1)
                f.const += 1
                out.append(f)
        return out

    def _scaled_facts(self, s: Sum, facts: list[Sum]) -> list[Sum]:
        """``p * fact`` for a non-negative monomial ``p`` that turns a term of the fact into a
        term of ``s`` (``i <= n - 1`` gives ``i*m <= n*m - m`` for ``m >= 0``): the non-linear
        step behind guards of fused symbolic loops such as ``i*m + j < n*m``."""
        out: list[Sum] = []
        s_terms = [(c, atoms, [skey(a) for a in atoms]) for c, atoms in s.items() if len(atoms) > 1]
        if not s_terms:
            return out
        for fact in facts:
            for cf, fatoms in fact.items():
                fkeys = [skey(a) for a in fatoms]
                for cs, satoms, skeys in s_terms:
                    if (cs > 0) != (cf > 0) or len(satoms) <= len(fatoms):
                        continue
                    rest = list(satoms)
                    keys = list(skeys)
                    ok = True
                    for k in fkeys:
                        if k not in keys:
                            ok = False
                            break
                        n = keys.index(k)
                        del keys[n]
                        del rest[n]
                    if not ok or any(self._bound(a)[0] < 0 for a in rest):
                        continue
                    p = Sum(s.dtype)
                    p.add_mono(tuple(rest), 1)
                    out.append(fact.mul(p))
        return out

    def _prove_nonpos(self, s: Sum, depth: int = 2) -> bool:
        """Is ``s <= 0`` always?"""
        if s.is_const():
            return s.const <= 0
        if self._sum_bound(s)[1] <= 0:
            return True
        if depth == 0:
            return False
        facts = self._all_facts() + self._atom_facts(s)
        if depth == 2:
            facts = facts + self._scaled_facts(s, facts)
        for fact in facts:
            t = _eliminate(s, fact)
            if t is not None:
                merge_splits(t, to_sum)  # e.g. x - x // 8 * 8 -> x % 8, which is bounded
                if t.is_const():
                    if t.const <= 0:
                        return True
                elif self._prove_nonpos(t, depth - 1):
                    return True
        return False


def _as_dtype(value: E.PrimExpr, dtype: str, what: str) -> E.PrimExpr:
    """``value`` in the variable's dtype (integers are cast; other mismatches are errors)."""
    if value.dtype == dtype:
        return value
    if dt.is_integer(value.dtype) and dt.is_integer(dtype):
        return E.cast(value, dtype)
    raise TypeError(f"Analyzer.bind: {what} has dtype {value.dtype}, the variable is {dtype}")


def _mul(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def _eliminate(s: Sum, fact: Sum) -> Sum | None:
    """``p*s - m*fact`` with p, m > 0 chosen to cancel a term both share (so that
    ``fact <= 0`` and ``p*s - m*fact <= 0`` imply ``s <= 0``), or None."""
    for k, (cf, _) in fact.terms.items():
        t = s.terms.get(k)
        if t is None:
            continue
        cs = t[0]
        if (cs > 0) != (cf > 0):
            continue
        g = math.gcd(cs, cf)
        p, m = abs(cf) // g, abs(cs) // g
        return s.scaled(p).iadd(fact, -m)
    return None


def _cmp_to_facts(cond: E.CmpOp, a: Sum, b: Sum) -> list[Sum]:
    """``cond`` as a list of sums known to be <= 0."""
    if isinstance(cond, E.LT):
        d = a.copy().iadd(b, -1)
        d.const += 1
        return [d]
    if isinstance(cond, E.LE):
        return [a.copy().iadd(b, -1)]
    if isinstance(cond, E.GT):
        d = b.copy().iadd(a, -1)
        d.const += 1
        return [d]
    if isinstance(cond, E.GE):
        return [b.copy().iadd(a, -1)]
    if isinstance(cond, E.EQ):
        return [a.copy().iadd(b, -1), b.copy().iadd(a, -1)]
    return []


def _negate_cmp(c: E.PrimExpr) -> E.PrimExpr | None:
    """``not c`` as a comparison, for integer comparisons (floats: NaN breaks it)."""
    if not isinstance(c, E.CmpOp) or not dt.is_integer(c.a.dtype):
        return None
    flip = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.EQ: E.NE, E.NE: E.EQ}
    return flip[type(c)](c.a, c.b)
