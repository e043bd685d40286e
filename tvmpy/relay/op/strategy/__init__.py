"""Operator strategies (TVM's ``relay.op.strategy``): per operator and target, the
implementations (a compute plus its schedule) with priorities.

``fstrategy(attrs, inputs, out_type, target) -> OpStrategy``; ``OpStrategy.add_implementation``
records ``(compute, schedule, name, plevel)``; the implementation with the highest ``plevel``
wins (ties: the first added). Per-target dispatch goes by the target's keys, as TVM's
``@conv2d_strategy.register("cpu")``: each op's strategy is a ``target.generic_func`` whose
default is the one registered for ``"generic"``; ``register_strategy_func(op, "cpu", fn)`` makes
``fn`` serve every target whose ``keys`` contain "cpu" (llvm, c; the first of the target's keys
with a strategy wins). Importing this package registers every strategy (``generic.py`` computes,
fallbacks and the target-dispatched injective / reduce schedules, ``x86.py`` the strategies and
schedules of the key "cpu") and every layout hook of the AlterOpLayout pass (``alter_layout.py``
the target-dispatched defaults, ``x86_alter_op.py`` and ``x86_winograd.py`` the x86 layout and
algorithm policy). A new target adds its own files registering for its key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....target import GenericFunc, as_target

__all__ = ["OpImplementation", "OpStrategy", "register_strategy_func",
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


# op name -> its strategy: the "generic" one, overridden per target key
_STRATEGIES: dict[str, GenericFunc] = {}


def register_strategy_func(op_name: str, key: str, fn: Callable[..., Any] | None = None) -> Any:
    """Register ``fn(attrs, inputs, out_type, target) -> OpStrategy`` for ``op_name`` and the
    target key ``key`` ("generic": the default of every target, registered first; it also
    installs the op's ``FTVMStrategy``, which dispatches on the target it is called with)."""
    from ..registry import register_strategy

    def _set(f: Callable[..., Any]) -> Callable[..., Any]:
        gfunc = _STRATEGIES.get(op_name)
        if key != "generic":
            if gfunc is None:
                raise ValueError(f"{op_name}: register its 'generic' strategy before the "
                                 f"{key!r} one")
            gfunc.register(key, f)
            return f
        if gfunc is not None:
            raise ValueError(f"{op_name}: the 'generic' strategy is already registered")
        gfunc = _STRATEGIES[op_name] = GenericFunc(f)

        def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
            tgt = as_target(target, default="llvm")
            return gfunc.dispatch(tgt)(attrs, inputs, out_type, tgt)

        fstrategy.generic_func = gfunc  # type: ignore[attr-defined]
        register_strategy(op_name, fstrategy)
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


# registers the strategies and the layout hooks (generic defaults, then the "cpu" overrides)
from . import alter_layout, dyn, generic, gpu, gpu_tuned, x86, x86_alter_op  # noqa: E402,F401
