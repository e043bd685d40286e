"""More operators the ONNX/PyTorch frontends need: further elementwise math and bitwise ops,
tile/repeat/reverse, gather/gather_nd, one_hot, arange, cumsum, instance/group norm,
depth_to_space/space_to_depth. Constructors are re-exported at ``relay`` / ``relay.nn``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..expr import RelayExpr
from ..ty import TensorType, Type, as_dim, dim_equal
from ._rel import (
    broadcast_bool_rel,
    broadcast_rel,
    fail,
    identity_rel,
    normalize_axis,
    shape_str,
    size_of,
    tensor_arg,
)
from .registry import REQUIRED, OpPattern, make_call, register_op

_UNARY = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
          "bitwise_not"]
_BINARY = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]

__all__ = _UNARY + _BINARY + [
    "isinf", "isfinite", "logical_xor", "tile", "repeat", "reverse", "gather", "gather_nd",
    "one_hot", "arange", "cumsum",
]  # fmt: skip


def _bool_unary_rel(arg_types: list[Type], attrs: Any) -> Type:
    t = tensor_arg(arg_types[0], "the input")
    return TensorType(t.shape, "bool")


for _n in _UNARY:
    register_op(_n, identity_rel, OpPattern.ELEMWISE, 1)
for _n in _BINARY:
    register_op(_n, broadcast_rel, OpPattern.BROADCAST, 2)
register_op("isinf", _bool_unary_rel, OpPattern.ELEMWISE, 1)
register_op("isfinite", _bool_unary_rel, OpPattern.ELEMWISE, 1)
register_op("logical_xor", broadcast_bool_rel, OpPattern.BROADCAST, 2)


def _u(name: str):
    def f(data: RelayExpr) -> RelayExpr:
        return make_call(name, [data])

    f.__name__ = name
    return f


def _b(name: str):
    def f(lhs: RelayExpr, rhs: RelayExpr) -> RelayExpr:
        return make_call(name, [lhs, rhs])

    f.__name__ = name
    return f


tan, asin, acos, atan = _u("tan"), _u("asin"), _u("acos"), _u("atan")
sinh, cosh, asinh, acosh, atanh = _u("sinh"), _u("cosh"), _u("asinh"), _u("acosh"), _u("atanh")
bitwise_not, isinf, isfinite = _u("bitwise_not"), _u("isinf"), _u("isfinite")
bitwise_and, bitwise_or, bitwise_xor = _b("bitwise_and"), _b("bitwise_or"), _b("bitwise_xor")
left_shift, right_shift, logical_xor = _b("left_shift"), _b("right_shift"), _b("logical_xor")


# -------------------------------------------------------------------------------------------------
def _tile_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    reps = list(attrs.reps)
    if any(r < 0 for r in reps):
        fail(f"tile: negative reps {reps}")
    n = max(len(reps), len(d.shape))
    shp = [1] * (n - len(d.shape)) + list(d.shape)
    reps = [1] * (n - len(reps)) + reps
    return TensorType([as_dim(s * r) for s, r in zip(shp, reps)], d.dtype)


register_op("tile", _tile_rel, OpPattern.BROADCAST, 1, {"reps": REQUIRED})


def tile(data: RelayExpr, reps: Sequence[int]) -> RelayExpr:
    return make_call("tile", [data], {"reps": tuple(int(r) for r in reps)})


def _repeat_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    ax = normalize_axis(attrs.axis, len(d.shape))
    if attrs.repeats < 1:
        fail(f"repeat: repeats must be >= 1, got {attrs.repeats}")
    shp = list(d.shape)
    shp[ax] = as_dim(shp[ax] * attrs.repeats)
    return TensorType(shp, d.dtype)


register_op("repeat", _repeat_rel, OpPattern.BROADCAST, 1, {"repeats": REQUIRED, "axis": REQUIRED})


def repeat(data: RelayExpr, repeats: int, axis: int) -> RelayExpr:
    return make_call("repeat", [data], {"repeats": int(repeats), "axis": int(axis)})


def _reverse_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    normalize_axis(attrs.axis, len(d.shape))
    return d


register_op("reverse", _reverse_rel, OpPattern.INJECTIVE, 1, {"axis": REQUIRED})


def reverse(data: RelayExpr, axis: int) -> RelayExpr:
    return make_call("reverse", [data], {"axis": int(axis)})


def _int_tensor(t: Type, what: str) -> TensorType:
    tt = tensor_arg(t, what)
    if not tt.dtype.startswith(("int", "uint")):
        fail(f"{what} must be integers, got {tt.dtype}")
    return tt


def _gather_rel(arg_types: list[Type], attrs: Any) -> Type:
    """ONNX GatherElements / torch.gather: output has the indices' shape."""
    d = tensor_arg(arg_types[0], "the data")
    idx = _int_tensor(arg_types[1], "the indices")
    ax = normalize_axis(attrs.axis, len(d.shape))
    if len(idx.shape) != len(d.shape):
        fail(f"gather: indices {shape_str(idx.shape)} must have the rank of data {shape_str(d.shape)}")
    for i, (a, b) in enumerate(zip(idx.shape, d.shape)):
        if i != ax and isinstance(a, int) and isinstance(b, int) and a > b:
            fail(f"gather: indices {shape_str(idx.shape)} exceed data {shape_str(d.shape)} on axis {i}")
    return TensorType(idx.shape, d.dtype)


