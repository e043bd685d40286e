"""Thresholds of activations from calibration statistics, and the scales they give.

A threshold ``t`` is the magnitude mapped to the largest quantized value: the integer grid is
``scale * [-127, 127]``. Modes: "global_scale" (``t = qconfig.global_scale`` everywhere, no data
needed), "max" (the largest |x| seen), "percentile" (that percentile of |x|), "kl_divergence"
(the threshold whose 8-bit quantized histogram is closest in KL divergence to the observed one,
the entropy calibration of TensorRT that TVM also implements).
"""

from __future__ import annotations

import numpy as np

from .qconfig import QConfig

__all__ = ["kl_divergence_threshold", "threshold", "scale_from_threshold", "weight_scale"]

QMAX = 127  # symmetric int8: [-127, 127]


def _smooth(p: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """Move a little mass onto empty bins so that KL(p || q) is finite (as TensorRT)."""
    zero = p == 0
    nz = (~zero).sum()
    if nz == 0 or zero.sum() == 0:
        return p.astype(np.float64)
    take = eps * zero.sum() / nz
    out = p.astype(np.float64).copy()
    out[zero] = eps
    out[~zero] -= take
    return out


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p = p / p.sum()
    q = q / q.sum()
    m = p > 0
    return float(np.sum(p[m] * np.log(p[m] / np.maximum(q[m], 1e-30))))


def kl_divergence_threshold(values: np.ndarray, num_bins: int = 2049,
                            num_quantized_bins: int = 255) -> float:
    """The clipping threshold minimizing KL(reference || quantized) over a symmetric histogram
    of ``values`` (``num_bins`` odd, bin 0 in the middle)."""
    a = np.abs(np.asarray(values, np.float64).ravel())
    amax = float(a.max()) if a.size else 0.0
    if amax == 0.0:
        return 0.0
    hist, edges = np.histogram(np.asarray(values, np.float64).ravel(), bins=num_bins,
                               range=(-amax, amax))
    zero = num_bins // 2
    half_q = num_quantized_bins // 2
    best, best_t = np.inf, amax
    for i in range(half_q, num_bins // 2 + 1):
        lo, hi = zero - i, zero + i + 1
        sliced = hist[lo:hi].astype(np.float64)
        p = sliced.copy()
        p[0] += hist[:lo].sum()  # outliers clip onto the edge bins
        p[-1] += hist[hi:].sum()
        m = sliced.size // num_quantized_bins
        body = sliced[:m * num_quantized_bins].reshape(num_quantized_bins, m)
        tail = sliced[m * num_quantized_bins:]
        q_sum = body.sum(axis=1)
        q_sum[-1] += tail.sum()
        nz = (body != 0).sum(axis=1).astype(np.float64)
        nz[-1] += (tail != 0).sum()
        per = np.divide(q_sum, nz, out=np.zeros_like(q_sum), where=nz > 0)
        q = np.concatenate([np.repeat(per, m), np.full(tail.size, per[-1])])
        q[sliced == 0] = 0
        if q.sum() == 0:
            continue
        d = _kl(_smooth(p), _smooth(q))
        if d < best:
            best, best_t = d, float(edges[hi])
    return best_t


def threshold(values: np.ndarray | None, cfg: QConfig) -> float:
    """The activation threshold by ``cfg.calibrate_mode`` (``values``: all samples seen)."""
    if cfg.calibrate_mode == "global_scale":
        return float(cfg.global_scale)
    assert values is not None
    a = np.abs(values)
    if cfg.calibrate_mode == "max":
        return float(a.max())
    if cfg.calibrate_mode == "percentile":
        return float(np.percentile(a, cfg.percentile))
    return kl_divergence_threshold(values, cfg.kl_bins)


def scale_from_threshold(t: float, power2: bool) -> float:
    """The quantization step for threshold ``t``: ``t / 127``, or (``power2``) the power of two
    ``2**ceil(log2 t) / 128`` so that requantizations are shifts."""
    t = max(float(t), 1e-8)
    if power2:
        return float(2.0 ** (np.ceil(np.log2(t)) - 7))
    return t / QMAX


def weight_scale(w: np.ndarray, cfg: QConfig, axis: int | None) -> np.ndarray:
    """Scale of a weight (shape (): per tensor; (C,) along ``axis``: per channel)."""
    a = np.abs(w.astype(np.float64))
    m = a.max(axis=tuple(d for d in range(w.ndim) if d != axis)) if axis is not None else a.max()
    m = np.maximum(np.asarray(m, np.float64), 1e-8)
    if cfg.weight_scale == "power2":
        return np.power(2.0, np.ceil(np.log2(m)) - 7)
    return m / QMAX
