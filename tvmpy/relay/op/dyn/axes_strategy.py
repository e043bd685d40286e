"""The strategies of the run-time axes / scalar operators (``dyn.sum``, ``dyn.trilu``,
``dyn.dft``, ...): their compute with the generic schedule (correct on every target), and for
the key "cpu" the x86 reduce or injective schedule (parallel outer loops, vectorized inner
ones), chosen by whether the kernel reduces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..strategy import OpStrategy, register_strategy_func
from ..strategy.generic import generic_schedule

__all__ = ["register_axes_strategy"]


def _cpu_schedule(reduces: bool) -> Callable[..., Any]:
    def schedule(attrs: Any, outs: list, target: Any) -> Any:
        from ....topi import x86

        return (x86.schedule_reduce if reduces else x86.schedule_injective)(outs)
    return schedule


def register_axes_strategy(name: str, compute: Callable[..., list], reduces: bool) -> None:
    """Register ``compute``'s generic and "cpu" strategies for operator ``name``."""
    def generic(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        s.add_implementation(compute, generic_schedule, f"{name}.generic", 10)
        return s

    def cpu(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        s.add_implementation(compute, _cpu_schedule(reduces), f"{name}.x86", 10)
        return s

    register_strategy_func(name, "generic", generic)
    register_strategy_func(name, "cpu", cpu)
