"""x86 strategies, registered for the target key "cpu" (llvm, c; TVM's ``strategy/x86.py``): the
generic computes with ``topi.x86`` schedules, and x86-only implementations at a higher priority
(``dense_pack`` when there are enough rows to fill its register tiles, the blocked NCHWc
convolution); also the "cpu" injective and reduce schedules of fused groups and of operators
that have only a compute.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from .... import topi
from ....topi import nn, x86
from ..registry import OpPattern, get
from . import OpStrategy, register_strategy_func
from .bitserial import BITSERIAL_X86_SCHEDULES
from .generic import (
    COMPUTES,
    _gamma_beta,
    _generic_strategy,
    schedule_injective,
    schedule_reduce,
    wrap_topi_schedule,
)
from .x86_int8 import add_int8_implementations
from .x86_matmul import tunable

__all__ = ["DENSE_PACK_MIN_ROWS", "DENSE_PACK_MAX_K", "schedule_injective_cpu",
           "schedule_reduce_cpu"]

# dense_pack's micro-kernel holds an mr x nr output tile in registers; with fewer rows than
# this, packing the weight costs more than it saves (the dot-product schedule of
# schedule_dense is better), as measured in topi/x86/dense.py
DENSE_PACK_MIN_ROWS = 16
# ... and packing the [N, K] weight inside the kernel (a strided gather per K step) costs more
# than the 2-D dot-product tile of schedule_dense saves once K is long (BERT's 1024 -> 256
# feed-forward output: packed 260 GFLOP/s, dot tile 365, measured with bench/ops.py)
DENSE_PACK_MAX_K = 512


def _anchor_tag(outs: list, key: str) -> str:
    """The tag of the first stage (from the outputs back) whose tag contains ``key``: in a
    fused group the outputs are the elementwise ops that follow the anchor."""
    stack, seen = [t.op for t in outs], set()
    while stack:
        op = stack.pop(0)
        if id(op) in seen:
            continue
        seen.add(id(op))
        if key in (op.tag or ""):
            return op.tag
        stack.extend(t.op for t in op.input_tensors)
    return ""


def _conv2d_schedule(attrs: Any, outs: list, target: Any) -> Any:
    tag = _anchor_tag(outs, "conv2d")
    if "depthwise" in tag:
        return x86.schedule_depthwise_conv2d_nchw(outs)
    if "group" in tag:
        return x86.schedule_group_conv2d_nchw(outs)
    return x86.schedule_conv2d_nchw(outs)


def _conv2d_nchwc_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    """``nn.contrib_conv2d_NCHWc`` through the AutoTVM templates ``conv2d_NCHWc.x86`` /
    ``depthwise_conv2d_NCHWc.x86`` (tuned configs under ``apply_history_best``, the default
    schedule otherwise); symbolic shapes and other groupings: the generic compute."""
    from ....topi import layout_transform
    from .generic import _out_dtype

    data, kernel = inputs
    generic = COMPUTES["nn.contrib_conv2d_NCHWc"]
    shape = [_const_int(d) for d in (*data.shape, *kernel.shape)]
    if any(d is None for d in shape):
        return generic(attrs, inputs, out_type)
    if len(data.shape) == 4:  # data_layout NCHW (plain data read in place): no depthwise
        shape = [*shape[:4], 1, *shape[4:]]
    oc_bn = shape[10]
    channels = shape[1] * shape[4]
    if attrs.groups == 1:
        fcompute = x86.conv2d_NCHWc
    elif (len(data.shape) == 5 and attrs.groups == channels and shape[6] == shape[9] == 1
          and shape[5] * oc_bn == channels and shape[4] == oc_bn):
        fcompute = x86.depthwise_conv2d_NCHWc
    elif _blocks_within_groups(shape, channels, attrs.groups):
        # grouped, blocks within groups: the NCHWc tile (default schedule) with group offsets
        fcompute = functools.partial(nn.conv2d_NCHWc, groups=attrs.groups)
    else:
        return generic(attrs, inputs, out_type)

    def ints(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(ints(x) for x in v)
        c = _const_int(v)
        return v if c is None else c

    out = fcompute(data, kernel, ints(attrs.strides), ints(attrs.padding), ints(attrs.dilation),
                   attrs.data_layout, f"NCHW{oc_bn}c", _out_dtype(attrs, out_type))
    want = attrs.out_layout or attrs.data_layout
    if want != f"NCHW{oc_bn}c":
        out = layout_transform(out, f"NCHW{oc_bn}c", want)
    return [out]


def _blocks_within_groups(shape: list, channels: int, groups: int) -> bool:
    """Whether a grouped ``contrib_conv2d_NCHWc`` (``shape``: data dims with a block, then the
    6 kernel dims) has whole input and output blocks in every group."""
    oc_chunks, ic_chunks, ic_bn = int(shape[5]), int(shape[6]), int(shape[9])
    return groups > 1 and ic_chunks * ic_bn * groups == channels and oc_chunks % groups == 0


def _conv2d_nchwc_schedule(attrs: Any, outs: list, target: Any) -> Any:
    """The tunable NCHWc schedule when the compute was the template, else the default one."""
    from ....autotvm.task.topi_integration import get_workload

    wkl = get_workload(outs)
    if wkl is not None and wkl[0] == "conv2d_NCHWc.x86":
        return x86.schedule_conv2d_NCHWc_autotvm(outs)
    if wkl is not None and wkl[0] == "depthwise_conv2d_NCHWc.x86":
        return x86.schedule_depthwise_conv2d_NCHWc_autotvm(outs)
    return x86.schedule_conv2d_NCHWc(outs)


def _winograd_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    """``nn.contrib_conv2d_winograd_nchwc`` through the AutoTVM template
    ``conv2d_winograd_NCHWc.x86`` (constant shapes; else the generic compute)."""
    from .generic import _out_dtype

    data, weight = inputs
    if any(_const_int(d) is None for d in (*data.shape, *weight.shape)):
        return COMPUTES["nn.contrib_conv2d_winograd_nchwc"](attrs, inputs, out_type)
    pad = tuple(int(_const_int(p)) for p in attrs.padding)
    return [x86.conv2d_winograd_nchwc_x86(data, weight, pad, _out_dtype(attrs, out_type))]


def _winograd_schedule(attrs: Any, outs: list, target: Any) -> Any:
    from ....autotvm.task.topi_integration import get_workload

    wkl = get_workload(outs)
    if wkl is not None and wkl[0] == "conv2d_winograd_NCHWc.x86":
        return x86.schedule_conv2d_winograd_nchwc_x86(outs)
    return x86.schedule_conv2d_winograd_nchwc(outs)


def _pool_schedule(attrs: Any, outs: list, target: Any) -> Any:
    if attrs.layout not in ("NCW", "NCHW", "NCDHW") and not re.fullmatch(r"NCHW\d+c",
                                                                     attrs.layout):
        return _generic(attrs, outs, target)  # the x86 pool schedule: NC[D]H[W] and NCHW{c}c
    return x86.schedule_pool(outs, attrs.layout)


def _generic(attrs: Any, outs: list, target: Any) -> Any:
    from .generic import generic_schedule

    return generic_schedule(attrs, outs, target)


_SCHEDULES: dict[str, Callable[..., Any]] = {
    "nn.conv2d": _conv2d_schedule,
    "nn.conv2d_transpose": lambda attrs, outs, target: (
        x86.schedule_conv2d_transpose_nchw(outs) if attrs.groups == 1
        and tuple(attrs.dilation) == (1, 1) else x86.schedule_group_conv2d_transpose_nchw(outs)),
    "nn.conv1d": wrap_topi_schedule(x86.schedule_conv_nd),
    "nn.conv3d": wrap_topi_schedule(x86.schedule_conv_nd),
    "nn.contrib_conv2d_NCHWc": _conv2d_nchwc_schedule,
    "nn.contrib_conv2d_winograd_nchwc": _winograd_schedule,
    "nn.dense": wrap_topi_schedule(x86.schedule_dense),
    "nn.contrib_dense_pack": wrap_topi_schedule(x86.schedule_dense_pack),
    "nn.matmul": wrap_topi_schedule(x86.schedule_matmul),
    "nn.batch_matmul": wrap_topi_schedule(x86.schedule_batch_matmul),
    "nn.global_avg_pool2d": lambda attrs, outs, target: x86.schedule_global_pool(
        outs, attrs.layout),
    "nn.global_max_pool2d": lambda attrs, outs, target: x86.schedule_global_pool(
        outs, attrs.layout),
    "nn.adaptive_avg_pool2d": wrap_topi_schedule(x86.schedule_adaptive_pool),
    "nn.softmax": wrap_topi_schedule(x86.schedule_softmax),
    "nn.log_softmax": wrap_topi_schedule(x86.schedule_softmax),
    "nn.layer_norm": wrap_topi_schedule(x86.schedule_layer_norm),
    "nn.instance_norm": wrap_topi_schedule(x86.schedule_instance_norm),
    "nn.group_norm": wrap_topi_schedule(x86.schedule_group_norm),
    "concatenate": wrap_topi_schedule(x86.schedule_concatenate),
}
for _k in ("max", "avg"):
    for _d in (1, 2, 3):
        _SCHEDULES[f"nn.{_k}_pool{_d}d"] = _pool_schedule
_SCHEDULES.update(BITSERIAL_X86_SCHEDULES)


def _dense_prepacked_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    units = getattr(attrs.units, "value", attrs.units)
    return [x86.dense_prepacked(inputs[0], inputs[1], attrs.out_dtype or out_type.dtype,
                                None if units is None else int(units))]


COMPUTES["nn.contrib_dense_pack"] = _dense_prepacked_compute


def _dense_pack_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [x86.dense_pack(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype)]


def _matmul_pack_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [x86.matmul_pack(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype)]


def _batch_matmul_pack_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [x86.batch_matmul_pack(inputs[0], inputs[1], attrs.out_dtype or out_type.dtype,
                                  transpose_b=bool(attrs.transpose_b))]


def _const_int(d: Any) -> int | None:
    d = getattr(d, "value", d)  # IntImm -> int; a symbolic extent -> None
    return d if isinstance(d, int) else None


def _add_packed(name: str, attrs: Any, inputs: list, s: OpStrategy) -> None:
    """The packed GEMM variants, preferred (plevel 15) when there are enough rows (or, for a
    ``[b, K, N]`` B, when N has a partial panel)."""
    if name == "nn.dense" and len(inputs[0].shape) == 2:  # (N-D data: generic dense_compute)
        rows = _const_int(inputs[0].shape[0])
        k = _const_int(inputs[0].shape[1])
        if rows is not None and rows >= DENSE_PACK_MIN_ROWS and k is not None \
                and k < DENSE_PACK_MAX_K:
            impl = tunable("dense_pack", inputs) or (
                _dense_pack_compute, wrap_topi_schedule(x86.schedule_dense_pack))
            s.add_implementation(*impl, "dense_pack.x86", 15)
    elif name == "nn.matmul" and not attrs.transpose_a and not attrs.transpose_b \
            and len(inputs[0].shape) == 2:
        rows, n = _const_int(inputs[0].shape[0]), _const_int(inputs[1].shape[1])
        k = _const_int(inputs[1].shape[0])
        if rows is None or n is None or k is None or 0 in (rows, n, k):
            return
        # B [K, N]: its panels are copied (rows of nr contiguous floats) inside the kernel,
        # as gemm.py's packed GEMM; a partial last panel is zero-padded there (one row: B
        # is read once anyway, a copy would double that; see topi.x86.dense._gemv_panel)
        if rows >= DENSE_PACK_MIN_ROWS or (rows > 1 and n % x86.panel_width(n)):
            s.add_implementation(_matmul_pack_compute,
                                 wrap_topi_schedule(x86.schedule_dense_pack), "matmul_pack.x86",
                                 15)
    elif name == "nn.batch_matmul" and not attrs.transpose_a:
        rows = _const_int(inputs[0].shape[1])
        n, k = (_const_int(d) for d in inputs[1].shape[1:])
        if not attrs.transpose_b:
            n, k = k, n
        if k is not None and n is None:
            # a symbolic N (attention scores over a relay.Any sequence): the packed form's
            # zero-padded panels keep every register tile at the full vector width (the plain
            # schedule's tail tile has a variable width and is not vectorized)
            s.add_implementation(_batch_matmul_pack_compute,
                                 wrap_topi_schedule(x86.schedule_batch_matmul),
                                 "batch_matmul_pack.x86", 15)
            return
        if rows is None or n is None or k is None:
            return
        # B [b, N, K]: packed when there are enough rows; B [b, K, N] (rows already
        # contiguous) when the panel does not divide N: the packed copy's zero-padded last
        # panel keeps every register tile at the full vector width
        if rows >= DENSE_PACK_MIN_ROWS if attrs.transpose_b else n % x86.panel_width(n):
            impl = tunable("batch_matmul_pack", inputs) or (
                _batch_matmul_pack_compute, wrap_topi_schedule(x86.schedule_batch_matmul))
            s.add_implementation(*impl, "batch_matmul_pack.x86", 15)


def _pool_compute(kind: str, nd: int) -> Callable[..., list]:
    """``topi.nn.pool2d/3d``, separable (rows, then columns) in the plain layout, where
    ``x86.schedule_pool`` vectorizes along the output width."""
    fn = nn.pool2d if nd == 2 else nn.pool3d

    def f(attrs: Any, inputs: list, out_type: Any) -> list:
        cip = bool(getattr(attrs, "count_include_pad", False)) if kind == "avg" else False
        return [fn(inputs[0], attrs.pool_size, attrs.strides, attrs.dilation, attrs.padding,
                   kind, attrs.ceil_mode, attrs.layout, cip,
                   separable=attrs.layout in ("NCHW", "NCDHW"))]

    return f


def _layer_norm_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    """``topi.x86.layer_norm``: onnxruntime's CPU arithmetic over the last axis."""
    gamma, beta = _gamma_beta(attrs, inputs)
    return [x86.layer_norm(inputs[0], gamma, beta, attrs.axis, attrs.epsilon)]


