"""ATen operator converters for the PyTorch frontend (``from_pytorch``).

Each converter takes the conversion context, the fx node and its arguments bound by the op's
schema (a dict name -> value, defaults filled in, fx nodes already replaced by relay
expressions, or by lists of them for multi-output nodes) and returns a relay expression or a
list of them (multi-output ops, read back with ``operator.getitem``). Converters are keyed by the
full overload name (``"aten.add.Tensor"``): an overload not listed here is reported as
unsupported, never converted by a guess. Shapes and dtypes come from the nodes' ``meta["val"]``
(the fake tensors torch.export records), so views and broadcasts need no shape inference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..expr import RelayExpr, const
from ..op import extra, nn, nn_nd, tensor, transform
from ..op import reduce as _red
from ..op.image import resize2d

__all__ = ["CONVERTERS", "IDENTITY_OPS", "PyTorchConvertError", "np_dtype"]


class PyTorchConvertError(ValueError):
    """An argument value a converter does not support (names the node and the op)."""


def np_dtype(tdt: Any) -> str:
    """numpy dtype name of a torch dtype (``torch.float32`` -> ``"float32"``)."""
    name = str(tdt).replace("torch.", "")
    if name not in ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8",
                    "bool"):
        raise PyTorchConvertError(f"dtype {tdt} is not supported")
    return name


Conv = Callable[[Any, Any, dict], Any]
CONVERTERS: dict[str, Conv] = {}
# ops that return their (first) input unchanged at inference
IDENTITY_OPS = {"aten.clone.default", "aten.contiguous.default", "aten.alias.default",
                "aten.detach.default", "aten.lift_fresh_copy.default", "aten.dropout.default",
                "aten.feature_dropout.default", "aten.alpha_dropout.default",
                "aten.native_dropout.default"}


def _reg(*names: str):
    def deco(f: Conv) -> Conv:
        for n in names:
            CONVERTERS[n] = f
        return f
    return deco


# ------------------------------------------------------------------------------------------------
# helpers on node metadata
def _val(n: Any) -> Any:
    return n.meta["val"]


def _val0(n: Any) -> Any:
    """The fake tensor of a node's (first) output."""
    v = n.meta["val"]
    return v[0] if isinstance(v, (list, tuple)) else v


def out_shape(node: Any) -> list[int]:
    return [int(d) for d in _val0(node).shape]


def out_dtype(node: Any) -> str:
    return np_dtype(_val0(node).dtype)


def _arg_node(node: Any, k: int) -> Any:
    return node.args[k] if k < len(node.args) else None


def _in_meta(node: Any, name: str) -> Any:
    """The fake tensor of a node's tensor argument ``name`` (positional or keyword)."""
    schema = node.target._schema
    for k, arg in enumerate(schema.arguments):
        if arg.name == name:
            src = node.args[k] if k < len(node.args) else node.kwargs.get(name)
            return src.meta["val"] if hasattr(src, "meta") else src
    raise KeyError(name)


def _shape_of(node: Any, name: str = "self") -> list[int]:
    return [int(d) for d in _in_meta(node, name).shape]


def _dtype_of(node: Any, name: str = "self") -> str:
    return np_dtype(_in_meta(node, name).dtype)


def _scalar(v: Any, dtype: str) -> RelayExpr:
    return const(np.asarray(v, dtype=dtype))


def _cast(x: RelayExpr, frm: str, to: str) -> RelayExpr:
    return x if frm == to else transform.cast(x, to)


def _norm(ax: int, rank: int) -> int:
    return ax + rank if ax < 0 else ax


def _fail(node: Any, msg: str) -> PyTorchConvertError:
    return PyTorchConvertError(f"{node.target} node {node.name!r}: {msg}")


# ------------------------------------------------------------------------------------------------
# elementwise
def _unary(names: tuple[str, ...], fn: Callable[[RelayExpr], RelayExpr]) -> None:
    CONVERTERS.update({n: (lambda c, node, a: fn(a["self"])) for n in names})


for _names, _fn in [
        (("aten.relu.default",), nn.relu), (("aten.sigmoid.default",), tensor.sigmoid),
        (("aten.tanh.default",), tensor.tanh), (("aten.exp.default",), tensor.exp),
        (("aten.log.default",), tensor.log), (("aten.sqrt.default",), tensor.sqrt),
        (("aten.rsqrt.default",), tensor.rsqrt), (("aten.abs.default",), tensor.abs),
        (("aten.neg.default",), tensor.negative), (("aten.erf.default",), tensor.erf),
        (("aten.floor.default",), tensor.floor), (("aten.ceil.default",), tensor.ceil),
        (("aten.sin.default",), tensor.sin), (("aten.cos.default",), tensor.cos),
        (("aten.sign.default",), tensor.sign), (("aten.trunc.default",), tensor.trunc),
        (("aten.logical_not.default",), tensor.logical_not)]:
    _unary(_names, _fn)


def _float_in(c, node, a, name="self") -> tuple[RelayExpr, str]:
    """The input cast to the node's (floating) output dtype, as torch's int -> float ops do."""
    dt = out_dtype(node)
    return _cast(a[name], _dtype_of(node, name), dt), dt


@_reg("aten.reciprocal.default")
def _recip(c, node, a):
    x, dt = _float_in(c, node, a)
    return tensor.divide(_scalar(1, dt), x)


@_reg("aten.log1p.default")
def _log1p(c, node, a):
    x, dt = _float_in(c, node, a)
    return tensor.log(tensor.add(x, _scalar(1, dt)))


@_reg("aten.expm1.default")
def _expm1(c, node, a):
    x, dt = _float_in(c, node, a)
    return tensor.subtract(tensor.exp(x), _scalar(1, dt))


@_reg("aten.hardtanh.default", "aten.relu6.default")
def _hardtanh(c, node, a):
    return tensor.clip(a["self"], float(a.get("min_val", 0.0)), float(a.get("max_val", 6.0)))


@_reg("aten.leaky_relu.default")
def _leaky(c, node, a):
    return nn.leaky_relu(a["self"], float(a["negative_slope"]))


