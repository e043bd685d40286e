"""Detection of linear (affine) index expressions in given variables.

Vectorization asks whether an index is ``base + stride * v`` in its loop var; loop
partitioning asks for the coefficients of a condition in the loop var.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir.functor import uses_var
from .sum_form import Sum, to_sum

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import Analyzer

__all__ = ["detect_linear_equation"]


def detect_linear_equation(
    expr: Any, vars: Sequence[Any], analyzer: Analyzer | None = None
) -> list[E.PrimExpr] | None:
    """``[c_0, ..., c_{n-1}, base]`` with ``expr == sum(c_i * vars[i]) + base``, where neither
    the coefficients nor the base contain any of ``vars``; None when ``expr`` is not linear in
    them (e.g. ``v // 2`` or ``v * v``)."""
    from .analyzer import Analyzer, is_index_dtype

    ana = analyzer or Analyzer()
    expr = E.convert(expr)
    vs = [v.var if isinstance(v, E.IterVar) else v for v in vars]
    for v in vs:
        if not isinstance(v, E.Var):
            raise TypeError(f"detect_linear_equation: vars must be Var, got {type(v).__name__}")
    if not dt.is_integer(expr.dtype) or dt.lanes_of(expr.dtype) != 1:
        return None
    targets = set(map(id, vs))
    simplified = ana.simplify(expr)
    if not is_index_dtype(expr.dtype):
        # narrow or unsigned types: only a bare var or a var-free expression
        if not uses_var(simplified, lambda x: id(x) in targets):
            return [E.const(0, expr.dtype) for _ in vs] + [simplified]
        for i, v in enumerate(vs):
            if simplified is v:
                out = [E.const(0, expr.dtype) for _ in vs] + [E.const(0, expr.dtype)]
                out[i] = E.const(1, expr.dtype)
                return out
        return None
    s = to_sum(simplified)
    coeffs = [Sum(expr.dtype) for _ in vs]
    base = Sum(expr.dtype, s.const)
    index = {id(v): i for i, v in enumerate(vs)}
    for c, atoms in s.items():
        hits = [n for n, a in enumerate(atoms) if id(a) in index]
        others = [a for n, a in enumerate(atoms) if n not in hits]
        if any(uses_var(a, lambda x: id(x) in targets) for a in others):
            return None  # a target var inside a non-linear atom
        if not hits:
            base.add_mono(tuple(atoms), c)
            continue
        if len(hits) > 1:
            return None  # product of target vars
        i = index[id(atoms[hits[0]])]
        if others:
            coeffs[i].add_mono(tuple(others), c)
        else:
            coeffs[i].const += c
    return [ana.simplify(x.to_expr()) for x in coeffs] + [ana.simplify(base.to_expr())]
