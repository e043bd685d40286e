"""Legalize (TVM's pass): rewrite a call whose operator has no implementation on the target.

What it does
An operator opts in with the per-op attribute ``FTVMLegalize``, a ``target.generic_func``
``fn(attrs, args, arg_types) -> expr | None`` (None: keep the call) dispatched on
``Target.current()``; e.g. ``nn.rnn_scan`` on GPU targets (``relay/op/strategy/rnn.py``: the
per-step ops, ``relay/op/rnn_expand.py``). A ``TupleGetItem`` of a rewritten call that became
a ``Tuple`` is that tuple's field.

When valid
Always, as long as each ``FTVMLegalize`` returns an expression with the call's meaning and type;
it runs at every opt_level, before fusion (a target would otherwise fail to lower the call).

Example
    before:  %0 = nn.rnn_scan(%xw, %r, %h0, %aux, cell="lstm", hidden=20);  %0.0     (target: opencl)
    after:   %1 = nn.dense(%h0, %r_gates); ... the gates of step 0 ...; stack((%h_0, %h_1, ...))
"""

from __future__ import annotations

from typing import Any

from ..expr import Call, RelayExpr, Tuple, TupleGetItem
from ..op.registry import Op
from ..visitor import ExprMutator
from .pass_infra import FunctionPass

__all__ = ["Legalize"]


class _Rewrite(ExprMutator):
    def visit_call(self, c: Any) -> RelayExpr:
        new: Any = super().visit_call(c)
        fn = c.op.get_attr("FTVMLegalize") if isinstance(c.op, Op) else None
        if fn is None or not isinstance(new, Call):
            return new
        call: Any = new  # (the node classes' fields are set by _init: untyped)
        out = fn(call.attrs, list(call.args), [a.checked_type for a in c.args])
        return new if out is None else out

    def visit_tuple_getitem(self, t: TupleGetItem) -> RelayExpr:
        new: Any = super().visit_tuple_getitem(t)
        if not isinstance(new, TupleGetItem):
            return new
        item: Any = new
        if isinstance(item.tuple_value, Tuple):
            fields: Any = item.tuple_value
            return fields.fields[item.index]
        return new


class Legalize(FunctionPass):
    """``Legalize()`` (opt_level 0): see the module docstring."""

    def __init__(self) -> None:
        super().__init__(name="Legalize", opt_level=0)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return _Rewrite().visit(func)
