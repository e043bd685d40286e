"""What every ``dyn.*`` operator shares: checks of the shape-like tensor arguments, and the
registration of an operator whose output shape depends on input values.

Such an operator is OPAQUE (never fused), its type relation gives ``Any`` for each dimension it
cannot know (the output *rank* is always static: it comes from the static length of the shape
tensor, or from the attributes), its shape function receives the input arrays
(``data_dependent=True``), and its ``FNumpy`` (the interpreter's meaning) is ONNX's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ty import Any as AnyDim
from ...ty import TensorType, Type
from .._rel import fail, shape_str, tensor_arg
from ..registry import OpPattern, register_op, register_op_attr
from ..shape_func import ShapeFuncError, register_shape_func

__all__ = ["shape_tensor_len", "scalar_arg", "any_dims", "register_dyn_op", "ints", "scalar"]


def shape_tensor_len(t: Type, what: str) -> int:
    """The static length of a 1-D integer tensor argument (a shape, axes, pads, ...)."""
    tt = tensor_arg(t, what)
    if not tt.dtype.startswith(("int", "uint")):
        fail(f"{what} must be an integer tensor, got {tt.dtype}")
    if len(tt.shape) != 1 or not isinstance(tt.shape[0], int):
        fail(f"{what} must be a 1-D tensor of static length, got shape {shape_str(tt.shape)}")
    return int(tt.shape[0])


def scalar_arg(t: Type, what: str) -> TensorType:
    """A scalar (or one-element 1-D) tensor argument."""
    tt = tensor_arg(t, what)
    if not (len(tt.shape) == 0 or (len(tt.shape) == 1 and tt.shape[0] == 1)):
        fail(f"{what} must be a scalar, got shape {shape_str(tt.shape)}")
    return tt


def any_dims(n: int) -> list[Any]:
    return [AnyDim() for _ in range(n)]


def ints(v: np.ndarray) -> list[int]:
    """The values of a shape-like array as Python ints."""
    return [int(x) for x in np.asarray(v).reshape(-1)]


def scalar(v: np.ndarray) -> Any:
    a = np.asarray(v).reshape(-1)
    if a.size != 1:
        raise ValueError(f"expected one value, got {a.size}")
    return a[0]


def register_dyn_op(name: str, type_rel: Callable[..., Type], num_inputs: int,
                    attrs: dict[str, Any] | None, fnumpy: Callable[[Any, list], Any],
                    shape_fn: Callable[[Any, list], list], description: str = "") -> None:
    """Register ``name`` (OPAQUE) with its relation, its numpy meaning ``fnumpy(attrs,
    arrays)`` and its data-dependent shape function ``shape_fn(attrs, arrays) -> shapes``."""
    register_op(name, type_rel, OpPattern.OPAQUE, num_inputs, attrs, description)

    def impl(a: Any, ins: list, out_type: Any) -> Any:
        try:
            return fnumpy(a, list(ins))
        except (ValueError, IndexError) as e:  # bad values: the same error as the shape function
            shown = ", ".join(str(np.shape(x)) for x in ins)
            raise ShapeFuncError(f"{name}: no output for input shapes {shown}: {e}") from e

    register_op_attr(name, "FNumpy", impl, level=1)
    register_shape_func(name, shape_fn, data_dependent=True)