@_reg("aten.gelu.default")
def _gelu(c, node, a):
    if a["approximate"] not in ("none", "tanh"):
        raise _fail(node, f"approximate={a['approximate']!r} is not supported (none, tanh)")
    return nn.gelu(a["self"], a["approximate"])


@_reg("aten.silu.default")
def _silu(c, node, a):
    return tensor.multiply(a["self"], tensor.sigmoid(a["self"]))


def _hsig(x: RelayExpr, dt: str) -> RelayExpr:
    return tensor.clip(tensor.add(tensor.divide(x, _scalar(6, dt)), _scalar(0.5, dt)), 0.0, 1.0)


@_reg("aten.hardsigmoid.default")
def _hardsigmoid(c, node, a):
    return _hsig(a["self"], out_dtype(node))


@_reg("aten.hardswish.default")
def _hardswish(c, node, a):
    return tensor.multiply(a["self"], _hsig(a["self"], out_dtype(node)))


@_reg("aten.elu.default")
def _elu(c, node, a):
    x, dt = a["self"], out_dtype(node)
    alpha, scale, iscale = (float(a[k]) for k in ("alpha", "scale", "input_scale"))
    em1 = tensor.subtract(tensor.exp(tensor.multiply(x, _scalar(iscale, dt))), _scalar(1, dt))
    neg = tensor.multiply(em1, _scalar(alpha, dt))
    y = tensor.where(tensor.greater(x, _scalar(0, dt)), x, neg)
    return y if scale == 1.0 else tensor.multiply(y, _scalar(scale, dt))


def _softplus_expr(x: RelayExpr, dt: str, beta: float, threshold: float) -> RelayExpr:
    bx = x if beta == 1.0 else tensor.multiply(x, _scalar(beta, dt))
    soft = tensor.log(tensor.add(tensor.exp(bx), _scalar(1, dt)))
    if beta != 1.0:
        soft = tensor.divide(soft, _scalar(beta, dt))
    return tensor.where(tensor.greater(bx, _scalar(threshold, dt)), x, soft)


@_reg("aten.softplus.default")
def _softplus(c, node, a):
    return _softplus_expr(a["self"], out_dtype(node), float(a["beta"]), float(a["threshold"]))


@_reg("aten.mish.default")
def _mish(c, node, a):
    x = a["self"]
    return tensor.multiply(x, tensor.tanh(_softplus_expr(x, out_dtype(node), 1.0, 20.0)))


@_reg("aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default",
      "aten.clamp.Tensor", "aten.clamp_min.Tensor", "aten.clamp_max.Tensor")
def _clamp(c, node, a):
    x, dt = a["self"], out_dtype(node)
    x = _cast(x, _dtype_of(node), dt)
    lo = a.get("min")
    hi = a.get("max")
    if not isinstance(lo, RelayExpr) and not isinstance(hi, RelayExpr) and dt.startswith("float"):
        return tensor.clip(x, -math.inf if lo is None else float(lo),
                           math.inf if hi is None else float(hi))
    for v, fn in ((lo, tensor.maximum), (hi, tensor.minimum)):
        if v is not None:
            x = fn(x, v if isinstance(v, RelayExpr) else _scalar(v, dt))
    return x


# ------------------------------------------------------------------------------------------------
# binary arithmetic and comparisons
def _common_dtype(node: Any, names: tuple[str, ...]) -> str:
    """torch's result type of the named operands (tensor metas or Python scalars)."""
    import torch

    vals = []
    for nm in names:
        v = _in_meta(node, nm)
        if isinstance(v, torch.Tensor):
            vals.append(torch.empty((1,) * min(v.dim(), 1), dtype=v.dtype))
        else:
            vals.append(v)
    dt = vals[0] if len(vals) == 1 else torch.result_type(*vals)
    return np_dtype(dt.dtype if isinstance(dt, torch.Tensor) else dt)


def _operand(node: Any, a: dict, name: str, dt: str) -> RelayExpr:
    v = a[name]
    if isinstance(v, RelayExpr):
        return _cast(v, _dtype_of(node, name), dt)
    return _scalar(v, dt)


def _binary(fn: Callable, compare: bool = False, lhs: str = "self", rhs: str = "other"):
    def f(c, node, a):
        dt = _common_dtype(node, (lhs, rhs)) if compare else out_dtype(node)
        return fn(_operand(node, a, lhs, dt), _operand(node, a, rhs, dt))
    return f


for _op, _fn in [("mul", tensor.multiply), ("remainder", tensor.floor_mod),
                 ("fmod", tensor.mod), ("floor_divide", tensor.floor_divide)]:
    CONVERTERS[f"aten.{_op}.Tensor"] = _binary(_fn)
    CONVERTERS[f"aten.{_op}.Scalar"] = _binary(_fn)
CONVERTERS["aten.floor_divide.default"] = _binary(tensor.floor_divide)
CONVERTERS["aten.maximum.default"] = _binary(tensor.maximum)
CONVERTERS["aten.minimum.default"] = _binary(tensor.minimum)
CONVERTERS["aten.pow.Tensor_Tensor"] = _binary(tensor.power, lhs="self", rhs="exponent")
CONVERTERS["aten.pow.Scalar"] = _binary(tensor.power, lhs="self", rhs="exponent")
for _op, _fn in [("eq", tensor.equal), ("ne", tensor.not_equal), ("lt", tensor.less),
                 ("le", tensor.less_equal), ("gt", tensor.greater), ("ge", tensor.greater_equal)]:
    CONVERTERS[f"aten.{_op}.Tensor"] = _binary(_fn, compare=True)
    CONVERTERS[f"aten.{_op}.Scalar"] = _binary(_fn, compare=True)
for _op, _fn in [("logical_and", tensor.logical_and), ("logical_or", tensor.logical_or),
                 ("logical_xor", extra.logical_xor)]:
    CONVERTERS[f"aten.{_op}.default"] = (lambda fn: lambda c, node, a: fn(
        _cast(a["self"], _dtype_of(node), "bool"),
        _cast(a["other"], _dtype_of(node, "other"), "bool")))(_fn)
