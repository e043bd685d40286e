"""ONNX normalizations: BatchNormalization (inference, and training_mode with the updated running
statistics), Layer/Instance/RMS/Lp/MeanVariance normalization and LRN."""

from __future__ import annotations

import numpy as np

from ...expr import const
from ...op import nn, tensor, transform
from ...op import reduce as _red
from ..common import reshape_to
from .context import ImportContext, dtype_of, scalar_like, shape_of
from .registry import Attrs, Inputs, Names, Output, converter


@converter("BatchNormalization")
def _bn(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if attrs.get("training_mode", 0):
        return _bn_training(ctx, inputs, attrs)
    return nn.batch_norm(*inputs[:5], axis=1, epsilon=attrs.get("epsilon", 1e-5))[0]


def _bn_training(ctx: ImportContext, inputs: Inputs, attrs: Attrs) -> list:
    """training_mode=1: normalize with the batch statistics; also the updated running mean and
    (population) variance, ``running * momentum + batch * (1 - momentum)``."""
    x, scale, bias, mean, var = inputs[:5]
    r = len(shape_of(x))
    axes = [k for k in range(r) if k != 1]
    bshape = [1, -1] + [1] * (r - 2)
    m = _red.mean(x, axis=axes, keepdims=True)
    v = _red.variance(x, m, axis=axes, keepdims=True)
    eps, mom = attrs.get("epsilon", 1e-5), attrs.get("momentum", 0.9)
    y = tensor.divide(tensor.subtract(x, m), tensor.sqrt(tensor.add(v, scalar_like(eps, x))))
    y = tensor.add(tensor.multiply(y, reshape_to(scale, bshape)),
                   reshape_to(bias, bshape))
    mom_c, rest = scalar_like(mom, x), scalar_like(1 - mom, x)
    run_m = tensor.add(tensor.multiply(mean, mom_c),
                       tensor.multiply(reshape_to(m, [-1]), rest))
    run_v = tensor.add(tensor.multiply(var, mom_c),
                       tensor.multiply(reshape_to(v, [-1]), rest))
    return [y, run_m, run_v]


@converter("LayerNormalization")
def _ln(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, g = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    s = shape_of(x)
    ax = attrs.get("axis", -1) % len(s)
    eps = attrs.get("epsilon", 1e-5)
    if b is None:
        b = const(np.zeros(shape_of(g), dtype=dtype_of(g)))
    if ax == len(s) - 1:
        y = nn.layer_norm(x, g, b, axis=-1, epsilon=eps)
    else:
        tail = int(np.prod(s[ax:]))
        x2 = reshape_to(x, s[:ax] + [tail])
        g2 = reshape_to(transform.broadcast_to(g, s[ax:]), (tail,))
        b2 = reshape_to(transform.broadcast_to(b, s[ax:]), (tail,))
        y = reshape_to(nn.layer_norm(x2, g2, b2, axis=-1, epsilon=eps), s)
    if len(ctx.node.output) == 1 or not any(ctx.node.output[1:]):
        return y
    axes = list(range(ax, len(s)))  # the optional Mean and InvStdDev outputs (keepdims)
    mean = _red.mean(x, axis=axes, keepdims=True)
    d = tensor.subtract(x, mean)
    var = _red.mean(tensor.multiply(d, d), axis=axes, keepdims=True)
    return [y, mean, tensor.rsqrt(tensor.add(var, scalar_like(eps, x)))]


@converter("InstanceNormalization")
def _instnorm(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return nn.instance_norm(
        inputs[0], inputs[1], inputs[2], axis=1, epsilon=attrs.get("epsilon", 1e-5)
    )


@converter("RMSNormalization")
def _rms_norm(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, scale = inputs[0], inputs[1]
    r = len(shape_of(x))
    axes = list(range(attrs.get("axis", -1) % r, r))
    eps = attrs.get("epsilon", 1e-5)
    ms = _red.mean(tensor.multiply(x, x), axis=axes, keepdims=True)
    return tensor.multiply(
        tensor.multiply(x, tensor.rsqrt(tensor.add(ms, scalar_like(eps, x)))), scale
    )


@converter("LpNormalization")
def _lpnorm(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    ax, p = attrs.get("axis", -1), attrs.get("p", 2)
    if p == 1:
        norm = _red.sum(tensor.abs(x), axis=[ax], keepdims=True)
    elif p == 2:
        norm = tensor.sqrt(_red.sum(tensor.multiply(x, x), axis=[ax], keepdims=True))
    else:
        raise ctx.fail(f"attribute p={p} is not supported (1 or 2)")
    zero = scalar_like(0, x)  # a zero vector stays zero (onnx's definition), not nan
    safe = tensor.where(tensor.equal(norm, zero), scalar_like(1, x), norm)
    return tensor.divide(x, safe)


@converter("MeanVarianceNormalization")
def _mvn(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    axes = list(attrs.get("axes", [0, 2, 3]))
    d = tensor.subtract(x, _red.mean(x, axis=axes, keepdims=True))
    var = _red.mean(tensor.multiply(d, d), axis=axes, keepdims=True)
    return tensor.divide(d, tensor.sqrt(tensor.add(var, scalar_like(1e-9, x))))


@converter("LRN")
def _lrn(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    if 0 in s:  # an empty input: an empty output (the channel window would pool nothing)
        return const(np.zeros(s, dtype=dtype_of(x)))
    sq = reshape_to(tensor.multiply(x, x), (s[0], 1, s[1], int(np.prod(s[2:]))))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    win = nn.avg_pool2d(sq, (size, 1), padding=(lo, 0, hi, 0), count_include_pad=True)
    div = tensor.add(
        scalar_like(bias, x), tensor.multiply(reshape_to(win, s), scalar_like(alpha, x))
    )
    return tensor.divide(x, tensor.power(div, scalar_like(beta, x)))