register_op("gather", _gather_rel, OpPattern.INJECTIVE, 2, {"axis": REQUIRED})


def gather(data: RelayExpr, axis: int, indices: RelayExpr) -> RelayExpr:
    """``out[i][j] = data[indices[i][j]][j]`` along ``axis`` (TVM's argument order)."""
    return make_call("gather", [data, indices], {"axis": int(axis)})


def _gather_nd_rel(arg_types: list[Type], attrs: Any) -> Type:
    """TVM's gather_nd: indices (M, Y...) index the first M axes of data (after batch_dims)."""
    d = tensor_arg(arg_types[0], "the data")
    idx = _int_tensor(arg_types[1], "the indices")
    if not idx.shape:
        fail("gather_nd: indices must have rank >= 1")
    m = idx.shape[0]
    bd = attrs.batch_dims
    if not isinstance(m, int) or m + bd > len(d.shape):
        fail(f"gather_nd: indices {shape_str(idx.shape)} index {m} axes of data {shape_str(d.shape)} "
             f"after {bd} batch dims")
    return TensorType([*idx.shape[1:], *d.shape[bd + m:]], d.dtype)


register_op("gather_nd", _gather_nd_rel, OpPattern.INJECTIVE, 2, {"batch_dims": 0})


def gather_nd(data: RelayExpr, indices: RelayExpr, batch_dims: int = 0) -> RelayExpr:
    return make_call("gather_nd", [data, indices], {"batch_dims": int(batch_dims)})


def _one_hot_rel(arg_types: list[Type], attrs: Any) -> Type:
    idx = _int_tensor(arg_types[0], "the indices")
    on = tensor_arg(arg_types[1], "on_value")
    off = tensor_arg(arg_types[2], "off_value")
    if on.shape or off.shape or on.dtype != attrs.dtype or off.dtype != attrs.dtype:
        fail(f"one_hot: on/off values must be {attrs.dtype} scalars, got {on} and {off}")
    shp = list(idx.shape)
    ax = attrs.axis if attrs.axis >= 0 else len(shp) + 1 + attrs.axis
    if not 0 <= ax <= len(shp):
        fail(f"one_hot: axis {attrs.axis} out of range for indices {shape_str(idx.shape)}")
    shp.insert(ax, attrs.depth)
    return TensorType(shp, attrs.dtype)


register_op("one_hot", _one_hot_rel, OpPattern.OUT_ELEMWISE_FUSABLE, 3,
            {"depth": REQUIRED, "axis": -1, "dtype": "float32"})


def one_hot(indices: RelayExpr, on_value: RelayExpr, off_value: RelayExpr, depth: int,
            axis: int = -1, dtype: str = "float32") -> RelayExpr:
    return make_call("one_hot", [indices, on_value, off_value],
                     {"depth": int(depth), "axis": int(axis), "dtype": dtype})


