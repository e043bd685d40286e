"""Operators whose output size depends on input values: ``argwhere`` (NonZero), ``unique``,
``compress`` and ``vision.all_class_non_max_suppression`` (in ``vision.py``).

Each has a type relation that gives ``relay.Any()`` for the data-dependent dimension, an
``FNumpy`` (the interpreter's meaning, exact as onnx's reference implementation), a
data-dependent shape function (``fn(attrs, input_arrays) -> output shapes``: the count computed
on the host, from the values) and TOpPattern OPAQUE (never fused: an executor runs the shape
function on the op's own inputs, allocates the outputs, then calls the kernel). The compiled
kernels are ``te.extern`` statements (``topi.data_dependent``) whose output extents are the
symbolic sizes of the relation, bound from the output arrays when called. The VM runs their
upper-bound form instead (``relay.op.upper_bound``, registered with the strategies): buffers
sized from the input shapes, the actual counts written by the kernel, no shape function first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr
from ..ty import Any as AnyDim
from ..ty import TensorType, TupleType, Type
from ._rel import fail, normalize_axis, tensor_arg
from .registry import OpPattern, make_call, register_op, register_op_attr
from .shape_func import register_shape_func
from .transform import TupleWrapper

__all__ = ["argwhere", "unique", "compress", "argwhere_np", "unique_np", "compress_np"]


# ---- argwhere (ONNX NonZero is its transpose) ------------------------------------------------
def _argwhere_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the condition")
    return TensorType([AnyDim(), len(d.shape)], "int32")


def argwhere_np(x: np.ndarray) -> np.ndarray:
    """The indices of the non-zero elements of ``x``, one row each, in row-major order."""
    x = np.asarray(x)
    if x.ndim == 0:
        return np.zeros((int(bool(x)), 0), "int32")
    return np.argwhere(x).astype("int32")


register_op("argwhere", _argwhere_rel, OpPattern.OPAQUE, 1)
register_op_attr("argwhere", "FNumpy", lambda attrs, ins, t: argwhere_np(ins[0]))
register_shape_func("argwhere", lambda attrs, ins: [(int(np.count_nonzero(ins[0])), max(np.ndim(ins[0]), 0))],
                    data_dependent=True)


def argwhere(condition: RelayExpr) -> RelayExpr:
    """TVM's ``relay.argwhere``: ``(count, ndim)`` int32 indices of the non-zero elements."""
    return make_call("argwhere", [condition], {})


# ---- compress --------------------------------------------------------------------------------
def _compress_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    c = tensor_arg(arg_types[1], "the condition")
    if len(c.shape) != 1:
        fail(f"compress: the condition must be 1-d, got shape {tuple(c.shape)}")
    if attrs.axis is None:
        return TensorType([AnyDim()], d.dtype)
    ax = normalize_axis(attrs.axis, len(d.shape))
    shape = list(d.shape)
    shape[ax] = AnyDim()
    return TensorType(shape, d.dtype)


def _compress_selected(x: np.ndarray, cond: np.ndarray, axis: int | None) -> np.ndarray:
    """The selected positions along the axis (condition entries past its end must be false)."""
    n = x.size if axis is None else x.shape[axis]
    c = np.asarray(cond).reshape(-1) != 0
    if c.size > n and c[n:].any():
        where = "the flattened data" if axis is None else f"axis {axis}"
        raise ValueError(f"compress: the condition selects index {n + int(np.argmax(c[n:]))}, past "
                         f"the end of {where} (size {n})")
    return np.nonzero(c[:n])[0]


def compress_np(x: np.ndarray, cond: np.ndarray, axis: int | None = None) -> np.ndarray:
    """ONNX Compress (numpy's ``compress``)."""
    if axis is not None:
        axis = axis % x.ndim
    sel = _compress_selected(x, cond, axis)
    return np.take(x.reshape(-1) if axis is None else x, sel, axis=0 if axis is None else axis)