for _op, _fn in [("bitwise_and", extra.bitwise_and), ("bitwise_or", extra.bitwise_or),
                 ("bitwise_xor", extra.bitwise_xor)]:
    CONVERTERS[f"aten.{_op}.Tensor"] = _binary(_fn)
    CONVERTERS[f"aten.{_op}.Scalar"] = _binary(_fn)


@_reg("aten.bitwise_not.default")
def _bitwise_not(c, node, a):
    if out_dtype(node) == "bool":
        return tensor.logical_not(a["self"])
    return extra.bitwise_not(a["self"])


def _alpha_scaled(node, a, dt) -> RelayExpr:
    y = _operand(node, a, "other", dt)
    alpha = a.get("alpha", 1)
    return y if alpha == 1 else tensor.multiply(y, _scalar(alpha, dt))


@_reg("aten.add.Tensor", "aten.add.Scalar")
def _add(c, node, a):
    dt = out_dtype(node)
    return tensor.add(_operand(node, a, "self", dt), _alpha_scaled(node, a, dt))


@_reg("aten.sub.Tensor", "aten.sub.Scalar")
def _sub(c, node, a):
    dt = out_dtype(node)
    return tensor.subtract(_operand(node, a, "self", dt), _alpha_scaled(node, a, dt))


@_reg("aten.rsub.Tensor", "aten.rsub.Scalar")
def _rsub(c, node, a):
    dt = out_dtype(node)
    return tensor.subtract(_alpha_scaled(node, a, dt), _operand(node, a, "self", dt))


@_reg("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode")
def _div(c, node, a):
    dt = out_dtype(node)
    mode = a.get("rounding_mode")
    if mode == "floor" and not dt.startswith("float"):
        return tensor.floor_divide(_operand(node, a, "self", dt), _operand(node, a, "other", dt))
    if mode == "trunc" and not dt.startswith("float"):
        return tensor.divide(_operand(node, a, "self", dt), _operand(node, a, "other", dt))
    q = tensor.divide(_operand(node, a, "self", dt), _operand(node, a, "other", dt))
    return {None: q, "floor": tensor.floor, "trunc": tensor.trunc}[mode](q) if mode else q


@_reg("aten.pow.Tensor_Scalar")
def _pow_scalar(c, node, a):
    dt = out_dtype(node)
    x = _operand(node, a, "self", dt)
    e = a["exponent"]
    if e == 1:
        return x
    if e == 2:
        return tensor.multiply(x, x)
    if e == 0.5 and dt.startswith("float"):
        return tensor.sqrt(x)
    return tensor.power(x, _scalar(e, dt))


@_reg("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf", "aten.where.Scalar")
def _where(c, node, a):
    dt = out_dtype(node)
    cond = _cast(a["condition"], _dtype_of(node, "condition"), "bool")
    return tensor.where(cond, _operand(node, a, "self", dt), _operand(node, a, "other", dt))


