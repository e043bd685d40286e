"""Dynamic shape operators (TVM's ``relay.op.dyn``): the shape-like argument is a tensor whose
values are known only at run time: reshape, broadcast_to (ONNX Expand), full/zeros/ones
(ConstantOfShape), arange (Range), tile, strided_slice (Slice), squeeze, expand_dims
(Unsqueeze), split, one_hot and topk.

Their meaning (``FNumpy``) is ONNX's reference; the output rank is static (from the static
length of the shape tensor, or the attributes) and each dimension the values decide is ``Any``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...ty import TensorType, TupleType, Type
from .._rel import fail, normalize_axis, shape_str, tensor_arg
from ..registry import make_call
from ..transform import TupleWrapper
from ._common import any_dims, ints, register_dyn_op, scalar, scalar_arg, shape_tensor_len

__all__ = ["reshape", "broadcast_to", "full", "zeros", "ones", "arange", "tile", "strided_slice",
           "squeeze", "expand_dims", "split", "one_hot", "topk", "reshape_shape"]


def _as_expr(v: Any, dtype: str = "int64") -> RelayExpr:
    return v if isinstance(v, RelayExpr) else const(np.asarray(v, dtype=dtype))


# ---- reshape ---------------------------------------------------------------------------------
def reshape_shape(in_shape: tuple[int, ...], target: list[int], allowzero: bool) -> tuple[int, ...]:
    """ONNX Reshape's output shape: 0 copies the input's dimension (a literal 0 with
    ``allowzero``), one -1 is inferred."""
    out: list[int] = []
    infer = None
    for i, v in enumerate(target):
        if v == 0 and not allowzero:
            if i >= len(in_shape):
                raise ValueError(f"shape {target}: 0 at position {i} copies no dimension of the "
                                 f"input {in_shape}")
            out.append(in_shape[i])
        elif v == -1:
            if infer is not None:
                raise ValueError(f"shape {target} has more than one -1")
            infer = i
            out.append(1)
        elif v < 0:
            raise ValueError(f"shape {target}: invalid dimension {v}")
        else:
            out.append(v)
    total = math.prod(in_shape)
    known = math.prod(out)
    if infer is not None:
        if allowzero and 0 in target:
            raise ValueError(f"shape {target}: -1 together with a literal 0 (allowzero)")
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape {tuple(in_shape)} ({total} elements) to {target}: "
                             f"{total} is not a multiple of {known}")
        out[infer] = total // known
    elif known != total:
        raise ValueError(f"cannot reshape {tuple(in_shape)} ({total} elements) to {target} "
                         f"({known} elements)")
    return tuple(out)


def _reshape_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    n = shape_tensor_len(arg_types[1], "the new shape")
    return TensorType(any_dims(n), d.dtype)


register_dyn_op(
    "dyn.reshape", _reshape_rel, 2, {"allowzero": False},
    lambda a, ins: ins[0].reshape(reshape_shape(ins[0].shape, ints(ins[1]), a.allowzero)),
    lambda a, ins: [reshape_shape(ins[0].shape, ints(ins[1]), a.allowzero)],
    "data reshaped to the shape tensor's values (0 copies, -1 inferred)")


def reshape(data: RelayExpr, newshape: Any, allowzero: bool = False) -> RelayExpr:
    """``data`` with the shape held by the 1-D integer tensor ``newshape``."""
    return make_call("dyn.reshape", [data, _as_expr(newshape)], {"allowzero": bool(allowzero)})


# ---- broadcast_to (bidirectional, as ONNX Expand) ---------------------------------------------
def _broadcast_shape(a: tuple[int, ...], b: list[int]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise ValueError(f"the data {tuple(a)} and the shape {b} do not broadcast") from None


def _broadcast_to_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    n = shape_tensor_len(arg_types[1], "the shape")
    r = max(n, len(d.shape))
    dims = any_dims(r)
    for k, s in enumerate(d.shape):  # a data dimension other than 1 is the output's
        if isinstance(s, int) and s != 1:
            dims[r - len(d.shape) + k] = s
    return TensorType(dims, d.dtype)


register_dyn_op(
    "dyn.broadcast_to", _broadcast_to_rel, 2, {},
    lambda a, ins: np.broadcast_to(ins[0], _broadcast_shape(ins[0].shape, ints(ins[1]))).copy(),
    lambda a, ins: [_broadcast_shape(ins[0].shape, ints(ins[1]))],
    "data broadcast with the shape tensor's values (numpy rules, both ways: ONNX Expand)")


def broadcast_to(data: RelayExpr, shape: Any) -> RelayExpr:
    return make_call("dyn.broadcast_to", [data, _as_expr(shape)])


# ---- full / zeros / ones --------------------------------------------------------------------
def _check_dims(shape: list[int]) -> tuple[int, ...]:
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return tuple(shape)


def _full_rel(arg_types: list[Type], attrs: Any) -> Type:
    scalar_arg(arg_types[0], "the fill value")
    n = shape_tensor_len(arg_types[1], "the shape")
    return TensorType(any_dims(n), attrs.dtype)


register_dyn_op(
    "dyn.full", _full_rel, 2, {"dtype": "float32"},
    lambda a, ins: np.full(_check_dims(ints(ins[1])), scalar(ins[0]), dtype=a.dtype),
    lambda a, ins: [_check_dims(ints(ins[1]))],
    "a tensor of the shape tensor's shape filled with a scalar (ONNX ConstantOfShape)")


def full(fill_value: Any, shape: Any, dtype: str = "float32") -> RelayExpr:
    return make_call("dyn.full", [_as_expr(fill_value, dtype), _as_expr(shape)], {"dtype": dtype})


def zeros(shape: Any, dtype: str = "float32") -> RelayExpr:
    return full(0, shape, dtype)


def ones(shape: Any, dtype: str = "float32") -> RelayExpr:
    return full(1, shape, dtype)


# ---- arange ---------------------------------------------------------------------------------
def _arange_len(start: Any, stop: Any, step: Any) -> int:
    if step == 0:
        raise ValueError("step 0")
    if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        n = -(-(int(stop) - int(start)) // int(step))
    else:
        n = math.ceil((float(stop) - float(start)) / float(step))
    return max(int(n), 0)


def _arange_np(a: Any, ins: list) -> np.ndarray:
    start, stop, step = (scalar(v) for v in ins)
    n = _arange_len(start, stop, step)
    return (start + step * np.arange(n)).astype(a.dtype) if n else np.zeros(0, a.dtype)


def _arange_rel(arg_types: list[Type], attrs: Any) -> Type:
    for t, w in zip(arg_types, ("start", "stop", "step")):
        scalar_arg(t, w)
    return TensorType(any_dims(1), attrs.dtype)


register_dyn_op(
    "dyn.arange", _arange_rel, 3, {"dtype": "float32"}, _arange_np,
    lambda a, ins: [(_arange_len(*(scalar(v) for v in ins)),)],
    "start + step * i for i < ceil((stop - start) / step) (ONNX Range)")


def arange(start: Any, stop: Any, step: Any = 1, dtype: str = "float32") -> RelayExpr:
    return make_call("dyn.arange", [_as_expr(start, dtype), _as_expr(stop, dtype),
                                    _as_expr(step, dtype)], {"dtype": dtype})


# ---- tile -----------------------------------------------------------------------------------
def _tile_shape(shape: tuple[int, ...], reps: list[int]) -> tuple[int, ...]:
    if any(r < 0 for r in reps):
        raise ValueError(f"negative repeats {reps}")
    n = max(len(shape), len(reps))
    s = (1,) * (n - len(shape)) + tuple(shape)
    r = [1] * (n - len(reps)) + reps
    return tuple(a * b for a, b in zip(s, r))


def _tile_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    n = shape_tensor_len(arg_types[1], "the repeats")
    return TensorType(any_dims(max(n, len(d.shape))), d.dtype)


def _tile_np(a: Any, ins: list) -> np.ndarray:
    reps = ints(ins[1])
    _tile_shape(ins[0].shape, reps)  # (checks the repeats)
    return np.tile(ins[0], reps)


register_dyn_op(
    "dyn.tile", _tile_rel, 2, {}, _tile_np,
    lambda a, ins: [_tile_shape(ins[0].shape, ints(ins[1]))],
    "data repeated along each axis by the repeats tensor's values")


def tile(data: RelayExpr, reps: Any) -> RelayExpr:
    return make_call("dyn.tile", [data, _as_expr(reps)])


# ---- strided_slice (ONNX Slice) ---------------------------------------------------------------
def slice_tuple(shape: tuple[int, ...], begin: list[int], end: list[int], strides: list[int],
                axes: list[int]) -> tuple[slice, ...]:
    """numpy slices of ONNX Slice (whose clamping is Python's slice rules)."""
    r = len(shape)
    if not len(begin) == len(end) == len(strides) == len(axes):
        raise ValueError(f"starts {begin}, ends {end}, steps {strides} and axes {axes} differ "
                         "in length")
    out = [slice(None)] * r
    seen = set()
    for b, e, s, ax in zip(begin, end, strides, axes):
        if not -r <= ax < r:
            raise ValueError(f"axis {ax} is out of range for the data {tuple(shape)}")
        ax %= r
        if ax in seen:
            raise ValueError(f"axis {ax} appears twice in axes {axes}")
        seen.add(ax)
        if s == 0:
            raise ValueError(f"step 0 on axis {ax}")
        out[ax] = slice(b, e, s)
    return tuple(out)


def _slice_np(a: Any, ins: list) -> np.ndarray:
    x = ins[0]
    return x[slice_tuple(x.shape, *(ints(v) for v in ins[1:]))].copy()


def _strided_slice_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    lens = {shape_tensor_len(t, w) for t, w in zip(arg_types[1:], ("begin", "end", "strides",
                                                                   "axes"))}
    if len(lens) != 1:
        fail("strided_slice: begin, end, strides and axes must have one length")
    if lens.pop() > len(d.shape):
        fail(f"strided_slice: more sliced axes than the data {shape_str(d.shape)} has")
    return TensorType(any_dims(len(d.shape)), d.dtype)


register_dyn_op(
    "dyn.strided_slice", _strided_slice_rel, 5, {}, _slice_np,
    lambda a, ins: [_slice_np(a, ins).shape],
    "data[begin:end:strides] on the given axes, the four given as tensors (ONNX Slice)")


def strided_slice(data: RelayExpr, begin: Any, end: Any, strides: Any = None,
                  axes: Any = None) -> RelayExpr:
    """Slice ``data`` on ``axes`` (default: the first len(begin)); ``strides`` default to 1."""
    b = _as_expr(begin)
    n = shape_tensor_len(_static_type(b), "begin")
    s = _as_expr(strides if strides is not None else np.ones(n, np.int64))
    ax = _as_expr(axes if axes is not None else np.arange(n, dtype=np.int64))
    return make_call("dyn.strided_slice", [data, b, _as_expr(end), s, ax])


def _static_type(e: RelayExpr) -> Type:
    from ...type_infer import infer_type

    return infer_type(e).checked_type


# ---- squeeze / expand_dims (ONNX Squeeze / Unsqueeze with an axes tensor) ---------------------
def _squeeze_shape(shape: tuple[int, ...], axes: list[int]) -> tuple[int, ...]:
    r = len(shape)
    norm = set()
    for a in axes:
        if not -r <= a < r:
            raise ValueError(f"axis {a} is out of range for the data {tuple(shape)}")
        if shape[a % r] != 1:
            raise ValueError(f"axis {a} of the data {tuple(shape)} has size {shape[a % r]}, not 1")
        norm.add(a % r)
    return tuple(s for k, s in enumerate(shape) if k not in norm)


def _squeeze_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    n = shape_tensor_len(arg_types[1], "the axes")
    if n > len(d.shape):
        fail(f"squeeze: {n} axes for the data {shape_str(d.shape)}")
    ones_ = [k for k, s in enumerate(d.shape) if isinstance(s, int) and s == 1]
    if len(ones_) == n and all(isinstance(s, int) for s in d.shape):  # only one choice
        return TensorType([s for k, s in enumerate(d.shape) if k not in ones_], d.dtype)
    return TensorType(any_dims(len(d.shape) - n), d.dtype)


register_dyn_op(
    "dyn.squeeze", _squeeze_rel, 2, {},
    lambda a, ins: ins[0].reshape(_squeeze_shape(ins[0].shape, ints(ins[1]))),
    lambda a, ins: [_squeeze_shape(ins[0].shape, ints(ins[1]))],
    "data without the size-1 axes the axes tensor names (ONNX Squeeze)")


def squeeze(data: RelayExpr, axes: Any) -> RelayExpr:
    return make_call("dyn.squeeze", [data, _as_expr(axes)])


def _unsqueeze_shape(shape: tuple[int, ...], axes: list[int]) -> tuple[int, ...]:
    r = len(shape) + len(axes)
    norm = []
    for a in axes:
        if not -r <= a < r:
            raise ValueError(f"axis {a} is out of range for rank {r}")
        norm.append(a % r)
    if len(set(norm)) != len(norm):
        raise ValueError(f"axes {axes} name an axis twice")
    out = list(shape)
    for a in sorted(norm):
        out.insert(a, 1)
    return tuple(out)


def _expand_dims_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    n = shape_tensor_len(arg_types[1], "the axes")
    return TensorType(any_dims(len(d.shape) + n), d.dtype)


register_dyn_op(
    "dyn.expand_dims", _expand_dims_rel, 2, {},
    lambda a, ins: ins[0].reshape(_unsqueeze_shape(ins[0].shape, ints(ins[1]))),
    lambda a, ins: [_unsqueeze_shape(ins[0].shape, ints(ins[1]))],
    "data with size-1 axes inserted at the axes tensor's positions (ONNX Unsqueeze)")


def expand_dims(data: RelayExpr, axes: Any) -> RelayExpr:
    return make_call("dyn.expand_dims", [data, _as_expr(axes)])


# ---- split ----------------------------------------------------------------------------------
def _split_sizes(shape: tuple[int, ...], sizes: list[int], axis: int, n: int) -> list[int]:
    ax = axis % len(shape)
    if len(sizes) != n:
        raise ValueError(f"{len(sizes)} split sizes {sizes} for {n} outputs")
    if any(s < 0 for s in sizes) or sum(sizes) != shape[ax]:
        raise ValueError(f"split sizes {sizes} do not add up to axis {ax} of the data "
                         f"{tuple(shape)} ({shape[ax]})")
    return sizes


def _split_np(a: Any, ins: list) -> tuple:
    x = ins[0]
    sizes = _split_sizes(x.shape, ints(ins[1]), a.axis, a.num_outputs)
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=a.axis))


