"""PyTorch quantized models (torch.ao static post-training quantization) into the QNN dialect.

``from_pytorch`` sends here any model holding torch.ao quantized modules or quantize calls: a
``convert_fx`` GraphModule as it is, an eager-mode ``torch.ao.quantization.convert``ed module
traced with ``torch.fx.symbolic_trace`` (the quantized modules stay leaves). ``torch.export``
cannot take these models (packed weights are script objects, per-channel quantized tensors have
no meta kernels), so the FX graph is converted directly:

* The graph is first run once on random inputs of the given shapes, recording every node's
  value: shapes, dtypes and each quantized value's (scale, zero point, dtype) — static, since
  the quantization parameters are fixed when the model is converted.
* Quantization ops and quantized modules map to QNN ops: ``torch.quantize_per_tensor`` /
  ``Quantize`` -> ``qnn.quantize``; ``.dequantize()`` / ``DeQuantize`` -> ``qnn.dequantize``;
  quantized ``Conv2d`` / ``ConvReLU2d`` / ``Linear`` / ``LinearReLU`` (and the functional
  ``quantized.conv2d`` / ``linear`` calls on packed weights) -> ``qnn.conv2d`` / ``qnn.dense``,
  the float bias quantized to int32 at scale ``s_x * s_w`` (round half to even), then
  ``qnn.requantize`` to the module's scale and zero point (the relu variants clamp at the output
  zero point). That is qnnpack's arithmetic; fbgemm adds the float bias after scaling the
  accumulator, which differs by one step on rounding ties. ``Conv1d`` is a conv2d of height 1;
  onednn's ``ConvAdd2d`` / ``ConvAddReLU2d`` add the dequantized second input in float before
  quantizing; ``ConvTranspose2d`` runs in float on the dequantized input and weight;
  ``quantized.add`` / ``add_relu`` / ``mul`` / ``mul_relu`` / ``cat`` (and ``torch.cat`` on
  quantized tensors) -> ``qnn.add`` / ``qnn.mul`` / ``qnn.concatenate``; relu on a quantized
  tensor -> ``maximum(q, zero_point)``.
* ``convert_to_reference_fx`` models: the reference ``Conv2d`` / ``Linear`` (alone or fused
  with a ReLU) become float ``nn.conv2d`` / ``nn.dense`` of ``qnn.dequantize(int8 weight)``:
  the QDQ form, which relay.build's FakeQuantizationToInteger turns into integer products.
* Every other node goes through the float converters of the ``torch.export`` path: the node
  alone is exported on float inputs and its ATen graph converted with the node's relay inputs.
  Pure data-movement ops on a quantized tensor whose parameters they keep (``max_pool2d``,
  ``flatten``, ``view``/``reshape``, slicing, ``permute``, ...) apply the float program to the
  integers directly; any other op on quantized tensors (hardswish, adaptive/average pooling,
  ``mean``, layer norm, ...) runs dequantize -> float op -> quantize with the output's recorded
  parameters, a region ``relay.build``'s FakeQuantizationToInteger makes integer where it can.

What is not supported (dynamic quantization, per-channel quantized activations, quantized ops
without a float equivalent, float ops the ATen converters lack) raises ONE ``OpNotImplemented``
listing each op with the node names, before any conversion.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...expr import Function, RelayExpr, Tuple, const, var
from ...module import IRModule
from ...op import nn, tensor, transform
from ...qnn import op as qnn
from ..common import unsupported_error
from .common import PyTorchConvertError, np_dtype

__all__ = ["is_quantized_model", "from_pytorch_quantized"]

_QMOD_PREFIXES = ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized",
                  "torch.nn.quantized", "torch.nn.intrinsic.quantized")
_REFERENCE = ("torch.ao.nn.quantized.reference",)


def _is_qmodule(m: Any) -> bool:
    name = type(m).__module__
    return name.startswith(_QMOD_PREFIXES) and not name.startswith(_REFERENCE)


def is_quantized_model(model: Any) -> bool:
    """Whether ``model`` is a torch.ao quantized model (quantized modules, or an FX graph with
    quantize calls) that ``from_pytorch`` converts through the FX graph."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return False
    if any(_is_qmodule(m) for m in model.modules()):
        return True
    if isinstance(model, torch.fx.GraphModule):
        qfns = (torch.quantize_per_tensor, torch.quantize_per_channel)
        return any(n.op == "call_function" and n.target in qfns for n in model.graph.nodes)
    return False


# ------------------------------------------------------------------------------------------------
# recorded values
@dataclass(frozen=True)
class QParams:
    """Per-tensor quantization of a recorded value: real = scale * (q - zero_point)."""

    scale: float
    zero_point: int
    dtype: str

    def consts(self) -> tuple[RelayExpr, RelayExpr]:
        return const(np.float32(self.scale)), const(np.int32(self.zero_point))


def _qparams(t: Any) -> QParams | None:
    import torch

    if not (isinstance(t, torch.Tensor) and t.is_quantized):
        return None
    dtypes = {torch.quint8: "uint8", torch.qint8: "int8", torch.qint32: "int32"}
    if t.qscheme() not in (torch.per_tensor_affine, torch.per_tensor_symmetric) or (
            t.dtype not in dtypes):
        raise PyTorchConvertError(f"quantized activations must be per-tensor quint8/qint8/"
                                  f"qint32, got {t.qscheme()} {t.dtype}")
    return QParams(float(t.q_scale()), int(t.q_zero_point()), dtypes[t.dtype])


