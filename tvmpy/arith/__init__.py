"""Integer arithmetic analysis (TVM's ``tvm.arith``): the simplifier every lowering pass uses on
index expressions, proofs (``can_prove``), constant bounds, modular sets, symbolic intervals.

Modules, one concept each: ``const_fold`` (folding with wraparound and C/Python division
semantics), ``sum_form`` (canonical sums of monomials), ``simplifier`` (the rewrite engine),
``const_int_bound``, ``modular_set``, ``int_set`` (``IntervalSet``, ``eval_set``), ``linear``
(``detect_linear_equation``), ``analyzer`` (the ``Analyzer`` that ties them to variable facts).
"""

from __future__ import annotations

from typing import Any

from .analyzer import Analyzer
from .const_int_bound import ConstIntBound
from .int_set import IntervalSet, eval_set, neg_inf, pos_inf
from .linear import detect_linear_equation
from .modular_set import ModularSet

__all__ = [
    "Analyzer",
    "ConstIntBound",
    "ModularSet",
    "IntervalSet",
    "eval_set",
    "pos_inf",
    "neg_inf",
    "detect_linear_equation",
    "simplify",
    "can_prove",
]


def simplify(expr: Any) -> Any:
    """Simplify ``expr`` with a fresh Analyzer (no variable facts beyond SizeVar >= 0)."""
    return Analyzer().simplify(expr)


def can_prove(cond: Any) -> bool:
    """``Analyzer().can_prove(cond)``."""
    return Analyzer().can_prove(cond)
