"""DFT / STFT kernels whose axis, frame step or frame length are run-time tensors (the kernels of
``relay.op.dyn.dft`` and ``dyn.stft``): direct sums (``O(n)`` per output element), twiddle angles
from ``(k * t) mod L`` in int64 and sums in float64 (rounded once to the data's type).

The transformed axis is a value, so like ``topi.dyn.scalar_args.dyn_scan`` the sum runs over the
largest signal dimension with the positions past the transformed one masked, and every index
along the axis is selected by comparing the axis value with each dimension number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import te
from ...tir import op as tir_op
from ...tir.expr import Select, cast, const
from .. import tag

__all__ = ["dyn_dft", "dyn_stft"]


def _f64(v: Any) -> Any:
    return cast(v, "float64")


def _angle(k: Any, t: Any, L: Any) -> Any:
    """2 pi ((k t) mod L) / L, exact in the integer part."""
    kt = tir_op.floormod(cast(k, "int64") * cast(t, "int64"), cast(tir_op.max(L, 1), "int64"))
    return const(2 * np.pi, "float64") * _f64(kt) / _f64(tir_op.max(L, 1))


def dyn_dft(data: te.Tensor, axis: te.Tensor, out_shape: Sequence[Any], inverse: bool,
            onesided: bool, dft_length: int = 0) -> te.Tensor:
    """ONNX DFT of ``data`` (..., 1 real | 2 complex) along the axis in the one-element tensor
    ``axis`` (negative: from the end); ``dft_length`` 0: the axis length (or 2 (n - 1) for the
    inverse one-sided transform)."""
    r = len(data.shape)
    complex_in = int(getattr(data.shape[-1], "value", data.shape[-1])) == 2
    a = cast(axis[tuple(0 for _ in axis.shape)], "int32")
    a = Select(a < 0, a + r, a)
    n_in: Any = data.shape[0]
    longest: Any = data.shape[0]
    for k in range(1, r - 1):
        n_in = Select(a == k, data.shape[k], n_in)
        longest = tir_op.max(longest, data.shape[k])
    irfft = inverse and onesided
    if dft_length:
        L: Any = const(dft_length, "int32")
    else:
        L = 2 * (n_in - 1) if irfft else n_in
    used = tir_op.min(n_in, tir_op.floordiv(L, 2) + 1 if irfft else L)
    t = te.reduce_axis((0, longest), name="t")
    dtype = data.dtype

    def f(*o: Any) -> Any:
        c = o[-1]
        pos: Any = o[0]
        for k in range(1, r - 1):
            pos = Select(a == k, o[k], pos)
        idx = [Select(a == k, t, o[k]) for k in range(r - 1)]
        ok = t < used
        re = _f64(tir_op.if_then_else(ok, data[(*idx, 0)], const(0, dtype)))
        im = _f64(tir_op.if_then_else(ok, data[(*idx, 1)], const(0, dtype))) if complex_in \
            else const(0.0, "float64")
        ang = _angle(pos, t, L)
        cs, sn = tir_op.cos(ang), tir_op.sin(ang)
        if irfft:  # bins t, Hermitian weights: 1 for DC (and Nyquist of an even length), else 2
            single = tir_op.any(t.var == 0, tir_op.all(tir_op.floormod(L, 2) == 0,
                                                   t * 2 == L))
            w = Select(single, const(1.0, "float64"), const(2.0, "float64")) / _f64(L)
            return te.sum(w * (re * cs - im * sn), axis=t)
        if inverse:
            scale = const(1.0, "float64") / _f64(L)
            v = Select(c == 0, re * cs - im * sn, re * sn + im * cs) * scale
        else:
            v = Select(c == 0, re * cs + im * sn, im * cs - re * sn)
        return te.sum(v, axis=t)

    acc = te.compute(list(out_shape), f, name="dyn_dft", tag=tag.COMM_REDUCE)
    return te.compute(list(out_shape), lambda *i: cast(acc(*i), dtype), name="dyn_dft_round",
                      tag=tag.ELEMWISE)


def dyn_stft(signal: te.Tensor, frame_step: te.Tensor, window: te.Tensor | None,
             frame_length: te.Tensor | None, out_shape: Sequence[Any], onesided: bool
             ) -> te.Tensor:
    """ONNX STFT of ``signal`` (batch, length, 1 | 2): frames every ``frame_step`` (read at run
    time) of the window's length (or ``frame_length``'s value), windowed, transformed;
    out_shape (batch, frames, bins, 2)."""
    complex_in = int(getattr(signal.shape[-1], "value", signal.shape[-1])) == 2
    step = cast(frame_step[tuple(0 for _ in frame_step.shape)], "int32")
    bins = out_shape[2]
    if window is not None:
        flen: Any = window.shape[0]
        extent: Any = flen
    else:
        assert frame_length is not None
        flen = cast(frame_length[tuple(0 for _ in frame_length.shape)], "int32")
        extent = 2 * bins if onesided else bins  # a bound of the frame length from shapes
    t = te.reduce_axis((0, extent), name="t")
    dtype = signal.dtype

    def f(b: Any, fr: Any, k: Any, c: Any) -> Any:
        ok = t < flen
        pos = fr * step + t
        re = _f64(tir_op.if_then_else(ok, signal[b, pos, 0], const(0, dtype)))
        im = _f64(tir_op.if_then_else(ok, signal[b, pos, 1], const(0, dtype))) if complex_in \
            else const(0.0, "float64")
        if window is not None:
            w = _f64(tir_op.if_then_else(ok, window[t], const(0, window.dtype)))
            re, im = re * w, im * w
        ang = _angle(k, t, flen)
        cs, sn = tir_op.cos(ang), tir_op.sin(ang)
        return te.sum(Select(c == 0, re * cs + im * sn, im * cs - re * sn), axis=t)

    acc = te.compute(list(out_shape), f, name="dyn_stft", tag=tag.COMM_REDUCE)
    return te.compute(list(out_shape), lambda *i: cast(acc(*i), dtype), name="dyn_stft_round",
                      tag=tag.ELEMWISE)
