"""``dyn.nn.pad``: padding whose widths (and axes, and value) are tensors (ONNX Pad from
opset 11 on, with pads known only at run time). Negative widths crop, as onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...ty import TensorType, Type
from .._rel import fail, tensor_arg
from ..registry import make_call
from ._common import any_dims, ints, register_dyn_op, scalar, scalar_arg, shape_tensor_len

__all__ = ["pad", "pad_widths"]

_MODES = ("constant", "edge", "reflect", "wrap")


def pad_widths(shape: tuple[int, ...], pads: list[int], axes: list[int], mode: str
               ) -> list[tuple[int, int]]:
    """(before, after) per axis of the data from ONNX's [begins..., ends...] on ``axes``."""
    r = len(shape)
    k = len(axes)
    if len(pads) != 2 * k:
        raise ValueError(f"{len(pads)} pads {pads} for {k} axes (need {2 * k})")
    width = [(0, 0)] * r
    for j, ax in enumerate(axes):
        if not -r <= ax < r:
            raise ValueError(f"axis {ax} is out of range for the data {tuple(shape)}")
        width[ax % r] = (pads[j], pads[j + k])
    for ax, (lo, hi) in enumerate(width):
        n = shape[ax] + lo + hi
        if n < 0:
            raise ValueError(f"pads {[lo, hi]} crop more than axis {ax} of size {shape[ax]}")
        if mode != "constant" and (lo > 0 or hi > 0) and shape[ax] == 0:
            raise ValueError(f"{mode} pads {[lo, hi]} on the empty axis {ax}")
    return width


def _pad_np(a: Any, ins: list) -> np.ndarray:
    x, pads, value, axes = ins
    width = pad_widths(x.shape, ints(pads), ints(axes), a.pad_mode)
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    if a.pad_mode == "constant":
        y = np.pad(x, grow, mode="constant", constant_values=scalar(value))
    else:
        y = np.pad(x, grow, mode=a.pad_mode)
    crop = tuple(slice(max(-lo, 0), y.shape[k] - max(-hi, 0)) for k, (lo, hi) in enumerate(width))
    return y[crop].astype(x.dtype)


def _pad_shape(a: Any, ins: list) -> list:
    x = ins[0]
    width = pad_widths(x.shape, ints(ins[1]), ints(ins[3]), a.pad_mode)
    return [tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, width))]


def _pad_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    n = shape_tensor_len(arg_types[1], "the pads")
    k = shape_tensor_len(arg_types[3], "the axes")
    if n != 2 * k or k > len(d.shape):
        fail(f"pad: {n} pads for {k} axes of the data (rank {len(d.shape)})")
    if scalar_arg(arg_types[2], "the pad value").dtype != d.dtype:
        fail(f"pad: the pad value must be {d.dtype}")
    if attrs.pad_mode not in _MODES:
        fail(f"pad: pad_mode {attrs.pad_mode!r} (supported: {list(_MODES)})")
    return TensorType(any_dims(len(d.shape)), d.dtype)


register_dyn_op("dyn.nn.pad", _pad_rel, 4, {"pad_mode": "constant"}, _pad_np, _pad_shape,
                "padding of widths given as a tensor ([begins..., ends...] on the axes tensor)")


def pad(data: RelayExpr, pads: Any, pad_value: Any = 0.0, axes: Any = None,
        pad_mode: str = "constant", dtype: str = "float32") -> RelayExpr:
    """Pad ``data`` by ``pads`` (ONNX's layout, a tensor) on ``axes`` (default: all, which
    needs the data's rank: pass ``axes`` for a non-constant ``pads`` of another length)."""
    if pad_mode not in _MODES:
        raise ValueError(f"pad: pad_mode must be one of {_MODES}, got {pad_mode!r}")
    p = pads if isinstance(pads, RelayExpr) else const(np.asarray(pads, np.int64))
    if axes is None:
        from ...type_infer import infer_type

        axes = np.arange(len(infer_type(data).checked_type.shape), dtype=np.int64)
    ax = axes if isinstance(axes, RelayExpr) else const(np.asarray(axes, np.int64))
    v = pad_value if isinstance(pad_value, RelayExpr) else const(np.asarray(pad_value, dtype))
    return make_call("dyn.nn.pad", [data, p, v, ax], {"pad_mode": pad_mode})
