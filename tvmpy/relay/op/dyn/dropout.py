"""``dyn.dropout(data, ratio, training_mode)``: ONNX Dropout whose ratio / training mode are
run-time tensors. Returns ``(output, mask)``.

With ``training_mode`` false, or a ratio of 0, it is the identity and the mask is all true. In
training with ``ratio > 0`` each element is kept with probability ``1 - ratio`` and scaled by
``1 / (1 - ratio)``: the interpreter draws from numpy's generator (``seed`` attribute: none
when 0); the compiled kernel uses a counter-based hash of the element index and the seed. Either
is random, so no reference output can match it (ONNX's node tests of that case are excluded as
"randomness").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, RelayTypeError, TupleGetItem
from ...ty import TensorType, TupleType, Type
from .._rel import tensor_arg
from ..registry import OpPattern, make_call, register_op, register_op_attr
from .axes_strategy import register_axes_strategy

__all__ = ["dropout"]


def _rel(arg_types: list[Type], attrs: Any) -> Type:
    data = tensor_arg(arg_types[0], "the data")
    for t, what in ((arg_types[1], "the ratio"), (arg_types[2], "the training mode")):
        s = tensor_arg(t, what)
        if len(s.shape) > 1 or (len(s.shape) == 1 and s.shape[0] != 1):
            raise RelayTypeError(f"{what} must be a scalar, got {s}")
    return TupleType([TensorType(list(data.shape), data.dtype),
                      TensorType(list(data.shape), "bool")])


def _numpy(attrs: Any, ins: list[np.ndarray], t: Any) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(ins[0])
    ratio = float(np.asarray(ins[1]).reshape(-1)[0])
    training = bool(np.asarray(ins[2]).reshape(-1)[0])
    if not training or ratio == 0.0:
        return x.copy(), np.ones(x.shape, dtype=bool)
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"{attrs.node or 'dropout'}: ratio {ratio} is outside [0, 1)")
    rng = np.random.default_rng(attrs.seed or None)
    mask = rng.uniform(size=x.shape) >= ratio
    return (x * mask / (1.0 - ratio)).astype(x.dtype), mask


def _compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from .... import te
    from ....tir import op as tir_op
    from ....tir.expr import Select, cast, const

    x, ratio, training = inputs
    shape = list(x.shape)
    rv = cast(ratio[tuple(0 for _ in ratio.shape)], "float32")
    tv = training[tuple(0 for _ in training.shape)]
    tv = tv if str(tv.dtype) == "bool" else tv != const(0, str(tv.dtype))
    drop = tir_op.all(tv, rv > const(0.0, "float32"))

    def uniform(*i: Any) -> Any:  # a hash of the flat index and the seed, in [0, 1)
        flat: Any = const(0, "int32")
        for k, d in enumerate(shape):
            flat = flat * d + i[k]
        h = cast(flat, "uint32") * const(2654435761, "uint32") + const(attrs.seed * 40503 + 1,
                                                                           "uint32")
        h = (h ^ (h >> const(15, "uint32"))) * const(2246822519, "uint32")
        h = h ^ (h >> const(13, "uint32"))
        return cast(h >> const(8, "uint32"), "float32") * const(1.0 / (1 << 24), "float32")

    mask = te.compute(shape, lambda *i: tir_op.any(tir_op.all(drop, uniform(*i) >= rv),
                                                   drop == const(False, "bool")),
                      name="dropout_mask")
    scale = Select(drop, const(1.0, "float32") / (const(1.0, "float32") - rv),
                   const(1.0, "float32"))
    out = te.compute(shape, lambda *i: Select(mask(*i), cast(cast(x(*i), "float32") * scale,
                                                            x.dtype), const(0, x.dtype)),
                     name="dropout")
    return [out, mask]




register_op("dyn.dropout", _rel, OpPattern.OPAQUE, 3, {"seed": 0, "node": ""},
            "dropout whose ratio and training mode are run-time tensors")
register_op_attr("dyn.dropout", "FNumpy", _numpy)
register_axes_strategy("dyn.dropout", _compute, reduces=False)


def dropout(data: RelayExpr, ratio: RelayExpr, training_mode: RelayExpr, seed: int = 0,
            node: str = "") -> tuple[RelayExpr, RelayExpr]:
    """(output, mask) of dropout with run-time ``ratio`` and ``training_mode`` scalars."""
    call = make_call("dyn.dropout", [data, ratio, training_mode],
                     {"seed": int(seed), "node": str(node)})
    return TupleGetItem(call, 0), TupleGetItem(call, 1)
