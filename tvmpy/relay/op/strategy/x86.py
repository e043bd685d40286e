"""x86 strategies, registered for the target key "cpu" (llvm, c; TVM's ``strategy/x86.py``): one
function per operator whose implementations differ on CPUs, choosing from the call's attributes
and shapes: ``topi.x86`` schedules for the generic computes, x86 computes (separable pools and
resize, onnxruntime's softmax / layer_norm arithmetic), and x86-only implementations at a
higher priority (``dense_pack`` when there are enough rows to fill its register tiles, the int8
VNNI kernels); the AutoTVM templates through the tuned-implementation hook. Also the "cpu"
injective and reduce schedules, which every other operator (the generic strategy) and every
fused injective group use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .... import topi
from ....target.generic_func import generic_func
from ....tir.data_layout import block_of
from ....topi import layout_transform, nn, x86
from ..registry import register_op_attr
from . import (
    OpStrategy,
    register_strategy_func,
    register_tuned_implementation,
    tuned_implementation,
    x86_matmul,  # noqa: F401  (registers the matmul templates)
)
from .bitserial import BITSERIAL_X86_SCHEDULES
from .generic import (
    COMPUTES,
    CONV2D_COMPUTES,
    conv2d_kind,
    generic_schedule,
    in_target,
    norm_gamma_beta,
    out_dtype_of,
    schedule_injective,
    schedule_reduce,
    wrap_topi_schedule,
)
from .x86_int8 import add_batch_matmul_int8, add_conv2d_int8, add_dense_int8

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


PLEVEL = 10
"""The plain implementations' priority."""
PACKED_PLEVEL = 15
"""The packed GEMM variants': above the plain ones, below the int8 kernels (20)."""

Impl = tuple[Callable[..., Any], Callable[..., Any]]  # (compute, schedule)


def const_int(d: Any) -> int | None:
    """The int value of an extent; None for a symbolic one."""
    d = getattr(d, "value", d)  # IntImm -> int; a symbolic extent -> None
    return d if isinstance(d, int) else None


def _one(compute: Callable[..., Any], schedule: Callable[..., Any], name: str) -> OpStrategy:
    s = OpStrategy()
    s.add_implementation(compute, schedule, name, PLEVEL)
    return s


# ---- convolutions ------------------------------------------------------------------------------
#: the x86 schedule of each ``nn.conv2d`` kind (:func:`generic.conv2d_kind`)
_CONV2D_SCHEDULES = {
    "conv2d_nchw": x86.schedule_conv2d_nchw,
    "depthwise_conv2d_nchw": x86.schedule_depthwise_conv2d_nchw,
    "group_conv2d_nchw": x86.schedule_group_conv2d_nchw,
}


@register_strategy_func("nn.conv2d", "cpu")
def conv2d_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """NCHW/OIHW ``nn.conv2d`` by kind (plain, depthwise, grouped: compute and schedule), and
    the int8 kernel for uint8 x int8 operands. (AlterOpLayout turns most static ones into
    ``nn.contrib_conv2d_NCHWc`` first.)"""
    kind = conv2d_kind(attrs, inputs)
    s = OpStrategy()
    s.add_implementation(CONV2D_COMPUTES[kind], wrap_topi_schedule(_CONV2D_SCHEDULES[kind]),
                         "nn.conv2d.x86", PLEVEL)
    add_conv2d_int8(s, attrs, inputs, out_type, target)
    return s


@register_strategy_func("nn.conv2d_transpose", "cpu")
def conv2d_transpose_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                                  target: Any) -> OpStrategy:
    plain = attrs.groups == 1 and tuple(attrs.dilation) == (1, 1)
    sched = x86.schedule_conv2d_transpose_nchw if plain else \
        x86.schedule_group_conv2d_transpose_nchw
    return _one(COMPUTES["nn.conv2d_transpose"], wrap_topi_schedule(sched),
                "nn.conv2d_transpose.x86")


