"""A small reference evaluator for integer/boolean expressions, written independently of the
simplifier: Python floor semantics for floordiv/floormod, C truncation for truncdiv/truncmod,
two's complement wraparound on casts; ``and``/``or``/``select`` evaluate both operands (as
generated code may), ``if_then_else`` only the chosen branch. Raises ``Undefined`` for division by zero and for values
leaving int32 (the simplifier assumes index arithmetic does not overflow). Vectors (Ramp,
Broadcast and operations on them) evaluate to lists, lane by lane.

Expressions are compiled once into Python closures, so sampling many assignments is cheap."""

from __future__ import annotations

from collections.abc import Callable

from tvmpy.tir import expr as E

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Undefined(Exception):
    """The expression has no defined value for this assignment."""


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _check(v: int) -> int:
    if not INT32_MIN <= v <= INT32_MAX:
        raise Undefined("overflow")
    return v


def _nonzero(b: int) -> int:
    if b == 0:
        raise Undefined("division by zero")
    return b


_OPS: dict[type, Callable[[int, int], int]] = {
    E.Add: lambda a, b: _check(a + b),
    E.Sub: lambda a, b: _check(a - b),
    E.Mul: lambda a, b: _check(a * b),
    E.FloorDiv: lambda a, b: _check(a // _nonzero(b)),
    E.FloorMod: lambda a, b: a % _nonzero(b),
    E.Div: lambda a, b: _check(_tdiv(a, _nonzero(b))),
    E.Mod: lambda a, b: a - b * _tdiv(a, _nonzero(b)),
    E.Min: min,
    E.Max: max,
    E.EQ: lambda a, b: int(a == b),
    E.NE: lambda a, b: int(a != b),
    E.LT: lambda a, b: int(a < b),
    E.LE: lambda a, b: int(a <= b),
    E.GT: lambda a, b: int(a > b),
    E.GE: lambda a, b: int(a >= b),
}

_COMPILED: dict[int, tuple[object, Callable]] = {}


def evaluate(e, env: dict):
    """Value of ``e`` with Var -> int bindings in ``env`` (keys: Var objects)."""
    hit = _COMPILED.get(id(e))
    if hit is None or hit[0] is not e:
        if len(_COMPILED) > 50_000:
            _COMPILED.clear()
        hit = (e, compile_expr(e))
        _COMPILED[id(e)] = hit
    return hit[1](env)


def compile_expr(e) -> Callable[[dict], object]:
    if isinstance(e, E.IntImm):
        v = e.value
        return lambda env: v
    if isinstance(e, E.Var):

        def var(env, e=e):
            if e not in env:
                raise KeyError(f"unbound variable {e.name}")
            return env[e]

        return var
    if isinstance(e, E.Ramp):
        base, stride, lanes = compile_expr(e.base), compile_expr(e.stride), e.lanes
        return lambda env: [_check(base(env) + stride(env) * n) for n in range(lanes)]
    if isinstance(e, E.Broadcast):
        value, lanes = compile_expr(e.value), e.lanes
        return lambda env: [value(env)] * lanes
    if isinstance(e, E.Select):  # both sides may be evaluated (TIR semantics)
        c, t, f = (compile_expr(p) for p in (e.condition, e.true_value, e.false_value))

        def select(env):
            tv, fv = t(env), f(env)
            return tv if c(env) else fv

        return select
    if isinstance(e, E.Call) and e.op == "if_then_else":  # only the chosen branch
        c, t, f = (compile_expr(p) for p in e.args)
        return lambda env: t(env) if c(env) else f(env)
    if isinstance(e, E.Call):
        if e.op == "likely":
            return compile_expr(e.args[0])
        raise NotImplementedError(e.op)
    if isinstance(e, E.Not):
        a = compile_expr(e.a)
        return lambda env: int(not a(env))
    if isinstance(e, E.Cast):
        a = compile_expr(e.value)
        if e.dtype == "bool":
            return lambda env: int(a(env) != 0)
        bits = int(e.dtype[3:])

        def cast(env):
            v = a(env) & ((1 << bits) - 1)
            return v - (1 << bits) if v >= 1 << (bits - 1) else v

        return cast
    if isinstance(e, (E.And, E.Or)):  # no short circuit: both operands are evaluated in TIR
        a, b = compile_expr(e.a), compile_expr(e.b)
        if isinstance(e, E.And):
            return lambda env: int(bool(a(env)) & bool(b(env)))
        return lambda env: int(bool(a(env)) | bool(b(env)))
    if isinstance(e, E.BinaryOp):
        a, b, op = compile_expr(e.a), compile_expr(e.b), _OPS[type(e)]
        if "x" in e.dtype:  # vector: lane by lane
            return lambda env: [op(x, y) for x, y in zip(a(env), b(env))]
        return lambda env: op(a(env), b(env))
    raise NotImplementedError(type(e).__name__)
