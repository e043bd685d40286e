"""Small integer arithmetic used by bound inference and loop-nest generation.

- :func:`simplify`: affine canonical form (sum of coefficient * atom + constant), constant
  folding, ``(c*x + k) // c`` / ``% c`` rules, min/max of expressions differing by a constant;
- :func:`interval`: the interval ``[lo, hi]`` (inclusive, symbolic) of an index expression when
  its variables range over given intervals;
- :func:`prove_nonneg`: decide ``e >= 0`` from constants and variable ranges (conservative).

Kept private to te so that schedule lowering stays self-contained; the general simplifier lives in
:mod:`tvmpy.arith`.
"""

from __future__ import annotations

from typing import Any

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir.expr import PrimExpr, const

__all__ = ["simplify", "interval", "prove_nonneg", "const_int", "Interval", "union", "relax"]

Interval = tuple[PrimExpr, PrimExpr]


def const_int(e: Any) -> int | None:
    if isinstance(e, int):
        return e
    if isinstance(e, E.IntImm):
        return e.value
    return None


def _key(e: Any) -> Any:
    """A hashable structural key (variables by identity)."""
    if isinstance(e, E.Var):
        return ("var", id(e))
    if isinstance(e, E.IntImm):
        return ("int", e.dtype, e.value)
    if isinstance(e, E.FloatImm):
        return ("float", e.dtype, e.value)
    if isinstance(e, E.StringImm):
        return ("str", e.value)
    if isinstance(e, (list, tuple)):
        return tuple(_key(x) for x in e)
    fields = getattr(e, "_fields", ())
    extra: tuple = ()
    if isinstance(e, E.Call):
        extra = (e.op, e.dtype)
    elif isinstance(e, (E.BufferLoad,)):
        extra = (id(e.buffer),)
    elif isinstance(e, E.ProducerLoad):
        extra = (id(e.producer.op), e.producer.value_index)
    elif isinstance(e, E.Cast):
        extra = (e.dtype,)
    return (type(e).__name__, extra) + tuple(_key(getattr(e, f)) for f in fields)


class _Lin:
    """``sum(coef * atom) + c`` over atoms keyed structurally."""

    __slots__ = ("terms", "c", "dtype")

    def __init__(self, dtype: str, terms: dict | None = None, c: int = 0):
        self.dtype = dtype
        self.terms: dict[Any, tuple[PrimExpr, int]] = terms or {}
        self.c = c

    def add(self, other: _Lin, sign: int = 1) -> _Lin:
        terms = dict(self.terms)
        for k, (a, v) in other.terms.items():
            old = terms.get(k)
            nv = (old[1] if old else 0) + sign * v
            if nv:
                terms[k] = (a, nv)
            elif old:
                del terms[k]
        return _Lin(self.dtype, terms, self.c + sign * other.c)

    def scale(self, k: int) -> _Lin:
        if k == 0:
            return _Lin(self.dtype)
        return _Lin(self.dtype, {key: (a, v * k) for key, (a, v) in self.terms.items()}, self.c * k)

    def is_const(self) -> bool:
        return not self.terms

    def to_expr(self) -> PrimExpr:
        out: PrimExpr | None = None
        for a, v in self.terms.values():
            term = a if v == 1 else (E.Mul(a, const(v, self.dtype)) if v > 0 else None)
            if term is None:  # negative coefficient
                term = a if v == -1 else E.Mul(a, const(-v, self.dtype))
                out = E.Sub(out if out is not None else const(0, self.dtype), term)
                continue
            out = term if out is None else E.Add(out, term)
        if out is None:
            return const(self.c, self.dtype)
        if self.c > 0:
            out = E.Add(out, const(self.c, self.dtype))
        elif self.c < 0:
            out = E.Sub(out, const(-self.c, self.dtype))
        return out


def _atom(e: PrimExpr) -> _Lin:
    return _Lin(e.dtype, {_key(e): (e, 1)})