def _is_tensor(v: Any) -> bool:
    import torch

    return isinstance(v, torch.Tensor)


def _tensors_of(v: Any) -> bool:
    """A tensor, or a non-empty list/tuple of tensors."""
    return _is_tensor(v) or (isinstance(v, (list, tuple)) and len(v) > 0
                             and all(_is_tensor(x) for x in v))


def _snapshot(v: Any) -> Any:
    if _is_tensor(v):
        return v.clone()
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        return type(v)(_snapshot(x) for x in v)
    return v


def _record(gm: Any, example: Sequence[Any]) -> dict:
    """Each node's value on the example inputs."""
    import torch

    values: dict = {}

    class _Recorder(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            v = super().run_node(n)
            values[n] = _snapshot(v)  # a later op may write into this tensor in place
            return v

    with torch.no_grad():
        _Recorder(gm).run(*example)
    return values


# ------------------------------------------------------------------------------------------------
# conversion state
class _Ctx:
    def __init__(self, gm: Any, values: dict, table: dict, freeze: bool) -> None:
        self.gm = gm
        self.values = values
        self.table = table
        self.freeze = freeze
        self.env: dict[Any, Any] = {}
        self.param_vars: list[RelayExpr] = []
        self.params: dict[str, np.ndarray] = {}

    def q(self, n: Any) -> QParams | None:
        return _qparams(self.values.get(n))

    def expr(self, n: Any) -> Any:
        if n not in self.env:
            raise PyTorchConvertError(f"node {n.name!r} ({n.target}) has no tensor value")
        return self.env[n]

    def weight(self, name: str, arr: np.ndarray) -> RelayExpr:
        """A constant, or (``freeze_params=False``) a parameter named ``name``: the same one
        for a module called again with the same value; ``name_1``, ... for another value (a
        shared module's int32 bias depends on its input's scale)."""
        if self.freeze:
            return const(arr)
        base, k = name, 0
        while name in self.params:
            old = self.params[name]
            if old.dtype == arr.dtype and np.array_equal(old, arr):
                return next(v for v in self.param_vars if v.name_hint == name)
            k += 1
            name = f"{base}_{k}"
        v = var(name, shape=arr.shape, dtype=str(arr.dtype))
        self.param_vars.append(v)
        self.params[name] = arr
        return v

    def module(self, n: Any) -> Any:
        return self.gm.get_submodule(n.target)


def _key(ctx: _Ctx, n: Any) -> Any:
    if n.op == "call_method":
        return "method." + str(n.target)
    if n.op == "call_module":
        return type(ctx.module(n))
    return n.target


def _describe(ctx: _Ctx, n: Any) -> str:
    if n.op == "call_module":
        t = type(ctx.module(n))
        return f"{t.__module__}.{t.__name__}"
    if n.op == "call_method":
        return f"Tensor.{n.target}"
    t = n.target
    return str(t) if not hasattr(t, "__name__") else f"{getattr(t, '__module__', '')}.{t.__name__}"


def _input_nodes(n: Any) -> list:
    import torch.fx

    out: list = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.fx.Node):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk((n.args, n.kwargs))
    return out


# ------------------------------------------------------------------------------------------------
# quantized modules and ops (dedicated converters)
def _arg(n: Any, i: int, name: str, default: Any = None) -> Any:
    if i < len(n.args):
        return n.args[i]
    return n.kwargs.get(name, default)


def _relu_at_zp(y: RelayExpr, q: QParams) -> RelayExpr:
    return tensor.maximum(y, const(np.asarray(q.zero_point, dtype=q.dtype)))


def _pname(n: Any) -> str:
    """Parameter name prefix: the module's path, or the node's name for a functional op."""
    return str(n.target) if n.op == "call_module" else n.name


def _qweight(ctx: _Ctx, n: Any, w: Any, axis: int | None
             ) -> tuple[RelayExpr, np.ndarray, RelayExpr]:
    """(int8 weight, scales as float32 array, zero points) of a quantized weight tensor;
    per-channel parameters must be along ``axis`` (any axis when None)."""
    import torch

    prefix = _pname(n)
    data = w.int_repr().numpy().copy()
    if w.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        scales = np.asarray([w.q_scale()], dtype=np.float32)
        zps = np.asarray(w.q_zero_point(), dtype=np.int32)
    elif w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
        if axis is not None and int(w.q_per_channel_axis()) != axis:
            raise PyTorchConvertError(f"module {prefix!r}: per-channel weight axis "
                                      f"{w.q_per_channel_axis()} (output channels only)")
        scales = w.q_per_channel_scales().numpy().astype(np.float32)
        zps = w.q_per_channel_zero_points().numpy().astype(np.int32)
    else:
        raise PyTorchConvertError(f"module {prefix!r}: weight qscheme {w.qscheme()} is not "
                                  "supported")
    zp = const(zps.reshape(()) if zps.size == 1 else zps)
    return ctx.weight(prefix + ".weight", data), scales, zp


