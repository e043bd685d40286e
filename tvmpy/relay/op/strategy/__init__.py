"""Operator strategies (TVM's ``relay.op.strategy``): per operator and target, the
implementations (a compute plus its schedule) with priorities.

``fstrategy(attrs, inputs, out_type, target) -> OpStrategy``; ``OpStrategy.add_implementation``
records ``(compute, schedule, name, plevel)``; the implementation with the highest ``plevel``
wins (ties: the first added). Per-target dispatch: ``register_strategy_func(op, "x86", fn)``
overrides the ``"generic"`` one for targets whose kind is "llvm" or "c" (TVM's
``generic_func``/``register`` pair). Importing this package registers every strategy
(``generic.py`` computes and fallbacks, ``x86.py`` the x86 schedules) and every layout hook
of the AlterOpLayout pass (``alter_layout.py`` the target-dispatched defaults,
``x86_alter_op.py`` and ``x86_winograd.py`` the x86 layout and algorithm policy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["OpImplementation", "OpStrategy", "register_strategy_func", "dispatch_key",
           "select_implementation"]


class OpImplementation:
    """One implementation: ``compute(attrs, inputs, out_type) -> [te.Tensor]`` and
    ``schedule(attrs, outs, target) -> te.Schedule``."""

    __slots__ = ("compute", "schedule", "name", "plevel")

    def __init__(self, compute: Callable[..., Any], schedule: Callable[..., Any], name: str,
                 plevel: int):
        self.compute = compute
        self.schedule = schedule
        self.name = name
        self.plevel = plevel

    def __repr__(self) -> str:
        return f"OpImplementation({self.name!r}, plevel={self.plevel})"


class OpStrategy:
    """The implementations of one call for one target, with priorities."""

    def __init__(self) -> None:
        self.implementations: list[OpImplementation] = []

    def add_implementation(self, compute: Callable[..., Any], schedule: Callable[..., Any],
                           name: str = "default", plevel: int = 10) -> None:
        self.implementations.append(OpImplementation(compute, schedule, name, int(plevel)))

    def best(self) -> OpImplementation:
        if not self.implementations:
            raise ValueError("the strategy has no implementation")
        return max(self.implementations, key=lambda i: i.plevel)  # max keeps the first on ties


# op name -> dispatch key ("generic", "x86") -> strategy function
_STRATEGIES: dict[str, dict[str, Callable[..., Any]]] = {}


def dispatch_key(target: Any) -> str:
    """The strategy family of a target: "x86" for llvm / c CPU targets, else "generic"."""
    kind = str(getattr(target, "kind", target) or "llvm").split()[0]
    return "x86" if kind in ("llvm", "c") else "generic"


def register_strategy_func(op_name: str, key: str, fn: Callable[..., Any] | None = None) -> Any:
    """Register ``fn(attrs, inputs, out_type, target) -> OpStrategy`` for ``op_name`` and
    dispatch ``key``; also installs the dispatcher as the op's ``FTVMStrategy``."""
    from ..registry import register_strategy

    def _set(f: Callable[..., Any]) -> Callable[..., Any]:
        table = _STRATEGIES.setdefault(op_name, {})
        table[key] = f

        def dispatcher(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
            k = dispatch_key(target)
            return table.get(k, table.get("generic"))(attrs, inputs, out_type, target)

        dispatcher.table = table  # type: ignore[attr-defined]
        if len(table) == 1:
            register_strategy(op_name, dispatcher)
        return f

    return _set if fn is None else _set(fn)


def select_implementation(op: Any, attrs: Any, inputs: Any, out_type: Any,
                          target: Any) -> OpImplementation:
    """The highest-priority implementation of ``op`` for this call and target."""
    fstrategy = op.get_attr("FTVMStrategy")
    if fstrategy is not None:
        return fstrategy(attrs, inputs, out_type, target).best()
    fcompute = op.get_attr("FTVMCompute")
    if fcompute is None or op.pattern > 3:  # 3: OpPattern.COMM_REDUCE
        raise NotImplementedError(f"operator {op.name!r} has no strategy (compute + schedule) "
                                  "registered")
    # TVM's fallback: an injective / reduction op with only a compute gets the target's
    # injective or reduce schedule
    from .generic import pattern_schedule

    return OpImplementation(fcompute, pattern_schedule(op.pattern, target),
                            f"{op.name}.fcompute", 0)


# registers the strategies and the layout hooks (generic defaults, then the x86 overrides)
from . import alter_layout, generic, x86, x86_alter_op  # noqa: E402,F401
