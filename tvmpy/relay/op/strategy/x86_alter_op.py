"""The x86 layout policy (targets with the key "cpu": llvm, c), registered on the generic layout
hooks of ``alter_layout.py`` (TVM's ``topi/x86/conv2d_alter_op.py`` and ``dense_alter_op.py``):

* ``nn.conv2d`` (NCHW data, OIHW kernel, groups 1, depthwise, or grouped with whole-vector
  blocks within a group; static shape; see :func:`conv_blocks` and :func:`grouped_blocks`) becomes ``nn.contrib_conv2d_NCHWc`` with data ``NCHW{ic_bn}c``, kernel
  ``OIHW{ic_bn}i{oc_bn}o`` and output ``NCHW{oc_bn}c`` (depthwise: kernel ``OIHW1i{c}o``, data
  and output ``NCHW{c}c``, keeping the block its input already has when it fits); the block sizes
  are the largest divisors of the channel counts that fit one vector register of the target
  (16 fp32 lanes with AVX-512, 8 with AVX2; at most :data:`MAX_BLOCK`), as TVM's x86 default
  config (``topi.nn.conv2d_infer_layout``), except that a block of no register width (10, 12,
  15) gives way to a power of two of at least half a vector (:func:`vector_block`). A constant kernel is transformed at compile time; a
  kernel that is a Var gets a ``layout_transform`` call (FoldConstant folds it once bound).
  A 3x3 stride-1 one may become ``nn.contrib_conv2d_winograd_nchwc`` instead (same layouts, the
  weight Winograd-transformed here): ``x86_winograd.py`` says when.
  A plain convolution whose output channel count has no divisor of at least half a vector (57:
  block 3) or only one of no register width (182: block 7 or 14), or whose block is half a
  vector where whole vectors add at most 1/16 of the channels to a reduction of at least 8 per
  lane (128 with AVX-512, 64 with AVX2: 232 -> 240, 116 -> 120; see :func:`padded_block`), on
  every CPU, computes zero output channels up to a whole number of
  vector-wide blocks instead (the weight padded with zero filters: at compile time for a
  constant), and the padded channels are cropped on the way out (``layout_transform`` to NCHW +
  ``strided_slice``, fused with the bias and activation that follow).
  The relay pass PadChannels (``relay/transform/pad_channels.py``, before this one) covers
  what the crop makes too dear here: half-vector channel counts of whole conv chains padded
  with no crop, any waste (24 -> 32), on cores with two 512-bit FMA units; both take their blocks from
  :func:`block_lanes` and :func:`channel_block`, and a chain it padded arrives here with
  whole-vector counts.
  A plain convolution with a window (not 1x1) and at most a quarter vector of output channels
  (an image head, 128 -> 3), unit width stride and rows of at least a vector stays in NCHW
  (:func:`few_output_channels`: its columns along the vector lanes).
  A 1x1 stride-1 convolution of batch 1 whose input arrives in NCHW becomes one ``nn.matmul``
  in NCHW instead (:func:`is_pointwise`, no layout transforms), unless it has at least
  :data:`POINTWISE_NCHWC_MIN_CHANNELS` input and output channels.
* ``nn.dense`` with enough rows becomes ``nn.contrib_dense_pack`` of the prepacked weight
  (:func:`alter_dense_layout`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....target import Target
from ....tir.data_layout import blocked
from ....topi import x86
from ....topi.nn.conv2d import conv2d_infer_layout
from ....topi.nn.winograd import winograd_weight_transform_np
from ....transform import PassContext
from ...expr import Call, Constant, ConstData, RelayExpr
from ...op import nn as _nn
from ...op import transform as _tr
from ...op.numpy_impl import layout_transform_np
from ...ty import TensorType
from ..registry import make_call
from .alter_layout import conv2d_alter_layout, conv2d_layout_demand, dense_alter_layout
from .x86 import DENSE_PACK_MIN_ROWS, const_int
from .x86_int8 import alter_conv2d_int8, alter_dense_int8, conv2d_int8_demand
from .x86_winograd import winograd_tile

__all__ = ["MAX_BLOCK", "block_lanes", "channel_block", "whole_vectors", "conv_blocks",
           "vector_block", "graph_blocks", "padded_block", "conv_padding",
           "PAD_MIN_REDUCTION_PER_LANE", "pad_min_reduction", "PAD_HALF_MAX_WASTE",
           "is_depthwise", "is_grouped", "grouped_blocks",
           "is_pointwise", "POINTWISE_MAX_PIXELS", "POINTWISE_NCHWC_MIN_CHANNELS",
           "few_output_channels", "NCHW_MAX_OC_FRACTION", "NCHW_INPUT_MIN_WIDTH",
           "NCHW_INPUT_MAX_CHANNEL_VECTORS",
           "alter_dense_layout"]

MAX_BLOCK = 16
"""Largest channel block: 16 fp32 lanes (one AVX-512 register)."""


def block_lanes(target: Any, dtype: str = "float32") -> int:
    """The widest NCHWc channel block for ``dtype`` on ``target``: its vector lanes, at most
    :data:`MAX_BLOCK` (``MAX_BLOCK`` without a target). The one rule of the blocks here and of
    the channel padding of ``relay/transform/pad_channels.py``."""
    return min(MAX_BLOCK, target.vector_lanes(dtype)) if target is not None else MAX_BLOCK


def channel_block(c: int, lanes: int) -> int:
    """The block the NCHWc layout gives ``c`` channels with vectors of ``lanes`` (no graph
    tuner choice): the largest divisor of ``c`` within one vector
    (``topi.nn.conv2d_infer_layout``), as :func:`vector_block` adjusts it. PadChannels asks
    it which channel counts would be blocked by half a vector."""
    return vector_block(c, conv2d_infer_layout(c, c, lanes)[0], lanes)


def whole_vectors(c: int, lanes: int) -> int:
    """``c`` rounded up to a multiple of ``lanes`` (the channel count a padding gives)."""
    return -(-c // lanes) * lanes


PAD_MIN_REDUCTION_PER_LANE = 8
"""A convolution whose output block is half a vector (or of no register width) pads its output
channels to whole vectors from a reduction (input channels x window) of this many per vector
lane on (:func:`pad_min_reduction`: 128 with 16 lanes, 64 with 8).