def _split_shapes(a: Any, ins: list) -> list:
    x = ins[0]
    sizes = _split_sizes(x.shape, ints(ins[1]), a.axis, a.num_outputs)
    ax = a.axis % x.ndim
    return [x.shape[:ax] + (s,) + x.shape[ax + 1:] for s in sizes]


def _split_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    n = shape_tensor_len(arg_types[1], "the split sizes")
    ax = normalize_axis(attrs.axis, len(d.shape))
    if n != attrs.num_outputs:
        fail(f"split: {n} sizes for {attrs.num_outputs} outputs")
    fields = []
    for _ in range(n):
        s = list(d.shape)
        s[ax] = any_dims(1)[0]
        fields.append(TensorType(s, d.dtype))
    return TupleType(fields)


register_dyn_op("dyn.split", _split_rel, 2, {"axis": 0, "num_outputs": 1}, _split_np,
                _split_shapes, "data split on an axis into pieces of the sizes tensor's values")


def split(data: RelayExpr, sizes: Any, axis: int = 0) -> TupleWrapper:
    s = _as_expr(sizes)
    n = shape_tensor_len(_static_type(s), "the split sizes")
    return TupleWrapper(make_call("dyn.split", [data, s], {"axis": int(axis), "num_outputs": n}),
                        n)


