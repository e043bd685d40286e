"""The reduction-blocked NCHWc convolution (``schedule_nchwc_tile(k_block=...)``, x86): the
accumulators of a task's rows in a scratch buffer, the input chunks in blocks. Checked against
the numpy reference on awkward shapes (prime channel and chunk counts, blocks that do not
divide the chunks, rows and columns that do not divide the map, plain NCHW data, stride 2, no
epilogue), and the default rule (``default_k_block``) against given cache sizes."""

from __future__ import annotations

import numpy as np
import pytest

from tvmpy import te, topi
from tvmpy.target import Target
from tvmpy.target.cpu_features import DEFAULT_CACHE_SIZES, CacheSizes
from tvmpy.topi import nn, testing
from tvmpy.topi.x86 import conv2d_nchwc

from .nn_util import check

# (N, C, H, W, OC, ic_bn, oc_bn, stride, oc_tile, reg_n, k_block, rows, plain data, epilogue)
CASES = [
    (1, 21, 5, 13, 10, 3, 5, 1, 2, 4, 2, 2, False, True),   # 7 chunks (prime), block 2: tail
    (2, 13, 7, 6, 16, 1, 8, 1, 2, 6, 3, 3, False, False),   # 13 chunks, no epilogue, batch 2
    (1, 32, 6, 11, 24, 8, 8, 1, 1, 5, 3, 4, True, True),    # plain NCHW data read in place
    (1, 24, 9, 9, 16, 4, 16, 2, 1, 3, 4, 2, False, True),   # stride 2
]


