"""Intrinsic lowering rules per target kind: ``tvm.target.register_intrin_rule``.

The table lives here, with the targets; the loop-IR pass that applies it
(tir/transform/lower_intrin.py, ``LowerIntrin``) reads it. A rule takes the ``tir.Call`` of an
intrinsic of :mod:`tvmpy.tir.op` and returns an equivalent expression (or None to keep the call).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tir.op import INTRINSICS

__all__ = ["RULES", "register_intrin_rule"]

Rule = Callable[[Any], Any]

# target kind -> intrinsic name -> rule; empty by default: both CPU code generators implement
# every intrinsic themselves
RULES: dict[str, dict[str, Rule]] = {"llvm": {}, "c": {}, "interp": {}}


def register_intrin_rule(target: str, op: str, f: Rule | None = None, level: int = 10,
                         override: bool = False) -> Any:
    """TVM's ``tvm.target.register_intrin_rule("llvm", "exp", rule)``: lower calls of intrinsic
    ``op`` with ``rule(call) -> expr`` for targets of kind ``target`` (also a decorator when ``f``
    is omitted). The rule gets a ``tir.Call`` whose ``op`` is the intrinsic's name ("exp")."""
    name = op[4:] if op.startswith("tir.") else op
    if name not in INTRINSICS:
        raise ValueError(f"register_intrin_rule: unknown intrinsic {op!r}; custom intrinsics are "
                         f"not supported, known: {', '.join(sorted(INTRINSICS))}")

    def register(rule: Rule) -> Rule:
        if not override and name in RULES.get(target, {}):
            raise ValueError(f"register_intrin_rule: {target}.{name} already has a rule; pass "
                             "override=True to replace it")
        RULES.setdefault(target, {})[name] = rule
        return rule

    return register if f is None else register(f)
