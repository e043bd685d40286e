"""ONNX Resize beyond relay's resize2d: any rank, any axes, cubic, antialias, exclude_outside,
tf_crop_and_resize (with extrapolation_value), half_pixel_symmetric, keep_aspect_ratio_policy,
and scales that do not give an exact output size.

ONNX's interpolation is separable: resizing is one 1-D interpolation per resized axis, each a
linear map of that axis fixed at import time by the shapes and attributes. This module computes
the map per axis in numpy (``axis_weights``: an (out, in) matrix, following the ONNX operator
definition) and applies it in relay: a ``take`` when every output reads exactly one input
(nearest), else a matmul over that axis (``dense`` on the axis moved last), then
``extrapolation_value`` where tf_crop_and_resize samples outside the input.

``from_onnx`` uses relay's ``image.resize2d`` (one fusable injective op) where it applies, and this
decomposition otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from ...op.image import resize2d
from ...ty import dim_equal
from ..common import reshape_to

__all__ = ["ResizeSpec", "output_size_and_scales", "axis_weights", "resize_separable"]
from . import dynamic, shape_values
from .context import ImportContext, dtype_of, shape_of
from .registry import Attrs, Inputs, Names, Output, converter


class ResizeSpec:
    """The attributes of an ONNX Resize node that shape the interpolation."""

    def __init__(self, mode: str = "nearest", coord: str = "half_pixel",
                 nearest_mode: str = "round_prefer_floor", cubic_a: float = -0.75,
                 exclude_outside: bool = False, antialias: bool = False,
                 extrapolation_value: float = 0.0):
        self.mode = mode
        self.coord = coord
        self.nearest_mode = nearest_mode
        self.cubic_a = cubic_a
        self.exclude_outside = exclude_outside
        self.antialias = antialias
        self.extrapolation_value = extrapolation_value


def output_size_and_scales(in_shape: Sequence[int], axes: Sequence[int],
                           scales: Sequence[float] | None, sizes: Sequence[int] | None,
                           policy: str = "stretch") -> tuple[list[int], list[float]]:
    """Output shape and per-axis scale (all axes), as the ONNX definition computes them."""
    r = len(in_shape)
    scale = [1.0] * r
    out = list(in_shape)
    if sizes is not None:
        for ax, s in zip(axes, sizes):
            out[ax] = int(s)
            scale[ax] = int(s) / in_shape[ax]
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            sc = pick(scale[ax] for ax in axes)
            for ax in axes:
                scale[ax] = sc
                out[ax] = int(sc * in_shape[ax] + 0.5)  # round half up
    else:
        assert scales is not None
        for ax, s in zip(axes, scales):
            scale[ax] = float(s)
            if scale[ax] == 1.0:  # (also a symbolic dimension, e.g. a relay.Any batch)
                continue
            # in float32, as onnxruntime and the reference (0.7 * 10 is 7, not 6.9999...)
            out[ax] = int(math.floor(np.float32(in_shape[ax]) * np.float32(s)))
    return out, scale


def _coeffs(spec: ResizeSpec, ratio: float, scale: float) -> np.ndarray:
    """Kernel weights for neighbors starting left of the sample point (ONNX's definitions)."""
    if spec.mode == "nearest":
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        prefer = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                  "floor": False, "ceil": True}[spec.nearest_mode]
        return np.array([0.0, 1.0]) if prefer else np.array([1.0, 0.0])
    if spec.mode == "linear":
        if not spec.antialias:
            return np.array([1 - ratio, ratio])
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        args = (np.arange(start, 2 - start) - ratio) * s
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / c.sum()
    a = spec.cubic_a
    if not spec.antialias:
        t = ratio
        return np.array([
            ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * ((1 - t) + 1) - 5 * a) * ((1 - t) + 1) + 8 * a) * ((1 - t) + 1) - 4 * a,
        ])
    s = min(scale, 1.0)
    i0 = int(np.floor(-2 / s) + 1)
    xs = np.abs(s * (np.arange(i0, 2 - i0) - ratio))
    c = np.where(xs <= 1, (a + 2) * xs ** 3 - (a + 3) * xs ** 2 + 1,
                 np.where(xs < 2, a * xs ** 3 - 5 * a * xs ** 2 + 8 * a * xs - 4 * a, 0.0))
    return c / c.sum()


def _source_coords(spec: ResizeSpec, n_in: int, n_out: int, scale: float,
                   roi: tuple[float, float] | None) -> np.ndarray:
    y = np.arange(n_out, dtype=np.float64)
    width = scale * n_in  # the (possibly fractional) output width
    mode = spec.coord
    if mode == "align_corners":
        return np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        if width == 1:
            x = np.full(n_out, (hi - lo) * (n_in - 1) / 2)
        else:
            x = y * (hi - lo) * (n_in - 1) / (width - 1)
        return x + lo * (n_in - 1)
    if mode == "pytorch_half_pixel":
        return np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        return offset + (y + 0.5) / scale - 0.5
    raise ValueError(f"coordinate_transformation_mode {mode!r}")