def _conv(case):
    n, c, h, w, oc, icb, ocb, stride, *_, plain, epilogue = case
    A = te.placeholder((n, c, h, w) if plain else (n, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // icb, 1, 1, icb, ocb), name="W")
    B = te.placeholder((1, oc // ocb, 1, 1, ocb), name="B")
    conv = nn.conv2d_NCHWc(A, W, stride, 0, 1, "NCHW" if plain else f"NCHW{icb}c",
                           f"NCHW{ocb}c")
    out = topi.nn.relu(topi.add(conv, B)) if epilogue else conv
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c, 1, 1)).astype("float32")
    bias = rng.uniform(-1, 1, (1, oc // ocb, 1, 1, ocb)).astype("float32")
    want = testing.nchw_to_nchwc(testing.conv2d_nchw_python(a, wt, stride, 0), ocb)
    if epilogue:
        want = np.maximum(want + bias, 0)
    arrays = [a if plain else testing.nchw_to_nchwc(a, icb), testing.oihw_to_kcrsck(wt, icb, ocb)]
    inputs = [A, W]
    if epilogue:
        inputs.append(B)
        arrays.append(bias)
    return inputs, out, arrays, want


@pytest.mark.parametrize("case", CASES)
def test_k_blocked_nchwc_matches_reference(case):
    *_, oc_tile, reg_n, k_block, rows, _, _ = case
    inputs, out, arrays, want = _conv(case)

    def schedule(outs):
        s, conv, anchor_out, _ = conv2d_nchwc.find_nchwc(outs)
        conv2d_nchwc.schedule_nchwc_tile(s, conv, anchor_out, oc_tile, reg_n, True,
                                         tile_oh=rows, k_block=k_block)
        return s

    check(inputs, out, schedule, lambda *xs: want, arrays=arrays)


def _conv_1x1(ic, oc, hw, k=1, bn=16):
    A = te.placeholder((1, ic // bn, hw, hw, bn), name="A")
    W = te.placeholder((oc // bn, ic // bn, k, k, bn, bn), name="W")
    return nn.conv2d_NCHWc(A, W, 1, k // 2, 1, f"NCHW{bn}c", f"NCHW{bn}c")


def _grouped_1x1(ic, oc, hw, groups, bn=16):
    A = te.placeholder((1, ic // bn, hw, hw, bn), name="A")
    W = te.placeholder((oc // bn, ic // groups // bn, 1, 1, bn, bn), name="W")
    return nn.conv2d_NCHWc(A, W, 1, 0, 1, f"NCHW{bn}c", f"NCHW{bn}c", groups=groups)


def test_default_k_block_rule():
    small = CacheSizes(l1d=32 * 1024, l2=64 * 1024)
    # 256 input channels over a 16x16 map: the tile's weight panel (32 KiB) > L2 / 16, the
    # input (256 KiB) > L2: blocks of the chunks whose weights fill L1D / 4 (4 x 2 KiB)
    assert conv2d_nchwc.default_k_block(_conv_1x1(256, 64, 16), 2, False, small) == 4
    assert conv2d_nchwc.default_k_rows(_conv_1x1(256, 64, 16), 2, small) == 16
    assert conv2d_nchwc.default_k_block(_conv_1x1(256, 64, 4), 2, False, small) == 0  # in L2
    assert conv2d_nchwc.default_k_block(_conv_1x1(32, 64, 16), 2, False, small) == 0  # short
    # the panel at exactly L2 / 16 (2 input chunks a group: 4 KiB): unblocked; one chunk more:
    # blocked (grouped, so that the tile-working-set rule of plain convolutions does not apply)
    tiny_l1 = CacheSizes(l1d=4 * 1024, l2=64 * 1024)
    assert conv2d_nchwc.default_k_block(_grouped_1x1(64, 64, 32, 2), 2, False, tiny_l1) == 0
    assert conv2d_nchwc.default_k_block(_grouped_1x1(96, 64, 32, 2), 2, False, tiny_l1) == 1
    assert conv2d_nchwc.default_k_block(_conv_1x1(256, 64, 16, k=3), 2, False, small) == 0
    # resnext_dilated's stage-3/4 1x1 convolutions on a 1 MiB L2: K = 2048, 1024 and 512
    # blocked (512: its 64 KiB panel exceeds L1D, _tile_streams_l1);
    # ResNet-50's 1024 x 14x14 input is in L2 (and its map too small to split)
    for k in (2048, 1024):
        assert conv2d_nchwc.default_k_block(_conv_1x1(k, 1024, 28), 2, False,
                                            DEFAULT_CACHE_SIZES) == 4
    assert conv2d_nchwc.default_k_block(_conv_1x1(1024, 2048, 28), 2, False,
                                        DEFAULT_CACHE_SIZES) == 4
    assert conv2d_nchwc.default_k_block(_conv_1x1(512, 1024, 28), 2, False,
                                        DEFAULT_CACHE_SIZES) == 4
    assert conv2d_nchwc.default_k_block(_conv_1x1(1024, 256, 14), 2, False,
                                        DEFAULT_CACHE_SIZES) == 0
    A = te.placeholder((1, 16, 16, 16, 16), name="A")
    dw = nn.depthwise_conv2d_NCHWc(A, te.placeholder((16, 1, 1, 1, 1, 16), name="W"), 1, 0, 1,
                                   "NCHW16c", "NCHW16c")
    assert conv2d_nchwc.default_k_block(dw, 1, True, small) == 0


def test_default_schedule_takes_the_blocked_nest(monkeypatch):
    """With small caches the default schedule blocks an awkward 1x1 convolution (5 input
    chunks, 3 output chunks, 9x9 map) and still matches the reference."""
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=1024, l2=2048))
    case = (1, 40, 9, 9, 24, 8, 8, 1, 0, 0, 0, 0, False, True)
    inputs, out, arrays, want = _conv(case)
    conv = out.op.input_tensors[0].op.input_tensors[0]
    assert conv2d_nchwc.default_k_block(conv, 1, False) == 1  # blocked (1 chunk a block)
    check(inputs, out, topi.x86.schedule_conv2d_NCHWc, lambda *xs: want, arrays=arrays)

def _fallback_and_default_programs(args: tuple) -> tuple[str, str, object]:
    """The lowered program of the AutoTVM template under its fallback config, that of the
    default schedule ``schedule_conv2d_NCHWc`` for ``split_last_k_block(conv2d_NCHWc(*args))``
    (the default's last-block split, where it applies), and the latter's convolution (an
    untuned relay.build must run the default)."""
    import tvmpy as tvm
    from tvmpy import autotvm
    from tvmpy.target import Target

    A, W = args[0], args[1]
    ctx = autotvm.task.FallbackContext()
    ctx.silent = True
    with ctx, Target("llvm"):
        out = conv2d_nchwc.conv2d_NCHWc(*args)
        got = str(tvm.lower(conv2d_nchwc.schedule_conv2d_NCHWc_autotvm([out]), [A, W, out]))
    with Target("llvm"):
        ref_out = conv2d_nchwc.split_last_k_block(nn.conv2d_NCHWc(*args))
        want = str(tvm.lower(topi.x86.schedule_conv2d_NCHWc([ref_out]), [A, W, ref_out]))
    return got, want, ref_out


def test_autotvm_fallback_is_the_blocked_default(monkeypatch):
    """The AutoTVM template's fallback config (what an untuned relay.build uses) takes the
    default's block and rows: the same lowered program as ``schedule_conv2d_NCHWc``."""
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=4096, l2=8192))
    A = te.placeholder((1, 12, 7, 10, 4), name="A")
    W = te.placeholder((3, 12, 1, 1, 4, 8), name="W")
    args = (A, W, (1, 1), (0, 0, 0, 0), (1, 1), "NCHW4c", "NCHW8c", "float32")
    got, want, ref_out = _fallback_and_default_programs(args)
    assert conv2d_nchwc.default_k_block(ref_out, 1, False) > 0
    assert got == want


@pytest.mark.parametrize("stride", [1, 2])
def test_grouped_1x1_takes_the_blocked_nest(monkeypatch, stride):
    """A grouped 1x1 convolution (3 groups, 5 input chunks of 4 a group, 1 output chunk of 8 a
    group, 7x9 map) whose weight panel exceeds L2 / 16: the default schedule blocks its
    reduction by 4 chunks (a tail block of 1) and matches the numpy reference."""
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=2048, l2=1024))
    n, c, h, w, oc, groups, icb, ocb = 1, 60, 7, 9, 24, 3, 4, 8
    A = te.placeholder((n, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // groups // icb, 1, 1, icb, ocb), name="W")
    conv = nn.conv2d_NCHWc(A, W, stride, 0, 1, f"NCHW{icb}c", f"NCHW{ocb}c", groups=groups)
    assert conv2d_nchwc.default_k_block(conv, 1, False) == 4
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c // groups, 1, 1)).astype("float32")
    want = np.maximum(testing.group_conv2d_nchw_python(a, wt, stride, 0, 1, groups), 0)
    check([A, W], topi.nn.relu(conv), topi.x86.schedule_conv2d_NCHWc,
          lambda *xs: testing.nchw_to_nchwc(want.astype("float32"), ocb),
          arrays=[testing.nchw_to_nchwc(a, icb), testing.oihw_to_kcrsck(wt, icb, ocb)])


def test_default_k_block_counts_fma_units():
    """A core with two 512-bit FMA units streams a tile's weight panel from L2 twice as fast:
    the panel threshold halves. On a 48 KiB / 2 MiB core, a grouped 1x1 of two groups of 1024
    -> 1024 at 28x28 (a 128 KiB panel, L2 / 16; grouped, so the tile-working-set rule of plain
    convolutions does not apply): unblocked with one unit, blocked by 4 chunks with two; two
    groups of 512 (input 3.2 MiB, panel 64 KiB) unblocked either way. A plain 1024 -> 2048 is
    blocked with either (its panel exceeds L1D)."""
    xeon = CacheSizes(l1d=48 * 1024, l2=2 * 1024 * 1024)
    conv = _grouped_1x1(2048, 2048, 28, 2)
    assert conv2d_nchwc.default_k_block(conv, 2, False, xeon, fma_units=1) == 0
    assert conv2d_nchwc.default_k_block(conv, 2, False, xeon, fma_units=2) == 4
    assert conv2d_nchwc.default_k_block(_grouped_1x1(1024, 2048, 28, 2), 2, False, xeon,
                                        fma_units=2) == 0
    for units in (1, 2):
        assert conv2d_nchwc.default_k_block(_conv_1x1(1024, 2048, 28), 2, False, xeon,
                                            fma_units=units) == 4
    # without a target: one unit, the default cache sizes
    assert conv2d_nchwc._fma_units() == 1  # noqa: SLF001


def test_relay_build_schedules_nchwc_under_its_target(monkeypatch):
    """relay.build lowers computes and schedules outside any target scope; the NCHWc strategy
    enters its target, so the defaults read the target's cache sizes (not the defaults for
    no target). Built in-process without the kernel cache, checked against numpy."""
    import tvmpy as tvm
    from tvmpy import config, relay
    from tvmpy.contrib import graph_executor
    from tvmpy.target import Target

    seen = []
    real = conv2d_nchwc._caches  # noqa: SLF001
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: seen.append(Target.current()) or real())
    monkeypatch.setenv("TVMPY_CACHE", "0")
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 48, 11, 13)).astype("float32")
    w = rng.uniform(-1, 1, (40, 48, 3, 3)).astype("float32") / 20
    w2 = rng.uniform(-1, 1, (40, 40, 1, 1)).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    # a 3x3 first: the 1x1 after it gets a blocked (NCHWc) input, the direct NCHWc schedule
    y = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w), channels=40, kernel_size=(3, 3),
                                      padding=(1, 1)))
    y = relay.nn.conv2d(y, relay.const(w2), channels=40, kernel_size=(1, 1))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    with config.config(BUILD_WORKERS=1), tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    assert seen and all(t is not None and str(t.kind) == "llvm" for t in seen)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", x)
    m.run()
    h = np.maximum(testing.conv2d_nchw_python(x, w, 1, 1), 0)
    want = testing.conv2d_nchw_python(h, w2, 1, 0)
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


# small maps on a core with two 512-bit FMA units (the rule's condition patched in): chunk
# counts 3 (divisible), 17 (prime, a 2-chunk guarded tail tile), 20 (a 2-chunk tail), 4 (no
# three-chunk tile); 7x7, 5x11, a 1-row map, stride 2 onto 4x4, epilogue or none
# (N, C, H, W, OC, ic_bn, oc_bn, stride, -, -, -, -, plain data, epilogue)
SMALL_MAP_CASES = [
    (1, 112, 7, 7, 24, 8, 8, 1, 0, 0, 0, 0, False, True),   # 3 chunks, 7x7: one group, unblocked
    (1, 96, 5, 11, 136, 8, 8, 1, 0, 0, 0, 0, False, True),  # 17 chunks (prime), 11 columns
    (1, 64, 1, 13, 80, 4, 4, 1, 0, 0, 0, 0, False, False),  # one row: never blocked
    (1, 120, 8, 8, 80, 8, 4, 2, 0, 0, 0, 0, False, True),   # 20 chunks, stride 2 -> 4x4
    (1, 72, 9, 9, 32, 8, 8, 1, 0, 0, 0, 0, False, True),    # 4 chunks: two a tile, 9 columns
    (1, 40, 6, 5, 96, 8, 8, 1, 0, 0, 0, 0, False, True),    # 12 chunks: 4 groups, blocked
]


@pytest.mark.parametrize("case", SMALL_MAP_CASES)
def test_small_map_default_matches_reference(monkeypatch, case):
    """With two FMA units and an L1D smaller than the weight panel the default schedule takes
    the small-map tile (three chunks, guarded tail) and blocks the reduction with all rows a
    task; still the numpy result."""
    monkeypatch.setattr(conv2d_nchwc, "_fma_units", lambda: 2)
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=2048, l2=1 << 20))
    inputs, out, arrays, want = _conv(case)
    conv = out.op.input_tensors[0].op.input_tensors[0] if case[-1] else out
    oc_chunk, oh = int(conv.shape[1]), int(conv.shape[2])
    tile = conv2d_nchwc.default_oc_tile(conv, False)
    assert tile == (3 if oc_chunk % 3 == 0 or oc_chunk >= 16 else 2)
    groups = -(-oc_chunk // tile)
    assert (conv2d_nchwc.default_k_block(conv, tile, False) > 0) == (
        oh > 1 and groups >= conv2d_nchwc.SMALL_MAP_MIN_TASKS)
    assert conv2d_nchwc._default_reg_n(conv, tile, False) <= (8 if tile == 3 else 9)
    check(inputs, out, topi.x86.schedule_conv2d_NCHWc, lambda *xs: want, arrays=arrays)


def test_small_map_rules_need_two_fma_units():
    """The small-map tile and blocking need two 512-bit FMA units (Zen 4 and AVX2 unchanged),
    at most ``SMALL_MAP_PIXELS`` output pixels, and a panel larger than L1D."""
    xeon = CacheSizes(l1d=48 * 1024, l2=2 << 20)
    conv = _conv_1x1(2048, 512, 7)
    assert conv2d_nchwc._small_map_tile(conv, False, fma_units=2)
    assert not conv2d_nchwc._small_map_tile(conv, False, fma_units=1)
    assert not conv2d_nchwc._small_map_tile(conv, True, fma_units=2)
    assert not conv2d_nchwc._small_map_tile(_conv_1x1(512, 128, 28), False, fma_units=2)
    assert not conv2d_nchwc._small_map_tile(_conv_1x1(256, 256, 7, k=3), False, fma_units=2)
    assert not conv2d_nchwc._small_map_tile(_conv_1x1(512, 64, 7), False, fma_units=2)  # 4
    assert conv2d_nchwc.default_k_block(conv, 3, False, xeon, fma_units=2) == 4
    assert conv2d_nchwc.default_k_block(conv, 2, False, xeon, fma_units=1) == 0
    # one chunk group (3 chunks): the rows stay the parallel tasks, unblocked
    assert conv2d_nchwc.default_k_block(_conv_1x1(832, 48, 7), 3, False, xeon,
                                        fma_units=2) == 0
    # the panel in L1D (192 x 48 channels x 4 B = 36 KiB): unblocked
    assert conv2d_nchwc.default_k_block(_conv_1x1(192, 1152, 7), 3, False, xeon,
                                        fma_units=2) == 0


# maps of more than SMALL_MAP_PIXELS pixels whose rows have no divisor 8 or 9 (the two-chunk
# tile would hold fewer than 16 accumulators) on a core with two 512-bit FMA units: the
# four-chunk tile, its reduction blocked (L1D patched so that blocks do not divide the chunks)
# (N, C, H, W, OC, ic_bn, oc_bn, stride, -, -, -, -, plain data, epilogue)
FOUR_CHUNK_CASES = [
    (1, 56, 23, 13, 64, 8, 8, 1, 0, 0, 0, 0, False, True),     # 7 input chunks (prime), 13 cols
    (1, 48, 58, 30, 128, 16, 16, 2, 0, 0, 0, 0, False, True),  # stride 2 -> 29x15
    (2, 36, 17, 20, 32, 4, 4, 1, 0, 0, 0, 0, False, False),    # batch 2, 9 chunks, no epilogue
    (1, 88, 29, 11, 96, 8, 8, 1, 0, 0, 0, 0, False, True),     # 11 input chunks, 12 out chunks
]


@pytest.mark.parametrize("case", FOUR_CHUNK_CASES)
def test_four_chunk_default_matches_reference(monkeypatch, case):
    """The default schedule takes four chunks x up to 4 columns (guarded column tails), the
    reduction blocked when the input chunks exceed a block; still the numpy result."""
    monkeypatch.setattr(conv2d_nchwc, "_fma_units", lambda: 2)
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=7168, l2=1 << 20))
    inputs, out, arrays, want = _conv(case)
    conv = out.op.input_tensors[0].op.input_tensors[0] if case[-1] else out
    assert conv2d_nchwc._four_chunk_tile(conv, False)
    assert conv2d_nchwc.default_row_tile(conv, False) == (1, 4)
    assert conv2d_nchwc._default_reg_n(conv, 4, False) <= 4
    ic_chunk = case[1] // case[5]
    kb = conv2d_nchwc.default_k_block(conv, 4, False)
    assert kb == 0 if ic_chunk <= 7168 * 3 // 4 // (case[5] * case[6] * 16) else 0 < kb < ic_chunk
    check(inputs, out, topi.x86.schedule_conv2d_NCHWc, lambda *xs: want, arrays=arrays)


