"""Compilation targets."""

from collections.abc import Callable
from typing import Any

from .generic_func import GenericFunc, generic_func  # noqa: F401
from .target import Target, current_target  # noqa: F401


def create(target: Any) -> Target:
    """TVM v0.6's ``tvm.target.create("llvm ...")``: the same as ``Target(...)``."""
    return Target(target)


def register_intrin_rule(target: str, op: str, f: Callable[..., Any] | None = None,
                         level: int = 10, override: bool = False) -> Any:
    """TVM's ``tvm.target.register_intrin_rule("llvm", "exp", rule)``: lower calls of intrinsic
    ``op`` with ``rule(call) -> expr`` for targets of kind ``target`` (also a decorator when ``f``
    is omitted). The rule gets a ``tir.Call`` whose ``op`` is the intrinsic's name ("exp")."""
    from ..tir.op import INTRINSICS
    from ..tir.transform.lower_intrin import RULES
    from ..tir.transform.lower_intrin import register_intrin_rule as _register

    name = op[4:] if op.startswith("tir.") else op
    if name not in INTRINSICS:
        raise ValueError(f"register_intrin_rule: unknown intrinsic {op!r}; custom intrinsics are "
                         f"not supported, known: {', '.join(sorted(INTRINSICS))}")

    def register(rule: Callable[..., Any]) -> Callable[..., Any]:
        if not override and name in RULES.get(target, {}):
            raise ValueError(f"register_intrin_rule: {target}.{name} already has a rule; pass "
                             "override=True to replace it")
        _register(target, name, rule)
        return rule

    return register if f is None else register(f)
