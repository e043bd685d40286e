"""GPU strategies, registered for the target key "gpu" (opencl, cuda, nvptx; TVM's
``strategy/cuda.py``): the generic computes (NCHW layouts: the one AlterOpLayout rewrite
registered for "gpu" is Winograd's weight transform, ``gpu_alter_op.py``) with ``topi.cuda``
schedules: injective chains fused into one kernel,
cross-thread reductions (the "gpu" pattern schedules, which every operator without a function
here uses), softmax and the normalizations one block per row, pools, and the plain
one-thread-per-output schedule (``topi.cuda.schedule_fallback``) for the rest.

The AutoTVM templates (``conv2d_nchw.cuda``, ``depthwise_conv2d_nchw.cuda``, ``dense.cuda``,
``batch_matmul.cuda``) join ``nn.conv2d`` (NCHW/OIHW, plain or depthwise with multiplier 1),
``nn.dense`` (2-D data) and ``nn.batch_matmul`` through the tuned-implementation hook at plevel
20 (> the plain schedule's 10), for constant shapes; ``dense_tensorcore.cuda`` and
``batch_matmul_tensorcore.cuda`` (float16 / bfloat16 on tensor cores, float32 accumulation) at
25 on target "cuda" when M, N, K are multiples of a wmma shape (16/16/16, 32/8/16, 8/32/16);
a run-time batch (rows) alone gets the templates' schedules with fixed untuned tiles
(conv2d plain, depthwise and Winograd chosen for a batch of :data:`SYMBOLIC_BATCH_HINT`; dense;
batch_matmul); other symbolic shapes, layouts or groupings keep the plain GPU schedule. 3x3
stride-1 NCHW convolutions also get Winograd (``conv2d_nchw_winograd.cuda``), above or below
the direct template by :func:`winograd_choice` (task extraction lists both tasks for such
calls, so that tuning measures both); the AlterOpLayout moves the weight transform of the
ones that take Winograd to build time (``nn.contrib_conv2d_winograd_without_weight_transform``,
same task and config). Under ``autotvm.apply_history_best`` the tuned configs
apply; ``autotvm.task.extract_from_program(..., target="opencl")`` lists these tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....topi import cuda
from . import (
    OpStrategy,
    register_strategy_func,
    register_tuned_implementation,
    tuned_implementation,
)
from .generic import (
    COMPUTES,
    conv2d_kind,
    in_target,
    out_dtype_of,
    schedule_fallback,
    schedule_injective,
    schedule_reduce,
)

__all__ = ["schedule_injective_gpu", "schedule_reduce_gpu", "schedule_fallback_gpu",
           "PLEVEL", "TUNED_PLEVEL", "TENSORCORE_PLEVEL", "winograd_choice",
           "SYMBOLIC_BATCH_HINT", "symbolic_batch_hint", "SYMBOLIC_ROWS_VTHREADS",
           "WINOGRAD_MIN_CHANNELS", "WINOGRAD_MIN_MAP"]

PLEVEL = 10
"""The plain schedules' priority."""
TUNED_PLEVEL = 20
"""The AutoTVM templates': above the plain schedules."""
TENSORCORE_PLEVEL = 25
"""The tensor-core templates (float16 products of wmma shapes on target "cuda"): above the
other templates."""


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda attrs, outs, target: fn(outs, target)


def _one(name: str, fschedule: Callable[..., Any]) -> OpStrategy:
    s = OpStrategy()
    s.add_implementation(COMPUTES[name], _wrap(fschedule), f"{name}.gpu", PLEVEL)
    return s


# ---- the AutoTVM templates (the tuned-implementation hook) -------------------------------------
def _const(*tensors: Any) -> bool:
    return all(isinstance(getattr(d, "value", d), int) for t in tensors for d in t.shape)


def _schedule_in(fschedule: Any, target: Any) -> Any:
    """``fschedule(outs)`` as a strategy schedule, run with ``target`` current: the dispatch
    context looks tuned configs up by the current target (relay's lowering does not enter it),
    and the fallback tiles read its threads per block."""
    run = in_target(fschedule, target)
    return lambda attrs, outs, tgt: run(outs)