def test_four_chunk_rule():
    """Two FMA units, a plain 1x1 window, more than SMALL_MAP_PIXELS pixels, a chunk count
    divisible by 4 and at least 8, and a row whose two-chunk tile is short of 16 accumulators
    (28 columns: 2 x 7; 56 columns: 2 x 8, unchanged)."""
    xeon = CacheSizes(l1d=48 * 1024, l2=2 << 20)
    conv = _conv_1x1(1024, 2048, 28)
    assert conv2d_nchwc._four_chunk_tile(conv, False, fma_units=2)
    assert not conv2d_nchwc._four_chunk_tile(conv, False, fma_units=1)
    assert not conv2d_nchwc._four_chunk_tile(conv, True, fma_units=2)
    assert not conv2d_nchwc._four_chunk_tile(_conv_1x1(256, 128, 56), False, fma_units=2)
    assert not conv2d_nchwc._four_chunk_tile(_conv_1x1(256, 64, 28), False, fma_units=2)  # 4
    assert not conv2d_nchwc._four_chunk_tile(_conv_1x1(256, 96, 28), False, fma_units=2)  # 6
    assert not conv2d_nchwc._four_chunk_tile(_conv_1x1(256, 256, 28, k=3), False, fma_units=2)
    assert not conv2d_nchwc._four_chunk_tile(_conv_1x1(1024, 256, 14), False, fma_units=2)
    # blocks of the input chunks whose 4-chunk weights fill 3/4 of L1D: 36 KiB / 4 KiB -> 8
    assert conv2d_nchwc.default_k_block(conv, 4, False, xeon, fma_units=2) == 8
    assert conv2d_nchwc.default_k_block(_conv_1x1(128, 512, 28), 4, False, xeon,
                                        fma_units=2) == 0  # 8 input chunks: unblocked
    # a grouped 1x1 (2 groups) keeps its tile
    A = te.placeholder((1, 8, 28, 28, 16), name="A")
    W = te.placeholder((8, 4, 1, 1, 16, 16), name="W")
    grouped = nn.conv2d_NCHWc(A, W, 1, 0, 1, "NCHW16c", "NCHW16c", groups=2)
    assert not conv2d_nchwc._four_chunk_tile(grouped, False, fma_units=2)