def _with_bias(ctx: _Ctx, n: Any, acc: RelayExpr, bias: Any, sx: float, sw: np.ndarray,
               axis: int) -> tuple[RelayExpr, np.ndarray]:
    """(acc + the float bias quantized to int32 at scale sx * sw, that scale)."""
    s_acc = np.float32(sx) * sw
    if bias is not None:
        b = bias.detach().numpy().astype(np.float32)
        bq = np.clip(np.rint(b / s_acc), -(2**31), 2**31 - 1).astype(np.int32)
        acc = nn.bias_add(acc, ctx.weight(_pname(n) + ".bias", bq), axis=axis)
    return acc, s_acc


def _vec(a: np.ndarray) -> RelayExpr:
    """A per-tensor (scalar) or per-channel (1-D) float32 parameter."""
    return const(a.astype(np.float32).reshape(()) if a.size == 1 else a.astype(np.float32))


def _bias_requant(ctx: _Ctx, n: Any, acc: RelayExpr, bias: Any, sx: float, sw: np.ndarray,
                  qy: QParams, relu: bool, axis: int) -> RelayExpr:
    """acc (+ the float bias quantized to int32 at scale sx * sw) requantized to ``qy``."""
    acc, s_acc = _with_bias(ctx, n, acc, bias, sx, sw, axis)
    y = qnn.requantize(acc, _vec(s_acc), const(np.int32(0)), *qy.consts(), axis=axis,
                       out_dtype=qy.dtype)
    return _relu_at_zp(y, qy) if relu else y


@dataclass
class _ConvParams:
    weight: Any  # quantized qint8 tensor, OIHW (OIW for 1-D)
    bias: Any  # float tensor or None
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int


def _conv_params(ctx: _Ctx, n: Any) -> _ConvParams:
    """From a quantized conv module, or from the packed weight (a get_attr) of a functional
    ``quantized.conv2d`` / ``conv2d_relu`` call."""
    if n.op == "call_module":
        m = ctx.module(n)
        if getattr(m, "padding_mode", "zeros") != "zeros":
            raise PyTorchConvertError(f"module {n.target!r}: padding_mode {m.padding_mode!r} "
                                      "is not supported (zeros only)")
        return _ConvParams(m.weight(), m.bias(), tuple(m.stride), tuple(m.padding),
                           tuple(m.dilation), int(m.groups))
    packed = ctx.values[n.args[1]]
    if packed.transpose():
        raise PyTorchConvertError(f"node {n.name!r}: transposed convolutions are not supported")
    w, b = packed.unpack()
    return _ConvParams(w, b, tuple(packed.stride()), tuple(packed.padding()),
                       tuple(packed.dilation()), int(packed.groups()))


def _kernel(w: Any, one_d: bool) -> list[int]:
    k = [int(d) for d in w.shape[2:]]
    return [1, *k] if one_d else k


def _conv_acc(ctx: _Ctx, n: Any) -> tuple[RelayExpr, np.ndarray]:
    """A quantized 1-D / 2-D convolution's int32 accumulator (NCHW; 1-D as H = 1) with its
    int32 bias, and the accumulator's scale (per output channel or one)."""
    x = n.args[0]
    qx = ctx.q(x)
    assert qx is not None
    p = _conv_params(ctx, n)
    w = p.weight
    if w.dim() not in (3, 4):
        raise PyTorchConvertError(f"node {n.name!r}: only 1-D and 2-D convolutions are "
                                  f"supported, got a {w.dim()}-D weight")
    wexpr, sw, zw = _qweight(ctx, n, w, 0)
    data = ctx.expr(x)
    one_d = w.dim() == 3

    def pair(v: tuple[int, ...], fill: int) -> tuple[int, ...]:
        return (fill, *v) if one_d else v

    if one_d:
        data = transform.expand_dims(data, 2)
        wexpr = transform.expand_dims(wexpr, 2)
    sx, zx = qx.consts()
    acc = qnn.conv2d(data, wexpr, zx, zw, sx, _vec(sw), kernel_size=tuple(_kernel(w, one_d)),
                     channels=int(w.shape[0]), strides=pair(p.stride, 1),
                     padding=pair(p.padding, 0), dilation=pair(p.dilation, 1), groups=p.groups)
    return _with_bias(ctx, n, acc, p.bias, qx.scale, sw, 1)


def _conv_out(ctx: _Ctx, n: Any, y: RelayExpr) -> RelayExpr:
    return transform.squeeze(y, [2]) if len(ctx.values[n].shape) == 3 else y


def _conv(relu: bool) -> Callable[[_Ctx, Any], RelayExpr]:
    def convert(ctx: _Ctx, n: Any) -> RelayExpr:
        qy = ctx.q(n)
        assert qy is not None
        acc, s_acc = _conv_acc(ctx, n)
        y = qnn.requantize(acc, _vec(s_acc), const(np.int32(0)), *qy.consts(), axis=1,
                           out_dtype=qy.dtype)
        return _conv_out(ctx, n, _relu_at_zp(y, qy) if relu else y)

    return convert


