"""ONNX importer: ``from_onnx(model, shape) -> (IRModule, params)``, as in TVM.

Graph inputs that are initializers become parameters: relay Constants when ``freeze_params``
(TVM's meaning: weights embedded, ``params`` empty), else relay Vars with their values in
``params``. Other graph inputs become Vars with the given or the model's shapes. Values known at
import time (initializers, Constant, static Shape and what is computed only from them) are kept
as numpy arrays so shape-like inputs (Reshape's shape, Slice's starts, ...) fold to attributes.
Every operator type is checked before conversion: unsupported ones raise ONE OpNotImplemented
listing each type with its node names.

An operator without a converter but with an ONNX function body is imported through that body
(``onnx_functions.py``). Converters that need more than a few lines live next to this file:
``onnx_resize.py`` (Resize beyond resize2d), ``onnx_quant.py`` (quantization), ``onnx_index.py``
(TopK, scatters, CumProd), ``onnx_rnn.py`` (RNN/GRU/LSTM), ``onnx_signal.py`` (DFT, STFT,
GridSample), ``onnx_misc.py`` (RoiAlign, DeformConv, Col2Im, ...), ``onnx_control.py`` (If on
an import-time condition, unrolled Scan). Shape-like inputs that are graph inputs raise
``OnnxConstantInputError`` naming them (the ONNX backend then binds them and imports again).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import op as _op  # noqa: F401  (registers operators)
from ..expr import Constant, Function, RelayExpr, Tuple, const, var
from ..module import IRModule
from ..op import nn, nn_nd, tensor, transform
from ..op import reduce as _red
from ..op.image import resize2d
from ..type_infer import infer_type
from .common import reshape_to, softplus, unsupported_error
from .onnx_functions import expand_function, function_versions
from .onnx_resize import ResizeSpec, output_size_and_scales, resize_separable

__all__ = ["from_onnx", "supported_ops", "OnnxConvertError", "OnnxConstantInputError"]

_INT_MAX = 2**31 - 1


class OnnxConvertError(ValueError):
    """An attribute or input value a converter does not support (names node and attribute)."""


class OnnxConstantInputError(OnnxConvertError):
    """A shape-like input (Reshape's shape, Slice's starts, ...) is not known at import time.

    ``tensors`` names the ONNX tensors whose values were needed (for a node inside an expanded
    function body: the outer tensors it is computed from): a runtime that knows the graph
    inputs' values (the ONNX backend, ``tvmpy.contrib.onnx_backend``) binds the graph inputs it
    depends on as constants and imports again."""

    def __init__(self, msg: str, *tensors: str):
        super().__init__(msg)
        self.tensors = tensors


class _Ctx:
    """Conversion state: relay expressions and known numpy values per ONNX tensor name."""

    def __init__(self, opset: int, freeze: bool):
        self.opset = opset
        self.freeze = freeze
        self.exprs: dict[str, RelayExpr] = {}
        self.values: dict[str, np.ndarray] = {}
        self.node: Any = None
        self.expansions = 0  # function bodies expanded so far (unique name prefixes)

    def where(self) -> str:
        n = self.node
        return f"{n.op_type} node {n.name or '(unnamed)'!r}"

    def fail(self, msg: str) -> OnnxConvertError:
        return OnnxConvertError(f"{self.where()}: {msg}")

    def value(self, name: str, what: str) -> np.ndarray:
        if name not in self.values:
            raise OnnxConstantInputError(
                f"{self.where()}: input {what} ({name!r}) must be a constant known at import "
                "time", name)
        return self.values[name]


def _shape(e: RelayExpr) -> list[int]:
    return [int(d) for d in infer_type(e).checked_type.shape]


def _dtype(e: RelayExpr) -> str:
    return str(infer_type(e).checked_type.dtype)


def _np_dtype(onnx_type: int) -> str:
    from onnx import helper

    return str(np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type)))


def _scalar(v: float, like: RelayExpr) -> Constant:
    return const(np.asarray(v, dtype=_dtype(like)))


# ------------------------------------------------------------------------------------------------
# converters: f(ctx, inputs, attrs, input_names) -> expr or list of exprs
Conv = Callable[[_Ctx, list, dict, list], Any]
_CONVERTERS: dict[str, Conv] = {}


def _reg(*names: str):
    def deco(f: Conv) -> Conv:
        for n in names:
            _CONVERTERS[n] = f
        return f
    return deco


def _unary(onnx_name: str, fn: Callable[[RelayExpr], RelayExpr]) -> None:
    _CONVERTERS[onnx_name] = lambda c, i, a, n: fn(i[0])


for _n, _f in [("Sqrt", tensor.sqrt), ("Exp", tensor.exp), ("Log", tensor.log),
               ("Neg", tensor.negative), ("Abs", tensor.abs), ("Erf", tensor.erf),
               ("Tanh", tensor.tanh), ("Sigmoid", tensor.sigmoid), ("Relu", nn.relu),
               ("Floor", tensor.floor), ("Ceil", tensor.ceil), ("Sin", tensor.sin),
               ("Cos", tensor.cos), ("Not", tensor.logical_not),
               ("Sign", tensor.sign), ("Identity", lambda x: x), ("Tan", tensor.tan),
               ("Asin", tensor.asin), ("Acos", tensor.acos), ("Atan", tensor.atan),
               ("Sinh", tensor.sinh), ("Cosh", tensor.cosh), ("Asinh", tensor.asinh),
               ("Acosh", tensor.acosh), ("Atanh", tensor.atanh), ("IsNaN", tensor.isnan),
               ("BitwiseNot", tensor.bitwise_not)]:
    _unary(_n, _f)

for _n, _f in [("Add", tensor.add), ("Sub", tensor.subtract), ("Mul", tensor.multiply),
               ("Equal", tensor.equal), ("Less", tensor.less), ("Greater", tensor.greater),
               ("LessOrEqual", tensor.less_equal), ("GreaterOrEqual", tensor.greater_equal),
               ("And", tensor.logical_and), ("Or", tensor.logical_or),
               ("Xor", tensor.logical_xor), ("BitwiseAnd", tensor.bitwise_and),
               ("BitwiseOr", tensor.bitwise_or), ("BitwiseXor", tensor.bitwise_xor)]:
    _CONVERTERS[_n] = (lambda f: lambda c, i, a, n: f(i[0], i[1]))(_f)


@_reg("Div")
def _div(c, i, a, n):
    return tensor.divide(i[0], i[1])  # integer Div truncates toward zero in ONNX and relay


@_reg("Pow")
def _pow(c, i, a, n):
    dt = _dtype(i[0])
    if not dt.startswith("float"):  # integer base: in float64 (exact for exact results)
        p = tensor.power(transform.cast(i[0], "float64"), transform.cast(i[1], "float64"))
        return transform.cast(p, dt)
    b = i[1] if _dtype(i[1]) == dt else transform.cast(i[1], dt)
    return tensor.power(i[0], b)


@_reg("Round")
def _round(c, i, a, n):
    """Half to even, as ONNX (relay's round goes half away from zero)."""
    x = i[0]
    f = tensor.floor(x)
    d = tensor.subtract(x, f)
    half = tensor.add(f, tensor.floor_mod(f, _scalar(2, x)))
    up = tensor.add(f, _scalar(1, x))
    return tensor.where(tensor.greater(d, _scalar(0.5, x)), up,
                        tensor.where(tensor.less(d, _scalar(0.5, x)), f, half))


@_reg("Reciprocal")
def _recip(c, i, a, n):
    return tensor.divide(_scalar(1.0, i[0]), i[0])


def _variadic(fn):
    def f(c, i, a, n):
        out = i[0]
        for x in i[1:]:
            out = fn(out, x)
        return out
    return f


_CONVERTERS["Max"] = _variadic(tensor.maximum)
_CONVERTERS["Min"] = _variadic(tensor.minimum)
_CONVERTERS["Sum"] = _variadic(tensor.add)


@_reg("Mean")
def _mean(c, i, a, n):
    return tensor.divide(_variadic(tensor.add)(c, i, a, n), _scalar(len(i), i[0]))


@_reg("LeakyRelu")
def _leaky(c, i, a, n):
    return nn.leaky_relu(i[0], a.get("alpha", 0.01))


@_reg("PRelu")
def _prelu(c, i, a, n):
    x, s = i
    return tensor.where(tensor.less(x, _scalar(0, x)), tensor.multiply(x, s), x)


@_reg("Elu")
def _elu(c, i, a, n):
    x = i[0]
    neg = tensor.multiply(_scalar(a.get("alpha", 1.0), x),
                          tensor.subtract(tensor.exp(x), _scalar(1, x)))
    return tensor.where(tensor.less(x, _scalar(0, x)), neg, x)


@_reg("Softplus")
def _softplus(c, i, a, n):
    return softplus(i[0], _dtype(i[0]))


@_reg("HardSigmoid")
def _hsig(c, i, a, n):
    x = i[0]
    y = tensor.add(tensor.multiply(x, _scalar(a.get("alpha", 0.2), x)), _scalar(a.get("beta", 0.5), x))
    return tensor.clip(y, 0.0, 1.0)


@_reg("HardSwish")
def _hswish(c, i, a, n):
    x = i[0]
    y = tensor.clip(tensor.add(tensor.multiply(x, _scalar(1 / 6, x)), _scalar(0.5, x)), 0.0, 1.0)
    return tensor.multiply(x, y)


@_reg("Gelu")
def _gelu(c, i, a, n):
    if a.get("approximate", "none") == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x = i[0]
        inner = tensor.multiply(_scalar(math.sqrt(2 / math.pi), x), tensor.add(
            x, tensor.multiply(_scalar(0.044715, x), tensor.multiply(x, tensor.multiply(x, x)))))
        return tensor.multiply(tensor.multiply(_scalar(0.5, x), x),
                               tensor.add(_scalar(1, x), tensor.tanh(inner)))
    return nn.gelu(i[0], a.get("approximate", "none"))


@_reg("Clip")
def _clip(c, i, a, n):
    x = i[0]
    if c.opset < 11:
        return tensor.clip(x, a.get("min", -np.inf), a.get("max", np.inf))
    out = x
    for idx, fn in ((1, tensor.maximum), (2, tensor.minimum)):
        if len(i) > idx and i[idx] is not None:
            if n[idx] in c.values:
                lo = float(c.values[n[idx]].reshape(-1)[0])
                out = fn(out, _scalar(lo, x))
            else:
                out = fn(out, i[idx])
    return out


@_reg("Where")
def _where(c, i, a, n):
    return tensor.where(i[0], i[1], i[2])


@_reg("Cast")
def _cast(c, i, a, n):
    return transform.cast(i[0], _np_dtype(a["to"]))


@_reg("Dropout")
def _dropout(c, i, a, n):
    if len(i) > 2 and i[2] is not None and bool(c.value(n[2], "training_mode").reshape(-1)[0]):
        ratio = c.value(n[1], "ratio") if len(n) > 1 and n[1] else np.asarray(0.5)
        if float(ratio.reshape(-1)[0]) != 0.0:  # ratio 0 drops nothing: the identity
            raise c.fail("training_mode=True is not supported (inference only, or ratio 0)")
    if len(c.node.output) > 1 and c.node.output[1]:
        return [i[0], const(np.ones(_shape(i[0]), dtype=bool))]
    return i[0]


# ------------------------------------------------------------------------------------------------
# nn
def _conv_pads(c, a, in_sp: list[int], k: list[int], strides, dil) -> list[int]:
    nd = len(k)
    auto = a.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("NOTSET", ""):
        return list(a.get("pads", [0] * (2 * nd)))
    if auto == "VALID":
        return [0] * (2 * nd)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise c.fail(f"attribute auto_pad={auto!r} is not supported")
    begin, end = [], []
    for s_in, kk, s, d in zip(in_sp, k, strides, dil):
        out = -(-s_in // s)
        total = max((out - 1) * s + (kk - 1) * d + 1 - s_in, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


def _check_2d(c, x, what="data") -> list[int]:
    s = _shape(x)
    if len(s) != 4:
        raise c.fail(f"only 2-D (NCHW, 4-D {what}) is supported, got shape {s}")
    return s


@_reg("Conv")
def _conv(c, i, a, n):
    x, w = i[0], i[1]
    xs, ws = _shape(x), _shape(w)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise c.fail(f"only 1-D, 2-D and 3-D convolutions are supported, got data shape {xs}")
    k = list(a.get("kernel_shape", ws[2:]))
    strides = list(a.get("strides", [1] * nd))
    dil = list(a.get("dilations", [1] * nd))
    pads = _conv_pads(c, a, xs[2:], k, strides, dil)
    fn = {1: nn_nd.conv1d, 2: nn.conv2d, 3: nn_nd.conv3d}[nd]
    out = fn(x, w, strides=strides, padding=pads, dilation=dil, groups=a.get("group", 1),
             channels=ws[0], kernel_size=k)
    if len(i) > 2 and i[2] is not None:
        out = nn.bias_add(out, i[2], axis=1)
    return out


@_reg("ConvTranspose")
def _conv_t(c, i, a, n):
    x, w = i[0], i[1]
    xs, ws = _shape(x), _shape(w)
    g = a.get("group", 1)
    if len(xs) == 3:  # 1-D: a 2-D transposed convolution of height 1
        a = dict(a)
        for key, pad in (("strides", 1), ("dilations", 1), ("output_padding", 0)):
            if key in a:
                a[key] = [pad] + list(a[key])
        if "kernel_shape" in a:
            a["kernel_shape"] = [1] + list(a["kernel_shape"])
        if "pads" in a:
            a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
        if "output_shape" in a:
            a["output_shape"] = [1] + list(a["output_shape"])[-1:]
        x = reshape_to(x, (xs[0], xs[1], 1, xs[2]))
        w = reshape_to(w, (ws[0], ws[1], 1, ws[2]))
        y = _conv_t(c, [x, w] + list(i[2:]), a, n)
        ys = _shape(y)
        return reshape_to(y, (ys[0], ys[1], ys[3]))
    if len(xs) == 5:
        return _conv_t_as_conv(c, i, a)
    _check_2d(c, x)
    k = list(a.get("kernel_shape", ws[2:]))
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    opad = list(a.get("output_padding", [0, 0]))
    pads = _conv_t_pads(c, a, xs[2:], k, strides, dil, opad)
    if dil != [1, 1]:  # a dilated kernel is the kernel with zeros between its taps
        w = _dilate_kernel(w, dil)
        k = [(kk - 1) * d + 1 for kk, d in zip(k, dil)]
    xg, wg = [x], [w]
    if g > 1:  # one transposed convolution per group, concatenated
        cin = xs[1] // g
        xg = [transform.strided_slice(x, [j * cin], [(j + 1) * cin], axes=[1]) for j in range(g)]
        wg = [transform.strided_slice(w, [j * cin], [(j + 1) * cin], axes=[0]) for j in range(g)]
    outs = [nn.conv2d_transpose(xj, wj, strides=strides, padding=pads, dilation=[1, 1],
                                channels=ws[1], kernel_size=k, output_padding=opad)
            for xj, wj in zip(xg, wg)]
    out = outs[0] if g == 1 else transform.concatenate(outs, 1)
    if len(i) > 2 and i[2] is not None:
        out = nn.bias_add(out, i[2], axis=1)
    return out


def _conv_t_as_conv(c: _Ctx, i: list, a: dict) -> RelayExpr:
    """3-D ConvTranspose as a convolution: the input with (stride - 1) zeros between elements,
    padded by the kernel's reach minus pads, convolved with the flipped, (I, O)-swapped kernel."""
    x, w = i[0], i[1]
    xs, ws = _shape(x), _shape(w)
    nd = len(xs) - 2
    g = a.get("group", 1)
    if "output_shape" in a or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise c.fail("3-D ConvTranspose with output_shape or auto_pad SAME_* is not supported")
    k = list(ws[2:])
    strides = list(a.get("strides", [1] * nd))
    dil = list(a.get("dilations", [1] * nd))
    opad = list(a.get("output_padding", [0] * nd))
    pads = [0] * (2 * nd) if a.get("auto_pad") == "VALID" else list(a.get("pads", [0] * 2 * nd))
    dt = _dtype(x)
    for d in range(nd):  # zeros between the elements along each strided axis
        s = strides[d]
        if s == 1:
            continue
        ax = 2 + d
        sh = _shape(x)
        zshape = sh[:ax + 1] + [s - 1] + sh[ax + 1:]
        spread = transform.concatenate([transform.expand_dims(x, ax + 1),
                                        const(np.zeros(zshape, dtype=dt))], ax + 1)
        x = transform.strided_slice(
            reshape_to(spread, sh[:ax] + [sh[ax] * s] + sh[ax + 1:]),
            [0], [(sh[ax] - 1) * s + 1], axes=[ax])
    width = [[0, 0], [0, 0]]
    crop = []
    for d in range(nd):
        reach = dil[d] * (k[d] - 1)
        lo, hi = reach - pads[d], reach - pads[d + nd] + opad[d]
        width.append([max(lo, 0), max(hi, 0)])
        crop.append((max(-lo, 0), max(-hi, 0)))
    x = nn.pad(x, width)
    if any(lo or hi for lo, hi in crop):
        sh = _shape(x)
        x = transform.strided_slice(x, [lo for lo, _ in crop],
                                    [sh[2 + d] - hi for d, (_, hi) in enumerate(crop)],
                                    axes=list(range(2, 2 + nd)))
    for d in range(nd):  # flip the kernel
        w = transform.take(w, const(np.arange(k[d] - 1, -1, -1, dtype=np.int64)), axis=2 + d)
    cin = xs[1] // g
    parts = [transform.strided_slice(w, [j * cin], [(j + 1) * cin], axes=[0]) for j in range(g)]
    perm = [1, 0] + list(range(2, 2 + nd))
    wt = transform.concatenate([transform.transpose(p, perm) for p in parts], 0)
    fn = {1: nn_nd.conv1d, 2: nn.conv2d, 3: nn_nd.conv3d}[nd]
    out = fn(x, wt, strides=[1] * nd, padding=[0] * (2 * nd), dilation=dil, groups=g,
             channels=ws[1] * g, kernel_size=k)
    if len(i) > 2 and i[2] is not None:
        out = nn.bias_add(out, i[2], axis=1)
    return out


def _conv_t_pads(c: _Ctx, a: dict, in_sp: list[int], k: list[int], strides: list[int],
                 dil: list[int], opad: list[int]) -> list[int]:
    """ConvTranspose pads; from output_shape or auto_pad SAME_* as the ONNX definition (a
    negative end pad becomes extra output_padding, updated in place)."""
    auto = a.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "VALID":
        return [0, 0, 0, 0]
    out_sp = list(a["output_shape"])[-2:] if "output_shape" in a else None
    if out_sp is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        out_sp = [d * s for d, s in zip(in_sp, strides)]
    if out_sp is None:
        if auto not in ("NOTSET", ""):
            raise c.fail(f"attribute auto_pad={auto!r} is not supported")
        return list(a.get("pads", [0, 0, 0, 0]))
    begin, end = [], []
    for j in range(2):
        total = (strides[j] * (in_sp[j] - 1) + opad[j] + (k[j] - 1) * dil[j] + 1
                 - int(out_sp[j]))
        lo, hi = (total // 2, total - total // 2) if auto == "SAME_UPPER" else \
            (total - total // 2, total // 2)
        if lo < 0:
            raise c.fail(f"output_shape {list(out_sp)} needs a negative leading pad")
        if hi < 0:
            opad[j] -= hi
            hi = 0
        begin.append(lo)
        end.append(hi)
    return begin + end


def _dilate_kernel(w: RelayExpr, dil: list[int]) -> RelayExpr:
    """(I, O, kh, kw) -> (I, O, (kh-1)*dh+1, (kw-1)*dw+1) with zeros between the taps."""
    for ax, d in ((2, dil[0]), (3, dil[1])):
        if d == 1:
            continue
        s = _shape(w)
        zshape = list(s)
        zshape.insert(ax + 1, d - 1)
        zshape[ax] = s[ax]
        spread = transform.concatenate(
            [transform.expand_dims(w, ax + 1), const(np.zeros(zshape, dtype=_dtype(w)))], ax + 1)
        merged = s[:ax] + [s[ax] * d] + s[ax + 1:]
        w = transform.strided_slice(reshape_to(spread, merged), [0],
                                    [(s[ax] - 1) * d + 1], axes=[ax])
    return w


@_reg("Gemm")
def _gemm(c, i, a, n):
    A, B = i[0], i[1]
    if a.get("transA", 0):
        A = transform.transpose(A, (1, 0))
    if not a.get("transB", 0):
        B = transform.transpose(B, (1, 0))
    out = nn.dense(A, B)
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    if alpha != 1.0:
        out = tensor.multiply(out, _scalar(alpha, out))
    if len(i) > 2 and i[2] is not None:
        C = i[2] if beta == 1.0 else tensor.multiply(i[2], _scalar(beta, i[2]))
        out = tensor.add(out, C)
    return out


@_reg("MatMul")
def _matmul(c, i, a, n):
    A, B = i
    sa, sb = _shape(A), _shape(B)
    if len(sa) == 1:
        A, sa = reshape_to(A, (1, sa[0])), [1, sa[0]]
        squeeze_a = True
    else:
        squeeze_a = False
    squeeze_b = len(sb) == 1
    if squeeze_b:
        B, sb = reshape_to(B, (sb[0], 1)), [sb[0], 1]
    M, K, N = sa[-2], sa[-1], sb[-1]
    if len(sb) == 2:
        a2 = reshape_to(A, (int(np.prod(sa[:-1])), K)) if len(sa) > 2 else A
        out = nn.dense(a2, transform.transpose(B, (1, 0)))
        batch = sa[:-2]
    else:
        batch = list(np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2])))
        nb = int(np.prod(batch)) if batch else 1
        a3 = A
        if sa[:-2] != batch:
            a3 = transform.broadcast_to(A, batch + [M, K])
        b3 = B
        if sb[:-2] != batch:
            b3 = transform.broadcast_to(B, batch + [K, N])
        a3 = reshape_to(a3, (nb, M, K))
        b3 = reshape_to(b3, (nb, K, N))
        out = nn.batch_matmul(a3, b3, transpose_b=False)
    shp = list(batch) + [M, N]
    if squeeze_a:
        shp.pop(-2)
    if squeeze_b:
        shp.pop(-1)
    return reshape_to(out, shp)


@_reg("BatchNormalization")
def _bn(c, i, a, n):
    if a.get("training_mode", 0):
        return _bn_training(c, i, a)
    return nn.batch_norm(*i[:5], axis=1, epsilon=a.get("epsilon", 1e-5))[0]


def _bn_training(c: _Ctx, i: list, a: dict) -> list:
    """training_mode=1: normalize with the batch statistics; also the updated running mean and
    (population) variance, ``running * momentum + batch * (1 - momentum)``."""
    x, scale, bias, mean, var = i[:5]
    r = len(_shape(x))
    axes = [k for k in range(r) if k != 1]
    bshape = [1, -1] + [1] * (r - 2)
    m = _red.mean(x, axis=axes, keepdims=True)
    v = _red.variance(x, m, axis=axes, keepdims=True)
    eps, mom = a.get("epsilon", 1e-5), a.get("momentum", 0.9)
    y = tensor.divide(tensor.subtract(x, m), tensor.sqrt(tensor.add(v, _scalar(eps, x))))
    y = tensor.add(tensor.multiply(y, reshape_to(scale, bshape)),
                   reshape_to(bias, bshape))
    mom_c, rest = _scalar(mom, x), _scalar(1 - mom, x)
    run_m = tensor.add(tensor.multiply(mean, mom_c),
                       tensor.multiply(reshape_to(m, [-1]), rest))
    run_v = tensor.add(tensor.multiply(var, mom_c),
                       tensor.multiply(reshape_to(v, [-1]), rest))
    return [y, run_m, run_v]


@_reg("LayerNormalization")
def _ln(c, i, a, n):
    x, g = i[0], i[1]
    b = i[2] if len(i) > 2 and i[2] is not None else None
    s = _shape(x)
    ax = a.get("axis", -1) % len(s)
    eps = a.get("epsilon", 1e-5)
    if b is None:
        b = const(np.zeros(_shape(g), dtype=_dtype(g)))
    if ax == len(s) - 1:
        y = nn.layer_norm(x, g, b, axis=-1, epsilon=eps)
    else:
        tail = int(np.prod(s[ax:]))
        x2 = reshape_to(x, s[:ax] + [tail])
        g2 = reshape_to(transform.broadcast_to(g, s[ax:]), (tail,))
        b2 = reshape_to(transform.broadcast_to(b, s[ax:]), (tail,))
        y = reshape_to(nn.layer_norm(x2, g2, b2, axis=-1, epsilon=eps), s)
    if len(c.node.output) == 1 or not any(c.node.output[1:]):
        return y
    axes = list(range(ax, len(s)))  # the optional Mean and InvStdDev outputs (keepdims)
    mean = _red.mean(x, axis=axes, keepdims=True)
    d = tensor.subtract(x, mean)
    var = _red.mean(tensor.multiply(d, d), axis=axes, keepdims=True)
    return [y, mean, tensor.rsqrt(tensor.add(var, _scalar(eps, x)))]


def _pool_args(c, x, a):
    xs = _shape(x)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise c.fail(f"only 1-D, 2-D and 3-D pooling is supported, got data shape {xs}")
    k = list(a["kernel_shape"])
    strides = list(a.get("strides", [1] * nd))
    dil = list(a.get("dilations", [1] * nd))
    pads = _conv_pads(c, a, xs[2:], k, strides, dil)
    return nd, dict(pool_size=k, strides=strides, dilation=dil, padding=pads,
                    ceil_mode=bool(a.get("ceil_mode", 0)))


@_reg("MaxPool")
def _maxpool(c, i, a, n):
    if len(c.node.output) > 1 and c.node.output[1]:
        from .onnx_misc import maxpool_with_indices

        return maxpool_with_indices(c, i[0], a)
    nd, kw = _pool_args(c, i[0], a)
    return {1: nn_nd.max_pool1d, 2: nn.max_pool2d, 3: nn_nd.max_pool3d}[nd](i[0], **kw)


@_reg("AveragePool")
def _avgpool(c, i, a, n):
    nd, kw = _pool_args(c, i[0], a)
    fn = {1: nn_nd.avg_pool1d, 2: nn.avg_pool2d, 3: nn_nd.avg_pool3d}[nd]
    return fn(i[0], count_include_pad=bool(a.get("count_include_pad", 0)), **kw)


def _global_pool(pool2d, reduce):
    """4-D data: the 2-D global pool (layout passes know it); 3-D and 5-D: a keepdims
    reduction over the spatial axes."""
    def f(c, i, a, n):
        x = i[0]
        rank = len(_shape(x))
        if rank == 4:
            return pool2d(x)
        if rank < 3:
            raise c.fail(f"needs data of rank >= 3 (N, C, spatial...), got shape {_shape(x)}")
        return reduce(x, axis=list(range(2, rank)), keepdims=True)
    return f


_reg("GlobalAveragePool")(_global_pool(nn.global_avg_pool2d, _red.mean))
_reg("GlobalMaxPool")(_global_pool(nn.global_max_pool2d, _red.max))


def _softmax(fn):
    def f(c, i, a, n):
        x = i[0]
        s = _shape(x)
        if c.opset >= 13:
            return fn(x, a.get("axis", -1))
        ax = a.get("axis", 1) % len(s)
        if ax == len(s) - 1:
            return fn(x, -1)
        flat = reshape_to(x, (int(np.prod(s[:ax])), int(np.prod(s[ax:]))))
        return reshape_to(fn(flat, -1), s)
    return f


_CONVERTERS["Softmax"] = _softmax(nn.softmax)
_CONVERTERS["LogSoftmax"] = _softmax(nn.log_softmax)


# ------------------------------------------------------------------------------------------------
# shapes and data movement
@_reg("Flatten")
def _flatten(c, i, a, n):
    s = _shape(i[0])
    ax = a.get("axis", 1)
    ax = ax + len(s) if ax < 0 else ax
    return reshape_to(i[0], (int(np.prod(s[:ax])), int(np.prod(s[ax:]))))


@_reg("Reshape")
def _reshape(c, i, a, n):
    s = _shape(i[0])
    tgt = [int(v) for v in c.value(n[1], "shape")]
    if not a.get("allowzero", 0):
        tgt = [s[k] if v == 0 else v for k, v in enumerate(tgt)]
    elif 0 in tgt:  # a literal 0 dimension: the data is empty (relay's 0 means "copy")
        if int(np.prod(s)) != 0 or -1 in tgt:
            raise c.fail(f"allowzero shape {tgt} for data of shape {s}")
        return const(np.zeros(tgt, dtype=_dtype(i[0])))
    if tgt.count(-1) == 1:
        known = int(np.prod([v for v in tgt if v != -1]))
        tgt[tgt.index(-1)] = int(np.prod(s)) // known if known else 0
    return reshape_to(i[0], tgt)


@_reg("Transpose")
def _transpose(c, i, a, n):
    perm = a.get("perm")
    return transform.transpose(i[0], None if perm is None else list(perm))


@_reg("Concat")
def _concat(c, i, a, n):
    return transform.concatenate([x for x in i if x is not None], a["axis"])


@_reg("Split")
def _split(c, i, a, n):
    x = i[0]
    s = _shape(x)
    ax = a.get("axis", 0) % len(s)
    if c.opset < 13 and "split" in a:
        sizes = list(a["split"])
    elif len(n) > 1 and n[1]:
        sizes = [int(v) for v in c.value(n[1], "split")]
    else:
        parts = a.get("num_outputs", len(c.node.output))
        step = -(-s[ax] // parts)
        sizes = [min(step, s[ax] - k * step) for k in range(parts)]
    idx = list(np.cumsum(sizes)[:-1])
    out = transform.split(x, [int(v) for v in idx], axis=ax)
    return [out[k] for k in range(len(sizes))]


@_reg("Slice")
def _slice(c, i, a, n):
    x = i[0]
    s = _shape(x)
    if c.opset < 10:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in c.value(n[1], "starts")]
        ends = [int(v) for v in c.value(n[2], "ends")]
        axes = ([int(v) for v in c.value(n[3], "axes")] if len(n) > 3 and n[3]
                else list(range(len(starts))))
        steps = ([int(v) for v in c.value(n[4], "steps")] if len(n) > 4 and n[4]
                 else [1] * len(starts))
    axes = [ax % len(s) for ax in axes]
    clamp = lambda v, d: max(-d - 1, min(d, v))  # noqa: E731  (keeps Python slice semantics)
    b = [clamp(v, s[ax]) for v, ax in zip(starts, axes)]
    e = [clamp(v, s[ax]) for v, ax in zip(ends, axes)]
    return transform.strided_slice(x, b, e, steps, axes)


@_reg("Gather")
def _gather(c, i, a, n):
    x, idx = i
    ax = a.get("axis", 0) % len(_shape(x))
    d = _shape(x)[ax]
    if n[1] in c.values:
        v = c.values[n[1]].astype(np.int64)
        idx = const(np.where(v < 0, v + d, v).astype("int64"))
    else:
        idx = tensor.where(tensor.less(idx, _scalar(0, idx)), tensor.add(idx, _scalar(d, idx)), idx)
    return transform.take(x, idx, axis=ax, mode="clip")


def _axes_arg(c, a, n, pos: int) -> list[int] | None:
    if c.opset < 13 or "axes" in a:
        return list(a["axes"]) if "axes" in a else None
    if len(n) > pos and n[pos]:
        return [int(v) for v in c.value(n[pos], "axes").reshape(-1)]  # (a scalar axis too)
    return None


@_reg("Squeeze")
def _squeeze(c, i, a, n):
    s = _shape(i[0])
    axes = _axes_arg(c, a, n, 1)
    axes = [k for k, d in enumerate(s) if d == 1] if axes is None else [x % len(s) for x in axes]
    return reshape_to(i[0], [d for k, d in enumerate(s) if k not in axes])


@_reg("Unsqueeze")
def _unsqueeze(c, i, a, n):
    s = _shape(i[0])
    axes = _axes_arg(c, a, n, 1)
    if axes is None:
        raise c.fail("axes are required")
    r = len(s) + len(axes)
    axes = sorted(x % r for x in axes)
    out = list(s)
    for x in axes:
        out.insert(x, 1)
    return reshape_to(i[0], out)


@_reg("Expand")
def _expand(c, i, a, n):
    tgt = [int(v) for v in c.value(n[1], "shape")]
    return transform.broadcast_to(i[0], list(np.broadcast_shapes(tuple(_shape(i[0])), tuple(tgt))))


@_reg("Tile")
def _tile(c, i, a, n):
    return transform.tile(i[0], [int(v) for v in c.value(n[1], "repeats")])


@_reg("Pad")
def _pad(c, i, a, n):
    x = i[0]
    r = len(_shape(x))
    mode = a.get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if c.opset < 11:
        pads, value, axes = list(a["pads"]), a.get("value", 0.0), list(range(r))
    else:
        pads = [int(v) for v in c.value(n[1], "pads")]
        value = float(c.value(n[2], "constant_value").reshape(-1)[0]) if len(n) > 2 and n[2] else 0.0
        axes = ([int(v) % r for v in c.value(n[3], "axes")] if len(n) > 3 and n[3]
                else list(range(r)))
    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise c.fail(f"attribute mode={mode!r} is not supported")
    if any(p < 0 for p in pads):
        raise c.fail(f"negative pads {pads} are not supported")
    k = len(axes)
    width = [[0, 0] for _ in range(r)]
    for j, ax in enumerate(axes):
        width[ax] = [pads[j], pads[j + k]]
    if mode != "constant":  # ONNX's (and onnxruntime's) limits, named at the node
        s = _shape(x)
        for ax, (lo, hi) in enumerate(width):
            if (lo or hi) and (s[ax] == 0 or (mode == "reflect" and max(lo, hi) >= s[ax])):
                raise c.fail(f"{mode} pads {width[ax]} do not fit axis {ax} of size {s[ax]}"
                             + (" (reflect pads must be smaller)" if s[ax] else ""))
    return nn.pad(x, width, pad_value=value, pad_mode=mode)


def _resize_any(c: _Ctx, x: RelayExpr, spec: ResizeSpec, axes: list[int],
                scales: Any, sizes: Any, policy: str = "stretch", roi: Any = None) -> RelayExpr:
    """relay's resize2d where it computes exactly this resize, else the separable form."""
    s = _shape(x)
    dt = _dtype(x)
    out, sc = output_size_and_scales(s, axes, scales, sizes, policy)
    fast = (len(s) == 4 and out[:2] == s[:2] and spec.mode in ("nearest", "linear")
            and spec.coord not in ("tf_crop_and_resize", "half_pixel_symmetric")
            and not spec.antialias
            and all(abs(o - d * f) <= 1e-5 * max(o, 1) for o, d, f in zip(out, s, sc)))
    if fast:
        return resize2d(x, out[2:], method="nearest_neighbor" if spec.mode == "nearest"
                        else "linear", coordinate_transformation_mode=spec.coord,
                        rounding_method=spec.nearest_mode if spec.mode == "nearest" else "")
    if spec.mode != "nearest" and not dt.startswith("float"):
        raise c.fail(f"{spec.mode} resize of {dt} data is not supported (float data only)")
    if any(o < 1 for o in out):
        raise c.fail(f"output shape {out} has an empty axis")
    return resize_separable(x, s, dt, spec, out, sc, roi)


@_reg("Resize")
def _resize(c, i, a, n):
    x = i[0]
    r = len(_shape(x))
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise c.fail(f"attribute mode={mode!r} is not supported (nearest, linear, cubic)")
    coord = a.get("coordinate_transformation_mode", "half_pixel")
    if coord == "tf_half_pixel_for_nn":
        raise c.fail("coordinate_transformation_mode='tf_half_pixel_for_nn' is not supported")
    spec = ResizeSpec(mode, coord, a.get("nearest_mode", "round_prefer_floor"),
                      float(a.get("cubic_coeff_a", -0.75)), bool(a.get("exclude_outside", 0)),
                      bool(a.get("antialias", 0)), float(a.get("extrapolation_value", 0.0)))
    if spec.antialias and mode == "nearest":
        raise c.fail("antialias=1 with mode='nearest' is not defined")
    axes = [int(v) % r for v in a.get("axes", range(r))]
    scales = sizes = None
    if c.opset < 11:
        scales = c.value(n[1], "scales")
    elif len(n) > 3 and n[3]:
        sizes = [int(v) for v in c.value(n[3], "sizes")]
    else:
        scales = [float(v) for v in c.value(n[2], "scales")]
    vals = sizes if sizes is not None else scales
    if len(vals) != len(axes):
        raise c.fail(f"{'sizes' if sizes is not None else 'scales'} {list(vals)} do not match "
                     f"axes {axes}")
    roi = None
    if coord == "tf_crop_and_resize":
        if not (c.opset >= 11 and len(n) > 1 and n[1]):
            raise c.fail("coordinate_transformation_mode='tf_crop_and_resize' needs roi")
        rv = [float(v) for v in c.value(n[1], "roi")]
        if len(rv) != 2 * len(axes):
            raise c.fail(f"roi {rv} does not match axes {axes}")
        roi = [0.0] * r + [1.0] * r
        for k, ax in enumerate(axes):
            roi[ax], roi[r + ax] = rv[k], rv[len(axes) + k]
    return _resize_any(c, x, spec, axes, scales, sizes,
                       a.get("keep_aspect_ratio_policy", "stretch"), roi)


@_reg("Selu")
def _selu(c, i, a, n):
    x = i[0]
    al, ga = a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)
    neg = tensor.multiply(_scalar(al, x), tensor.subtract(tensor.exp(x), _scalar(1, x)))
    return tensor.multiply(_scalar(ga, x), tensor.where(tensor.less(x, _scalar(0, x)), neg, x))


@_reg("Mod")
def _mod(c, i, a, n):
    x, y = i
    if a.get("fmod", 0):
        return tensor.mod(x, y)
    if not _dtype(x).startswith("float"):
        return tensor.floor_mod(x, y)
    # floats: the sign of the divisor, from the truncated remainder (as numpy and onnxruntime;
    # x - floor(x / y) * y would give nan for an infinite y)
    r = tensor.mod(x, y)
    zero = _scalar(0, x)
    fix = tensor.logical_and(tensor.not_equal(r, zero),
                             tensor.not_equal(tensor.less(r, zero), tensor.less(y, zero)))
    return tensor.where(fix, tensor.add(r, y), r)


@_reg("IsInf")
def _isinf(c, i, a, n):
    x = i[0]
    pos, neg = a.get("detect_positive", 1), a.get("detect_negative", 1)
    if pos and neg:
        return tensor.isinf(x)
    if not pos and not neg:
        return tensor.logical_and(tensor.isinf(x), tensor.logical_not(tensor.isinf(x)))
    return tensor.equal(x, _scalar(np.inf if pos else -np.inf, x))


@_reg("InstanceNormalization")
def _instnorm(c, i, a, n):
    return nn.instance_norm(i[0], i[1], i[2], axis=1, epsilon=a.get("epsilon", 1e-5))


@_reg("DepthToSpace")
def _d2s(c, i, a, n):
    _check_2d(c, i[0])
    return nn.depth_to_space(i[0], a["blocksize"], mode=a.get("mode", "DCR"))


@_reg("SpaceToDepth")
def _s2d(c, i, a, n):
    nn_, ch, h, w = _check_2d(c, i[0])
    b = a["blocksize"]
    if a.get("mode", "DCR") == "DCR":
        return nn.space_to_depth(i[0], b)
    if h % b or w % b:
        raise c.fail(f"height {h} and width {w} must be multiples of blocksize {b}")
    # CRD: output channel c * b * b + (row offset) * b + (column offset)
    x = reshape_to(i[0], [nn_, ch, h // b, b, w // b, b])
    x = transform.transpose(x, [0, 1, 3, 5, 2, 4])
    return reshape_to(x, [nn_, ch * b * b, h // b, w // b])


@_reg("CumSum")
def _cumsum(c, i, a, n):
    ax = int(c.value(n[1], "axis").reshape(-1)[0]) % len(_shape(i[0]))
    if not a.get("reverse", 0):
        return transform.cumsum(i[0], axis=ax, exclusive=bool(a.get("exclusive", 0)))
    out = transform.cumsum(transform.reverse(i[0], ax), axis=ax, exclusive=bool(a.get("exclusive", 0)))
    return transform.reverse(out, ax)


@_reg("Softsign")
def _softsign(c, i, a, n):
    return tensor.divide(i[0], tensor.add(tensor.abs(i[0]), _scalar(1, i[0])))


@_reg("ThresholdedRelu")
def _thr_relu(c, i, a, n):
    x = i[0]
    return tensor.where(tensor.greater(x, _scalar(a.get("alpha", 1.0), x)), x, _scalar(0, x))


@_reg("Shrink")
def _shrink(c, i, a, n):
    x = i[0]
    lam, bias = a.get("lambd", 0.5), a.get("bias", 0.0)
    hi = tensor.where(tensor.greater(x, _scalar(lam, x)), tensor.subtract(x, _scalar(bias, x)),
                      _scalar(0, x))
    return tensor.where(tensor.less(x, _scalar(-lam, x)), tensor.add(x, _scalar(bias, x)), hi)


def _wrap_index(idx: RelayExpr, dim: int) -> RelayExpr:
    if not _dtype(idx).startswith("int"):
        idx = transform.cast(idx, "int64")
    return tensor.where(tensor.less(idx, _scalar(0, idx)), tensor.add(idx, _scalar(dim, idx)), idx)


@_reg("GatherElements")
def _gather_el(c, i, a, n):
    s = _shape(i[0])
    ax = a.get("axis", 0) % len(s)
    return transform.gather(i[0], ax, _wrap_index(i[1], s[ax]))


@_reg("GatherND")
def _gather_nd(c, i, a, n):
    x, idx = i
    bd = a.get("batch_dims", 0)
    ish = _shape(idx)
    m = ish[-1]
    s = _shape(x)
    dims = const(np.asarray(s[bd:bd + m], dtype=_dtype(idx)))
    idx = tensor.where(tensor.less(idx, _scalar(0, idx)), tensor.add(idx, dims), idx)
    if bd:  # prepend each position's batch coordinates: a plain gather_nd
        grids = np.meshgrid(*[np.arange(d) for d in ish[:-1]], indexing="ij")[:bd]
        coords = const(np.stack(grids, -1).astype(_dtype(idx)))
        idx = transform.concatenate([coords, idx], len(ish) - 1)
        bd = 0
    perm = [len(ish) - 1] + list(range(len(ish) - 1))
    return transform.gather_nd(x, transform.transpose(idx, perm), batch_dims=bd)


@_reg("OneHot")
def _one_hot(c, i, a, n):
    depth = int(c.value(n[1], "depth").reshape(-1)[0])
    vals = c.value(n[2], "values")
    idx = _wrap_index(i[0], depth)
    r = len(_shape(idx))
    axis = a.get("axis", -1) % (r + 1)
    # an index equal to no position (out of range) gives all off_value, as ONNX
    pos = const(np.arange(depth, dtype=_dtype(idx)).reshape([depth] + [1] * (r - axis)))
    hot = tensor.equal(transform.expand_dims(idx, axis), pos)
    return tensor.where(hot, const(vals[1]), const(vals[0]))


@_reg("Trilu")
def _trilu(c, i, a, n):
    x = i[0]
    s = _shape(x)
    k = int(c.value(n[1], "k").reshape(-1)[0]) if len(n) > 1 and n[1] else 0
    ones = np.ones(s[-2:], dtype=bool)
    mask = np.triu(ones, k) if a.get("upper", 1) else np.tril(ones, k)
    return tensor.where(const(mask), x, _scalar(0, x))


@_reg("Upsample")
def _upsample(c, i, a, n):
    x = i[0]
    r = len(_shape(x))
    scales = [float(v) for v in (a["scales"] if "scales" in a else c.value(n[1], "scales"))]
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise c.fail(f"attribute mode={mode!r} is not supported (nearest, linear)")
    if len(scales) != r:
        raise c.fail(f"scales {scales} do not match the rank {r} of the data")
    spec = ResizeSpec("nearest" if mode == "nearest" else "linear", "asymmetric", "floor")
    return _resize_any(c, x, spec, list(range(r)), scales, None)


@_reg("LRN")
def _lrn(c, i, a, n):
    x = i[0]
    s = _shape(x)
    size = a["size"]
    alpha, beta, bias = a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("bias", 1.0)
    if 0 in s:  # an empty input: an empty output (the channel window would pool nothing)
        return const(np.zeros(s, dtype=_dtype(x)))
    sq = reshape_to(tensor.multiply(x, x), (s[0], 1, s[1], int(np.prod(s[2:]))))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    win = nn.avg_pool2d(sq, (size, 1), padding=(lo, 0, hi, 0), count_include_pad=True)
    div = tensor.add(_scalar(bias, x), tensor.multiply(reshape_to(win, s), _scalar(alpha, x)))
    return tensor.divide(x, tensor.power(div, _scalar(beta, x)))


@_reg("LpNormalization")
def _lpnorm(c, i, a, n):
    x = i[0]
    ax, p = a.get("axis", -1), a.get("p", 2)
    if p == 1:
        norm = _red.sum(tensor.abs(x), axis=[ax], keepdims=True)
    elif p == 2:
        norm = tensor.sqrt(_red.sum(tensor.multiply(x, x), axis=[ax], keepdims=True))
    else:
        raise c.fail(f"attribute p={p} is not supported (1 or 2)")
    zero = _scalar(0, x)  # a zero vector stays zero (onnx's definition), not nan
    safe = tensor.where(tensor.equal(norm, zero), _scalar(1, x), norm)
    return tensor.divide(x, safe)


@_reg("MeanVarianceNormalization")
def _mvn(c, i, a, n):
    x = i[0]
    axes = list(a.get("axes", [0, 2, 3]))
    d = tensor.subtract(x, _red.mean(x, axis=axes, keepdims=True))
    var = _red.mean(tensor.multiply(d, d), axis=axes, keepdims=True)
    return tensor.divide(d, tensor.sqrt(tensor.add(var, _scalar(1e-9, x))))


@_reg("CastLike")
def _cast_like(c, i, a, n):
    return transform.cast(i[0], _dtype(i[1]))


@_reg("BitShift")
def _bitshift(c, i, a, n):
    fn = tensor.right_shift if a["direction"] == "RIGHT" else tensor.left_shift
    return fn(i[0], i[1])


@_reg("Swish")
def _swish(c, i, a, n):
    x = i[0]
    return tensor.multiply(x, tensor.sigmoid(tensor.multiply(x, _scalar(a.get("alpha", 1.0), x))))


@_reg("RMSNormalization")
def _rms_norm(c, i, a, n):
    x, scale = i[0], i[1]
    r = len(_shape(x))
    axes = list(range(a.get("axis", -1) % r, r))
    eps = a.get("epsilon", 1e-5)
    ms = _red.mean(tensor.multiply(x, x), axis=axes, keepdims=True)
    return tensor.multiply(tensor.multiply(x, tensor.rsqrt(tensor.add(ms, _scalar(eps, x)))), scale)


def _hardmax_axis(x: RelayExpr, ax: int) -> RelayExpr:
    s = _shape(x)
    idx = _red.argmax(x, axis=[ax], keepdims=False)
    return transform.one_hot(idx, _scalar(1, x), _scalar(0, x), s[ax], ax, _dtype(x))


@_reg("Hardmax")
def _hardmax(c, i, a, n):
    x = i[0]
    s = _shape(x)
    if 0 in s:  # an empty input: an empty output (its arg-max over an empty axis is undefined)
        return const(np.zeros(s, dtype=_dtype(x)))
    if c.opset >= 13:
        return _hardmax_axis(x, a.get("axis", -1) % len(s))
    ax = a.get("axis", 1) % len(s)  # before opset 13: over the input flattened to 2-D at axis
    flat = reshape_to(x, (int(np.prod(s[:ax])), int(np.prod(s[ax:]))))
    return reshape_to(_hardmax_axis(flat, 1), s)


@_reg("LpPool")
def _lppool(c, i, a, n):
    x = i[0]
    p = a.get("p", 2)
    nd, kw = _pool_args(c, x, a)
    fn = {1: nn_nd.avg_pool1d, 2: nn.avg_pool2d, 3: nn_nd.avg_pool3d}[nd]
    xp = tensor.power(tensor.abs(x), _scalar(p, x))
    mean = fn(xp, count_include_pad=True, **kw)
    total = tensor.multiply(mean, _scalar(int(np.prod(kw["pool_size"])), x))
    return tensor.power(total, _scalar(1.0 / p, x))


@_reg("GlobalLpPool")
def _global_lppool(c, i, a, n):
    x = i[0]
    p = a.get("p", 2)
    axes = list(range(2, len(_shape(x))))
    total = _red.sum(tensor.power(tensor.abs(x), _scalar(p, x)), axis=axes, keepdims=True)
    return tensor.power(total, _scalar(1.0 / p, x))


@_reg("Celu")
def _celu(c, i, a, n):
    x = i[0]
    al = a.get("alpha", 1.0)
    neg = tensor.multiply(_scalar(al, x), tensor.subtract(
        tensor.exp(tensor.divide(x, _scalar(al, x))), _scalar(1, x)))
    return tensor.add(nn.relu(x), tensor.minimum(_scalar(0, x), neg))


@_reg("EyeLike")
def _eye_like(c, i, a, n):
    s = _shape(i[0])
    dt = _np_dtype(a["dtype"]) if "dtype" in a else _dtype(i[0])
    return const(np.eye(s[0], s[1], a.get("k", 0), dtype=dt))


@_reg("Einsum")
def _einsum(c, i, a, n):
    """One or two operands ('...' and repeated letters, i.e. diagonals, included): sums, a
    transpose and one batch_matmul."""
    eq = a["equation"].replace(" ", "")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(i) or len(terms) > 2:
        raise c.fail(f"equation {eq!r}: one or two operands are supported")
    # '...': fresh capital letters for the broadcast axes, aligned on the right
    spare = [ch for ch in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if ch not in eq]
    n_ell = max((len(_shape(x)) - len(t) + 3 for t, x in zip(terms, i) if "..." in t), default=0)
    ell = "".join(spare[:n_ell][::-1])
    terms = [t.replace("...", ell[n_ell - (len(_shape(x)) - len(t) + 3):]) if "..." in t else t
             for t, x in zip(terms, i)]
    if "->" not in eq:  # implicit output: '...' axes, then the letters used once, sorted
        letters = "".join(terms)
        out = ell + "".join(sorted(ch for ch in set(letters)
                                   if letters.count(ch) == 1 and ch not in ell))
    out = out.replace("...", ell)
    xs = list(i)
    for k, t in enumerate(terms):  # a repeated letter: the diagonal (eye mask, summed)
        while len(set(t)) != len(t):
            ch = next(ch for ch in t if t.count(ch) > 1)
            p, q = t.index(ch), t.index(ch, t.index(ch) + 1)
            sh = _shape(xs[k])
            eye = np.eye(sh[p], dtype=_dtype(xs[k])).reshape(
                [sh[p] if ax == p else sh[q] if ax == q else 1 for ax in range(len(sh))])
            xs[k] = _red.sum(tensor.multiply(xs[k], const(eye)), axis=[q])
            t = t[:q] + t[q + 1:]
        terms[k] = t
    dims: dict[str, int] = {}
    for t, x in zip(terms, xs):
        for ch, d in zip(t, _shape(x)):
            if dims.setdefault(ch, d) != d:
                raise c.fail(f"equation {eq!r}: axis {ch!r} has sizes {dims[ch]} and {d} "
                             "(broadcasting a size-1 axis is not supported)")
    for k, t in enumerate(terms):  # letters only in this operand and not in the output: sum
        others = "".join(terms[:k] + terms[k + 1:]) + out
        gone = [j for j, ch in enumerate(t) if ch not in others]
        if gone:
            xs[k] = _red.sum(xs[k], axis=gone)
            terms[k] = "".join(ch for ch in t if ch in others)
    if len(terms) == 1:
        return transform.transpose(xs[0], [terms[0].index(ch) for ch in out])
    ta, tb = terms
    batch = [ch for ch in out if ch in ta and ch in tb]
    contract = [ch for ch in ta if ch in tb and ch not in out]
    fa = [ch for ch in ta if ch not in tb]
    fb = [ch for ch in tb if ch not in ta]
    size = lambda chs: int(np.prod([dims[ch] for ch in chs])) if chs else 1  # noqa: E731
    A = transform.transpose(xs[0], [ta.index(ch) for ch in batch + fa + contract])
    B = transform.transpose(xs[1], [tb.index(ch) for ch in batch + contract + fb])
    A = reshape_to(A, (size(batch), size(fa), size(contract)))
    B = reshape_to(B, (size(batch), size(contract), size(fb)))
    y = nn.batch_matmul(A, B, transpose_b=False)
    order = batch + fa + fb
    y = reshape_to(y, [dims[ch] for ch in order])
    return transform.transpose(y, [order.index(ch) for ch in out])


# ------------------------------------------------------------------------------------------------
# reductions
def _reduce(fn):
    def f(c, i, a, n):
        x = i[0]
        r = len(_shape(x))
        axes = a.get("axes")
        if axes is None and len(n) > 1 and n[1]:
            axes = [int(v) for v in c.value(n[1], "axes")]
        if axes is not None and len(axes) == 0:
            axes = None
        if axes is None and a.get("noop_with_empty_axes", 0):
            return x
        axes = None if axes is None else [int(v) % r for v in axes]
        keep = bool(a.get("keepdims", 1))
        s = _shape(x)
        if any(s[ax] == 0 for ax in (axes if axes is not None else range(r))):
            return _reduce_empty(c, x, s, axes, keep)
        if 0 in s:  # an empty kept axis: an empty result (nothing to compile)
            red = list(range(r)) if axes is None else axes
            out = [1 if k in red else d for k, d in enumerate(s)] if keep else \
                [d for k, d in enumerate(s) if k not in red]
            return const(np.zeros(out, dtype=_dtype(x)))
        return fn(x, axis=axes, keepdims=keep)
    return f


def _reduce_empty(c: _Ctx, x: RelayExpr, s: list[int], axes: list[int] | None,
                  keep: bool) -> RelayExpr:
    """A reduction over an empty axis is its identity element (ONNX: -inf for max, ...)."""
    dt = np.dtype(_dtype(x))
    axes = list(range(len(s))) if axes is None else axes
    out = [1 if k in axes else d for k, d in enumerate(s)] if keep else \
        [d for k, d in enumerate(s) if k not in axes]
    op = c.node.op_type
    if dt == np.bool_:
        ident = {"ReduceMax": False, "ReduceMin": True}.get(op)
    elif dt.kind == "f":
        ident = {"ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceProd": 1.0,
                 "ReduceLogSum": -np.inf, "ReduceLogSumExp": -np.inf}.get(op, 0.0)
        # ReduceMean of nothing: 0, as onnxruntime (numpy would give 0 / 0 = NaN)
    else:
        info = np.iinfo(dt)
        ident = {"ReduceMax": info.min, "ReduceMin": info.max, "ReduceProd": 1}.get(op, 0)
    if ident is None or (op == "ReduceMean" and dt.kind != "f"):
        raise c.fail(f"{op} over an empty axis of {dt} data has no value")
    return const(np.full(out, ident, dtype=dt))


for _n, _f in [("ReduceMean", _red.mean), ("ReduceSum", _red.sum), ("ReduceMax", _red.max),
               ("ReduceMin", _red.min), ("ReduceProd", _red.prod)]:
    _CONVERTERS[_n] = _reduce(_f)


def _sum_square(x, axis=None, keepdims=False):
    return _red.sum(tensor.multiply(x, x), axis=axis, keepdims=keepdims)


def _l2(x, axis=None, keepdims=False):
    return tensor.sqrt(_sum_square(x, axis, keepdims))


def _l1(x, axis=None, keepdims=False):
    return _red.sum(tensor.abs(x), axis=axis, keepdims=keepdims)


def _log_sum(x, axis=None, keepdims=False):
    return tensor.log(_red.sum(x, axis=axis, keepdims=keepdims))


def _log_sum_exp(x, axis=None, keepdims=False):
    m = _red.max(x, axis=axis, keepdims=True)
    s = _red.sum(tensor.exp(tensor.subtract(x, m)), axis=axis, keepdims=keepdims)
    m2 = m if keepdims else _red.max(x, axis=axis, keepdims=False)
    return tensor.add(tensor.log(s), m2)


for _n, _f in [("ReduceSumSquare", _sum_square), ("ReduceL2", _l2), ("ReduceL1", _l1),
               ("ReduceLogSum", _log_sum), ("ReduceLogSumExp", _log_sum_exp)]:
    _CONVERTERS[_n] = _reduce(_f)


def _arg(fn):
    def f(c, i, a, n):
        x = i[0]
        ax = a.get("axis", 0) % len(_shape(x))
        keep = bool(a.get("keepdims", 1))
        if not a.get("select_last_index", 0):
            return transform.cast(fn(x, axis=[ax], keepdims=keep), "int64")
        last = _shape(x)[ax] - 1
        idx = transform.cast(fn(transform.reverse(x, ax), axis=[ax], keepdims=keep), "int64")
        return tensor.subtract(const(np.int64(last)), idx)
    return f


_CONVERTERS["ArgMax"] = _arg(_red.argmax)
_CONVERTERS["ArgMin"] = _arg(_red.argmin)


# converters in their own modules (they import this one's helpers when called)
def _register_modules() -> None:
    from . import onnx_control, onnx_index, onnx_misc, onnx_quant, onnx_rnn, onnx_signal

    for m in (onnx_quant, onnx_index, onnx_rnn, onnx_signal, onnx_misc, onnx_control):
        _CONVERTERS.update(m.CONVERTERS)


_register_modules()


def _f32_accumulate(conv: Conv) -> Conv:
    """float16 operands computed in float32 and rounded once (as numpy and onnxruntime
    accumulate half-precision products and sums in float32)."""
    def f(c, i, a, n):
        if not any(x is not None and _dtype(x) == "float16" for x in i):
            return conv(c, i, a, n)
        up = [transform.cast(x, "float32") if x is not None and _dtype(x) == "float16" else x
              for x in i]
        out = conv(c, up, a, n)
        outs = out if isinstance(out, list) else [out]
        back = [transform.cast(o, "float16") if _dtype(o) == "float32" else o for o in outs]
        return back if isinstance(out, list) else back[0]
    return f


for _n in ("MatMul", "Gemm", "Conv", "ConvTranspose", "Softmax", "LogSoftmax"):
    _CONVERTERS[_n] = _f32_accumulate(_CONVERTERS[_n])


# ------------------------------------------------------------------------------------------------
# constants (their outputs are known values: handled in the driver)
_VALUE_OPS = {"Constant", "Shape", "ConstantOfShape", "Size", "Range"}


def _value_op(c: _Ctx, node: Any, a: dict, names: list[str]) -> np.ndarray:
    from onnx import numpy_helper

    if node.op_type == "Constant":
        for key, conv in (("value", None), ("value_float", np.float32), ("value_int", np.int64),
                          ("value_floats", np.float32), ("value_ints", np.int64)):
            if key in a:
                v = a[key]
                return numpy_helper.to_array(v) if conv is None else np.asarray(v, dtype=conv)
        raise c.fail(f"attributes {sorted(a)} are not supported")
    if node.op_type == "ConstantOfShape":
        shp = [int(v) for v in c.value(names[0], "input")]
        v = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
        return np.full(shp, v.reshape(-1)[0], dtype=v.dtype)
    if node.op_type == "Range":
        st, lim, dl = (c.value(nm, w) for nm, w in zip(names, ("start", "limit", "delta")))
        first = [np.asarray(v).reshape(-1)[0] for v in (st, lim, dl)]  # (1-element tensors too)
        return np.arange(*first).astype(st.dtype)
    s = np.asarray(_shape(c.exprs[names[0]]), dtype=np.int64)
    if node.op_type == "Size":
        return np.asarray(int(np.prod(s)), dtype=np.int64)
    return s[a.get("start", 0):a.get("end", len(s))]


# ------------------------------------------------------------------------------------------------
# attribute values no converter handles: (op, attribute) -> the values that are supported
_SUPPORTED_VALUES: dict[tuple[str, str], tuple] = {
    ("Resize", "keep_aspect_ratio_policy"): ("stretch", "not_larger", "not_smaller"),
    ("LayerNormalization", "stash_type"): (1,),
    ("Gelu", "approximate"): ("none", "tanh"), ("DepthToSpace", "mode"): ("DCR", "CRD"),
    ("Cast", "saturate"): (1,),
}


def _check_attr_values(ctx: _Ctx, a: dict) -> None:
    for key, v in a.items():
        ok = _SUPPORTED_VALUES.get((ctx.node.op_type, key))
        if ok is not None and v not in ok:
            raise ctx.fail(f"attribute {key}={v!r} is not supported (supported: {list(ok)})")


# ------------------------------------------------------------------------------------------------
# driver
def _attrs(node: Any) -> dict:
    from onnx import helper

    out = {}
    for at in node.attribute:
        v = helper.get_attribute_value(at)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[at.name] = v
    return out


def supported_ops() -> list[str]:
    """The ONNX operator types (default domain) this importer converts."""
    return sorted(set(_CONVERTERS) | _VALUE_OPS)


def _input_shape(vi: Any, shape: Mapping[str, Any] | None) -> list[int]:
    if shape and vi.name in shape:
        return [int(d) for d in shape[vi.name]]
    dims = []
    for d in vi.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            raise ValueError(f"from_onnx: input {vi.name!r} has a symbolic dimension "
                             f"{d.dim_param!r}: give its shape in shape={{...}}")
    return dims


def from_onnx(model: Any, shape: Mapping[str, Any] | None = None, dtype: Any = "float32",
              opset: int | None = None, freeze_params: bool = True
              ) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Convert an ONNX ModelProto to a relay IRModule and its parameters (TVM's from_onnx)."""
    from onnx import numpy_helper

    graph = model.graph
    if opset is None:
        opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                    default=13)
    missing: dict[str, list[str]] = {}
    _find_unsupported(graph.node, opset, missing)
    if missing:
        raise unsupported_error("from_onnx", missing)

    graph_inputs = {vi.name for vi in graph.input}
    unknown = sorted(set(shape or {}) - graph_inputs)
    if unknown:
        raise ValueError(f"from_onnx: shape given for {unknown}, which are not graph inputs "
                         f"(inputs: {sorted(graph_inputs)})")
    ctx = _Ctx(opset, freeze_params)
    params: dict[str, np.ndarray] = {}
    inputs = []
    init_names = set()
    for init in graph.initializer:
        arr = numpy_helper.to_array(init)
        init_names.add(init.name)
        ctx.values[init.name] = arr
        if freeze_params:
            ctx.exprs[init.name] = const(arr)
        else:
            v = var(init.name, shape=arr.shape, dtype=str(arr.dtype))
            ctx.exprs[init.name] = v
            params[init.name] = arr
    for vi in graph.input:
        if vi.name in init_names:
            continue
        dt = dtype.get(vi.name, "float32") if isinstance(dtype, Mapping) else dtype
        elem = vi.type.tensor_type.elem_type
        if elem and not (isinstance(dtype, Mapping) and vi.name in dtype):
            dt = _np_dtype(elem)
        v = var(vi.name, shape=_input_shape(vi, shape), dtype=dt)
        ctx.exprs[vi.name] = v
        inputs.append(v)
    if not freeze_params:
        inputs += [ctx.exprs[n] for n in params]

    _convert_nodes(ctx, list(graph.node), opset)

    outs = [ctx.exprs[o.name] for o in graph.output]
    body = outs[0] if len(outs) == 1 else Tuple(outs)
    func = Function(inputs, body)
    mod = IRModule.from_expr(func)
    from ..transform import InferType

    mod = InferType()(mod)
    return mod, params


def _has_converter(node: Any) -> bool:
    return node.domain in ("", "ai.onnx") and (
        node.op_type in _CONVERTERS or node.op_type in _VALUE_OPS)


def _find_unsupported(nodes: Any, opset: int, missing: dict[str, list[str]],
                      where: str = "") -> None:
    """Collect unsupported operator types: no converter and no ONNX function body (the
    bodies of plain functions are checked too; context-dependent ones when expanded)."""
    from onnx import AttributeProto, FunctionProto

    for k, node in enumerate(nodes):
        for at in node.attribute:  # If/Scan bodies
            if at.type == AttributeProto.GRAPH:
                _find_unsupported(at.g.node, opset, missing,
                                  f"{where}{node.name or node.op_type}.{at.name} > ")
        if _has_converter(node):
            continue
        version, ctx_dep = function_versions(node, opset)
        if version is None:
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            missing.setdefault(key, []).append(where + (node.name or f"#{k} (unnamed)"))
        elif not ctx_dep:
            from .onnx_functions import _schema

            fn = FunctionProto()
            fn.ParseFromString(_schema(node, opset).get_function_with_opset_version(version))
            body_opset = next((o.version for o in fn.opset_import
                               if o.domain in ("", "ai.onnx")), opset)
            _find_unsupported(fn.node, body_opset, missing,
                              f"{where}{node.name or node.op_type} (function body) > ")


def _type_proto(e: RelayExpr) -> Any:
    from onnx import helper

    t = infer_type(e).checked_type
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(str(t.dtype)))
    return helper.make_tensor_type_proto(elem, [int(d) for d in t.shape])


def _outer_sources(body: list, tensors: tuple[str, ...]) -> list[str]:
    """The tensors outside a function body that body tensors ``tensors`` are computed from."""
    producer = {o: nd for nd in _flatten(body) for o in nd.output if o}
    out, todo, seen = [], list(tensors), set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        if t in producer:
            todo.extend(_reads(producer[t]))
        else:
            out.append(t)
    return sorted(out)


def _flatten(nodes: list) -> list:
    """Nodes and, recursively, the nodes of their subgraphs."""
    out = []
    for nd in nodes:
        out.append(nd)
        for at in nd.attribute:
            if at.HasField("g"):
                out += _flatten(list(at.g.node))
    return out


def _reads(node: Any) -> list[str]:
    """The tensors a node reads: its inputs and, for If/Scan, what its subgraphs read."""
    names = [nm for nm in node.input if nm]
    for at in node.attribute:
        if at.HasField("g"):
            for sub in at.g.node:
                names += _reads(sub)
    return names


def _convert_nodes(ctx: _Ctx, nodes: list, opset: int) -> None:
    for k, node in enumerate(nodes):
        ctx.opset = opset
        ctx.node = node
        names = list(node.input)
        for nm in names:
            if nm and nm not in ctx.exprs:
                raise ctx.fail(f"input {nm!r} is not produced by any earlier node or graph input")
        if not _has_converter(node):
            types = [_type_proto(ctx.exprs[nm]) if nm else None for nm in names]
            if any(t is None for t in types):
                from onnx import TypeProto

                types = [t if t is not None else TypeProto() for t in types]
            ctx.expansions += 1
            prefix = f"{node.name or node.op_type}__fn{ctx.expansions}__"
            expanded = expand_function(node, opset, types, prefix)
            if expanded is None:
                raise unsupported_error("from_onnx", {node.op_type: [node.name or f"#{k}"]})
            body, body_opset = expanded
            missing: dict[str, list[str]] = {}
            _find_unsupported(body, body_opset, missing, f"{node.name or node.op_type} > ")
            if missing:
                raise unsupported_error("from_onnx", missing)
            try:
                _convert_nodes(ctx, body, body_opset)
            except OnnxConstantInputError as e:
                raise OnnxConstantInputError(str(e), *_outer_sources(body, e.tensors)) from None
            continue
        a = _attrs(node)
        if node.op_type in _VALUE_OPS:
            val = _value_op(ctx, node, a, names)
            ctx.values[node.output[0]] = val
            ctx.exprs[node.output[0]] = const(val)
            continue
        _check_attr_values(ctx, a)
        ins = [ctx.exprs[nm] if nm else None for nm in names]
        try:
            out = _CONVERTERS[node.op_type](ctx, ins, a, names)
        except (OnnxConvertError, KeyError) as e:
            if isinstance(e, KeyError):
                raise ctx.fail(f"missing required attribute {e}") from None
            raise
        outs = out if isinstance(out, list) else [out]
        outputs = [o for o in node.output]
        for k, o in enumerate(outputs):
            if not o:
                continue
            if k >= len(outs):
                raise ctx.fail(f"output {k} ({o!r}) is not supported")
            ctx.exprs[o] = outs[k]
            if isinstance(outs[k], Constant) and outs[k].data.numpy().size <= 4096:
                ctx.values[o] = outs[k].data.numpy()  # (e.g. an If branch's folded outputs)
        _fold(ctx, node, names, outputs, outs)


def _fold(ctx: _Ctx, node: Any, names: list[str], outputs: list[str], outs: list) -> None:
    """Evaluate a node whose inputs are all known shape-like values (small integer tensors or
    values computed from Constant/Shape), so later shape inputs fold to attributes."""
    if any(at.g.node for at in node.attribute if at.HasField("g")):
        return  # If/Scan read outer tensors implicitly: the inputs do not say what is known
    known = [nm for nm in (names[:1] if node.op_type == "CastLike" else names) if nm]
    if not known or any(nm not in ctx.values for nm in known):
        return
    if any(ctx.values[nm].size > 4096 or not isinstance(ctx.exprs[nm], Constant)
           for nm in known):
        return
    from ..interpreter import evaluate

    for o, e in zip(outputs, outs):
        if not o:
            continue
        val = evaluate(Function([], e))
        val = np.asarray(val.numpy() if hasattr(val, "numpy") else val)
        ctx.values[o] = val
        ctx.exprs[o] = const(val)