def test_autotvm_fallback_is_the_four_chunk_default(monkeypatch):
    """The fallback config of a 1x1 on a 28-wide map with two FMA units: four chunks x 4
    columns, blocked; the same lowered program as ``schedule_conv2d_NCHWc``."""
    monkeypatch.setattr(conv2d_nchwc, "_fma_units", lambda: 2)
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=8192, l2=1 << 20))
    A = te.placeholder((1, 5, 14, 28, 16), name="A")
    W = te.placeholder((8, 5, 1, 1, 16, 16), name="W")
    args = (A, W, (1, 1), (0, 0, 0, 0), (1, 1), "NCHW16c", "NCHW16c", "float32")
    got, want, ref_out = _fallback_and_default_programs(args)
    assert conv2d_nchwc.default_oc_tile(ref_out, False) == 4
    assert conv2d_nchwc.default_k_block(ref_out, 4, False) == 1  # 6 KiB / 4 KiB a chunk
    assert got == want


# maps of more than SMALL_MAP_PIXELS pixels whose two-chunk tile has 8 or 9 columns, 16-lane
# output blocks (whole 512-bit vectors) and at least LONG_REDUCTION_MIN_BLOCKS reduction
# blocks, two FMA units (L1D patched to 8 KiB: 16-lane input blocks take 1 input chunk a
# block, 8-lane ones 2): the long-reduction tile (four chunks x up to 6 columns, blocked)
# (N, C, H, W, OC, ic_bn, oc_bn, stride, -, -, -, -, plain data, epilogue)
LONG_REDUCTION_CASES = [
    (1, 112, 17, 16, 128, 16, 16, 1, 0, 0, 0, 0, False, True),  # 7 input chunks (prime), 6+6+4
    (1, 88, 13, 24, 128, 8, 16, 1, 0, 0, 0, 0, False, True),    # 11 input chunks of 8 (kb 1)
    (1, 64, 36, 34, 192, 16, 16, 2, 0, 0, 0, 0, False, True),   # stride 2 -> 18x17: 6+6+5
    (2, 80, 19, 18, 128, 16, 16, 1, 0, 0, 0, 0, False, False),  # batch 2, no epilogue
]


