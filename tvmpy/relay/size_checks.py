"""Run-time size equalities: what an operator needs of its ``relay.Any`` dimensions.

Each ``relay.Any()`` is a size variable of its own, so a type relation cannot prove that two of
them are equal where the operator needs it (the non-axis dimensions of ``concatenate``, both
sides of a broadcast, the reduction sizes of ``matmul``...). As in TVM (whose relations unify an
``Any`` with the other size and whose shape functions assert at run time), the relation accepts
them and records the equality here (``require_same``), on the call being typed; then:

- lowering (backend/te_compiler.py) *unifies* the recorded sizes inside the kernel
  (``unifier``): its placeholders share one size variable, so the operator's compute accepts
  them and the kernel's own argument check binds them to one value;
- the executors check every recorded equality of a call before any kernel runs, naming the
  operator and the dimensions: the graph executor once per input shapes (the checks ride in
  the graph JSON, node attribute ``size_checks``), the VM through its segments (graph
  executors) and the interpreter per call (``check_values``).

A broadcast of two ``Any`` (``bcast``) is numpy's rule in the interpreter (equal, or one of them
1); a compiled kernel was built for equal sizes, so there a size-1 side is refused, clearly.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from ..runtime.graph_json import size_violation
from ..tir import expr as _te
from .ty import Dim, dim_equal, dim_str, has_any, is_any

__all__ = ["SizeEq", "require_same", "collecting", "size_checks_of", "set_size_checks",
           "unifier", "dim_json", "violation", "check_values"]


class SizeEq(NamedTuple):
    """``lhs`` and ``rhs`` must be the same size at run time (``bcast``: or one of them 1, where
    numpy broadcasting is run). ``lhs_what``/``rhs_what`` name the dimensions ("dimension 1 of
    field 1")."""

    lhs: Dim
    rhs: Dim
    lhs_what: str
    rhs_what: str
    bcast: bool = False

    def __str__(self) -> str:
        return (f"{self.lhs_what} ({dim_str(self.lhs)}) == {self.rhs_what} ({dim_str(self.rhs)})"
                + (" or either is 1" if self.bcast else ""))


_SINKS: list[list[SizeEq]] = []


@contextmanager
def collecting() -> Iterator[list[SizeEq]]:
    """The equalities the relations called inside record (type inference: one per call)."""
    sink: list[SizeEq] = []
    _SINKS.append(sink)
    try:
        yield sink
    finally:
        _SINKS.pop()


def _rank(d: Dim) -> int:
    """Which of two unified dimensions a relation keeps: a constant, an expression, an ``Any``."""
    return 0 if isinstance(d, int) else 2 if is_any(d) else 1


def require_same(a: Dim, b: Dim, a_what: str, b_what: str, bcast: bool = False) -> Dim | None:
    """The size two dimensions that must be equal share: ``a`` when provably equal; when either
    involves an ``Any``, the more specific of the two, the equality recorded for the run-time
    check; None when they are provably different (the relation reports it)."""
    if dim_equal(a, b):
        return a
    if not (has_any((a,)) or has_any((b,))):
        return None
    if _SINKS:
        _SINKS[-1].append(SizeEq(a, b, a_what, b_what, bcast))
    return b if _rank(b) < _rank(a) else a


# ---- the equalities of a typed call (kept beside it: relay nodes have fixed slots) ------------
_BY_CALL: dict[int, tuple[weakref.ref, tuple[SizeEq, ...]]] = {}


def set_size_checks(call: Any, checks: Sequence[SizeEq]) -> None:
    key = id(call)
    if not checks:
        _BY_CALL.pop(key, None)
        return

    def drop(ref: weakref.ref, key: int = key) -> None:
        if _BY_CALL.get(key, (None,))[0] is ref:
            del _BY_CALL[key]

    _BY_CALL[key] = (weakref.ref(call, drop), tuple(checks))


def size_checks_of(call: Any) -> tuple[SizeEq, ...]:
    """The run-time equalities of the typed operator call ``call`` (empty when none): those type
    inference recorded, or (a call a pass rebuilt with its type copied) its relation's again."""
    got = _BY_CALL.get(id(call))
    if got is not None and got[0]() is call:
        return got[1]
    rel = getattr(getattr(call, "op", None), "type_rel", None)
    if rel is None or getattr(call, "_checked_type", None) is None:
        return ()
    try:
        types = [a.checked_type for a in call.args]
        with collecting() as sink:
            rel(types, call.attrs)
    except Exception:  # noqa: BLE001 -- (typed already: cannot fail; never worse than before)
        return ()
    set_size_checks(call, sink)
    return tuple(sink)


# ---- kernels: one size variable for the unified ones ------------------------------------------
def unifier(checks: Iterable[SizeEq]) -> dict[Any, Dim]:
    """A substitution ``Any -> dim`` making every equality of ``checks`` hold by construction:
    ``Any`` to ``Any`` or to a constant (an equality between two expressions is left to the
    run-time check). Keyed by the variable objects."""
    parent: dict[int, Any] = {}
    objs: dict[int, Any] = {}

    def find(d: Any) -> Any:
        while isinstance(d, _te.Var) and id(d) in parent:
            d = parent[id(d)]
        return d

    for c in checks:
        if c.bcast:  # topi broadcasts a run-time size of 1 itself
            continue
        x, y = find(c.lhs), find(c.rhs)
        if x is y or (isinstance(x, int) and isinstance(y, int)):
            continue
        if is_any(x) and (is_any(y) or isinstance(y, int)):
            parent[id(x)], objs[id(x)] = y, x
        elif is_any(y) and isinstance(x, int):
            parent[id(y)], objs[id(y)] = x, y
    return {objs[k]: find(objs[k]) for k in parent}


def substitute(shape: Sequence[Any], sub: dict[Any, Dim]) -> tuple[Any, ...]:
    """``shape`` with the unified variables replaced (whole dimensions only)."""
    if not sub:
        return tuple(shape)
    ids = {id(k): v for k, v in sub.items()}
    return tuple(ids.get(id(d), d) for d in shape)


# ---- run time -------------------------------------------------------------------------------
def dim_json(d: Dim) -> int | str:
    """A dimension as the graph JSON writes it (the printed expression for a symbolic one)."""
    d = getattr(d, "value", d)
    return int(d) if isinstance(d, int) else str(d)


def violation(check: SizeEq, a: int, b: int) -> str | None:
    """Why the values ``a``/``b`` of ``check`` break it (None when they do not)."""
    return size_violation(check.lhs_what, check.rhs_what, a, b, check.bcast)


def check_values(op_name: str, where: str, checks: Sequence[SizeEq], arg_types: Sequence[Any],
                 arg_shapes: Sequence[Sequence[int]]) -> None:
    """The interpreter's check of one call: bind the size variables from the arguments' actual
    shapes (``arg_types``/``arg_shapes`` flattened alike) and raise ValueError naming the
    operator, ``where`` and the dimensions when an equality fails."""
    from ..runtime.function import compile_dim_expr

    env: dict[str, int] = {}
    for t, shape in zip(arg_types, arg_shapes):
        for d, n in zip(t.shape, shape):
            if isinstance(d, _te.Var):
                env.setdefault(d.name, int(n))
    for c in checks:
        try:
            vals = [compile_dim_expr(str(dim_json(d)))[0](env) for d in (c.lhs, c.rhs)]
        except (KeyError, ValueError, ZeroDivisionError):
            continue  # a size none of the arguments shows: the operator checks it
        why = violation(c, vals[0], vals[1])
        if why:
            raise ValueError(f"{op_name} ({where}): {why}")
