"""Tensor expressions and schedules (TVM's ``tvm.te``)."""

from __future__ import annotations

import importlib
from typing import Any

from ..tir.expr import IterVar, Range, cast, const  # noqa: F401
from ..tir.op import (  # noqa: F401
    abs,
    acos,
    all,
    any,
    asin,
    atan,
    atan2,
    call_extern,
    call_intrin,
    call_pure_extern,
    ceil,
    cos,
    cosh,
    div,
    erf,
    exp,
    exp2,
    exp10,
    fabs,
    floor,
    floordiv,
    floormod,
    fmod,
    if_then_else,
    indexdiv,
    indexmod,
    isfinite,
    isinf,
    isnan,
    likely,
    log,
    log1p,
    log2,
    log10,
    max_value,
    min_value,
    nearbyint,
    popcount,
    pow,
    power,
    reinterpret,
    round,
    rsqrt,
    sigmoid,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)
from .scan import ScanOp, scan  # noqa: F401
from .tensor import (  # noqa: F401
    CommReducer,
    ComputeOp,
    ExternOp,
    Operation,
    PlaceholderOp,
    Reduce,
    Tensor,
    comm_reducer,
    compute,
    extern,
    max,
    min,
    placeholder,
    reduce_axis,
    size_var,
    sum,
    thread_axis,
    var,
)

_LAZY = {
    "create_schedule": "schedule",
    "Schedule": "schedule",
    "Stage": "schedule",
    "decl_tensor_intrin": "tensor_intrin",
    "TensorIntrin": "tensor_intrin",
}


def __getattr__(name: str) -> Any:
    if name == "schedule":  # TVM's te.schedule module (InferBound ...)
        return importlib.import_module(".schedule", __name__)
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'tvmpy.te' has no attribute {name!r}")
    return getattr(importlib.import_module("." + mod, __name__), name)
