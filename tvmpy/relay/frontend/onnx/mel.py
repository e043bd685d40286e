"""ONNX MelWeightMatrix: the (dft_length // 2 + 1, num_mel_bins) triangular mel filter bank.

Every input is a scalar that may be fed at run time, and the output's shape depends on two of
them: the matrix is built from ``dyn.arange`` (spectrogram bins as a column, mel bins as a row)
and broadcast elementwise arithmetic, so one compiled module serves every value. With every
input known at import time it is a constant. The band edges follow onnx's reference: the
mel-scale points are computed in float64 (the hertz edges' ``log1p`` in their own dtype first),
floor-divided by the sample rate and truncated to integers; column ``i`` rises linearly from
edge ``i`` to edge ``i + 1`` (a single 1 when they coincide) and falls to edge ``i + 2``.
"""

from __future__ import annotations

import numpy as np

from ...expr import RelayExpr, const
from ...op import tensor, transform
from ...op.dyn import transform as dyn
from .context import ImportContext, dtype_of
from .registry import Attrs, Inputs, Names, Output, converter

_LN10 = float(np.log(10))


def _edges_np(n: int, dft: int, sr: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    lo_mel = np.float64(2595 * np.log1p(lo / np.asarray(700, lo.dtype))) / _LN10
    hi_mel = np.float64(2595 * np.log1p(hi / np.asarray(700, hi.dtype))) / _LN10
    step = (hi_mel - lo_mel) / (n + 2)
    f = np.arange(n + 2) * step + lo_mel
    f = 700 * np.expm1(f / 2595 * _LN10)
    return (((dft + 1) * f) // sr).astype(np.int64)


def mel_weight_matrix_np(n: int, dft: int, sr: int, lo: np.ndarray, hi: np.ndarray,
                         dtype: str) -> np.ndarray:
    """The matrix for known inputs (numpy; the same formula as the relay graph)."""
    e = _edges_np(n, dft, sr, lo, hi)
    j = np.arange(dft // 2 + 1, dtype=np.int64)[:, None]
    lft, c, r = e[None, :-2], e[None, 1:-1], e[None, 2:]
    return _bands(j, lft, c, r, np).astype(dtype)


def _bands(j, lft, c, r, ops):  # type: ignore[no-untyped-def]
    """Rising then falling edges (numpy or relay, by ``ops``: both spell these the same)."""
    if ops is np:
        where, f64 = np.where, (lambda v: v.astype(np.float64))
        ge, le, lt, eq, gt = np.greater_equal, np.less_equal, np.less, np.equal, np.greater
        land, mx = np.logical_and, np.maximum
        one = np.float64(1)
        zero = np.float64(0)
        sub, div = np.subtract, np.divide
    else:
        where, f64 = tensor.where, (lambda v: transform.cast(v, "float64"))
        ge, le, lt, eq, gt = (tensor.greater_equal, tensor.less_equal, tensor.less, tensor.equal,
                              tensor.greater)
        land, mx = tensor.logical_and, tensor.maximum
        one, zero = const(np.asarray(1, "float64")), const(np.asarray(0, "float64"))
        sub, div = tensor.subtract, tensor.divide
    ione = const(np.asarray(1, "int64")) if ops is not np else np.int64(1)
    rise = div(f64(sub(j, lft)), f64(mx(sub(c, lft), ione)))
    up = where(eq(c, lft), where(eq(j, c), one, zero),
               where(land(ge(j, lft), le(j, c)), rise, zero))
    fall = div(f64(sub(r, j)), f64(mx(sub(r, c), ione)))
    return where(land(gt(r, c), land(ge(j, c), lt(j, r))), fall, up)


def _i64(x: RelayExpr) -> RelayExpr:
    return x if dtype_of(x) == "int64" else transform.cast(x, "int64")


@converter("MelWeightMatrix")
def _mel_weight_matrix(ctx: ImportContext, inputs: Inputs, attrs: Attrs,
                       names: Names) -> Output:
    from onnx import helper

    out_dt = str(np.dtype(helper.tensor_dtype_to_np_dtype(int(attrs.get("output_datatype",
                                                                          1)))))
    if any(x is None for x in inputs[:5]) or len(inputs) < 5:
        raise ctx.fail("all five inputs are required")
    if all(nm in ctx.values for nm in names[:5]):
        n, dft, sr = (int(np.asarray(ctx.values[nm]).reshape(-1)[0]) for nm in names[:3])
        lo, hi = (np.asarray(ctx.values[nm]).reshape(()) for nm in names[3:5])
        if n < 0 or dft < 0 or sr <= 0:
            raise ctx.fail(f"num_mel_bins={n}, dft_length={dft}, sample_rate={sr}: negative "
                           "sizes or a sample rate that is not positive")
        return const(mel_weight_matrix_np(n, dft, sr, lo, hi, out_dt))

    n, dft, sr = (_i64(transform.reshape(x, [])) for x in inputs[:3])
    lo, hi = (transform.reshape(x, []) for x in inputs[3:5])

    def mel(hz: RelayExpr) -> RelayExpr:
        c700 = const(np.asarray(700, dtype_of(hz)))
        m = tensor.multiply(const(np.asarray(2595, dtype_of(hz))),
                            tensor.log1p(tensor.divide(hz, c700)))
        return tensor.divide(transform.cast(m, "float64"), const(np.asarray(_LN10, "float64")))

    lo_mel, hi_mel = mel(lo), mel(hi)
    two = const(np.asarray(2, "int64"))
    step = tensor.divide(tensor.subtract(hi_mel, lo_mel), transform.cast(tensor.add(n, two),
                                                                         "float64"))
    k = dyn.arange(const(np.asarray(0, "int64")), n, const(np.asarray(1, "int64")), dtype="int64")  # (n,)

    def edge(off: int) -> RelayExpr:
        kk = transform.cast(tensor.add(k, const(np.asarray(off, "int64"))), "float64")
        f = tensor.add(tensor.multiply(kk, step), lo_mel)
        f = tensor.multiply(const(np.asarray(700, "float64")), tensor.subtract(
            tensor.exp(tensor.multiply(tensor.divide(f, const(np.asarray(2595, "float64"))),
                                       const(np.asarray(_LN10, "float64")))), const(np.asarray(1, "float64"))))
        f = tensor.floor(tensor.divide(
            tensor.multiply(transform.cast(tensor.add(dft, const(np.asarray(1, "int64"))), "float64"), f),
            transform.cast(sr, "float64")))
        return transform.expand_dims(transform.cast(f, "int64"), 0)  # (1, n)

    nspec = tensor.add(tensor.floor_divide(dft, two), const(np.asarray(1, "int64")))
    j = transform.expand_dims(dyn.arange(const(np.asarray(0, "int64")), nspec, const(np.asarray(1, "int64")),
                                         dtype="int64"), 1)  # (nspec, 1)
    return transform.cast(_bands(j, edge(0), edge(1), edge(2), None), out_dt)