def _compress_shape(attrs: Any, ins: list[np.ndarray]) -> list[tuple[int, ...]]:
    x, cond = ins
    axis = None if attrs.axis is None else attrs.axis % x.ndim
    k = len(_compress_selected(x, cond, axis))
    if axis is None:
        return [(k,)]
    return [tuple(k if d == axis else s for d, s in enumerate(x.shape))]


register_op("compress", _compress_rel, OpPattern.OPAQUE, 2, {"axis": None})
register_op_attr("compress", "FNumpy", lambda attrs, ins, t: compress_np(ins[0], ins[1], attrs.axis))
register_shape_func("compress", _compress_shape, data_dependent=True)


def compress(data: RelayExpr, condition: RelayExpr, axis: int | None = None) -> RelayExpr:
    """ONNX Compress: the slices of ``data`` along ``axis`` (flattened when None) where the 1-d
    ``condition`` is non-zero."""
    return make_call("compress", [data, condition], {"axis": None if axis is None else int(axis)})


# ---- unique ----------------------------------------------------------------------------------
def _unique_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    n = AnyDim()
    if attrs.axis is None:
        y = TensorType([n], d.dtype)
        total: Any = 1
        for s in d.shape:
            total = total * s if isinstance(s, int) and isinstance(total, int) else AnyDim()
        inv = TensorType([total], "int64")
    else:
        if not d.shape:
            fail("unique: axis given for a 0-d input")
        ax = normalize_axis(attrs.axis, len(d.shape))
        shape = list(d.shape)
        shape[ax] = n
        y = TensorType(shape, d.dtype)
        inv = TensorType([d.shape[ax]], "int64")
    return TupleType([y, TensorType([n], "int64"), inv, TensorType([n], "int64")])


def unique_np(x: np.ndarray, is_sorted: bool = True, axis: int | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ONNX Unique: ``(Y, indices, inverse_indices, counts)``; sorted ascending (slices
    lexicographically) or in order of first occurrence."""
    if axis is None:
        flat = np.asarray(x).reshape(-1)
        y, idx, inv, cnt = np.unique(flat, True, True, True)
        ax = 0
        src = flat
    else:
        ax = axis % x.ndim
        y, idx, inv, cnt = np.unique(x, True, True, True, axis=ax)
        src = x
    inv = np.asarray(inv).reshape(-1)
    if not is_sorted:
        order = np.argsort(idx, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        idx, cnt, inv = idx[order], cnt[order], rank[inv]
        y = np.take(src, idx, axis=ax)
    return (y, idx.astype("int64"), inv.astype("int64"), cnt.astype("int64"))


def _unique_shape(attrs: Any, ins: list[np.ndarray]) -> list[tuple[int, ...]]:
    y, idx, inv, cnt = unique_np(ins[0], True, attrs.axis)
    return [y.shape, idx.shape, inv.shape, cnt.shape]


register_op("unique", _unique_rel, OpPattern.OPAQUE, 1, {"is_sorted": True, "axis": None})
register_op_attr("unique", "FNumpy", lambda attrs, ins, t: unique_np(ins[0], attrs.is_sorted, attrs.axis))
register_shape_func("unique", _unique_shape, data_dependent=True)


def unique(data: RelayExpr, is_sorted: bool = True, *, axis: int | None = None) -> TupleWrapper:
    """ONNX Unique: ``(Y, indices, inverse_indices, counts)`` (int64 indices), sorted or in
    order of first occurrence, of the elements (``axis=None``: flattened) or of the slices along
    ``axis``. (TVM's ``relay.unique`` pads its outputs to the input size and returns the count;
    this one returns exactly-sized outputs, as ONNX does; ``axis`` is keyword-only so that TVM's
    positional ``return_counts`` is refused rather than taken for an axis.)"""
    call = make_call("unique", [data], {"is_sorted": bool(is_sorted),
                                        "axis": None if axis is None else int(axis)})
    return TupleWrapper(call, 4)