def _conv_transpose(ctx: _Ctx, n: Any) -> RelayExpr:
    """A quantized ConvTranspose2d: the float transposed convolution of the dequantized input
    and weight, quantized to the module's parameters (no integer transposed convolution in
    relay.qnn; FakeQuantizationToInteger leaves it float)."""
    m = ctx.module(n)
    x = n.args[0]
    qx, qy = ctx.q(x), ctx.q(n)
    assert qx is not None and qy is not None
    w = m.weight()
    if w.dim() != 4:
        raise PyTorchConvertError(f"module {n.target!r}: only 2-D transposed convolutions are "
                                  "supported")
    wexpr, sw, zw = _qweight(ctx, n, w, None)
    axis = int(w.q_per_channel_axis()) if sw.size > 1 else 0
    wf = qnn.dequantize(wexpr, _vec(sw), zw, axis=axis)
    groups = int(m.groups)
    y = nn.conv2d_transpose(qnn.dequantize(ctx.expr(x), *qx.consts()), wf,
                            strides=tuple(m.stride), padding=tuple(m.padding),
                            dilation=tuple(m.dilation), groups=groups,
                            channels=int(w.shape[1]) * groups, kernel_size=tuple(w.shape[2:]),
                            output_padding=tuple(m.output_padding))
    if m.bias() is not None:
        y = nn.bias_add(y, const(m.bias().detach().numpy().astype(np.float32)), axis=1)
    return qnn.quantize(y, *qy.consts(), out_dtype=qy.dtype)


def _conv_add(relu: bool) -> Callable[[_Ctx, Any], RelayExpr]:
    """onednn's ConvAdd2d / ConvAddReLU2d: ``quantize(conv + dequantize(extra))``, the sum in
    float32 (the conv itself stays an integer qnn.conv2d)."""

    def convert(ctx: _Ctx, n: Any) -> RelayExpr:
        qy, qe = ctx.q(n), ctx.q(n.args[1])
        assert qy is not None
        if qe is None:
            raise PyTorchConvertError(f"module {n.target!r}: the added input is not quantized")
        acc, s_acc = _conv_acc(ctx, n)
        v = tensor.add(qnn.dequantize(acc, _vec(s_acc), const(np.int32(0)), axis=1),
                       qnn.dequantize(ctx.expr(n.args[1]), *qe.consts()))
        if relu:
            v = nn.relu(v)
        return qnn.quantize(v, *qy.consts(), out_dtype=qy.dtype)

    return convert


def _linear(relu: bool) -> Callable[[_Ctx, Any], RelayExpr]:
    """A quantized Linear module, or a functional ``quantized.linear`` (packed weight)."""

    def convert(ctx: _Ctx, n: Any) -> RelayExpr:
        import torch

        x = n.args[0]
        qx, qy = ctx.q(x), ctx.q(n)
        assert qx is not None and qy is not None
        if n.op == "call_module":
            w, bias = ctx.module(n).weight(), ctx.module(n).bias()
        else:
            w, bias = torch.ops.quantized.linear_unpack(ctx.values[n.args[1]])
        wexpr, sw, zw = _qweight(ctx, n, w, 0)
        sx, zx = qx.consts()
        shape = list(ctx.values[x].shape)
        units, k = int(w.shape[0]), int(w.shape[1])
        if shape[-1] != k:  # torch's quantized linear runs anyway, reading past the row
            raise PyTorchConvertError(f"node {n.name!r}: the input has {shape[-1]} features, "
                                      f"the weight {k}")
        data = ctx.expr(x)
        if len(shape) != 2:
            data = transform.reshape(data, (-1, k))
        acc = qnn.dense(data, wexpr, zx, zw, sx, const(sw.reshape(()) if sw.size == 1 else sw),
                        units=units)
        y = _bias_requant(ctx, n, acc, bias, qx.scale, sw, qy, relu, 1)
        return y if len(shape) == 2 else transform.reshape(y, shape[:-1] + [units])

    return convert


def _batch_norm(relu: bool) -> Callable[[_Ctx, Any], RelayExpr]:
    """Quantized BatchNorm2d (not folded into a conv): dequantize, the per-channel affine map in
    float32, quantize."""

    def convert(ctx: _Ctx, n: Any) -> RelayExpr:
        m = ctx.module(n)
        x = n.args[0]
        qx, qy = ctx.q(x), ctx.q(n)
        assert qx is not None and qy is not None
        var_ = m.running_var.detach().numpy().astype(np.float64)
        mean = m.running_mean.detach().numpy().astype(np.float64)
        g = m.weight.detach().numpy() if m.weight is not None else np.ones_like(mean)
        b = m.bias.detach().numpy() if m.bias is not None else np.zeros_like(mean)
        a = g / np.sqrt(var_ + m.eps)
        shift = b - mean * a
        shape = [1, -1] + [1] * (len(ctx.values[x].shape) - 2)
        v = qnn.dequantize(ctx.expr(x), *qx.consts())
        v = tensor.add(tensor.multiply(v, const(a.astype(np.float32).reshape(shape))),
                       const(shift.astype(np.float32).reshape(shape)))
        if relu:
            v = nn.relu(v)
        return qnn.quantize(v, *qy.consts(), out_dtype=qy.dtype)

    return convert


