"""Which algorithm the x86 layout hook (``x86_alter_op.py``) gives a blocked convolution: direct
(``conv2d_NCHWc.x86``) or Winograd F(m x m, 3 x 3) (``conv2d_winograd_NCHWc.x86``, weight
transformed at compile time).

Eligible: plain (groups 1) 3x3 convolutions with stride 1 and dilation 1, float32, static
shapes (the batch may be symbolic: a ``relay.Any`` batch gets step 3's rule and the generic
compute with the default schedule). The choice, for each such call:

1. PassContext config ``"relay.x86.winograd"``: ``False`` never, an ``int`` tile size always
   (2..6), ``"auto"`` (default) as follows;
2. the records of the dispatch context (``autotvm.apply_history_best``): of the direct
   workload and the Winograd workloads (tile sizes :data:`TILE_SIZES`), the one with the
   fastest measured run wins; implementations without a record do not compete (a log that
   tuned only the direct convolution keeps it);
3. nothing measured: Winograd F(4x4, 3x3) when the layer has at least
   :data:`MIN_TILES_DEFAULT` output tiles per image and at least
   :data:`MIN_CHANNELS_DEFAULT` input and output channels, else direct. Measured here with the
   default schedules (``bench/winograd.py``, 2026-11-24): Winograd took 0.34-0.43x the direct
   convolution's time on ResNet-18's 56x56, 28x28 and 14x14 layers and 0.90x on the 7x7 one
   (4 tiles, 2 of them mostly padding); one tile is mostly padding, so fewer than 4 stay direct.
   When the transformed weight (``(m + 2)**2 / 9`` = 4x the direct one) exceeds the target's
   L2, it streams from memory once per image, 8 / (OH x OW) bytes per direct FLOP: the layer
   needs :data:`MIN_STREAMED_PIXELS` output pixels per 512-bit FMA unit of a core
   (:func:`~tvmpy.target.cpu_features.fma512_units`), as a core with twice the FMA throughput
   runs the direct convolution twice as fast against the same weight stream (see
   :func:`_default_tile`).

While tasks are being extracted (``autotvm.task.extract_from_program``), every eligible call
registers the direct task and one Winograd task per tile size, so that tuning measures both and
step 2 can pick.
"""

from __future__ import annotations

from typing import Any

from .... import te
from ....autotvm.task.dispatcher import DispatchContext
from ....autotvm.task.task import args_to_workload
from ....autotvm.task.topi_integration import TaskExtractEnv
from ....target import Target
from ....target.cpu_features import DEFAULT_CACHE_SIZES, fma512_units
from ....topi.nn.winograd import winograd_tile_sizes
from ....transform import PassContext
from ...expr import Call
from ...ty import TensorType

__all__ = ["winograd_tile", "TILE_SIZES", "MIN_TILES_DEFAULT", "MIN_CHANNELS_DEFAULT",
           "MIN_STREAMED_PIXELS",
           "conv_workloads"]

TILE_SIZES = (4,)
"""Tile sizes whose tasks are extracted for tuning. F(6x6, 3x3) is left out: its candidates
build 2-3x slower (2-3 s) and with default knobs it ran no faster than F(4x4) on ResNet-18's
layers (1.25x and 2.2x slower on 14x14 and 7x7; ``bench/winograd.py``);
``"relay.x86.winograd": 6`` forces it."""
DEFAULT_TILE = 4
MIN_TILES_DEFAULT = 4
"""Untuned: Winograd when the output has at least this many 4x4 tiles per image."""
MIN_STREAMED_PIXELS = 25
"""Untuned, a transformed weight larger than L2: Winograd when the output has at least this
many pixels per image per 512-bit FMA unit of a core. 25 (a 5x5 map, the smallest with 4 tiles)
leaves a one-unit core (Zen 4) with :data:`MIN_TILES_DEFAULT`'s rule; two units (Xeons with
AMX) need 50: a 7x7 map direct, 8x8 Winograd."""
MIN_CHANNELS_DEFAULT = 32
"""Untuned: Winograd when both channel counts are at least this. Its input and output
transforms cost per channel, its products per channel pair: with few channels the transforms
dominate. Measured (one-conv models, 2 threads, min of 11, loaded machine; bench/conv_shapes.py
style): 16 -> 16 channels 56x56 Winograd 530 us, direct 134; 24 -> 24 at 13x13 / 17x17 / 56x56
2.5-3.5x slower than direct; 24 -> 57 even (37 vs 40 us); 32 -> 32 at 28x28 1.4x faster
(75 vs 109 us), 48 -> 48 1.4x faster."""


def _eligible(call: Call) -> bool:
    a = call.attrs
    d, w = (x.checked_type for x in call.args)
    if not (isinstance(d, TensorType) and isinstance(w, TensorType)):
        return False
    if not all(isinstance(s, int) for s in (*d.shape[1:], *w.shape)):
        return False  # (a symbolic batch is fine: the choice does not depend on it)
    return (a.groups == 1 and tuple(w.shape[2:]) == (3, 3) and tuple(a.strides) == (1, 1)
            and tuple(a.dilation) == (1, 1) and d.dtype == w.dtype == "float32"
            and (a.out_dtype or "float32") == "float32")


