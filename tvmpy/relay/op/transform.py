"""Shape-changing (injective) operators: reshape, transpose, concatenate, split, squeeze,
expand_dims, take, strided_slice, broadcast_to, cast, layout_transform, tile, repeat, reverse,
gather, gather_nd, one_hot, arange, cumsum."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...tir.expr import IntImm, PrimExpr
from ..expr import RelayExpr, Tuple, TupleGetItem
from ..size_checks import require_same
from ..ty import TensorType, TupleType, Type, as_dim, dim_compatible, dim_equal, is_any
from ._rel import (
    fail,
    normalize_axes,
    normalize_axis,
    shape_str,
    size_of,
    tensor_arg,
    tuple_arg,
)
from .registry import REQUIRED, OpPattern, make_call, register_op

__all__ = [
    "reshape", "transpose", "concatenate", "split", "squeeze", "expand_dims", "take",
    "strided_slice", "broadcast_to", "cast", "reinterpret", "layout_transform", "TupleWrapper", "reshape_like",
    "tile", "repeat", "reverse", "gather", "gather_nd", "one_hot", "arange", "cumsum",
]  # fmt: skip


class TupleWrapper:
    """What multi-output operators return (as in TVM): index it to get ``TupleGetItem`` nodes."""

    def __init__(self, tuple_value: RelayExpr, size: int):
        self.tuple_value = tuple_value
        self.size = size

    def astuple(self) -> RelayExpr:
        return self.tuple_value

    def __getitem__(self, index: int) -> TupleGetItem:
        if not -self.size <= index < self.size:
            raise IndexError(f"tuple index {index} out of range for {self.size} fields")
        return TupleGetItem(self.tuple_value, index % self.size)

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return (self[i] for i in range(self.size))


# ------------------------------------------------------------------------------------------------
def _reshape_rel(arg_types: list[Type], attrs: Any) -> Type:
    """newshape as TVM: 0 copies the input dim (a literal 0 with ``allowzero``), -1 is inferred
    (at most one)."""
    d = tensor_arg(arg_types[0], "the input")
    new = list(attrs.newshape)
    out: list[Any] = []
    infer_at = None
    for i, v in enumerate(new):
        if isinstance(v, int) and v == 0 and getattr(attrs, "allowzero", False):
            out.append(0)
        elif isinstance(v, int) and v == 0:
            if i >= len(d.shape):
                fail(f"newshape {new}: 0 at position {i} but the input {shape_str(d.shape)} "
                     f"has rank {len(d.shape)}")
            out.append(d.shape[i])
        elif isinstance(v, int) and v == -1:
            if infer_at is not None:
                fail(f"newshape {new} has more than one -1")
            infer_at = len(out)
            out.append(1)
        elif isinstance(v, int) and v < -1:
            fail(f"newshape {new}: unsupported special value {v}")
        else:
            out.append(as_dim(v))
    total = size_of(d.shape)
    if infer_at is not None:
        num, den = _cancel(list(d.shape), [o for i, o in enumerate(out) if i != infer_at])
        if isinstance(num, int) and isinstance(den, int):
            if den == 0 or num % den:
                fail(f"cannot reshape {shape_str(d.shape)} to {new}: {total} elements "
                     f"are not divisible by {size_of(out)}")
            out[infer_at] = num // den
        else:
            out[infer_at] = as_dim(num // den)
    elif not dim_compatible(size_of(out), total):  # (with Any dims: checked at run time)
        fail(f"cannot reshape {shape_str(d.shape)} ({total} elements) to "
             f"{shape_str(out)} ({size_of(out)} elements)")
    return TensorType(out, d.dtype)


def _cancel(num: list[Any], den: list[Any]) -> tuple[Any, Any]:
    """Products of ``num`` and ``den`` after removing equal symbolic factors (n*256 / n -> 256)."""
    num_rest = list(num)
    den_rest = []
    for x in den:
        if isinstance(x, int):
            den_rest.append(x)
            continue
        for i, y in enumerate(num_rest):
            if not isinstance(y, int) and dim_equal(x, y):
                del num_rest[i]
                break
        else:
            den_rest.append(x)
    return size_of(num_rest), size_of(den_rest)


register_op("reshape", _reshape_rel, OpPattern.INJECTIVE, 1, {"newshape": (), "allowzero": False})


def reshape(data: RelayExpr, newshape: Any, allowzero: bool = False) -> RelayExpr:
    """``data`` with shape ``newshape`` (TVM's special values: 0 copies the input's dim unless
    ``allowzero``, where it is a literal 0; -1 is inferred)."""
    if isinstance(newshape, int):
        newshape = (newshape,)
    attrs: dict[str, Any] = {"newshape": tuple(newshape)}
    if allowzero:
        attrs["allowzero"] = True
    return make_call("reshape", [data], attrs)


def _reshape_like_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    like = tensor_arg(arg_types[1], "shape_like")
    if not dim_equal(size_of(d.shape), size_of(like.shape)):
        fail(f"reshape_like: {shape_str(d.shape)} and {shape_str(like.shape)} differ in size")
    return TensorType(like.shape, d.dtype)


register_op("reshape_like", _reshape_like_rel, OpPattern.INJECTIVE, 2)


def reshape_like(data: RelayExpr, shape_like: RelayExpr) -> RelayExpr:
    return make_call("reshape_like", [data, shape_like])


def _transpose_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    n = len(d.shape)
    axes = attrs.axes
    if axes is None:
        perm = list(range(n))[::-1]
    else:
        if len(axes) != n:
            fail(f"axes {list(axes)} do not match the rank {n} of the input {shape_str(d.shape)}")
        perm = normalize_axes(axes, n)
    return TensorType([d.shape[p] for p in perm], d.dtype)


register_op("transpose", _transpose_rel, OpPattern.INJECTIVE, 1, {"axes": None})


def transpose(data: RelayExpr, axes: Sequence[int] | None = None) -> RelayExpr:
    return make_call("transpose", [data], {"axes": None if axes is None else tuple(int(a) for a in axes)})


def _concat_rel(arg_types: list[Type], attrs: Any) -> Type:
    tt = tuple_arg(arg_types[0], "concatenate's input")
    if not tt.fields:
        fail("concatenate of an empty tuple")
    ts = [tensor_arg(f, f"field {i}") for i, f in enumerate(tt.fields)]
    first = ts[0]
    n = len(first.shape)
    ax = normalize_axis(attrs.axis, n)
    total: Any = 0
    shp = list(first.shape)
    for i, t in enumerate(ts):
        # an Any dimension unifies with the other fields' (TVM): the result takes the more
        # specific size, the equality is checked at run time (relay/size_checks.py)
        bad = t.dtype != first.dtype or len(t.shape) != n
        for j, d in enumerate(t.shape if not bad and i else ()):
            if j != ax:
                u = require_same(d, shp[j], f"dimension {j} of field {i}",
                                 f"dimension {j} of field 0")
                bad = bad or u is None
                if u is not None and not (is_any(u) and is_any(shp[j])):
                    shp[j] = u  # (of two ?, field 0's stays: the checks name it)
        if bad:
            fail(f"concatenate on axis {attrs.axis}: field {i} {t.dtype}{shape_str(t.shape)} "
                 f"does not match field 0 {first.dtype}{shape_str(first.shape)}")
        total = total + t.shape[ax]
    shp[ax] = as_dim(total)
    return TensorType(shp, first.dtype)


register_op("concatenate", _concat_rel, OpPattern.INJECTIVE, 1, {"axis": 0})


def concatenate(data: Any, axis: int) -> RelayExpr:
    if not isinstance(data, RelayExpr):
        data = Tuple(list(data))
    return make_call("concatenate", [data], {"axis": int(axis)})


def _split_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    ax = normalize_axis(attrs.axis, len(d.shape))
    dim = d.shape[ax]
    ios = attrs.indices_or_sections
    fields = []
    if isinstance(ios, int):
        if isinstance(dim, int) and (ios <= 0 or dim % ios):
            fail(f"split: axis {attrs.axis} of {shape_str(d.shape)} ({dim}) is not divisible "
                 f"into {ios} sections")
        for _ in range(ios):
            shp = list(d.shape)
            shp[ax] = as_dim(dim // ios)
            fields.append(TensorType(shp, d.dtype))
    else:
        bounds = [0, *ios, dim]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if isinstance(lo, int) and isinstance(hi, int) and hi < lo:
                fail(f"split: indices {list(ios)} are not increasing within {dim}")
            shp = list(d.shape)
            shp[ax] = as_dim(hi - lo)
            fields.append(TensorType(shp, d.dtype))
    return TupleType(fields)


register_op("split", _split_rel, OpPattern.INJECTIVE, 1, {"indices_or_sections": 1, "axis": 0})


def split(data: RelayExpr, indices_or_sections: Any, axis: int = 0) -> TupleWrapper:
    ios = indices_or_sections
    if isinstance(ios, int):
        n = ios
    else:
        ios = tuple(int(i) for i in ios)
        n = len(ios) + 1
    return TupleWrapper(make_call("split", [data], {"indices_or_sections": ios, "axis": int(axis)}), n)


def _squeeze_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    if attrs.axis is None:
        return TensorType([s for s in d.shape if not (isinstance(s, int) and s == 1)], d.dtype)
    axes = normalize_axes(attrs.axis, len(d.shape))
    for a in axes:
        if not dim_equal(d.shape[a], 1):
            fail(f"squeeze: axis {a} of {shape_str(d.shape)} has size {d.shape[a]}, not 1")
    return TensorType([s for i, s in enumerate(d.shape) if i not in axes], d.dtype)


register_op("squeeze", _squeeze_rel, OpPattern.INJECTIVE, 1, {"axis": None})


def squeeze(data: RelayExpr, axis: Any = None) -> RelayExpr:
    if isinstance(axis, int):
        axis = (axis,)
    return make_call("squeeze", [data], {"axis": None if axis is None else tuple(axis)})


def _expand_dims_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    n = len(d.shape)
    ax = attrs.axis
    if not -n - 1 <= ax <= n:
        fail(f"expand_dims: axis {ax} out of range for rank {n}")
    ax = ax + n + 1 if ax < 0 else ax
    shp = list(d.shape)
    for _ in range(attrs.num_newaxis):
        shp.insert(ax, 1)
    return TensorType(shp, d.dtype)


register_op("expand_dims", _expand_dims_rel, OpPattern.BROADCAST, 1, {"axis": 0, "num_newaxis": 1})


def expand_dims(data: RelayExpr, axis: int, num_newaxis: int = 1) -> RelayExpr:
    return make_call("expand_dims", [data], {"axis": int(axis), "num_newaxis": int(num_newaxis)})


def _take_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the data")
    idx = tensor_arg(arg_types[1], "the indices")
    if not idx.dtype.startswith(("int", "uint")):
        fail(f"take: indices must be integers, got {idx.dtype}")
    if attrs.axis is None:
        src, out = [size_of(d.shape)], list(idx.shape)
    else:
        ax = normalize_axis(attrs.axis, len(d.shape))
        src, out = [d.shape[ax]], [*d.shape[:ax], *idx.shape, *d.shape[ax + 1 :]]
    if _has_zero(src) and not _has_zero(out):
        fail(f"take: cannot take {shape_str(idx.shape)} indices from an empty axis "
             f"(data {shape_str(d.shape)}, axis {attrs.axis})")
    return TensorType(out, d.dtype)


def _has_zero(shape: Sequence[Any]) -> bool:
    return any(isinstance(s, int) and s == 0 for s in shape)


register_op("take", _take_rel, OpPattern.INJECTIVE, 2, {"axis": None, "mode": "clip"})


def take(data: RelayExpr, indices: RelayExpr, axis: int | None = None, mode: str = "clip") -> RelayExpr:
    if mode not in ("clip", "wrap", "fast"):
        raise ValueError(f"take: mode must be clip, wrap or fast, got {mode!r}")
    return make_call("take", [data, indices], {"axis": axis, "mode": mode})


def _slice_extent(begin: int, end: int, stride: int, dim: Any) -> Any:
    if not isinstance(dim, int):
        if stride == 1 and begin >= 0 and 0 <= end < 2**31 - 1:
            return end - begin
        fail(f"strided_slice over a symbolic dimension {dim} needs stride 1 and explicit bounds")
    return len(range(*slice(begin, end, stride).indices(dim)))


def _strided_slice_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    n = len(d.shape)
    axes = normalize_axes(attrs.axes, n) if attrs.axes is not None else list(range(len(attrs.begin)))
    begin, end = list(attrs.begin), list(attrs.end)
    strides = list(attrs.strides) if attrs.strides else [1] * len(axes)
    if len(strides) == 1 and len(axes) > 1:
        strides = strides * len(axes)
    if len(axes) > n or len(begin) != len(axes) or len(end) != len(axes) or len(strides) != len(axes):
        fail(f"strided_slice: begin {begin}, end {end}, strides {strides} do not match "
             f"the input {shape_str(d.shape)}")
    shp = list(d.shape)
    for a, b, e, s in zip(axes, begin, end, strides):
        if s == 0:
            fail("strided_slice: stride 0")
        shp[a] = _slice_extent(b, e, s, d.shape[a])
    return TensorType(shp, d.dtype)


register_op(
    "strided_slice", _strided_slice_rel, OpPattern.INJECTIVE, 1,
    {"begin": (), "end": (), "strides": None, "axes": None},
)  # fmt: skip


def strided_slice(
    data: RelayExpr,
    begin: Sequence[int],
    end: Sequence[int],
    strides: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
) -> RelayExpr:
    tup = lambda v: None if v is None else tuple(int(x) for x in v)
    return make_call("strided_slice", [data], {
        "begin": tup(begin), "end": tup(end), "strides": tup(strides), "axes": tup(axes),
    })  # fmt: skip


def _broadcast_to_rel(arg_types: list[Type], attrs: Any) -> Type:
    from ._rel import broadcast_shape

    d = tensor_arg(arg_types[0], "the input")
    target = [as_dim(s) for s in attrs.shape]
    out = broadcast_shape(d.shape, target)
    if len(out) != len(target) or not all(dim_equal(a, b) for a, b in zip(out, target)):
        fail(f"broadcast_to: {shape_str(d.shape)} cannot broadcast to {shape_str(target)}")
    return TensorType(target, d.dtype)


register_op("broadcast_to", _broadcast_to_rel, OpPattern.BROADCAST, 1, {"shape": ()})


def broadcast_to(data: RelayExpr, shape: Sequence[Any]) -> RelayExpr:
    return make_call("broadcast_to", [data], {"shape": tuple(shape)})


def _cast_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    return TensorType(d.shape, attrs.dtype)


register_op("cast", _cast_rel, OpPattern.ELEMWISE, 1, {"dtype": REQUIRED})


def cast(data: RelayExpr, dtype: str) -> RelayExpr:
    from ...ir import dtype as _dt

    _dt.parse(str(dtype))
    return make_call("cast", [data], {"dtype": str(dtype)})


def _reinterpret_rel(arg_types: list[Type], attrs: Any) -> Type:
    from ...ir import dtype as _dt

    d = tensor_arg(arg_types[0], "the input")
    src, dst = str(d.dtype), str(attrs.dtype)
    if (_dt.bits_of(src) != _dt.bits_of(dst) or _dt.bits_of(src) < 8 or _dt.is_bool(src)
            or _dt.is_bool(dst)):
        fail(f"reinterpret: {src} -> {dst}: only types of one bit width (8 or more, not bool) "
             "reinterpret")
    return TensorType(d.shape, dst)


register_op("reinterpret", _reinterpret_rel, OpPattern.ELEMWISE, 1, {"dtype": REQUIRED})


def reinterpret(data: RelayExpr, dtype: str) -> RelayExpr:
    """The bits of each element of ``data`` read as ``dtype`` (of the same width): float32 1.0
    becomes int32 0x3f800000 (TVM's ``relay.reinterpret``; ONNX BitCast)."""
    from ...ir import dtype as _dt

    _dt.parse(str(dtype))
    return make_call("reinterpret", [data], {"dtype": str(dtype)})


def _parse_layout(layout: str) -> list[tuple[str, int | None]]:
    """"NCHW16c" -> [(N,None),(C,None),(H,None),(W,None),(c,16)]."""
    out: list[tuple[str, int | None]] = []
    num = ""
    for ch in layout:
        if ch.isdigit():
            num += ch
        elif ch.isalpha():
            out.append((ch, int(num) if num else None))
            num = ""
        else:
            raise ValueError(f"bad layout {layout!r}")
    if num:
        raise ValueError(f"bad layout {layout!r}")
    for ch, f in out:
        if ch.islower() and f is None:
            raise ValueError(f"layout {layout!r}: sub-dimension {ch!r} needs a factor")
    return out


def _layout_transform_rel(arg_types: list[Type], attrs: Any) -> Type:
    d = tensor_arg(arg_types[0], "the input")
    src, dst = _parse_layout(attrs.src_layout), _parse_layout(attrs.dst_layout)
    if len(src) != len(d.shape):
        fail(f"layout_transform: src_layout {attrs.src_layout} does not match {shape_str(d.shape)}")
    full: dict[str, Any] = {}
    for (ch, _f), s in zip(src, d.shape):
        if ch.isupper():
            full[ch] = s
    for (ch, _f2), s in zip(src, d.shape):
        if ch.islower():
            full[ch.upper()] = as_dim(full[ch.upper()] * s)
    if set(full) != {c for c, _ in dst if c.isupper()}:
        fail(f"layout_transform: {attrs.src_layout} and {attrs.dst_layout} name different axes")
    out = []
    for ch, f in dst:
        if ch.isupper():
            sub = next((ff for c, ff in dst if c == ch.lower()), None)
            if sub is not None and isinstance(full[ch], int) and full[ch] % sub:
                fail(f"layout_transform: axis {ch}={full[ch]} is not divisible by {sub}")
            out.append(as_dim(full[ch] // sub) if sub else full[ch])
        else:
            out.append(f)
    return TensorType(out, d.dtype)


register_op("layout_transform", _layout_transform_rel, OpPattern.INJECTIVE, 1,
            {"src_layout": "", "dst_layout": ""})


def layout_transform(data: RelayExpr, src_layout: str, dst_layout: str) -> RelayExpr:
    _parse_layout(src_layout)
    _parse_layout(dst_layout)
    return make_call("layout_transform", [data], {"src_layout": src_layout, "dst_layout": dst_layout})


# ------------------------------------------------------------------------------------------------
# tiling, reversal, gathers, one-hot, arange, cumsum
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
    if isinstance(stop, PrimExpr) and not isinstance(stop, IntImm):  # a symbolic length
        if not (isinstance(start, int) and isinstance(step, int)):
            fail(f"arange: a symbolic stop {stop} needs integer start and step, got {start}, "
                 f"{step}")
        from ...topi.transform import arange_length

        return TensorType([arange_length(start, stop, step)], attrs.dtype)
    if all(isinstance(v, int) for v in (start, stop, step)):
        n = -(-(stop - start) // step)  # exact ceil for integers
    else:
        n = math.ceil((stop - start) / step)
    return TensorType([max(0, int(n))], attrs.dtype)


register_op("arange", _arange_rel, OpPattern.INJECTIVE, 0,
            {"start": 0, "stop": REQUIRED, "step": 1, "dtype": "float32"})


def arange(start: float, stop: float | None = None, step: float = 1, dtype: str = "float32"
           ) -> RelayExpr:
    """``arange(5)`` or ``arange(1, 7, 2)``; ``stop`` may be a size expression over ``Any``
    dims (a run-time length), with integer ``start`` and ``step``."""
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