def _reference(ctx: _Ctx, n: Any) -> RelayExpr:
    """A reference quantized Conv2d / Linear (``convert_to_reference_fx``; alone or fused with a
    ReLU): float in and out, its weight ``dequantize(int8 weight)``: the QDQ form, which
    relay.build's FakeQuantizationToInteger makes an integer product."""
    import torch

    m = ctx.module(n)
    relu = False
    if isinstance(m, torch.nn.Sequential):  # torch.ao.nn.intrinsic ConvReLU2d / LinearReLU
        parts = list(m)
        if len(parts) != 2 or not isinstance(parts[1], torch.nn.ReLU):
            raise PyTorchConvertError(f"module {n.target!r}: fused {type(m).__name__} with "
                                      f"{[type(p).__name__ for p in parts]} is not supported")
        m, relu = parts[0], True
    wq = m.get_quantized_weight()
    wexpr, sw, zw = _qweight(ctx, n, wq, 0)
    w = qnn.dequantize(wexpr, const(sw.reshape(()) if sw.size == 1 else sw), zw, axis=0)
    x = ctx.expr(n.args[0])
    shape = list(ctx.values[n.args[0]].shape)
    if wq.dim() == 4:
        if getattr(m, "padding_mode", "zeros") != "zeros" or isinstance(m.padding, str):
            raise PyTorchConvertError(f"module {n.target!r}: padding {m.padding!r} / "
                                      f"{m.padding_mode!r} is not supported")
        y = nn.conv2d(x, w, strides=tuple(m.stride), padding=tuple(m.padding),
                      dilation=tuple(m.dilation), groups=int(m.groups),
                      channels=int(wq.shape[0]), kernel_size=tuple(wq.shape[2:]))
        axis = 1
    elif wq.dim() == 2:
        y = nn.dense(x if len(shape) == 2 else transform.reshape(x, (-1, shape[-1])), w,
                     units=int(wq.shape[0]))
        axis = 1
    else:
        raise PyTorchConvertError(f"module {n.target!r}: a {wq.dim()}-D weight is not supported")
    if m.bias is not None:
        y = nn.bias_add(y, ctx.weight(_pname(n) + ".bias",
                                      m.bias.detach().numpy().astype(np.float32)), axis=axis)
    if relu:
        y = nn.relu(y)
    if wq.dim() == 2 and len(shape) != 2:
        y = transform.reshape(y, shape[:-1] + [int(wq.shape[0])])
    return y


def _is_reference(ctx: _Ctx, n: Any) -> bool:
    m = ctx.module(n)
    inner = list(m)[0] if hasattr(m, "__getitem__") and len(list(m)) else m
    return type(inner).__module__.startswith(_REFERENCE) and type(inner).__name__ in (
        "Conv2d", "Linear")


def _quantize(ctx: _Ctx, n: Any) -> RelayExpr:
    q = ctx.q(n)
    assert q is not None
    x = n.args[0]
    if ctx.q(x) is not None:
        raise PyTorchConvertError(f"node {n.name!r}: quantizing a quantized tensor")
    return qnn.quantize(ctx.expr(x), *q.consts(), out_dtype=q.dtype)


def _dequantize(ctx: _Ctx, n: Any) -> RelayExpr:
    x = n.args[0]
    q = ctx.q(x)
    if q is None:
        return ctx.expr(x)
    return qnn.dequantize(ctx.expr(x), *q.consts())


def _binary(fn: Callable[..., RelayExpr], relu: bool) -> Callable[[_Ctx, Any], RelayExpr]:
    def convert(ctx: _Ctx, n: Any) -> RelayExpr:
        a, b = n.args[0], n.args[1]
        qa, qb, qy = ctx.q(a), ctx.q(b), ctx.q(n)
        if qa is None or qb is None or qy is None or qa.dtype != qb.dtype:
            raise PyTorchConvertError(f"node {n.name!r}: {n.target} needs two quantized "
                                      "tensors of one dtype")
        y = fn(ctx.expr(a), ctx.expr(b), *qa.consts(), *qb.consts(), *qy.consts())
        return _relu_at_zp(y, qy) if relu else y

    return convert


def _cat(ctx: _Ctx, n: Any) -> RelayExpr:
    xs = list(_arg(n, 0, "tensors", None) or _arg(n, 0, "qx"))
    dim = int(_arg(n, 1, "dim", 0))
    qs = [ctx.q(x) for x in xs]
    qy = ctx.q(n)
    if qy is None or any(q is None or q.dtype != qy.dtype for q in qs):
        raise PyTorchConvertError(f"node {n.name!r}: cat of quantized and float tensors")
    rank = len(ctx.values[n].shape)
    consts = [q.consts() for q in qs if q is not None]
    return qnn.concatenate([ctx.expr(x) for x in xs], [s for s, _ in consts],
                           [z for _, z in consts], *qy.consts(), dim % rank)


def _relu(ctx: _Ctx, n: Any) -> RelayExpr:
    q = ctx.q(n)
    assert q is not None
    return _relu_at_zp(ctx.expr(n.args[0]), q)


@dataclass(frozen=True)
class _Dedicated:
    """A converter of a quantization op or quantized module, taken when the node's output or an
    input is quantized and ``applies(ctx, node)``; otherwise the node takes the generic path."""

    convert: Callable[[_Ctx, Any], RelayExpr]
    applies: Callable[[_Ctx, Any], bool] = lambda ctx, n: True
    floats: bool = False  # taken on float values too (reference modules)


def _two_tensors(ctx: _Ctx, n: Any) -> bool:
    import torch.fx

    return isinstance(n.args[1], torch.fx.Node) and ctx.q(n.args[1]) is not None


