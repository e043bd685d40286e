"""The auto-scheduler's view of relay's fused functions (TVM's ``auto_scheduler`` hooks in
``relay.backend.te_compiler``).

A fused primitive function is one auto_scheduler workload: its te compute is what
``lower_primitive`` computes (same placeholders, same operator computes, the outputs last),
its key ``["relay.<fused name>_<structural digest>", input shapes...]``. The key depends only
on the function's structure, so a log written while tuning applies in another process;
:class:`FusedWorkload` (picklable: the relay function travels) rebuilds the compute in the
measurement's build workers.
"""

from __future__ import annotations

import json
from typing import Any

from ...auto_scheduler.relay_integration import register_fused_function_extractor
from ...ir.digest import structural_digest
from ...target import as_target

__all__ = ["FusedWorkload", "fused_workload_key", "fused_functions"]


def _name(func: Any) -> str:
    from .te_compiler import primitive_name

    return f"relay.{primitive_name(func)}_{structural_digest(func)[:16]}"


def fused_workload_key(func: Any, inputs: list[Any]) -> str:
    shapes = [[int(getattr(d, "value", d)) if isinstance(getattr(d, "value", d), int) else None
               for d in t.shape] for t in inputs]
    return json.dumps([_name(func), *shapes])


class FusedWorkload:
    """The registered workload function of a fused relay function: ``()`` -> its tensors
    (inputs, then outputs), as ``lower_primitive`` builds them."""

    def __init__(self, func: Any, target: str, name: str):
        self.func = func
        self.target = target
        self.__name__ = name

    def __call__(self, *args: Any) -> list[Any]:
        from .te_compiler import _GroupLowering

        g = _GroupLowering(self.func, as_target(self.target), "auto_scheduler_task")
        outs = g.outputs(self.func.body)
        return [*g.inputs, *outs]

    def default_schedule(self, *shapes: Any) -> tuple[Any, list[Any]]:
        """``(schedule, tensors)``: the schedule ``relay.build`` gives this fused function
        without the auto-scheduler (its TOPI strategy's, with autotvm's current configs);
        ``shapes``, the workload key's arguments, are the function's own."""
        from .te_compiler import _GroupLowering

        g = _GroupLowering(self.func, as_target(self.target), "auto_scheduler_default")
        outs = g.outputs(self.func.body)
        return g.schedule(outs), [*g.inputs, *outs]


def fused_functions(mod: Any, params: Any, target: Any, opt_level: int = 3
                    ) -> list[tuple[Any, str, Any, int, str]]:
    """``(key, name, workload, uses, desc)`` of each distinct fused function ``relay.build``
    lowers for ``mod`` at ``opt_level`` (under the caller's other PassContext settings); one
    with symbolic input shapes as ``(None, reason, None, uses, desc)``."""
    from ...transform import PassContext
    from ..build_module import lower_to_primitives
    from .te_compiler import _GroupLowering

    cur = PassContext.current()
    with PassContext(opt_level=opt_level, required_pass=cur.required_pass,
                     disabled_pass=cur.disabled_pass, config=cur.config):
        prims = lower_to_primitives(mod, target, params, eager=False)
    from ...auto_scheduler.relay_integration import subtasks_of
    from ...auto_scheduler.workload_registry import WORKLOAD_FUNC_REGISTRY, decode_workload_key

    tgt = prims.target
    out = []
    for lf in prims.compiler.funcs:
        g = _GroupLowering(lf.func, tgt, lf.name)
        symbolic = any(not isinstance(getattr(d, "value", d), int)
                       for t in g.inputs for d in t.shape)
        try:
            outs = g.outputs(lf.func.body)
        except Exception:  # noqa: BLE001 - only a symbolic function may not lower here
            if not symbolic:
                raise
            outs = []
        # a kernel standing for a task (the LSTM/GRU recurrence: its time step) is that task
        subs = subtasks_of(list(outs)) if outs else None
        if subs:
            for key, runs in subs:
                sub = decode_workload_key(key)[0]
                out.append((key, sub, WORKLOAD_FUNC_REGISTRY[sub], lf.uses * runs,
                            f"{lf.name} ({sub}, {runs} run(s) a call)"))
            continue
        if symbolic:
            out.append((None, "symbolic input shapes: not a static task", None, lf.uses,
                        lf.name))
            continue
        name = _name(lf.func)
        key = fused_workload_key(lf.func, g.inputs)
        out.append((key, name, FusedWorkload(lf.func, str(tgt), name), lf.uses, lf.name))
    return out


register_fused_function_extractor(fused_functions)
