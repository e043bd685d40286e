"""Operator library: compute definitions and per-target schedules (TVM's TOPI).

``topi.add``, ``topi.sum``, ``topi.reshape``... build tensor expressions (``te.Tensor``);
``topi.generic`` / ``topi.x86`` hold their schedules; ``topi.testing`` the numpy references;
``topi.nn`` the neural-network operators; ``topi.image.resize2d`` image resizing.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import tag  # noqa: F401
from .broadcast import (  # noqa: F401
    add,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    broadcast_shape,
    broadcast_to,
    divide,
    equal,
    floor_divide,
    floor_mod,
    greater,
    greater_equal,
    left_shift,
    less,
    less_equal,
    logical_and,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    not_equal,
    power,
    right_shift,
    subtract,
    trunc_divide,
    trunc_mod,
    where,
)
from .elemwise import (  # noqa: F401
    abs,
    bitwise_not,
    ceil,
    clip,
    cos,
    elemwise_sum,
    erf,
    exp,
    floor,
    gelu,
    hard_sigmoid,
    hard_swish,
    identity,
    isfinite,
    isinf,
    isnan,
    leaky_relu,
    log,
    logical_not,
    nearbyint,
    negative,
    prelu,
    reciprocal,
    relu,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    softplus,
    sqrt,
    tanh,
    trunc,
)
from .reduction import all, any, argmax, argmin, max, mean, min, prod, sum  # noqa: F401
from .transform import (  # noqa: F401
    arange,
    cast,
    concatenate,
    expand_dims,
    flatten,
    flip,
    full,
    full_like,
    gather,
    gather_nd,
    layout_transform,
    one_hot,
    reinterpret,
    repeat,
    reshape,
    reverse,
    split,
    squeeze,
    stack,
    strided_slice,
    take,
    tile,
    transpose,
)

# sub-packages load on first use (and may be absent while being written)
_SUBMODULES = {"nn", "x86", "cuda", "generic", "testing", "image", "utils"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'tvmpy.topi' has no attribute {name!r}")