def _keeps_params(ctx: _Ctx, n: Any) -> bool:
    return ctx.q(n.args[0]) is not None and ctx.q(n.args[0]) == ctx.q(n)


@functools.cache
def _dedicated() -> dict[Any, _Dedicated]:
    import torch
    import torch.ao.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq

    qops = torch.ops.quantized
    d = _Dedicated
    table: dict[Any, _Dedicated] = {
        torch.quantize_per_tensor: d(_quantize), nnq.Quantize: d(_quantize),
        "method.dequantize": d(_dequantize), torch.dequantize: d(_dequantize),
        nnq.DeQuantize: d(_dequantize),
        nnq.Conv1d: d(_conv(False)), nniq.ConvReLU1d: d(_conv(True)),
        nnq.Conv2d: d(_conv(False)), nniq.ConvReLU2d: d(_conv(True)),
        nnq.ConvTranspose2d: d(_conv_transpose),
        nniq.ConvAdd2d: d(_conv_add(False)), nniq.ConvAddReLU2d: d(_conv_add(True)),
        nnq.Linear: d(_linear(False)), nniq.LinearReLU: d(_linear(True)),
        nnq.BatchNorm2d: d(_batch_norm(False)), nniq.BNReLU2d: d(_batch_norm(True)),
        qops.conv2d: d(_conv(False)), qops.conv2d_relu: d(_conv(True)),
        qops.linear: d(_linear(False)), qops.linear_relu: d(_linear(True)),
        qops.add: d(_binary(qnn.add, False), _two_tensors),
        qops.add_relu: d(_binary(qnn.add, True), _two_tensors),
        qops.mul: d(_binary(qnn.mul, False), _two_tensors),
        qops.mul_relu: d(_binary(qnn.mul, True), _two_tensors),
        qops.cat: d(_cat), torch.cat: d(_cat),
    }  # fmt: skip
    import torch.ao.nn.intrinsic as nni
    import torch.ao.nn.quantized.reference as nnqr

    for k in (nnqr.Conv2d, nnqr.Linear, nni.ConvReLU2d, nni.LinearReLU):
        table[k] = d(_reference, _is_reference, floats=True)
    for k in (torch.relu, torch.relu_, torch.nn.functional.relu, "method.relu", "method.relu_",
              torch.nn.ReLU):
        table[k] = d(_relu, _keeps_params)
    return table


@functools.cache
def _passthrough() -> set:
    """Data-movement ops: on a quantized tensor whose parameters they keep, the float program
    applies to the integers as it is."""
    import torch

    F = torch.nn.functional
    return {operator.getitem, torch.flatten, torch.reshape, torch.permute, torch.transpose,
            torch.squeeze, torch.unsqueeze, torch.chunk, torch.split, F.max_pool2d,
            torch.max_pool2d, F.dropout, F.pixel_shuffle, F.pixel_unshuffle,
            torch.nn.MaxPool2d, torch.nn.Flatten, torch.nn.Unflatten, torch.nn.Identity,
            torch.nn.Dropout, torch.nn.PixelShuffle, torch.nn.PixelUnshuffle,
            *(f"method.{m}" for m in ("flatten", "view", "reshape", "permute", "transpose",
                                      "contiguous", "squeeze", "unsqueeze", "chunk", "split",
                                      "detach", "clone", "expand", "repeat", "narrow"))}


def _float_equivalent(ctx: _Ctx, n: Any) -> Callable[..., Any] | None:
    """The float function computing what a quantized module / quantized op computes (called
    with the node's arguments less trailing output scale / zero point), or None."""
    import torch
    import torch.ao.nn.quantized as nnq

    F = torch.nn.functional
    qops = torch.ops.quantized
    if n.op == "call_module":
        m = ctx.module(n)
        if not _is_qmodule(m):
            return m
        by_type: dict[Any, Callable[[Any], Callable[..., Any]]] = {
            nnq.Hardswish: lambda m: F.hardswish,
            nnq.ReLU6: lambda m: F.relu6,
            nnq.ELU: lambda m: functools.partial(F.elu, alpha=m.alpha),
            nnq.LeakyReLU: lambda m: functools.partial(F.leaky_relu,
                                                       negative_slope=m.negative_slope),
            nnq.Sigmoid: lambda m: torch.sigmoid,
            nnq.Softmax: lambda m: functools.partial(F.softmax, dim=m.dim),
            nnq.Dropout: lambda m: (lambda x: x),
            nnq.LayerNorm: lambda m: functools.partial(
                F.layer_norm, normalized_shape=m.normalized_shape, weight=m.weight,
                bias=m.bias, eps=m.eps),
            nnq.GroupNorm: lambda m: functools.partial(
                F.group_norm, num_groups=m.num_groups, weight=m.weight, bias=m.bias, eps=m.eps),
            nnq.InstanceNorm2d: lambda m: functools.partial(
                F.instance_norm, weight=m.weight, bias=m.bias, eps=m.eps),
        }
        make = by_type.get(type(m))
        return None if make is None else make(m)
    if n.op == "call_function" and _is_quantized_op(n.target):
        qa = ctx.q(n.args[0])

        def on_grid(b: Any) -> Any:
            """torch adds a scalar rounded to the input's scale (integer addition)."""
            if qa is None or not isinstance(b, (int, float)):
                return b
            return float(np.round(b / qa.scale)) * qa.scale

        def binary(fn: Callable[[Any, Any], Any]) -> Callable[..., Any]:
            """fn on the two operands; the output scale / zero point arguments dropped."""
            return lambda a, b, *args, **kwargs: fn(a, b)

        ops: dict[Any, Callable[..., Any]] = {
            qops.add: binary(lambda a, b: a + on_grid(b)), qops.mul: binary(torch.mul),
            qops.add_relu: binary(lambda a, b: torch.relu(a + on_grid(b))),
            qops.mul_relu: binary(lambda a, b: torch.relu(a * b)),
            qops.matmul: binary(torch.matmul),
            qops.add_scalar: binary(lambda a, b: a + on_grid(b)), qops.mul_scalar: binary(torch.mul),
            qops.add_scalar_relu: binary(lambda a, b: torch.relu(a + on_grid(b))),
            qops.mul_scalar_relu: binary(lambda a, b: torch.relu(a * b)),
        }
        return ops.get(n.target)
    if n.op == "call_method":
        name = str(n.target)
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    return n.target