def _conv2d_template(kind: str, fcompute: Any, fschedule: Any) -> Callable[..., Any]:
    def tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
        if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW" or not _const(*inputs) \
                or conv2d_kind(attrs, inputs) != kind:
            return None

        def compute(attrs: Any, inputs: list, out_type: Any) -> list:
            with target:
                return [fcompute(inputs[0], inputs[1], tuple(attrs.strides),
                                 tuple(attrs.padding), tuple(attrs.dilation),
                                 out_dtype_of(attrs, out_type))]

        return compute, _schedule_in(fschedule, target)

    return tuned


register_tuned_implementation("conv2d_nchw.cuda", _conv2d_template(
    "conv2d_nchw", cuda.conv2d_nchw, cuda.schedule_conv2d_nchw))
register_tuned_implementation("depthwise_conv2d_nchw.cuda", _conv2d_template(
    "depthwise_conv2d_nchw", cuda.depthwise_conv2d_nchw, cuda.schedule_depthwise_conv2d_nchw))


WINOGRAD_MIN_CHANNELS = 64
"""Untuned: GPU Winograd when both channel counts are at least this (its transforms cost per
channel, its products per channel pair: with few channels the transforms dominate)."""
WINOGRAD_MIN_MAP = 7
"""Untuned: GPU Winograd when both output extents are at least this (smaller maps are mostly
padded tiles)."""


def _winograd_eligible(attrs: Any, inputs: list) -> bool:
    """float32 3x3 stride-1 dilation-1 plain NCHW/OIHW convolutions of constant shapes, or of a
    run-time batch only (the transforms' rounding in float16 or integers is not what the direct
    convolution gives)."""
    d, w = inputs
    return (attrs.data_layout == "NCHW" and attrs.kernel_layout == "OIHW"
            and (_const(d, w) or _conv_symbolic_batch(attrs, inputs))
            and conv2d_kind(attrs, inputs) == "conv2d_nchw"
            and tuple(int(v) for v in w.shape[2:]) == (3, 3)
            and tuple(int(v) for v in attrs.strides) == (1, 1)
            and tuple(int(v) for v in attrs.dilation) == (1, 1)
            and d.dtype == w.dtype == "float32" and (attrs.out_dtype or "float32") == "float32")


def _winograd_args(attrs: Any, inputs: list, out_type: Any) -> tuple:
    return (tuple(attrs.strides), tuple(attrs.padding), tuple(attrs.dilation),
            out_dtype_of(attrs, out_type))


def winograd_choice(attrs: Any, inputs: list, out_type: Any, target: Any) -> bool:
    """Whether an eligible NCHW 3x3 stride-1 conv2d takes ``conv2d_nchw_winograd.cuda`` over
    ``conv2d_nchw.cuda``: PassContext ``"relay.cuda.winograd"`` ``True`` / ``False`` forces it;
    ``"auto"``: the faster measured of the two under the dispatch context's records (one with a
    record beats one without), else the untuned rule (:data:`WINOGRAD_MIN_CHANNELS`,
    :data:`WINOGRAD_MIN_MAP`; ``bench/gpu_conv_defaults.py`` measures it)."""
    from ....autotvm.task.dispatcher import DispatchContext
    from ....autotvm.task.task import args_to_workload
    from ....transform import PassContext

    mode = PassContext.current().config.get("relay.cuda.winograd", "auto")
    if mode not in ("auto", True, False):
        raise ValueError(f"PassContext config relay.cuda.winograd must be 'auto', True or False, "
                         f"got {mode!r}")
    if mode is not True and mode is not False:
        ctx = DispatchContext.current
        if ctx is not None and _const(*inputs):  # (a run-time batch has no tuned records)
            rest = _winograd_args(attrs, inputs, out_type)
            costs = {name: ctx.best_cost(target, args_to_workload((*inputs, *rest), name))
                     for name in ("conv2d_nchw.cuda", "conv2d_nchw_winograd.cuda")}
            known = {k: v for k, v in costs.items() if v is not None}
            if known:
                return min(known, key=lambda k: known[k]) == "conv2d_nchw_winograd.cuda"
        d, w = inputs
        ic, oc = int(d.shape[1]), int(w.shape[0])
        oh, ow = (int(v) for v in out_type.shape[2:])
        return min(ic, oc) >= WINOGRAD_MIN_CHANNELS and min(oh, ow) >= WINOGRAD_MIN_MAP
    return bool(mode)