def axis_weights(spec: ResizeSpec, n_in: int, n_out: int, scale: float,
                 roi: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(W, outside): output[i] = sum_j W[i, j] * input[j] along one axis, and a boolean per
    output position that tf_crop_and_resize sets to extrapolation_value."""
    x = _source_coords(spec, n_in, n_out, scale, roi)
    w = np.zeros((n_out, n_in))
    for i, xo in enumerate(x):
        base = math.floor(xo)
        ratio = 1.0 if xo == base else xo - base
        c = np.array(_coeffs(spec, ratio, scale), dtype=np.float64)
        n = len(c)
        # the n nearest integer positions to xo (ties to the smaller), in edge-padded coordinates
        pad = (n + 1) // 2
        xp = xo + pad
        p = math.floor(xp)
        frac = xp - p
        if n % 2 == 0:
            start = p - n // 2 if frac == 0 else p - n // 2 + 1
        else:
            start = p - (n - 1) // 2 + (0 if frac <= 0.5 else 1)
        idx = np.arange(start, start + n) - pad
        if spec.exclude_outside:
            c = np.where((idx < 0) | (idx >= n_in), 0.0, c)
            total = c.sum()
            c = c / (total if total != 0 else 1.0)
        for j, cj in zip(np.clip(idx, 0, n_in - 1), c):
            w[i, j] += cj
    outside = np.zeros(n_out, dtype=bool)
    if spec.coord == "tf_crop_and_resize":
        outside = (x < 0) | (x > n_in - 1)
    return w, outside


def _one_hot_rows(w: np.ndarray) -> np.ndarray | None:
    """The column each row reads when every row is a one-hot 1.0, else None."""
    cols = np.argmax(np.abs(w), axis=1)
    ok = np.allclose(w[np.arange(len(w)), cols], 1.0) and np.allclose(np.abs(w).sum(axis=1), 1.0)
    return cols if ok else None


def resize_separable(x: RelayExpr, in_shape: Sequence[int], dtype: str, spec: ResizeSpec,
                     out_shape: Sequence[int], scales: Sequence[float],
                     roi: Sequence[float] | None = None) -> RelayExpr:
    """Resize ``x`` to ``out_shape`` one axis at a time (axes whose size and scale stay the same
    and that are not cropped are left alone)."""
    r = len(in_shape)
    cur = list(in_shape)
    for ax in range(r):
        ax_roi = None if roi is None else (float(roi[ax]), float(roi[ax + r]))
        identity = (out_shape[ax] == cur[ax] and math.isclose(scales[ax], 1.0)
                    and (ax_roi is None or spec.coord != "tf_crop_and_resize"
                         or (math.isclose(ax_roi[0], 0.0) and math.isclose(ax_roi[1], 1.0))))
        if identity:
            continue
        w, outside = axis_weights(spec, cur[ax], out_shape[ax], scales[ax], ax_roi)
        cols = _one_hot_rows(w)
        if cols is not None:
            x = transform.take(x, const(cols.astype(np.int64)), axis=ax)
        else:
            perm = [a for a in range(r) if a != ax] + [ax]
            inv = list(np.argsort(perm))
            moved = transform.transpose(x, perm) if ax != r - 1 else x
            lead = [cur[a] for a in perm[:-1]]
            flat = reshape_to(moved, [-1, cur[ax]])
            y = nn.dense(flat, const(w.astype(dtype)))
            y = reshape_to(y, lead + [out_shape[ax]])
            x = transform.transpose(y, [int(v) for v in inv]) if ax != r - 1 else y
        if outside.any():
            shape = [1] * r
            shape[ax] = out_shape[ax]
            mask = const(outside.reshape(shape))
            x = tensor.where(mask, const(np.asarray(spec.extrapolation_value, dtype=dtype)), x)
        cur[ax] = out_shape[ax]
    return x


def _resize_any(ctx: ImportContext, x: RelayExpr, spec: ResizeSpec, axes: list[int],
                scales: Any, sizes: Any, policy: str = "stretch", roi: Any = None) -> RelayExpr:
    """relay's resize2d where it computes exactly this resize, else the separable form."""
    s = shape_of(x)
    dt = dtype_of(x)
    out, sc = output_size_and_scales(s, axes, scales, sizes, policy)
    fast = (len(s) == 4 and out[:2] == s[:2] and spec.mode in ("nearest", "linear")
            and spec.coord not in ("tf_crop_and_resize", "half_pixel_symmetric")
            and not spec.antialias
            and all(o is d and f == 1.0 or abs(o - d * f) <= 1e-5 * max(o, 1)
                    for o, d, f in zip(out, s, sc)))  # (o is d: a relay.Any batch kept)
    if fast:
        return resize2d(x, out[2:], method="nearest_neighbor" if spec.mode == "nearest"
                        else "linear", coordinate_transformation_mode=spec.coord,
                        rounding_method=spec.nearest_mode if spec.mode == "nearest" else "")
    if spec.mode != "nearest" and not dt.startswith("float"):
        raise ctx.fail(f"{spec.mode} resize of {dt} data is not supported (float data only)")
    if any(o < 1 for o in out):
        raise ctx.fail(f"output shape {out} has an empty axis")
    return resize_separable(x, s, dt, spec, out, sc, roi)


@converter("Resize")
def _resize(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    r = len(shape_of(x))
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.fail(f"attribute mode={mode!r} is not supported (nearest, linear, cubic)")
    coord = attrs.get("coordinate_transformation_mode", "half_pixel")
    if coord == "tf_half_pixel_for_nn":
        raise ctx.fail("coordinate_transformation_mode='tf_half_pixel_for_nn' is not supported")
    spec = ResizeSpec(
        mode,
        coord,
        attrs.get("nearest_mode", "round_prefer_floor"),
        float(attrs.get("cubic_coeff_a", -0.75)),
        bool(attrs.get("exclude_outside", 0)),
        bool(attrs.get("antialias", 0)),
        float(attrs.get("extrapolation_value", 0.0)),
    )
    if spec.antialias and mode == "nearest":
        raise ctx.fail("antialias=1 with mode='nearest' is not defined")
    axes = [int(v) % r for v in attrs.get("axes", range(r))]
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    use_sizes = ctx.opset >= 11 and len(names) > 3 and bool(names[3])
    target = 1 if ctx.opset < 11 else 3 if use_sizes else 2
    crop = coord == "tf_crop_and_resize" and ctx.opset >= 11
    sym = shape_values.lookup(ctx, names[3]) if use_sizes and not crop else None
    if sym is not None and len(sym) == len(axes):
        # sizes computed from Shape ops: (N, C) copied from the input, (H, W) static (a
        # bilinear upsampling to another tensor's size): resize the static axes only
        s = shape_of(x)
        keep = [k for k, d in enumerate(sym) if not isinstance(d, int)]
        if all(dim_equal(s[axes[k]], sym[k]) for k in keep):
            rest = [k for k in range(len(axes)) if k not in keep]
            return _resize_any(ctx, x, spec, [axes[k] for k in rest], None,
                               [int(sym[k]) for k in rest], policy, None)
    if dynamic.runtime_inputs(ctx, names, target, *([1] if crop else [])):
        return dynamic.resize(ctx, x, spec, list(attrs["axes"]) if "axes" in attrs else None,
                              inputs[target], use_sizes, inputs[1] if crop else None, policy)
    scales = sizes = None
    if ctx.opset < 11:
        scales = ctx.value(names[1], "scales")
    elif len(names) > 3 and names[3]:
        sizes = [int(v) for v in ctx.value(names[3], "sizes")]
    else:
        scales = [float(v) for v in ctx.value(names[2], "scales")]
    vals = sizes if sizes is not None else scales
    if len(vals) != len(axes):
        raise ctx.fail(f"{'sizes' if sizes is not None else 'scales'} {list(vals)} do not match "
                     f"axes {axes}")
    roi = None
    if coord == "tf_crop_and_resize":
        if not (ctx.opset >= 11 and len(names) > 1 and names[1]):
            raise ctx.fail("coordinate_transformation_mode='tf_crop_and_resize' needs roi")
        rv = [float(v) for v in ctx.value(names[1], "roi")]
        if len(rv) != 2 * len(axes):
            raise ctx.fail(f"roi {rv} does not match axes {axes}")
        roi = [0.0] * r + [1.0] * r
        for k, ax in enumerate(axes):
            roi[ax], roi[r + ax] = rv[k], rv[len(axes) + k]
    return _resize_any(ctx, x, spec, axes, scales, sizes, policy, roi)


@converter("Upsample")
def _upsample(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    r = len(shape_of(x))
    mode = attrs.get("mode", "nearest")
    if "scales" not in attrs and dynamic.runtime_inputs(ctx, names, 1):
        spec = ResizeSpec("nearest" if mode == "nearest" else "linear", "asymmetric", "floor")
        return dynamic.resize(ctx, x, spec, None, inputs[1], False, None)
    scales = [
        float(v) for v in (attrs["scales"] if "scales" in attrs else ctx.value(names[1], "scales"))
    ]
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise ctx.fail(f"attribute mode={mode!r} is not supported (nearest, linear)")
    if len(scales) != r:
        raise ctx.fail(f"scales {scales} do not match the rank {r} of the data")
    spec = ResizeSpec("nearest" if mode == "nearest" else "linear", "asymmetric", "floor")
    return _resize_any(ctx, x, spec, list(range(r)), scales, None)
