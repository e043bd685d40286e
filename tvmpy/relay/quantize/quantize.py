"""``relay.quantize.quantize``: annotate, calibrate, realize (TVM's automatic quantization).

1. **prerequisites**: params bound, SimplifyInference (batch norm to scale/shift), FoldScaleAxis
   (the scale into the conv weights), FoldConstant: weights become constants.
2. **annotate** (:func:`annotate`): the anchors to quantize (``nn.conv2d`` NCHW/OIHW and
   ``nn.dense`` with constant weights, minus ``skip_conv_layers`` / ``skip_dense_layer``) and
   the calibration points: each anchor's data input, and each ``add`` of two quantized
   tensors (a residual), whose output scale the realized add works at.
3. **calibrate** (:func:`calibrate`): the float graph with the points as extra outputs, run on
   the dataset; one threshold per point (``calibrate.threshold``).
4. **realize** (:func:`realize`): integer relay ops. An anchor's data is quantized to int8 (from
   float: ``round(x / s)``; from an int32 accumulator: requantized), its weight quantized once
   (per tensor or per output channel), the anchor computed with ``out_dtype="int32"``; the int32
   accumulator (scale ``s_x * s_w``) flows on through bias adds (bias quantized to int32),
   relu, max pooling and layout ops; residual adds requantize both sides to the add's scale;
   anything else dequantizes. Requantization by a ratio of scales is a rounding right shift
   when the ratio is a power of two, else a 31-bit fixed-point multiply in int64 and a shift
   (round half up, as TVM's realize).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import transform as _transform
from ..analysis import free_vars
from ..expr import Call, Constant, Function, RelayExpr, Tuple, TupleGetItem, Var, const
from ..module import IRModule
from ..op import nn, tensor
from ..op import transform as T
from ..transform import (
    FoldConstant,
    FoldScaleAxis,
    InferType,
    SimplifyInference,
    bind_params_by_name,
)
from ..visitor import ExprMutator, dataflow_post_order
from .calibrate import QMAX, scale_from_threshold, threshold, weight_scale
from .qconfig import QConfig, current_qconfig

__all__ = ["quantize", "prerequisite_optimize", "annotate", "calibrate", "realize", "simulate",
           "Annotated",
           "QuantizeInfo", "QuantizeError"]

_LAYOUT_OPS = ("reshape", "nn.batch_flatten", "squeeze", "expand_dims", "transpose")
_MONOTONE = ("nn.relu", "nn.max_pool2d")


class QuantizeError(ValueError):
    """The model or the calibration data cannot be quantized as asked."""


@dataclass
class Annotated:
    """The float module (prerequisites applied), its anchors and calibration points."""

    mod: IRModule
    anchors: list[Call]
    points: list[RelayExpr]
    names: dict[int, str] = field(default_factory=dict)  # id(anchor or point) -> layer name


@dataclass
class QuantizeInfo:
    """What ``quantize`` chose: per anchor (graph order) its name, input scale and weight scale
    (max over channels when per channel), and the thresholds per calibration point."""

    layers: list[tuple[str, float, float]]
    thresholds: list[float]
    skipped: list[str]


# ---- 1. prerequisites ---------------------------------------------------------------------
def prerequisite_optimize(mod: IRModule, params: Mapping[str, Any] | None = None) -> IRModule:
    """Bind ``params`` and fold batch norms and constant arithmetic into the weights."""
    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    if not isinstance(mod, IRModule):
        raise TypeError(f"quantize takes an IRModule, got {type(mod).__name__}")
    main = mod["main"]
    if params:
        main = bind_params_by_name(main, {k: v for k, v in params.items()})
    mod = IRModule.from_expr(main)
    with _transform.PassContext(opt_level=3):
        for p in (InferType(), SimplifyInference(), FoldConstant(), FoldScaleAxis(),
                  FoldConstant()):
            mod = p(mod)
    return mod


# ---- 2. annotate ----------------------------------------------------------------------------
def _is_op(e: Any, name: str) -> bool:
    return isinstance(e, Call) and getattr(e.op, "name", None) == name


def _op_name(e: Any) -> str | None:
    return getattr(e.op, "name", None) if isinstance(e, Call) else None


def _conv_ok(c: Call) -> bool:
    a = c.attrs
    return (a.get("data_layout", "NCHW") == "NCHW" and a.get("kernel_layout", "OIHW") == "OIHW"
            and isinstance(c.args[1], Constant) and a.get("out_dtype", "") in ("", "float32")
            and c.args[0].checked_type.dtype == "float32")


def _dense_ok(c: Call) -> bool:
    return (isinstance(c.args[1], Constant) and len(c.args[0].checked_type.shape) == 2
            and c.args[0].checked_type.dtype == "float32")


def annotate(mod: IRModule, cfg: QConfig | None = None) -> Annotated:
    """Choose the anchors and the calibration points of a (prerequisite-optimized) module."""
    cfg = cfg or current_qconfig()
    nodes = dataflow_post_order(mod["main"].body)
    anchors: list[Call] = []
    names: dict[int, str] = {}
    conv_k = dense_k = 0
    for e in nodes:
        if _is_op(e, "nn.conv2d"):
            k, conv_k = conv_k, conv_k + 1
            names[id(e)] = f"conv2d_{k}"
            if k not in cfg.skip_conv_layers and _conv_ok(e):
                anchors.append(e)
        elif _is_op(e, "nn.dense"):
            k, dense_k = dense_k, dense_k + 1
            names[id(e)] = f"dense_{k}"
            if not cfg.skip_dense_layer and _dense_ok(e):
                anchors.append(e)
    # which tensors will be int32 accumulators after realize (to find residual adds)
    quant: set[int] = {id(a) for a in anchors}
    points: list[RelayExpr] = []
    seen: set[int] = set()

    def point(x: RelayExpr, name: str) -> None:
        if id(x) not in seen:
            seen.add(id(x))
            points.append(x)
            names.setdefault(id(x), name)

    for e in nodes:
        if not isinstance(e, Call) or id(e) in quant:
            continue
        op = _op_name(e)
        a0 = e.args[0] if e.args else None
        if op in _MONOTONE + _LAYOUT_OPS and id(a0) in quant:
            quant.add(id(e))
        elif op in ("nn.bias_add", "add", "multiply") and id(a0) in quant \
                and isinstance(e.args[1], Constant):
            quant.add(id(e))
        elif op == "add" and all(id(a) in quant for a in e.args):
            quant.add(id(e))
            point(e, f"add_{len(points)}")
        elif op == "add" and cfg.residual_dtype == "int8" and _float_residual(e, quant):
            quant.add(id(e))  # the float side is quantized to int8 at the add's scale
            point(e, f"add_{len(points)}")
    for a in anchors:
        point(a.args[0], f"{names[id(a)]}.input")
    return Annotated(mod, anchors, points, names)


def _float_residual(e: Call, quant: set[int]) -> bool:
    """An add of one quantized tensor and one float tensor of the same shape (not a constant):
    a residual whose other side is still float (ResNet's first stage after a float stem)."""
    a, b = e.args
    if (id(a) in quant) == (id(b) in quant) or isinstance(a, Constant) or isinstance(b, Constant):
        return False
    ta, tb = a.checked_type, b.checked_type
    return (getattr(ta, "shape", None) is not None and _same_dims(ta.shape, tb.shape)
            and str(ta.dtype) == str(tb.dtype) == "float32")


def _same_dims(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(str(x) == str(y) for x, y in zip(a, b))


# ---- 3. calibrate ---------------------------------------------------------------------------
def _check_dataset(dataset: Any, mod: IRModule) -> list[dict[str, np.ndarray]]:
    if dataset is None:
        raise QuantizeError("quantize: this calibrate_mode needs a dataset (an iterable of "
                            "{input name: array} dicts)")
    if isinstance(dataset, Mapping):
        raise QuantizeError("quantize: dataset must be an iterable of {input name: array} dicts,"
                            " not one dict")
    data = [dict(d) for d in dataset]
    if not data:
        raise QuantizeError("quantize: the calibration dataset is empty")
    names = [p.name_hint for p in mod["main"].params]
    for k, d in enumerate(data):
        missing = [n for n in names if n not in d]
        if missing:
            raise QuantizeError(f"quantize: calibration sample {k} lacks inputs {missing} "
                                f"(the model's inputs: {names})")
    return data


def _run_outputs(mod: IRModule, outs: list[RelayExpr], data: list[dict[str, np.ndarray]]
                 ) -> list[list[np.ndarray]]:
    """Build main's graph with ``outs`` as its outputs and run it on every sample."""
    from ...contrib import graph_executor
    from ...runtime import cpu
    from .. import build as relay_build

    body = Tuple(outs)
    f = Function(free_vars(body), body)
    with _transform.PassContext(opt_level=3):
        lib = relay_build(IRModule.from_expr(f), target="llvm")
    m = graph_executor.GraphModule(lib["default"](cpu(0)))
    res: list[list[np.ndarray]] = []
    for d in data:
        m.set_input(**{p.name_hint: np.asarray(d[p.name_hint]) for p in f.params})
        m.run()
        res.append([m.get_output(i).numpy() for i in range(len(outs))])
    return res


def calibrate(ann: Annotated, dataset: Any, cfg: QConfig | None = None) -> list[float]:
    """One threshold per calibration point (the dataset is run once through the float graph)."""
    cfg = cfg or current_qconfig()
    if cfg.calibrate_mode == "global_scale" and dataset is None:
        return [float(cfg.global_scale)] * len(ann.points)
    data = _check_dataset(dataset, ann.mod)
    if cfg.calibrate_mode == "global_scale" or not ann.points:
        return [float(cfg.global_scale)] * len(ann.points)
    runs = _run_outputs(ann.mod, list(ann.points), data)
    out = []
    for k in range(len(ann.points)):
        values = np.concatenate([r[k].ravel() for r in runs]).astype(np.float64)
        out.append(threshold(values, cfg))
    return out


# ---- 4. realize -----------------------------------------------------------------------------
@dataclass
class _Int:
    """An int32 accumulator ``expr`` whose real value is ``expr * scale`` (scale: () or (C,)
    along axis 1)."""

    expr: RelayExpr
    scale: np.ndarray
    ndim: int


def _bshape(s: np.ndarray, ndim: int) -> np.ndarray:
    """A per-channel (axis 1) vector shaped to broadcast against an ndim tensor."""
    return s if s.ndim == 0 else s.reshape([s.size] + [1] * (ndim - 2))


def _is_pow2(r: np.ndarray) -> bool:
    e = np.log2(r)
    return bool(np.all(np.abs(e - np.round(e)) < 1e-9))


def requantize(acc: RelayExpr, ratio: np.ndarray, ndim: int, out_dtype: str) -> RelayExpr:
    """``round_half_up(acc * ratio)`` of an int32 tensor, saturated to ``out_dtype``."""
    ratio = np.asarray(ratio, np.float64)
    if _is_pow2(ratio) and np.all(ratio <= 0.5):  # a rounding right shift in int32
        k = np.round(-np.log2(ratio)).astype(np.int32)
        kk = _bshape(k, ndim)
        half = _bshape((np.int64(1) << (k - 1)).astype(np.int32), ndim)
        y = tensor.right_shift(tensor.add(acc, const(half)), const(kk))
    elif _is_pow2(ratio) and np.all(ratio == 1.0):
        y = acc
    else:  # 31-bit fixed point: ratio ~= M / 2**n, M < 2**31, in int64
        e = int(np.floor(np.log2(ratio.max())))
        n = int(min(max(30 - e, 1), 62))
        mult = _bshape(np.round(ratio * 2.0 ** n).astype(np.int64), ndim)
        wide = tensor.multiply(T.cast(acc, "int64"), const(mult))
        y64 = tensor.right_shift(tensor.add(wide, const(np.int64(1) << (n - 1))),
                                 const(np.int64(n)))
        info32 = np.iinfo(np.int32)
        y = T.cast(tensor.clip(y64, float(info32.min), float(info32.max)), "int32")
    if out_dtype == "int32":
        return y
    return T.cast(tensor.clip(y, -QMAX, QMAX), out_dtype)


def _dequantize(v: _Int) -> RelayExpr:
    s = _bshape(v.scale.astype(np.float32), v.ndim)
    return tensor.multiply(T.cast(v.expr, "float32"), const(s))


class _Realizer:
    def __init__(self, ann: Annotated, scales: dict[int, float], cfg: QConfig):
        self.ann, self.scales, self.cfg = ann, scales, cfg
        self.anchors = {id(a) for a in ann.anchors}
        self.env: dict[int, RelayExpr | _Int] = {}
        self.layers: list[tuple[str, float, float]] = []
        self.int8_memo: dict[tuple[int, float], RelayExpr] = {}

    def float_of(self, e: RelayExpr) -> RelayExpr:
        v = self.env[id(e)]
        if not isinstance(v, _Int):
            return v
        if self.cfg.residual_dtype == "int8":  # leaves the integer region as int8 (saturated)
            q = tensor.stop_fusion(T.cast(tensor.clip(v.expr, -QMAX, QMAX), "int8"))
            return _dequantize(_Int(T.cast(q, "int32"), v.scale, v.ndim))
        return _dequantize(v)

    def int8_of(self, e: RelayExpr, s: float) -> RelayExpr:
        """``e`` quantized at step ``s``: int8 in [-127, 127], or (dtype_input "uint8") that
        plus 128 as uint8. Under ``residual_dtype="int8"`` one expression per (tensor, step),
        shared by its consumers: the int8 tensor is then the one value a conv's function
        stores (not the int32 it was requantized from)."""
        if self.cfg.residual_dtype != "int8":
            return self._int8_of(e, s)
        key = (id(e), float(s))
        hit = self.int8_memo.get(key)
        if hit is None:
            hit = self.int8_memo[key] = self._int8_of(e, s)
        return hit

    def _int8_of(self, e: RelayExpr, s: float) -> RelayExpr:
        v = self.env[id(e)]
        if isinstance(v, _Int):
            if self.cfg.dtype_input == "int8":
                return requantize(v.expr, v.scale / s, v.ndim, "int8")
            q = requantize(v.expr, v.scale / s, v.ndim, "int32")
            return T.cast(tensor.clip(tensor.add(q, const(np.int32(128))), 1, 255), "uint8")
        q = tensor.round(tensor.divide(v, const(np.float32(s))))
        if self.cfg.dtype_input == "int8":
            return T.cast(tensor.clip(q, -QMAX, QMAX), "int8")
        return T.cast(tensor.clip(tensor.add(q, const(np.float32(128))), 1, 255), "uint8")

    def run(self) -> RelayExpr:
        body = self.ann.mod["main"].body
        for e in dataflow_post_order(body):
            self.env[id(e)] = self.node(e)
        return self.float_of(body)

    def node(self, e: RelayExpr) -> RelayExpr | _Int:
        if isinstance(e, (Var, Constant)):
            return e
        if isinstance(e, Tuple):
            return Tuple([self.float_of(f) for f in e.fields])
        if isinstance(e, TupleGetItem):
            return TupleGetItem(self.float_of(e.tuple_value), e.index)
        assert isinstance(e, Call)
        if id(e) in self.anchors:
            return self.anchor(e)
        op = _op_name(e)
        vals = [self.env.get(id(a)) for a in e.args]
        v0 = vals[0] if vals else None
        if isinstance(v0, _Int):
            r = self.int_op(e, op, v0, vals)
            if r is not None:
                return r
        if op == "add" and self.cfg.residual_dtype == "int8" and id(e) in self.scales \
                and any(isinstance(x, _Int) for x in vals):
            return self.residual_int8(e, vals)
        return Call(e.op, [self.float_of(a) for a in e.args], e.attrs)

    def anchor(self, e: Call) -> _Int:
        s_in = self.scales[id(e.args[0])]
        w = e.args[1].data.numpy().astype(np.float32)
        axis = 0 if self.cfg.per_channel else None
        sw = weight_scale(w, self.cfg, axis)
        wq = np.clip(np.round(w / sw.reshape([-1] + [1] * (w.ndim - 1))), -QMAX, QMAX)
        x = self.int8_of(e.args[0], s_in)
        attrs = {**dict(e.attrs.items()), "out_dtype": "int32"}
        if self.cfg.dtype_input == "uint8" and _op_name(e) == "nn.conv2d":
            # the data's zero is 128 now: pad with it explicitly
            pt, pl, pb, pr = (int(p) for p in attrs["padding"])
            if pt or pl or pb or pr:
                x = nn.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), pad_value=128.0)
            attrs["padding"] = (0, 0, 0, 0)
        call: RelayExpr = Call(e.op, [x, const(wq.astype(np.int8))], attrs)
        ndim = len(e.checked_type.shape)
        if self.cfg.dtype_input == "uint8":  # sum((q + 128) * w) - 128 * sum(w), per channel
            corr = 128 * wq.reshape(wq.shape[0], -1).sum(axis=1).astype(np.int64)
            call = tensor.subtract(call, const(_bshape(corr.astype(np.int32), ndim)))
        self.layers.append((self.ann.names.get(id(e), "?"), s_in, float(np.max(sw))))
        return _Int(call, np.asarray(s_in * sw, np.float64), ndim)

    def int_op(self, e: Call, op: str | None, v: _Int, vals: list) -> _Int | None:
        if op in _MONOTONE:
            return _Int(Call(e.op, [v.expr], e.attrs), v.scale, v.ndim)
        if op in _LAYOUT_OPS and v.scale.ndim == 0:
            return _Int(Call(e.op, [v.expr], e.attrs), v.scale, len(e.checked_type.shape))
        if op in ("nn.bias_add", "add") and isinstance(e.args[1], Constant):
            return self.add_const(e, op, v)
        if op == "multiply" and isinstance(e.args[1], Constant):
            return self.mul_const(e, v)
        if op == "add" and self.cfg.residual_dtype == "int8" and id(e) in self.scales:
            return self.residual_int8(e, vals)
        if op == "add" and all(isinstance(x, _Int) for x in vals) and id(e) in self.scales:
            s = self.scales[id(e)]
            a, b = vals
            return _Int(tensor.add(requantize(a.expr, a.scale / s, a.ndim, "int32"),
                                   requantize(b.expr, b.scale / s, b.ndim, "int32")),
                        np.asarray(s, np.float64), v.ndim)
        return None

    def residual_int8(self, e: Call, vals: list) -> _Int:
        """A residual add under ``residual_dtype="int8"``: the first quantized operand
        requantized to the add's scale in int32, the other requantized (or, if float,
        quantized) to int8 at that scale, widened and added (int32, exact)."""
        s = self.scales[id(e)]
        k = 0 if isinstance(vals[0], _Int) else 1
        a, other = vals[k], e.args[1 - k]
        lhs = requantize(a.expr, a.scale / s, a.ndim, "int32")
        # stop_fusion: the int8 tensor is what leaves the other conv's function (TVM's realize
        # does the same), and the widening is a function of its own: an accelerator that
        # loads its accumulator as int32 (VTA) reads the int32 tensor
        rhs = tensor.stop_fusion(T.cast(tensor.stop_fusion(self.int8_of(other, s)), "int32"))
        return _Int(tensor.add(lhs, rhs), np.asarray(s, np.float64), a.ndim)

    def mul_const(self, e: Call, v: _Int) -> _Int | None:
        """A positive per-channel (or scalar) factor (a batch norm's scale) joins the scale."""
        c = e.args[1].data.numpy().astype(np.float64)
        shape = tuple(int(d) for d in e.checked_type.shape)
        chans = shape[1] if len(shape) >= 2 else 1
        if not np.all(c > 0) or c.ndim > len(shape):
            return None
        full = np.ones(len(shape), int)
        full[len(shape) - c.ndim:] = c.shape
        if any(n != 1 for k, n in enumerate(full) if k != 1):
            return None  # varies along a non-channel axis
        per = np.broadcast_to(c.reshape(-1), (chans,)) if full[1] != 1 else c.reshape(())
        scale = v.scale * per
        return _Int(v.expr, np.asarray(scale, np.float64), v.ndim)

    def add_const(self, e: Call, op: str, v: _Int) -> _Int | None:
        b = e.args[1].data.numpy().astype(np.float64)
        shape = tuple(int(d) for d in e.checked_type.shape)
        if op == "nn.bias_add":
            axis = int(e.attrs.get("axis", 1)) % len(shape)
            if axis != 1:
                return None
            b = b.reshape([b.size] + [1] * (len(shape) - 2))
        s = _bshape(v.scale, v.ndim)
        try:
            if np.broadcast_shapes(shape, b.shape, s.shape) != shape:
                return None
        except ValueError:
            return None
        q = np.round(b / s)
        if np.abs(q).max(initial=0) >= 2 ** 31 - 1:
            return None
        return _Int(tensor.add(v.expr, const(q.astype(np.int32))), v.scale, v.ndim)


