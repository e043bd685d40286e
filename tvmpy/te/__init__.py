"""Tensor expressions and schedules (TVM's ``tvm.te``)."""

from __future__ import annotations

import importlib
from typing import Any

from .tensor import (  # noqa: F401
    Tensor, Operation, PlaceholderOp, ComputeOp, Reduce, CommReducer, placeholder, compute,
    reduce_axis, thread_axis, comm_reducer, sum, max, min, var, size_var,
)
from ..tir.expr import IterVar, Range, const  # noqa: F401
from ..tir.op import (  # noqa: F401
    exp, exp2, exp10, log, log2, log10, log1p, sqrt, rsqrt, tanh, sigmoid, erf, pow, power, abs,
    fabs, floor, ceil, round, trunc, nearbyint, fmod, isnan, isinf, isfinite, popcount, sin, cos,
    tan, sinh, cosh, asin, acos, atan, atan2, floordiv, floormod, truncdiv, truncmod, div, indexdiv,
    indexmod, if_then_else, likely, all, any, min_value, max_value, call_extern, call_pure_extern,
    call_intrin, reinterpret,
)
from ..tir.expr import cast  # noqa: F401

_LAZY = {
    "create_schedule": "schedule",
    "Schedule": "schedule",
    "Stage": "schedule",
    "decl_tensor_intrin": "tensor_intrin",
    "TensorIntrin": "tensor_intrin",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tvmpy.te' has no attribute {name!r}")
    return getattr(importlib.import_module("." + mod, __name__), name)