def _softmax_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    """``topi.nn.softmax_by_reciprocal``: one division per row, a multiply per element."""
    return [nn.softmax_by_reciprocal(inputs[0], attrs.axis)]


def _log_softmax_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    """``topi.nn.log_softmax_by_row``: ``max + log(sum)`` once per row."""
    return [nn.log_softmax_by_row(inputs[0], attrs.axis)]


def _resize2d_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    """``topi.image.resize2d`` with a linear resize separable (a width pass, then a height
    pass over two contiguous rows; the same operations in the same order)."""
    return [topi.image.resize2d(inputs[0], None, attrs.size, attrs.layout, attrs.method,
                                attrs.coordinate_transformation_mode, attrs.rounding_method,
                                attrs.out_dtype or None, separable=True)]


# x86 computes that replace the generic ones (the AutoTVM templates)
_X86_COMPUTES: dict[str, Callable[..., list]] = {
    "image.resize2d": _resize2d_compute,
    "nn.layer_norm": _layer_norm_compute,
    "nn.softmax": _softmax_compute,
    "nn.log_softmax": _log_softmax_compute,
    "nn.contrib_conv2d_NCHWc": _conv2d_nchwc_compute,
    "nn.contrib_conv2d_winograd_nchwc": _winograd_compute,
    **{f"nn.{k}_pool{d}d": _pool_compute(k, d) for k in ("max", "avg") for d in (2, 3)},
}