@register_strategy_func("nn.conv1d", "cpu")
def conv1d_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    return _one(COMPUTES["nn.conv1d"], wrap_topi_schedule(x86.schedule_conv_nd), "nn.conv1d.x86")


@generic_func
def conv1d_legalize(attrs: Any, args: list, arg_types: list) -> Any:
    """``FTVMLegalize`` of ``nn.conv1d``: None (keep the call) except on CPUs, see
    :func:`conv1d_as_conv2d`."""
    return None


CONV1D_AS_CONV2D_MIN_CHANNELS = 16
"""Fewest input channels from which :func:`conv1d_as_conv2d` rewrites an unstrided
``nn.conv1d`` (strided ones: always). AMD EPYC Zen 3 (AVX2), 1 thread, conv1d + bias + GELU,
2026-12-02, as conv2d / as conv1d time: 3 -> 16 k5 on 1000 columns 1.45, 1 -> 64 k11 on 16000
1.30; 16 -> 32 k3 on 2000 0.77, 64 -> 64 k3 on 500 0.74, 128 -> 128 k7 on 200 0.62, 80 -> 384
k3 on 3000 (the Whisper-style encoder's first convolution) 0.47, 384 -> 384 k3 on 1500 0.36, on
3000 0.25 (248 -> 61 ms)."""


def conv1d_as_conv2d(attrs: Any, args: list, arg_types: list) -> Any:
    """A strided ``nn.conv1d``, or one with at least :data:`CONV1D_AS_CONV2D_MIN_CHANNELS`
    input channels (NCW / OIW, ungrouped) as ``squeeze(conv2d(expand_dims(x),
    expand_dims(w)))`` over a 1-row image: ``schedule_conv_nd`` vectorizes the output columns,
    so a stride s > 1 makes every input vector a gather of every s-th column, while the conv2d
    path (AlterOpLayout's NCHWc kernel, channels in the vector lanes, each input column
    broadcast) does not care about the stride. Whisper's 384 -> 384 x 3, stride 2 over 3000
    frames + bias + GELU: 30.2 -> 14.4 ms, one thread, Emerald Rapids-class Xeon, 2026-11-30.
    At stride 1 the NCHWc kernel's register tile (output channels x columns) reuses each input
    value across a vector of output channels, which the column-vectorized schedule does not:
    it wins from a few vectors of input channels on. None: keep the call."""
    if (attrs.data_layout != "NCW" or attrs.kernel_layout != "OIW"
            or attrs.out_layout not in ("", "NCW") or int(attrs.groups) != 1):
        return None
    if int(tuple(attrs.strides)[0]) < 2:
        channels = const_int(arg_types[0].shape[1])  # None: symbolic
        if channels is None or channels < CONV1D_AS_CONV2D_MIN_CHANNELS:
            return None
    from ..nn import conv2d
    from ..transform import expand_dims, squeeze

    (stride,), (dil,) = tuple(attrs.strides), tuple(attrs.dilation)
    pl, pr = tuple(attrs.padding)
    ks = attrs.kernel_size
    y = conv2d(expand_dims(args[0], 2), expand_dims(args[1], 2), strides=(1, int(stride)),
               padding=(0, int(pl), 0, int(pr)), dilation=(1, int(dil)), groups=1,
               channels=attrs.channels,
               kernel_size=None if ks is None else (1, int(tuple(ks)[0])),
               out_dtype=attrs.out_dtype or "")
    return squeeze(y, axis=[2])


conv1d_legalize.register("cpu", conv1d_as_conv2d)
register_op_attr("nn.conv1d", "FTVMLegalize", conv1d_legalize)


@register_strategy_func("nn.conv3d", "cpu")
def conv3d_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    return _one(COMPUTES["nn.conv3d"], wrap_topi_schedule(x86.schedule_conv_nd), "nn.conv3d.x86")