def conv_workloads(call: Call, ic_bn: int, oc_bn: int, channels: tuple[int, int] | None = None,
                   plain_data: bool = False) -> tuple[tuple, dict[int, tuple]]:
    """``(direct workload, {tile size: Winograd workload})`` of a typed NCHW ``nn.conv2d`` as
    the x86 strategy's templates will see it once blocked; ``channels``: the (input, output)
    channel counts after padding, when the layout pass pads them; ``plain_data``: the direct
    convolution reads its NCHW input in place (``data_layout="NCHW"``)."""
    a = call.attrs
    d, w = (x.checked_type for x in call.args)
    n, c, h, wd = (int(x) for x in d.shape)
    oc = int(w.shape[0])
    if channels is not None:
        c, oc = channels
    dtype = a.out_dtype or d.dtype
    data = te.placeholder((n, c // ic_bn, h, wd, ic_bn), d.dtype, name="data")
    kernel = te.placeholder((oc // oc_bn, c // ic_bn, 3, 3, ic_bn, oc_bn), w.dtype, name="kernel")
    pad = tuple(int(p) for p in a.padding)
    if plain_data:
        ddata = te.placeholder((n, c, h, wd), d.dtype, name="data")
        direct = args_to_workload(
            (ddata, kernel, (1, 1), pad, (1, 1), "NCHW", f"NCHW{oc_bn}c", dtype),
            "conv2d_NCHWc.x86")
    else:
        direct = args_to_workload(
            (data, kernel, (1, 1), pad, (1, 1), f"NCHW{ic_bn}c", f"NCHW{oc_bn}c", dtype),
            "conv2d_NCHWc.x86")
    wino = {}
    for m in TILE_SIZES:
        u = te.placeholder((m + 2, m + 2, oc // oc_bn, c, oc_bn), w.dtype, name="weight")
        wino[m] = args_to_workload((data, u, pad, dtype), "conv2d_winograd_NCHWc.x86")
    return direct, wino


def _mode(ctx_config: dict) -> Any:
    v = ctx_config.get("relay.x86.winograd", "auto")
    if v is True:
        return DEFAULT_TILE
    if v is False or v == "auto":
        return v
    if isinstance(v, int) and v in winograd_tile_sizes():
        return v
    raise ValueError(f"PassContext config relay.x86.winograd must be 'auto', True, False or a "
                     f"tile size in {winograd_tile_sizes()}, got {v!r}")


def winograd_tile(call: Call, ic_bn: int, oc_bn: int, target: Target | None,
                  channels: tuple[int, int] | None = None, plain_data: bool = False
                  ) -> int | None:
    """The Winograd tile size for this typed ``nn.conv2d`` call, or None for the direct
    convolution (see the module docstring); ``channels``, ``plain_data``: as for
    :func:`conv_workloads`."""
    mode = _mode(PassContext.current().config)
    if mode is False or not _eligible(call):
        return None
    if not isinstance(call.args[0].checked_type.shape[0], int):
        # a symbolic batch (relay.Any): no tuning records describe it; step 3's rule
        return int(mode) if mode != "auto" else _default_tile(call, target)
    direct, wino = conv_workloads(call, ic_bn, oc_bn, channels, plain_data)
    env = TaskExtractEnv.current
    if env is not None:
        with env.lowering(call.op.name):
            env.add(direct[0], direct[1:])
            for wk in wino.values():
                env.add(wk[0], wk[1:])
    if mode != "auto":
        return int(mode)
    ctx = DispatchContext.current
    costs: dict[int | None, float] = {}
    if ctx is not None:
        for key, wk in [(None, direct), *wino.items()]:
            c = ctx.best_cost(target, wk)
            if c is not None:
                costs[key] = c
    if costs:
        return min(costs, key=lambda k: costs[k])
    return _default_tile(call, target)


def _default_tile(call: Call, target: Target | None = None) -> int | None:
    """Step 3: Winograd F(4x4, 3x3) for enough tiles per image and channels; with a
    transformed weight larger than L2, :data:`MIN_STREAMED_PIXELS` output pixels per 512-bit
    FMA unit.

    Such a weight (36 x IC x OC floats) streams from beyond L2 once per image, 144 bytes per
    channel pair against the direct convolution's 18 x OH x OW FLOPs, whose time is
    compute-bound: halved on a core with two 512-bit FMA units, while the stream is not.
    Measured, 1 thread, Winograd / direct time: 512 -> 512 on a 7x7 map (ResNet's last stage; 4
    tiles, 8x8 computed for 7x7, 37.7 MB transformed): Zen 4 (one unit, 2026-11-24, 2 threads)
    0.90; Xeon with AMX (two units, 2026-11-30, CPU time, kernel with its weights hot) 2.68 /
    2.03 ms = 1.32, and ResNet-50 with both such layers direct 2.3% faster (55.96 -> 54.69 ms,
    onnxruntime 52.89). On 8x8 maps (no padded tile) Winograd stays ahead there: 448 -> 384
    (Inception-v3's Mixed_7, 24.8 MB) 1.22 / 1.55 ms, 512 -> 512 0.93."""
    d = call.args[0].checked_type
    oh = int(d.shape[2]) + int(call.attrs.padding[0]) + int(call.attrs.padding[2]) - 2
    ow = int(d.shape[3]) + int(call.attrs.padding[1]) + int(call.attrs.padding[3]) - 2
    tiles = -(-oh // DEFAULT_TILE) * -(-ow // DEFAULT_TILE)
    ic, oc = int(d.shape[1]), int(call.args[1].checked_type.shape[0])
    if tiles < MIN_TILES_DEFAULT or min(ic, oc) < MIN_CHANNELS_DEFAULT:
        return None
    target = target if target is not None else Target.current()
    if target is not None and target.kind in ("llvm", "c"):
        caches, units = target.cache_sizes, fma512_units(target.isa_features)
    else:
        caches, units = DEFAULT_CACHE_SIZES, 1
    weight_bytes = (DEFAULT_TILE + 2) ** 2 * ic * oc * 4
    if weight_bytes > caches.l2 and oh * ow < MIN_STREAMED_PIXELS * max(1, units):
        return None
    return DEFAULT_TILE
