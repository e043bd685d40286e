"""The x86 NCHWc convolutions: the default schedule (``schedule_conv2d_NCHWc``, what
AlterOpLayout makes of every conv2d at opt_level 3, depthwise included: the blocked layout,
``reg_n`` columns x one or two whole channel blocks per tile (``default_oc_tile``), padding
inlined for windows up to 3x3) and the AutoTVM templates (TVM's ``conv2d_NCHWc.x86`` and ``depthwise_conv2d_NCHWc.x86``).

The computes are ``topi.nn.conv2d_NCHWc`` / ``depthwise_conv2d_NCHWc``; a reduction-blocked 1x1
on a larger map is split by ``split_last_k_block`` (the template computes the split for its
``k_block``; the default schedule takes either form): its last reduction block a stage of its
own at the output's register tile, so the fused epilogue reads registers. The templates'
schedule is the default one (``schedule_nchwc_tile``, first in this file) with its choices as
knobs:

- ``tile_ow``: output columns per register tile (``reg_n``): 1..16 (a size that does not
  divide OW leaves a guarded tail tile); the default ``default_ow_tile(OW)`` first;
- ``tile_oc``: channel blocks (chunks of ``oc_bn`` output channels) per register tile, the
  divisors 1, 2, 4 of the chunk count;
- ``unroll_kw``: unroll the kernel-width reduction loop;
- ``inline_pad``: compute the padding inside the convolution (a per-pixel condition) instead
  of writing a padded copy of the input first;
- ``tile_oh``: output rows per parallel task (divisors of OH up to 8; default 1): coarser
  tasks keep a chunk group's weights in cache across rows;
- ``kernel_outer`` (plain convolutions with a window): reduction order (ky, kx, ic_chunk,
  ic_lane) instead of (ic_chunk, ky, kx, ic_lane).

With no tuned record (``cfg.is_fallback``) the knobs take exactly the values of
``schedule_conv2d_NCHWc(outs)``, so an untuned build is today's default schedule.

The channel blocks ``ic_bn``/``oc_bn`` (the layout) are chosen before these templates run, by
AlterOpLayout (``relay.op.strategy.x86_alter_op.conv_blocks``); they are part of the workload (the
tensor shapes), not knobs. To tune them (TVM's ``tile_ic``/``tile_oc``), tune the tasks of the
other blockings too (``autotvm.graph_tuner.layout_tasks``): the layout pass asks the dispatch
context (``apply_history_best``: the fastest blocking; ``apply_graph_best``: the graph tuner's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import autotvm
from ...ir.dtype import bits_of
from ...target import Target
from ...target.cpu_features import DEFAULT_CACHE_SIZES, CacheSizes, fma512_units
from ..nn.conv2d import conv2d_NCHWc as _nn_conv2d_NCHWc
from ..nn.depthwise_conv2d import depthwise_conv2d_NCHWc as _nn_depthwise_conv2d_NCHWc
from .conv2d import _find, _outputs, _schedule_pad, anchor

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["conv2d_NCHWc", "schedule_conv2d_NCHWc_autotvm", "depthwise_conv2d_NCHWc",
           "schedule_depthwise_conv2d_NCHWc_autotvm", "define_nchwc_space",
           "schedule_conv2d_NCHWc", "schedule_depthwise_conv2d_NCHWc", "default_ow_tile",
           "MAX_OW_TILE", "default_inline_pad", "PAD_COPY_MIN_PIXELS", "default_k_block",
           "default_k_rows", "default_oc_tile", "split_last_k_block", "fuses_last_k_block",
           "PARTIAL_TAG"]


# --- the default schedule (no tuning record) -----------------------------------------------

def _nchwc_tile(oc_chunk: int, depthwise: bool, window: int = 1) -> tuple[int, int]:
    """``(oc_tile, reg_n)``: chunks x output columns of the register tile (oc_tile * reg_n
    vector accumulators of one channel block each).

    Each reduction step loads ``oc_tile`` weight vectors and broadcasts ``reg_n`` input pixels
    for ``oc_tile * reg_n`` FMAs. One chunk x 8 columns is load-bound when the window columns
    do not overlap (stride 2: few broadcasts are shared between neighbouring columns); two
    chunks reuse every broadcast twice: 15-25% faster on every ResNet-18 3x3 layer, stride 1
    too (bench/ops.py; 2 x 14 spills, 4 x 7 is slower). An odd chunk count with no divisor 3 or 5
    keeps one chunk (no guarded chunk tile). Depthwise convolutions have no broadcasts (the pixel vector is per
    channel): one chunk.

    A 1x1 window (``window``: KH x KW) with an odd chunk count divisible by 3 takes three chunks
    x 7 columns, else one divisible by 5 five chunks x 4 (``reg_n`` then also the most columns, :func:`default_ow_tile`): one chunk
    leaves only ``reg_n`` accumulator chains, fewer than the FMA latency x FMA ports in flight
    (4 x 2 on both Intel's and AMD's AVX-512 cores), and loads one weight vector per
    ``reg_n`` FMAs. 1 thread, CPU time, Intel Xeon (Emerald Rapids, KVM), loaded, 1x1 kernels
    of an NCHWc input (2026-11-30, us, one chunk / three or five): 512 -> 1008 13x13 (63 chunks
    of 16) 1527 / 1207, 512 -> 1000 (125 chunks of 8) 2455 / 1791, 40 -> 120 28x28 (15 of 8)
    91 / 73, 120 -> 40 (5 of 8) 87 / 70, 24 -> 72 56x56 (9 of 8) 128 / 108, 72 -> 24 (3 of 8)
    116 / 105. Larger windows keep one chunk: 3x3 64 -> 48 28x28 (3 of 16) 218 / 266, 128 -> 240
    14x14 (15 of 16) 489 / 521, 96 -> 80 14x14 (5 of 16) 104 / 103."""
    if depthwise:
        return 1, 8
    if oc_chunk % 2 == 0:
        return 2, 8
    if window != 1:
        return 1, 8
    if oc_chunk % 3 == 0:
        return 3, 7
    if oc_chunk % 5 == 0 and max_tile_columns(5) >= 2:  # not in AVX2's 16 registers
        return 5, 4
    return 1, 8


def _reg_want(oc_chunk: int, oc_tile: int, depthwise: bool, window: int = 1) -> int:
    """The ``want`` of :func:`default_ow_tile` for a tile of ``oc_tile`` chunks: :func:`_nchwc_tile`'s
    when it chose that tile, else 8."""
    d_oc, d_reg = _nchwc_tile(oc_chunk, depthwise, window)
    return d_reg if oc_tile == d_oc else 8


def default_oc_tile(conv: Tensor, depthwise: bool) -> int:
    """Channel blocks per register tile of the default NCHWc schedule for ``conv``:
    :func:`_nchwc_tile`'s, except one for a plain or grouped convolution whose width-dilated
    window (``attrs["dilation"]``, width dilation > 1) spans at most the output width. There two
    chunks lost on every case measured, plain and grouped (1 thread, CPU time, same process,
    best of 5-9, 2026-11-30, under load; default 2 chunks / 1 chunk, ms): 64 -> 64 56x56 d2
    4.14 / 2.12, 32 -> 64 56x56 d2 1.27 / 1.05, 256 -> 256 28x28 d2 9.8 / 8.4, 128 -> 128
    28x28 d3 2.36 / 2.08, 960 -> 256 32x32 d12 72.6 / 47.0, resnext's 32 groups of 32 channels
    28x28 d4 4.49 / 4.21 and d2 4.97 / 4.27; 512 channels 32 groups d2 (two groups a tile)
    1.10 / 1.08, a tie. Undilated windows keep two chunks (32 groups of 32 d1: 4.29 / 4.20,
    a tie; plain 3x3: the broadcasts shared, :func:`_nchwc_tile`). A window wider than the map
    (DeepLabV3's atrous rates on a 14x14 map: most taps in the padding, the tile bound by the
    bounds tests each broadcast shares between its chunks) keeps two: 960 -> 256 14x14 d12
    7.36 / 8.10."""
    kh, kw = (_const(d) for d in conv.op.input_tensors[1].shape[2:4])
    oc_chunk = _const(conv.shape[1])
    if _small_map_tile(conv, depthwise):
        return 3
    if _four_chunk_tile(conv, depthwise) or _long_reduction_tile(conv, depthwise):
        return FOUR_CHUNK_TILE
    oc_tile = _nchwc_tile(oc_chunk, depthwise, kh * kw)[0]
    dilation = (getattr(conv.op, "attrs", None) or {}).get("dilation", (1, 1))
    dw = _const(dilation[1])
    if not depthwise and oc_tile > 1 and kw > 1 and dw > 1 \
            and dw * (kw - 1) + 1 <= _const(conv.shape[3]):
        return 1
    return oc_tile


SMALL_MAP_ACCUMULATORS = 16
"""Vector accumulators of the register tile of a convolution on a map at most
``SMALL_MAP_MAX_OW`` columns wide (:func:`default_row_tile`)."""

SMALL_MAP_MAX_OW = 4
"""Widest output row that :func:`default_row_tile` stacks rows of into one register tile."""


def default_row_tile(conv: Tensor, depthwise: bool) -> tuple[int, int]:
    """``(reg_h, oc_tile)``: output rows and channel blocks per register tile of the default
    NCHWc schedule (the tile's columns: :func:`default_ow_tile`).

    A row of at most ``SMALL_MAP_MAX_OW`` columns fills few accumulators (4 columns x 2 chunks:
    8), and each row's tile streams the chunk group's whole weight panel (from L2, or from L3
    when the panel is larger: a 1024 -> 512 layer on a 4x4 map reads 8 MiB of weights for 16
    output pixels). Such a plain convolution stacks rows: ``reg_h`` the largest divisor of OH
    with ``reg_h x OW <= SMALL_MAP_ACCUMULATORS``, then as many chunks (1, 2, 4, dividing the
    chunk count) as the accumulators allow, so that each weight vector is loaded once for
    every output pixel of the tile. 1 thread, CPU time, Intel Xeon (Emerald Rapids, KVM, 2 FMA
    units), kernel alone, loaded, 2026-11-30 (us, default 1 row x OW x 2 chunks / rows
    stacked): 1024 -> 512 2x2 window 4x4 map (4 rows x 4 x 1) 787 / 671; 512 -> 512 3x3 4x4
    1008 / 800; 1024 -> 512 2x2 on a 2x2 map (2 x 2 x 4) 423 / 331. Wider maps keep one row:
    7x7 512 -> 512 3x3, 2 rows x 7 x 1 chunk 2446 against 2457 (a tie); 5x5 (25 columns would
    spill) is not stacked. Depthwise convolutions keep theirs (no weight panel to reuse). The
    tile's accumulators also stay within :func:`max_tile_columns` (AVX2's 16 registers: 12
    accumulators of one chunk, 10 of two, 8 of four)."""
    oc_tile = default_oc_tile(conv, depthwise)
    oh, ow = _const(conv.shape[2]), _const(conv.shape[3])
    if depthwise or ow > SMALL_MAP_MAX_OW or oh < 2:
        return 1, oc_tile
    def most(c: int) -> int:  # accumulators of a c-chunk tile within the registers too
        return min(SMALL_MAP_ACCUMULATORS, c * max_tile_columns(c))

    rows = max(r for r in range(1, oh + 1) if oh % r == 0 and r * ow <= most(1))
    if rows == 1:
        return 1, oc_tile
    oc_chunk = _const(conv.shape[1])
    chunks = max(c for c in (1, 2, 4) if oc_chunk % c == 0 and rows * ow * c <= most(c))
    return rows, chunks


PREFETCH_BYTES = 4096
"""How far ahead (bytes) the default schedule's tile of stacked rows (:func:`default_row_tile`)
prefetches its weights. That tile loads each weight vector once per task for 16 FMAs, so its
weights stream from L3 or memory at the pace of the FMAs: with 16 FMAs waiting on each load,
the scheduler holds too few loads in flight to cover the memory latency (a hardware
prefetcher alone: 1024 -> 512 2x2 window on a 4x4 map, 8 weight copies rotated so none is in
cache, 1547 us, against 1065 for the one-row tile that reads each panel from memory once and
then from L2). 1 thread, CPU time, Intel Xeon (Emerald Rapids, KVM), loaded, 2026-11-30 (us,
weights out of cache; prefetch distance 0 / 256 / 512 / 1024 / 2048 / 4096 / 8192 bytes):
1547 / 1101 / 975 / 899 / 686 / 659 / 698; with 4096: 512 -> 512 3x3 on 4x4 1330 -> 687 (one
row: 1160), 1024 -> 512 on a 2x2 map 507 -> 356 (one row: 638); weights in cache 609 -> 521,
256 -> 128 3x3 4x4 85 -> 85. Not for the one-row tiles: there the weights are reread from L2 by
every row, a prefetch costs where the padding is inlined into the tile (its LoopPartition
copies: 512 -> 512 3x3 7x7 2591 -> 2881, 256 -> 256 14x14 2094 -> 2517) but pays where it is
not (the same 512 -> 512 7x7 on a pre-padded input 2579 -> 2145, with the padded copy 2467 ->
2104; 1x1 1024 -> 2048 7x7 2100 -> 1863; 2x2 512 -> 256 8x8 673 -> 574): one-row tiles without
inlined padding prefetch when the weights take at least half of L2 (:func:`schedule_nchwc_tile`;
weights out of cache in all these figures)."""
SMALL_MAP_PIXELS = 256
"""Output pixels (OH x OW) up to which a 1x1 convolution's weights are reused over so few
pixels that streaming them dominates: :func:`_small_map_tile` and the small-map reduction
blocking of :func:`default_k_block` (7x7, 8x8, 14x14 and 16x16 maps; 28x28 not)."""


SMALL_MAP_MIN_TASKS = 4
"""Fewest chunk groups (parallel tasks) for which :func:`default_k_block` blocks a small map
with all its rows in one task: with fewer, the unblocked nest's row tasks keep the threads busy
(GoogLeNet's 832 -> 48 7x7, one 3-chunk group: blocked 1 task, unblocked 7)."""


def _small_map_tile(conv: Tensor, depthwise: bool, fma_units: int | None = None) -> bool:
    """Whether the default NCHWc tile of ``conv`` takes three output chunks x (up to) 8 columns
    (24 accumulators): a plain 1x1 convolution on a map of at most :data:`SMALL_MAP_PIXELS`
    pixels, with at least 3 chunks, a count divisible by 3 or at least 16 (a guarded tail tile
    of 1-2 chunks, at most 1/8 of them), on a core with two 512-bit FMA units (``fma_units``,
    default the target's; 32 vector registers). Each reduction step then loads 3 weight
    vectors and broadcasts up to 8 pixels for 24 FMAs (0.46 loads per FMA, 2 x 7: 0.64): with
    two FMA units per cycle the loads bound the 2-chunk tile. On larger maps three chunks lose
    (the panel is reused over many tiles and the tail tile weighs more: 512 -> 128 28x28
    (8 chunks) 1.33x, 1024 -> 512 28x28 1.13x). Intel Xeon (Emerald Rapids, KVM; two units),
    1 thread, CPU time, kernel alone, 2026-11-30, unblocked 2 x 7 / 3 x 7: 1152 -> 192 7x7 173
    / 157 us, 192 -> 1152 7x7 167 / 154, 512 -> 2048 7x7 873 / 818, 1024 -> 2048 14 -> 7
    stride 2 1826 / 1710, 512 -> 1024 28 -> 14 stride 2 1676 / 1527, 480 -> 96 14x14 144 /
    134. Zen 4 (one unit) keeps its tiles (not measured there)."""
    if depthwise:
        return False
    kernel = conv.op.input_tensors[1]
    if len(kernel.shape) != 6 or _const(kernel.shape[2]) * _const(kernel.shape[3]) != 1:
        return False
    if not all(isinstance(getattr(d, "value", d), int) for d in conv.shape):
        return False
    oc_chunk, oh, ow = (_const(d) for d in conv.shape[1:4])
    if oh * ow > SMALL_MAP_PIXELS or oc_chunk < 3 or (oc_chunk % 3 and oc_chunk < 16):
        return False
    units = fma_units if fma_units is not None else _fma_units()
    return units >= 2


FOUR_CHUNK_TILE = 4
"""Output chunks (and at most columns) of the register tile of :func:`_four_chunk_tile`."""

FOUR_CHUNK_K_BLOCK_L1D = 0.75
"""Share of L1D that the weights of one reduction block of a four-chunk tile fill
(:func:`default_k_block`)."""


def _four_chunk_tile(conv: Tensor, depthwise: bool, fma_units: int | None = None) -> bool:
    """Whether the default NCHWc tile of ``conv`` takes :data:`FOUR_CHUNK_TILE` output chunks x
    (up to) 4 columns, its reduction blocked by the input chunks whose weights fill 3/4 of L1D
    (:func:`default_k_block`): a plain (ungrouped) 1x1 convolution on a map of more than
    :data:`SMALL_MAP_PIXELS` output pixels and rows wider than :data:`SMALL_MAP_MAX_OW`, its
    chunk count a multiple of 4 and at least 8 (two or more chunk groups), on a core with two
    512-bit FMA units (``fma_units``, default the target's), where the default two-chunk tile
    holds fewer than :data:`SMALL_MAP_ACCUMULATORS` accumulators (the row width has no divisor
    8 or 9, :func:`default_ow_tile`: 2 x 7 on a 28-wide map). Each reduction step then loads
    4 weight vectors and broadcasts 4 pixels for 16 FMAs (0.5 loads per FMA; 2 x 7: 0.64).
    Intel Xeon (Emerald Rapids, KVM; two units, 48 KiB L1D), 1 thread, CPU time, kernel alone,
    loaded, 2026-11-30 (ms, default 2 x 7 / 4 x 4 blocked by 8 chunks): 1024 -> 2048 28x28
    21.7 / 20.2, 2048 -> 1024 21.3 / 19.5, 1024 -> 512 5.38 / 4.92, 512 -> 1024 5.34 / 4.96,
    512 -> 512 2.66 / 2.40, 512 -> 128 0.680 / 0.617, 544 -> 128 0.751 / 0.647, 128 -> 512
    (8 input chunks: unblocked) 0.651 / 0.600, 256 -> 512 56 -> 28 stride 2 1.555 / 1.475.
    Where the two-chunk tile has 8 columns (56-wide maps: 2 x 8) four chunks tie or lose
    (256 -> 128 56x56 1.26-1.34 / 1.30-1.34, 256 -> 64 0.65 / 0.67, 128 -> 256 1.30 / 1.27);
    blocks of 16 chunks lose (2048 -> 1024 22.4), 4 chunks tie to lose (19.2-20.5)."""
    if not _four_chunk_1x1(conv, depthwise, fma_units):
        return False
    return 2 * default_ow_tile(_const(conv.shape[3]), 8) < SMALL_MAP_ACCUMULATORS


def _four_chunk_1x1(conv: Tensor, depthwise: bool, fma_units: int | None) -> bool:
    """What :func:`_four_chunk_tile` and :func:`_long_reduction_tile` both need: a static plain
    (ungrouped, not depthwise) 1x1 NCHWc convolution on a map of more than
    :data:`SMALL_MAP_PIXELS` output pixels and more than :data:`SMALL_MAP_MAX_OW` columns, an
    output chunk count divisible by :data:`FOUR_CHUNK_TILE` and at least twice it, on a core
    with two 512-bit FMA units (``fma_units``, default the target's)."""
    if depthwise:
        return False
    kernel, data = conv.op.input_tensors[1], conv.op.input_tensors[0]
    if len(kernel.shape) != 6 or len(data.shape) != 5:
        return False
    if not all(isinstance(getattr(d, "value", d), int)
               for d in (*conv.shape, *kernel.shape, *data.shape)):
        return False
    if _const(kernel.shape[2]) * _const(kernel.shape[3]) != 1 or not _plain_reduction(conv):
        return False
    oc_chunk, oh, ow = (_const(d) for d in conv.shape[1:4])
    if oh * ow <= SMALL_MAP_PIXELS or ow <= SMALL_MAP_MAX_OW or oc_chunk % FOUR_CHUNK_TILE \
            or oc_chunk < 2 * FOUR_CHUNK_TILE:
        return False
    units = fma_units if fma_units is not None else _fma_units()
    return units >= 2


LONG_REDUCTION_COLS = 6
"""Output columns (at most) of the four-chunk tile of :func:`_long_reduction_tile`."""

LONG_REDUCTION_K_BLOCK_L1D = 0.5
"""Share of L1D that the weights of one reduction block of :func:`_long_reduction_tile`'s tile
fill (:func:`default_k_block`)."""

LONG_REDUCTION_MIN_BLOCKS = 4
"""Fewest reduction blocks (of :data:`LONG_REDUCTION_K_BLOCK_L1D`) in the input chunks of a
convolution that :func:`_long_reduction_tile` applies to."""


def _long_reduction_k_block(conv: Tensor, caches: CacheSizes | None = None) -> int:
    """Input chunks whose weights for a :data:`FOUR_CHUNK_TILE`-chunk tile fill
    :data:`LONG_REDUCTION_K_BLOCK_L1D` of L1D (at least 1; not yet a divisor)."""
    caches = caches or _caches()
    kernel = conv.op.input_tensors[1]
    ic_bn, oc_bn = _const(kernel.shape[4]), _const(kernel.shape[5])
    chunk = ic_bn * FOUR_CHUNK_TILE * oc_bn * max(1, bits_of(conv.dtype) // 8)
    return max(1, int(caches.l1d * LONG_REDUCTION_K_BLOCK_L1D) // chunk)


def _long_reduction_tile(conv: Tensor, depthwise: bool, fma_units: int | None = None,
                         caches: CacheSizes | None = None) -> bool:
    """Whether the default NCHWc tile of ``conv`` takes :data:`FOUR_CHUNK_TILE` output chunks
    x (up to) :data:`LONG_REDUCTION_COLS` columns (24 accumulators), its reduction blocked by
    the input chunks whose four-chunk weights fill half of L1D (:func:`default_k_block`): a
    plain (ungrouped) 1x1 convolution of whole 512-bit output blocks on a map of more than
    :data:`SMALL_MAP_PIXELS` output pixels whose two-chunk tile has 8 or 9 columns (the
    complement of :func:`_four_chunk_tile`: 32- and 56-wide maps), a chunk count divisible by
    4 and at least 8, and a long reduction: at least :data:`LONG_REDUCTION_MIN_BLOCKS` such
    blocks of input chunks; on a core with two 512-bit FMA units (``fma_units``, default the
    target's). Each reduction step then loads 4 weight vectors and broadcasts 6 pixels for 24
    FMAs (0.42 loads per FMA; 2 x 8: 0.63), and the block's weights (24 KiB on a 48 KiB L1D)
    stay in L1 across the task's tiles. Intel Xeon (Emerald Rapids, KVM; two units, 48 KiB L1D,
    2 MiB L2), 1 thread, CPU time, kernel + relu alone, 2026-11-30, medians of 5 interleaved
    (ms, default 2 x 8 (blocked by 6 chunks where default_k_block blocks it) / 4 x 6 blocked
    by 6 chunks, 4 rows a task): 768 -> 768 32x32 (ConvMixer's pointwise) 6.92 / 6.23, 1024 ->
    1024 32x32 12.19 / 11.90, 2048 -> 512 32x32 12.59 / 11.92, 512 -> 2048 32x32 12.18 / 11.43,
    512 -> 512 32x32 3.25 / 2.94, 640 -> 640 32x32 4.70 / 4.51, 384 -> 384 32x32 1.66 / 1.59,
    768 -> 192 32x32 1.76 / 1.56, 1024 -> 256 56x56 10.27 / 8.69, 512 -> 256 56x56 4.65 /
    4.24; with fewer input chunks it loses (256 -> 1024 56x56, 16 chunks: 8.64 / 9.06). Other
    tiles of 24 accumulators: 6 x 4 ties where 6 divides the chunks (768 -> 768: 6.21) and
    loses where it leaves a tail (1024 -> 1024 13.39); 3 x 8 loses (768 -> 768: 7.12); 4 x 4
    blocked by 8 (the 28-wide maps' tile) 6.63 / 11.60 / 13.28 (mixed); 4 x 8 spills."""
    if not _four_chunk_1x1(conv, depthwise, fma_units):
        return False
    kernel = conv.op.input_tensors[1]
    if _const(kernel.shape[5]) * bits_of(conv.dtype) != 512:
        return False  # whole 512-bit output blocks only (measured there)
    if 2 * default_ow_tile(_const(conv.shape[3]), 8) < SMALL_MAP_ACCUMULATORS:
        return False  # _four_chunk_tile's maps
    ic_chunk = _const(kernel.shape[1])
    return ic_chunk >= LONG_REDUCTION_MIN_BLOCKS * _long_reduction_k_block(conv, caches)


def _default_reg_n(conv: Tensor, oc_tile: int, depthwise: bool) -> int:
    """The default register tile width of ``conv`` for a tile of ``oc_tile`` chunks
    (:func:`default_ow_tile` with :func:`_reg_want`'s want); a small map's three-chunk tile
    (:func:`_small_map_tile`) takes at most 8 columns (3 x 9 accumulators and the weights and
    broadcasts would not fit 32 registers)."""
    kh, kw = (_const(d) for d in conv.op.input_tensors[1].shape[2:4])
    oc_chunk, ow = _const(conv.shape[1]), _const(conv.shape[3])
    if oc_tile == 3 and _small_map_tile(conv, depthwise):
        reg_n = default_ow_tile(ow, 8)
        return reg_n if reg_n <= 8 else default_ow_tile(ow, 7)
    if oc_tile == FOUR_CHUNK_TILE and _four_chunk_tile(conv, depthwise):
        return default_ow_tile(ow, FOUR_CHUNK_TILE)
    if oc_tile == FOUR_CHUNK_TILE and _long_reduction_tile(conv, depthwise):
        return default_ow_tile(ow, LONG_REDUCTION_COLS)
    reg_n = default_ow_tile(ow, _reg_want(oc_chunk, oc_tile, depthwise, kh * kw))
    reg_n = _one_chunk_columns(conv, oc_tile, depthwise, reg_n)
    most = max_tile_columns(oc_tile)
    # capped: the widest balanced tiles (a divisor further below would leave too few FMA
    # chains: 64 -> 64 3x3 56x56 on Zen 3, 2 x 4 5.05 ms, 2 x 5 + a 1-column tail 2.90)
    return reg_n if reg_n <= most else _balanced_tile(ow, most)


ONE_CHUNK_CHAINS_PER_UNIT = 4
"""Independent FMA chains one 512-bit FMA unit needs in flight (its FMA latency, 4 cycles on
Intel's and AMD's AVX-512 cores): the fewest accumulators of a one-chunk register tile per unit
(:func:`_one_chunk_columns`)."""

ONE_CHUNK_MAX_COLUMNS = 16
"""Most output columns of a widened one-chunk register tile (:func:`_one_chunk_columns`): 16
accumulators, the weight vector and the broadcasts within 32 vector registers."""


def _one_chunk_columns(conv: Tensor, oc_tile: int, depthwise: bool, reg_n: int,
                       fma_units: int | None = None) -> int:
    """The columns of a one-chunk register tile of a (non-depthwise) convolution with a window:
    ``reg_n`` unless its ``reg_n`` accumulators are fewer than the FMA chains the core's 512-bit
    FMA units keep in flight (:data:`ONE_CHUNK_CHAINS_PER_UNIT` per unit, ``fma_units`` default
    the target's); then the widest tile of at most :data:`ONE_CHUNK_MAX_COLUMNS` columns
    (:func:`default_ow_tile`: a divisor of OW from half of that when there is one). A one-chunk
    tile is the default of grouped or plain windows whose width is dilated
    (:func:`default_oc_tile`) and of odd chunk counts (:func:`_nchwc_tile`); on a 28- or
    14-wide map it had 7 columns, 7 chains for two units' 8 (4-cycle latency x 2): the FMAs
    wait on their own results. Intel Xeon (Emerald Rapids, KVM; two units), 1 thread, CPU
    time, kernel + bias + relu alone, 2026-11-30 (ms, 7 columns / 14): 1024 channels 32 groups
    28x28 3x3 dilation 4 2.94 / 2.59, 512 channels 32 groups dilation 2 0.784 / 0.688, plain
    256 -> 256 28x28 dilation 2 5.68 / 5.30, 240 -> 240 14x14 (15 chunks) 1.26 / 1.16, 80 ->
    80 28x28 (5 chunks) 0.542 / 0.496. Tiles of 8 columns keep theirs (64 -> 64 56x56 dilation
    2: 8 columns 1.54, 14 1.66). 1x1 windows have their own tiles (:func:`_nchwc_tile`); a
    depthwise tile has no broadcasts to share and is left alone; one FMA unit (Zen 4) keeps 7
    columns (4 chains suffice)."""
    if depthwise or oc_tile != 1:
        return reg_n
    kernel = conv.op.input_tensors[1]
    if len(kernel.shape) != 6 or _const(kernel.shape[2]) * _const(kernel.shape[3]) == 1:
        return reg_n
    units = fma_units if fma_units is not None else _fma_units()
    ow = _const(conv.shape[3])
    if reg_n >= ONE_CHUNK_CHAINS_PER_UNIT * units or reg_n >= ow:
        return reg_n
    divs = [r for r in range(ONE_CHUNK_MAX_COLUMNS // 2, ONE_CHUNK_MAX_COLUMNS + 1) if ow % r == 0]
    if ow <= ONE_CHUNK_MAX_COLUMNS:
        return ow
    if divs:
        return max(divs)
    return -(-ow // -(-ow // ONE_CHUNK_MAX_COLUMNS))


MAX_OW_TILE = 9
"""Most output columns in a default register tile: 9 columns x 2 channel blocks (18 zmm
accumulators) still fit the registers; 11-13 columns spilled (ow 11: 6 columns 36 us, 11
columns 49; ow 12: 6 columns 43 us, 12 columns 147; 1 thread, 64 -> 64 channels)."""


def default_ow_tile(ow: int, want: int = 8) -> int:
    """The default register tile width for ``ow`` output columns: all of them when they fit a
    tile (at most ``most`` columns: ``MAX_OW_TILE``, or ``want`` when below 8, the tiles of
    three or five channel blocks, :func:`_nchwc_tile`), else the largest divisor of ``ow`` in
    ``[want // 2, most]`` (``[want - want // 4, most]`` below 8: 480 -> 80 channels 14x14, 5
    blocks x 2 columns 123 us, x 4 + tail 2 101) (no tail), else the tiles balanced:
    ``ceil(ow / ceil(ow / most))`` (one guarded tail a few columns short). A fixed 8 with a tail tile of 1-5 columns was
    10-30% slower on 9, 17 columns (1 thread, 64 -> 64 channels 3x3: ow 9: 9 columns 24.6 us,
    8 + tail 31.8; ow 17: 9 + 8 83 us, 8 + 8 + 1 95)."""
    most, low = (MAX_OW_TILE, want // 2) if want >= 8 else (max(1, want), want - want // 4)
    if ow <= most:
        return max(ow, 1)
    divs = [r for r in range(max(1, low), most + 1) if ow % r == 0]
    if divs:
        return max(divs)
    return _balanced_tile(ow, most)


def _balanced_tile(ext: int, most: int) -> int:
    """The widest tile of at most ``most`` that splits ``ext`` into equal tiles but a last one
    a few short: ``ceil(ext / ceil(ext / most))``."""
    return -(-ext // -(-ext // most))


def _divisor_tile(ext: int, want: int) -> int:
    """The largest tile <= ``want`` that divides ``ext`` when it is at least ``want // 2``
    (no guarded tail inside the register tile), else ``want`` (clipped to ``ext``)."""
    want = min(want, ext)
    for r in range(want, 0, -1):
        if ext % r == 0:
            return r if r >= want // 2 else want
    return want


PAD_COPY_MIN_PIXELS = 1024
"""Output pixels from which a stride-1 convolution of an input block of at most 3 channels
(an image read in place) pads a copy of its input rather than testing bounds per pixel (see
:func:`default_inline_pad`)."""


def default_inline_pad(conv: Tensor, depthwise: bool) -> bool:
    """Whether the default NCHWc schedule inlines the padding (a bounds test per broadcast
    pixel) into convolution ``conv`` rather than reading a padded copy: depthwise convolutions
    (any window), other windows up to 3x3, except stride-1 plain convolutions with an input
    block of at most 3 channels (an RGB image read in place) and at least :data:`PAD_COPY_MIN_PIXELS` output pixels, whose few input
    channels leave the per-pixel tests unamortized. Whole runs of conv + bias + relu, same
    process, 11 x 100 (2026-11-26, inline / padded copy, us): 3x56x56 -> 24 59.7 / 32.4,
    3x56x56 -> 32 45.8 / 35.3, 3x112x112 -> 24 253 / 151; below the threshold a tie or the copy
    slightly slower (3x17x17 -> 24 4.6 / 4.7, 3x13x13 -> 24 3.8 / 4.0), and with stride 2 the
    copy loses (MobileNetV2's stem 3x224x224 -> 32: 159 / 170). Plain convolutions whose
    weights take at least half of L2 read a padded copy too (:func:`_streams_weights`)."""
    kernel = conv.op.input_tensors[1]
    kh, kw = (int(d) for d in kernel.shape[2:4])
    if depthwise:  # any window: wider ones unroll (default_unroll_kw)
        return True
    if kh * kw > 9:
        return False
    if len(kernel.shape) != 6:
        return True
    if _streams_weights(conv):
        return False
    ic_bn = int(kernel.shape[4])
    src = conv.op.input_tensors[0]
    oh, ow = int(conv.shape[2]), int(conv.shape[3])
    stride1 = int(src.shape[-2 if len(src.shape) == 4 else -3]) - kh + 1 == oh \
        and int(src.shape[-1 if len(src.shape) == 4 else -2]) - kw + 1 == ow
    return not (ic_bn <= 3 and stride1 and oh * ow >= PAD_COPY_MIN_PIXELS)


def _streams_weights(conv: Tensor) -> bool:
    """Whether a plain convolution's weights take at least half of L2: such a window reads a
    padded copy of its input (:func:`default_inline_pad`), and its one-row tile then prefetches
    the weights (:func:`schedule_nchwc_tile`). The copy costs a pass over the input, small next
    to a layer whose weights are that large, while the inlined tests stay in the tile's inner
    loop (and the prefetch, which pays on such weights, loses there: LoopPartition's copies of
    the tile). 1 thread, CPU time, Intel Xeon (Emerald Rapids, KVM; 2 MiB L2), kernel + relu
    alone, loaded (load 7-9), 2026-11-30, us, weights hot / rotated over 100 MB of copies
    (from L3, as in a model); inlined padding (the default before) / padded copy / padded copy
    + prefetch: 512 -> 512 3x3 7x7 2227 / 2023 / 1607, cold 2295 / 2090 / 1757; 384 -> 384 3x3
    8x8 1308 / 1156 / 1083, cold 1638 / 1484 / 1232; 160 -> 320 3x3 7x7 382 / 329 / 309, cold
    501 / 474 / 384; 512 -> 512 3x3 14x14 6879 / 6587 / 5986, cold 7033 / 6639 / 6152; 256 ->
    256 3x3 28x28 6438 / 6098 / 5882, cold 6305 / 5976 / 5631; 384 -> 384 1x3 8x8 383 / 395 /
    367, cold 551 / 558 / 466. Grouped convolutions keep the inlined padding: each chunk
    group reads only its group's weights, and a copy was a tie there (1024 channels, 32 groups,
    1.2 MB of weights, from L3: 14x14 806 / 830, 28x28 dilation 2 3803 / 3713)."""
    return streams_weights(_weight_bytes(conv)) and _plain_reduction(conv)


def _plain_reduction(conv: Tensor) -> bool:
    """Whether the NCHWc convolution ``conv`` (6-D kernel) reduces over every input channel:
    not grouped (nor depthwise)."""
    kernel, src = conv.op.input_tensors[1], conv.op.input_tensors[0]
    cin = _const(src.shape[1]) * (_const(src.shape[4]) if len(src.shape) == 5 else 1)
    return _const(kernel.shape[1]) * _const(kernel.shape[4]) == cin


def default_unroll_kw(conv: Tensor, depthwise: bool) -> bool:
    """Whether the default NCHWc schedule unrolls the kernel-width loop of convolution
    ``conv``: for a dilated window (``attrs["dilation"]`` of ``topi.nn.conv2d_NCHWc``, width
    dilation > 1) of a plain or grouped convolution. The inlined padding's column test of each
    broadcast pixel then has a constant window offset (``rx * dilation``) that LLVM folds and
    hoists out of the input-lane loop; with a dilated window spanning most of the register tile
    the tests otherwise stay in the inner loop. 1 thread, 28x28, 3x3 (2026-11-29, us, rolled /
    unrolled): 512 ch 32 groups d2 1217 / 1016, d4 1518 / 1021, 1024 ch 32 groups d4 6206 /
    4590; 256 -> 256 d2 9821 / 9269; DeepLabV3's ASPP 960 -> 256 16x16 d12 14033 / 9413; without
    dilation no gain (512 ch 32 groups: 1003 / 1065). Depthwise windows wider than 3 are
    unrolled too, their padding inlined (:func:`default_inline_pad`): per 16-channel block each
    output column is one FMA per window tap, and the unrolled taps share the column tests (768
    channels 32x32 7x7 + erf epilogue, padded copy / inlined + unrolled: 1394 / 1175 us; 9x9
    1776 / 1575; 672 ch 14x14 5x5 stride 2: 174 / 143; 960 ch 7x7 5x5: 63 / 55; 3x3 windows
    unchanged, a tie). A plain or grouped window wider than 3 columns (1x7, 1x5, 1x9: with at
    most 9 taps its padding is inlined, :func:`default_inline_pad`) is unrolled too: rolled, its
    column tests stay in the inner loop (Inception-v3's 1x7 convs ran at ~105 GFLOP/s against
    ~160 for the 7x1 ones, whose row test is hoisted). 1 thread, CPU time, Intel Xeon (Emerald
    Rapids, KVM), kernel + relu alone, loaded, 2026-11-30 (us, rolled / unrolled): 192 -> 192
    17x17 1x7 1410 / 889, 160 -> 160 943 / 605, 128 -> 192 891 / 563, 48 -> 80 23x29 1x7 354
    / 255, 96 -> 96 35x35 1x7 stride 2 374 / 247, 32 -> 32 56x56 1x9 460 / 352, 64 -> 64 13x13
    1x5 71 / 44; 1x3 a tie (384 -> 384 8x8 377 / 373, 64 -> 64 35x35 183 / 182), 3x3 slower
    (64 -> 64 56x56 1439 / 2242, 256 -> 256 14x14 1537 / 1823): those stay rolled, and so do
    the windows of more than 9 taps, read from a padded copy (a 7x7 stem, 3 -> 64 224x224
    stride 2: 1353 / 1926; 5x5 48 -> 64 35x35 a tie)."""
    kw = int(conv.op.input_tensors[1].shape[3])
    if depthwise:
        return kw > 3
    dilation = (getattr(conv.op, "attrs", None) or {}).get("dilation", (1, 1))
    if kw > 3 and kw * int(conv.op.input_tensors[1].shape[2]) <= 9:
        return True
    return kw > 1 and int(dilation[1]) > 1


def _weight_bytes(conv: Tensor) -> int:
    """Bytes of the convolution's weight tensor (0 for a symbolic shape)."""
    return tensor_bytes(conv.op.input_tensors[1])


def tensor_bytes(t: Tensor) -> int:
    """Bytes of tensor ``t`` (0 for a symbolic shape)."""
    n = max(1, bits_of(t.dtype) // 8)
    for d in t.shape:
        v = getattr(d, "value", d)
        if not isinstance(v, int):
            return 0
        n *= v
    return n


def streams_weights(nbytes: int) -> bool:
    """Whether a weight of ``nbytes`` takes at least half of the target's L2: in a model it
    comes from L3 or memory on every run (the other layers' weights evict it), so the kernels
    reading it prefetch it (:data:`PREFETCH_BYTES` ahead)."""
    return nbytes > 0 and nbytes * 2 >= _caches().l2


def _caches() -> CacheSizes:
    """The cache sizes of the target being built for (:attr:`Target.cache_sizes`), else the
    defaults."""
    target = Target.current()
    return target.cache_sizes if target is not None else DEFAULT_CACHE_SIZES


def _fma_units() -> int:
    """512-bit FMA units per core of the target being built for
    (:func:`~tvmpy.target.cpu_features.fma512_units`), at least 1; 1 without a target."""
    target = Target.current()
    if target is None or str(target.kind) not in ("llvm", "c"):
        return 1
    return max(1, fma512_units(target.isa_features))


def _registers() -> tuple[int, bool]:
    """``(vector registers, broadcasts folded)`` of the target being built for
    (:attr:`Target.vector_registers`, :attr:`Target.folds_broadcasts`); AVX-512's ``(32,
    True)`` without a target."""
    target = Target.current()
    if target is None or str(target.kind) not in ("llvm", "c"):
        return 32, True
    return target.vector_registers, target.folds_broadcasts


SPARE_REGISTERS = 2
"""Vector registers a register tile leaves free beyond its accumulators, weight vectors and
one broadcast: LLVM loads the next reduction step's operands while the current step's FMAs
run (:func:`max_tile_columns`)."""


def max_tile_columns(oc_tile: int, registers: int | None = None) -> int:
    """Most output columns of a register tile of ``oc_tile`` chunks: its ``oc_tile x
    columns`` accumulators, the ``oc_tile`` weight vectors, one broadcast and
    :data:`SPARE_REGISTERS` within the target's vector registers (``registers``, default the
    target's). With AVX-512's 32 every default tile fits (2 x 9, 3 x 8, 4 x 6, 5 x 4, 1 x 16);
    with AVX2's 16 a tile of two chunks takes at most 5 columns, one chunk 12. AMD EPYC Zen 3
    (znver3, AVX2, two 256-bit FMA units; KVM), 1 thread, CPU time, kernel + relu alone, best
    of 9, 2026-12-02, ms (the 32-register default 2 x 7 / 2 x 4 / 2 x 5 / 2 x 6, the last two
    with columns outer, :func:`columns_outer`): 128 -> 512 1x1 28x28 2.30 / 1.13 / 1.14 /
    1.12; 64 -> 64 3x3 56x56 6.62 / 4.80 / 2.90 / 3.99; 1024 -> 256 1x1 14x14 2.32 / 1.36 /
    1.16 / 1.53; 256 -> 64 1x1 56x56 2.27 / 1.21 / 1.19 / 1.57 (bench/RESULTS.md, session
    12). The 2 x 7-9 tiles spilled accumulators on every reduction step: ResNet-50's direct
    convolutions ran at 0.45-0.55x onnxruntime's speed."""
    regs = registers if registers is not None else _registers()[0]
    return max(1, (regs - oc_tile - 1 - SPARE_REGISTERS) // max(1, oc_tile))


def columns_outer(oc_tile: int, reg_n: int, registers: int | None = None,
                  folds_broadcasts: bool | None = None) -> bool:
    """Whether the register tile's column loop goes outside its chunk loop (each broadcast
    used by every chunk right away, the ``oc_tile`` weight vectors held across the columns)
    instead of inside it (each weight vector used by every column right away, all ``reg_n``
    broadcasts held across the chunks): where broadcasts take registers of their own (not
    folded into the FMAs as AVX-512's ``{1toN}``) and the chunk-outer order's ``oc_tile x
    reg_n`` accumulators, ``reg_n`` broadcasts and a weight vector leave fewer than
    :data:`SPARE_REGISTERS` free. Zen 3 as in :func:`max_tile_columns` (2 x 5, chunks outer /
    columns outer): 64 -> 64 3x3 56x56 3.34 / 2.90 ms, 1x1 kernels equal."""
    if oc_tile <= 1:
        return False
    d_regs, d_fold = _registers()
    regs = registers if registers is not None else d_regs
    folds = folds_broadcasts if folds_broadcasts is not None else d_fold
    return not folds and oc_tile * reg_n + reg_n + 1 > regs - SPARE_REGISTERS


def default_k_block(conv: Tensor, oc_tile: int, depthwise: bool,
                    caches: CacheSizes | None = None, fma_units: int | None = None) -> int:
    """Input chunks per reduction block of the default NCHWc schedule's 1x1 convolution (0: the
    reduction unblocked; see :func:`schedule_nchwc_tile`'s ``k_block``).

    A register tile runs the whole reduction, streaming its weight panel (``IC x oc_tile``
    blocks) once per tile of ``reg_n`` columns. With a long reduction over an input map larger
    than L2, the panel no longer stays in cache beside the streamed input: blocked when the
    panel exceeds L2 / 16 and the input exceeds L2; the block is the input chunks whose weights
    fill L1D / 4 (the block's weights and input columns stay in L1 across the task's tiles).
    1 thread, 16-channel blocks, 2 chunks x 7 columns, 28x28 map, CPU time, Zen 4 (32 KiB L1D,
    1 MiB L2; 2026-11-29, unblocked / blocked by 4 chunks, ms): 2048 -> 1024 34.7 / 29.7
    (95 -> 111 GFLOP/s), 1536 -> 512 12.5 / 11.3, 1280 -> 512 9.8 / 9.4; a tie where not
    blocked: 1024 -> 1024 14.8 / 14.7, 512 -> 512 3.75 / 3.78, 256 -> 256 56x56 3.88 / 3.93,
    2048 -> 512 14x14 3.7 / 3.8; 2048 -> 512 7x7 (its input in L2) 0.89 / 1.04. The threshold
    was L2 / 8 (a 1024-channel panel unblocked): a tie on a quiet core, but with the caches
    shared (the machine under load, 2026-11-30, best of 7, same process) the panels of 96-128
    KiB lost 8-14%: 1024 -> 2048 28x28 35.0 / 30.4, 1024 -> 1024 17.8 / 15.5, 768 -> 768 32x32
    13.6 / 12.5, while 512 -> 1024 (64 KiB) 8.6 / 8.3 and 512 -> 512 4.10 / 4.05 stay ties. Windows
    larger than 1x1 are not blocked (their accumulators then stay in memory: 3x3 256 -> 256
    28x28 8.5 / 16.5 ms).

    The panel threshold is L2 / 16 per 512-bit FMA unit of a core (``fma_units``, default
    :func:`~tvmpy.target.cpu_features.fma512_units` of the current target): the unblocked tile
    streams its panel from L2 at the rate its FMAs consume it, twice as fast with two units.
    Xeon with AMX (two units, 48 KiB L1D, 2 MiB L2; 2026-11-30, 1 thread, CPU time, kernel
    alone, 2 chunks x 7 columns): 1024 -> 2048 28x28 (a 128 KiB panel, L2 / 16) unblocked 26.0
    ms, blocked by 4 chunks 22.4 (127 -> 147 GFLOP/s); 2048 -> 1024 blocked 22.2-22.6.

    Small maps (at most :data:`SMALL_MAP_PIXELS` output pixels, more than one row) on a core
    with two units are blocked whenever the panel exceeds L1D, whatever the input's size: the
    unblocked nest streams the whole panel from L2 once per output row, the blocked one (all
    rows a task, :func:`default_k_rows`) once per task. Same Xeon, 3-chunk tiles
    (:func:`_small_map_tile`), unblocked / blocked by 4 chunks (us): 2048 -> 512 7x7 905 /
    752, 1152 -> 320 7x7 327 / 277, 320 -> 1280 7x7 321 / 308, 2048 -> 448 8x8 1153 / 930,
    1280 -> 320 8x8 544 / 413, 1024 -> 256 14x14 786 / 750, 1024 -> 2048 14 -> 7 stride 2 1710
    / 1582. It needs :data:`SMALL_MAP_MIN_TASKS` chunk groups (the blocked nest's parallel tasks
    are chunk groups x row blocks, here one row block); with the panel in L1D (192 -> 1152 7x7, 36 KiB) blocking loses (154 / 168 us). On
    Zen 4 (one unit) blocking 2048 -> 512 7x7 lost (0.89 / 1.04 ms, above): unchanged there.

    A float32 plain 1x1 on a map of more than :data:`LAST_BLOCK_MIN_PIXELS` pixels is also
    blocked (by the same L1D / 4 of weights) when its tile's weight panel exceeds L1D
    (:func:`_tile_streams_l1`); its last block then runs at the output's register tile
    (:func:`split_last_k_block`)."""
    if depthwise:
        return 0
    kernel, data = conv.op.input_tensors[1], conv.op.input_tensors[0]
    if len(kernel.shape) != 6 or len(getattr(conv.op, "reduce_axis", ())) != 4:
        return 0
    if not all(isinstance(getattr(d, "value", d), int) for d in (*kernel.shape, *data.shape[1:])):
        return 0  # a symbolic size: the plain nest
    _, ic_chunk, kh, kw, ic_bn, oc_bn = (_const(d) for d in kernel.shape)
    if kh * kw != 1:
        return 0
    caches = caches or _caches()
    nbytes = max(1, bits_of(conv.dtype) // 8)
    chunk = ic_bn * oc_tile * oc_bn * nbytes  # weights of one input chunk for one tile
    data_bytes = nbytes
    for d in data.shape[1:]:
        data_bytes *= _const(d)
    units = max(1, fma_units if fma_units is not None else _fma_units())
    if oc_tile == FOUR_CHUNK_TILE and _four_chunk_tile(conv, depthwise, units):
        kb = max(1, int(caches.l1d * FOUR_CHUNK_K_BLOCK_L1D) // chunk)
        return _divisor_tile(ic_chunk, kb) if kb < ic_chunk else 0
    if oc_tile == FOUR_CHUNK_TILE and _long_reduction_tile(conv, depthwise, units, caches):
        return _divisor_tile(ic_chunk, _long_reduction_k_block(conv, caches))
    panel = ic_chunk * chunk
    oh, ow = _const(conv.shape[2]), _const(conv.shape[3])
    if _tile_streams_l1(conv, oc_tile, panel, caches):
        kb = max(1, caches.l1d // 4 // chunk)
        return _divisor_tile(ic_chunk, kb) if kb < ic_chunk else 0
    groups = -(-_const(conv.shape[1]) // max(1, oc_tile))
    small_map = units >= 2 and 1 < oh and oh * ow <= SMALL_MAP_PIXELS \
        and panel > caches.l1d and groups >= SMALL_MAP_MIN_TASKS
    if not small_map and (panel <= caches.l2 // (16 * units) or data_bytes <= caches.l2):
        return 0
    kb = max(1, caches.l1d // 4 // chunk)
    return _divisor_tile(ic_chunk, kb) if kb < ic_chunk else 0


def _tile_streams_l1(conv: Tensor, oc_tile: int, panel: int, caches: CacheSizes) -> bool:
    """Whether :func:`default_k_block` blocks the 1x1 convolution ``conv`` (a tile of
    ``oc_tile`` chunks, whose weight panel takes ``panel`` bytes) because its register tile's
    weights do not fit L1D: a static float32 plain (ungrouped) convolution on a map of more
    than :data:`LAST_BLOCK_MIN_PIXELS` output pixels, whose blocked nest runs its last block at
    the output's register tile (:func:`fuses_last_k_block`), where the panel exceeds L1D.
    Unblocked,
    such a tile streams its whole panel from L2 once per ``reg_n`` output columns and runs its
    epilogue (bias, residual, activation) in a pass of its own; blocked and split, a block's
    weights (L1D / 4) stay in L1 across the task's tiles and the epilogue reads registers.
    Zen 4 (znver4, 32 KiB L1D, 1 MiB L2; 1 thread, CPU time, kernel + epilogue alone, loaded
    (load 12-14), 2026-12-01, old unblocked 2 x 7 / 2 x 8 against blocked by 4 and split, ms):
    512 -> 1024 28x28 + residual 8.89 / 7.64 (the 64 KiB panel sat at L2 / 16, unblocked),
    512 -> 512 28x28 4.17 / 3.84, 512 -> 128 28x28 1.04 / 0.98; in resnext_dilated at load
    3.5 its six 512 -> 1024 + residual 7.57-7.94 / 7.37-7.44. A 32 KiB panel (256 inputs, a
    2-chunk tile) stays unblocked: loaded it gained too (256 -> 256 56x56 4.55 / 3.99), but
    in the model at load 3.5 its 56x56 ones lost 1-2% (bench/RESULTS.md, session 8, h-rxd).
    With caches of
    at least 16 x L1D of L2 per FMA unit this covers every float32 plain 1x1 on such a map that
    the L2 / 16 panel rule blocks; that rule still decides the others."""
    if conv.dtype != "float32" or not _plain_reduction(conv):
        return False
    oh, ow = _const(conv.shape[2]), _const(conv.shape[3])
    if oh * ow <= LAST_BLOCK_MIN_PIXELS:
        return False
    return panel > caches.l1d


def default_k_rows(conv: Tensor, oc_tile: int, caches: CacheSizes | None = None) -> int:
    """Output rows per parallel task of a reduction-blocked NCHWc convolution: the task's
    accumulators (rows x OW x ``oc_tile`` blocks) within L1D; a divisor of OH when one is at
    least half that (:func:`_divisor_tile`)."""
    caches = caches or _caches()
    oh, ow, oc_bn = (_const(d) for d in conv.shape[2:5])
    row = max(1, ow * oc_tile * oc_bn * max(1, bits_of(conv.dtype) // 8))
    return _divisor_tile(oh, max(1, caches.l1d // row))


PARTIAL_TAG = "conv2d_NCHWc_partial"
"""Tag of the partial-sum stage of a split reduction-blocked convolution
(:func:`split_last_k_block`)."""

LAST_BLOCK_MIN_PIXELS = SMALL_MAP_PIXELS
"""Output pixels (OH x OW) above which a reduction-blocked 1x1 convolution runs its last
reduction block at the output's register tile (:func:`fuses_last_k_block`)."""


def fuses_last_k_block(conv: Tensor, k_block: int) -> bool:
    """Whether the NCHWc convolution ``conv`` (a ``topi.nn.conv2d_NCHWc`` stage) blocked by
    ``k_block`` input chunks runs its last reduction block as a stage of its own, at the
    output's register tile (:func:`split_last_k_block`): a static float32 plain (ungrouped) 1x1
    convolution of at least two reduction blocks on a map of more than
    :data:`LAST_BLOCK_MIN_PIXELS` output pixels.

    The blocked nest (:func:`_k_blocked`) keeps a task's accumulators in a scratch buffer;
    its epilogue (bias, residual, activation: the fused output stage) is a separate pass over
    the task that reads the scratch buffer, with no FMAs to hide the residual's and the
    output's memory traffic behind. Split, the first blocks accumulate in the scratch buffer as
    before and the last block's stage takes its accumulators from it, one register tile at a
    time, so the epilogue reads registers and stores the output once, interleaved with the FMAs
    of the next tile. Intel Xeon (Emerald Rapids class, KVM; 2 FMA units, 48 KiB L1D), 1
    thread, kernel alone, CPU time, interleaved rounds, 2026-11-30 (h-rx2's experiment,
    bench/conv1x1_epilogue_ab.py; fused / default, 4 x 4 tile blocked by 8 chunks): 28x28 maps
    0.94-0.99 in 21 of 24 comparisons (512 -> 1024 bias + residual + relu 4.344 / 4.212 ms,
    1024 -> 2048 17.68 / 17.13); 7x7 and 14x14 maps (all rows a task) a tie (0.97-1.01): those
    keep the single stage. In tvmpy (same machine, loaded, 2026-11-30, bench/RESULTS.md
    session 7 h-epi): 28x28 median 0.973 over 22 comparisons, 56x56 (1024 -> 256) 0.94-0.99,
    32x32 (the four-chunk x 6-column tile) a tie with a wide spread (median ~1.00);
    resnext_dilated ~0.99 of main. int8 convolutions have their own computes (not split)."""
    if k_block <= 0 or conv.dtype != "float32":
        return False
    op = conv.op
    if op.tag != "conv2d_NCHWc" or len(getattr(op, "reduce_axis", ())) != 4:
        return False
    body = getattr(op, "body", ())
    if len(body) != 1 or tuple(getattr(body[0], "init", ())):
        return False
    kernel, data = op.input_tensors[1], op.input_tensors[0]
    if len(kernel.shape) != 6 or not all(isinstance(getattr(d, "value", d), int)
                                         for d in (*conv.shape, *kernel.shape, *data.shape)):
        return False
    if _const(kernel.shape[2]) * _const(kernel.shape[3]) != 1 or not _plain_reduction(conv):
        return False
    oh, ow = _const(conv.shape[2]), _const(conv.shape[3])
    return oh * ow > LAST_BLOCK_MIN_PIXELS and k_block < _const(kernel.shape[1])


def split_last_k_block(conv: Tensor, k_block: int | None = None) -> Tensor:
    """``conv`` (a ``topi.nn.conv2d_NCHWc`` stage) with its reduction blocked by ``k_block``
    input chunks split in two stages when :func:`fuses_last_k_block`, else ``conv`` itself:
    ``P`` (tag :data:`PARTIAL_TAG`) sums the input chunks of all blocks but the last; the
    returned stage (tag ``conv2d_NCHWc``, the same name, attrs and axes, ``attrs["k_block"]``)
    sums the last block's chunks (``IC/ic_bn - (blocks - 1) * k_block``) with its
    accumulators initialised from ``P``. The NCHWc schedules (:func:`schedule_nchwc_tile`)
    run ``P`` with the blocked nest at the parallel task and the last block at the output's
    register tile. ``k_block`` None: the default schedule's (:func:`default_k_block` of the
    default tile), which the AutoTVM template's fallback config takes too."""
    if k_block is None:
        k_block = default_k_block(conv, default_row_tile(conv, False)[1], False)
    if not fuses_last_k_block(conv, k_block):
        return conv
    from ...te import compute, reduce_axis
    from ...te import sum as te_sum
    from ...tir.functor import substitute

    op: Any = conv.op
    red = op.body[0]
    ico, ry, rx, ici = op.reduce_axis
    ic_chunk = _const(ico.dom.extent)
    head = (-(-ic_chunk // k_block) - 1) * k_block  # the input chunks before the last block

    def stage(lo: int, ext: int, name: str, tag: str, attrs: dict, init: Any) -> Tensor:
        axes = [reduce_axis((0, ext), name=ico.var.name),
                *(reduce_axis((0, _const(a.dom.extent)), name=a.var.name) for a in (ry, rx, ici))]

        def body(b: Any, oco: Any, y: Any, x: Any, oci: Any) -> Any:
            idx = (b, oco, y, x, oci)
            vmap: dict = {a.var: i for a, i in zip(op.axis, idx)}
            vmap[ico.var] = axes[0].var + lo if lo else axes[0].var
            vmap.update({a.var: b.var for a, b in zip((ry, rx, ici), axes[1:])})
            src = substitute(red.source[0], vmap)
            if init is None:
                return te_sum(src, axis=axes)
            return te_sum(src, axis=axes, init=init[idx])

        return compute(conv.shape, body, name=name, tag=tag, attrs=attrs)

    part = stage(0, head, f"{op.name}_partial", PARTIAL_TAG, {}, None)
    return stage(head, ic_chunk - head, op.name, op.tag, {**op.attrs, "k_block": k_block}, part)


def _partial_of(conv: Tensor) -> Tensor | None:
    """The partial-sum stage (:data:`PARTIAL_TAG`) that ``conv`` initialises its accumulators
    from (:func:`split_last_k_block`), else None."""
    for t in conv.op.input_tensors:
        if getattr(t.op, "tag", "") == PARTIAL_TAG:
            return t
    return None


def schedule_conv2d_NCHWc(outs: Any, reg_n: int | None = None, oc_tile: int | None = None,
                          inline_pad: bool = True, reg_h: int | None = None,
                          prefetch: int | None = None) -> Schedule:
    """x86 schedule of ``topi.nn.conv2d_NCHWc`` (and ``depthwise_conv2d_NCHWc``): a register
    tile of ``reg_n`` output columns x ``oc_tile`` channel blocks (``oc_bn`` lanes each), fed
    by broadcasts of input pixels; reduction order (input chunk, ky, kx, input lane) outside
    the tile; parallel over (batch, chunk group, row). Defaults: ``_nchwc_tile`` and
    ``default_ow_tile``, the kernel-width loop unrolled by ``default_unroll_kw``. (The tunable
    AutoTVM template with the same defaults: below.)"""
    s, conv, out, depthwise = find_nchwc(outs)
    oc_chunk, ow = int(conv.shape[1]), int(conv.shape[3])
    d_rh, d_oc = default_row_tile(conv, depthwise)
    if reg_h is None:
        reg_h = d_rh if oc_tile is None and reg_n is None else 1
    if oc_tile is None:
        oc_tile = d_oc if reg_h == d_rh else default_oc_tile(conv, depthwise)
    oc_tile = max(1, min(oc_tile, oc_chunk))
    reg_n = _default_reg_n(conv, oc_tile, depthwise) if reg_n is None \
        else _divisor_tile(ow, reg_n)
    k_block = default_k_block(conv, oc_tile, depthwise)
    schedule_nchwc_tile(s, conv, out, oc_tile, reg_n,
                        inline_pad and default_inline_pad(conv, depthwise),
                        unroll_kw=default_unroll_kw(conv, depthwise),
                        tile_oh=default_k_rows(conv, oc_tile) if k_block else 1,
                        k_block=k_block, reg_h=1 if k_block else reg_h, prefetch=prefetch)
    return s


def find_nchwc(outs: Any) -> tuple[Schedule, Tensor, Tensor, bool]:
    """``(schedule, conv stage, anchor output, depthwise)`` of an NCHWc convolution's outputs."""
    outs = _outputs(outs)
    s, conv = _find(outs, "conv2d_NCHWc")
    depthwise = False
    if conv is None:
        s, conv = _find(outs, "depthwise_conv2d_NCHWc")
        depthwise = True
    if conv is None:
        raise ValueError("schedule_conv2d_NCHWc: no conv2d_NCHWc stage found")
    return s, conv, anchor(conv, outs[0]), depthwise


def schedule_nchwc_tile(s: Schedule, conv: Tensor, out: Tensor, oc_tile: int, reg_n: int,
                        inline_pad: bool, unroll_kw: bool = False, tile_oh: int = 1,
                        kernel_outer: bool = False, k_block: int = 0, reg_h: int = 1,
                        prefetch: int | None = None, cols_outer: bool | None = None) -> None:
    """The NCHWc loop nest: ``reg_n`` columns x ``oc_tile`` chunks per register tile (both
    used as given), padding inlined into the convolution when ``inline_pad``, the kernel-width
    reduction loop unrolled when ``unroll_kw``; ``tile_oh`` output rows per parallel task (the
    weights of a chunk group reused across them while in cache); ``kernel_outer`` puts the
    window loops (ky, kx) outside the input-chunk loop of the reduction (a plain convolution's
    order is (ic_chunk, ky, kx, ic_lane) otherwise); ``k_block`` > 0 (fewer than the input
    chunks) blocks the reduction by that many input chunks, the ``tile_oh`` rows of a task
    accumulating in a scratch buffer (:func:`_k_blocked`; plain convolutions); ``reg_h`` > 1
    (without ``k_block``) makes the register tile ``reg_h`` rows x ``reg_n`` columns x
    ``oc_tile`` chunks, a parallel task per tile row group (``tile_oh`` then unused);
    ``prefetch`` > 0: software prefetches of the weights that many bytes ahead in the input-lane
    loop (``tir.transform.InjectPrefetch``); None: :data:`PREFETCH_BYTES` for a tile of stacked
    rows (``reg_h`` > 1), and for a one-row tile whose padding is not inlined when the weights
    take at least half of L2 (they stream from beyond L2 on each run), else none;
    ``cols_outer``: the tile's column loop outside its chunk loop (None:
    :func:`columns_outer`, from the target's registers)."""
    if cols_outer is None:
        cols_outer = columns_outer(oc_tile, reg_n * reg_h)
    inlined = False
    for t in conv.op.input_tensors:
        inlined |= bool(inline_pad and t.op in s and "pad" in t.op.tag)
    if prefetch is None:
        prefetch = PREFETCH_BYTES if reg_h > 1 or (
            not inlined and streams_weights(_weight_bytes(conv))) else 0
    for t in conv.op.input_tensors:
        if inline_pad and t.op in s and "pad" in t.op.tag:
            # windows up to 3x3: a per-pixel condition (uniform over the block's lanes) costs
            # less than writing and re-reading a padded copy of the whole input (depthwise
            # 1.6-2.3x, 3x3 convs 10-25% faster); a 7x7 stem with 3 input lanes is 2x slower
            s[t].compute_inline()
        else:
            _schedule_pad(s, t)
    if conv.op is out.op:
        CC = s.cache_write(conv, "local")
    else:
        s[conv].set_scope("local")
        CC = conv
    n, oco, y, x, oci = s[out].op.axis
    coo, coi = s[out].split(oco, factor=oc_tile)
    xo, xi = s[out].split(x, factor=reg_n)
    part = _partial_of(conv)
    if part is not None:  # split_last_k_block: the compute's block, whatever k_block says
        s[part].set_scope("local")
        _k_blocked(s, part, out, (n, coo, coi, y, xo, xi, oci), reg_n, tile_oh, unroll_kw,
                   oc_tile, kernel_outer, int(conv.op.attrs["k_block"]), cols_outer, last=CC)
        return
    red = list(getattr(s[CC].op, "reduce_axis", ()))  # (ico, ry, rx, ici); depthwise (ry, rx)
    if k_block and len(red) == 4 and k_block < _const(red[0].dom.extent):
        _k_blocked(s, CC, out, (n, coo, coi, y, xo, xi, oci), reg_n, tile_oh, unroll_kw,
                   oc_tile, kernel_outer, k_block, cols_outer)
        return
    if reg_h > 1:  # a register tile of reg_h rows: each weight vector loaded once for them
        yo, yi = s[out].split(y, factor=reg_h)
        s[out].reorder(n, coo, yo, xo, coi, yi, xi, oci)
        task = s[out].fuse(n, coo, yo)
        s[out].vectorize(oci)
        s[out].parallel(task)
        s[CC].compute_at(s[out], xo)
        _micro_kernel(s, CC, ("cy", "cx"), kernel_outer, prefetch, unroll_kw, oc_tile,
                      cols_outer)
        return
    if tile_oh > 1:
        yo, yi = s[out].split(y, factor=tile_oh)
        s[out].reorder(n, coo, yo, yi, xo, coi, xi, oci)
        task = s[out].fuse(n, coo, yo)
    else:
        s[out].reorder(n, coo, y, xo, coi, xi, oci)
        task = s[out].fuse(n, coo, y)
    s[out].vectorize(oci)
    s[out].parallel(task)
    s[CC].compute_at(s[out], xo)
    _micro_kernel(s, CC, ("cx",), kernel_outer, prefetch, unroll_kw, oc_tile, cols_outer)


def _micro_kernel(s: Schedule, cc: Tensor, rows_cols: tuple[str, ...], kernel_outer: bool,
                  prefetch: int, unroll_kw: bool, oc_tile: int, cols_outer: bool = False) -> None:
    """The register tile of the cache stage ``cc`` (axes n, cco, cy, cx, coci): the reduction
    (ico, ry, rx, ici; depthwise ry, rx; ``kernel_outer``: ry, rx, ico, ici) outside, then the
    chunks and the tile's ``rows_cols`` ("cy", "cx": rows stacked; "cx": one row) unrolled and
    the lanes vectorized (``cols_outer``: the tile's rows and columns outside its chunks);
    ``prefetch`` > 0 marks the innermost reduction loop."""
    _, cco, cy, cx, coci = s[cc].op.axis
    spatial = [{"cy": cy, "cx": cx}[a] for a in rows_cols]
    red = list(s[cc].op.reduce_axis)
    if kernel_outer and len(red) == 4:
        red = [red[1], red[2], red[0], red[3]]
    tile = [*spatial, cco] if cols_outer else [cco, *spatial]
    s[cc].reorder(*red, *tile, coci)
    if prefetch:
        s[cc].pragma(red[-1], "prefetch", prefetch)
    if unroll_kw:
        red = s[cc].op.reduce_axis
        s[cc].unroll(red[2] if len(red) == 4 else red[1])
    if oc_tile > 1:
        s[cc].unroll(cco)
    for ax in spatial:
        s[cc].unroll(ax)
    s[cc].vectorize(coci)


schedule_depthwise_conv2d_NCHWc = schedule_conv2d_NCHWc


def _k_blocked(s: Schedule, CC: Tensor, out: Tensor, axes: tuple, reg_n: int, tile_oh: int,
               unroll_kw: bool, oc_tile: int, kernel_outer: bool, k_block: int,
               cols_outer: bool = False, last: Tensor | None = None) -> None:
    """The NCHWc loop nest with the reduction blocked by ``k_block`` input chunks: the
    accumulators of ``tile_oh`` rows x ``oc_tile`` chunks (the parallel task) live in a
    scratch buffer, and for each block of input chunks every register tile of the task
    reloads its accumulators, runs the block's reduction, and stores them back. The block's
    weights (``k_block`` chunks x ``oc_tile`` chunks) and input columns stay in L1 across the
    task's register tiles, instead of the whole reduction's streaming through per tile.

    ``last``: the stage of the last reduction block (:func:`split_last_k_block`; ``CC`` is
    then its partial-sum stage, all blocks but the last): computed at the output's column
    tile, a register tile whose accumulators start from the scratch buffer, so that the fused
    epilogue of the output stage reads them from registers (no separate pass);
    ``cols_outer`` as in :func:`_micro_kernel`."""
    n, coo, coi, y, xo, xi, oci = axes
    yo, yi = s[out].split(y, factor=tile_oh)
    s[out].reorder(n, coo, yo, yi, xo, coi, xi, oci)
    task = s[out].fuse(n, coo, yo)
    s[out].vectorize(oci)
    s[out].parallel(task)
    s[CC].compute_at(s[out], task)
    cc_op: Any = s[CC].op
    _, cco, cy, cx, coci = cc_op.axis
    cxo, cxi = s[CC].split(cx, factor=reg_n)
    ico, ry, rx, ici = cc_op.reduce_axis
    ko, ki = s[CC].split(ico, factor=k_block)
    inner = [ry, rx, ki, ici] if kernel_outer else [ki, ry, rx, ici]
    tile = [cxi, cco] if cols_outer else [cco, cxi]
    s[CC].reorder(ko, cy, cxo, *inner, *tile, coci)
    if unroll_kw:
        s[CC].unroll(rx)
    if oc_tile > 1:
        s[CC].unroll(cco)
    s[CC].unroll(cxi)
    s[CC].vectorize(coci)
    if last is not None:
        s[last].compute_at(s[out], xo)
        _micro_kernel(s, last, ("cx",), kernel_outer, 0, unroll_kw, oc_tile, cols_outer)


# --- the AutoTVM templates -----------------------------------------------------------------

MAX_TILE_OW = 16
MAX_TILE_OH = 8


def _knob(cfg: Any, name: str, default: Any) -> Any:
    """A knob's value; ``default`` for configs of logs written before the knob existed."""
    return cfg[name].val if name in cfg else default


def _const(d: Any) -> int:
    return int(getattr(d, "value", d))


def define_nchwc_space(cfg: Any, out: Tensor, kernel: Tensor, depthwise: bool) -> None:
    """Declare the knobs of the NCHWc templates for the output ``out`` (``[N, OC/oc_bn, OH, OW,
    oc_bn]``) and set the fallback config to the default schedule's choices."""
    oc_chunk, ow = _const(out.shape[1]), _const(out.shape[3])
    kh, kw = _const(kernel.shape[2]), _const(kernel.shape[3])
    d_rh, d_oc = default_row_tile(out, depthwise)
    d_reg = _default_reg_n(out, d_oc, depthwise)
    d_inline = default_inline_pad(out, depthwise)
    ow_cands = [d_reg] + [r for r in range(1, min(ow, MAX_TILE_OW) + 1) if r != d_reg]
    oc_cands = [d_oc] + [c for c in (1, 2, 4) if oc_chunk % c == 0 and c != d_oc]
    # the default first: a fallback config takes each knob's first candidate
    cfg.define_knob("tile_ow", ow_cands)
    cfg.define_knob("tile_oc", oc_cands)
    cfg.define_knob("unroll_kw", [False, True] if kw > 1 else [False])
    cfg.define_knob("inline_pad", [d_inline, not d_inline])
    oh = _const(out.shape[2])
    d_kb = default_k_block(out, d_oc, depthwise)
    d_oh = default_k_rows(out, d_oc) if d_kb else 1
    oh_cands = [r for r in range(1, min(oh, MAX_TILE_OH) + 1) if oh % r == 0]
    cfg.define_knob("tile_oh", oh_cands + ([d_oh] if d_oh not in oh_cands else []))
    cfg.define_knob("kernel_outer", [False, True] if not depthwise and kh * kw > 1 else [False])
    ic_chunk = _const(kernel.shape[1]) if not depthwise else 1
    cfg.define_knob("k_block", [d_kb] + [c for c in (0, 2, 4, 8)
                                         if c != d_kb and c < ic_chunk and not depthwise])
    # rows per register tile (default_row_tile); a knob only where the default stacks rows
    rh_cands = [d_rh] + [r for r in (1, 2, 4) if r != d_rh and oh % r == 0] if d_rh > 1 else [1]
    cfg.define_knob("tile_rh", rh_cands)
    if cfg.is_fallback:
        from ...autotvm.space import OtherOptionEntity

        cfg["tile_ow"] = OtherOptionEntity(d_reg)
        cfg["tile_oc"] = OtherOptionEntity(d_oc)
        cfg["unroll_kw"] = OtherOptionEntity(default_unroll_kw(out, depthwise))
        cfg["inline_pad"] = OtherOptionEntity(d_inline)
        cfg["tile_oh"] = OtherOptionEntity(d_oh)
        cfg["kernel_outer"] = OtherOptionEntity(False)
        cfg["k_block"] = OtherOptionEntity(d_kb)
        cfg["tile_rh"] = OtherOptionEntity(d_rh)


def _schedule(cfg: Any, outs: Any) -> Schedule:
    s, conv, out, _ = find_nchwc(outs)
    oc_chunk = _const(conv.shape[1])
    schedule_nchwc_tile(s, conv, out, max(1, min(int(cfg["tile_oc"].val), oc_chunk)),
                        int(cfg["tile_ow"].val), bool(cfg["inline_pad"].val),
                        bool(cfg["unroll_kw"].val), _knob(cfg, "tile_oh", 1),
                        bool(_knob(cfg, "kernel_outer", False)), int(_knob(cfg, "k_block", 0)),
                        int(_knob(cfg, "tile_rh", 1)))
    return s


@autotvm.register_topi_compute("conv2d_NCHWc.x86")
def conv2d_NCHWc(cfg: Any, data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                 dilation: Any, layout: str = "", out_layout: str = "",
                 out_dtype: str | None = None) -> Tensor:
    """``topi.nn.conv2d_NCHWc`` with the tuning knobs of the x86 schedule."""
    out = _nn_conv2d_NCHWc(data, kernel, strides, padding, dilation, layout, out_layout,
                           out_dtype)
    define_nchwc_space(cfg, out, kernel, depthwise=False)
    n, oc_chunk, oh, ow, oc_bn = (_const(d) for d in out.shape)
    _, ic_chunk, kh, kw, ic_bn, _ = (_const(d) for d in kernel.shape)
    cfg.add_flop(2 * n * oc_chunk * oh * ow * oc_bn * ic_chunk * ic_bn * kh * kw)
    return split_last_k_block(out, int(_knob(cfg, "k_block", 0)))


@autotvm.register_topi_schedule("conv2d_NCHWc.x86")
def schedule_conv2d_NCHWc_autotvm(cfg: Any, outs: Any) -> Schedule:
    """The x86 NCHWc schedule with the config's knobs."""
    return _schedule(cfg, outs)


@autotvm.register_topi_compute("depthwise_conv2d_NCHWc.x86")
def depthwise_conv2d_NCHWc(cfg: Any, data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                           dilation: Any, layout: str = "", out_layout: str = "",
                           out_dtype: str | None = None) -> Tensor:
    """``topi.nn.depthwise_conv2d_NCHWc`` with the tuning knobs of the x86 schedule."""
    out = _nn_depthwise_conv2d_NCHWc(data, kernel, strides, padding, dilation, layout,
                                     out_layout, out_dtype)
    define_nchwc_space(cfg, out, kernel, depthwise=True)
    n, c_chunk, oh, ow, c_bn = (_const(d) for d in out.shape)
    kh, kw = _const(kernel.shape[2]), _const(kernel.shape[3])
    cfg.add_flop(2 * n * c_chunk * oh * ow * c_bn * kh * kw)
    return out


@autotvm.register_topi_schedule("depthwise_conv2d_NCHWc.x86")
def schedule_depthwise_conv2d_NCHWc_autotvm(cfg: Any, outs: Any) -> Schedule:
    """The x86 depthwise NCHWc schedule with the config's knobs."""
    return _schedule(cfg, outs)