def _ints(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_ints(x) for x in v)
    c = const_int(v)
    return v if c is None else c


def _nchwc_shapes(inputs: list) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``((n, ic_chunk, h, w, ic_bn), (oc_chunk, k_ic_chunk, kh, kw, k_ic_bn, oc_bn))`` of an
    ``nn.contrib_conv2d_NCHWc`` call (plain NCHW data: ``ic_bn`` 1), None when symbolic."""
    data, kernel = inputs
    dshape = [const_int(d) for d in data.shape]
    kshape = [const_int(d) for d in kernel.shape]
    if any(d is None for d in (*dshape, *kshape)):
        return None
    if len(dshape) == 4:  # data_layout NCHW: plain data read in place
        dshape.append(1)
    return tuple(dshape), tuple(kshape)  # type: ignore[arg-type]


def _nchwc_template(fcompute: Callable[..., Any]) -> Callable[..., list]:
    """The relay compute of an NCHWc AutoTVM template: its output in ``out_layout``."""
    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        data, kernel = inputs
        oc_bn = int(const_int(kernel.shape[5]))  # type: ignore[arg-type]
        out = fcompute(data, kernel, _ints(attrs.strides), _ints(attrs.padding),
                       _ints(attrs.dilation), attrs.data_layout, f"NCHW{oc_bn}c",
                       out_dtype_of(attrs, out_type))
        want = attrs.out_layout or attrs.data_layout
        if want != f"NCHW{oc_bn}c":
            out = layout_transform(out, f"NCHW{oc_bn}c", want)
        return [out]

    return compute


_CONV2D_NCHWC_TEMPLATE = _nchwc_template(x86.conv2d_NCHWc)
_DEPTHWISE_NCHWC_TEMPLATE = _nchwc_template(x86.depthwise_conv2d_NCHWc)


def _conv2d_nchwc_schedule(attrs: Any, outs: list, target: Any) -> Any:
    """The tunable NCHWc schedule when the compute was the template, else the default one."""
    from ....autotvm.task.topi_integration import get_workload

    wkl = get_workload(outs)
    if wkl is not None and wkl[0] == "conv2d_NCHWc.x86":
        return x86.schedule_conv2d_NCHWc_autotvm(outs)
    if wkl is not None and wkl[0] == "depthwise_conv2d_NCHWc.x86":
        return x86.schedule_depthwise_conv2d_NCHWc_autotvm(outs)
    return x86.schedule_conv2d_NCHWc(outs)


@register_tuned_implementation("conv2d_NCHWc.x86")
def _conv2d_nchwc_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
    """``conv2d_NCHWc.x86`` for a constant-shape ``nn.contrib_conv2d_NCHWc`` of groups 1."""
    if attrs.groups != 1 or _nchwc_shapes(inputs) is None:
        return None
    return _CONV2D_NCHWC_TEMPLATE, _conv2d_nchwc_schedule


@register_tuned_implementation("depthwise_conv2d_NCHWc.x86")
def _depthwise_nchwc_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
    """``depthwise_conv2d_NCHWc.x86`` for a constant-shape depthwise one (multiplier 1, blocked
    data, the same block in and out)."""
    shapes = _nchwc_shapes(inputs)
    if shapes is None or len(inputs[0].shape) != 5:
        return None
    (_, ic_chunk, _, _, ic_bn), (oc_chunk, k_ic_chunk, _, _, k_ic_bn, oc_bn) = shapes
    channels = ic_chunk * ic_bn
    if attrs.groups == channels and k_ic_chunk == k_ic_bn == 1 \
            and oc_chunk * oc_bn == channels and ic_bn == oc_bn:
        return _DEPTHWISE_NCHWC_TEMPLATE, _conv2d_nchwc_schedule
    return None


@register_strategy_func("nn.contrib_conv2d_NCHWc", "cpu")
def conv2d_nchwc_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                              target: Any) -> OpStrategy:
    """The AutoTVM templates ``conv2d_NCHWc.x86`` / ``depthwise_conv2d_NCHWc.x86`` (tuned
    configs under ``apply_history_best``, the default schedule otherwise); symbolic shapes and
    other groupings: the generic compute with the default NCHWc schedule."""
    call = (attrs, inputs, out_type, target)
    impl: Impl = (tuned_implementation("conv2d_NCHWc.x86", *call)
            or tuned_implementation("depthwise_conv2d_NCHWc.x86", *call)
            or (COMPUTES["nn.contrib_conv2d_NCHWc"], _conv2d_nchwc_schedule))
    # the defaults read the target's cache sizes and FMA units (Target.current()), and relay
    # lowers computes and schedules outside any target scope: run them inside this one
    return _one(in_target(impl[0], target), in_target(impl[1], target),
                "nn.contrib_conv2d_NCHWc.x86")


def _winograd_template(attrs: Any, inputs: list, out_type: Any) -> list:
    data, weight = inputs
    pad = tuple(int(const_int(p)) for p in attrs.padding)  # type: ignore[arg-type]
    return [x86.conv2d_winograd_nchwc_x86(data, weight, pad, out_dtype_of(attrs, out_type))]


def _winograd_schedule(attrs: Any, outs: list, target: Any) -> Any:
    from ....autotvm.task.topi_integration import get_workload

    wkl = get_workload(outs)
    if wkl is not None and wkl[0] == "conv2d_winograd_NCHWc.x86":
        return x86.schedule_conv2d_winograd_nchwc_x86(outs)
    return x86.schedule_conv2d_winograd_nchwc(outs)


@register_tuned_implementation("conv2d_winograd_NCHWc.x86")
def _winograd_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
    """``conv2d_winograd_NCHWc.x86`` for constant shapes."""
    if any(const_int(d) is None for t in inputs for d in t.shape):
        return None
    return _winograd_template, _winograd_schedule


@register_strategy_func("nn.contrib_conv2d_winograd_nchwc", "cpu")
def conv2d_winograd_nchwc_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                                       target: Any) -> OpStrategy:
    """The AutoTVM template ``conv2d_winograd_NCHWc.x86`` (constant shapes; else the generic
    compute)."""
    call = (attrs, inputs, out_type, target)
    impl: Impl = (tuned_implementation("conv2d_winograd_NCHWc.x86", *call)
            or (COMPUTES["nn.contrib_conv2d_winograd_nchwc"], _winograd_schedule))
    # the products' weight prefetch reads the target's L2 size: as the NCHWc defaults
    return _one(in_target(impl[0], target), in_target(impl[1], target),
                "nn.contrib_conv2d_winograd_nchwc.x86")


# ---- matrix products ---------------------------------------------------------------------------
def _dense_pack_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [x86.dense_pack(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype)]


def _matmul_pack_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [x86.matmul_pack(inputs[0], inputs[1], None, attrs.out_dtype or out_type.dtype)]


def _batch_matmul_pack_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [x86.batch_matmul_pack(inputs[0], inputs[1], attrs.out_dtype or out_type.dtype,
                                  transpose_b=bool(attrs.transpose_b))]


@register_strategy_func("nn.dense", "cpu")
def dense_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """The ``dense.x86`` template (2-D, constant shapes; else the plain dense); ``dense_pack``
    (plevel 15) when there are enough rows and K is short; the int8 kernel for uint8 x int8."""
    s = OpStrategy()
    call = (attrs, inputs, out_type, target)
    impl: Impl = tuned_implementation("dense.x86", *call) or (
        COMPUTES["nn.dense"], wrap_topi_schedule(x86.schedule_dense))
    s.add_implementation(*impl, "nn.dense.x86", PLEVEL)
    if len(inputs[0].shape) == 2:  # (N-D data: the generic dense_compute)
        rows = const_int(inputs[0].shape[0])
        k = const_int(inputs[0].shape[1])
        if rows is not None and rows >= DENSE_PACK_MIN_ROWS and k is not None \
                and k < DENSE_PACK_MAX_K:
            packed: Impl = tuned_implementation("dense_pack.x86", *call) or (
                _dense_pack_compute, wrap_topi_schedule(x86.schedule_dense_pack))
            s.add_implementation(*packed, "dense_pack.x86", PACKED_PLEVEL)
    add_dense_int8(s, attrs, inputs, out_type, target)
    return s


@register_strategy_func("nn.contrib_dense_pack", "cpu")
def dense_pack_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """The weight packed at compile time: the ``contrib_dense_pack.x86`` template (constant
    shapes; else the op's compute with the dense_pack schedule)."""
    call = (attrs, inputs, out_type, target)
    impl: Impl = tuned_implementation("contrib_dense_pack.x86", *call) or (
        COMPUTES["nn.contrib_dense_pack"], wrap_topi_schedule(x86.schedule_dense_pack))
    return _one(*impl, "nn.contrib_dense_pack.x86")


@register_strategy_func("nn.matmul", "cpu")
def matmul_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """The plain matmul; ``matmul_pack`` (plevel 15) for an untransposed 2-D product with
    enough rows, or with more than one row and a partial last panel of N."""
    s = _one(COMPUTES["nn.matmul"], wrap_topi_schedule(x86.schedule_matmul), "nn.matmul.x86")
    if attrs.transpose_a or attrs.transpose_b or len(inputs[0].shape) != 2:
        return s
    rows, n = const_int(inputs[0].shape[0]), const_int(inputs[1].shape[1])
    k = const_int(inputs[1].shape[0])
    if rows is None or n is None or k is None or 0 in (rows, n, k):
        return s
    # B [K, N]: its panels are copied (rows of nr contiguous floats) inside the kernel,
    # as gemm.py's packed GEMM; a partial last panel is zero-padded there (one row: B
    # is read once anyway, a copy would double that; see topi.x86.dense._gemv_panel)
    if rows >= DENSE_PACK_MIN_ROWS or (rows > 1 and n % x86.panel_width(n)):
        s.add_implementation(_matmul_pack_compute, wrap_topi_schedule(x86.schedule_dense_pack),
                             "matmul_pack.x86", PACKED_PLEVEL)
    return s


@register_strategy_func("nn.batch_matmul", "cpu")
def batch_matmul_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                              target: Any) -> OpStrategy:
    """The ``batch_matmul.x86`` template (constant shapes; else the plain one); the packed form
    (plevel 15) for a symbolic N, enough rows (B ``[b, N, K]``) or a partial last panel (B
    ``[b, K, N]``); the int8 kernel for uint8 x int8."""
    s = OpStrategy()
    call = (attrs, inputs, out_type, target)
    impl: Impl = tuned_implementation("batch_matmul.x86", *call) or (
        COMPUTES["nn.batch_matmul"], wrap_topi_schedule(x86.schedule_batch_matmul))
    s.add_implementation(*impl, "nn.batch_matmul.x86", PLEVEL)
    if not attrs.transpose_a:
        _add_batch_matmul_pack(s, attrs, inputs, out_type, target)
    add_batch_matmul_int8(s, attrs, inputs, out_type, target)
    return s


