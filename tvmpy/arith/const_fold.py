"""Constant folding with the target's semantics.

Integers wrap around to their dtype's width (two's complement for signed, modulo 2**bits for
unsigned), ``Div``/``Mod`` are C's truncating division and remainder, ``FloorDiv``/``FloorMod``
round toward minus infinity. Floats are computed in double precision and rounded to the
dtype's precision (correctly rounded for + - * / on float16/32 inputs). Division by a constant
zero and float operations whose result depends on the backend's NaN rules are left unfolded.
"""

from __future__ import annotations

import math

from ..ir import dtype as dt
from ..tir import expr as E

__all__ = [
    "wrap_int",
    "round_float",
    "fold_binary",
    "fold_cast",
    "trunc_div",
    "trunc_mod",
    "dtype_int_range",
]


def dtype_int_range(dtype: str) -> tuple[int, int]:
    """The [min, max] of an integer (or bool) dtype's element type."""
    d = dt.parse(dtype)
    if d.kind == "bool":
        return 0, 1
    if d.kind == "uint":
        return 0, (1 << d.bits) - 1
    return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1


def wrap_int(value: int, dtype: str) -> int:
    """``value`` reduced to the range of the integer ``dtype`` (bool: nonzero -> 1)."""
    d = dt.parse(dtype)
    if d.kind == "bool":
        return 1 if value else 0
    value &= (1 << d.bits) - 1
    if d.kind == "int" and value >= 1 << (d.bits - 1):
        value -= 1 << d.bits
    return value


def round_float(value: float, dtype: str) -> float:
    """``value`` rounded to the precision of the float ``dtype``."""
    import numpy as np

    bits = dt.bits_of(dtype)
    if bits == 64:
        return float(value)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.float32(value) if bits == 32 else np.float16(value))


def trunc_div(a: int, b: int) -> int:
    """C integer division (rounds toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def trunc_mod(a: int, b: int) -> int:
    """C remainder: ``a - b * trunc_div(a, b)``; the sign follows ``a``."""
    return a - b * trunc_div(a, b)


def _int_op(cls: type, a: int, b: int) -> int | None:
    if cls is E.Add:
        return a + b
    if cls is E.Sub:
        return a - b
    if cls is E.Mul:
        return a * b
    if cls is E.Div:
        return None if b == 0 else trunc_div(a, b)
    if cls is E.Mod:
        return None if b == 0 else trunc_mod(a, b)
    if cls is E.FloorDiv:
        return None if b == 0 else a // b
    if cls is E.FloorMod:
        return None if b == 0 else a % b
    if cls is E.Min:
        return min(a, b)
    if cls is E.Max:
        return max(a, b)
    return None


def _cmp(cls: type, a: float, b: float) -> bool:
    if cls is E.EQ:
        return a == b
    if cls is E.NE:
        return a != b
    if cls is E.LT:
        return a < b
    if cls is E.LE:
        return a <= b
    if cls is E.GT:
        return a > b
    if cls is E.GE:
        return a >= b
    raise TypeError(f"{cls.__name__} is not a comparison")


def _float_op(cls: type, a: float, b: float) -> float | None:
    if cls is E.Add:
        return a + b
    if cls is E.Sub:
        return a - b
    if cls is E.Mul:
        if (math.isinf(a) and b == 0) or (math.isinf(b) and a == 0):
            return math.nan
        return a * b
    if cls is E.Div:
        if b == 0:
            if a == 0 or math.isnan(a):
                return math.nan
            sign = math.copysign(1.0, a) * math.copysign(1.0, b)
            return math.inf * sign
        return a / b
    if cls in (E.Min, E.Max):
        if math.isnan(a) or math.isnan(b):
            return None  # backends disagree on NaN (minnum vs numpy.minimum)
        return min(a, b) if cls is E.Min else max(a, b)
    return None


def fold_binary(cls: type, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr | None:
    """The folded constant of ``cls(a, b)`` for scalar constants ``a``, ``b``, else None."""
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        if issubclass(cls, E.CmpOp):
            return E.IntImm("bool", _cmp(cls, a.value, b.value))
        if cls is E.And:
            return E.IntImm("bool", a.value and b.value)
        if cls is E.Or:
            return E.IntImm("bool", a.value or b.value)
        r = _int_op(cls, a.value, b.value)
        if r is None:
            return None
        return E.IntImm(a.dtype, wrap_int(r, a.dtype))
    if isinstance(a, E.FloatImm) and isinstance(b, E.FloatImm):
        if issubclass(cls, E.CmpOp):
            return E.IntImm("bool", _cmp(cls, a.value, b.value))
        # operands rounded to the dtype first (a FloatImm may hold more precision than its type)
        fr = _float_op(cls, round_float(a.value, a.dtype), round_float(b.value, b.dtype))
        if fr is None:
            return None
        try:
            return E.FloatImm(a.dtype, round_float(fr, a.dtype))
        except OverflowError:  # pragma: no cover - python float overflow
            return None
    return None


def fold_cast(dtype: str, value: E.PrimExpr) -> E.PrimExpr | None:
    """``Cast(dtype, value)`` of a scalar constant, else None (NaN/inf to int stays unfolded)."""
    if dt.lanes_of(dtype) != 1:
        return None
    d = dt.parse(dtype)
    if isinstance(value, E.IntImm):
        if d.kind == "float":
            return E.FloatImm(dtype, round_float(float(value.value), dtype))
        if d.kind in ("int", "uint", "bool"):
            return E.IntImm(dtype, wrap_int(value.value, dtype))
        return None
    if isinstance(value, E.FloatImm):
        v = value.value
        if d.kind == "float":
            return E.FloatImm(dtype, round_float(v, dtype))
        if d.kind == "bool":
            return None if math.isnan(v) else E.IntImm(dtype, v != 0)
        if d.kind in ("int", "uint"):
            if math.isnan(v) or math.isinf(v):
                return None
            iv = int(v)  # truncates toward zero, like C
            lo, hi = dtype_int_range(dtype)
            if not lo <= iv <= hi:
                return None  # undefined behaviour in C; leave it to the target
            return E.IntImm(dtype, iv)
    return None
