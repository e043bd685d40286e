"""Lowering of an operator's upper-bound kernel (``relay.op.upper_bound``) for the VM: the
kernel's parameters are the flattened inputs, the outputs (at upper-bound extents, bound from
the buffers the VM allocates) and the int64 count output, in that order."""

from __future__ import annotations

from typing import Any

from ... import te
from ...ir.node import structural_equal, structural_hash
from ...tir.function import PrimFunc
from ..expr import Function
from .te_compiler import LoweredFunc, TECompiler, flat_tensor_types

__all__ = ["lower_upper_bound", "UpperBoundKernels"]


def lower_upper_bound(func: Function, name: str) -> PrimFunc:
    """The PrimFunc ``name`` of the upper-bound kernel of ``func``: a primitive function whose
    body is one call of an operator with an ``FUpperBound`` attribute."""
    from ...te.schedule_ops import schedule_to_primfunc

    call = func.body
    ub = call.op.get_attr("FUpperBound")
    ins = []
    for i, p in enumerate(func.params):
        for k, t in enumerate(flat_tensor_types(p.checked_type, f"{name}: %{p.name_hint}")):
            shape = tuple(getattr(d, "value", d) for d in t.shape)
            ins.append(te.placeholder(shape, dtype=t.dtype, name=f"p{i}_{k}"))
    outs = list(ub.compute(call.attrs, ins))
    n_out = len(flat_tensor_types(call.checked_type)) + 1
    if len(outs) != n_out or str(outs[-1].dtype) != "int64":
        raise ValueError(f"{call.op.name}: its upper-bound compute gives {len(outs)} tensors; "
                         f"expected the {n_out - 1} outputs and an int64 count tensor")
    sched = te.create_schedule([o.op for o in outs])
    return schedule_to_primfunc(sched, [*ins, *outs], name, {})


class UpperBoundKernels:
    """The upper-bound kernels of one compilation, lowered once per distinct call (their
    PrimFuncs join ``compiler.funcs``, the one library's)."""

    def __init__(self, compiler: TECompiler):
        self.compiler = compiler
        self._cache: dict[int, list[tuple[Function, str]]] = {}

    def lower(self, func: Function) -> str:
        """The symbol of ``func``'s upper-bound kernel."""
        key = structural_hash(func)
        for f, name in self._cache.get(key, ()):
            if structural_equal(f, func, map_free_vars=True):
                return name
        op_name = str(func.body.op.name).replace(".", "_")
        name = self.compiler._unique(f"fused_{op_name}_upper_bound")
        lowered = LoweredFunc(func, name, lower_upper_bound(func, name))
        self.compiler.funcs.append(lowered)
        self._cache.setdefault(key, []).append((func, name))
        return name

    def __repr__(self) -> str:
        return f"UpperBoundKernels({sum(len(v) for v in self._cache.values())})"

    def __len__(self) -> int:
        return sum(len(v) for v in self._cache.values())


def has_upper_bound(op: Any) -> bool:
    return op.get_attr("FUpperBound") is not None