def _add_batch_matmul_pack(s: OpStrategy, attrs: Any, inputs: list, out_type: Any,
                           target: Any) -> None:
    rows = const_int(inputs[0].shape[1])
    n, k = (const_int(d) for d in inputs[1].shape[1:])
    if not attrs.transpose_b:
        n, k = k, n
    if k is not None and n is None:
        # a symbolic N (attention scores over a relay.Any sequence): the packed form's
        # zero-padded panels keep every register tile at the full vector width (the plain
        # schedule's tail tile has a variable width and is not vectorized)
        s.add_implementation(_batch_matmul_pack_compute,
                             wrap_topi_schedule(x86.schedule_batch_matmul),
                             "batch_matmul_pack.x86", PACKED_PLEVEL)
        return
    if rows is None or n is None or k is None:
        return
    # B [b, N, K]: packed when there are enough rows; B [b, K, N] (rows already
    # contiguous) when the panel does not divide N: the packed copy's zero-padded last
    # panel keeps every register tile at the full vector width
    if rows >= DENSE_PACK_MIN_ROWS if attrs.transpose_b else n % x86.panel_width(n):
        call = (attrs, inputs, out_type, target)
        impl: Impl = tuned_implementation("batch_matmul_pack.x86", *call) \
            or (_batch_matmul_pack_compute, wrap_topi_schedule(x86.schedule_batch_matmul))
        s.add_implementation(*impl, "batch_matmul_pack.x86", PACKED_PLEVEL)


