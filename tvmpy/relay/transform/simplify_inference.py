"""SimplifyInference: rewrite inference-only operators into plain arithmetic.

What it does
``nn.batch_norm(x, gamma, beta, mean, var)[0]`` becomes ``x * scale + shift`` with
``scale = gamma / sqrt(var + eps)`` (``1`` when ``scale=False``) and ``shift = beta - mean * scale``
(``-mean * scale`` when ``center=False``), both expanded to broadcast along ``axis``;
``nn.dropout(x)[0]`` becomes ``x``. ``nn.layer_norm`` is kept (its statistics depend on the
data).

When valid
For inference only (batch_norm's moving statistics, dropout off). A batch_norm whose
mean/var outputs (``[1]``, ``[2]``) are used is left alone for those uses. After
``bind_params_by_name`` + FoldConstant, ``scale``/``shift`` become constants that FoldScaleAxis
folds into a preceding conv2d.

Example
    before:  nn.batch_norm(%x, %g, %b, %m, %v).0
    after:   %2 = divide(%g, sqrt(add(%v, 1e-05f)));  add(multiply(%x, expand_dims(%2, axis=1,
             num_newaxis=2)), expand_dims(add(%b, negative(multiply(%m, %2))), axis=1, num_newaxis=2))
"""

from __future__ import annotations

from typing import Any

from ..expr import Call, RelayExpr, TupleGetItem, const
from ..op import tensor as _t
from ..op import transform as _tf
from ..op.registry import Op
from ..visitor import ExprMutator
from .pass_infra import FunctionPass

__all__ = ["SimplifyInference"]


def _is_op(e: Any, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


class _Simplify(ExprMutator):
    def visit_tuple_getitem(self, t: TupleGetItem) -> RelayExpr:
        src = t.tuple_value
        if t.index == 0 and _is_op(src, "nn.dropout"):
            return self.visit(src.args[0])
        if t.index == 0 and _is_op(src, "nn.batch_norm"):
            return self._batch_norm(src)
        return super().visit_tuple_getitem(t)

    def _batch_norm(self, bn: Call) -> RelayExpr:
        x, gamma, beta, mean, var = (self.visit(a) for a in bn.args)
        a = bn.attrs
        ndim = len(bn.args[0].checked_type.shape)
        axis = a.axis + ndim if a.axis < 0 else a.axis
        dtype = bn.args[0].checked_type.dtype
        std = _t.sqrt(_t.add(var, const(a.epsilon, dtype)))
        scale = _t.divide(gamma, std) if a.scale else _t.divide(const(1.0, dtype), std)
        shift = _t.negative(_t.multiply(mean, scale))
        if a.center:
            shift = _t.add(beta, shift)
        if ndim - axis - 1 > 0:
            scale = _tf.expand_dims(scale, axis=1, num_newaxis=ndim - axis - 1)
            shift = _tf.expand_dims(shift, axis=1, num_newaxis=ndim - axis - 1)
        return _t.add(_t.multiply(x, scale), shift)


class SimplifyInference(FunctionPass):
    """``relay.transform.SimplifyInference()`` (opt_level 0, as in TVM)."""

    def __init__(self) -> None:
        super().__init__(name="SimplifyInference", opt_level=0)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return _Simplify().visit(func)
