"""``shape_of``: a tensor's shape as a 1-D integer tensor (TVM's ``relay.shape_of``), for
shapes with dimensions known only at run time (ONNX Shape of an ``Any``-shaped tensor). Its
own output shape is static: (rank,)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr
from ...ty import TensorType, Type
from .._rel import fail, tensor_arg
from ..registry import OpPattern, make_call, register_op, register_op_attr

__all__ = ["shape_of"]


def _shape_of_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    if not attrs.dtype.startswith(("int", "uint")):
        fail(f"shape_of: dtype must be an integer type, got {attrs.dtype}")
    return TensorType([len(d.shape)], attrs.dtype)


register_op("shape_of", _shape_of_rel, OpPattern.OPAQUE, 1, {"dtype": "int64"},
            "the data's shape as a 1-D tensor")
register_op_attr("shape_of", "FNumpy",
                 lambda a, ins, t: np.asarray(np.shape(ins[0]), dtype=a.dtype).reshape(-1),
                 level=1)


def shape_of(data: RelayExpr, dtype: str = "int64") -> RelayExpr:
    return make_call("shape_of", [data], {"dtype": dtype})
