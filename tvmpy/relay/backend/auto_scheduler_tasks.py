"""The auto-scheduler's view of relay's fused functions (TVM's ``auto_scheduler`` hooks in
``relay.backend.te_compiler``).

A fused primitive function is one auto_scheduler workload: its te compute is what
``lower_primitive`` computes (same placeholders, same operator computes, the outputs last),
its key ``["relay.<fused name>_<structural digest>", input shapes...]``. The key depends only
on the function's structure, so a log written while tuning applies in another process;
:class:`FusedWorkload` (picklable: the relay function travels) rebuilds the compute in the
measurement's build workers.

Each workload also says which of its inputs are the model's weights (``weight_inputs``: a
constant at every call of the function in the model) and how many bytes of constants the
model reads per run (``model_weight_bytes``): a runner with ``cold_weights`` times a candidate
with those inputs as they arrive in the model, evicted from the core's private caches by the
rest of the model's weights (``autotvm.measure.local_runner``).
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

    def __init__(self, func: Any, target: str, name: str,
                 weight_inputs: tuple[int, ...] = (), model_weight_bytes: int = 0):
        self.func = func
        self.target = target
        self.__name__ = name
        self.weight_inputs = tuple(weight_inputs)
        self.model_weight_bytes = int(model_weight_bytes)

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
    weights, model_bytes = _weight_params(prims)
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
        w_in = tuple(sorted(weights.get(id(lf), ()))) if len(g.inputs) == len(lf.func.params) \
            else ()
        out.append((key, name, FusedWorkload(lf.func, str(tgt), name, w_in, model_bytes),
                    lf.uses, lf.name))
    return out


def _weight_params(prims: Any) -> tuple[dict[int, set[int]], int]:
    """``({id(lowered function): positions of the parameters bound to a constant at every call
    of it}, bytes of all the constants main passes to its kernels)``."""
    from ..expr import Call, Constant, Function
    from ..visitor import post_order_visit

    calls: list[Any] = []
    post_order_visit(prims.main, lambda e: calls.append(e)
                     if isinstance(e, Call) and isinstance(e.op, Function) else None)
    found: dict[int, set[int]] = {}
    consts: dict[int, int] = {}
    for c in calls:
        lf = prims.compiler.lookup(c.op)
        if lf is None:
            continue
        pos = {i for i, a in enumerate(c.args) if isinstance(a, Constant)}
        for a in c.args:
            if isinstance(a, Constant):
                consts[id(a)] = int(a.data.numpy().nbytes)
        found[id(lf)] = found[id(lf)] & pos if id(lf) in found else pos
    return found, sum(consts.values())


register_fused_function_extractor(fused_functions)