# ---- pools -------------------------------------------------------------------------------------
def _pool_schedule(attrs: Any, outs: list, target: Any) -> Any:
    if attrs.layout not in ("NCW", "NCHW", "NCDHW") and block_of(attrs.layout) is None:
        return _generic(attrs, outs, target)  # the x86 pool schedule: NC[D]H[W] and NCHW{c}c
    return x86.schedule_pool(outs, attrs.layout)


def _generic(attrs: Any, outs: list, target: Any) -> Any:
    return generic_schedule(attrs, outs, target)


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


def _pool_strategy_cpu(name: str, kind: str, nd: int) -> Callable[..., OpStrategy]:
    """``nn.{max,avg}_pool{1,2,3}d``: 2-D and 3-D separable (:func:`_pool_compute`); the x86
    pool schedule in NC[D]H[W] and NCHW{c}c, the default one in other layouts."""
    compute = COMPUTES[name] if nd == 1 else _pool_compute(kind, nd)

    def pool_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
        return _one(compute, _pool_schedule, f"{name}.x86")

    return pool_strategy_cpu


def _global_pool_strategy_cpu(name: str) -> Callable[..., OpStrategy]:
    def global_pool_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                                 target: Any) -> OpStrategy:
        return _one(COMPUTES[name],
                    lambda attrs, outs, target: x86.schedule_global_pool(outs, attrs.layout),
                    f"{name}.x86")

    return global_pool_strategy_cpu


