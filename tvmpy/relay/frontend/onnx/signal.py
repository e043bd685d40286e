"""ONNX DFT, STFT and GridSample from relay's dense, gather_nd and elementwise ops.

- DFT / STFT: with a static length the transform is a constant matrix; real and imaginary parts
  are dense products with cos / sin tables (computed in float64 at import time). Forward, inverse,
  one-sided (rfft) and inverse one-sided (irfft, Hermitian weights), ``dft_length`` padding or
  truncation.
- GridSample: sample positions come from the grid at run time: each spatial coordinate is
  denormalized, adjusted for ``padding_mode`` (zeros / border / reflection), and the 1 (nearest),
  2**r (linear) or 4**2 (cubic) neighbours are fetched with ``gather_nd`` and weighted, as the
  ONNX definition (which rounds nearest half to even and uses Keys' cubic with a = -0.75).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from ..common import reshape_to
from .context import ImportContext, dtype_of, np_dtype, shape_of, typed_const
from .dyn_args import expand_here, runtime_input
from .elementwise import round_half_even
from .registry import Attrs, Inputs, Names, Output, converter, register


def _last(x: RelayExpr, k: int) -> RelayExpr:
    """x[..., k] with the last axis dropped."""
    r = len(shape_of(x))
    return transform.squeeze(transform.strided_slice(x, [k], [k + 1], axes=[r - 1]), [r - 1])


def _along_last(x: RelayExpr, m: np.ndarray, dt: str) -> RelayExpr:
    """x (..., n) @ m (n, k) -> (..., k)."""
    s = shape_of(x)
    y = nn.dense(reshape_to(x, [-1, s[-1]]), const(np.ascontiguousarray(m.T).astype(dt)))
    return reshape_to(y, s[:-1] + [m.shape[1]])


def _fit(m: np.ndarray, n_in: int) -> np.ndarray:
    """Rows of a (L, k) matrix for an input of length n_in: truncate, or zero-pad the input."""
    if n_in <= m.shape[0]:
        return m[:n_in]
    return np.concatenate([m, np.zeros((n_in - m.shape[0], m.shape[1]))])


def dft_parts(re: RelayExpr, im: RelayExpr | None, L: int, inverse: bool, onesided: bool,
              dt: str) -> tuple[RelayExpr, RelayExpr | None]:
    """The transform along the last axis of (re, im); im None is a real signal. Returns the
    real and imaginary parts (imaginary None for the real output of an inverse one-sided)."""
    n_in = shape_of(re)[-1]
    if inverse and onesided:  # irfft: bins 0..L//2, Hermitian-extended
        m = L // 2 + 1
        k = np.arange(m)[:, None]
        t = np.arange(L)[None, :]
        w = np.full((m, 1), 2.0)
        w[0] = 1.0
        if L % 2 == 0:
            w[-1] = 1.0
        ang = 2 * np.pi * k * t / L
        cr, ci = _fit(w * np.cos(ang) / L, n_in), _fit(-w * np.sin(ang) / L, n_in)
        out = _along_last(re, cr, dt)
        if im is not None:
            out = tensor.add(out, _along_last(im, ci, dt))
        return out, None
    kk = np.arange(L // 2 + 1 if onesided else L)[None, :]
    t = np.arange(L)[:, None]
    ang = 2 * np.pi * t * kk / L
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / L if inverse else 1.0
    cos, sin = _fit(np.cos(ang) * scale, n_in), _fit(sign * np.sin(ang) * scale, n_in)
    out_re = _along_last(re, cos, dt)
    out_im = _along_last(re, sin, dt)
    if im is not None:  # (a + ib)(cos + i s) = a cos - b s + i (a s + b cos)
        out_re = tensor.subtract(out_re, _along_last(im, sin, dt))
        out_im = tensor.add(out_im, _along_last(im, cos, dt))
    return out_re, out_im


@converter("DFT")
def _dft(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    r = len(s)
    dt = dtype_of(x)
    if s[-1] not in (1, 2):
        raise ctx.fail(f"the last axis must be 1 (real) or 2 (complex), got shape {s}")
    if ctx.opset >= 20 and runtime_input(ctx, names, 2):  # the axis known at run time
        from ...op.dyn import signal as _dyn

        L = int(ctx.value(names[1], "dft_length").reshape(-1)[0]) \
            if len(names) > 1 and names[1] else 0
        return _dyn.dft(x, inputs[2], bool(attrs.get("inverse", 0)),
                        bool(attrs.get("onesided", 0)), L, node=ctx.where())
    if ctx.opset >= 20:
        axis = (
            int(ctx.value(names[2], "axis").reshape(-1)[0]) if len(names) > 2 and names[2] else -2
        )
    else:
        axis = int(attrs.get("axis", 1))
    axis %= r
    if axis == r - 1:
        raise ctx.fail("axis must be a signal axis, not the last (real/imaginary) one")
    inverse, onesided = bool(attrs.get("inverse", 0)), bool(attrs.get("onesided", 0))
    if len(names) > 1 and names[1]:
        L = int(ctx.value(names[1], "dft_length").reshape(-1)[0])
    else:
        L = 2 * (s[axis] - 1) if inverse and onesided else s[axis]
    perm = [k for k in range(r - 1) if k != axis] + [axis]
    inv = [int(v) for v in np.argsort(perm)]
    re = transform.transpose(_last(x, 0), perm)
    im = transform.transpose(_last(x, 1), perm) if s[-1] == 2 else None
    out_re, out_im = dft_parts(re, im, L, inverse, onesided, dt)
    out_re = transform.transpose(out_re, inv)
    if out_im is None:
        return transform.expand_dims(out_re, r - 1)
    return tensor.stack([out_re, transform.transpose(out_im, inv)], r - 1)


@converter("STFT")
def _stft(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    sig = inputs[0]
    if runtime_input(ctx, names, 1) or runtime_input(ctx, names, 3):
        from ...op.dyn import signal as _dyn

        has_window = len(inputs) > 2 and inputs[2] is not None
        third = inputs[2] if has_window else (inputs[3] if len(inputs) > 3 else None)
        if third is None:
            raise ctx.fail("give frame_length or window")
        return _dyn.stft(sig, inputs[1], third, has_window, bool(attrs.get("onesided", 1)),
                         node=ctx.where())
    b, length, ch = shape_of(sig)
    dt = dtype_of(sig)
    step = int(ctx.value(names[1], "frame_step").reshape(-1)[0])
    window = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    if len(names) > 3 and names[3]:
        flen = int(ctx.value(names[3], "frame_length").reshape(-1)[0])
    elif window is not None:
        flen = shape_of(window)[0]
    else:
        raise ctx.fail("give frame_length or window")
    onesided = bool(attrs.get("onesided", 1))
    frames = (length - flen) // step + 1
    idx = (np.arange(frames)[:, None] * step + np.arange(flen)[None, :]).astype(np.int64)
    fr = transform.take(sig, const(idx), axis=1)              # (b, frames, flen, ch)
    re, im = _last(fr, 0), (_last(fr, 1) if ch == 2 else None)
    if window is not None:
        re = tensor.multiply(re, window)
        im = None if im is None else tensor.multiply(im, window)
    out_re, out_im = dft_parts(re, im, flen, False, onesided and ch == 1, dt)
    return tensor.stack([out_re, out_im], 3)


# ------------------------------------------------------------------------------------------------
# GridSample
def _reflect(v: RelayExpr, lo: float, hi: float, dt: str) -> RelayExpr:
    rng = hi - lo
    if rng <= 0:
        return tensor.clip(v, lo, hi) if hi >= lo else v
    below = tensor.less(v, typed_const(lo, dt))
    above = tensor.greater(v, typed_const(hi, dt))
    dx = tensor.where(
        below,
        tensor.subtract(typed_const(lo, dt), v),
        tensor.where(above, tensor.subtract(v, typed_const(hi, dt)), typed_const(0, dt)),
    )
    k = tensor.floor(tensor.divide(dx, typed_const(rng, dt)))
    rem = tensor.subtract(dx, tensor.multiply(k, typed_const(rng, dt)))
    even = tensor.equal(tensor.floor_mod(k, typed_const(2, dt)), typed_const(0, dt))
    from_lo, from_hi = (
        tensor.add(typed_const(lo, dt), rem),
        tensor.subtract(typed_const(hi, dt), rem),
    )
    low_side = tensor.where(even, from_lo, from_hi)
    high_side = tensor.where(even, from_hi, from_lo)
    return tensor.where(below, low_side, tensor.where(above, high_side, v))


def _cubic_w(t: RelayExpr, dt: str) -> list[RelayExpr]:
    A = -0.75

    def f(v: Any) -> RelayExpr:
        return typed_const(v, dt)

    def near(x: RelayExpr) -> RelayExpr:  # |x| <= 1
        return tensor.add(tensor.multiply(tensor.multiply(x, x), tensor.subtract(
            tensor.multiply(f(A + 2), x), f(A + 3))), f(1))

    def far(x: RelayExpr) -> RelayExpr:  # 1 < |x| < 2
        p = tensor.add(tensor.multiply(tensor.subtract(tensor.multiply(f(A), x), f(5 * A)), x),
                       f(8 * A))
        return tensor.subtract(tensor.multiply(p, x), f(4 * A))

    one = f(1)
    return [far(tensor.add(t, one)), near(t), near(tensor.subtract(one, t)),
            far(tensor.subtract(f(2), t))]


@converter("GridSample")
def _grid_sample(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    X, grid = inputs
    xs, gs = shape_of(X), shape_of(grid)
    dt = dtype_of(X)
    r = len(xs) - 2
    if gs[-1] != r or gs[0] != xs[0] or len(gs) != r + 2:
        raise ctx.fail(f"grid {gs} does not match data {xs}")
    mode = attrs.get("mode", "linear")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    pad = attrs.get("padding_mode", "zeros")
    align = bool(attrs.get("align_corners", 0))
    if mode == "cubic" and r != 2:
        raise ctx.fail("cubic mode is defined for 2-D data only")
    dims = xs[2:]
    N = xs[0]
    out_sp = gs[1:-1]
    coords, frac = [], []
    for k in range(r):
        g = _last(grid, r - 1 - k)                       # (N, out...): x is the last axis
        d = dims[k]
        if align:
            v = tensor.multiply(tensor.add(g, typed_const(1, dt)), typed_const((d - 1) / 2.0, dt))
            lo, hi = 0.0, d - 1.0
        else:
            v = tensor.divide(
                tensor.subtract(
                    tensor.multiply(tensor.add(g, typed_const(1, dt)), typed_const(d, dt)),
                    typed_const(1, dt),
                ),
                typed_const(2, dt),
            )
            lo, hi = -0.5, d - 0.5
        if mode == "nearest":
            v = round_half_even(v)
        if pad == "border":
            outside = tensor.logical_or(
                tensor.less(v, typed_const(lo, dt)), tensor.greater(v, typed_const(hi, dt))
            )
            v = tensor.where(outside, tensor.clip(v, 0.0, d - 1.0), v)
        elif pad == "reflection":
            v = _reflect(v, lo, hi, dt)
        elif pad != "zeros":
            raise ctx.fail(f"padding_mode={pad!r} is not supported")
        base = v if mode == "nearest" else tensor.floor(v)
        coords.append((base, lo, hi, d))
        frac.append(None if mode == "nearest" else tensor.subtract(v, base))
    offsets = {"nearest": [0], "linear": [0, 1], "cubic": [-1, 0, 1, 2]}[mode]
    data = transform.transpose(X, [0] + list(range(2, r + 2)) + [1])   # (N, dims..., C)
    batch = const(np.broadcast_to(np.arange(N).reshape([N] + [1] * r),
                                  [N] + out_sp).astype(np.int64))
    out = None
    for combo in itertools.product(range(len(offsets)), repeat=r):
        idx, valid, weight = [batch], None, None
        for k, j in enumerate(combo):
            base, lo, hi, d = coords[k]
            p = tensor.add(base, typed_const(offsets[j], dt)) if offsets[j] else base
            if pad == "zeros":
                ok = tensor.logical_and(tensor.greater_equal(p, typed_const(0, dt)),
                                        tensor.less(p, typed_const(d, dt)))
                valid = ok if valid is None else tensor.logical_and(valid, ok)
            elif pad == "reflection":
                p = _reflect(p, lo, hi, dt)
            pi = transform.cast(tensor.clip(p, 0.0, d - 1.0), "int64")  # (the cast truncates)
            idx.append(pi)
            if mode == "linear":
                w = frac[k] if offsets[j] else tensor.subtract(typed_const(1, dt), frac[k])
            elif mode == "cubic":
                w = _cubic_w(frac[k], dt)[j]
            else:
                w = None
            if w is not None:
                weight = w if weight is None else tensor.multiply(weight, w)
        v = transform.gather_nd(data, tensor.stack(idx, 0))               # (N, out..., C)
        if valid is not None:
            weight = transform.cast(valid, dt) if weight is None else \
                tensor.multiply(weight, transform.cast(valid, dt))
        if weight is not None:
            v = tensor.multiply(v, transform.expand_dims(weight, r + 1))
        out = v if out is None else tensor.add(out, v)
    return transform.transpose(out, [0, r + 1] + list(range(1, r + 1)))




# ------------------------------------------------------------------------------------------------
# HannWindow / HammingWindow / BlackmanWindow
def _window(kind: str) -> Any:
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        from ...op.dyn import window as _win

        dt = np_dtype(int(attrs.get("output_datatype", 1)))
        periodic = bool(attrs.get("periodic", 1))
        if not runtime_input(ctx, names, 0):  # a known size: the window itself, a constant
            n = int(ctx.value(names[0], "size").reshape(-1)[0])
            if n < 0:
                raise ctx.fail(f"size {n} is negative")
            denom = n if periodic else n - 1
            a0, a1, a2 = _win.WINDOWS[kind]
            with np.errstate(divide="ignore", invalid="ignore"):
                ang = 2 * np.pi * np.arange(n, dtype=np.float64) / denom
            return const((a0 + a1 * np.cos(ang) + a2 * np.cos(2 * ang)).astype(dt))
        return _win.window(inputs[0], kind, periodic, dt, node=ctx.where())
    return convert


for _op, _kind in (("HannWindow", "hann"), ("HammingWindow", "hamming"),
                   ("BlackmanWindow", "blackman")):
    register(_op, _window(_kind))


@converter("AffineGrid")
def _affine_grid(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    """The size known at run time: relay.op.dyn.affine_grid; else ONNX's function body."""
    if not runtime_input(ctx, names, 1):
        return expand_here(ctx)
    from ...op.dyn import spatial

    return spatial.affine_grid(inputs[0], inputs[1], bool(attrs.get("align_corners", 0)),
                               node=ctx.where())