def _is_quantized_op(target: Any) -> bool:
    import torch

    name = getattr(target, "_qualified_op_name", None) or getattr(target, "__name__", "")
    return isinstance(target, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)) and (
        str(name).startswith("quantized::") or str(target).startswith("quantized."))


# ------------------------------------------------------------------------------------------------
# the generic path: one node exported alone, converted by the ATen converters
@dataclass
class _Slot:
    index: int


def _fill(v: Any, ts: Sequence[Any]) -> Any:
    if isinstance(v, _Slot):
        return ts[v.index]
    if isinstance(v, list):
        return [_fill(x, ts) for x in v]
    if isinstance(v, tuple):
        return tuple(_fill(x, ts) for x in v)
    if isinstance(v, dict):
        return {k: _fill(x, ts) for k, x in v.items()}
    return v


@dataclass
class _Plan:
    """How one node is converted: a dedicated converter, or an exported float program with the
    node's tensor inputs in ``inputs`` (mode "float": quantized inputs dequantized and quantized
    outputs quantized; "int": the program applied to the integers)."""

    dedicated: Callable[[_Ctx, Any], Any] | None = None
    program: Any = None
    inputs: list | None = None
    mode: str = "float"


def _export_node(ctx: _Ctx, n: Any, fn: Callable[..., Any]) -> tuple[Any, list]:
    import torch
    import torch.fx

    tensor_inputs: list = []

    def template(v: Any) -> Any:
        if isinstance(v, torch.fx.Node):
            val = ctx.values[v]
            if _is_tensor(val):
                tensor_inputs.append(v)
                return _Slot(len(tensor_inputs) - 1)
            return val
        if isinstance(v, (list, tuple)):
            return type(v)(template(x) for x in v)
        if isinstance(v, dict):
            return {k: template(x) for k, x in v.items()}
        return v

    args, kwargs = template(n.args), template(n.kwargs)
    examples = tuple(ctx.values[t].dequantize() if ctx.q(t) else ctx.values[t]
                     for t in tensor_inputs)

    class _Call(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, *ts: Any) -> Any:
            return self.fn(*_fill(args, ts), **_fill(kwargs, ts))

    return torch.export.export(_Call().eval(), examples), tensor_inputs


def _plan(ctx: _Ctx, n: Any, missing: dict[str, list[str]]) -> _Plan | None:
    from .importer import prepare_program

    val = ctx.values[n]
    if not _tensors_of(val):
        return None  # a python value (a size, a shape): used as it is
    ins = _input_nodes(n)
    quantized = [i for i in ins if _tensors_of(ctx.values.get(i)) and _any_q(ctx.values[i])]
    out_q = _any_q(val)
    key = _key(ctx, n)
    if n.target is operator.getitem and isinstance(ctx.values[n.args[0]], (list, tuple)):
        return _Plan(dedicated=_pick)
    ded = _dedicated().get(key)
    if ded is not None and (quantized or out_q or ded.floats) and ded.applies(ctx, n):
        return _Plan(dedicated=ded.convert)
    fn = _float_equivalent(ctx, n)
    if fn is None:
        missing.setdefault(_describe(ctx, n), []).append(n.name)
        return None
    try:
        ep, inputs = _export_node(ctx, n, fn)
        ep, miss = prepare_program(ep, ctx.table)
    except Exception as e:  # torch.export's own error, reported with the others
        first = (str(e).strip().splitlines() or [""])[0][:120]
        missing.setdefault(f"{_describe(ctx, n)} (torch.export: {type(e).__name__}: {first})",
                           []).append(n.name)
        return None
    for op, _names in miss.items():
        missing.setdefault(op, []).append(n.name)
    mode = "float"
    if key in _passthrough() and quantized and out_q and _single_q(ctx, quantized, val):
        mode = "int"
    return _Plan(program=ep, inputs=inputs, mode=mode)


def _any_q(v: Any) -> bool:
    vs = v if isinstance(v, (list, tuple)) else [v]
    return any(_is_tensor(x) and x.is_quantized for x in vs)