def _arange_rel(arg_types: list[Type], attrs: Any) -> Type:
    start, stop, step = attrs.start, attrs.stop, attrs.step
    if step == 0:
        fail("arange: step 0")
    if all(isinstance(v, int) for v in (start, stop, step)):
        n = -(-(stop - start) // step)  # exact ceil for integers
    else:
        n = math.ceil((stop - start) / step)
    return TensorType([max(0, int(n))], attrs.dtype)


register_op("arange", _arange_rel, OpPattern.INJECTIVE, 0,
            {"start": 0, "stop": REQUIRED, "step": 1, "dtype": "float32"})


def arange(start: float, stop: float | None = None, step: float = 1, dtype: str = "float32"
           ) -> RelayExpr:
    """Static ``arange`` (numbers, not expressions): ``arange(5)`` or ``arange(1, 7, 2)``."""
    if stop is None:
        start, stop = 0, start
    return make_call("arange", [], {"start": start, "stop": stop, "step": step, "dtype": dtype})


def _cumsum_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    if attrs.axis is None:
        return TensorType([size_of(d.shape)], attrs.dtype or d.dtype)
    normalize_axis(attrs.axis, len(d.shape))
    return TensorType(d.shape, attrs.dtype or d.dtype)


register_op("cumsum", _cumsum_rel, OpPattern.OPAQUE, 1, {"axis": None, "dtype": "", "exclusive": False})


def cumsum(data: RelayExpr, axis: int | None = None, dtype: str = "", exclusive: bool = False
           ) -> RelayExpr:
    return make_call("cumsum", [data], {"axis": axis, "dtype": dtype, "exclusive": bool(exclusive)})


# -------------------------------------------------------------------------------------------------
# nn extras
def _instance_norm_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    ax = normalize_axis(attrs.axis, len(d.shape))
    for t, nm in zip(arg_types[1:], ("gamma", "beta")):
        v = tensor_arg(t, nm)
        if len(v.shape) != 1 or not dim_equal(v.shape[0], d.shape[ax]):
            fail(f"{nm} {shape_str(v.shape)} must be 1-D of size {d.shape[ax]} (axis {attrs.axis} "
                 f"of data {shape_str(d.shape)})")
    return d


register_op("nn.instance_norm", _instance_norm_rel, OpPattern.OPAQUE, 3,
            {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True})


def _group_norm_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = _instance_norm_rel(arg_types, attrs)
    assert isinstance(d, TensorType)
    c = d.shape[normalize_axis(attrs.axis, len(d.shape))]
    if isinstance(c, int) and c % attrs.num_groups:
        fail(f"group_norm: {c} channels are not divisible into {attrs.num_groups} groups")
    return d


register_op("nn.group_norm", _group_norm_rel, OpPattern.OPAQUE, 3,
            {"num_groups": REQUIRED, "axis": 1, "epsilon": 1e-5, "center": True, "scale": True})


def instance_norm(data: RelayExpr, gamma: RelayExpr, beta: RelayExpr, axis: int = 1,
                  epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> RelayExpr:
    return make_call("nn.instance_norm", [data, gamma, beta], {
        "axis": int(axis), "epsilon": float(epsilon), "center": bool(center), "scale": bool(scale)})


def group_norm(data: RelayExpr, gamma: RelayExpr, beta: RelayExpr, num_groups: int, axis: int = 1,
               epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> RelayExpr:
    return make_call("nn.group_norm", [data, gamma, beta], {
        "num_groups": int(num_groups), "axis": int(axis), "epsilon": float(epsilon),
        "center": bool(center), "scale": bool(scale)})  # fmt: skip


def _d2s_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    b = attrs.block_size
    if len(d.shape) != 4 or attrs.layout != "NCHW":
        fail(f"depth_to_space needs NCHW 4-D data, got {shape_str(d.shape)}")
    n, c, h, w = d.shape
    if isinstance(c, int) and c % (b * b):
        fail(f"depth_to_space: {c} channels not divisible by block_size^2 = {b * b}")
    return TensorType([n, as_dim(c // (b * b)), as_dim(h * b), as_dim(w * b)], d.dtype)


def _s2d_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    b = attrs.block_size
    if len(d.shape) != 4 or attrs.layout != "NCHW":
        fail(f"space_to_depth needs NCHW 4-D data, got {shape_str(d.shape)}")
    n, c, h, w = d.shape
    if (isinstance(h, int) and h % b) or (isinstance(w, int) and w % b):
        fail(f"space_to_depth: spatial size {h}x{w} not divisible by block_size {b}")
    return TensorType([n, as_dim(c * b * b), as_dim(h // b), as_dim(w // b)], d.dtype)


register_op("nn.depth_to_space", _d2s_rel, OpPattern.INJECTIVE, 1,
            {"block_size": REQUIRED, "layout": "NCHW", "mode": "DCR"})
register_op("nn.space_to_depth", _s2d_rel, OpPattern.INJECTIVE, 1,
            {"block_size": REQUIRED, "layout": "NCHW"})


def depth_to_space(data: RelayExpr, block_size: int, layout: str = "NCHW", mode: str = "DCR"
                   ) -> RelayExpr:
    if mode not in ("DCR", "CRD"):
        raise ValueError(f"depth_to_space: mode must be DCR or CRD, got {mode!r}")
    return make_call("nn.depth_to_space", [data], {"block_size": int(block_size), "layout": layout,
                                                   "mode": mode})


def space_to_depth(data: RelayExpr, block_size: int, layout: str = "NCHW") -> RelayExpr:
    return make_call("nn.space_to_depth", [data], {"block_size": int(block_size), "layout": layout})