@pytest.mark.parametrize("case", LONG_REDUCTION_CASES)
def test_long_reduction_default_matches_reference(monkeypatch, case):
    """The default schedule takes four chunks x up to 6 columns (guarded column tails), its
    reduction blocked by the input chunks whose four-chunk weights fill half of L1D; still the
    numpy result."""
    monkeypatch.setattr(conv2d_nchwc, "_fma_units", lambda: 2)
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=8192, l2=1 << 20))
    inputs, out, arrays, want = _conv(case)
    conv = out.op.input_tensors[0].op.input_tensors[0] if case[-1] else out
    assert conv2d_nchwc._long_reduction_tile(conv, False)
    assert not conv2d_nchwc._four_chunk_tile(conv, False)
    assert conv2d_nchwc.default_row_tile(conv, False) == (1, 4)
    assert 5 <= conv2d_nchwc._default_reg_n(conv, 4, False) <= 6
    # half of 8 KiB: 1 input chunk of 16 (4 KiB of four-chunk weights), 2 of 8 -> 1 (a
    # divisor of 11)
    assert conv2d_nchwc.default_k_block(conv, 4, False) == 1
    check(inputs, out, topi.x86.schedule_conv2d_NCHWc, lambda *xs: want, arrays=arrays)


def test_long_reduction_rule():
    """Two FMA units, a plain 1x1 window of whole 512-bit output blocks, more than
    SMALL_MAP_PIXELS pixels, a two-chunk tile of 8 or 9 columns, a chunk count divisible by 4
    and at least 8, and input chunks of at least four blocks of half L1D (a 48 KiB L1D: blocks
    of 6 chunks of 16, so from 24 chunks = 384 channels)."""
    xeon = CacheSizes(l1d=48 * 1024, l2=2 << 20)
    conv = _conv_1x1(768, 768, 32)
    rule = conv2d_nchwc._long_reduction_tile
    assert rule(conv, False, fma_units=2, caches=xeon)
    assert not rule(conv, False, fma_units=1, caches=xeon)
    assert not rule(conv, True, fma_units=2, caches=xeon)
    assert conv2d_nchwc.default_k_block(conv, 4, False, xeon, fma_units=2) == 6
    assert conv2d_nchwc.default_k_block(_conv_1x1(1024, 256, 56), 4, False, xeon,
                                        fma_units=2) == 4  # 64 chunks: a divisor of 6 -> 4
    assert rule(_conv_1x1(384, 384, 32), False, fma_units=2, caches=xeon)
    assert not rule(_conv_1x1(320, 320, 32), False, fma_units=2, caches=xeon)  # 20 chunks
    assert not rule(_conv_1x1(256, 1024, 56), False, fma_units=2, caches=xeon)
    assert not rule(_conv_1x1(1024, 2048, 28), False, fma_units=2, caches=xeon)  # 2 x 7
    assert not rule(_conv_1x1(1024, 256, 14), False, fma_units=2, caches=xeon)  # small map
    assert not rule(_conv_1x1(768, 96, 32), False, fma_units=2, caches=xeon)  # 6 chunks
    assert not rule(_conv_1x1(768, 768, 32, k=3), False, fma_units=2, caches=xeon)
    assert not rule(_conv_1x1(768, 768, 32, bn=8), False, fma_units=2, caches=xeon)  # half
    A = te.placeholder((1, 48, 32, 32, 16), name="A")
    W = te.placeholder((48, 24, 1, 1, 16, 16), name="W")
    grouped = nn.conv2d_NCHWc(A, W, 1, 0, 1, "NCHW16c", "NCHW16c", groups=2)
    assert not rule(grouped, False, fma_units=2, caches=xeon)


