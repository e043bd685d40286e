"""Operator strategies (TVM's ``relay.op.strategy``): per operator and target, the
implementations (a compute plus its schedule) with priorities.

``fstrategy(attrs, inputs, out_type, target) -> OpStrategy``; ``OpStrategy.add_implementation``
records ``(compute, schedule, name, plevel)``; the implementation with the highest ``plevel``
wins (ties: the first added). Per-target dispatch goes by the target's keys, as TVM's
``@conv2d_strategy.register("cpu")``: each op's strategy is a ``target.generic_func`` whose
default is the one registered for ``"generic"``; ``register_strategy_func(op, "cpu", fn)`` makes
``fn`` serve every target whose ``keys`` contain "cpu" (llvm, c; the first of the target's keys
with a strategy wins).

Where things live (one file per target kind):

* ``generic.py``: every op's compute (``COMPUTES``) and its "generic" strategy: where the op's
  attributes choose between computes, an explicit function (``conv2d_strategy``); otherwise
  :func:`generic.register_default_strategy`: the compute with the *target's* schedule for the
  op's fusion pattern (the ``generic_func``s ``schedule_injective`` / ``schedule_reduce`` /
  ``schedule_fallback``, which each target overrides), as TVM's ``register_injective_schedule``.
* ``x86.py`` (key "cpu") and ``gpu.py`` (key "gpu"): one explicit strategy function per op
  whose implementations differ there (``conv2d_strategy_cpu``, ``dense_strategy_gpu``, ...),
  choosing from the call's attributes and shapes, and the target's pattern schedules. An op
  without one uses the generic strategy, which then schedules with the target's pattern
  schedule.
* Tuned implementations (AutoTVM templates) join through ONE hook for every target:
  :func:`register_tuned_implementation` (template task name -> ``(compute, schedule)`` for a
  call, or None when the template does not apply, e.g. symbolic shapes) and
  :func:`tuned_implementation`, which a strategy function calls where it wants the template
  (x86: ``x86_matmul.py`` and ``x86.py``; gpu: ``gpu.py``).
* Helpers of one target keep its prefix (``x86_int8.py``, ``x86_alter_op.py`` and
  ``x86_winograd.py``: the x86 layout and algorithm policy of the AlterOpLayout pass, on the
  hooks of ``alter_layout.py``); ``dyn.py``, ``data_dependent.py``, ``index_check.py`` and
  ``bitserial.py`` hold the strategies of their op families.

A new target adds ONE file registering for its key, and an import line at the end of this
module; nothing shared changes. For example, a target whose ``keys`` contain "mytarget"::

    # relay/op/strategy/mytarget.py
    from ....topi import generic as topi_generic
    from . import OpStrategy, register_strategy_func
    from .generic import COMPUTES, schedule_injective, wrap_topi_schedule

    @schedule_injective.register("mytarget")      # every injective op, fused injective groups
    def schedule_injective_mytarget(attrs, outs, target):
        return topi_generic.schedule_injective(outs)

    @register_strategy_func("nn.softmax", "mytarget")   # an op with its own implementation
    def softmax_strategy_mytarget(attrs, inputs, out_type, target):
        s = OpStrategy()
        s.add_implementation(COMPUTES["nn.softmax"],
                             wrap_topi_schedule(topi_generic.schedule_injective),
                             "nn.softmax.mytarget", 10)
        return s

Every op it does not register keeps the generic strategy (with its pattern schedules).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....target import GenericFunc, as_target
from ..registry import OpPattern

__all__ = ["OpImplementation", "OpStrategy", "register_strategy_func",
           "register_tuned_implementation", "tuned_implementation", "select_implementation"]

Compute = Callable[..., Any]
Schedule = Callable[..., Any]


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


# AutoTVM template (its task name, e.g. "dense.x86") -> its implementation of a relay call
_TUNED: dict[str, Callable[..., tuple[Compute, Schedule] | None]] = {}


def register_tuned_implementation(template: str, fn: Callable[..., Any] | None = None) -> Any:
    """Register how the AutoTVM template ``template`` (its task name) implements a relay call:
    ``fn(attrs, inputs, out_type, target) -> (compute, schedule)``, or None when the template
    does not apply to the call (symbolic shapes, another layout). The one hook through which
    tuned implementations join the strategies of every target (a decorator without ``fn``)."""
    def _set(f: Callable[..., Any]) -> Callable[..., Any]:
        if template in _TUNED:
            raise ValueError(f"tuned implementation {template!r} is already registered")
        _TUNED[template] = f
        return f

    return _set if fn is None else _set(fn)


def tuned_implementation(template: str, attrs: Any, inputs: list, out_type: Any,
                         target: Any) -> tuple[Compute, Schedule] | None:
    """``(compute, schedule)`` of the AutoTVM template ``template`` for this call (its tuned
    config under ``autotvm.apply_history_best``, its default one otherwise), or None when it
    does not apply."""
    fn = _TUNED.get(template)
    if fn is None:
        raise KeyError(f"no tuned implementation is registered for template {template!r}")
    return fn(attrs, inputs, out_type, target)


def select_implementation(op: Any, attrs: Any, inputs: Any, out_type: Any,
                          target: Any) -> OpImplementation:
    """The highest-priority implementation of ``op`` for this call and target."""
    fstrategy = op.get_attr("FTVMStrategy")
    if fstrategy is not None:
        return fstrategy(attrs, inputs, out_type, target).best()
    fcompute = op.get_attr("FTVMCompute")
    if fcompute is None or op.pattern > OpPattern.COMM_REDUCE:
        raise NotImplementedError(f"operator {op.name!r} has no strategy (compute + schedule) "
                                  "registered")
    # TVM's fallback: an injective / reduction op with only a compute gets the target's
    # injective or reduce schedule
    from .generic import pattern_schedule

    return OpImplementation(fcompute, pattern_schedule(op.pattern, target),
                            f"{op.name}.fcompute", 0)


# registers the strategies and the layout hooks (generic defaults, then each target's file)
from . import alter_layout, dyn, generic, gpu, gpu_alter_op, vta, x86, x86_alter_op  # noqa: E402,F401,I001