# ---- one_hot --------------------------------------------------------------------------------
def _depth(v: np.ndarray) -> int:
    d = int(scalar(v))
    if d < 1:
        raise ValueError(f"depth {d} must be positive")
    return d


def _one_hot_np(a: Any, ins: list) -> np.ndarray:
    idx, depth, on, off = ins
    n = _depth(depth)
    i = np.asarray(idx).astype(np.int64)
    i = np.where(i < 0, i + n, i)  # negative indices count from the end; others out of range
    ax = a.axis % (i.ndim + 1)
    pos = np.arange(n).reshape([n if k == ax else 1 for k in range(i.ndim + 1)])
    hot = np.expand_dims(i, ax) == pos
    return np.where(hot, scalar(on), scalar(off)).astype(a.dtype)


def _one_hot_shape(a: Any, ins: list) -> list:
    idx = ins[0]
    ax = a.axis % (idx.ndim + 1)
    return [idx.shape[:ax] + (_depth(ins[1]),) + idx.shape[ax:]]


def _one_hot_rel(arg_types: list[Type], attrs: Any) -> Type:
    idx = tensor_arg(arg_types[0], "the indices")
    scalar_arg(arg_types[1], "the depth")
    for t, w in zip(arg_types[2:], ("on_value", "off_value")):
        if scalar_arg(t, w).dtype != attrs.dtype:
            fail(f"one_hot: {w} must be {attrs.dtype}, got {tensor_arg(t, w).dtype}")
    r = len(idx.shape)
    if not -r - 1 <= attrs.axis <= r:
        fail(f"one_hot: axis {attrs.axis} out of range for indices {shape_str(idx.shape)}")
    shp = list(idx.shape)
    shp.insert(attrs.axis % (r + 1), any_dims(1)[0])
    return TensorType(shp, attrs.dtype)