def test_autotvm_fallback_is_the_long_reduction_default(monkeypatch):
    """The fallback config of a long-reduction 1x1 (two FMA units): four chunks x 6 columns,
    blocked; the same lowered program as ``schedule_conv2d_NCHWc``."""
    monkeypatch.setattr(conv2d_nchwc, "_fma_units", lambda: 2)
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=8192, l2=1 << 20))
    A = te.placeholder((1, 5, 17, 16, 16), name="A")
    W = te.placeholder((8, 5, 1, 1, 16, 16), name="W")
    args = (A, W, (1, 1), (0, 0, 0, 0), (1, 1), "NCHW16c", "NCHW16c", "float32")
    got, want, ref_out = _fallback_and_default_programs(args)
    assert conv2d_nchwc.default_oc_tile(ref_out, False) == 4
    assert conv2d_nchwc.default_k_block(ref_out, 4, False) == 1  # 4 KiB / 4 KiB a chunk
    assert got == want


# --- the last reduction block at the output's register tile (split_last_k_block) ----------
# maps of more than LAST_BLOCK_MIN_PIXELS output pixels, blocked 1x1s with given tiles: prime
# chunk counts, blocks that do not divide the chunks (a last block shorter than k_block), rows
# and columns that do not divide the map, plain NCHW data, stride 2, batch 2; the epilogue
# bias + relu, bias + residual + relu, or none (the convolution is the output)
# (N, C, H, W, OC, ic_bn, oc_bn, stride, oc_tile, reg_n, k_block, rows, plain data, epilogue)
SPLIT_CASES = [
    (1, 21, 17, 19, 10, 3, 5, 1, 2, 4, 2, 3, False, "bias"),      # 7 chunks (prime): 2+2+2+1
    (1, 21, 17, 19, 10, 3, 5, 1, 2, 4, 2, 3, False, "residual"),
    (2, 13, 16, 17, 16, 1, 8, 1, 2, 6, 3, 5, False, "none"),      # 13 chunks, 3 a block: 4+1
    (1, 32, 19, 23, 24, 8, 8, 1, 3, 5, 3, 4, True, "residual"),   # plain NCHW data, 3 chunks
    (1, 24, 37, 35, 16, 4, 16, 2, 1, 3, 4, 2, False, "residual"),  # stride 2 -> 19x18, 6 = 4+2
    (1, 64, 17, 16, 64, 16, 16, 1, 4, 4, 2, 4, False, "bias"),    # 4 chunks: 2 + 2
]


def _split_conv(case):
    n, c, h, w, oc, icb, ocb, stride, *_, plain, epilogue = case
    A = te.placeholder((n, c, h, w) if plain else (n, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // icb, 1, 1, icb, ocb), name="W")
    conv = nn.conv2d_NCHWc(A, W, stride, 0, 1, "NCHW" if plain else f"NCHW{icb}c",
                           f"NCHW{ocb}c")
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c, 1, 1)).astype("float32")
    want = testing.nchw_to_nchwc(testing.conv2d_nchw_python(a, wt, stride, 0), ocb)
    arrays = [a if plain else testing.nchw_to_nchwc(a, icb), testing.oihw_to_kcrsck(wt, icb, ocb)]
    return (A, W), conv, arrays, want, rng


def _with_epilogue(conv, epilogue, rng, want, inputs, arrays):
    if epilogue == "none":
        return conv, want
    B = te.placeholder((1, *[int(d) for d in conv.shape[1:2]], 1, 1, int(conv.shape[4])),
                       name="B")
    bias = rng.uniform(-1, 1, [int(d) for d in B.shape]).astype("float32")
    inputs.append(B)
    arrays.append(bias)
    y, want = topi.add(conv, B), want + bias
    if epilogue == "residual":
        R = te.placeholder([int(d) for d in conv.shape], name="R")
        res = rng.uniform(-1, 1, [int(d) for d in R.shape]).astype("float32")
        inputs.append(R)
        arrays.append(res)
        y, want = topi.add(y, R), want + res
    return topi.nn.relu(y), np.maximum(want, 0)


@pytest.mark.parametrize("case", SPLIT_CASES)
def test_split_last_k_block_matches_reference(case):
    """The reduction split into the blocked partial sums and the last block (initialised from
    them, at the output's register tile; the epilogue reading registers) with the given tiles:
    the numpy result."""
    *_, oc_tile, reg_n, k_block, rows, _, epilogue = case
    (A, W), conv, arrays, want, rng = _split_conv(case)
    split = conv2d_nchwc.split_last_k_block(conv, k_block)
    assert split is not conv and split.op.tag == "conv2d_NCHWc"
    part = split.op.input_tensors[2]
    assert part.op.tag == conv2d_nchwc.PARTIAL_TAG
    ic_chunk = int(conv.op.reduce_axis[0].dom.extent)
    head = int(part.op.reduce_axis[0].dom.extent)
    assert head % k_block == 0 and 0 < ic_chunk - head <= k_block
    assert int(split.op.reduce_axis[0].dom.extent) == ic_chunk - head
    inputs, arrays = [A, W], list(arrays)
    out, want = _with_epilogue(split, epilogue, rng, want, inputs, arrays)

    def schedule(outs):
        s, c, anchor_out, _ = conv2d_nchwc.find_nchwc(outs)
        assert c.op is split.op
        conv2d_nchwc.schedule_nchwc_tile(s, c, anchor_out, oc_tile, reg_n, True,
                                         tile_oh=rows, k_block=k_block)
        return s

    check(inputs, out, schedule, lambda *xs: want, arrays=arrays)


