"""Merging ``div(v, c) * c + mod(v, c)`` back to ``v`` in integer *vector* sums.

Scalar index sums get this from :func:`.sum_form.merge_splits`; vector expressions (ramps and
broadcasts after loop vectorization) are not canonical sums, so the vectorized read index of a
reshape, ``ramp(b, 1, n) // c * c + ramp(b', 1, n) % c``, would otherwise stay a per-lane
division and turn a contiguous load into a gather. The rule works lane by lane: with
``k * floordiv(x, c) * c + k * floormod(y, c)`` and ``x == y (mod c)`` in every lane the pair is
``k * x``. Two ramps agree modulo ``c`` in every lane when their bases do and their strides do.
Truncating pairs are merged only for structurally equal dividends (``truncmod`` of congruent
values of different signs differ).
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir import dtype as dt
from ..tir import expr as E
from .sum_form import congruent, skey, to_sum

__all__ = ["fold_vector_splits"]

_MAX_TERMS = 32  # pairs are compared one by one


def _const_bcast(e: E.PrimExpr) -> int | None:
    if isinstance(e, E.Broadcast) and isinstance(e.value, E.IntImm):
        return e.value.value
    return None


def _flatten(e: E.PrimExpr) -> list[list] | None:
    """``e`` as ``[[coeff, term], ...]`` (Add/Sub and products with constant broadcasts
    entered); None past ``_MAX_TERMS`` terms, so the cost per node stays bounded."""
    out: list[list] = []
    stack = [(e, 1)]
    while stack:
        x, k = stack.pop()
        if isinstance(x, (E.Add, E.Sub)):
            stack.append((x.b, -k if isinstance(x, E.Sub) else k))
            stack.append((x.a, k))
            continue
        if isinstance(x, E.Mul):
            cb, ca = _const_bcast(x.b), _const_bcast(x.a)
            if cb is not None:
                stack.append((x.a, k * cb))
                continue
            if ca is not None:
                stack.append((x.b, k * ca))
                continue
        out.append([k, x])
        if len(out) > _MAX_TERMS:
            return None
    return out


def _lanes_of(v: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr] | None:
    """(base, stride) of a Ramp or Broadcast (stride 0) of index type."""
    if isinstance(v, E.Ramp):
        return v.base, v.stride
    if isinstance(v, E.Broadcast):
        return v.value, E.IntImm(v.value.dtype, 0)
    return None


def _same_mod(x: E.PrimExpr, y: E.PrimExpr, c: int) -> bool:
    """``x == y (mod c)`` in every lane."""
    if skey(x) == skey(y):
        return True
    lx, ly = _lanes_of(x), _lanes_of(y)
    if lx is None or ly is None or lx[0].dtype != ly[0].dtype:
        return False
    (bx, sx), (by, sy) = lx, ly
    if skey(sx) != skey(sy):
        if not (isinstance(sx, E.IntImm) and isinstance(sy, E.IntImm)):
            return False
        if (sx.value - sy.value) % c:
            return False
    return congruent(to_sum(bx), to_sum(by), c)


_PAIRS = ((E.FloorDiv, E.FloorMod), (E.Div, E.Mod))


def _find_pair(terms: list[list]) -> tuple[int, int] | None:
    for i, (ci, d) in enumerate(terms):
        for div_cls, mod_cls in _PAIRS:
            if type(d) is not div_cls:
                continue
            c = _const_bcast(d.b)
            if c is None or c <= 0:
                continue
            for j, (cj, m) in enumerate(terms):
                if type(m) is not mod_cls or _const_bcast(m.b) != c or ci != cj * c:
                    continue
                if div_cls is E.Div and skey(d.a) != skey(m.a):
                    continue
                if _same_mod(d.a, m.a, c):
                    return i, j
    return None


def fold_vector_splits(
    e: E.PrimExpr, visit: Callable[[E.PrimExpr], E.PrimExpr]
) -> E.PrimExpr | None:
    """``e`` (an integer vector Add/Sub with simplified operands) with its div/mod pairs merged,
    re-simplified with ``visit``; None when it has no such pair."""
    flat = _flatten(e)
    if flat is None:
        return None
    merged: dict = {}  # equal terms combined: 2 * (x % c) pairs with x // c * (2 * c)
    for k, x in flat:
        t = merged.setdefault(skey(x), [0, x])
        t[0] += k
    terms = list(merged.values())
    changed = False
    while True:
        pair = _find_pair(terms)
        if pair is None:
            break
        i, j = pair
        k, x = terms[j][0], terms[i][1].a
        terms = [t for n, t in enumerate(terms) if n not in (i, j)] + [[k, x]]
        changed = True
    if not changed:
        return None
    # ramps and broadcasts first, so that they combine into one ramp
    terms = [t for t in terms if t[0]]
    terms.sort(key=lambda t: not isinstance(t[1], (E.Ramp, E.Broadcast)))
    elem, lanes = dt.element_of(e.dtype), dt.lanes_of(e.dtype)
    out: E.PrimExpr = E.Broadcast(E.const(0, elem), lanes)
    for n, (k, x) in enumerate(terms):
        term = x if abs(k) == 1 else E.Mul(x, E.Broadcast(E.const(abs(k), elem), lanes))
        if n == 0 and k > 0:
            out = term
        else:
            out = E.Add(out, term) if k > 0 else E.Sub(out, term)
    return visit(out)