register_strategy_func("nn.max_pool1d", "cpu", _pool_strategy_cpu("nn.max_pool1d", "max", 1))
register_strategy_func("nn.max_pool2d", "cpu", _pool_strategy_cpu("nn.max_pool2d", "max", 2))
register_strategy_func("nn.max_pool3d", "cpu", _pool_strategy_cpu("nn.max_pool3d", "max", 3))
register_strategy_func("nn.avg_pool1d", "cpu", _pool_strategy_cpu("nn.avg_pool1d", "avg", 1))
register_strategy_func("nn.avg_pool2d", "cpu", _pool_strategy_cpu("nn.avg_pool2d", "avg", 2))
register_strategy_func("nn.avg_pool3d", "cpu", _pool_strategy_cpu("nn.avg_pool3d", "avg", 3))
register_strategy_func("nn.global_max_pool2d", "cpu",
                       _global_pool_strategy_cpu("nn.global_max_pool2d"))
register_strategy_func("nn.global_avg_pool2d", "cpu",
                       _global_pool_strategy_cpu("nn.global_avg_pool2d"))


@register_strategy_func("nn.adaptive_avg_pool2d", "cpu")
def adaptive_pool_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                               target: Any) -> OpStrategy:
    return _one(COMPUTES["nn.adaptive_avg_pool2d"], wrap_topi_schedule(x86.schedule_adaptive_pool),
                "nn.adaptive_avg_pool2d.x86")