Why per lane: a half-width block runs every FMA at half the vector's width, so padding saves
``reduction / lanes`` vector FMAs' worth of time per output value (at ``F`` lane-FMAs a cycle:
``reduction / (lanes / 2 x F) - reduction / (lanes x F)``), against a crop that reads and
writes each output value once whatever the vector: the break-even reduction grows with the
lanes. 16 lanes: was 256 with ``PAD_HALF_MAX_WASTE`` 32; 128 and 16 (2026-11-30, helper h-shuf)
also pad ShuffleNetV2's 232 -> 232 1x1s (to 240: 53 -> 32-35 us each on 7x7, 1 thread, Intel
Xeon), RegNetY-400MF's 208 -> 440 (to 448) and the 672 -> 168 squeeze-excitation convs of
MobileNetV3 (to 176). Whole models, one process, interleaved, 1 thread, CPU time, tvmpy /
onnxruntime: shufflenet_v2 0.867 -> 0.819, regnet_y_400mf 0.711 -> 0.685, mobilenet_v3_large
0.914 -> 0.884 (load 10-11: other sessions' builds). 8 lanes (AMD EPYC Zen 3, AVX2,
2026-12-02): at 128 ShuffleNetV2's 116 -> 116 1x1s after the depthwise convs kept 4-lane
blocks (0.16 ms each on 14x14, 33 GFLOP/s; the same shape as a matmul: 0.076 ms); at 64 they
pad to 120: shufflenet_v2 0.87-0.89x the time of 128 (the only zoo model whose graph changes
on AVX2)."""


def pad_min_reduction(lanes: int) -> int:
    """The reduction from which :func:`padded_block` pads a half-vector or odd block."""
    return PAD_MIN_REDUCTION_PER_LANE * lanes


PAD_HALF_MAX_WASTE = 16
"""A half-vector output block is padded to whole vectors only when the added channels are at
most 1 / ``PAD_HALF_MAX_WASTE`` of the channels (:func:`padded_block`)."""


def padded_block(c: int, bn: int, lanes: int, reduction: int = 0) -> tuple[int, int]:
    """``(block, padded channel count)`` for ``c`` channels whose largest divisor within one
    vector of ``lanes`` is ``bn``: ``(bn, c)`` when that block fills at least half a vector or
    holds all the channels, else ``(lanes, c rounded up to lanes)`` (zero channels added).

    A block of 3 (57 channels) leaves most vector lanes idle in every FMA of the NCHWc kernel
    (and of Winograd's transforms); padding 57 to 64 costs 12% more arithmetic for 16-lane
    vectors (bench/conv_shapes.py, RESULTS.md "Convolutions at any shape").

    A block of exactly half a vector is padded too when the padding adds at most
    1 / :data:`PAD_HALF_MAX_WASTE` of the channels and the ``reduction`` (input channels x
    window) is at least :func:`pad_min_reduction`: half-width FMAs halve the peak of a
    core with two full-width FMA pipes (Intel's AVX-512 server cores), while the padding costs
    a few percent of arithmetic and the crop (one pass over the output, against
    ``reduction`` FMAs per output value); on a core that splits full-width FMAs in two halves
    (Zen 4) the two widths run at the same FMA rate and the full vector still needs half the
    broadcasts and loads. SqueezeNet's classifier 512 -> 1000 1x1 on 13x13, 1 thread, CPU time,
    Intel Xeon (Emerald Rapids, KVM), loaded (2026-11-30): 125 blocks of 8 2455 us, 63 blocks of
    16 (1008 channels) 1207 us (onnxruntime pads to 1008 too: 1062 us).

    A block of no register width (7 or 14 lanes: 182 channels = 2 x 7 x 13, SSDLite's class
    head; 5 or 15 of YOLO's 255) is padded to whole vectors for a reduction of at least
    :func:`pad_min_reduction`, whatever it adds (at most ``lanes - 1`` channels): LLVM
    splits each of its loads, stores and FMAs into 4 + 2 + 1 lanes. AMD EPYC Zen 3 (AVX2),
    1 thread, CPU time, conv + bias alone, 2026-12-02: 64 -> 182 3x3 on 40x40 (Winograd) 9.2 ->
    1.9 ms, 128 -> 182 on 20x20 4.2 -> 1.0 ms."""
    if bn == c:
        return bn, c
    cp = whole_vectors(c, lanes)
    long = reduction >= pad_min_reduction(lanes)
    if bn & (bn - 1) and long:
        return lanes, cp  # no register width (7, 14 lanes): every vector op split in 2-3
    if bn * 2 > lanes:
        return bn, c
    if bn * 2 == lanes and not (long and (cp - c) * PAD_HALF_MAX_WASTE <= c):
        return bn, c
    return lanes, cp


def conv_padding(call: Call, target: Any = None) -> tuple[int, int, int] | None:
    """``(ic_bn, oc_bn, padded oc)`` of a typed plain ``nn.conv2d`` that :func:`conv_blocks`
    rewrites (None otherwise; depthwise convolutions keep their blocks). Only the output
    channels are padded: the input block is the reduction's inner loop (each input channel is a
    broadcast), so a small one costs little, while padding the input channels costs their
    arithmetic and a pad pass (57 -> 64 input channels was 10-35% slower, 1 thread)."""
    blocks = conv_blocks(call, target)
    if blocks is None or call.attrs.groups != 1:
        return None
    if graph_blocks(call, target) is not None:  # the graph tuner's blocks: no padding
        return blocks[0], blocks[1], int(call.args[1].checked_type.shape[0])
    d, w = (x.checked_type for x in call.args)
    lanes = block_lanes(target, d.dtype)
    reduction = int(w.shape[1]) * int(w.shape[2]) * int(w.shape[3])
    oc_bn, ocp = padded_block(int(w.shape[0]), blocks[1], lanes, reduction)
    return blocks[0], oc_bn, ocp


def is_depthwise(call: Call) -> bool:
    """A typed NCHW/OIHW ``nn.conv2d`` with one filter per input channel (multiplier 1)."""
    d, w = (x.checked_type for x in call.args)
    c = d.shape[1]
    return call.attrs.groups == c and w.shape[0] == c and w.shape[1] == 1 and c != 1


def conv_blocks(call: Call, target: Any = None) -> tuple[int, int] | None:
    """``(ic_bn, oc_bn)`` when this typed ``nn.conv2d`` call is rewritten to NCHW{c}c, else None.
    The blocks: the largest divisors of the channel counts that fit the target's vector of
    that dtype (at most ``MAX_BLOCK``), as TVM's x86 default config.

    The rule: a plain (groups 1) or depthwise (multiplier 1) NCHW/OIHW convolution with
    static shapes (the batch may be symbolic) and a float dtype. Measured (single op, same
    run, see the docstring of tests/relay/test_pass_alter_op_layout.py): the blocked schedule
    was never slower than the NCHW one: 1.1-3x on ResNet-18's and MobileNetV2's plain layers,
    1.9-2.6x on MobileNetV2's depthwise ones; the blocked layout then flows on to the next
    convolution without a transform. Other grouped convolutions: :func:`grouped_blocks`.
    """
    a = call.attrs
    if a.data_layout != "NCHW" or a.kernel_layout != "OIHW" or a.out_layout not in ("", "NCHW"):
        return None
    d, w = (x.checked_type for x in call.args)
    if not (isinstance(d, TensorType) and isinstance(w, TensorType)):
        return None
    if len(d.shape) != 4 or not all(isinstance(s, int) for s in (*d.shape[1:], *w.shape)):
        return None  # the batch may be symbolic
    if not d.dtype.startswith("float") or d.dtype != w.dtype:
        return None
    if any(isinstance(s, int) and s == 0 for s in (*d.shape, *w.shape)):
        return None  # an empty convolution: its lowering computes nothing, in any layout
    lanes = block_lanes(target, d.dtype)
    if a.groups != 1 and not is_depthwise(call):
        return grouped_blocks(int(d.shape[1]), int(w.shape[0]), a.groups, lanes)
    chosen = graph_blocks(call, target)
    if chosen is not None:
        return chosen
    ic, oc = int(d.shape[1]), int(w.shape[0])
    if (a.groups == 1 and int(w.shape[2]) * int(w.shape[3]) > 1
            and few_output_channels(oc, int(d.shape[3]), a.strides, lanes)):
        return None
    return channel_block(ic, lanes), channel_block(oc, lanes)


NCHW_MAX_OC_FRACTION = 4
"""A plain convolution with a window, at most ``lanes / NCHW_MAX_OC_FRACTION`` output channels,
unit width stride and input rows of at least ``lanes`` columns stays in NCHW
(:func:`few_output_channels`; 0: never). DCGAN's 128 -> 3 phase convolutions (2x2 on 32x32,
1 thread, Intel Xeon, loaded): NCHW3c ~100 us each (3 of 16 lanes per FMA), NCHW 50-60 us.
Half a vector (2) also took SSDLite's 8-channel 3x3 box heads (40x40, 20x20) to NCHW, and
the model 2% slower (layout transforms around them; half-vector FMAs waste only half)."""


def few_output_channels(oc: int, width: int, strides: Any, lanes: int) -> bool:
    """True when a plain convolution of ``oc`` output channels over input rows of ``width``
    columns with ``strides`` is computed in NCHW (its output columns along the vector lanes,
    ``schedule_conv_nchw_direct``) rather than in NCHW{c}c, where an output block of ``oc``
    lanes leaves most of every FMA idle (an image head: 128 -> 3)."""
    if NCHW_MAX_OC_FRACTION <= 0 or oc * NCHW_MAX_OC_FRACTION > lanes:
        return False
    return int(strides[1]) == 1 and width >= lanes


def vector_block(c: int, bn: int, lanes: int) -> int:
    """The channel block for ``c`` channels whose largest divisor within one vector of
    ``lanes`` is ``bn``: ``bn`` when it is a power of two (a whole vector register: 4, 8, 16
    lanes), else the largest power-of-two divisor of ``c`` when that fills at least half a
    vector, else ``bn``. A block of 10, 12 or 15 lanes is no register width: LLVM splits
    every load, store and FMA of it into 8 + 2 (+ 4 + 1) lanes or masks a wider one. Blocks of
    8 instead, 1 thread, CPU time (bench/RESULTS.md, 2026-11-29 z-cnn): 512 -> 1000 1x1 on
    13x13 2.90 -> 2.00 ms (block 10), 144 -> 40 1x1 on 28x28 145 -> 95 us (10), depthwise
    5x5 over 120 channels 142 -> 62 us (15), over 72 with stride 2 70 -> 57 us (12)."""
    if bn & (bn - 1) == 0:
        return bn
    p = c & -c  # the largest power of two dividing c
    while p > lanes:
        p //= 2
    return p if p * 2 >= lanes else bn


def is_grouped(call: Call) -> bool:
    """A typed ``nn.conv2d`` with groups > 1 that is not depthwise (multiplier 1)."""
    return call.attrs.groups != 1 and not is_depthwise(call)


def grouped_blocks(c: int, oc: int, groups: int, lanes: int) -> tuple[int, int] | None:
    """``(ic_bn, oc_bn)`` of a grouped convolution in NCHW{c}c (``nn.contrib_conv2d_NCHWc``
    with groups), or None to keep it in NCHW: the largest divisors of a group's input and
    output channel counts within one vector (blocks never straddle groups), taken when the
    output block fills a whole vector (a group's output channels a multiple of ``lanes``).

    The NCHWc tile broadcasts input lanes against weight vectors along the output block (one
    weight load per row of FMAs, as groups=1), where the NCHW schedule broadcasts one weight
    per FMA: ResNeXt-50's 32-group layers with dilation (1 thread, us, NCHW / NCHWc): 16 a
    group d2 1224 / 1015, 32 a group d4 6841 / 4503, below onnxruntime's 1366 and 4769. A
    partial block (8 a group on 16 lanes) ties at the kernel but puts the neighbouring
    convolutions into half-vector blocks too (ResNeXt stage 2: the model 1% slower); fewer
    channels a group (4) fill vectors along the output row better in NCHW.
    Measured with bench/ops.py --model grouped (RESULTS.md, issue 25, helper z-conv)."""
    icg, ocg = c // groups, oc // groups
    ic_bn, oc_bn = conv2d_infer_layout(icg, ocg, lanes)
    if oc_bn < lanes:
        return None
    return ic_bn, oc_bn


def graph_blocks(call: Call, target: Any = None) -> tuple[int, int] | None:
    """The ``(ic_bn, oc_bn)`` the dispatch context chose for this typed NCHW convolution
    (``autotvm.apply_graph_best``: the graph tuner's layouts), or None. Only blocks that
    divide the channel counts (and are equal for a depthwise convolution) are taken."""
    from ....autotvm.task.dispatcher import DispatchContext
    from ....autotvm.task.graph_best import conv_key

    ctx = DispatchContext.current
    if ctx is None or is_grouped(call):
        return None
    a = call.attrs
    d, w = (x.checked_type for x in call.args)
    if not all(isinstance(s, int) for s in d.shape):
        return None
    kind = "conv" if a.groups == 1 else "depthwise"
    key = conv_key(kind, d.shape, w.shape, a.strides, a.padding, a.dilation, d.dtype)
    choice = ctx.query_layout(target or Target.current(), key)
    if choice is None:
        return None
    ic_bn, oc_bn = (int(x) for x in choice)
    c, oc = int(d.shape[1]), int(w.shape[0])
    if c % ic_bn or oc % oc_bn or (kind == "depthwise" and ic_bn != oc_bn):
        return None
    return ic_bn, oc_bn


@conv2d_layout_demand.register("cpu")
def _conv2d_demand(call: Call) -> list[str | None] | None:
    int8 = conv2d_int8_demand(call)  # uint8 x int8 -> int32: the VNNI layouts (x86_int8.py)
    if int8 is not None:
        return int8
    blocks = conv_blocks(call, Target.current())
    if blocks is None:
        return None
    ic_bn, oc_bn = blocks
    if is_grouped(call):
        return [blocked(ic_bn), f"OIHW{ic_bn}i{oc_bn}o"]
    if call.attrs.groups != 1:
        return [blocked(ic_bn), f"OIHW1i{oc_bn}o"]
    if is_pointwise(call):
        return [None, None]  # a matmul in NCHW unless its input arrives blocked
    ic_bn, oc_bn, _ = conv_padding(call, Target.current())
    return [blocked(ic_bn), f"OIHW{ic_bn}i{oc_bn}o"]


@conv2d_alter_layout.register("cpu")
def _alter_conv2d(call: Call, inputs: Any) -> tuple[RelayExpr, str | None] | None:
    int8 = alter_conv2d_int8(call, inputs)  # uint8 x int8 -> int32 (x86_int8.py)
    if int8 is not None:
        return int8
    target = Target.current()
    blocks = conv_blocks(call, target)
    if blocks is None:
        return None
    ic_bn, oc_bn = blocks
    groups = call.attrs.groups
    if is_grouped(call):  # blocks within groups (grouped_blocks)
        kl = f"OIHW{ic_bn}i{oc_bn}o"
    elif groups != 1:  # depthwise: one block in and out; keep the input's block if it fits
        blk = inputs.block(0)
        if blk is not None and groups % blk == 0 and graph_blocks(call, target) is None:
            ic_bn = oc_bn = blk
        kl = f"OIHW1i{oc_bn}o"
    else:
        pointwise = _alter_pointwise(call, inputs)
        if pointwise is not None:
            return pointwise
        padded = _alter_padded(call, inputs, target)
        if padded is not None:
            return padded
        kl = f"OIHW{ic_bn}i{oc_bn}o"
    a = call.attrs
    tile = winograd_tile(call, ic_bn, oc_bn, target, plain_data=_plain_input(inputs, call)) \
        if groups == 1 else None
    if tile is not None:
        weight = _winograd_weight(inputs.plain(1), tile, oc_bn)
        data = inputs.get(0, blocked(ic_bn))
        return make_call("nn.contrib_conv2d_winograd_nchwc", [data, weight], {
            "tile_size": tile, "padding": a.padding, "channels": a.channels,
            "kernel_size": (3, 3), "data_layout": blocked(ic_bn),
            "out_layout": blocked(oc_bn), "out_dtype": a.out_dtype}), blocked(oc_bn)  # fmt: skip
    kernel = inputs.get(1, kl, "OIHW")
    if groups == 1:
        data, dl = _direct_data(inputs, ic_bn, call)
    else:
        data, dl = inputs.get(0, blocked(ic_bn)), blocked(ic_bn)
    out = make_call("nn.contrib_conv2d_NCHWc", [data, kernel], {
        "strides": a.strides, "padding": a.padding, "dilation": a.dilation, "groups": groups,
        "channels": a.channels, "kernel_size": a.kernel_size,
        "data_layout": dl, "kernel_layout": kl, "out_layout": blocked(oc_bn),
        "out_dtype": a.out_dtype})  # fmt: skip
    return out, blocked(oc_bn)


NCHW_INPUT_MIN_WIDTH = 8
"""Narrowest input row a direct NCHWc convolution reads in place in NCHW (:func:`_plain_input`).
On narrower maps each register tile reads one cache line per input channel for a few columns
(a 7x7 plane is 196 bytes), four times the lines of the blocked layout's tile, and the
input's layout_transform costs less than that: AMD EPYC Zen 3 (AVX2), 1 thread, CPU time,
conv + bias + relu + mean alone, an NCHW graph input, 2026-12-02, in place / blocked (with
its transform), us: 464 -> 1024 1x1 7x7 (ShuffleNetV2's last convolution) 963 / 595, 256 ->
512 1x1 7x7 246 / 170, 64 -> 128 3x3 7x7 64 / 42."""

NCHW_INPUT_MAX_CHANNEL_VECTORS = 4
"""Most input channels, in vectors of the target's lanes (32 with AVX2, 64 with AVX-512), of a
direct NCHWc convolution that reads its input in place in NCHW (:func:`_plain_input`). Each
reduction step of the register tile broadcasts one input value; in place, consecutive input
channels are a plane apart, so a tile touches one cache line per input channel and window
row (each a separate stream for the hardware prefetchers), against one per ``lanes`` channels
in the blocked layout. With few channels (a stem's 3) that costs nothing and saves the
transform; with many it loses, most on long rows (a 1-D convolution's 3000 columns: each
channel's row its own pages). AMD EPYC Zen 3 (AVX2), 1 thread, conv + relu alone, an NCHW graph
input, 2026-12-02, in place / blocked time (the blocked side with its input transform):
16 -> 32 3x3 112x112 1.01, 32 -> 64 3x3 s2 112x112 0.90, 32 -> 96 3x3 56x56 0.96, 24 -> 64 1x1
56x56 0.98; 64 -> 64 3x3 56x56 1.06, 64 -> 128 3x3 s2 56x56 1.03, 64 -> 256 1x1 56x56 0.99,
128 -> 128 3x3 56x56 1.25, 128 -> 256 3x3 s2 28x28 1.07, 256 -> 256 3x3 14x14 1.02, 256 -> 512
1x1 s2 14x14 1.21; 1-D (1 x 3 windows): 80 -> 384 on 3000 columns 1.55, 384 -> 384 on 3000
1.79, the same stride 2 (the Whisper-style encoder's second convolution) 3.64 (75 -> 21 ms),
384 -> 384 on 1500 1.17, 512 -> 512 on 500 1.21 (an earlier run on this CPU had 128 -> 128 3x3
56x56 at 0.91 and 64 -> 128 3x3 14x14 at 0.78: the 2-D cases from 64 channels are within this
machine's noise, the 1-D ones are not). On an AVX-512 Xeon the in-place read of a
64-channel 56x56 stride-2 input won (212 us against 221 + 61 for the transform): the limit is
in vectors."""


def _plain_input(inputs: Any, call: Call) -> bool:
    """Whether a direct NCHWc convolution (groups 1) reads its input in place, in NCHW
    (``data_layout="NCHW"``, input channel ``ico * ic_bn + ici``): when the input arrives in
    NCHW (a graph input, or after an operator that stays in NCHW) with at most
    :data:`NCHW_INPUT_MAX_CHANNEL_VECTORS` vectors of channels, in rows of at least
    :data:`NCHW_INPUT_MIN_WIDTH` columns, unless the PassContext config
    ``"relay.x86.conv_nchw_input"`` is False. Reading in place saves the ``layout_transform``
    to NCHW{ic_bn}c, a pass over the input with a gather per vector (3x224x224 stems). A
    blocked input stays blocked."""
    flag = PassContext.current().config.get("relay.x86.conv_nchw_input", True)
    if not isinstance(flag, bool):
        raise ValueError("PassContext config relay.x86.conv_nchw_input must be True or False, "
                         f"got {flag!r}")
    ttype = call.args[0].checked_type
    channels, width = int(ttype.shape[1]), int(ttype.shape[3])
    lanes = block_lanes(Target.current(), ttype.dtype)
    return (flag and inputs.block(0) is None and width >= NCHW_INPUT_MIN_WIDTH
            and channels <= NCHW_INPUT_MAX_CHANNEL_VECTORS * lanes)


def _direct_data(inputs: Any, ic_bn: int, call: Call) -> tuple[RelayExpr, str]:
    """``(data, data_layout)`` of a direct NCHWc convolution (groups 1): see
    :func:`_plain_input`."""
    if _plain_input(inputs, call):
        return inputs.plain(0), "NCHW"
    return inputs.get(0, blocked(ic_bn)), blocked(ic_bn)


POINTWISE_MAX_PIXELS: int | None = None
"""Largest map (H*W) whose 1x1 convolution :func:`is_pointwise` makes a matmul (None: no
limit). It was 1024 while the input's reshape to ``[IC, H*W]`` was a copy with gathers (its
vectors crossed image rows); since reshapes read contiguous vectors the matmul wins on every
larger map measured too, the NCHWc form paying its two layout transforms (graph executor,
medians, 2 threads, 2026-11-26: 64x56x56 -> 57 175 vs 353 us, 24 -> 24 20 vs 44,
256 -> 64 270 vs 377, 64 -> 256 248 vs 399, 32x112x112 -> 64 282 vs 884, 128x40x40 -> 128
138 vs 183)."""

POINTWISE_MIN_PIXELS = 64
"""Smallest map (H*W) whose 1x1 convolution :func:`is_pointwise` makes a matmul: the map is the
product's column count, and below two 32-column panels the matmul's tiles are mostly tail
(7x7 maps, medians of 15 x 50 runs, 2 threads: 576 -> 160 matmul 129 us vs NCHWc 32 us,
960 -> 320 406 vs 78, 57 -> 128 9.8 vs 6.5; 13x13 and up the matmul wins: 64x13x13 -> 57 6.4
vs 10.4, 144x28x28 -> 32 24 vs 41)."""


POINTWISE_NCHWC_MIN_CHANNELS: int | None = 1024
"""Input and output channel counts from which (both) a 1x1 convolution stays an NCHWc
convolution rather than :func:`is_pointwise`'s matmul (None: no limit). There the product's
time dwarfs the layout transforms (per pixel IC + OC values moved against IC x OC FMAs), and the
NCHWc kernel, reduction-blocked by ``topi.x86.conv2d_nchwc.default_k_block`` where the
reduction is long, is faster than the matmul form: bench/conv1x1_kblock.py, 1 thread, CPU
time, Zen 4, loaded (2026-11-29; NCHWc / matmul / onnxruntime's Conv, ms): 2048 -> 1024 28x28
31.2 / 34.8 / 34.1, 1024 -> 2048 28x28 29.2 / 33.5 / 31.9. In ResNeXt-like stages the blocked
layout then flows through the residual adds (no transform between blocks)."""


def is_pointwise(call: Call) -> bool:
    """A typed plain ``nn.conv2d`` that is one matrix product in NCHW: 1x1 window, stride 1,
    no padding or dilation, batch 1, static shapes, at least ``POINTWISE_MIN_PIXELS`` (and at
    most ``POINTWISE_MAX_PIXELS``, when set) pixels per channel, fewer than
    ``POINTWISE_NCHWC_MIN_CHANNELS`` input or output channels, the output dtype the input's;
    unless the PassContext config ``"relay.x86.pointwise_matmul"`` is False."""
    flag = PassContext.current().config.get("relay.x86.pointwise_matmul", True)
    if not isinstance(flag, bool):
        raise ValueError("PassContext config relay.x86.pointwise_matmul must be True or False, "
                         f"got {flag!r}")
    if not flag:
        return False
    a = call.attrs
    d, w = (x.checked_type for x in call.args)
    if not (isinstance(d, TensorType) and isinstance(w, TensorType)) or len(d.shape) != 4:
        return False
    if not all(isinstance(s, int) for s in (*d.shape, *w.shape)) or d.shape[0] != 1:
        return False
    pixels = d.shape[2] * d.shape[3]
    if pixels < POINTWISE_MIN_PIXELS or (POINTWISE_MAX_PIXELS is not None
                                         and pixels > POINTWISE_MAX_PIXELS):
        return False
    channels = [int(getattr(t, "shape")[k]) for t, k in ((d, 1), (w, 0))]  # noqa: B009
    if POINTWISE_NCHWC_MIN_CHANNELS is not None and min(channels) >= POINTWISE_NCHWC_MIN_CHANNELS:
        return False
    return (a.groups == 1 and a.data_layout == "NCHW" and a.kernel_layout == "OIHW"
            and tuple(w.shape[2:]) == (1, 1) and tuple(a.strides) == (1, 1)
            and tuple(a.dilation) == (1, 1) and not any(int(p) for p in a.padding)
            and (a.out_dtype or d.dtype) == d.dtype and a.out_layout in ("", "NCHW"))


def _alter_pointwise(call: Call, inputs: Any) -> tuple[RelayExpr, None] | None:
    """An :func:`is_pointwise` convolution whose input arrives in NCHW (a graph input, or
    after an operator that stays in NCHW) as ``W[OC, IC] @ x[IC, H*W]`` (``nn.matmul``), NCHW
    out: no layout transform on either side. Measured with bench/conv_shapes.py's one-conv
    models (+ bias, relu), before the transforms got faster (x86 injective schedule): 1.5-2x
    faster than the NCHWc convolution with its two transforms (57x13x13 -> 128: 37.6 -> 18.4
    us, medians, 2 threads).
    A blocked input (after another NCHWc convolution) keeps the NCHWc convolution.
    In the built graph both reshapes are views (reshape-only functions alias their input's
    storage, ``relay/backend/graph_codegen.py``) and a following bias / activation moves above
    the output reshape (``relay.transform.SinkReshape``) into the matmul's epilogue: one kernel
    (57x13x13 -> 57 + bias + relu: reshape 0.8 + matmul 6.0 + reshape/bias/relu 0.9 us before;
    57x56x56 -> 57: 11 + 86 + 13 us; one kernel of 6.6 and 93 us after, 2 threads, loaded)."""
    if not is_pointwise(call) or inputs.block(0) is not None:
        return None
    d, w = (x.checked_type for x in call.args)
    _, ic, h, wd = (int(x) for x in d.shape)
    oc = int(w.shape[0])
    weight = inputs.plain(1)
    if isinstance(weight, Constant):
        weight = Constant(weight.data.numpy().reshape(oc, ic))
    else:
        weight = _tr.reshape(weight, (oc, ic))
    y = _nn.matmul(weight, _tr.reshape(inputs.plain(0), (ic, h * wd)))
    return _tr.reshape(y, (1, oc, h, wd)), None


def _alter_padded(call: Call, inputs: Any, target: Any) -> tuple[RelayExpr, None] | None:
    """The rewrite of a plain convolution with padded output channels (see the module
    docstring), or None when :func:`conv_padding` pads nothing."""
    ic_bn, oc_bn, ocp = conv_padding(call, target)
    oc = int(call.args[1].checked_type.shape[0])
    if ocp == oc:
        return None
    a = call.attrs
    weight = inputs.plain(1)
    wpad = ((0, ocp - oc), (0, 0), (0, 0), (0, 0))
    if isinstance(weight, Constant):
        weight = Constant(np.pad(weight.data.numpy(), wpad))
    else:
        weight = _nn.pad(weight, wpad)
    ic = int(call.args[0].checked_type.shape[1])
    tile = winograd_tile(call, ic_bn, oc_bn, target, (ic, ocp), _plain_input(inputs, call))
    if tile is not None:
        data = inputs.get(0, blocked(ic_bn))
        out = make_call("nn.contrib_conv2d_winograd_nchwc",
                        [data, _winograd_weight(weight, tile, oc_bn)], {
            "tile_size": tile, "padding": a.padding, "channels": ocp, "kernel_size": (3, 3),
            "data_layout": blocked(ic_bn), "out_layout": blocked(oc_bn),
            "out_dtype": a.out_dtype})  # fmt: skip
    else:
        kl = f"OIHW{ic_bn}i{oc_bn}o"
        if isinstance(weight, Constant):
            weight = Constant(layout_transform_np(weight.data.numpy(), "OIHW", kl))
        else:
            weight = _tr.layout_transform(weight, "OIHW", kl)
        data, dl = _direct_data(inputs, ic_bn, call)
        out = make_call("nn.contrib_conv2d_NCHWc", [data, weight], {
            "strides": a.strides, "padding": a.padding, "dilation": a.dilation, "groups": 1,
            "channels": ocp, "kernel_size": a.kernel_size, "data_layout": dl,
            "kernel_layout": kl, "out_layout": blocked(oc_bn), "out_dtype": a.out_dtype})
    # the padded channels are cropped in NCHW (they do not split into blocks of a divisor)
    plain = _tr.layout_transform(out, blocked(oc_bn), "NCHW")
    return _tr.strided_slice(plain, (0,), (oc,), axes=(1,)), None


def _winograd_weight(w: RelayExpr, tile: int, oc_bn: int) -> RelayExpr:
    """The Winograd transform of a 3x3 OIHW weight: computed here for a constant, else a
    transform call (folded by FoldConstant once the weight is bound)."""
    if isinstance(w, Constant):
        # a new array of 4x the weight's size: adopted, not copied again
        return Constant(ConstData(winograd_weight_transform_np(w.data.numpy(), tile, oc_bn),
                                  copy=False))
    return make_call("nn.contrib_conv2d_winograd_weight_transform", [w],
                     {"tile_size": tile, "oc_bn": oc_bn})


def alter_dense_layout(call: Any, args: list | None = None) -> Any:
    """A typed ``nn.dense(x, W)`` with 2-D data and a weight of static shape (a constant and
    any number of rows; a weight known at run time: at least ``DENSE_PACK_MIN_ROWS`` rows) becomes
    ``nn.contrib_dense_pack(x, transpose(reshape(W, (N/nr, nr, K)), (0, 2, 1)))``: the panel
    packing that ``dense_pack`` does inside the kernel on every run moves to compile time
    (FoldConstant folds it when W is a constant). When ``nr`` does not divide N, W is first
    zero-padded to whole panels (``units`` stays N). Returns None when the call stays as it is.
    ``args``: the (already rewritten) arguments to build on; the types are read from the typed
    ``call``'s own arguments. With ``W = transpose(B)`` (B not a constant) it becomes
    ``nn.matmul(x, B)`` instead: no transpose (and no separate packing pass) at run time.

    A constant weight is packed from 1 row on (so also for a symbolic row count): the tiled kernel on the packed panels beat the
    dot-product schedule of ``nn.dense`` by 1.5-2.7x at 2-12 rows (one thread) and 2x at 4
    rows (two threads); a GEMV (1-2 rows) streams the panels with several partial sums per
    output vector (``topi.x86.dense._schedule_gemv``; measured 2026-11-26).

    BERT (seq 128, hidden 256) dense layers: 128x256->1024 in-kernel packing 262-390 GFLOP/s,
    prepacked 477; 128x1024->256 dot tile 365, prepacked 477 (onnxruntime ~400)."""
    if getattr(call.op, "name", None) != "nn.dense" or len(call.args) != 2:
        return None
    try:
        dt, wt = (a.checked_type for a in call.args)
    except ValueError:  # an untyped call (checked_type not known yet): leave it as it is
        return None
    if not hasattr(dt, "shape") or not hasattr(wt, "shape"):
        return None
    if len(dt.shape) != 2 or len(wt.shape) != 2:
        return None
    rows, n, k = const_int(dt.shape[0]), const_int(wt.shape[0]), const_int(wt.shape[1])
    if n is None or k is None or 0 in (rows, n, k):
        return None  # (a symbolic or empty weight: nothing to pack)
    if dt.dtype != wt.dtype or (call.attrs.out_dtype or dt.dtype) != dt.dtype:
        return None
    data, weight = args if args is not None else call.args
    if rows is None and not isinstance(weight, Constant):
        return None  # a symbolic row count (relay.Any): only a constant weight is packed
    if not isinstance(weight, Constant) and _is_transpose_2d(weight):
        # ONNX MatMul's B given at run time: no transpose per run; nn.matmul reads B [K, N]
        # (x86: packed inside the kernel, see strategy/x86.py)
        return _nn.matmul(data, weight.args[0], units=n)
    if rows is not None and rows < DENSE_PACK_MIN_ROWS and not isinstance(weight, Constant):
        return None  # packing at run time costs more than it saves on few rows
    nr = x86.panel_width(n)
    npanel = -(-n // nr)
    if npanel * nr != n:  # a partial last panel: zero-pad it (the output keeps n columns)
        weight = _nn.pad(weight, ((0, npanel * nr - n), (0, 0)))
    w = _tr.transpose(_tr.reshape(weight, (npanel, nr, k), allowzero=True), (0, 2, 1))
    return _nn.contrib_dense_pack(data, w, units=n)


def _is_transpose_2d(e: Any) -> bool:
    return isinstance(e, Call) and getattr(e.op, "name", None) == "transpose" \
        and tuple(int(a) for a in (e.attrs.axes or (1, 0))) == (1, 0)


@dense_alter_layout.register("cpu")
def _alter_dense(call: Call, inputs: Any) -> tuple[RelayExpr, None] | None:
    int8 = alter_dense_int8(call, inputs)  # uint8 x int8 -> int32 (x86_int8.py)
    if int8 is not None:
        return int8
    new = alter_dense_layout(call, [inputs.plain(0), inputs.plain(1)])
    return None if new is None else (new, None)