def test_last_k_block_rule():
    """The split needs a blocked (at least two blocks) static float32 plain 1x1 convolution on
    a map of more than LAST_BLOCK_MIN_PIXELS pixels."""
    rule = conv2d_nchwc.fuses_last_k_block
    conv = _conv_1x1(1024, 512, 28)
    assert rule(conv, 8) and rule(conv, 63) and rule(conv, 5)
    assert not rule(conv, 0) and not rule(conv, 64)  # unblocked, one block
    assert not rule(_conv_1x1(2048, 512, 7), 4)  # small maps: a tie, unsplit
    assert not rule(_conv_1x1(1024, 256, 14), 4)
    assert rule(_conv_1x1(1024, 256, 17), 4)  # 289 pixels
    assert not rule(_conv_1x1(256, 256, 28, k=3), 4)  # windows are not blocked
    A = te.placeholder((1, 8, 28, 28, 16), name="A")
    grouped = nn.conv2d_NCHWc(A, te.placeholder((8, 4, 1, 1, 16, 16), name="W"), 1, 0, 1,
                              "NCHW16c", "NCHW16c", groups=2)
    assert not rule(grouped, 2)
    half = nn.conv2d_NCHWc(te.placeholder((1, 8, 28, 28, 16), "float16", name="A"),
                           te.placeholder((8, 8, 1, 1, 16, 16), "float16", name="W"), 1, 0, 1,
                           "NCHW16c", "NCHW16c")
    assert not rule(half, 2)
    dw = nn.depthwise_conv2d_NCHWc(A, te.placeholder((8, 1, 1, 1, 1, 16), name="W"), 1, 0, 1,
                                   "NCHW16c", "NCHW16c")
    assert not rule(dw, 2)
    assert conv2d_nchwc.split_last_k_block(_conv_1x1(2048, 512, 7), 4).op.tag == "conv2d_NCHWc"
    split = conv2d_nchwc.split_last_k_block(conv, 8)
    assert not rule(split, 8)  # already split: its reduction has an init
    assert conv2d_nchwc.split_last_k_block(split, 8) is split


@pytest.mark.parametrize("epilogue", ["none", "bias", "residual"])
def test_default_schedule_splits_the_last_block(monkeypatch, epilogue):
    """With small caches the default rule blocks an awkward 1x1 convolution (7 input chunks of
    3, 5-lane output blocks, 17x19 map: a block of 4, a last block of 3); its default split and
    schedule (what the AutoTVM fallback builds) match numpy, with and without an epilogue."""
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=2048, l2=2048))
    case = (1, 21, 17, 19, 10, 3, 5, 1, 0, 0, 0, 0, False, epilogue)
    (A, W), conv, arrays, want, rng = _split_conv(case)
    oc_tile = conv2d_nchwc.default_row_tile(conv, False)[1]
    assert conv2d_nchwc.default_k_block(conv, oc_tile, False) == 4
    split = conv2d_nchwc.split_last_k_block(conv)
    assert split is not conv and split.op.attrs["k_block"] == 4
    inputs, arrays = [A, W], list(arrays)
    out, want = _with_epilogue(split, epilogue, rng, want, inputs, arrays)
    check(inputs, out, topi.x86.schedule_conv2d_NCHWc, lambda *xs: want, arrays=arrays)


def test_autotvm_fallback_is_the_split_default(monkeypatch):
    """On a map above LAST_BLOCK_MIN_PIXELS the template's fallback config splits the blocked
    reduction as the default does: the same lowered program, with the partial-sum stage."""
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=4096, l2=8192))
    A = te.placeholder((1, 12, 17, 19, 4), name="A")
    W = te.placeholder((3, 12, 1, 1, 4, 8), name="W")
    args = (A, W, (1, 1), (0, 0, 0, 0), (1, 1), "NCHW4c", "NCHW8c", "float32")
    got, want, ref_out = _fallback_and_default_programs(args)
    assert ref_out.op.input_tensors[-1].op.tag == conv2d_nchwc.PARTIAL_TAG
    assert "conv2d_NCHWc_partial" in got
    assert got == want


def test_tuned_k_block_splits_and_matches_reference():
    """Every ``k_block`` of the template's space (others at their defaults) on an eligible
    1x1 (7 input chunks, 17x18 map): the compute splits at that block (none for 0) and the
    built kernel matches numpy."""
    import tvmpy as tvm
    from tvmpy import autotvm

    A = te.placeholder((1, 7, 17, 18, 8), name="A")
    W = te.placeholder((4, 7, 1, 1, 8, 16), name="W")
    args = (A, W, (1, 1), (0, 0, 0, 0), (1, 1), "NCHW8c", "NCHW16c", "float32")
    task = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm")
    space = task.config_space
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (1, 56, 17, 18)).astype("float32")
    wt = rng.uniform(-1, 1, (64, 56, 1, 1)).astype("float32")
    want = testing.nchw_to_nchwc(testing.conv2d_nchw_python(a, wt, 1, 0), 16)
    names = list(space.space_map)
    seen = set()
    for j in range(len(space.space_map["k_block"])):
        knob = [j if name == "k_block" else 0 for name in names]
        cfg = space.get(space.knob2point(knob))
        kb = cfg["k_block"].val
        seen.add(kb)
        with Target("llvm"):
            s, bufs = task.instantiate(cfg)
            f = tvm.build(s, bufs, "llvm")
        out = bufs[-1]
        split = out.op.input_tensors[-1].op.tag == conv2d_nchwc.PARTIAL_TAG
        assert split == (0 < kb < 7), kb
        res = tvm.nd.array(np.full([int(d) for d in out.shape], np.nan, "float32"))
        f(tvm.nd.array(testing.nchw_to_nchwc(a, 8)),
          tvm.nd.array(testing.oihw_to_kcrsck(wt, 8, 16)), res)
        np.testing.assert_allclose(res.numpy(), want, rtol=1e-4, atol=1e-4)
    assert {0, 2, 4} <= seen


