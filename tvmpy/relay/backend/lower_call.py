"""Lower one typed relay ``Call`` to tensor expressions (TVM's ``LowerToTE`` per call):
the operator's strategy for the target picks the implementation (highest priority), whose
compute builds the output tensors from the given input tensors and whose schedule the caller
applies to the (possibly fused) outputs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ... import te
from ...autotvm.task.topi_integration import TaskExtractEnv
from ...target import as_target
from ..expr import Call
from ..op.strategy import OpImplementation, select_implementation
from ..ty import TensorType, TupleType

__all__ = ["lower_call", "placeholders_for"]


def _flat_types(t: Any) -> list[TensorType]:
    if isinstance(t, TupleType):
        return [x for f in t.fields for x in _flat_types(f)]
    if isinstance(t, TensorType):
        return [t]
    raise TypeError(f"lower_call: argument type {t} is neither a tensor nor a tuple type")


def placeholders_for(call: Call, prefix: str = "p") -> list[te.Tensor]:
    """One ``te.placeholder`` per tensor argument of ``call`` (tuple arguments flattened),
    shaped as the argument's inferred type."""
    out: list[te.Tensor] = []
    for a in call.args:
        for t in _flat_types(a.checked_type):
            out.append(te.placeholder(t.shape, dtype=t.dtype, name=f"{prefix}{len(out)}"))
    return out


def lower_call(call: Call, inputs: list[te.Tensor], target: Any = "llvm"
               ) -> tuple[list[te.Tensor], Callable[[list[te.Tensor]], Any]]:
    """``(outputs, schedule_fn)`` of a type-checked ``call`` over ``inputs``.

    ``schedule_fn(outs)`` returns the chosen implementation's ``te.Schedule`` for ``outs`` (the
    call's outputs, or the outputs of a fused group whose anchor this call is).
    """
    tgt = as_target(target)
    impl, outputs = lower_call_impl(call, inputs, tgt)

    def schedule_fn(outs: list[te.Tensor]) -> Any:
        return impl.schedule(call.attrs, list(outs), tgt)

    return outputs, schedule_fn


def lower_call_impl(call: Call, inputs: list[te.Tensor], target: Any
                    ) -> tuple[OpImplementation, list[te.Tensor]]:
    """The chosen implementation and the outputs it computes."""
    if not isinstance(call, Call) or not hasattr(call.op, "get_attr"):
        raise TypeError(f"lower_call: expected a relay Call of an operator, got {call!r}")
    out_type = call.checked_type
    want = sum(len(_flat_types(a.checked_type)) for a in call.args)
    if len(inputs) != want:
        raise ValueError(f"lower_call: {call.op.name} takes {want} input tensors (tuple arguments "
                         f"flattened), got {len(inputs)}")
    tgt = as_target(target)
    env = TaskExtractEnv.current  # autotvm task extraction: which relay op this compute is
    with env.lowering(call.op.name) if env is not None else contextlib.nullcontext():
        impl = select_implementation(call.op, call.attrs, list(inputs), out_type, tgt)
        outputs = impl.compute(call.attrs, list(inputs), out_type)
    n_out = len(_flat_types(out_type))
    if len(outputs) != n_out:
        raise ValueError(f"lower_call: {impl.name} computed {len(outputs)} outputs, the type "
                         f"{out_type} has {n_out}")
    return impl, list(outputs)