def _single_q(ctx: _Ctx, quantized: list, val: Any) -> bool:
    """One quantized input, whose parameters every output keeps."""
    if len({id(i) for i in quantized}) != 1:
        return False
    q = ctx.q(quantized[0])
    outs = val if isinstance(val, (list, tuple)) else [val]
    return all(_qparams(o) == q for o in outs)


def _pick(ctx: _Ctx, n: Any) -> Any:
    return ctx.expr(n.args[0])[n.args[1]]


def _run_plan(ctx: _Ctx, n: Any, p: _Plan) -> Any:
    from .importer import convert_program

    if p.dedicated is not None:
        return p.dedicated(ctx, n)
    assert p.inputs is not None
    ins = []
    for i in p.inputs:
        e, q = ctx.expr(i), ctx.q(i)
        ins.append(qnn.dequantize(e, *q.consts()) if q is not None and p.mode == "float" else e)
    outs = convert_program(p.program, ins, ctx.table)
    val = ctx.values[n]
    vals = list(val) if isinstance(val, (list, tuple)) else [val]
    if p.mode == "float":
        for k, v in enumerate(vals):
            q = _qparams(v)
            if q is not None:
                outs[k] = qnn.quantize(outs[k], *q.consts(), out_dtype=q.dtype)
    return outs if isinstance(val, (list, tuple)) else outs[0]


# ------------------------------------------------------------------------------------------------
# entry
def _graph_module(model: Any) -> Any:
    import torch

    if isinstance(model, torch.fx.GraphModule):
        return model
    try:
        return torch.fx.symbolic_trace(model)
    except Exception as e:
        raise ValueError(f"from_pytorch: the quantized model could not be traced with "
                         f"torch.fx.symbolic_trace: {type(e).__name__}: {e}") from e


def from_pytorch_quantized(model: Any, infos: list[tuple[str, list[int], str]],
                           freeze_params: bool = True,
                           custom_convert_map: Mapping[Any, Callable] | None = None
                           ) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Convert a torch.ao quantized model (see the module docstring); ``infos`` as parsed by
    ``from_pytorch``. Quantized weights (int8) and int32 biases are Constants, or with
    ``freeze_params=False`` parameters named ``"<module>.weight"`` / ``"<module>.bias"``."""
    import torch

    from ...transform import InferType
    from .importer import _converter_table, _example

    if model.training:
        raise ValueError("from_pytorch: the model is in training mode: call model.eval() first")
    gm = _graph_module(model)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(infos):
        raise ValueError(f"from_pytorch: input_infos has {len(infos)} entries "
                         f"{[n for n, _, _ in infos]}, the quantized model takes "
                         f"{len(placeholders)} inputs {[p.name for p in placeholders]}")
    gen = torch.Generator().manual_seed(0)
    example = [torch.randn(s, generator=gen).to(getattr(torch, d)) if d.startswith("float")
               else _example(torch, s, d) for _, s, d in infos]
    try:
        values = _record(gm, example)
    except Exception as e:
        raise ValueError(f"from_pytorch: running the quantized model on inputs "
                         f"{[(n, s, d) for n, s, d in infos]} failed: {type(e).__name__}: "
                         f"{e}") from e
    ctx = _Ctx(gm, values, _converter_table(custom_convert_map), freeze_params)

    # plan every node first: one error for everything unsupported
    missing: dict[str, list[str]] = {}
    plans: dict[Any, _Plan | None] = {}
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method", "call_module"):
            try:
                plans[n] = _plan(ctx, n, missing)
            except PyTorchConvertError as e:
                missing.setdefault(f"{_describe(ctx, n)} ({e})", []).append(n.name)
    if missing:
        raise unsupported_error("from_pytorch", missing)

    inputs = []
    for n, (name, shape, dtype) in zip(placeholders, infos):
        ctx.env[n] = var(name, shape=shape, dtype=dtype)
        inputs.append(ctx.env[n])
    out_node = None
    for n in gm.graph.nodes:
        if n.op == "get_attr" and _is_tensor(values.get(n)) and not values[n].is_quantized:
            ctx.env[n] = const(values[n].detach().numpy().copy())
        elif n.op == "output":
            out_node = n
        elif plans.get(n) is not None:
            plan = plans[n]
            assert plan is not None
            ctx.env[n] = _run_plan(ctx, n, plan)
    assert out_node is not None
    outs = _input_nodes(out_node)  # a tensor, or the tensors of a (nested) tuple / list / dict
    exprs = [ctx.expr(o) for o in outs]
    body = exprs[0] if len(exprs) == 1 else Tuple(exprs)
    mod = InferType()(IRModule.from_expr(Function(inputs + ctx.param_vars, body)))
    _check_outputs(mod, [values[o] for o in outs], [o.name for o in outs])
    return mod, ctx.params


def _check_outputs(mod: IRModule, vals: list, names: list[str]) -> None:
    from ...ty import TupleType

    ret = mod["main"].body.checked_type
    types = list(ret.fields) if isinstance(ret, TupleType) else [ret]
    for name, v, t in zip(names, vals, types):
        q = _qparams(v)
        want = ([int(d) for d in v.shape], q.dtype if q is not None else np_dtype(v.dtype))
        got = ([int(d) for d in t.shape], str(t.dtype))
        if got != want:
            raise PyTorchConvertError(f"from_pytorch: output {name!r} converted to "
                                      f"{got[1]}{got[0]}, torch gives {want[1]}{want[0]}")