def test_relay_build_splits_the_last_block_with_a_residual(monkeypatch):
    """relay.build (untuned: the template's fallback config) of a blocked 1x1 on a 17x17 map
    with bias + residual + relu fused after it: the compute is split (the last block's stage
    reads the partial sums) and the model matches numpy. Small caches and one FMA unit patched
    in, so that the rule blocks it whatever the host."""
    import tvmpy as tvm
    from tvmpy import config, relay
    from tvmpy.contrib import graph_executor

    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=4096, l2=8192))
    monkeypatch.setattr(conv2d_nchwc, "_fma_units", lambda: 1)
    monkeypatch.setenv("TVMPY_CACHE", "0")
    split_seen = []
    real_split = conv2d_nchwc.split_last_k_block

    def spy(conv, k_block=None):
        out = real_split(conv, k_block)
        split_seen.append(out is not conv)
        return out

    monkeypatch.setattr(conv2d_nchwc, "split_last_k_block", spy)
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (1, 40, 17, 17)).astype("float32")
    w = rng.uniform(-1, 1, (40, 40, 3, 3)).astype("float32") / 20
    w2 = rng.uniform(-1, 1, (40, 40, 1, 1)).astype("float32") / 5
    b2 = rng.uniform(-1, 1, (40,)).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    h = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w), channels=40, kernel_size=(3, 3),
                                      padding=(1, 1)))
    y = relay.nn.bias_add(relay.nn.conv2d(h, relay.const(w2), channels=40, kernel_size=(1, 1)),
                          relay.const(b2))
    y = relay.nn.relu(relay.add(y, h))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    with config.config(BUILD_WORKERS=1), tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    assert any(split_seen)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", x)
    m.run()
    hv = np.maximum(testing.conv2d_nchw_python(x, w, 1, 1), 0)
    want = testing.conv2d_nchw_python(hv, w2, 1, 0) + b2.reshape(1, -1, 1, 1) + hv
    np.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(want, 0), rtol=1e-4,
                               atol=1e-4)


def test_tile_working_set_rule():
    """A float32 plain 1x1 on a map above LAST_BLOCK_MIN_PIXELS is blocked (by the chunks whose
    weights fill L1D / 4) when its tile's weight panel exceeds L1D, whatever L2 / 16 says;
    where it fits, the L2 rule stands (unblocked here)."""
    zen4 = CacheSizes(l1d=32 * 1024, l2=1024 * 1024)
    kb = conv2d_nchwc.default_k_block
    assert kb(_conv_1x1(512, 1024, 28), 2, False, zen4, fma_units=1) == 4  # a 64 KiB panel
    assert kb(_conv_1x1(512, 128, 28), 2, False, zen4, fma_units=1) == 4
    assert kb(_conv_1x1(256, 1024, 28), 2, False, zen4, fma_units=1) == 0  # 32 KiB: fits
    assert kb(_conv_1x1(256, 256, 56), 2, False, zen4, fma_units=1) == 0
    assert kb(_conv_1x1(128, 512, 56), 2, False, zen4, fma_units=1) == 0
    # the boundary: 256 -> 64 at 28x28, a 2-chunk tile: a panel of 32 KiB
    conv = _conv_1x1(256, 64, 28)
    assert kb(conv, 2, False, CacheSizes(l1d=32 * 1024, l2=1 << 20), fma_units=1) == 0
    assert kb(conv, 2, False, CacheSizes(l1d=32 * 1024 - 4, l2=1 << 20), fma_units=1) == 2
    # a map of LAST_BLOCK_MIN_PIXELS (not split): the L2 rule (its input, 512 KiB, is in L2)
    assert kb(_conv_1x1(512, 1024, 16), 2, False, zen4, fma_units=1) == 0
    # float16, grouped: the L2 rule (unblocked here)
    half = nn.conv2d_NCHWc(te.placeholder((1, 32, 28, 28, 16), "float16", name="A"),
                           te.placeholder((64, 32, 1, 1, 16, 16), "float16", name="W"), 1, 0, 1,
                           "NCHW16c", "NCHW16c")
    assert kb(half, 2, False, zen4, fma_units=1) == 0
    assert kb(_grouped_1x1(1024, 1024, 28, 2), 2, False, zen4, fma_units=1) == 0


# (N, C, H, W, OC, ic_bn, oc_bn, stride, plain data, epilogue): maps above 256 output pixels
WORKING_SET_CASES = [
    (1, 21, 19, 17, 10, 3, 5, 1, False, "residual"),  # 7 input chunks (prime), 5-lane blocks
    (2, 26, 17, 16, 24, 2, 8, 1, False, "bias"),      # 13 chunks, batch 2, 3 output chunks
    (1, 32, 23, 19, 16, 8, 8, 1, True, "residual"),   # plain NCHW data, 4 chunks
    (1, 20, 37, 35, 16, 4, 16, 2, False, "none"),     # stride 2 -> 19x18, 5 chunks, 1 output
]


@pytest.mark.parametrize("case", WORKING_SET_CASES)
def test_tile_working_set_default_matches_reference(monkeypatch, case):
    """With a small L1D (and an L2 the L2 / 16 rule never blocks at) the tile-working-set rule
    blocks awkward 1x1 convolutions; their default split and schedule (what an untuned
    relay.build runs) match numpy."""
    n, c, h, w, oc, icb, ocb, stride, plain, epilogue = case
    caches = CacheSizes(l1d=256, l2=1 << 30)
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: caches)
    (A, W), conv, arrays, want, rng = _split_conv(
        (n, c, h, w, oc, icb, ocb, stride, 0, 0, 0, 0, plain, epilogue))
    oc_tile = conv2d_nchwc.default_row_tile(conv, False)[1]
    k_block = conv2d_nchwc.default_k_block(conv, oc_tile, False)
    assert 0 < k_block < c // icb
    split = conv2d_nchwc.split_last_k_block(conv)
    assert split is not conv and split.op.attrs["k_block"] == k_block
    inputs, arrays = [A, W], list(arrays)
    out, want = _with_epilogue(split, epilogue, rng, want, inputs, arrays)
    check(inputs, out, topi.x86.schedule_conv2d_NCHWc, lambda *xs: want, arrays=arrays)