def _x86_strategy(name: str) -> Callable[..., OpStrategy]:
    compute = _X86_COMPUTES.get(name, COMPUTES[name])
    pattern = get(name).pattern
    if name in _SCHEDULES:
        sched = _SCHEDULES[name]
    elif pattern <= OpPattern.INJECTIVE:
        sched = wrap_topi_schedule(x86.schedule_injective)
    elif pattern == OpPattern.COMM_REDUCE:
        sched = wrap_topi_schedule(x86.schedule_reduce)
    else:
        sched = _generic

    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        # the matmul ops: their AutoTVM templates when the shapes are constant
        s.add_implementation(*(tunable(name, inputs) or (compute, sched)), f"{name}.x86", 10)
        _add_packed(name, attrs, inputs, s)
        add_int8_implementations(name, attrs, inputs, out_type, s, target)  # u8 x s8 -> s32
        return s

    return fstrategy


# an x86-only op (AlterOpLayout makes it): its generic strategy is registered here
register_strategy_func("nn.contrib_dense_pack", "generic",
                       _generic_strategy("nn.contrib_dense_pack"))
for _name in COMPUTES:
    register_strategy_func(_name, "cpu", _x86_strategy(_name))


@schedule_injective.register("cpu")
def schedule_injective_cpu(attrs: Any, outs: list, target: Any) -> Any:
    """``topi.x86.schedule_injective`` (vectorized, parallel) for "cpu" targets."""
    return x86.schedule_injective(outs)


@schedule_reduce.register("cpu")
def schedule_reduce_cpu(attrs: Any, outs: list, target: Any) -> Any:
    """``topi.x86.schedule_reduce`` for "cpu" targets."""
    return x86.schedule_reduce(outs)


del _name, _k, _d