class _Simulator(ExprMutator):
    """The float graph with each anchor's data and weight rounded to their int8 grids."""

    def __init__(self, ann: Annotated, scales: dict[int, float], cfg: QConfig):
        super().__init__()
        self.ann, self.scales, self.cfg = ann, scales, cfg
        self.anchors = {id(a) for a in ann.anchors}

    @staticmethod
    def _round(v: RelayExpr) -> RelayExpr:
        """Round half up, as realize's requantization (a rounding right shift / fixed-point
        multiply): accumulators at power-of-two scale ratios land on halves often, where
        relay's round (halves to even) would differ. (Float inputs quantized by realize round
        halves to even, but exact halves of float data are measure-zero.)"""
        return tensor.floor(tensor.add(v, const(np.float32(0.5))))

    def _grid(self, x: RelayExpr, s: float) -> RelayExpr:
        """``x`` rounded to multiples of ``s`` (an int32 tensor at scale s: no clipping)."""
        f = np.float32(s)
        return tensor.multiply(self._round(tensor.divide(x, const(f))), const(f))

    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if _op_name(c) == "add" and id(c) in self.scales and isinstance(new, Call) \
                and not any(isinstance(a, Constant) for a in c.args):
            s = self.scales[id(c)]  # a residual add: both sides requantized to its scale
            return tensor.add(self._grid(new.args[0], s), self._grid(new.args[1], s))
        if id(c) not in self.anchors or not isinstance(new, Call):
            return new
        s = np.float32(self.scales[id(c.args[0])])
        x = tensor.multiply(tensor.clip(self._round(tensor.divide(new.args[0], const(s))),
                                        -QMAX, QMAX), const(s))
        w = c.args[1].data.numpy().astype(np.float32)
        sw = weight_scale(w, self.cfg, 0 if self.cfg.per_channel else None)
        sw = sw.reshape([-1] + [1] * (w.ndim - 1))
        wq = (np.clip(np.round(w / sw), -QMAX, QMAX) * sw).astype(np.float32)
        return Call(new.op, [x, const(wq)], new.attrs)


