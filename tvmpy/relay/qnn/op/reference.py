"""The QNN operators' meaning in numpy (``FNumpy``, used by relay's reference interpreter): written
from onnxruntime's definitions (float32 scale arithmetic, ``rint`` = round half to even,
saturation), independently of the integer lowering in ``canonicalize``."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...op.registry import register_op_attr

__all__ = ["fixed_point_multiplier", "requantize_np", "quantize_np", "dequantize_np",
           "avg_pool_plan", "softmax_table", "softmax_rows"]


def _p(v: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A scalar or per-channel parameter shaped to broadcast along ``axis`` of an ndim array."""
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(())
    s = [1] * ndim
    s[axis % ndim] = v.size
    return v.reshape(s)


def _sat(v: np.ndarray, dtype: str) -> np.ndarray:
    info = np.iinfo(np.dtype(dtype))
    return np.clip(v, info.min, info.max).astype(dtype)


def _f32(v: Any) -> np.ndarray:
    return np.asarray(v).astype(np.float32)


def quantize_np(x: np.ndarray, scale: Any, zp: Any, axis: int, out_dtype: str) -> np.ndarray:
    ft = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    s = _p(scale, x.ndim, axis).astype(ft)
    z = _p(zp, x.ndim, axis).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint(x.astype(ft) / s).astype(np.float64) + z
    return _sat(q, out_dtype)


def dequantize_np(x: np.ndarray, scale: Any, zp: Any, axis: int, out_dtype: str) -> np.ndarray:
    d = x.astype(np.int64) - _p(zp, x.ndim, axis).astype(np.int64)
    return (d.astype(out_dtype) * _p(scale, x.ndim, axis).astype(out_dtype)).astype(out_dtype)


def _requant_f32(acc: np.ndarray, mult: np.ndarray, zp_out: Any, out_dtype: str) -> np.ndarray:
    """``rint(float32(acc) * mult) + zp_out``, saturated (ORT's MlasRequantizeOutput)."""
    v = np.rint(acc.astype(np.float32) * mult.astype(np.float32)).astype(np.float64)
    return _sat(v + np.asarray(zp_out, np.float64), out_dtype)


