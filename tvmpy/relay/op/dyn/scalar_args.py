"""Operators whose scalar parameter is a run-time tensor, with a static output shape:
``dyn.trilu(data, k)`` (ONNX Trilu with ``k`` a graph input) and ``dyn.cumsum`` /
``dyn.cumprod(data, axis)`` (ONNX CumSum / CumProd; ``exclusive``, ``reverse``).

The output type is the data's. The scan's shape function is data-dependent only to check the
axis value before any kernel runs (an error naming the node and the value); the kernels
(``topi.dyn.scalar_args``) read the scalar inside the compute.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, RelayTypeError
from ...ty import TensorType, Type
from .._rel import tensor_arg
from ..registry import OpPattern, make_call, register_op, register_op_attr
from ..shape_func import register_shape_func
from .axes_strategy import register_axes_strategy

__all__ = ["trilu", "cumsum", "cumprod", "scan_axis"]


def _scalar_arg(t: Type, what: str) -> None:
    s = tensor_arg(t, what)
    if not str(s.dtype).startswith(("int", "uint")) or len(s.shape) > 1 or (
            len(s.shape) == 1 and s.shape[0] != 1):
        raise RelayTypeError(f"{what} must be one integer (a 0-d or 1-element tensor), got {s}")


def _rel(arg_types: list[Type], attrs: Any) -> Type:
    data = tensor_arg(arg_types[0], "the data")
    _scalar_arg(arg_types[1], "the scalar parameter")
    return TensorType(list(data.shape), data.dtype)


def _scalar(v: np.ndarray) -> int:
    return int(np.asarray(v).reshape(-1)[0])


def scan_axis(attrs: Any, rank: int, axis: np.ndarray) -> int:
    a = _scalar(axis)
    if not -rank <= a < rank:
        raise ValueError(f"{attrs.node or 'scan'}: axis value {a} is out of range for data of "
                         f"rank {rank}")
    return a % rank


def _scan_shape(attrs: Any, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    scan_axis(attrs, inputs[0].ndim, inputs[1])
    return [tuple(inputs[0].shape)]


def _scan_numpy(kind: str) -> Any:
    def f(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
        x = np.asarray(ins[0])
        ax = scan_axis(attrs, x.ndim, ins[1])
        y = np.flip(x, ax) if attrs.reverse else x
        acc = (np.cumsum if kind == "sum" else np.cumprod)(y, axis=ax, dtype=x.dtype)
        if attrs.exclusive:  # shift by one along the axis, the identity first
            first = np.full_like(np.take(acc, [0], axis=ax), 0 if kind == "sum" else 1)
            acc = np.concatenate([first, np.take(acc, np.arange(x.shape[ax] - 1), axis=ax)],
                                 axis=ax)
        return np.flip(acc, ax) if attrs.reverse else acc
    return f


def _trilu_numpy(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
    x = np.asarray(ins[0])
    k = _scalar(ins[1])
    return np.triu(x, k) if attrs.upper else np.tril(x, k)




def _trilu_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from ....topi.dyn.scalar_args import dyn_trilu

    return [dyn_trilu(inputs[0], inputs[1], bool(attrs.upper))]


def _scan_compute(kind: str) -> Any:
    def f(attrs: Any, inputs: list, out_type: Any) -> list:
        from ....topi.dyn.scalar_args import dyn_scan

        return [dyn_scan(inputs[0], inputs[1], kind, bool(attrs.exclusive),
                         bool(attrs.reverse))]
    return f


register_op("dyn.trilu", _rel, OpPattern.OPAQUE, 2, {"upper": True},
            "the upper / lower triangle of the last two axes, diagonal offset a run-time tensor")
register_op_attr("dyn.trilu", "FNumpy", _trilu_numpy)
register_axes_strategy("dyn.trilu", _trilu_compute, reduces=False)

for _k in ("sum", "prod"):
    _name = f"dyn.cum{_k}"
    register_op(_name, _rel, OpPattern.OPAQUE, 2,
                {"exclusive": False, "reverse": False, "node": ""},
                f"cumulative {_k} along an axis given as a run-time tensor")
    register_op_attr(_name, "FNumpy", _scan_numpy(_k))
    register_shape_func(_name, _scan_shape, data_dependent=True)
    register_axes_strategy(_name, _scan_compute(_k), reduces=True)


def trilu(data: RelayExpr, k: RelayExpr, upper: bool = True) -> RelayExpr:
    """``data`` with the elements below (``upper``) or above the ``k``-th diagonal zeroed."""
    return make_call("dyn.trilu", [data, k], {"upper": bool(upper)})


def _scan(kind: str) -> Any:
    def f(data: RelayExpr, axis: RelayExpr, exclusive: bool = False, reverse: bool = False,
          node: str = "") -> RelayExpr:
        return make_call(f"dyn.cum{kind}", [data, axis], {
            "exclusive": bool(exclusive), "reverse": bool(reverse), "node": str(node)})
    f.__name__ = f"cum{kind}"
    f.__doc__ = f"Cumulative {kind} along the axis in the one-element tensor ``axis``."
    return f


cumsum = _scan("sum")
cumprod = _scan("prod")