def _extract_both(inputs: list, rest: tuple) -> None:
    """In a task extraction: the direct and the Winograd task of a conv2d call with tensors
    ``inputs`` (data, OIHW weight) and the other arguments ``rest``, whichever the build
    picks (tuning measures both)."""
    from ....autotvm.task.task import args_to_workload
    from ....autotvm.task.topi_integration import TaskExtractEnv

    env = TaskExtractEnv.current
    if env is not None:
        with env.lowering("nn.conv2d"):
            for name in ("conv2d_nchw.cuda", "conv2d_nchw_winograd.cuda"):
                wk = args_to_workload((*inputs, *rest), name)
                env.add(wk[0], wk[1:])


def _winograd_impl(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
    if not _const(*inputs):
        return _winograd_symbolic_batch_impl(target)

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [cuda.conv2d_nchw_winograd(inputs[0], inputs[1],
                                              *_winograd_args(attrs, inputs, out_type))]

    return compute, _schedule_in(cuda.schedule_conv2d_nchw_winograd, target)


def _winograd_symbolic_batch_impl(target: Any) -> Any:
    """Winograd for a run-time batch: the tile size and the products' tiles chosen for a batch
    of :func:`symbolic_batch_hint` (``conv2d_winograd.fixed_entities``), the tile axis
    (batch x tiles per image) guarded where the tiles do not divide it."""
    from ....te import create_schedule
    from ....topi.cuda import conv2d_winograd
    from ....topi.nn.utils import traverse_inline

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [conv2d_winograd.winograd_conv(inputs[0], inputs[1],
                                                  *_winograd_args(attrs, inputs, out_type),
                                                  batch_hint=symbolic_batch_hint())]

    def fschedule(attrs: Any, outs: list, tgt: Any) -> Any:
        outs = list(outs)
        s = create_schedule([o.op for o in outs])
        hint = symbolic_batch_hint()

        def callback(op: Any) -> None:
            if op.tag == "conv2d_nchw_winograd":
                cfg = _FixedTiles({})
                with target:
                    conv2d_winograd.fixed_entities(cfg, op.output(0), hint)
                    conv2d_winograd.schedule_winograd(cfg, s, op.output(0), hint)

        traverse_inline(s, outs[0].op, callback)
        return s

    return compute, fschedule


@register_tuned_implementation("dense.cuda")
def _dense_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
    if len(inputs[0].shape) != 2 or not _const(*inputs):
        return None

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [cuda.dense(inputs[0], inputs[1], None, out_dtype_of(attrs, out_type))]

    return compute, _schedule_in(cuda.schedule_dense, target)


def _tensorcore_ok(target: Any, a: Any, b: Any, m: Any, n: Any, k: Any) -> bool:
    """Tensor cores apply: target "cuda" (nvptx and OpenCL have no wmma here), float16 inputs
    (sm_70 or newer) or bfloat16 ones (sm_80 or newer), constant M, N, K that one wmma shape
    tiles (TVM's rule)."""
    if getattr(target, "kind", None) != "cuda" or a.dtype != b.dtype \
            or a.dtype not in ("float16", "bfloat16"):
        return False
    arch = getattr(target, "arch_name", None)  # none: sm_80 and sm_90 are built
    if arch and int("".join(c for c in arch.removeprefix("sm_") if c.isdigit()) or 0) \
            < (80 if a.dtype == "bfloat16" else 70):
        return False
    dims = [getattr(d, "value", d) for d in (m, n, k)]
    return all(isinstance(d, int) for d in dims) and cuda.tensorcore_shape(*dims) is not None


@register_tuned_implementation("dense_tensorcore.cuda")
def _dense_tensorcore_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
    data, weight = inputs
    if len(data.shape) != 2 or not _tensorcore_ok(target, data, weight, data.shape[0],
                                                  weight.shape[0], data.shape[1]):
        return None

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [cuda.dense_tensorcore(inputs[0], inputs[1], None,
                                          out_dtype_of(attrs, out_type))]

    return compute, _schedule_in(cuda.schedule_dense_tensorcore, target)


@register_tuned_implementation("batch_matmul_tensorcore.cuda")
def _batch_matmul_tensorcore_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
    x, y = inputs
    if bool(attrs.transpose_a) or not bool(attrs.transpose_b) or len(x.shape) != 3 \
            or not _tensorcore_ok(target, x, y, x.shape[1], y.shape[1], x.shape[2]):
        return None

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [cuda.batch_matmul_tensorcore(inputs[0], inputs[1], None,
                                                 out_dtype_of(attrs, out_type))]

    return compute, _schedule_in(cuda.schedule_batch_matmul_tensorcore, target)


@register_tuned_implementation("batch_matmul.cuda")
def _batch_matmul_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Any:
    if not _const(*inputs):
        return None

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return [cuda.batch_matmul(inputs[0], inputs[1], None, out_dtype_of(attrs, out_type),
                                      bool(attrs.transpose_a), bool(attrs.transpose_b))]

    return compute, _schedule_in(cuda.schedule_batch_matmul, target)


# ---- strategies --------------------------------------------------------------------------------
@register_strategy_func("nn.conv2d", "gpu")
def conv2d_strategy_gpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """The plain schedule; the template of its kind (plain or depthwise) when it applies; for 3x3
    stride-1 NCHW convolutions also Winograd (``conv2d_nchw_winograd.cuda``, weight transformed
    in its first kernel unless the AlterOpLayout moved that to build time), above the direct template where :func:`winograd_choice` says so,
    below it otherwise."""
    kind = conv2d_kind(attrs, inputs)
    s = _one("nn.conv2d", cuda.schedule_fallback)
    impl = tuned_implementation(f"{kind}.cuda", attrs, inputs, out_type, target) \
        if kind != "group_conv2d_nchw" else None
    if impl is not None:
        s.add_implementation(*impl, f"{kind}.cuda", TUNED_PLEVEL)
    elif inputs is not None and _conv_symbolic_batch(attrs, inputs):
        # a dynamic batch: the template's schedule with the untuned rule's tiles, fixed
        s.add_implementation(COMPUTES["nn.conv2d"], _conv2d_symbolic_batch_schedule(kind),
                             f"{kind}.gpu_symbolic_batch", PLEVEL + 5)
    if _winograd_eligible(attrs, inputs):
        if _const(*inputs):  # both algorithms' tasks, whichever is built
            _extract_both(inputs, _winograd_args(attrs, inputs, out_type))
        # (a run-time batch: above / below the direct schedule's PLEVEL + 5)
        level = TUNED_PLEVEL + 5 if winograd_choice(attrs, inputs, out_type, target) \
            else TUNED_PLEVEL - 5 if _const(*inputs) else PLEVEL + 3
        s.add_implementation(*_winograd_impl(attrs, inputs, out_type, target),
                             "conv2d_nchw_winograd.cuda" if _const(*inputs)
                             else "conv2d_nchw_winograd.gpu_symbolic_batch", level)
    return s


@register_strategy_func("nn.contrib_conv2d_winograd_without_weight_transform", "gpu")
def conv2d_winograd_without_weight_transform_strategy_gpu(attrs: Any, inputs: list,
                                                          out_type: Any,
                                                          target: Any) -> OpStrategy:
    """A Winograd conv2d whose weight the AlterOpLayout transformed (``gpu_alter_op.py``):
    ``conv2d_nchw_winograd.cuda``'s schedule, its config that of the original conv2d's
    workload. A task extraction still lists both of the original call's tasks."""
    from ....te import placeholder

    data, u = inputs
    co, ci = int(u.shape[3]), int(u.shape[2])
    _extract_both([data, placeholder((co, ci, 3, 3), u.dtype, name="kernel")],
                  _winograd_args(attrs, inputs, out_type))

    def compute(attrs: Any, inputs: list, out_type: Any) -> list:
        with target:
            return COMPUTES["nn.contrib_conv2d_winograd_without_weight_transform"](
                attrs, inputs, out_type)

    s = OpStrategy()
    s.add_implementation(compute, _schedule_in(cuda.schedule_conv2d_nchw_winograd, target),
                         "conv2d_nchw_winograd.cuda", TUNED_PLEVEL)
    return s


@register_strategy_func("nn.contrib_conv2d_winograd_weight_transform", "gpu")
def winograd_weight_transform_strategy_gpu(attrs: Any, inputs: list, out_type: Any,
                                           target: Any) -> OpStrategy:
    """The Winograd weight transform of a weight known only at run time (a constant one is
    folded at build time): one kernel, a thread per channel pair, unrolled
    (``topi.cuda.schedule_winograd_weight_transform``)."""
    s = OpStrategy()
    s.add_implementation(COMPUTES["nn.contrib_conv2d_winograd_weight_transform"],
                         _schedule_in(cuda.schedule_winograd_weight_transform, target),
                         "winograd_weight_transform.gpu", PLEVEL)
    return s


class _FixedTiles:
    """The config a template's schedule reads, fixed (no search): for a product whose row count
    is known only at run time, where the AutoTVM template (its split space, its flop count)
    needs constant extents."""

    is_fallback = False

    def __init__(self, entities: dict[str, Any]):
        self._entities = entities

    def define_split(self, *args: Any, **kwargs: Any) -> None:
        return None

    def define_knob(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getitem__(self, name: str) -> Any:
        return self._entities[name]

    def __setitem__(self, name: str, entity: Any) -> None:
        self._entities[name] = entity


SYMBOLIC_ROWS_VTHREADS = 1
"""Rows per thread of a dense with a run-time row count, as virtual threads (each its own
guarded row: a register tile over rows would get a run-time trip count and live in local
memory): 1 gives 16-row blocks (more blocks for few rows), 4 gives 64-row blocks of 4 x 4
outputs a thread (sm_90: 40 registers, no stack; more reuse for many rows). Not measured on a
GPU yet: ``bench/gpu_dynamic.py``'s variant ``rows64`` times 4 against this default."""


def _schedule_dense_symbolic_rows(attrs: Any, outs: list, target: Any) -> Any:
    """``dense.cuda``'s tiled schedule (shared-memory tiles of both operands, cooperative
    coalesced loads, register tiles) with fixed tiles: 16 x :data:`SYMBOLIC_ROWS_VTHREADS`
    rows a block (a thread each per virtual thread), up to 16 threads x 4 columns, the
    reduction split as its untuned fallback does (within the target's threads per block); the
    run-time row count leaves a guarded last block."""
    from ....autotvm.space import OtherOptionEntity, SplitEntity
    from ....te import create_schedule
    from ....topi.cuda.dense import schedule_matmul_tiles
    from ....topi.cuda.utils import fallback_tile, largest_divisor, max_threads
    from ....topi.nn.utils import traverse_inline

    outs = list(outs)
    s = create_schedule([o.op for o in outs])

    def callback(op: Any) -> None:
        if op.tag == "dense":
            mm = op.output(0)
            n, k = int(mm.shape[1]), int(op.reduce_axis[0].dom.extent)
            with target:
                limit = max_threads()
            ty = min(16, limit)
            cfg = _FixedTiles({
                # one row per thread: a register tile over rows would get a run-time trip
                # count (the guard of the last block) and live in local memory
                "tile_y": SplitEntity([-1, SYMBOLIC_ROWS_VTHREADS, ty, 1]),
                "tile_x": fallback_tile(n, max(1, min(16, limit // ty)), 4, parts=4),
                "tile_k": SplitEntity([-1, largest_divisor(k, 16)]),
                "auto_unroll_max_step": OtherOptionEntity(512),
                "unroll_explicit": OtherOptionEntity(1),
                "vectorize": OtherOptionEntity(0), "double_buffer": OtherOptionEntity(0)})
            with target:
                schedule_matmul_tiles(cfg, s, mm)

    traverse_inline(s, outs[0].op, callback)
    return s


def _schedule_batch_matmul_symbolic_batch(attrs: Any, outs: list, target: Any) -> Any:
    """``batch_matmul.cuda``'s tiled schedule for a run-time batch count with constant
    matrices: the batch bound to blockIdx.z, the matrices tiled as the template's untuned
    fallback tiles them (exact divisors: no guards)."""
    from ....te import create_schedule
    from ....topi.cuda.dense import fallback_config, schedule_matmul_tiles
    from ....topi.nn.utils import traverse_inline

    outs = list(outs)
    s = create_schedule([o.op for o in outs])

    def callback(op: Any) -> None:
        if op.tag == "batch_matmul":
            mm = op.output(0)
            m, n = int(mm.shape[1]), int(mm.shape[2])
            k = int(op.reduce_axis[0].dom.extent)
            from ....autotvm.space import OtherOptionEntity

            cfg = _FixedTiles({"auto_unroll_max_step": OtherOptionEntity(512),
                               "unroll_explicit": OtherOptionEntity(1)})
            with target:
                fallback_config(cfg, m, n, k, 1)  # (the tiles; batch count unknown: as if 1)
                schedule_matmul_tiles(cfg, s, mm)

    traverse_inline(s, outs[0].op, callback)
    return s


SYMBOLIC_BATCH_HINT = 1
"""The batch the tiles of a convolution with a run-time batch are chosen for (PassContext
``"relay.gpu.symbolic_batch_hint"`` overrides it): the untuned rule shrinks the per-thread tile
until the grid has ``conv2d_direct.MIN_BLOCKS`` blocks at this batch; a larger run-time batch
multiplies the blocks (more waves, same tiles), a smaller one leaves SMs idle. TVM's
convention for dynamic shapes is to tune at one representative shape; 1 here, so that the
batch-1 grid is full (an idle SM costs more than a lower reuse per thread, as the rule itself
assumes); ``bench/gpu_dynamic.py --hints`` measures others."""


def symbolic_batch_hint() -> int:
    """:data:`SYMBOLIC_BATCH_HINT`, or PassContext ``"relay.gpu.symbolic_batch_hint"``."""
    from ....transform import PassContext

    hint = PassContext.current().config.get("relay.gpu.symbolic_batch_hint",
                                            SYMBOLIC_BATCH_HINT)
    if isinstance(hint, bool) or not isinstance(hint, int) or hint < 1:
        raise ValueError(f"PassContext config relay.gpu.symbolic_batch_hint must be an int >= 1, "
                         f"got {hint!r}")
    return hint


def _conv_symbolic_batch(attrs: Any, inputs: list) -> bool:
    """An NCHW/OIHW convolution (groups 1 or depthwise) whose batch only is a run-time size
    (channels, map and weights constant)."""
    data, weight = inputs[0], inputs[1]
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW" or len(data.shape) != 4:
        return False
    n = getattr(data.shape[0], "value", data.shape[0])
    rest = [getattr(d, "value", d) for d in data.shape[1:]]
    return (not isinstance(n, int) and all(isinstance(d, int) for d in rest) and _const(weight)
            and conv2d_kind(attrs, inputs) in ("conv2d_nchw", "depthwise_conv2d_nchw"))


def _conv2d_symbolic_batch_schedule(kind: str) -> Callable[..., Any]:
    """The direct (or depthwise) template's schedule for a run-time batch: its untuned rule's
    tiles over the constant axes (output channels, rows, columns, the reduction), derived as for
    a batch of :func:`symbolic_batch_hint`, fixed (the AutoTVM space needs constant extents);
    the batch a block axis (``blockIdx.z`` with the channel blocks), one image per block, so
    every run-time batch is covered exactly."""
    from ....te import create_schedule
    from ....topi.cuda import conv2d_direct, depthwise_conv2d
    from ....topi.nn.utils import traverse_inline

    def fschedule(attrs: Any, outs: list, target: Any) -> Any:
        outs = list(outs)
        s = create_schedule([o.op for o in outs])
        hint = symbolic_batch_hint()

        def callback(op: Any) -> None:
            if op.tag != kind:
                return
            cfg = _FixedTiles({})
            with target:
                if kind == "conv2d_nchw":
                    conv2d_direct.fallback_entities(cfg, op.output(0), hint)
                    conv2d_direct.schedule_direct_conv(cfg, s, op.output(0))
                else:
                    depthwise_conv2d.fallback_entities(cfg, op.output(0))
                    depthwise_conv2d.schedule_depthwise(cfg, s, op.output(0))

        traverse_inline(s, outs[0].op, callback)
        return s

    return fschedule


def _symbolic_batch(inputs: list) -> bool:
    """A batch_matmul whose batch counts only are run-time sizes (matrices constant, at least
    16 rows, columns and reduction each)."""
    a, b = inputs[0], inputs[1]
    dims = [getattr(d, "value", d) for t in (a, b) for d in t.shape[1:]]
    return (not _const(a, b) and all(isinstance(d, int) and d >= 16 for d in dims))


def _symbolic_rows(inputs: list) -> bool:
    """A 2-D dense whose rows only are a run-time size (the weight and K constant), with
    columns and reduction long enough for shared-memory tiles to pay (at least 32 each; a
    narrower product keeps the plain schedule)."""
    data, weight = inputs[0], inputs[1]
    if len(data.shape) != 2 or _const(data) or not _const(weight):
        return False
    k = getattr(data.shape[1], "value", data.shape[1])
    return isinstance(k, int) and k >= 32 and int(weight.shape[0]) >= 32


@register_strategy_func("nn.dense", "gpu")
def dense_strategy_gpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    s = _one("nn.dense", cuda.schedule_fallback)
    impl = tuned_implementation("dense.cuda", attrs, inputs, out_type, target)
    if impl is not None:
        s.add_implementation(*impl, "dense.cuda", TUNED_PLEVEL)
    elif inputs is not None and _symbolic_rows(inputs):
        # a dynamic batch/sequence: the template's tiles, fixed (above the plain schedule)
        s.add_implementation(COMPUTES["nn.dense"], _schedule_dense_symbolic_rows,
                             "dense.gpu_symbolic_rows", PLEVEL + 5)
    impl = tuned_implementation("dense_tensorcore.cuda", attrs, inputs, out_type, target)
    if impl is not None:
        s.add_implementation(*impl, "dense_tensorcore.cuda", TENSORCORE_PLEVEL)
    return s


@register_strategy_func("nn.batch_matmul", "gpu")
def batch_matmul_strategy_gpu(attrs: Any, inputs: list, out_type: Any,
                              target: Any) -> OpStrategy:
    s = _one("nn.batch_matmul", cuda.schedule_fallback)
    impl = tuned_implementation("batch_matmul.cuda", attrs, inputs, out_type, target)
    if impl is not None:
        s.add_implementation(*impl, "batch_matmul.cuda", TUNED_PLEVEL)
    elif inputs is not None and _symbolic_batch(inputs):
        # a dynamic batch (attention's batch x heads): the template's tiles, fixed
        s.add_implementation(COMPUTES["nn.batch_matmul"], _schedule_batch_matmul_symbolic_batch,
                             "batch_matmul.gpu_symbolic_batch", PLEVEL + 5)
    impl = tuned_implementation("batch_matmul_tensorcore.cuda", attrs, inputs, out_type, target)
    if impl is not None:
        s.add_implementation(*impl, "batch_matmul_tensorcore.cuda", TENSORCORE_PLEVEL)
    return s


@register_strategy_func("nn.softmax", "gpu")
def softmax_strategy_gpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """One block per row."""
    return _one("nn.softmax", cuda.schedule_softmax)


@register_strategy_func("nn.log_softmax", "gpu")
def log_softmax_strategy_gpu(attrs: Any, inputs: list, out_type: Any,
                             target: Any) -> OpStrategy:
    return _one("nn.log_softmax", cuda.schedule_softmax)


@register_strategy_func("nn.layer_norm", "gpu")
def layer_norm_strategy_gpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    """One block per normalized row (also instance_norm and group_norm)."""
    return _one("nn.layer_norm", cuda.schedule_layer_norm)


@register_strategy_func("nn.instance_norm", "gpu")
def instance_norm_strategy_gpu(attrs: Any, inputs: list, out_type: Any,
                               target: Any) -> OpStrategy:
    return _one("nn.instance_norm", cuda.schedule_layer_norm)


@register_strategy_func("nn.group_norm", "gpu")
def group_norm_strategy_gpu(attrs: Any, inputs: list, out_type: Any, target: Any) -> OpStrategy:
    return _one("nn.group_norm", cuda.schedule_layer_norm)


@register_strategy_func("nn.global_avg_pool2d", "gpu")
def global_avg_pool_strategy_gpu(attrs: Any, inputs: list, out_type: Any,
                                 target: Any) -> OpStrategy:
    return _one("nn.global_avg_pool2d", cuda.schedule_pool)


@register_strategy_func("nn.global_max_pool2d", "gpu")
def global_max_pool_strategy_gpu(attrs: Any, inputs: list, out_type: Any,
                                 target: Any) -> OpStrategy:
    return _one("nn.global_max_pool2d", cuda.schedule_pool)


@register_strategy_func("nn.adaptive_avg_pool2d", "gpu")
def adaptive_pool_strategy_gpu(attrs: Any, inputs: list, out_type: Any,
                               target: Any) -> OpStrategy:
    return _one("nn.adaptive_avg_pool2d", cuda.schedule_pool)


# ---- the pattern schedules (every other operator, fused groups) --------------------------------
@schedule_injective.register("gpu")
def schedule_injective_gpu(attrs: Any, outs: list, target: Any) -> Any:
    return cuda.schedule_injective(outs, target)


@schedule_reduce.register("gpu")
def schedule_reduce_gpu(attrs: Any, outs: list, target: Any) -> Any:
    return cuda.schedule_reduce(outs, target)


@schedule_fallback.register("gpu")
def schedule_fallback_gpu(attrs: Any, outs: list, target: Any) -> Any:
    return cuda.schedule_fallback(outs, target)


# ---- the dynamic operators (strategy/dyn.py) on a GPU ---------------------------------------------
# Their "generic" strategy schedules nothing (no thread is bound: not a GPU kernel); here the
# index-mapping ones get the injective GPU schedule, dyn.topk (a reduction) the fallback
# (threads bound with guards), all with symbolic extents.
def _dyn_gpu_strategies() -> None:
    from . import dyn

    def strategy(name: str, compute: Any, fschedule: Any) -> Callable[..., OpStrategy]:
        def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
            s = OpStrategy()
            s.add_implementation(compute, fschedule, f"{name}.gpu", 10)
            return s

        return fstrategy

    injective = {"dyn.reshape": dyn._reshape, "dyn.squeeze": dyn._squeeze,
                 "dyn.expand_dims": dyn._expand_dims, "dyn.broadcast_to": dyn._broadcast_to,
                 "dyn.tile": dyn._tile, "dyn.full": dyn._full, "dyn.arange": dyn._arange,
                 "dyn.strided_slice": dyn._strided_slice, "dyn.nn.pad": dyn._pad,
                 "dyn.split": dyn._split, "dyn.one_hot": dyn._one_hot,
                 "dyn.image.resize": dyn._resize, "shape_of": dyn._shape_of}
    for name, compute in injective.items():
        register_strategy_func(name, "gpu", strategy(name, compute, schedule_injective_gpu))
    register_strategy_func("dyn.topk", "gpu", strategy("dyn.topk", dyn._topk,
                                                       schedule_fallback_gpu))


_dyn_gpu_strategies()