def _lin(e: PrimExpr) -> _Lin:
    """Linear form of an integer expression (non-linear parts become simplified atoms)."""
    if isinstance(e, E.IntImm):
        return _Lin(e.dtype, c=e.value)
    if isinstance(e, E.Var):
        return _atom(e)
    if isinstance(e, E.Add):
        return _lin(e.a).add(_lin(e.b))
    if isinstance(e, E.Sub):
        return _lin(e.a).add(_lin(e.b), -1)
    if isinstance(e, E.Mul):
        a, b = _lin(e.a), _lin(e.b)
        if b.is_const():
            return a.scale(b.c)
        if a.is_const():
            return b.scale(a.c)
        return _atom(E.Mul(a.to_expr(), b.to_expr()))
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        return _divmod(e, _lin(e.a), _lin(e.b))
    if isinstance(e, (E.Min, E.Max)):
        a, b = _lin(e.a), _lin(e.b)
        d = a.add(b, -1)
        if d.is_const():
            pick_a = (d.c <= 0) if isinstance(e, E.Min) else (d.c >= 0)
            return a if pick_a else b
        return _atom(type(e)(a.to_expr(), b.to_expr()))
    if isinstance(e, E.Cast) and dt.is_integer(e.dtype) and not dt.is_bool(e.dtype):
        v = _lin(e.value) if dt.is_integer(e.value.dtype) and not dt.is_bool(e.value.dtype) else None
        if v is not None and v.is_const():
            return _Lin(e.dtype, c=v.c)
        return _atom(E.Cast(e.dtype, v.to_expr() if v is not None else e.value))
    return _atom(e)


