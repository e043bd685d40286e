"""FakeQuantizationToInteger (TVM's name): ``dequantize -> float ops -> quantize`` regions, as
ONNX QDQ graphs express quantized models, rewritten into QNN operators on the integer tensors.

What it does
For each ``qnn.quantize`` the region above it is walked back to ``qnn.dequantize`` leaves; each
float operator maps to an integer one carrying (expression, scale, zero point, dtype, channel
axis):

* products: ``nn.conv2d`` / ``nn.dense`` / ``nn.batch_matmul`` of two dequantized 8-bit tensors
  -> ``qnn.conv2d`` / ``qnn.dense`` / ``qnn.batch_matmul`` (int32, scale ``s_a * s_b``, per
  output channel for per-channel weights);
* a bias added to such an accumulator (``nn.bias_add`` / ``add`` of a dequantized int32 or float
  constant) -> an int32 add (the constant requantized to the accumulator's scale);
* order-preserving ops on the integers themselves: ``nn.max_pool2d``, ``reshape``,
  ``transpose``, ``nn.batch_flatten``, ``squeeze``, ``expand_dims``, ``strided_slice``,
  ``nn.pad`` (constant: the pad value quantized); ``nn.relu`` / ``clip``
  become a clamp applied after the final requantization (exact: quantization is monotonic);
* operators that need the output's parameters, directly under the quantize: ``add``,
  ``multiply``, ``subtract``, ``concatenate``, ``sigmoid``, ``nn.leaky_relu``,
  ``nn.avg_pool2d``, ``nn.global_avg_pool2d`` -> the QNN op with the quantize's scale/zp;
  optionally (``optional_qnn_ops``) ``nn.softmax`` -> ``qnn.softmax``.

When valid
The region's result is requantized (``qnn.requantize``) to the quantize's parameters. A region
containing anything else is left as it is (it runs in float through the dequantize/quantize
canonicalization). ``relay.build`` runs this pass before ``CanonicalizeOps`` when a module has
QNN calls; the ONNX importer itself keeps the QDQ form (so the interpreter runs ONNX's
definition).

Example
    before:  qnn.quantize(nn.relu(nn.conv2d(qnn.dequantize(%x, 0.1f, 0), qnn.dequantize(%W, 0.2f, 0))),
             0.3f, 0)
    after:   %0 = qnn.conv2d(%x, %W, 0, 0, 0.1f, 0.2f);
             clip(qnn.requantize(%0, multiply(0.1f, 0.2f), 0, 0.3f, 0), a_max=127.0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..expr import Call, RelayExpr, Tuple, const
from ..op import nn, tensor
from ..op.registry import Op
from ..transform.pass_infra import FunctionPass
from ..visitor import ExprMutator
from . import op as qnn
from .canonicalize import const_value

__all__ = ["FakeQuantizationToInteger"]


@dataclass(frozen=True)
class QValue:
    """An integer tensor ``expr`` whose real value is ``scale * (expr - zp)``; ``axis`` is the
    channel axis of per-channel parameters (-1 when per tensor); ``clamp``: a float range still
    to apply (from relu / clip) after the final requantization."""

    expr: RelayExpr
    scale: RelayExpr
    zp: RelayExpr
    dtype: str
    ndim: int
    axis: int = -1
    clamp: tuple[float, float] | None = None


def _name(e: Any) -> str | None:
    return e.op.name if isinstance(e, Call) and isinstance(e.op, Op) else None


def _per_channel(e: RelayExpr) -> bool:
    shape = e.checked_type.shape if hasattr(e, "checked_type") else ()
    return bool(shape) and int(np.prod([int(d) for d in shape])) > 1


def _num(e: RelayExpr) -> np.ndarray | None:
    v = const_value(e)
    return None if v is None else np.asarray(v)


_I8 = ("int8", "uint8")


class _Rewriter(ExprMutator):
    def __init__(self, optional: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.qmemo: dict[int, QValue | None] = {}
        self.optional = optional

    # -- the region above one quantize --------------------------------------------------------
    def visit_call(self, c: Call) -> RelayExpr:
        if _name(c) == "qnn.quantize":
            out = self._quantize(c)
            if out is not None:
                return out
        return super().visit_call(c)

    def _quantize(self, q: Call) -> RelayExpr | None:
        inner, so, zo = q.args
        if _per_channel(so) or _per_channel(zo):
            return None
        so_v, zo_v = self.visit(so), self.visit(zo)
        dtype = q.attrs.out_dtype
        term = self._terminal(inner, so_v, zo_v, dtype)
        if term is not None:
            return term
        v = self.rewrite(inner)
        if v is None or (v.clamp is not None and (_num(so) is None or _num(zo) is None)):
            return None
        out = self._requantize(v, so_v, zo_v, dtype)
        if v.clamp is not None:
            out = self._apply_clamp(out, v.clamp, so, zo, dtype)
        return out

    def _requantize(self, v: QValue, so: RelayExpr, zo: RelayExpr, dtype: str) -> RelayExpr:
        if v.dtype == dtype and v.axis < 0:
            a, b = _num(v.scale), _num(so)
            za, zb = _num(v.zp), _num(zo)
            if (a is not None and b is not None and za is not None and zb is not None
                    and np.float32(a) == np.float32(b) and int(za) == int(zb)):
                return v.expr
        return qnn.requantize(v.expr, v.scale, v.zp, so, zo, axis=v.axis, out_dtype=dtype)

    @staticmethod
    def _apply_clamp(out: RelayExpr, clamp: tuple[float, float], so: RelayExpr, zo: RelayExpr,
                     dtype: str) -> RelayExpr:
        s, z = _num(so), _num(zo)
        if s is None or z is None:
            raise ValueError("a clamp needs constant output parameters")
        info = np.iinfo(np.dtype(dtype))

        def q(v: float) -> float:
            if np.isinf(v):
                return float(info.max if v > 0 else info.min)
            r = np.rint(np.float32(v) / np.float32(s)) + float(z)
            return float(np.clip(r, info.min, info.max))

        lo, hi = q(clamp[0]), q(clamp[1])
        if lo <= info.min and hi >= info.max:
            return out
        return tensor.clip(out, lo, hi)

    # -- operators that need the output parameters ---------------------------------------------
    def _terminal(self, e: RelayExpr, so: RelayExpr, zo: RelayExpr, dtype: str
                  ) -> RelayExpr | None:
        name = _name(e)
        assert name is None or isinstance(e, Call)
        if name in ("add", "multiply", "subtract"):
            a, b = self.rewrite(e.args[0]), self.rewrite(e.args[1])
            if not _plain(a, dtype) or not _plain(b, dtype):
                return None
            assert a is not None and b is not None
            fn = {"add": qnn.add, "multiply": qnn.mul, "subtract": qnn.subtract}[name]
            return fn(a.expr, b.expr, a.scale, a.zp, b.scale, b.zp, so, zo,
                      lhs_axis=a.axis, rhs_axis=b.axis)
        if name == "concatenate" and isinstance(e.args[0], Tuple):
            vs = [self.rewrite(f) for f in e.args[0].fields]
            if not all(_plain(v, dtype) and v.axis < 0 for v in vs):  # type: ignore[union-attr]
                return None
            return qnn.concatenate([v.expr for v in vs], [v.scale for v in vs],  # type: ignore
                                   [v.zp for v in vs], so, zo, e.attrs.axis)  # type: ignore
        unary: dict[str, Callable[..., RelayExpr]] = {
            "sigmoid": lambda v: qnn.sigmoid(v.expr, v.scale, v.zp, so, zo),
            "nn.leaky_relu": lambda v: qnn.leaky_relu(v.expr, e.attrs.alpha, v.scale, v.zp, so,
                                                      zo),
            "nn.avg_pool2d": lambda v: qnn.avg_pool2d(
                v.expr, v.scale, v.zp, so, zo, e.attrs.pool_size, e.attrs.strides,
                e.attrs.padding, e.attrs.dilation, e.attrs.ceil_mode, e.attrs.count_include_pad,
                e.attrs.layout),
            "nn.global_avg_pool2d": lambda v: qnn.global_avg_pool2d(
                v.expr, v.scale, v.zp, so, zo, e.attrs.layout),
        }
        if name == "nn.softmax" and name in self.optional:
            v = self.rewrite(e.args[0])
            if not _plain(v, dtype) or v.axis >= 0 or _num(v.scale) is None:  # type: ignore
                return None
            assert v is not None
            return qnn.softmax(v.expr, v.scale, v.zp, so, zo, axis=e.attrs.axis)
        if name in unary:
            if name.endswith("pool2d") and e.attrs.layout != "NCHW":
                return None
            v = self.rewrite(e.args[0])
            if not _plain(v, dtype) or v.axis >= 0:  # type: ignore[union-attr]
                return None
            return unary[name](v)
        return None

    # -- the integer form of one float expression ------------------------------------------------
    def rewrite(self, e: RelayExpr) -> QValue | None:
        key = id(e)
        if key not in self.qmemo:
            self.qmemo[key] = self._rewrite(e)
        return self.qmemo[key]

    def _rewrite(self, e: RelayExpr) -> QValue | None:
        name = _name(e)
        if name is None:
            return None
        assert isinstance(e, Call)
        rule = _RULES.get(name)
        return rule(self, e) if rule is not None else None


def _plain(v: QValue | None, dtype: str) -> bool:
    """An 8/16-bit tensor of ``dtype`` with no pending clamp."""
    return v is not None and v.dtype == dtype and v.clamp is None


_RULES: dict[str, Callable[[_Rewriter, Call], QValue | None]] = {}


def _rule(*names: str):
    def deco(f):
        for n in names:
            _RULES[n] = f
        return f

    return deco


@_rule("qnn.dequantize")
def _dequantize(r: _Rewriter, c: Call) -> QValue | None:
    x, s, z = c.args
    t = x.checked_type
    if c.attrs.out_dtype != "float32" or t.dtype not in ("int8", "uint8", "int32"):
        return None
    nd = len(t.shape)
    axis = c.attrs.axis % nd if _per_channel(s) or _per_channel(z) else -1
    return QValue(r.visit(x), r.visit(s), r.visit(z), t.dtype, nd, axis)


def _product_args(r: _Rewriter, c: Call, weight_axis: int) -> tuple[QValue, QValue] | None:
    if c.attrs.get("out_dtype", "") not in ("", "float32"):
        return None
    a, b = r.rewrite(c.args[0]), r.rewrite(c.args[1])
    if a is None or b is None or a.dtype not in _I8 or b.dtype not in _I8:
        return None
    if a.axis >= 0 or a.clamp is not None or b.clamp is not None:
        return None
    if b.axis >= 0 and b.axis != weight_axis:
        return None
    return a, b


@_rule("nn.conv2d")
def _conv2d(r: _Rewriter, c: Call) -> QValue | None:
    at = c.attrs
    if at.data_layout != "NCHW" or at.kernel_layout not in ("OIHW", ""):
        return None
    ab = _product_args(r, c, 0)
    if ab is None:
        return None
    a, b = ab
    kw = {k: at[k] for k in ("strides", "padding", "dilation", "groups", "channels",
                             "kernel_size")}
    y = qnn.conv2d(a.expr, b.expr, a.zp, b.zp, a.scale, b.scale, **kw)
    return QValue(y, tensor.multiply(a.scale, b.scale), const(0, "int32"), "int32", 4,
                  1 if b.axis >= 0 else -1)


@_rule("nn.dense")
def _dense(r: _Rewriter, c: Call) -> QValue | None:
    ab = _product_args(r, c, 0)
    if ab is None:
        return None
    a, b = ab
    y = qnn.dense(a.expr, b.expr, a.zp, b.zp, a.scale, b.scale, units=c.attrs.units)
    return QValue(y, tensor.multiply(a.scale, b.scale), const(0, "int32"), "int32", a.ndim,
                  a.ndim - 1 if b.axis >= 0 else -1)


@_rule("nn.batch_matmul")
def _batch_matmul(r: _Rewriter, c: Call) -> QValue | None:
    ab = _product_args(r, c, -2)  # per-tensor only
    if ab is None or ab[1].axis >= 0:
        return None
    a, b = ab
    y = qnn.batch_matmul(a.expr, b.expr, a.zp, b.zp, a.scale, b.scale,
                         transpose_a=c.attrs.transpose_a, transpose_b=c.attrs.transpose_b)
    return QValue(y, tensor.multiply(a.scale, b.scale), const(0, "int32"), "int32", 3)


def _bias_to_acc(r: _Rewriter, acc: QValue, bias: RelayExpr, axis: int) -> RelayExpr | None:
    """``bias`` (float; broadcasting along ``axis`` of the accumulator, or a scalar) as int32
    in the accumulator's scale: the dequantized int32 itself when the scales agree, else a
    constant rounded to it."""
    s_acc = _num(acc.scale)
    if s_acc is None:
        return None
    bt = bias.checked_type
    if len(bt.shape) > 1:
        return None
    s_acc = s_acc.astype(np.float32).reshape(-1)
    if s_acc.size > 1 and acc.axis != axis:
        return None
    bq = r.rewrite(bias)
    if bq is not None and bq.dtype == "int32" and bq.clamp is None:
        s_b, z_b = _num(bq.scale), _num(bq.zp)
        if (s_b is not None and z_b is not None and not np.any(z_b)
                and np.array_equal(np.broadcast_to(s_b.astype(np.float32).reshape(-1),
                                                   np.broadcast_shapes(s_b.reshape(-1).shape,
                                                                       s_acc.shape)),
                                   np.broadcast_to(s_acc, np.broadcast_shapes(
                                       s_b.reshape(-1).shape, s_acc.shape)))):
            return bq.expr
    val = const_value(bias)
    if val is None:
        return None
    q = np.rint(val.astype(np.float64) / s_acc.astype(np.float64))
    return const(np.clip(q, -(2**31), 2**31 - 1).astype(np.int32))


@_rule("nn.bias_add", "add")
def _bias_add(r: _Rewriter, c: Call) -> QValue | None:
    a = r.rewrite(c.args[0])
    other = c.args[1]
    if (a is None or a.dtype != "int32") and _name(c) == "add":
        a, other = r.rewrite(c.args[1]), c.args[0]
    if a is None or a.dtype != "int32" or a.clamp is not None:
        return None
    if _name(c) == "nn.bias_add":
        axis = c.attrs.axis % a.ndim
        b = _bias_to_acc(r, a, other, axis)
        return None if b is None else QValue(nn.bias_add(a.expr, b, axis=axis), a.scale, a.zp,
                                             "int32", a.ndim, a.axis)
    ot = other.checked_type
    if len(ot.shape) > 1 or (ot.shape and a.axis >= 0 and a.axis != a.ndim - 1):
        return None
    b = _bias_to_acc(r, a, other, a.ndim - 1)
    return None if b is None else QValue(tensor.add(a.expr, b), a.scale, a.zp, "int32", a.ndim,
                                         a.axis)


def _same(fn: Callable[[RelayExpr, Call], RelayExpr], axis_map: Callable[..., int] | None = None):
    """An op applied to the integers, parameters unchanged (per tensor, or a mapped axis)."""

    def rule(r: _Rewriter, c: Call) -> QValue | None:
        v = r.rewrite(c.args[0])
        if v is None:
            return None
        out_nd = len(c.checked_type.shape)
        axis = -1
        if v.axis >= 0:
            axis = axis_map(v, c) if axis_map is not None else -1
            if axis < 0:
                return None
        return QValue(fn(v.expr, c), v.scale, v.zp, v.dtype, out_nd, axis, v.clamp)

    return rule


def _transpose_axis(v: QValue, c: Call) -> int:
    axes = c.attrs.axes
    perm = list(axes) if axes is not None else list(range(v.ndim))[::-1]
    return [p % v.ndim for p in perm].index(v.axis)


def _last_axis_kept(v: QValue, c: Call) -> int:
    """A reshape keeps a per-channel last axis when the last dimension is unchanged."""
    ins, outs = c.args[0].checked_type.shape, c.checked_type.shape
    if v.axis == v.ndim - 1 and outs and int(ins[-1]) == int(outs[-1]):
        return len(outs) - 1
    return -1


def _recall(x: RelayExpr, c: Call) -> RelayExpr:
    """The same operator call on the integer tensor."""
    return Call(c.op, [x], c.attrs)


_RULES["reshape"] = _same(_recall, _last_axis_kept)
_RULES["transpose"] = _same(_recall, _transpose_axis)
for _n in ("nn.batch_flatten", "squeeze", "expand_dims", "strided_slice"):
    _RULES[_n] = _same(_recall)


@_rule("nn.pad")
def _pad(r: _Rewriter, c: Call) -> QValue | None:
    """A constant pad of the real value v pads the integers with round(v / s) + zp."""
    v = r.rewrite(c.args[0])
    if v is None or v.axis >= 0 or c.attrs.pad_mode != "constant":
        return None
    s, z = _num(v.scale), _num(v.zp)
    if s is None or z is None:
        return None
    info = np.iinfo(np.dtype(v.dtype))
    q = np.clip(np.rint(np.float32(c.attrs.pad_value) / np.float32(s)) + float(z), info.min,
                info.max)
    y = nn.pad(v.expr, c.attrs.pad_width, pad_value=float(q))
    return QValue(y, v.scale, v.zp, v.dtype, v.ndim, -1, v.clamp)


@_rule("nn.max_pool2d")
def _max_pool2d(r: _Rewriter, c: Call) -> QValue | None:
    v = r.rewrite(c.args[0])
    if v is None or v.dtype not in _I8:
        return None
    a = c.attrs
    y = nn.max_pool2d(v.expr, a.pool_size, a.strides, a.dilation, a.padding, a.layout,
                      a.ceil_mode)
    return QValue(y, v.scale, v.zp, v.dtype, v.ndim, v.axis if a.layout == "NCHW" else -1,
                  v.clamp) if v.axis < 0 or a.layout == "NCHW" else None


@_rule("nn.relu", "clip")
def _clamp(r: _Rewriter, c: Call) -> QValue | None:
    v = r.rewrite(c.args[0])
    if v is None:
        return None
    lo, hi = (0.0, float("inf")) if _name(c) == "nn.relu" else (float(c.attrs.a_min),
                                                                  float(c.attrs.a_max))
    if v.clamp is not None:
        lo, hi = max(lo, v.clamp[0]), min(hi, v.clamp[1])
    return QValue(v.expr, v.scale, v.zp, v.dtype, v.ndim, v.axis, (lo, hi))


class FakeQuantizationToInteger(FunctionPass):
    """``relay.qnn.transform.FakeQuantizationToInteger(optional_qnn_ops=())``: see the module
    docstring. Clamps need constant output parameters; everything else works on parameter
    expressions. ``optional_qnn_ops`` (TVM's argument): ``("nn.softmax",)`` also rewrites a
    quantized softmax into ``qnn.softmax`` (onnxruntime's lookup-table QLinearSoftmax, which its
    extended graph optimizations substitute for QDQ softmax; not the float definition)."""

    def __init__(self, optional_qnn_ops: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__(name="FakeQuantizationToInteger", opt_level=0)
        self.optional = tuple(optional_qnn_ops)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return _Rewriter(self.optional).visit(func)

