"""Intrinsic lowering rules per target kind: ``tvm.ir.register_intrin_lowering`` and
``tvm.target.register_intrin_rule``.

The table lives here, with the targets; the loop-IR pass that applies it
(tir/transform/lower_intrin.py, ``LowerIntrin``) reads it. A rule takes the ``tir.Call`` of an
intrinsic of :mod:`tvmpy.tir.op` (or of a custom one declared with ``tvm.ir.register_op_attr``)
and returns an equivalent expression (or None, or the call itself, to keep the call). Rules of
the target kind ``"default"`` apply to every target without a rule of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir import op as _irop
from ..tir.op import INTRINSICS

__all__ = ["RULES", "register_intrin_rule", "register_intrin_lowering", "rules_for"]

Rule = Callable[[Any], Any]

# target kind -> intrinsic name -> rule; empty by default: both CPU code generators implement
# every intrinsic themselves
RULES: dict[str, dict[str, Rule]] = {"llvm": {}, "c": {}, "interp": {}}
_LEVELS: dict[tuple[str, str], int] = {}  # (target kind, name) -> level of the rule in RULES


def _known(op: Any, who: str) -> str:
    if not isinstance(op, str):
        raise TypeError(f"{who}: the intrinsic must be a name or tvm.ir.Op, got {op!r}")
    name = _irop.op_key(op)
    if name not in INTRINSICS and not _irop.is_registered(name):
        raise ValueError(f"{who}: unknown intrinsic {op!r}; declare a custom one first with "
                         f"tvm.ir.register_op_attr({op!r}, 'TCallEffectKind', "
                         f"tvm.tir.CallEffectKind.Pure); known: {', '.join(sorted(INTRINSICS))}")
    return name


def _target_kind(target: Any, who: str) -> str:
    kind = getattr(target, "kind", target)
    kind = getattr(kind, "name", kind)
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"{who}: target must be a target kind such as 'llvm' or 'cuda', "
                        f"got {target!r}")
    return kind.split()[0]


def register_intrin_lowering(op_name: Any, target: Any = "default", f: Rule | None = None,
                             level: int = 10) -> Any:
    """TVM's ``tvm.ir.register_intrin_lowering("tir.exp", target="cuda", f=rule, level=99)``:
    lower calls of intrinsic ``op_name`` with ``rule(call) -> expr`` when building for targets
    of kind ``target`` ("default": every target). A decorator when ``f`` is omitted. TVM's
    plevel rule: a higher level replaces an existing rule, a lower one is ignored, an equal one
    is an error."""
    name = _known(op_name, "register_intrin_lowering")
    kind = _target_kind(target, "register_intrin_lowering")
    if not isinstance(level, int):
        raise TypeError(f"register_intrin_lowering: level must be an int, got {level!r}")

    def register(rule: Rule) -> Rule:
        if not callable(rule):
            raise TypeError(f"register_intrin_lowering: the rule for {op_name!r} must be "
                            f"callable, got {rule!r}")
        old = _LEVELS.get((kind, name))
        if old is not None and name in RULES.get(kind, {}):
            if old == level:
                raise ValueError(f"register_intrin_lowering: {op_name!r} already has a rule "
                                 f"for {kind!r} at level {level}; pass a higher level")
            if old > level:
                return rule
        RULES.setdefault(kind, {})[name] = rule
        _LEVELS[(kind, name)] = level
        return rule

    return register if f is None else register(f)


def register_intrin_rule(target: str, op: str, f: Rule | None = None, level: int = 10,
                         override: bool = False) -> Any:
    """TVM's ``tvm.target.register_intrin_rule("llvm", "exp", rule)``: lower calls of intrinsic
    ``op`` with ``rule(call) -> expr`` for targets of kind ``target`` (also a decorator when ``f``
    is omitted). The rule gets a ``tir.Call`` whose ``op`` is the intrinsic ("exp")."""
    name = _known(op, "register_intrin_rule")
    kind = _target_kind(target, "register_intrin_rule")

    def register(rule: Rule) -> Rule:
        if not override and name in RULES.get(kind, {}):
            raise ValueError(f"register_intrin_rule: {kind}.{name} already has a rule; pass "
                             "override=True to replace it")
        RULES.setdefault(kind, {})[name] = rule
        _LEVELS[(kind, name)] = level
        return rule

    return register if f is None else register(f)


def rules_for(kind: str) -> dict[str, Rule]:
    """The rules that apply to targets of ``kind``: its own over the ``"default"`` ones."""
    own = RULES.get(kind, {})
    default = RULES.get("default")
    return {**default, **own} if default else own