def _divmod(e: PrimExpr, a: _Lin, b: _Lin) -> _Lin:
    is_div = isinstance(e, E.FloorDiv)
    if b.is_const() and b.c > 0:
        c = b.c
        if a.is_const():
            return _Lin(e.dtype, c=(a.c // c) if is_div else (a.c % c))
        if c == 1:
            return a if is_div else _Lin(e.dtype)
        if all(v % c == 0 for _, v in a.terms.values()):
            # (c*q + k) // c == q + k // c ; (c*q + k) % c == k % c
            if is_div:
                q = _Lin(e.dtype, {k: (x, v // c) for k, (x, v) in a.terms.items()}, a.c // c)
                return q
            return _Lin(e.dtype, c=a.c % c)
        # pull out the multiples of c from the constant: (x + c*m + r) // c = (x + r) // c + m
        m, r = divmod(a.c, c)
        rest = _Lin(a.dtype, a.terms, r)
        inner = type(e)(rest.to_expr(), const(c, e.dtype))
        if is_div:
            return _atom(inner).add(_Lin(e.dtype, c=m))
        return _atom(inner)
    return _atom(type(e)(a.to_expr(), b.to_expr()))


def simplify(e: Any) -> Any:
    """Canonical affine form of an integer expression; other expressions are returned as is."""
    if not isinstance(e, PrimExpr) or not dt.is_integer(e.dtype) or dt.is_bool(e.dtype) \
            or dt.lanes_of(e.dtype) != 1:
        return e
    return _lin(e).to_expr()


# ---------------------------------------------------------------------------------------------
def _smin(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return simplify(E.Min(a, b))


def _smax(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return simplify(E.Max(a, b))


def union(x: Interval, y: Interval) -> Interval:
    return _smin(x[0], y[0]), _smax(x[1], y[1])


def interval(e: PrimExpr, env: dict[E.Var, Interval]) -> Interval | None:
    """Inclusive bounds of ``e`` when each Var in ``env`` ranges over its interval (other Vars are
    fixed symbols). None when ``e`` is not an integer expression this evaluator understands."""
    r = _iv(e, env)
    if r is None:
        return None
    return simplify(r[0]), simplify(r[1])


def _iv(e: PrimExpr, env: dict) -> Interval | None:
    if isinstance(e, E.IntImm):
        return e, e
    if isinstance(e, E.Var):
        return env.get(e, (e, e))
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _iv(e.a, env), _iv(e.b, env)
        if a is None or b is None:
            return None
        if isinstance(e, E.Add):
            return E.Add(a[0], b[0]), E.Add(a[1], b[1])
        return E.Sub(a[0], b[1]), E.Sub(a[1], b[0])
    if isinstance(e, E.Mul):
        a, b = _iv(e.a, env), _iv(e.b, env)
        if a is None or b is None:
            return None
        for x, y in ((a, b), (b, a)):
            if x[0] is x[1] and const_int(simplify(x[0])) is not None:
                k = const_int(simplify(x[0]))
                lo, hi = E.Mul(y[0], x[0]), E.Mul(y[1], x[0])
                return (lo, hi) if k >= 0 else (hi, lo)
        if a[0] is a[1] and b[0] is b[1]:
            return E.Mul(a[0], b[0]), E.Mul(a[0], b[0])
        return None
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        a, b = _iv(e.a, env), _iv(e.b, env)
        if a is None or b is None:
            return None
        c = const_int(simplify(b[0])) if b[0] is b[1] else None
        if c is None or c <= 0:
            if a[0] is a[1] and b[0] is b[1]:
                v = type(e)(a[0], b[0])
                return v, v
            return None
        cc = const(c, e.dtype)
        if isinstance(e, E.FloorDiv):
            return E.FloorDiv(a[0], cc), E.FloorDiv(a[1], cc)
        lo, hi = simplify(a[0]), simplify(a[1])
        if _same(lo, hi):
            v = E.FloorMod(lo, cc)
            return v, v
        d = const_int(simplify(E.Sub(hi, lo)))
        if d is not None and d < c:
            qlo, qhi = simplify(E.FloorDiv(lo, cc)), simplify(E.FloorDiv(hi, cc))
            if _same(qlo, qhi):  # one period: the mod is monotone
                return E.FloorMod(lo, cc), E.FloorMod(hi, cc)
        return const(0, e.dtype), const(c - 1, e.dtype)
    if isinstance(e, (E.Min, E.Max)):
        a, b = _iv(e.a, env), _iv(e.b, env)
        if a is None or b is None:
            return None
        f = E.Min if isinstance(e, E.Min) else E.Max
        return f(a[0], b[0]), f(a[1], b[1])
    if isinstance(e, E.Select):
        a, b = _iv(e.true_value, env), _iv(e.false_value, env)
        if a is None or b is None:
            return None
        return union(a, b)
    if isinstance(e, E.Cast) and dt.is_integer(e.dtype) and dt.is_integer(e.value.dtype):
        a = _iv(e.value, env)
        if a is None:
            return None
        return E.cast(a[0], e.dtype), E.cast(a[1], e.dtype)
    if isinstance(e, E.Call) and e.op == "if_then_else":
        a, b = _iv(e.args[1], env), _iv(e.args[2], env)
        return None if a is None or b is None else union(a, b)
    if _free_of(e, env):
        return e, e
    return None


def _free_of(e: PrimExpr, env: dict) -> bool:
    from ..tir.functor import uses_var

    return not uses_var(e, lambda v: v in env)


def _same(a: PrimExpr, b: PrimExpr) -> bool:
    return a is b or _key(a) == _key(b)


def relax(iv: Interval, ranges: dict[E.Var, Interval], max_rounds: int = 16) -> Interval | None:
    """Re-evaluate an interval until no Var of ``ranges`` is left in its bounds (for bounds that
    refer to outer loop variables which themselves have ranges)."""
    lo, hi = iv
    from ..tir.functor import uses_var

    for _ in range(max_rounds):
        if not uses_var(lo, lambda v: v in ranges) and not uses_var(hi, lambda v: v in ranges):
            return lo, hi
        a, b = interval(lo, ranges), interval(hi, ranges)
        if a is None or b is None:
            return None
        lo, hi = a[0], b[1]
    return None


def prove_nonneg(e: PrimExpr, ranges: dict[E.Var, Interval] | None = None) -> bool:
    """True when ``e >= 0`` is certain (constant, or via the lower bound over ``ranges``)."""
    e = simplify(e)
    c = const_int(e)
    if c is not None:
        return c >= 0
    if not ranges:
        return False
    r = relax((e, e), ranges)
    if r is None:
        return False
    c = const_int(r[0])
    return c is not None and c >= 0