def _scales(ann: Annotated, thresholds: list[float], cfg: QConfig) -> dict[int, float]:
    p2 = cfg.weight_scale == "power2" and cfg.round_for_shift
    return {id(p): scale_from_threshold(t, p2) for p, t in zip(ann.points, thresholds)}


def simulate(ann: Annotated, thresholds: list[float], cfg: QConfig | None = None) -> IRModule:
    """The float module with the anchors' inputs and weights quantized and dequantized (TVM's
    simulated quantization): realize's result up to rounding of the integer requantizations,
    useful to tell calibration error from realization error."""
    cfg = cfg or current_qconfig()
    if cfg.residual_dtype != "int32":
        raise QuantizeError("simulate models residual_dtype='int32' only (its int8 residual "
                            "and exit saturation are not simulated)")
    main = ann.mod["main"]
    body = _Simulator(ann, _scales(ann, thresholds, cfg), cfg).visit(main.body)
    return InferType()(IRModule.from_expr(Function(list(main.params), body)))


def realize(ann: Annotated, thresholds: list[float], cfg: QConfig | None = None
            ) -> tuple[IRModule, list[tuple[str, float, float]]]:
    """The integer module for the calibrated thresholds, and (name, input scale, weight scale)
    per quantized anchor."""
    cfg = cfg or current_qconfig()
    r = _Realizer(ann, _scales(ann, thresholds, cfg), cfg)
    body = r.run()
    main = ann.mod["main"]
    mod = IRModule.from_expr(Function(list(main.params), body))
    with _transform.PassContext(opt_level=3):
        mod = FoldConstant()(InferType()(mod))
    return mod, r.layers