@_reg("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(c, node, a):
    dt = out_dtype(node)
    mask = _cast(a["mask"], _dtype_of(node, "mask"), "bool")
    return tensor.where(mask, _operand(node, a, "value", dt), _operand(node, a, "self", dt))


# ------------------------------------------------------------------------------------------------
# dtype conversions and constants shaped like a tensor
@_reg("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
      "aten.to.other", "aten.type_as.default", "aten._assert_tensor_metadata.default")
def _to(c, node, a):
    if str(node.target) == "aten._assert_tensor_metadata.default":
        return None
    return _cast(a["self"], _dtype_of(node), out_dtype(node))


@_reg("aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default",
      "aten.empty_like.default")
def _full_like(c, node, a):
    fill = {"aten.zeros_like.default": 0, "aten.ones_like.default": 1,
            "aten.empty_like.default": 0}.get(str(node.target), a.get("fill_value"))
    return const(np.full(out_shape(node), fill, dtype=out_dtype(node)))


# ------------------------------------------------------------------------------------------------
# convolution and matrix products
def _bias(out: RelayExpr, bias: Any) -> RelayExpr:
    return out if bias is None else nn.bias_add(out, bias, axis=1)


def _conv(c, node, x, w, bias, stride, padding, dilation, groups, transposed=False,
          output_padding=(0,)) -> RelayExpr:
    xs, ws = _shape_of(node, "input"), _shape_of(node, "weight")
    nd = len(xs) - 2
    rep = lambda v: [int(v)] * nd if isinstance(v, int) else [int(t) for t in v] * (  # noqa: E731
        nd if len(v) == 1 else 1)
    stride, dilation = rep(stride), rep(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            pad_b = pad_e = [0] * nd
        elif padding == "same":
            tot = [d * (k - 1) for d, k in zip(dilation, ws[2:])]
            pad_b = [t // 2 for t in tot]
            pad_e = [t - t // 2 for t in tot]
        else:
            raise _fail(node, f"padding={padding!r} is not supported")
    else:
        pad_b = pad_e = rep(padding)
    if nd not in (1, 2, 3) or (transposed and nd not in (1, 2)):
        raise _fail(node, f"{'transposed ' if transposed else ''}convolution of data {xs} "
                          "is not supported")
    if not transposed:
        fn = {1: nn_nd.conv1d, 2: nn.conv2d, 3: nn_nd.conv3d}[nd]
        out = fn(x, w, strides=stride, padding=pad_b + pad_e, dilation=dilation,
                 groups=int(groups), channels=ws[0], kernel_size=ws[2:])
        return _bias(out, bias)
    out_pad = rep(output_padding)
    if nd == 1:  # a 2-D transposed convolution of height 1
        x = transform.reshape(x, (xs[0], xs[1], 1, xs[2]))
        w = transform.reshape(w, (ws[0], ws[1], 1, ws[2]))
        stride, dilation, pad_b, out_pad = ([1] + stride, [1] + dilation, [0] + pad_b,
                                            [0] + out_pad)
        ws = [ws[0], ws[1], 1, ws[2]]
    g = int(groups)
    kw = dict(strides=stride, padding=pad_b, dilation=dilation, kernel_size=ws[2:],
              output_padding=out_pad)
    if g == 1:
        out = nn.conv2d_transpose(x, w, channels=ws[1], **kw)
    else:  # one transposed convolution per group (the IOHW weight splits on its input axis)
        xg, wg = _split_sizes(x, [xs[1] // g] * g, 1), _split_sizes(w, [ws[0] // g] * g, 0)
        out = transform.concatenate([nn.conv2d_transpose(xi, wi, channels=ws[1], **kw)
                                     for xi, wi in zip(xg, wg)], 1)
    out = _bias(out, bias)
    return transform.reshape(out, out_shape(node)) if nd == 1 else out


@_reg("aten.convolution.default")
def _convolution(c, node, a):
    return _conv(c, node, a["input"], a["weight"], a["bias"], a["stride"], a["padding"],
                 a["dilation"], a["groups"], a["transposed"], a["output_padding"])


@_reg("aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default",
      "aten.conv1d.padding", "aten.conv2d.padding", "aten.conv3d.padding")
def _convnd(c, node, a):
    return _conv(c, node, a["input"], a["weight"], a["bias"], a["stride"], a["padding"],
                 a["dilation"], a["groups"])


@_reg("aten.conv_transpose1d.default", "aten.conv_transpose2d.input")
def _conv_transpose(c, node, a):
    return _conv(c, node, a["input"], a["weight"], a["bias"], a["stride"], a["padding"],
                 a["dilation"], a["groups"], True, a["output_padding"])


def _transposed_source(c, n: Any) -> RelayExpr | None:
    """``W`` when fx node ``n`` is ``W.t()`` / ``W.permute(1, 0)`` / ``W.transpose(0, 1)`` of a
    2-D tensor: lets ``x @ W.t()`` become ``dense(x, W)`` without a transpose."""
    if not hasattr(n, "target") or n.op != "call_function" or len(n.meta["val"].shape) != 2:
        return None
    t = str(n.target)
    ok = (t == "aten.t.default" or (t == "aten.permute.default" and list(n.args[1]) == [1, 0])
          or (t == "aten.transpose.int" and sorted(_norm(int(d), 2) for d in n.args[1:3]) == [0, 1]))
    return c.expr(n.args[0]) if ok else None


def _dense(c, x: RelayExpr, xs: list[int], w: RelayExpr) -> RelayExpr:
    """``x @ w.T`` for ``x`` of any rank >= 2 (flattened to 2-D around nn.dense)."""
    if len(xs) == 2:
        return nn.dense(x, w)
    y = nn.dense(transform.reshape(x, (-1, xs[-1])), w)
    return y


@_reg("aten.linear.default")
def _linear(c, node, a):
    xs = _shape_of(node, "input")
    if len(xs) == 1:
        y = nn.dense(transform.reshape(a["input"], (1, xs[0])), a["weight"])
    else:
        y = _dense(c, a["input"], xs, a["weight"])
    if a["bias"] is not None:
        y = tensor.add(y, a["bias"])
    return transform.reshape(y, out_shape(node)) if len(xs) != 2 else y


def _mm_rhs(c, node, name: str) -> RelayExpr:
    """The [N, K] weight for ``dense`` from the [K, N] right operand of a matrix product."""
    src_node = node.args[[a.name for a in node.target._schema.arguments].index(name)]
    src = _transposed_source(c, src_node)
    return src if src is not None else transform.transpose(c.expr(src_node), (1, 0))


@_reg("aten.mm.default")
def _mm(c, node, a):
    return nn.dense(a["self"], _mm_rhs(c, node, "mat2"))


@_reg("aten.addmm.default")
def _addmm(c, node, a):
    dt = out_dtype(node)
    y = nn.dense(a["mat1"], _mm_rhs(c, node, "mat2"))
    if a["alpha"] != 1:
        y = tensor.multiply(y, _scalar(a["alpha"], dt))
    b = a["self"] if a["beta"] == 1 else tensor.multiply(a["self"], _scalar(a["beta"], dt))
    return tensor.add(b, y)


@_reg("aten.bmm.default")
def _bmm(c, node, a):
    return nn.batch_matmul(a["self"], a["mat2"], transpose_b=False)


@_reg("aten.matmul.default")
def _matmul(c, node, a):
    sa, sb = _shape_of(node, "self"), _shape_of(node, "other")
    return _matmul_expr(c, node, a["self"], sa, a["other"], sb)


def _matmul_expr(c, node, A, sa, B, sb) -> RelayExpr:
    """torch.matmul: 1-D operands promoted and squeezed, batch dimensions broadcast."""
    if len(sa) == 1:
        A, sa = transform.reshape(A, (1, sa[0])), [1, sa[0]]
    if len(sb) == 1:
        B, sb = transform.reshape(B, (sb[0], 1)), [sb[0], 1]
    M, K, N = sa[-2], sa[-1], sb[-1]
    if len(sb) == 2:
        w = _transposed_source(c, node.args[1]) if len(_shape_of(node, "other")) == 2 else None
        w = w if w is not None else transform.transpose(B, (1, 0))
        out = nn.dense(transform.reshape(A, (-1, K)) if len(sa) > 2 else A, w)
    else:
        batch = list(np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2])))
        nb = int(np.prod(batch)) if batch else 1
        if sa[:-2] != batch:
            A = transform.broadcast_to(A, batch + [M, K])
        if sb[:-2] != batch:
            B = transform.broadcast_to(B, batch + [K, N])
        out = nn.batch_matmul(transform.reshape(A, (nb, M, K)), transform.reshape(B, (nb, K, N)),
                              transpose_b=False)
    return transform.reshape(out, out_shape(node))


# ------------------------------------------------------------------------------------------------
# normalization
def _ones_or(v: Any, n: int, dt: str, fill: float) -> RelayExpr:
    return v if v is not None else const(np.full((n,), fill, dtype=dt))


def _batch_norm(c, node, a, training: bool) -> list:
    if training:
        raise _fail(node, "training=True is not supported (inference only: call model.eval())")
    if a["running_mean"] is None or a["running_var"] is None:
        raise _fail(node, "batch norm without running statistics is not supported")
    ch, dt = _shape_of(node, "input")[1], out_dtype(node)
    return nn.batch_norm(a["input"], _ones_or(a["weight"], ch, dt, 1.0),
                         _ones_or(a["bias"], ch, dt, 0.0), a["running_mean"], a["running_var"],
                         axis=1, epsilon=float(a["eps"]))[0]


@_reg("aten.batch_norm.default")
def _bn(c, node, a):
    return _batch_norm(c, node, a, bool(a["training"]))


@_reg("aten._native_batch_norm_legit_no_training.default")
def _bn_legit(c, node, a):
    return [_batch_norm(c, node, a, False)]


@_reg("aten.native_batch_norm.default")
def _bn_native(c, node, a):
    return [_batch_norm(c, node, a, bool(a["training"]))]


def out_dtype_i(node: Any, k: int) -> str:
    return np_dtype(_val(node)[k].dtype)


def _layer_norm(c, node, a) -> RelayExpr:
    x, s = a["input"], _shape_of(node, "input")
    nshape = [int(d) for d in a["normalized_shape"]]
    k = len(nshape)
    tail = int(np.prod(nshape))
    dt = _dtype_of(node, "input")
    g = _ones_or(a["weight"], tail, dt, 1.0) if a["weight"] is None or k == 1 else \
        transform.reshape(a["weight"], (tail,))
    b = _ones_or(a["bias"], tail, dt, 0.0) if a["bias"] is None or k == 1 else \
        transform.reshape(a["bias"], (tail,))
    if k == 1:
        return nn.layer_norm(x, g, b, axis=-1, epsilon=float(a["eps"]))
    x2 = transform.reshape(x, s[:-k] + [tail])
    return transform.reshape(nn.layer_norm(x2, g, b, axis=-1, epsilon=float(a["eps"])), s)


@_reg("aten.layer_norm.default")
def _ln(c, node, a):
    return _layer_norm(c, node, a)


@_reg("aten.native_layer_norm.default")
def _ln_native(c, node, a):
    return [_layer_norm(c, node, a)]


def _group_norm(c, node, x, w, b, groups: int, eps: float) -> RelayExpr:
    s = _shape_of(node, "input")
    dt = _dtype_of(node, "input")
    return extra.group_norm(x, _ones_or(w, s[1], dt, 1.0), _ones_or(b, s[1], dt, 0.0),
                            num_groups=int(groups), axis=1, epsilon=float(eps))


@_reg("aten.group_norm.default")
def _gn(c, node, a):
    return _group_norm(c, node, a["input"], a["weight"], a["bias"], a["num_groups"], a["eps"])


@_reg("aten.native_group_norm.default")
def _gn_native(c, node, a):
    return [_group_norm(c, node, a["input"], a["weight"], a["bias"], a["group"], a["eps"])]


@_reg("aten.instance_norm.default")
def _in(c, node, a):
    if a["use_input_stats"] is False:
        raise _fail(node, "use_input_stats=False is not supported")
    s = _shape_of(node, "input")
    dt = _dtype_of(node, "input")
    return extra.instance_norm(a["input"], _ones_or(a["weight"], s[1], dt, 1.0),
                               _ones_or(a["bias"], s[1], dt, 0.0), axis=1,
                               epsilon=float(a["eps"]))


# ------------------------------------------------------------------------------------------------
# softmax and reductions
@_reg("aten.softmax.int", "aten._softmax.default")
def _softmax(c, node, a):
    x = _cast(a["self"], _dtype_of(node), out_dtype(node))
    return nn.softmax(x, int(a["dim"]))


@_reg("aten._safe_softmax.default")
def _safe_softmax(c, node, a):
    """softmax that gives 0 (not NaN) on rows that are entirely -inf."""
    dt = out_dtype(node)
    x = _cast(a["self"], _dtype_of(node), dt)
    ax = int(a["dim"])
    live = _red.any(tensor.not_equal(x, _scalar(-np.inf, dt)), axis=ax, keepdims=True)
    return tensor.where(live, nn.softmax(x, ax), _scalar(0, dt))


@_reg("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(c, node, a):
    x = _cast(a["self"], _dtype_of(node), out_dtype(node))
    return nn.log_softmax(x, int(a["dim"]))


def _dims(v: Any, rank: int) -> list[int] | None:
    if v is None:
        return None
    v = [v] if isinstance(v, int) else list(v)
    return None if not v else [_norm(int(d), rank) for d in v]


def _reduce(fn, cast_first: bool = True):
    def f(c, node, a):
        rank = len(_shape_of(node))
        x = a["self"]
        if cast_first:
            x = _cast(x, _dtype_of(node), out_dtype(node))
        dims = _dims(a.get("dim"), rank)
        keep = bool(a.get("keepdim", False))
        if rank == 0:
            return x
        return fn(x, axis=dims, keepdims=keep)
    return f


for _op, _fn in [("mean", _red.mean), ("sum", _red.sum), ("prod", _red.prod)]:
    CONVERTERS[f"aten.{_op}.default"] = _reduce(_fn)
CONVERTERS["aten.mean.dim"] = _reduce(_red.mean)
CONVERTERS["aten.sum.dim_IntList"] = _reduce(_red.sum)
CONVERTERS["aten.prod.dim_int"] = _reduce(_red.prod)
for _op, _fn in [("amax", _red.max), ("amin", _red.min), ("max", _red.max), ("min", _red.min)]:
    CONVERTERS[f"aten.{_op}.default"] = _reduce(_fn)


def _bool_reduce(fn):
    inner = _reduce(fn, cast_first=False)

    def g(c, node, a):
        return inner(c, node, {**a, "self": _cast(a["self"], _dtype_of(node), "bool")})
    return g


for _op, _fn in [("any", _red.any), ("all", _red.all)]:
    for _ov in ("default", "dim", "dims"):
        CONVERTERS[f"aten.{_op}.{_ov}"] = _bool_reduce(_fn)


@_reg("aten.argmax.default", "aten.argmin.default")
def _argmax(c, node, a):
    fn = _red.argmax if "argmax" in str(node.target) else _red.argmin
    x = a["self"]
    dim = a["dim"]
    if dim is None:
        y = fn(transform.reshape(x, (-1,)), axis=0, keepdims=False)
        y = transform.reshape(y, out_shape(node)) if a["keepdim"] else y
    else:
        y = fn(x, axis=_norm(int(dim), len(_shape_of(node))), keepdims=bool(a["keepdim"]))
    return transform.cast(y, "int64")


@_reg("aten.max.dim", "aten.min.dim")
def _max_dim(c, node, a):
    mx = "max" in str(node.target)
    ax = _norm(int(a["dim"]), len(_shape_of(node)))
    keep = bool(a["keepdim"])
    vals = (_red.max if mx else _red.min)(a["self"], axis=ax, keepdims=keep)
    idx = (_red.argmax if mx else _red.argmin)(a["self"], axis=ax, keepdims=keep)
    return [vals, transform.cast(idx, "int64")]


@_reg("aten.var.correction", "aten.std.correction", "aten.var.dim", "aten.std.dim")
def _var(c, node, a):
    rank = len(_shape_of(node))
    dims = _dims(a.get("dim"), rank) or list(range(rank))
    corr = a.get("correction")
    if "unbiased" in a:
        corr = 1 if a["unbiased"] else 0
    corr = 1 if corr is None else float(corr)
    x = a["self"]
    dt = out_dtype(node)
    mean = _red.mean(x, axis=dims, keepdims=True)
    d = tensor.subtract(x, mean)
    n = int(np.prod([_shape_of(node)[k] for k in dims]))
    v = tensor.divide(_red.sum(tensor.multiply(d, d), axis=dims, keepdims=bool(a["keepdim"])),
                      _scalar(max(n - corr, 0), dt))
    return tensor.sqrt(v) if ".std." in str(node.target) else v


@_reg("aten.cumsum.default")
def _cumsum(c, node, a):
    x = _cast(a["self"], _dtype_of(node), out_dtype(node))
    return extra.cumsum(x, axis=_norm(int(a["dim"]), max(len(_shape_of(node)), 1)))


# ------------------------------------------------------------------------------------------------
# pooling and resizing
def _pool_args(node, a, nd: int) -> tuple[list[int], list[int], list[int], list[int]]:
    rep = lambda v: [int(v)] * nd if isinstance(v, int) else (  # noqa: E731
        [int(v[0])] * nd if len(v) == 1 else [int(t) for t in v])
    k = rep(a["kernel_size"])
    stride = rep(a["stride"]) if a["stride"] not in (None, []) and a["stride"] != () else list(k)
    pad = rep(a["padding"])
    dil = rep(a.get("dilation", 1))
    return k, stride, pad, dil


def _fit(out: RelayExpr, relay_shape: list[int], node: Any, k: int | None = None) -> RelayExpr:
    """Crop a pooling result to torch's shape: with ceil_mode torch drops a last window that
    would start in the right padding, relay's formula keeps it."""
    want = out_shape(node) if k is None else [int(d) for d in _val(node)[k].shape]
    if relay_shape == want:
        return out
    return transform.strided_slice(out, [0] * len(want), want)


def _pooled_shape(xs, k, stride, pad, dil, ceil) -> list[int]:
    out = list(xs[:2])
    for s, kk, st, p, d in zip(xs[2:], k, stride, pad, dil):
        num = s + 2 * p - (kk - 1) * d - 1
        out.append((num + st - 1) // st + 1 if ceil else num // st + 1)
    return out


def _max_pool(c, node, a, k_out: int | None):
    xs = _shape_of(node)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise _fail(node, f"max pooling of data {xs} is not supported")
    k, stride, pad, dil = _pool_args(node, a, nd)
    ceil = bool(a["ceil_mode"])
    fn = {1: nn_nd.max_pool1d, 2: nn.max_pool2d, 3: nn_nd.max_pool3d}[nd]
    out = fn(a["self"], pool_size=k, strides=stride, dilation=dil, padding=pad + pad,
             ceil_mode=ceil)
    return _fit(out, _pooled_shape(xs, k, stride, pad, dil, ceil), node, k_out)


@_reg("aten.max_pool1d.default", "aten.max_pool2d.default", "aten.max_pool3d.default")
def _maxpool(c, node, a):
    return _max_pool(c, node, a, None)


@_reg("aten.max_pool2d_with_indices.default", "aten.max_pool3d_with_indices.default")
def _maxpool_idx(c, node, a):
    return [_max_pool(c, node, a, 0)]


@_reg("aten.avg_pool1d.default", "aten.avg_pool2d.default", "aten.avg_pool3d.default")
def _avgpool(c, node, a):
    xs = _shape_of(node)
    nd = len(xs) - 2
    if a.get("divisor_override") is not None:
        raise _fail(node, "divisor_override is not supported")
    k, stride, pad, dil = _pool_args(node, a, nd)
    ceil = bool(a["ceil_mode"])
    fn = {1: nn_nd.avg_pool1d, 2: nn.avg_pool2d, 3: nn_nd.avg_pool3d}[nd]
    out = fn(a["self"], pool_size=k, strides=stride, padding=pad + pad, ceil_mode=ceil,
             count_include_pad=bool(a["count_include_pad"]))
    if ceil and _pooled_shape(xs, k, stride, pad, dil, ceil) != out_shape(node):
        raise _fail(node, "ceil_mode with a dropped last window is not supported for avg_pool")
    return out


@_reg("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default")
def _adaptive_avg(c, node, a):
    xs = _shape_of(node)
    if len(xs) != 4:
        raise _fail(node, f"only 4-D (NCHW) data is supported, got {xs}")
    size = out_shape(node)[2:]
    if size == [1, 1]:
        return nn.global_avg_pool2d(a["self"])
    return nn.adaptive_avg_pool2d(a["self"], size)


def _resize(c, node, x, method: str, align_corners: bool | None, scales: Any):
    xs, want = _shape_of(node, "input"), out_shape(node)
    if len(xs) != 4:
        raise _fail(node, f"only 4-D (NCHW) data is supported, got {xs}")
    if scales:
        for s_in, s_out, sc in zip(xs[2:], want[2:], scales):
            if sc is not None and abs(s_out - s_in * float(sc)) > 1e-5 * s_out:
                raise _fail(node, f"scale_factor {list(scales)} does not give an exact size "
                                  "(torch maps by the scale, relay by the size ratio): give size")
    if method == "nearest_neighbor":
        return resize2d(x, want[2:], method=method, coordinate_transformation_mode="asymmetric",
                        rounding_method="floor")
    mode = "align_corners" if align_corners else "pytorch_half_pixel"
    return resize2d(x, want[2:], method="linear", coordinate_transformation_mode=mode)


@_reg("aten.upsample_nearest2d.vec")
def _up_nearest_vec(c, node, a):
    return _resize(c, node, a["input"], "nearest_neighbor", None, a["scale_factors"])


@_reg("aten.upsample_nearest2d.default")
def _up_nearest(c, node, a):
    return _resize(c, node, a["self"] if "self" in a else a["input"], "nearest_neighbor", None,
                   [a.get("scales_h"), a.get("scales_w")])


@_reg("aten.upsample_bilinear2d.vec")
def _up_bilinear_vec(c, node, a):
    return _resize(c, node, a["input"], "linear", bool(a["align_corners"]), a["scale_factors"])


@_reg("aten.upsample_bilinear2d.default")
def _up_bilinear(c, node, a):
    return _resize(c, node, a["self"] if "self" in a else a["input"], "linear",
                   bool(a["align_corners"]), [a.get("scales_h"), a.get("scales_w")])


# ------------------------------------------------------------------------------------------------
# shapes and data movement
@_reg("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
      "aten.flatten.using_ints", "aten.unflatten.int", "aten.squeeze.default",
      "aten.squeeze.dim", "aten.squeeze.dims", "aten.unsqueeze.default", "aten.view_as.default",
      "aten.reshape_as.default")
def _reshape(c, node, a):
    want = out_shape(node)
    if _shape_of(node) == want:
        return a["self"]
    return transform.reshape(a["self"], want)


@_reg("aten.permute.default")
def _permute(c, node, a):
    rank = len(_shape_of(node))
    return transform.transpose(a["self"], [_norm(int(d), rank) for d in a["dims"]])


@_reg("aten.transpose.int", "aten.t.default", "aten.swapaxes.default", "aten.numpy_T.default")
def _transpose(c, node, a):
    rank = len(_shape_of(node))
    if rank < 2:
        return a["self"]
    if "dim0" in a or "axis0" in a:
        d0 = _norm(int(a.get("dim0", a.get("axis0"))), rank)
        d1 = _norm(int(a.get("dim1", a.get("axis1"))), rank)
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
    else:
        perm = list(reversed(range(rank)))
    return transform.transpose(a["self"], perm)


@_reg("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(c, node, a):
    want = out_shape(node)
    if _shape_of(node) == want:
        return a["self"]
    return transform.broadcast_to(a["self"], want)


@_reg("aten.repeat.default")
def _repeat(c, node, a):
    s = _shape_of(node)
    reps = [int(r) for r in a["repeats"]]
    x = a["self"]
    if len(reps) > len(s):
        x = transform.reshape(x, [1] * (len(reps) - len(s)) + s)
    return extra.tile(x, reps)


@_reg("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def _cat(c, node, a):
    dt = out_dtype(node)
    metas = [n.meta["val"] for n in node.args[0]]
    xs = [_cast(x, np_dtype(m.dtype), dt) for x, m in zip(a["tensors"], metas)
          if tuple(m.shape) != (0,)]  # torch skips legacy 1-D empty tensors
    return transform.concatenate(xs, _norm(int(a["dim"]), len(out_shape(node))))


@_reg("aten.stack.default")
def _stack(c, node, a):
    want = out_shape(node)
    ax = _norm(int(a["dim"]), len(want))
    dt = out_dtype(node)
    metas = [n.meta["val"] for n in node.args[0]]
    xs = []
    for x, m in zip(a["tensors"], metas):
        shp = [int(d) for d in m.shape]
        shp.insert(ax, 1)
        xs.append(transform.reshape(_cast(x, np_dtype(m.dtype), dt), shp))
    return transform.concatenate(xs, ax)


def _split_sizes(x: RelayExpr, sizes: list[int], ax: int) -> list[RelayExpr]:
    if len(sizes) == 1:
        return [x]
    idx = [int(v) for v in np.cumsum(sizes)[:-1]]
    parts = transform.split(x, idx, axis=ax)
    return [parts[k] for k in range(len(sizes))]


@_reg("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
      "aten.unbind.int", "aten.split.sizes")
def _split(c, node, a):
    s = _shape_of(node)
    ax = _norm(int(a["dim"]), len(s))
    if str(node.target) == "aten.unbind.int":
        outs = _split_sizes(a["self"], [1] * s[ax], ax)
        return [transform.reshape(o, s[:ax] + s[ax + 1:]) for o in outs]
    return _split_sizes(a["self"], [int(v.shape[ax]) for v in _val(node)], ax)


@_reg("aten.slice.Tensor")
def _slice(c, node, a):
    s = _shape_of(node)
    ax = _norm(int(a["dim"]), len(s))
    start, end, step = a["start"], a["end"], int(a["step"])
    start = 0 if start is None else int(start)
    end = s[ax] if end is None else int(end)
    start = min(max(start + s[ax] if start < 0 else start, 0), s[ax])
    end = min(max(end + s[ax] if end < 0 else end, 0), s[ax])
    if start == 0 and end == s[ax] and step == 1:
        return a["self"]
    if end <= start:
        raise _fail(node, f"an empty slice [{start}:{end}] is not supported")
    return transform.strided_slice(a["self"], [start], [end], [step], axes=[ax])


@_reg("aten.select.int")
def _select(c, node, a):
    s = _shape_of(node)
    ax = _norm(int(a["dim"]), len(s))
    i = int(a["index"])
    i = i + s[ax] if i < 0 else i
    y = transform.strided_slice(a["self"], [i], [i + 1], [1], axes=[ax])
    return transform.reshape(y, out_shape(node))


@_reg("aten.index_select.default")
def _index_select(c, node, a):
    ax = _norm(int(a["dim"]), max(len(_shape_of(node)), 1))
    idx = a["index"]
    if len(_shape_of(node, "index")) == 0:
        idx = transform.reshape(idx, (1,))
    return transform.take(a["self"], idx, axis=ax, mode="clip")


@_reg("aten.index.Tensor")
def _index(c, node, a):
    idx = a["indices"]
    real = [k for k, v in enumerate(idx) if v is not None]
    if len(real) != 1:
        raise _fail(node, "indexing with more than one index tensor is not supported")
    k = real[0]
    meta = node.args[1][k].meta["val"]
    if np_dtype(meta.dtype) == "bool":
        raise _fail(node, "boolean mask indexing (data-dependent shape) is not supported")
    return transform.take(a["self"], idx[k], axis=k, mode="wrap")


@_reg("aten.gather.default")
def _gather(c, node, a):
    return extra.gather(a["self"], _norm(int(a["dim"]), len(_shape_of(node))), a["index"])


@_reg("aten.embedding.default")
def _embedding(c, node, a):
    return transform.take(a["weight"], a["indices"], axis=0, mode="clip")


@_reg("aten.flip.default")
def _flip(c, node, a):
    x = a["self"]
    for d in a["dims"]:
        x = extra.reverse(x, _norm(int(d), len(_shape_of(node))))
    return x


def _pad_widths(node, pads: list[int], rank: int) -> tuple[list[list[int]], list[list[int]]]:
    """torch's pad list (last axis first, before/after pairs) as per-axis widths, and crops for
    the negative entries."""
    if len(pads) % 2 or len(pads) // 2 > rank:
        raise _fail(node, f"pad {pads} does not fit a tensor of rank {rank}")
    width = [[0, 0] for _ in range(rank)]
    for j in range(len(pads) // 2):
        width[rank - 1 - j] = [int(pads[2 * j]), int(pads[2 * j + 1])]
    return [[max(b, 0), max(e, 0)] for b, e in width], [[min(b, 0), min(e, 0)] for b, e in width]


def _pad(c, node, x, pads, mode: str, value: float) -> RelayExpr:
    s = _shape_of(node)
    pos, neg = _pad_widths(node, list(pads), len(s))
    if any(b or e for b, e in neg):
        x = transform.strided_slice(x, [-b for b, _ in neg], [d + e for d, (_, e) in zip(s, neg)])
    if any(b or e for b, e in pos):
        x = nn.pad(x, pos, pad_value=float(value), pad_mode=mode)
    return x


@_reg("aten.constant_pad_nd.default")
def _constant_pad(c, node, a):
    return _pad(c, node, a["self"], a["pad"], "constant", a["value"])


@_reg("aten.pad.default")
def _pad_default(c, node, a):
    mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}.get(a["mode"])
    if mode is None:
        raise _fail(node, f"mode={a['mode']!r} is not supported (constant, reflect, replicate)")
    return _pad(c, node, a["self"], a["pad"], mode, a["value"] or 0.0)


@_reg("aten.reflection_pad1d.default", "aten.reflection_pad2d.default",
      "aten.replication_pad1d.default", "aten.replication_pad2d.default")
def _pad_mode(c, node, a):
    mode = "reflect" if "reflection" in str(node.target) else "edge"
    return _pad(c, node, a["self"], a["padding"], mode, 0.0)


# ------------------------------------------------------------------------------------------------
# attention
@_reg("aten.scaled_dot_product_attention.default")
def _sdpa(c, node, a):
    """softmax(q @ k^T * scale + mask) @ v, over the flattened leading (batch, head) axes."""
    qs, ks, vs = (_shape_of(node, n) for n in ("query", "key", "value"))
    if a.get("dropout_p", 0.0):
        raise _fail(node, "dropout_p > 0 is not supported (inference only)")
    if a.get("enable_gqa") and qs[:-2] != ks[:-2]:
        raise _fail(node, "grouped-query attention (enable_gqa) is not supported")
    dt = out_dtype(node)
    L, E, S, Ev = qs[-2], qs[-1], ks[-2], vs[-1]
    batch = list(np.broadcast_shapes(tuple(qs[:-2]), tuple(ks[:-2]), tuple(vs[:-2])))
    nb = int(np.prod(batch)) if batch else 1

    def flat(x, s, tail):
        if s[:-2] != batch:
            x = transform.broadcast_to(x, batch + tail)
        return transform.reshape(x, [nb] + tail)

    q, k, v = flat(a["query"], qs, [L, E]), flat(a["key"], ks, [S, E]), flat(a["value"], vs, [S, Ev])
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    scores = tensor.multiply(nn.batch_matmul(q, k), _scalar(scale, dt))
    scores = transform.reshape(scores, batch + [L, S])
    mask = a.get("attn_mask")
    if a.get("is_causal"):
        if mask is not None:
            raise _fail(node, "is_causal together with attn_mask is not supported")
        tri = np.where(np.tril(np.ones((L, S), dtype=bool)), 0.0, -np.inf).astype(dt)
        scores = tensor.add(scores, const(tri))
    elif mask is not None:
        if _dtype_of(node, "attn_mask") == "bool":
            scores = tensor.where(mask, scores, _scalar(-np.inf, dt))
        else:
            scores = tensor.add(scores, _cast(mask, _dtype_of(node, "attn_mask"), dt))
    p = transform.reshape(nn.softmax(scores, -1), [nb, L, S])
    out = nn.batch_matmul(p, v, transpose_b=False)
    return transform.reshape(out, out_shape(node))
