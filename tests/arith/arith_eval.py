"""A small reference evaluator for integer/boolean expressions, written independently of the
simplifier: Python floor semantics for floordiv/floormod, C truncation for truncdiv/truncmod,
two's complement wraparound on casts. Raises ``Undefined`` for division by zero and for values
leaving int32 (the simplifier assumes index arithmetic does not overflow)."""

from __future__ import annotations

from tvmpy.tir import expr as E

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Undefined(Exception):
    """The expression has no defined value for this assignment."""


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _check(v: int, dtype: str) -> int:
    if dtype == "bool":
        return v
    if not INT32_MIN <= v <= INT32_MAX:
        raise Undefined("overflow")
    return v


def evaluate(e, env: dict):
    """Value of ``e`` with Var -> int bindings in ``env`` (keys: Var objects); vectors (Ramp,
    Broadcast and operations on them) evaluate to lists, lane by lane."""
    if isinstance(e, E.Ramp):
        base, stride = evaluate(e.base, env), evaluate(e.stride, env)
        return [_check(base + stride * n, e.base.dtype) for n in range(e.lanes)]
    if isinstance(e, E.Broadcast):
        return [evaluate(e.value, env)] * e.lanes
    if isinstance(e, E.BinaryOp) and "x" in e.dtype:
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        elem = e.dtype.split("x")[0]
        return [_apply(type(e), elem, x, y) for x, y in zip(a, b)]
    if isinstance(e, E.Call) and e.op == "likely" and "x" in e.dtype:
        return evaluate(e.args[0], env)
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        if e not in env:
            raise KeyError(f"unbound variable {e.name}")
        return env[e]
    if isinstance(e, E.Select):
        c = evaluate(e.condition, env)
        return evaluate(e.true_value if c else e.false_value, env)
    if isinstance(e, E.Call):
        if e.op == "if_then_else":
            c = evaluate(e.args[0], env)
            return evaluate(e.args[1] if c else e.args[2], env)
        if e.op == "likely":
            return evaluate(e.args[0], env)
        raise NotImplementedError(e.op)
    if isinstance(e, E.Not):
        return int(not evaluate(e.a, env))
    if isinstance(e, E.Cast):
        v = evaluate(e.value, env)
        if e.dtype == "bool":
            return int(v != 0)
        bits = int(e.dtype[3:]) if e.dtype.startswith("int") else None
        v &= (1 << bits) - 1
        return v - (1 << bits) if v >= 1 << (bits - 1) else v
    if isinstance(e, E.And):
        return int(bool(evaluate(e.a, env)) and bool(evaluate(e.b, env)))
    if isinstance(e, E.Or):
        return int(bool(evaluate(e.a, env)) or bool(evaluate(e.b, env)))
    if isinstance(e, E.BinaryOp):
        return _apply(type(e), e.dtype, evaluate(e.a, env), evaluate(e.b, env))
    raise NotImplementedError(type(e).__name__)


def _apply(t: type, dtype: str, a: int, b: int) -> int:
    """The binary operation ``t`` on scalar values of ``dtype``."""
    if t in (E.FloorDiv, E.FloorMod, E.Div, E.Mod) and b == 0:
        raise Undefined("division by zero")
    ops = {
        E.Add: lambda: a + b, E.Sub: lambda: a - b, E.Mul: lambda: a * b,
        E.FloorDiv: lambda: a // b, E.FloorMod: lambda: a % b,
        E.Div: lambda: _tdiv(a, b), E.Mod: lambda: a - b * _tdiv(a, b),
        E.Min: lambda: min(a, b), E.Max: lambda: max(a, b),
        E.EQ: lambda: int(a == b), E.NE: lambda: int(a != b), E.LT: lambda: int(a < b),
        E.LE: lambda: int(a <= b), E.GT: lambda: int(a > b), E.GE: lambda: int(a >= b),
    }
    return _check(ops[t](), dtype)