register_dyn_op("dyn.one_hot", _one_hot_rel, 4, {"axis": -1, "dtype": "float32"}, _one_hot_np,
                _one_hot_shape, "one-hot of depth given as a tensor (ONNX OneHot)")


def one_hot(indices: RelayExpr, depth: Any, on_value: RelayExpr, off_value: RelayExpr,
            axis: int = -1, dtype: str = "float32") -> RelayExpr:
    return make_call("dyn.one_hot", [indices, _as_expr(depth), on_value, off_value],
                     {"axis": int(axis), "dtype": dtype})


# ---- topk -----------------------------------------------------------------------------------
def _k(v: np.ndarray, n: int) -> int:
    k = int(scalar(v))
    if not 0 <= k <= n:
        raise ValueError(f"k={k} is out of range for an axis of size {n}")
    return k


def topk_np(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The k largest (smallest) along ``axis``, ties in index order (stable), as ONNX."""
    n = x.shape[axis]
    if largest:  # stable descending: sort the reversed axis ascending, then reverse back
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)


def _topk_np(a: Any, ins: list) -> tuple:
    x = ins[0]
    ax = a.axis % x.ndim
    vals, idx = topk_np(x, _k(ins[1], x.shape[ax]), ax, not a.is_ascend)
    return vals, idx.astype(a.dtype)


def _topk_shapes(a: Any, ins: list) -> list:
    x = ins[0]
    ax = a.axis % x.ndim
    s = x.shape[:ax] + (_k(ins[1], x.shape[ax]),) + x.shape[ax + 1:]
    return [s, s]


def _topk_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    ax = normalize_axis(attrs.axis, len(d.shape))
    scalar_arg(arg_types[1], "k")
    s = list(d.shape)
    s[ax] = any_dims(1)[0]
    return TupleType([TensorType(s, d.dtype), TensorType(list(s), attrs.dtype)])


register_dyn_op("dyn.topk", _topk_rel, 2, {"axis": -1, "is_ascend": False, "dtype": "int64"},
                _topk_np, _topk_shapes,
                "the k largest (is_ascend: smallest) values and their indices, k a tensor")


def topk(data: RelayExpr, k: Any, axis: int = -1, is_ascend: bool = False,
         dtype: str = "int64") -> TupleWrapper:
    """(values, indices) of the top ``k`` along ``axis``, sorted, ties by lower index."""
    call = make_call("dyn.topk", [data, _as_expr(k)],
                     {"axis": int(axis), "is_ascend": bool(is_ascend), "dtype": dtype})
    return TupleWrapper(call, 2)
