"""Alignment facts for vector memory accesses: a small modular-set analysis of index expressions.

``modular(e, env)`` returns ``(coeff, base)`` such that every value of ``e`` is ``coeff*k + base``
(coeff 0: the exact constant ``base``). Loop and let variables found in ``env`` use their recorded
facts; any other variable is ``1*k + 0`` (nothing known). From that, :func:`access_alignment` gives
the largest power of two in bytes that provably divides the address of an access.
"""

from __future__ import annotations

from math import gcd

from ..ir import dtype as dt
from ..tir import expr as E

__all__ = ["modular", "access_alignment"]


def modular(e: E.PrimExpr, env: dict[int, tuple[int, int]]) -> tuple[int, int]:
    if isinstance(e, E.IntImm):
        return 0, e.value
    if isinstance(e, E.Var):
        return env.get(id(e), (1, 0))
    if isinstance(e, (E.Add, E.Sub)):
        ca, ba = modular(e.a, env)
        cb, bb = modular(e.b, env)
        c = gcd(ca, cb)
        b = ba + bb if isinstance(e, E.Add) else ba - bb
        return c, (b % c if c else b)
    if isinstance(e, E.Mul):
        ca, ba = modular(e.a, env)
        cb, bb = modular(e.b, env)
        # (ca*x + ba)(cb*y + bb) = ca*cb*xy + ca*bb*x + cb*ba*y + ba*bb
        c = gcd(gcd(ca * cb, ca * bb), cb * ba)
        b = ba * bb
        return abs(c), (b % c if c else b)
    if isinstance(e, E.Cast) and dt.is_integer(e.dtype) and dt.is_integer(e.value.dtype):
        return modular(e.value, env)
    if isinstance(e, E.Let):
        return modular(e.body, {**env, id(e.var): modular(e.value, env)})
    if isinstance(e, E.FloorDiv):
        ca, ba = modular(e.a, env)
        if isinstance(e.b, E.IntImm) and e.b.value > 0:
            d = e.b.value
            if ca == 0:
                return 0, ba // d
            if ca % d == 0 and ba % d == 0:
                return ca // d, ba // d
        return 1, 0
    return 1, 0


def _pow2_divisor(v: int, cap: int) -> int:
    if v == 0:
        return cap
    p = v & -v
    return min(p, cap)


def access_alignment(index: E.PrimExpr, env: dict[int, tuple[int, int]], elem_bytes: int,
                     buffer_alignment: int) -> int:
    """Provable alignment (bytes) of ``data + index*elem_bytes`` when ``data`` is aligned to
    ``buffer_alignment``; at least the natural alignment ``elem_bytes`` (power of two)."""
    natural = elem_bytes if elem_bytes & (elem_bytes - 1) == 0 else 1
    cap = max(natural, buffer_alignment)
    c, b = modular(index, env)
    a = min(_pow2_divisor(abs(c) * elem_bytes, cap), _pow2_divisor(abs(b) * elem_bytes, cap))
    return max(natural, a)
