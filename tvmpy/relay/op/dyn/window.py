"""``dyn.window(size)``: a Hann / Hamming / Blackman window whose length is a run-time tensor
(ONNX HannWindow, HammingWindow, BlackmanWindow with ``size`` a graph input).

The output is ``(?,)``: a data-dependent shape function reads the size. Values as ONNX defines
them (``N`` is the size when ``periodic``, else size - 1), computed in float64 and rounded once
to ``dtype``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, RelayTypeError
from ...ty import Any as AnyDim
from ...ty import TensorType, Type
from .._rel import tensor_arg
from ..registry import OpPattern, make_call, register_op, register_op_attr
from ..shape_func import register_shape_func
from .axes_strategy import register_axes_strategy

__all__ = ["window", "WINDOWS"]

# coefficients of 1, cos(2 pi n / N), cos(4 pi n / N)
WINDOWS = {"hann": (0.5, -0.5, 0.0), "hamming": (25.0 / 46.0, -(1 - 25.0 / 46.0), 0.0),
           "blackman": (0.42, -0.5, 0.08)}


def _rel(arg_types: list[Type], attrs: Any) -> Type:
    s = tensor_arg(arg_types[0], "the size")
    if len(s.shape) > 1 or not str(s.dtype).startswith(("int", "uint")):
        raise RelayTypeError(f"the window size must be one integer, got {s}")
    if attrs.kind not in WINDOWS:
        raise RelayTypeError(f"unknown window {attrs.kind!r} (known: {sorted(WINDOWS)})")
    return TensorType([AnyDim()], attrs.dtype)


def _size(attrs: Any, v: np.ndarray) -> int:
    n = int(np.asarray(v).reshape(-1)[0])
    if n < 0:
        raise ValueError(f"{attrs.node or 'window'}: size {n} is negative")
    return n


def _shape(attrs: Any, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    return [(_size(attrs, inputs[0]),)]


def _numpy(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
    n = _size(attrs, ins[0])
    denom = n if attrs.periodic else n - 1
    a0, a1, a2 = WINDOWS[attrs.kind]
    k = np.arange(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ang = 2 * np.pi * k / denom
    return (a0 + a1 * np.cos(ang) + a2 * np.cos(2 * ang)).astype(attrs.dtype)


def _compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from .... import te
    from ....tir import op as tir_op
    from ....tir.expr import cast, const

    (n,) = out_type.shape
    denom = cast(n if attrs.periodic else n - 1, "float64")
    a0, a1, a2 = WINDOWS[attrs.kind]

    def f(i: Any) -> Any:
        ang = const(2 * np.pi, "float64") * cast(i, "float64") / denom
        v = const(a0, "float64") + const(a1, "float64") * tir_op.cos(ang)
        if a2:
            v = v + const(a2, "float64") * tir_op.cos(ang * const(2.0, "float64"))
        return cast(v, attrs.dtype)

    return [te.compute((n,), f, name=f"dyn_{attrs.kind}_window")]




register_op("dyn.window", _rel, OpPattern.OPAQUE, 1,
            {"kind": "hann", "periodic": True, "dtype": "float32", "node": ""},
            "a window function of a run-time length")
register_op_attr("dyn.window", "FNumpy", _numpy)
register_shape_func("dyn.window", _shape, data_dependent=True)
register_axes_strategy("dyn.window", _compute, reduces=False)


def window(size: RelayExpr, kind: str, periodic: bool = True, dtype: str = "float32",
           node: str = "") -> RelayExpr:
    """The ``kind`` window ("hann", "hamming", "blackman") of length ``size`` (a one-element
    integer tensor read at run time)."""
    return make_call("dyn.window", [size], {"kind": str(kind), "periodic": bool(periodic),
                                            "dtype": str(dtype), "node": str(node)})
