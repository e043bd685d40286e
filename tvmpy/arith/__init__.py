"""Integer arithmetic analysis (TVM's ``tvm.arith``): the simplifier every lowering pass uses on
index expressions, proofs (``can_prove``), constant bounds, modular sets, symbolic intervals.

Public API::

    ana = Analyzer()
    ana.bind(i, Range(0, n))            # or bind(v, expr): v is replaced by expr
    with ana.constraint_scope(i < m):   # facts hold inside the block
        ana.simplify(e); ana.can_prove(c); ana.can_prove_equal(a, b)
    ana.const_int_bound(e)  -> ConstIntBound(min_value, max_value)   (POS_INF / NEG_INF ends)
    ana.modular_set(e)      -> ModularSet(coeff, base)               (e in {coeff*k + base})
    ana.int_set(e, {v: Range | IntervalSet}) -> IntervalSet           (pos_inf / neg_inf ends)
    eval_set(e, dom_map), simplify(e), can_prove(c), detect_linear_equation(e, vars)

Soundness contract: index arithmetic (int32/int64) is assumed not to overflow and divisions to be
defined (as in TVM); ``can_prove`` answers True only for facts that hold for every value the
variables can take; floats are folded only when all operands are constants.

Modules, one concept each: ``const_fold`` (folding with wraparound and C/Python division
semantics), ``sum_form`` (canonical sums of monomials, div/mod split merging), ``simplifier``
(the rewrite engine) with ``divmod_rules``, ``const_int_bound``, ``modular_set``, ``int_set``
(``IntervalSet``, ``eval_set``), ``linear`` (``detect_linear_equation``), ``analyzer`` (the
``Analyzer`` that ties them to variable facts).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from .analyzer import Analyzer
from .const_int_bound import ConstIntBound
from .int_set import IntervalSet, eval_set, neg_inf, pos_inf
from .linear import detect_linear_equation
from .modular_set import ModularSet
from .sum_form import CLEAR_HOOKS, scope_generation

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
    with _plain_analyzer() as ana:
        return ana.simplify(expr)


def can_prove(cond: Any) -> bool:
    """``Analyzer().can_prove(cond)``."""
    with _plain_analyzer() as ana:
        return ana.can_prove(cond)


_LOCAL = threading.local()
CLEAR_HOOKS.append(lambda: _LOCAL.__dict__.pop("ana", None))  # this thread's, at least


@contextlib.contextmanager
def _plain_analyzer() -> Iterator[Analyzer]:
    """An Analyzer without facts, as good as a fresh one. Inside a compilation
    (``sum_form.cache_scope``) one per thread is reused until the scope's caches are cleared:
    lowering simplifies thousands of expressions that share sub-expressions, which its memo
    tables then answer (a fresh Analyzer per call recomputed them all). Re-entered (a
    simplification that itself calls :func:`simplify`) or outside a scope: a fresh one."""
    gen = scope_generation()
    if gen is None or getattr(_LOCAL, "busy", False):
        yield Analyzer()
        return
    ana = getattr(_LOCAL, "ana", None)
    if ana is None or _LOCAL.gen != gen:
        ana = _LOCAL.ana = Analyzer()
        _LOCAL.gen = gen
    _LOCAL.busy = True
    try:
        yield ana
    finally:
        _LOCAL.busy = False
