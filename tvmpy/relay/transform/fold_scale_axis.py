"""FoldScaleAxis: fold a per-output-channel constant multiply into the conv2d before it.

What it does
``multiply(conv2d(x, W), c)`` becomes ``conv2d(x, W * c')`` where
``c'`` is ``c`` laid along the weight's output-channel axis. With SimplifyInference +
FoldConstant before it, a conv2d -> batch_norm becomes conv2d (scaled weights) -> add(shift).

When valid
The weight is a Constant (bind the params first); ``c`` is a Constant that varies
only along the output's channel axis (NCHW: shape (C,1,1), (1,C,1,1), scalar, ...; NHWC: (C,),
(1,1,1,C), ...); the conv2d's result has no other user (otherwise it would be computed twice);
dtypes agree. It holds for grouped and depthwise convolutions as well (each output channel has
its own filter). Other cases are left as they are.

Example
    before:  %0 = nn.conv2d(%x, %W, padding=[1, 1, 1, 1]); multiply(%0, %c)         (c: (C, 1, 1))
    after:   nn.conv2d(%x, %W_c, padding=[1, 1, 1, 1])                      (W_c = W * c per O)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem
from ..op.registry import Op
from ..visitor import ExprMutator, post_order_visit
from .pass_infra import FunctionPass

__all__ = ["FoldScaleAxis"]

_CHANNEL_AXIS = {"NCHW": 1, "NHWC": 3}
_WEIGHT_OUT_AXIS = {"OIHW": 0, "HWIO": 3, "HWOI": 2, "OHWI": 0}
_DEFAULT_KERNEL = {"NCHW": "OIHW", "NHWC": "HWIO"}


def _is_op(e: Any, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


def _use_counts(func: Any) -> dict[int, int]:
    """How many references each node has (call operands, tuple fields, bindings, bodies)."""
    count: dict[int, int] = {}

    def f(e: Any) -> None:
        if isinstance(e, Call):
            refs: tuple[Any, ...] = (e.op, *e.args)
        elif isinstance(e, Function):
            refs = (*e.params, e.body)
        elif isinstance(e, Tuple):
            refs = e.fields
        else:
            refs = tuple(getattr(e, k) for k in _REFS.get(type(e), ()))
        for r in refs:
            count[id(r)] = count.get(id(r), 0) + 1

    post_order_visit(func, f)
    return count


_REFS = {TupleGetItem: ("tuple_value",), Let: ("var", "value", "body"),
         If: ("cond", "true_branch", "false_branch")}


def _channel_vector(c: np.ndarray, out_ndim: int, axis: int, channels: int) -> np.ndarray | None:
    if c.ndim > out_ndim:
        return None
    shape = (1,) * (out_ndim - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(shape) if i != axis) or shape[axis] not in (1, channels):
        return None
    return np.broadcast_to(c.reshape(-1), (channels,))


class _Fold(ExprMutator):
    def __init__(self, uses: dict[int, int]):
        super().__init__()
        self.uses = uses

    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if not _is_op(new, "multiply"):
            return new
        for i in (0, 1):
            conv, scale, orig_conv = new.args[i], new.args[1 - i], c.args[i]
            if _is_op(conv, "nn.conv2d") and isinstance(scale, Constant):
                if self.uses.get(id(orig_conv), 0) != 1:
                    continue
                folded = self._fold(conv, scale, orig_conv)
                if folded is not None:
                    return folded
        return new

    def _fold(self, conv: Call, scale: Constant, orig: Call) -> RelayExpr | None:
        data, weight = conv.args
        a = conv.attrs
        if not isinstance(weight, Constant) or a.data_layout not in _CHANNEL_AXIS:
            return None
        klayout = a.kernel_layout or _DEFAULT_KERNEL[a.data_layout]
        if klayout not in _WEIGHT_OUT_AXIS:
            return None
        w = weight.data.numpy()
        s = scale.data.numpy()
        out_t = orig.checked_type
        if s.dtype != w.dtype or str(out_t.dtype) != str(w.dtype):
            return None
        wo = _WEIGHT_OUT_AXIS[klayout]
        vec = _channel_vector(s, len(out_t.shape), _CHANNEL_AXIS[a.data_layout], w.shape[wo])
        if vec is None:
            return None
        bshape = [1] * w.ndim
        bshape[wo] = w.shape[wo]
        new_w = (w * vec.reshape(bshape)).astype(w.dtype)
        return Call(conv.op, [data, Constant(new_w)], conv.attrs)


class FoldScaleAxis(FunctionPass):
    """``relay.transform.FoldScaleAxis()`` (opt_level 3, as in TVM)."""

    def __init__(self) -> None:
        super().__init__(name="FoldScaleAxis", opt_level=3)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return _Fold(_use_counts(func)).visit(func)