def quantize(mod: IRModule, params: Mapping[str, Any] | None = None, dataset: Iterable | None = None,
             *, return_info: bool = False) -> Any:
    """Quantize ``mod`` (fp32) under the current ``qconfig``; ``dataset``: an iterable of
    ``{input name: array}`` (needed except in "global_scale" mode). Returns the integer module
    (its weights bound as constants), and a :class:`QuantizeInfo` with ``return_info``."""
    cfg = current_qconfig()
    if dataset is not None and not isinstance(dataset, (list, tuple)):
        dataset = list(dataset) if not isinstance(dataset, Mapping) else dataset
    fmod = prerequisite_optimize(mod, params)
    ann = annotate(fmod, cfg)
    if dataset is not None:
        _check_dataset(dataset, fmod)
    elif cfg.calibrate_mode != "global_scale":
        raise QuantizeError(f"quantize: calibrate_mode={cfg.calibrate_mode!r} needs a dataset")
    th = calibrate(ann, dataset, cfg)
    qmod, layers = realize(ann, th, cfg)
    if not return_info:
        return qmod
    anchors = {id(a) for a in ann.anchors}
    skipped = [n for k, n in ann.names.items() if k not in anchors
               and re.fullmatch(r"(conv2d|dense)_\d+", n)]
    return qmod, QuantizeInfo(layers, th, sorted(skipped))