def fixed_point_multiplier(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``m`` (positive) as ``sig * 2**-shift`` with a Q31 integer ``sig`` in [2**30, 2**31)."""
    mant, exp = np.frexp(np.asarray(m, np.float64))
    sig = np.rint(mant * 2.0**31).astype(np.int64)
    full = sig == 2**31
    sig = np.where(full, sig // 2, sig)
    exp = np.where(full, exp + 1, exp)
    return sig, 31 - exp.astype(np.int64)


def _requant_fixed(d: np.ndarray, mult: np.ndarray, zp_out: Any, rounding: str,
                   out_dtype: str) -> np.ndarray:
    sig, shift = fixed_point_multiplier(mult)
    if np.any(shift < 1):
        raise ValueError(f"requantize: multiplier {mult.max()} >= 2**30 is not supported")
    shift = np.minimum(shift, 62)
    prod = d.astype(np.int64) * sig
    half = np.left_shift(np.int64(1), shift - 1)
    if rounding == "TONEAREST":  # ties away from zero
        prod = prod + half - (prod < 0).astype(np.int64)
    else:  # UPWARD: ties toward +inf
        prod = prod + half
    return _sat(np.right_shift(prod, shift) + np.asarray(zp_out, np.int64), out_dtype)


def requantize_np(x: np.ndarray, s_in: Any, zp_in: Any, s_out: Any, zp_out: Any, axis: int,
                  rounding: str, compute_dtype: str, out_dtype: str) -> np.ndarray:
    n = x.ndim
    d = x.astype(np.int64) - _p(zp_in, n, axis).astype(np.int64)
    mult = _f32(_p(s_in, n, axis)) / _f32(_p(s_out, n, axis))
    zo = _p(zp_out, n, axis)
    if compute_dtype == "int64":
        return _requant_fixed(d, mult, zo, rounding, out_dtype)
    return _requant_f32(d, mult, zo, out_dtype)


FNUMPY: dict[str, Any] = {}


def _reg(name: str):
    def deco(f):
        FNUMPY[name] = f
        return f

    return deco


@_reg("qnn.quantize")
def _quantize(attrs, ins, t):
    return quantize_np(ins[0], ins[1], ins[2], attrs.axis, attrs.out_dtype)


@_reg("qnn.dequantize")
def _dequantize(attrs, ins, t):
    return dequantize_np(ins[0], ins[1], ins[2], attrs.axis, attrs.out_dtype)


@_reg("qnn.requantize")
def _requantize(attrs, ins, t):
    return requantize_np(*ins, attrs.axis, attrs.rounding, attrs.compute_dtype, attrs.out_dtype)


@_reg("qnn.conv2d")
def _conv2d(attrs, ins, t):
    from ....topi.testing import group_conv2d_nchw_python

    x, w, zx, zw = ins[:4]
    xs = x.astype(np.int64) - np.asarray(zx, np.int64).reshape(())
    ws = w.astype(np.int64) - _p(zw, 4, 0).astype(np.int64)
    out = group_conv2d_nchw_python(xs.astype(np.float64), ws, attrs.strides, attrs.padding,
                                   attrs.dilation, attrs.groups)
    return np.rint(out).astype(np.int32)  # exact: |sums| < 2**53


@_reg("qnn.dense")
def _dense(attrs, ins, t):
    x, w, zx, zw = ins[:4]
    xs = x.astype(np.int64) - np.asarray(zx, np.int64).reshape(())
    ws = w.astype(np.int64) - _p(zw, 2, 0).astype(np.int64)
    return (xs @ ws.T).astype(np.int32)


@_reg("qnn.batch_matmul")
def _batch_matmul(attrs, ins, t):
    x, y, zx, zy = ins[:4]
    xs = x.astype(np.int64) - np.asarray(zx, np.int64).reshape(())
    ys = y.astype(np.int64) - np.asarray(zy, np.int64).reshape(())
    if attrs.transpose_a:
        xs = xs.transpose(0, 2, 1)
    if attrs.transpose_b:
        ys = ys.transpose(0, 2, 1)
    return np.matmul(xs, ys).astype(np.int32)


def _deq(x: np.ndarray, s: Any, zp: Any, axis: int) -> np.ndarray:
    return dequantize_np(x, s, zp, axis, "float32")


def _fma32(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """float32 ``x * y + z`` rounded once (``x`` integer-valued, so float64 holds the product)."""
    return (np.asarray(x, np.float64) * np.asarray(y, np.float64)
            + np.asarray(z, np.float64)).astype(np.float32)


@_reg("qnn.add")
def _add(attrs, ins, t):
    a, b, sa, za, sb, zb, sc, zc = ins
    x = (a, _f32(_p(sa, a.ndim, attrs.lhs_axis)) / _f32(sc), _f32(_p(za, a.ndim, attrs.lhs_axis)))
    y = (b, _f32(_p(sb, b.ndim, attrs.rhs_axis)) / _f32(sc), _f32(_p(zb, b.ndim, attrs.rhs_axis)))
    # ORT (x86, MLAS AVX2): two FMAs on the raw values onto zc - fma(rx, zx, ry*zy), the
    # operand that varies along the last axis as x (a, unless only b does)
    if (a.shape[-1] if a.ndim else 1) == 1 and (b.shape[-1] if b.ndim else 1) != 1:
        x, y = y, x
    fixed = _f32(zc) - _fma32(x[2], x[1], y[1] * y[2])
    v = _fma32(x[0], x[1], _fma32(y[0], y[1], fixed))
    return _sat(np.rint(v).astype(np.float64), t.dtype)


@_reg("qnn.subtract")
def _subtract(attrs, ins, t):
    a, b, sa, za, sb, zb, sc, zc = ins
    v = _deq(a, sa, za, attrs.lhs_axis) - _deq(b, sb, zb, attrs.rhs_axis)
    return quantize_np(v, sc, zc, -1, t.dtype)


@_reg("qnn.mul")
def _mul(attrs, ins, t):
    a, b, sa, za, sb, zb, sc, zc = ins
    da = a.astype(np.int64) - _p(za, a.ndim, attrs.lhs_axis).astype(np.int64)
    db = b.astype(np.int64) - _p(zb, b.ndim, attrs.rhs_axis).astype(np.int64)
    mult = _f32(_p(sa, a.ndim, attrs.lhs_axis)) * _f32(_p(sb, b.ndim, attrs.rhs_axis)) / _f32(sc)
    return _requant_f32(da * db, mult, zc, t.dtype)


@_reg("qnn.concatenate")
def _concatenate(attrs, ins, t):
    data, scales, zps, so, zo = ins
    parts = [quantize_np(_deq(x, s, z, -1), so, zo, -1, t.dtype) for x, s, z in
             zip(data, scales, zps)]
    return np.concatenate(parts, axis=attrs.axis)


def _through_float(fn):
    def f(attrs, ins, t):
        x, s, z, so, zo = ins
        return quantize_np(fn(attrs, _deq(x, s, z, -1)), so, zo, -1, t.dtype)

    return f


FNUMPY["qnn.sigmoid"] = _through_float(lambda a, v: (1 / (1 + np.exp(-v))).astype(np.float32))
FNUMPY["qnn.leaky_relu"] = _through_float(
    lambda a, v: np.where(v >= 0, v, v * np.float32(a.alpha)).astype(np.float32))


def avg_pool_plan(attrs: Any, h: int, w: int, oh: int, ow: int
                  ) -> tuple[list[tuple[int, int]], tuple[int, int], np.ndarray]:
    """onnxruntime's QLinearAveragePool window walk: the taps ``(dy, dx)`` in its summation
    order (rows, then columns), the zero padding ``(bottom, right)`` that puts every tap of the
    padded input in bounds, and the divisor per output position ([oh, ow] float32: the taps
    inside the input, or the whole window with count_include_pad)."""
    kh, kw = attrs.pool_size
    sh, sw = attrs.strides
    dh, dw = attrs.dilation
    pt, pl = attrs.padding[0], attrs.padding[1]
    taps = [(i * dh, j * dw) for i in range(kh) for j in range(kw)]
    bottom = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - h - pt)
    right = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pl)
    rows = np.arange(oh)[:, None] * sh - pt + np.arange(kh)[None, :] * dh  # [oh, kh]
    cols = np.arange(ow)[:, None] * sw - pl + np.arange(kw)[None, :] * dw
    nr = ((rows >= 0) & (rows < h)).sum(1)
    nc = ((cols >= 0) & (cols < w)).sum(1)
    count = np.full((oh, ow), kh * kw) if attrs.count_include_pad else np.outer(nr, nc)
    return taps, (bottom, right), np.maximum(count, 1).astype(np.float32)


@_reg("qnn.avg_pool2d")
def _avg_pool2d(attrs, ins, t):
    x, s, z, so, zo = ins
    v = _deq(x, s, z, -1)
    oh, ow = t.shape[2], t.shape[3]
    taps, (pb, pr), count = avg_pool_plan(attrs, v.shape[2], v.shape[3], oh, ow)
    pt, pl = attrs.padding[0], attrs.padding[1]
    vp = np.pad(v, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    sh, sw = attrs.strides
    acc = np.zeros(v.shape[:2] + (oh, ow), np.float32)
    for dy, dx in taps:  # float32 sums in onnxruntime's order
        acc = acc + vp[:, :, dy:dy + (oh - 1) * sh + 1:sh, dx:dx + (ow - 1) * sw + 1:sw]
    y = (acc / count).astype(np.float32)
    q = np.rint(y / _f32(so) + _f32(zo)).astype(np.float64)  # zp before rounding, as ORT
    return _sat(q, t.dtype)


@_reg("qnn.global_avg_pool2d")
def _global_avg_pool2d(attrs, ins, t):
    x, s, z, so, zo = ins
    hw = x.shape[2] * x.shape[3]
    acc = x.astype(np.int64).sum(axis=(2, 3), keepdims=True) - int(np.asarray(z)) * hw
    mult = _f32(s) / (_f32(so) * np.float32(hw))
    return _requant_f32(acc, mult, zo, t.dtype)


def softmax_table(x_scale: float, reduce_len: int) -> np.ndarray:
    """onnxruntime's QLinearSoftmax table: entry ``i`` is ``exp((i - 255 + shift) * s)`` as
    float32, computed in double; ``shift`` keeps the row sum below float32's max."""
    s = float(np.float32(x_scale))
    shift = max(0.0, np.log(float(np.finfo(np.float32).max) / reduce_len) - 5.0) / s
    i = np.arange(256, dtype=np.float64)
    return np.exp((i - 255 + shift) * s).astype(np.float32)


def softmax_rows(attrs: Any, shape: tuple) -> tuple[int, int]:
    """(the softmax axis, the row length D) of a tensor of ``shape``."""
    ax = attrs.axis % len(shape)
    d = int(np.prod(shape[ax:])) if attrs.flatten else int(shape[ax])
    return ax, d


@_reg("qnn.softmax")
def _softmax(attrs, ins, t):
    x, s, z, so, zo = ins
    ax, d = softmax_rows(attrs, x.shape)
    axes = tuple(range(ax, x.ndim)) if attrs.flatten else (ax,)
    table = softmax_table(float(np.asarray(s).reshape(-1)[0]), d)
    xi = x.astype(np.int64)
    e = table[xi - xi.max(axis=axes, keepdims=True) + 255]
    moved = np.moveaxis(e, axes, range(x.ndim - len(axes), x.ndim))
    flat = moved.reshape(moved.shape[:x.ndim - len(axes)] + (-1,))
    total = np.zeros(flat.shape[:-1], np.float32)
    for k in range(flat.shape[-1]):  # the row sum in order, in float32
        total = total + flat[..., k]
    total = np.expand_dims(total, tuple(range(x.ndim - len(axes), x.ndim)))
    total = np.moveaxis(np.broadcast_to(total, moved.shape), range(x.ndim - len(axes), x.ndim),
                        axes)
    y_scale = np.floor(np.float32(1.0) / _f32(so))
    q = np.rint((e * y_scale) / total).astype(np.float64) + np.asarray(zo, np.float64)
    return _sat(q, t.dtype)


def register_all() -> None:
    for name, f in FNUMPY.items():
        register_op_attr(name, "FNumpy", f, level=1)
