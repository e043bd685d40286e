"""The QNN operators lowered to integer relay arithmetic (``FTVMQnnCanonicalize``, as TVM).

Each rule ``f(attrs, args, arg_types) -> RelayExpr`` rewrites one QNN call on its (already
lowered) arguments. The products use the standard relay operators the int8 kernels implement:
``nn.conv2d`` / ``nn.dense`` / ``nn.batch_matmul`` on **uint8 data x int8 weights** with
``out_dtype="int32"`` (x86 VNNI's ``vpdpbusd`` operand types): int8 data is shifted by +128 (and
its zero point with it), a uint8 weight by -128. The zero points then enter as correction terms:

    sum (x - zx)(w - zw) = sum x w  -  zw * sum_window x  -  zx * sum w  +  K zx zw

where ``sum w`` (per output channel) folds to a constant when the weight is constant, and the
window-sum term vanishes for symmetric weights (zw = 0, the usual per-channel case). Padding
holds the data's zero point (an explicit ``nn.pad``), so it contributes 0 in real value.

Requantization is onnxruntime's: the int32 accumulator times the float32 scale ratio, rounded
half to even (``nearbyint``), plus the zero point, saturated: bit-exact with ORT. The int64
fixed-point form (``compute_dtype="int64"``) is TVM's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Attrs, Constant, RelayExpr, RelayTypeError, Tuple, const
from ..op import nn, tensor, transform
from ..op import reduce as red
from ..op.nn import _pool2d_rel
from ..op.registry import register_op_attr
from ..ty import TensorType
from .op.reference import avg_pool_plan, fixed_point_multiplier, softmax_rows, softmax_table

__all__ = ["const_value", "QnnCanonicalizeError"]


class QnnCanonicalizeError(RelayTypeError):
    """A QNN call cannot be lowered (e.g. a zero point that must be constant is not)."""


# ---- helpers ----------------------------------------------------------------------------------
def const_value(e: RelayExpr) -> np.ndarray | None:
    """The value of ``e`` when it is a constant expression (no free variables), else None."""
    if isinstance(e, Constant):
        return e.data.numpy()
    from ..analysis import free_vars
    from ..interpreter import evaluate

    if free_vars(e):
        return None
    try:
        v = evaluate(e)
    except Exception:
        return None
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


def _size(t: Any) -> int:
    return int(np.prod([int(d) for d in t.shape])) if t.shape else 1


def _param(e: RelayExpr, t: Any, ndim: int, axis: int) -> RelayExpr:
    """A scale / zero point shaped to broadcast along ``axis`` of an ``ndim`` tensor."""
    if _size(t) == 1:
        return transform.reshape(e, ()) if t.shape else e
    shape = [1] * ndim
    shape[axis % ndim] = -1
    return transform.reshape(e, shape)


def _cast(e: RelayExpr, src: str, dst: str) -> RelayExpr:
    return e if src == dst else transform.cast(e, dst)


def _saturate(v: RelayExpr, dtype: str, src: str = "float32") -> RelayExpr:
    """Clip a value (of dtype ``src``, float by default) to ``dtype``'s range, then cast. A
    float source into int32: 2**31 - 1 is no float32, so values from 2**31 on are selected."""
    info = np.iinfo(np.dtype(dtype))
    if info.bits < 32 or src.startswith("int"):
        return transform.cast(tensor.clip(v, float(info.min), float(info.max)), dtype)
    below = float(np.nextafter(np.float32(2**31), 0))
    y = transform.cast(tensor.clip(v, float(info.min), below), dtype)
    return tensor.where(tensor.greater_equal(v, const(np.asarray(2.0**31, src))),
                        const(int(info.max), dtype), y)


def _i32(e: RelayExpr, t: Any) -> RelayExpr:
    return _cast(e, t.dtype, "int32")


def _f32(e: RelayExpr, t: Any) -> RelayExpr:
    return _cast(e, t.dtype, "float32")


def _requant_float(acc_f32: RelayExpr, mult: RelayExpr, zp_out: RelayExpr, zp_t: Any,
                   out_dtype: str) -> RelayExpr:
    """``saturate(nearbyint(acc * mult) + zp_out)`` in float32 (ORT's MlasRequantizeOutput)."""
    v = tensor.nearbyint(tensor.multiply(acc_f32, mult))
    return _saturate(tensor.add(v, _f32(zp_out, zp_t)), out_dtype)


def _rule(name: str):
    def deco(f):
        register_op_attr(name, "FTVMQnnCanonicalize", f)
        return f

    return deco


# ---- quantize / dequantize / requantize ------------------------------------------------------
@_rule("qnn.quantize")
def _quantize(attrs: Any, args: list, types: list) -> RelayExpr:
    x, s, z = args
    xt, st, zt = types
    n = len(xt.shape)
    ft = xt.dtype
    q = tensor.nearbyint(tensor.divide(x, _cast(_param(s, st, n, attrs.axis), st.dtype, ft)))
    q = tensor.add(q, _cast(_param(z, zt, n, attrs.axis), zt.dtype, ft))
    return _saturate(q, attrs.out_dtype, ft)


@_rule("qnn.dequantize")
def _dequantize(attrs: Any, args: list, types: list) -> RelayExpr:
    x, s, z = args
    xt, st, zt = types
    n = len(xt.shape)
    d = tensor.subtract(_i32(x, xt), _i32(_param(z, zt, n, attrs.axis), zt))
    ft = attrs.out_dtype
    return tensor.multiply(transform.cast(d, ft), _cast(_param(s, st, n, attrs.axis), st.dtype, ft))


@_rule("qnn.requantize")
def _requantize(attrs: Any, args: list, types: list) -> RelayExpr:
    x, s_in, z_in, s_out, z_out = args
    xt = types[0]
    n = len(xt.shape)
    ax = attrs.axis

    def p(i: int) -> RelayExpr:
        return _param(args[i], types[i], n, ax)

    d = tensor.subtract(_i32(x, xt), _i32(p(2), types[2]))
    if attrs.compute_dtype == "float32":
        mult = tensor.divide(_f32(p(1), types[1]), _f32(p(3), types[3]))
        return _requant_float(transform.cast(d, "float32"), mult, p(4), types[4], attrs.out_dtype)
    # int64 fixed point: a Q31 multiplier and a rounding right shift (constant scales only)
    si, so = const_value(s_in), const_value(s_out)
    if si is None or so is None:
        raise QnnCanonicalizeError("qnn.requantize with compute_dtype='int64' needs constant "
                                   "scales")
    m = si.astype(np.float32) / so.astype(np.float32)
    sig, shift = fixed_point_multiplier(m)
    if np.any(shift < 1):
        raise QnnCanonicalizeError(f"qnn.requantize: scale ratio {float(m.max())} >= 2**30")
    shift = np.minimum(shift, 62)
    shape = [1] * n
    if m.size > 1:
        shape[ax % n] = -1

    def c64(v: np.ndarray) -> RelayExpr:
        return const(np.asarray(v, np.int64).reshape(shape if m.size > 1 else ()))

    prod = tensor.multiply(transform.cast(d, "int64"), c64(sig))
    rounded = tensor.add(prod, c64(np.left_shift(np.int64(1), shift - 1)))
    if attrs.rounding == "TONEAREST":  # ties away from zero: one less for negative products
        rounded = tensor.subtract(rounded, transform.cast(tensor.less(prod, const(0, "int64")),
                                                          "int64"))
    y = tensor.add(tensor.right_shift(rounded, c64(shift)), _cast(p(4), types[4].dtype, "int64"))
    return _saturate(y, attrs.out_dtype, "int64")


# ---- products: uint8 data x int8 weights, int32 accumulation -------------------------------------
def _as_u8(x: RelayExpr, t: Any, z: RelayExpr, zt: Any) -> tuple[RelayExpr, RelayExpr]:
    """(data, zero point as int32 scalar) with int8 data shifted to uint8 (+128)."""
    zi = _i32(transform.reshape(z, ()) if zt.shape else z, zt)
    if t.dtype == "uint8":
        return x, zi
    x = transform.cast(tensor.add(transform.cast(x, "int32"), const(128, "int32")), "uint8")
    return x, tensor.add(zi, const(128, "int32"))


def _as_s8(w: RelayExpr, t: Any, z: RelayExpr, zt: Any, shape: list[int]
           ) -> tuple[RelayExpr, RelayExpr]:
    """(weight, zero point as int32 broadcast to ``shape``) with uint8 weights shifted to int8."""
    zi = _i32(z, zt)
    zi = transform.reshape(zi, shape if _size(zt) > 1 else ())
    if t.dtype == "int8":
        return w, zi
    w = transform.cast(tensor.subtract(transform.cast(w, "int32"), const(128, "int32")), "int8")
    return w, tensor.subtract(zi, const(128, "int32"))


def _zero(e: RelayExpr) -> bool:
    v = const_value(e)
    return v is not None and not np.any(v)


def _window_sum(xp: RelayExpr, shape: list[int], attrs: Any, kernel: tuple[int, int],
                out_channels: int) -> RelayExpr:
    """Per output channel, the sum of the (padded) data over the kernel window and the group's
    input channels: int32 [N, O or 1, OH, OW] (a box filter: a depthwise conv of ones)."""
    n, c, h, w = shape
    g = attrs.groups
    xi = transform.cast(xp, "int32")
    s = red.sum(transform.reshape(xi, (n, g, c // g, h, w)), axis=2)  # [N, g, H, W]
    ones = const(np.ones((g, 1, *kernel), np.int32))
    ws = nn.conv2d(s, ones, strides=attrs.strides, dilation=attrs.dilation, groups=g,
                   out_dtype="int32")
    if g == 1 or out_channels == g:
        return ws
    return transform.repeat(ws, out_channels // g, axis=1)


@_rule("qnn.conv2d")
def _conv2d(attrs: Any, args: list, types: list) -> RelayExpr:
    x, w, zx, zw = args[:4]
    xt, wt, zxt, zwt = types[:4]
    o, ci_g, kh, kw = (int(d) for d in wt.shape)
    xu, zxi = _as_u8(x, xt, zx, zxt)
    ws, zwi = _as_s8(w, wt, zw, zwt, [1, -1, 1, 1])
    pt, pl, pb, pr = attrs.padding
    xshape = [int(d) for d in xt.shape]
    conv_attrs = {k: attrs[k] for k in ("strides", "dilation", "groups", "channels",
                                        "kernel_size")}
    if any(attrs.padding):
        zv = const_value(zxi)
        if zv is None:  # a run-time zero point cannot be a pad value: int32 on shifted values
            xd = tensor.subtract(_i32(x, xt), _i32(transform.reshape(zx, ()) if zxt.shape else zx,
                                                   zxt))
            wd = tensor.subtract(_i32(w, wt), _i32(_param(zw, zwt, 4, 0), zwt))
            return nn.conv2d(xd, wd, padding=attrs.padding, out_dtype="int32", **conv_attrs)
        xu = nn.pad(xu, ((0, 0), (0, 0), (pt, pb), (pl, pr)), pad_value=float(zv))
        xshape = [xshape[0], xshape[1], xshape[2] + pt + pb, xshape[3] + pl + pr]
    acc = nn.conv2d(xu, ws, padding=(0, 0, 0, 0), out_dtype="int32", **conv_attrs)
    k = ci_g * kh * kw
    wsum = transform.reshape(red.sum(transform.cast(ws, "int32"), axis=[1, 2, 3]), (1, -1, 1, 1))
    # K zx zw - zx sum(w): per output channel, constant when the weight and zero points are
    bias = tensor.subtract(tensor.multiply(tensor.multiply(zxi, zwi), const(k, "int32")),
                           tensor.multiply(zxi, wsum))
    out = tensor.add(acc, bias)
    if not _zero(zwi):  # asymmetric weights: zw times the data's window sums
        out = tensor.subtract(out, tensor.multiply(zwi, _window_sum(xu, xshape, attrs, (kh, kw),
                                                                    o)))
    return out


@_rule("qnn.dense")
def _dense(attrs: Any, args: list, types: list) -> RelayExpr:
    x, w, zx, zw = args[:4]
    xt, wt, zxt, zwt = types[:4]
    k = int(wt.shape[1])
    xu, zxi = _as_u8(x, xt, zx, zxt)
    ws, zwi = _as_s8(w, wt, zw, zwt, [-1])
    acc = nn.dense(xu, ws, units=attrs.units, out_dtype="int32")
    wsum = red.sum(transform.cast(ws, "int32"), axis=1)  # [N]
    bias = tensor.subtract(tensor.multiply(tensor.multiply(zxi, zwi), const(k, "int32")),
                           tensor.multiply(zxi, wsum))
    out = tensor.add(acc, bias)
    if not _zero(zwi):
        xsum = red.sum(transform.cast(xu, "int32"), axis=-1, keepdims=True)
        out = tensor.subtract(out, tensor.multiply(zwi, xsum))
    return out


@_rule("qnn.batch_matmul")
def _batch_matmul(attrs: Any, args: list, types: list) -> RelayExpr:
    x, y, zx, zy = args[:4]
    xt, yt, zxt, zyt = types[:4]
    if attrs.transpose_a:
        x = transform.transpose(x, (0, 2, 1))
    if not attrs.transpose_b:
        y = transform.transpose(y, (0, 2, 1))  # -> [B, N, K]
    k = int(yt.shape[1] if not attrs.transpose_b else yt.shape[2])
    xu, zxi = _as_u8(x, xt, zx, zxt)
    ys, zyi = _as_s8(y, yt, zy, zyt, [])
    acc = nn.batch_matmul(xu, ys, out_dtype="int32", transpose_b=True)
    ysum = transform.expand_dims(red.sum(transform.cast(ys, "int32"), axis=2), axis=1)  # [B,1,N]
    out = tensor.add(acc, tensor.subtract(tensor.multiply(tensor.multiply(zxi, zyi),
                                                          const(k, "int32")),
                                          tensor.multiply(zxi, ysum)))
    if not _zero(zyi):
        xsum = red.sum(transform.cast(xu, "int32"), axis=2, keepdims=True)  # [B, M, 1]
        out = tensor.subtract(out, tensor.multiply(zyi, xsum))
    return out


# ---- elementwise --------------------------------------------------------------------------------
def _dequant(x: RelayExpr, xt: Any, s: RelayExpr, st: Any, z: RelayExpr, zt: Any,
             axis: int = -1) -> RelayExpr:
    """qnn.dequantize's lowering, to float32."""
    return _dequantize(Attrs({"axis": axis, "out_dtype": "float32"}), [x, s, z], [xt, st, zt])


def _quant(v: RelayExpr, ndim: int, s: RelayExpr, st: Any, z: RelayExpr, zt: Any,
           dtype: str) -> RelayExpr:
    """qnn.quantize's lowering of a float32 value of rank ``ndim`` (per-tensor parameters)."""
    vt = TensorType([1] * ndim, "float32")
    return _quantize(Attrs({"axis": -1, "out_dtype": dtype}), [v, s, z], [vt, st, zt])


def _fma_f32(x: RelayExpr, y: RelayExpr, z: RelayExpr) -> RelayExpr:
    """``x * y + z`` rounded once to float32, as an FMA instruction does, for float32 operands
    of which ``x`` holds 8-bit integers: the product is exact in float64 (8 + 24 bits), so the
    float64 sum rounded to float32 is the fused result (barring a double rounding, which needs
    addends some 2**29 apart: not the case for requantization terms). Written this way it
    rounds the same in every backend, whether or not it contracts ``a * b + c``."""
    def f64(e: RelayExpr) -> RelayExpr:
        return transform.cast(e, "float64")

    return transform.cast(tensor.add(tensor.multiply(f64(x), f64(y)), f64(z)), "float32")


def _mul_add(x: RelayExpr, y: RelayExpr, z: RelayExpr) -> RelayExpr:
    """``x * y + z`` as one FMA: written plainly where ``x`` varies at run time (LLVM's
    ``contract`` flag fuses a multiply into the add it feeds, and here there is only one way to
    pair them: ``z`` is a constant or itself such a fused result), through float64 where ``x``
    is a constant (constant folding evaluates it in numpy, which has no FMA)."""
    if const_value(x) is not None:
        return _fma_f32(x, y, z)
    return tensor.add(tensor.multiply(x, y), z)


@_rule("qnn.add")
def _add(attrs: Any, args: list, types: list) -> RelayExpr:
    """onnxruntime's QLinearAdd (MLAS's AVX2 kernel, the x86 one), bit for bit: with
    ``rx = sx / sc`` (float32) for the operands x, y, ``fixed = zc - fma(rx, zx, ry zy)`` and
    ``nearbyint(fma(x, rx, fma(y, ry, fixed)))`` saturated, where (x, y) is (a, b), or (b, a)
    where a is constant along the last axis and b is not (onnxruntime passes the operand that
    varies along its inner loop first). A constant y (a bias) folds the inner FMA away."""
    a, b, sa, za, sb, zb, sc, zc = args
    at, bt = types[0], types[1]
    scf = _f32(sc, types[6])

    def ratio_zp(s: RelayExpr, st: Any, z: RelayExpr, zt: Any, n: int, axis: int
                 ) -> tuple[RelayExpr, RelayExpr]:
        return (tensor.divide(_f32(_param(s, st, n, axis), st), scf),
                _f32(_param(z, zt, n, axis), zt))

    x = (transform.cast(a, "float32"),) + ratio_zp(sa, types[2], za, types[3], len(at.shape),
                                                   attrs.lhs_axis)
    y = (transform.cast(b, "float32"),) + ratio_zp(sb, types[4], zb, types[5], len(bt.shape),
                                                   attrs.rhs_axis)

    def last(t: Any) -> int:
        return int(t.shape[-1]) if t.shape else 1

    if last(at) == 1 and last(bt) != 1:
        x, y = y, x
    fixed = tensor.subtract(_f32(zc, types[7]), _fma_f32(x[2], x[1], tensor.multiply(y[1], y[2])))
    v = _mul_add(x[0], x[1], _mul_add(y[0], y[1], fixed))
    return _saturate(tensor.nearbyint(v), at.dtype)


@_rule("qnn.subtract")
def _subtract(attrs: Any, args: list, types: list) -> RelayExpr:
    a, b, sa, za, sb, zb, sc, zc = args
    at, bt = types[0], types[1]
    v = tensor.subtract(_dequant(a, at, sa, types[2], za, types[3], attrs.lhs_axis),
                        _dequant(b, bt, sb, types[4], zb, types[5], attrs.rhs_axis))
    return _quant(v, max(len(at.shape), len(bt.shape)), sc, types[6], zc, types[7], at.dtype)


@_rule("qnn.mul")
def _mul(attrs: Any, args: list, types: list) -> RelayExpr:
    """``(a - za)(b - zb)`` in int32, requantized by ``sa sb / sc`` (float32)."""
    a, b, sa, za, sb, zb, sc, zc = args
    at, bt = types[0], types[1]
    na, nb = len(at.shape), len(bt.shape)
    da = tensor.subtract(_i32(a, at), _i32(_param(za, types[3], na, attrs.lhs_axis), types[3]))
    db = tensor.subtract(_i32(b, bt), _i32(_param(zb, types[5], nb, attrs.rhs_axis), types[5]))
    mult = tensor.divide(tensor.multiply(_f32(_param(sa, types[2], na, attrs.lhs_axis), types[2]),
                                         _f32(_param(sb, types[4], nb, attrs.rhs_axis), types[4])),
                         _f32(sc, types[6]))
    prod = transform.cast(tensor.multiply(da, db), "float32")
    return _requant_float(prod, mult, zc, types[7], at.dtype)


@_rule("qnn.concatenate")
def _concatenate(attrs: Any, args: list, types: list) -> RelayExpr:
    data, scales, zps, so, zo = args
    dts, sts, zts = types[0].fields, types[1].fields, types[2].fields
    out_dtype = dts[0].dtype
    so_v, zo_v = const_value(so), const_value(zo)
    parts = []
    for i, t in enumerate(dts):
        x, s, z = _field(data, i), _field(scales, i), _field(zps, i)
        s_v, z_v = const_value(s), const_value(z)
        same = (so_v is not None and s_v is not None and zo_v is not None and z_v is not None
                and np.array_equal(np.float32(s_v), np.float32(so_v))
                and np.array_equal(z_v.astype(np.int64), zo_v.astype(np.int64)))
        if same and t.dtype == out_dtype:
            parts.append(x)
        else:
            v = _dequant(x, t, s, sts[i], z, zts[i])
            parts.append(_quant(v, len(t.shape), so, types[3], zo, types[4], out_dtype))
    return transform.concatenate(parts, attrs.axis)


def _field(tup: RelayExpr, i: int) -> RelayExpr:
    from ..expr import TupleGetItem

    return tup.fields[i] if isinstance(tup, Tuple) else TupleGetItem(tup, i)


def _through_float(fn):
    """dequantize -> float op -> quantize (the output in the input's dtype)."""

    def rule(attrs: Any, args: list, types: list) -> RelayExpr:
        x, s, z, so, zo = args
        xt = types[0]
        v = fn(attrs, _dequant(x, xt, s, types[1], z, types[2]))
        return _quant(v, len(xt.shape), so, types[3], zo, types[4], xt.dtype)

    return rule


_rule("qnn.sigmoid")(_through_float(lambda a, v: tensor.sigmoid(v)))
_rule("qnn.leaky_relu")(_through_float(
    lambda a, v: tensor.where(tensor.greater_equal(v, const(0.0)), v,
                              tensor.multiply(v, const(float(a.alpha), "float32")))))


def _dequant_table(x: RelayExpr, xt: Any, s: RelayExpr, z: RelayExpr) -> RelayExpr | None:
    """8-bit data with constant parameters dequantized by a 256-entry float32 table: each value
    is the rounded product ``s * (q - z)`` itself, so no later add can contract with it into
    an FMA (which would round differently from onnxruntime's two-step arithmetic)."""
    sv, zv = const_value(s), const_value(z)
    if xt.dtype not in ("uint8", "int8") or sv is None or zv is None or sv.size > 1:
        return None
    lo = -128 if xt.dtype == "int8" else 0
    q = np.arange(lo, lo + 256)
    table = np.float32(sv.reshape(())) * (q - int(zv.reshape(()))).astype(np.float32)
    idx = transform.cast(x, "int32")
    if lo:
        idx = tensor.add(idx, const(-lo, "int32"))
    return transform.take(const(table.astype(np.float32)), idx, axis=0)


@_rule("qnn.avg_pool2d")
def _avg_pool2d(attrs: Any, args: list, types: list) -> RelayExpr:
    """As onnxruntime's QLinearAveragePool: the float32 average of the dequantized values
    (summed tap by tap in its order, divided by the in-bounds count), then
    ``saturate(nearbyint(y / s_out + zp_out))`` (the zero point added before rounding). One
    fused elementwise kernel of strided slices: pools here are small windows."""
    x, s, z, so, zo = args
    xt = types[0]
    a = attrs
    if a.layout != "NCHW":
        raise QnnCanonicalizeError(f"qnn.avg_pool2d: layout NCHW only, got {a.layout}")
    n, c, h, w = (int(d) for d in xt.shape)
    out = _pool2d_rel([xt], a)
    oh, ow = int(out.shape[2]), int(out.shape[3])
    taps, (pb, pr), count = avg_pool_plan(a, h, w, oh, ow)
    pt, pl = a.padding[0], a.padding[1]
    v = _dequant_table(x, xt, s, z)
    if v is None:
        v = _dequant(x, xt, s, types[1], z, types[2])
    if pt or pl or pb or pr:
        v = nn.pad(v, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    sh, sw = a.strides
    acc = None
    for dy, dx in taps:  # the float32 sum in onnxruntime's order (exact parity on ties)
        sl = transform.strided_slice(v, [0, 0, dy, dx], [n, c, dy + (oh - 1) * sh + 1,
                                                         dx + (ow - 1) * sw + 1], [1, 1, sh, sw])
        acc = sl if acc is None else tensor.add(acc, sl)
    assert acc is not None
    y = tensor.divide(acc, const(count.reshape(1, 1, oh, ow)))
    y = tensor.add(tensor.divide(y, _f32(so, types[3])), _f32(zo, types[4]))
    return _saturate(tensor.nearbyint(y), xt.dtype)


@_rule("qnn.global_avg_pool2d")
def _global_avg_pool2d(attrs: Any, args: list, types: list) -> RelayExpr:
    """The integer window sum requantized by ``s / (s_out * H * W)`` (ORT's
    QLinearGlobalAveragePool)."""
    x, s, z, so, zo = args
    xt = types[0]
    if attrs.layout != "NCHW":
        raise QnnCanonicalizeError(f"qnn.global_avg_pool2d: layout NCHW only, got {attrs.layout}")
    hw = int(xt.shape[2]) * int(xt.shape[3])
    acc = tensor.subtract(red.sum(_i32(x, xt), axis=[2, 3], keepdims=True),
                          tensor.multiply(_i32(transform.reshape(z, ()), types[2]),
                                          const(hw, "int32")))
    mult = tensor.divide(_f32(transform.reshape(s, ()), types[1]),
                         tensor.multiply(_f32(transform.reshape(so, ()), types[3]),
                                         const(float(hw), "float32")))
    return _requant_float(transform.cast(acc, "float32"), mult, transform.reshape(zo, ()),
                          types[4], xt.dtype)


@_rule("qnn.softmax")
def _softmax(attrs: Any, args: list, types: list) -> RelayExpr:
    """onnxruntime's QLinearSoftmax: ``e = table[q - max + 255]`` (a constant 256-entry float32
    table), the row's float32 sum, ``nearbyint(e * floor(1 / s_out) / sum) + zp_out``."""
    x, s, z, so, zo = args
    xt = types[0]
    shape = [int(d) for d in xt.shape]
    sv = const_value(s)
    if sv is None or sv.size != 1:
        raise QnnCanonicalizeError("qnn.softmax needs a constant per-tensor input scale")
    ax, d = softmax_rows(attrs, tuple(shape))
    axes = list(range(ax, len(shape))) if attrs.flatten else [ax]
    xi = _i32(x, xt)
    idx = tensor.add(tensor.subtract(xi, red.max(xi, axis=axes, keepdims=True)),
                     const(255, "int32"))
    e = transform.take(const(softmax_table(float(sv.reshape(())), d)), idx, axis=0)
    total = red.sum(e, axis=axes, keepdims=True)
    y_scale = tensor.floor(tensor.divide(const(1.0, "float32"), _f32(transform.reshape(so, ()),
                                                                     types[3])))
    q = tensor.nearbyint(tensor.divide(tensor.multiply(e, y_scale), total))
    return _saturate(tensor.add(q, _f32(transform.reshape(zo, ()), types[4])), xt.dtype)
