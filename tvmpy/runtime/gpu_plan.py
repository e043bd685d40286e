"""GPU launch plans: what a GPU module's host function does, as data (GPU_API.md).

A host function of a GPU build is a list of kernel launches whose grid/block sizes and scalar
arguments are expressions of the function's shape variables and scalar parameters. The code
generator writes it as JSON; the runtime evaluates it per call (no generated host code)::

    {"name": "add", "params": [
        {"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
        {"name": "alpha", "kind": "scalar", "dtype": "float32"}],
     "launches": [{"kernel": "add_kernel0", "grid": [["floordiv", ["+", "n", 63], 64], 1, 1],
                   "block": [64, 1, 1], "shared": 0,
                   "args": [{"buffer": "A"}, {"expr": "n", "dtype": "int32"}]}]}

An expression is an int or float literal, a variable name (a shape variable bound from a buffer's
shape, or a scalar parameter), or a list ``[op, *operands]`` with op one of
``+ - * floordiv floormod div mod min max select < <= > >= == != and or not``.
``div``/``mod`` truncate (C semantics), ``floordiv``/``floormod`` round down. Only the runtime
and numpy are needed to evaluate a plan, so it lives here for every GPU runtime (CUDA, OpenCL).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PlanError", "eval_expr", "bind_params", "launch_values", "check_plan"]


class PlanError(ValueError):
    """A malformed plan, or arguments that do not fit it."""


def _tdiv(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _tmod(a: Any, b: Any) -> Any:
    return a - _tdiv(a, b) * b


def _nonzero(f: Any) -> Any:
    def g(a: Any, b: Any) -> Any:
        if b == 0:
            raise PlanError("launch plan: division by zero in a grid/argument expression")
        return f(a, b)
    return g


_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul,
           "floordiv": _nonzero(operator.floordiv), "floormod": _nonzero(operator.mod),
           "div": _nonzero(_tdiv), "mod": _nonzero(_tmod), "min": min, "max": max,
           "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq, "!=": operator.ne,
           "and": lambda a, b: bool(a) and bool(b), "or": lambda a, b: bool(a) or bool(b)}


def eval_expr(expr: Any, env: Mapping[str, Any]) -> Any:
    """The value of a plan expression under ``env`` (variable name -> value)."""
    if isinstance(expr, bool):
        return int(expr)
    if isinstance(expr, (int, float)):
        return expr
    if isinstance(expr, str):
        if expr not in env:
            raise PlanError(f"launch plan: unbound variable {expr!r} (known: "
                            f"{', '.join(sorted(env)) or 'none'})")
        return env[expr]
    if isinstance(expr, (list, tuple)) and expr and isinstance(expr[0], str):
        op, args = expr[0], expr[1:]
        if op in _BINARY:
            if len(args) != 2:
                raise PlanError(f"launch plan: {op!r} takes 2 operands, got {len(args)}")
            return _BINARY[op](eval_expr(args[0], env), eval_expr(args[1], env))
        if op == "select" and len(args) == 3:
            return eval_expr(args[1] if eval_expr(args[0], env) else args[2], env)
        if op == "not" and len(args) == 1:
            return int(not eval_expr(args[0], env))
        raise PlanError(f"launch plan: unknown operator {op!r} with {len(args)} operands")
    raise PlanError(f"launch plan: malformed expression {expr!r}")


def check_plan(plan: Mapping[str, Any]) -> None:
    """Raise PlanError when ``plan`` lacks the fields the runtime reads."""
    for key in ("name", "params", "launches"):
        if key not in plan:
            raise PlanError(f"launch plan {plan.get('name', '?')!r} has no {key!r}")
    names = {p["name"] for p in plan["params"]}
    for ln in plan["launches"]:
        for key in ("kernel", "grid", "block", "args"):
            if key not in ln:
                raise PlanError(f"launch of {ln.get('kernel', '?')!r} has no {key!r}")
        if len(ln["grid"]) != 3 or len(ln["block"]) != 3:
            raise PlanError(f"launch of {ln['kernel']!r}: grid and block need 3 extents")
        for a in ln["args"]:
            if "buffer" in a and a["buffer"] not in names:
                raise PlanError(f"launch of {ln['kernel']!r} passes unknown buffer {a['buffer']!r}")


def bind_params(plan: Mapping[str, Any], shapes: Sequence[tuple[int, ...] | None],
                scalars: Sequence[Any]) -> dict[str, Any]:
    """The environment of one call: scalar parameters by name and shape variables bound from
    the buffers' shapes (``shapes[i]`` for buffer params, ``scalars[i]`` for scalar params, in
    parameter order). Mismatching constant extents or inconsistent shape variables raise."""
    env: dict[str, Any] = {}
    pending: list[tuple[str, Any, int]] = []
    for p, shape, val in zip(plan["params"], shapes, scalars):
        if p["kind"] != "buffer":
            env[p["name"]] = val
            continue
        want = p["shape"]
        assert shape is not None
        if len(want) != len(shape):
            raise PlanError(f"{plan['name']}: argument {p['name']} must have {len(want)} "
                            f"dimensions, got shape {tuple(shape)}")
        for axis, (w, got) in enumerate(zip(want, shape)):
            if isinstance(w, int):
                if w != got:
                    raise PlanError(f"{plan['name']}: argument {p['name']} has shape "
                                    f"{tuple(shape)}, expected {w} on axis {axis}")
            elif isinstance(w, str) and w not in env:
                env[w] = int(got)
            else:
                pending.append((p["name"], w, int(got)))
    for name, w, got in pending:
        if eval_expr(w, env) != got:
            raise PlanError(f"{plan['name']}: argument {name} has extent {got} where "
                            f"{w!r} = {eval_expr(w, env)} (inconsistent shape variables)")
    return env


def launch_values(launch: Mapping[str, Any], env: Mapping[str, Any]) -> tuple[
        tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared bytes) of one launch under ``env``; extents are checked
    positive."""
    grid = tuple(int(eval_expr(e, env)) for e in launch["grid"])
    block = tuple(int(eval_expr(e, env)) for e in launch["block"])
    shared = int(eval_expr(launch.get("shared", 0), env))
    for what, vals in (("grid", grid), ("block", block)):
        if any(v < 0 for v in vals):
            raise PlanError(f"launch of {launch['kernel']!r}: negative {what} extent {vals}")
    return grid, block, shared  # type: ignore[return-value]