# ---- softmax, normalization --------------------------------------------------------------------
@register_strategy_func("nn.softmax", "cpu")
def softmax_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """``topi.nn.softmax_by_reciprocal``: one division per row, a multiply per element."""
    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        return [nn.softmax_by_reciprocal(inputs[0], attrs.axis)]

    return _one(compute, wrap_topi_schedule(x86.schedule_softmax), "nn.softmax.x86")


@register_strategy_func("nn.log_softmax", "cpu")
def log_softmax_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                             target: Any) -> OpStrategy:
    """``topi.nn.log_softmax_by_row``: ``max + log(sum)`` once per row."""
    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        return [nn.log_softmax_by_row(inputs[0], attrs.axis)]

    return _one(compute, wrap_topi_schedule(x86.schedule_softmax), "nn.log_softmax.x86")


@register_strategy_func("nn.layer_norm", "cpu")
def layer_norm_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                            target: Any) -> OpStrategy:
    """``topi.x86.layer_norm``: onnxruntime's CPU arithmetic over the last axis."""
    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        gamma, beta = norm_gamma_beta(attrs, inputs)
        return [x86.layer_norm(inputs[0], gamma, beta, attrs.axis, attrs.epsilon)]

    return _one(compute, wrap_topi_schedule(x86.schedule_layer_norm), "nn.layer_norm.x86")


@register_strategy_func("nn.instance_norm", "cpu")
def instance_norm_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                               target: Any) -> OpStrategy:
    return _one(COMPUTES["nn.instance_norm"], wrap_topi_schedule(x86.schedule_instance_norm),
                "nn.instance_norm.x86")


@register_strategy_func("nn.group_norm", "cpu")
def group_norm_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                            target: Any) -> OpStrategy:
    return _one(COMPUTES["nn.group_norm"], wrap_topi_schedule(x86.schedule_group_norm),
                "nn.group_norm.x86")


# ---- transforms --------------------------------------------------------------------------------
@register_strategy_func("concatenate", "cpu")
def concatenate_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                             target: Any) -> OpStrategy:
    return _one(COMPUTES["concatenate"], wrap_topi_schedule(x86.schedule_concatenate),
                "concatenate.x86")


@register_strategy_func("image.resize2d", "cpu")
def resize2d_strategy_cpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """``topi.image.resize2d`` with a linear resize separable (a width pass, then a height
    pass over two contiguous rows; the same operations in the same order)."""
    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        return [topi.image.resize2d(inputs[0], None, attrs.size, attrs.layout, attrs.method,
                                    attrs.coordinate_transformation_mode, attrs.rounding_method,
                                    attrs.out_dtype or None, separable=True)]

    return _one(compute, wrap_topi_schedule(x86.schedule_injective), "image.resize2d.x86")


# ---- bit-serial --------------------------------------------------------------------------------
def _bitserial_strategy_cpu(name: str) -> Callable[..., OpStrategy]:
    def bitserial_strategy_cpu(attrs: Any, inputs: list, out_type: Any,
                               target: Any) -> OpStrategy:
        return _one(COMPUTES[name], BITSERIAL_X86_SCHEDULES[name], f"{name}.x86")

    return bitserial_strategy_cpu


register_strategy_func("nn.bitserial_dense", "cpu", _bitserial_strategy_cpu("nn.bitserial_dense"))
register_strategy_func("nn.bitserial_conv2d", "cpu",
                       _bitserial_strategy_cpu("nn.bitserial_conv2d"))


# ---- the pattern schedules (every other operator, fused injective groups) ----------------------
@schedule_injective.register("cpu")
def schedule_injective_cpu(attrs: Any, outs: list, target: Any) -> Any:
    """``topi.x86.schedule_injective`` (vectorized, parallel) for "cpu" targets."""
    return x86.schedule_injective(outs)


@schedule_reduce.register("cpu")
def schedule_reduce_cpu(attrs: Any, outs: list, target: Any) -> Any:
    """``topi.x86.schedule_reduce`` for "cpu" targets."""
    return x86.schedule_reduce(outs)

