"""Grouped and dilated NCHWc convolutions (issue 25): ``topi.nn.conv2d_NCHWc(groups=...)`` with
the default x86 schedule (including the kernel-width unroll of dilated windows) against the
shared numpy reference (``topi.testing.group_conv2d_nchw_python``) at awkward shapes: groups
1 / 2 / odd / prime, dilation 1-3, stride 2, channel blocks that are not vector-sized, size-1
maps, batch 2, plain NCHW data."""

from __future__ import annotations

import numpy as np
import pytest

from tvmpy import te, topi
from tvmpy.topi import nn, testing
from tvmpy.topi.x86 import conv2d_nchwc
from tvmpy.topi.x86.conv2d_nchwc import (
    default_oc_tile,
    default_unroll_kw,
    schedule_conv2d_NCHWc,
)

from .nn_util import check

# (N, C, H, W, OC, groups, K, stride, pad, dilation, ic_bn, oc_bn)
CASES = [
    (1, 6, 7, 11, 6, 2, 3, 1, 1, 1, 3, 3),      # groups 2, odd blocks of 3
    (2, 9, 5, 13, 15, 3, 3, 2, 2, 2, 3, 5),     # odd groups, batch 2, stride 2, dilation 2
    (1, 10, 9, 9, 10, 5, 3, 1, 3, 3, 2, 2),     # prime group count 5, dilation 3
    (1, 32, 1, 1, 32, 4, 3, 1, 1, 1, 8, 8),     # size-1 map
    (1, 14, 17, 8, 21, 7, 1, 1, 0, 1, 2, 3),    # 1x1 grouped, 7 groups, 3 outputs a group
    (1, 64, 13, 13, 64, 2, 3, 1, 2, 2, 16, 16),  # two output chunks a group, dilation 2
    (1, 4, 9, 9, 8, 1, 3, 1, 2, 2, 4, 8),       # groups 1, dilated: the unrolled window
    (1, 12, 8, 19, 12, 3, 5, 2, 3, 2, 4, 2),    # 5x5, stride 2, dilation 2, two chunks a group
    (1, 32, 17, 17, 32, 2, 3, 2, 3, 3, 8, 8),   # dilation 3, stride 2, prime map: one chunk a tile
    (1, 36, 11, 13, 24, 3, 3, 1, 2, 2, 4, 4),   # 3 groups of 12 (not a vector), 2 chunks a group, d2
    (1, 16, 1, 1, 16, 2, 3, 1, 2, 2, 4, 4),     # size-1 map, dilated window wider: two chunks
    (1, 64, 7, 7, 64, 1, 3, 1, 3, 3, 16, 16),   # plain, dilation 3 on a 7-wide map: one chunk
]


@pytest.mark.parametrize("case", CASES)
def test_group_conv2d_NCHWc_default_schedule(case):
    inputs, conv, arrays, want = _grouped_case(*case, seed=7)
    check(inputs, topi.nn.relu(conv), schedule_conv2d_NCHWc, lambda x, y: want, arrays=arrays)


def _grouped_case(n: int, c: int, h: int, w: int, oc: int, groups: int, k: int, stride: int,
                  pad: int, dil: int, icb: int, ocb: int, seed: int):
    """A grouped ``conv2d_NCHWc`` on seeded random inputs: its placeholders, the convolution,
    the blocked input arrays and numpy's result after a relu, blocked (for :func:`check`)."""
    A = te.placeholder((n, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // groups // icb, k, k, icb, ocb), name="W")
    conv = nn.conv2d_NCHWc(A, W, stride, pad, dil, f"NCHW{icb}c", f"NCHW{ocb}c", groups=groups)
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c // groups, k, k)).astype("float32")
    arrays = [testing.nchw_to_nchwc(a, icb), testing.oihw_to_kcrsck(wt, icb, ocb)]
    want = np.maximum(testing.group_conv2d_nchw_python(a, wt, stride, pad, dil, groups), 0)
    return [A, W], conv, arrays, testing.nchw_to_nchwc(want.astype("float32"), ocb)


def test_group_conv2d_NCHWc_reads_plain_data():
    """``layout="NCHW"``: plain data read in place, each group's input chunks offset."""
    n, c, h, w, oc, groups, icb, ocb = 1, 12, 8, 10, 18, 3, 2, 3
    A = te.placeholder((n, c, h, w), name="A")
    W = te.placeholder((oc // ocb, c // groups // icb, 3, 3, icb, ocb), name="W")
    out = nn.conv2d_NCHWc(A, W, 1, 2, 2, "NCHW", f"NCHW{ocb}c", groups=groups)
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c // groups, 3, 3)).astype("float32")
    want = testing.group_conv2d_nchw_python(a, wt, 1, 2, 2, groups)
    check([A, W], out, schedule_conv2d_NCHWc,
          lambda x, y: testing.nchw_to_nchwc(want.astype("float32"), ocb),
          arrays=[a, testing.oihw_to_kcrsck(wt, icb, ocb)])


def test_group_conv2d_NCHWc_errors():
    A = te.placeholder((1, 4, 5, 5, 2), name="A")  # 8 channels
    with pytest.raises(ValueError, match="straddle"):  # 3 output chunks, 2 groups
        nn.conv2d_NCHWc(A, te.placeholder((3, 2, 3, 3, 2, 4), name="W"), 1, 1, 1, groups=2)
    with pytest.raises(ValueError, match="per group"):  # 2 input chunks a group x 3 != 4
        nn.conv2d_NCHWc(A, te.placeholder((3, 2, 3, 3, 2, 4), name="W"), 1, 1, 1, groups=3)
    with pytest.raises(ValueError, match="groups must be a positive int"):
        nn.conv2d_NCHWc(A, te.placeholder((2, 4, 3, 3, 2, 4), name="W"), 1, 1, 1, groups=0)


def test_default_unroll_kw_only_for_dilated_windows():
    A = te.placeholder((1, 4, 9, 9, 4), name="A")
    W = te.placeholder((2, 4, 3, 3, 4, 8), name="W")
    assert default_unroll_kw(nn.conv2d_NCHWc(A, W, 1, 2, 2), False)
    assert default_unroll_kw(nn.conv2d_NCHWc(A, W, 1, 2, (1, 2)), False)
    assert not default_unroll_kw(nn.conv2d_NCHWc(A, W, 1, 2, (2, 1)), False)
    assert not default_unroll_kw(nn.conv2d_NCHWc(A, W, 1, 1, 1), False)
    W1 = te.placeholder((2, 4, 1, 1, 4, 8), name="W1")
    assert not default_unroll_kw(nn.conv2d_NCHWc(A, W1, 1, 0, 2), False)
    Wd = te.placeholder((4, 1, 3, 3, 1, 4), name="Wd")
    assert not default_unroll_kw(nn.depthwise_conv2d_NCHWc(A, Wd, 1, 2, 2), True)
    W5 = te.placeholder((4, 1, 5, 5, 1, 4), name="W5")  # wide depthwise windows unroll
    assert default_unroll_kw(nn.depthwise_conv2d_NCHWc(A, W5, 1, 2, 1), True)


# (N, C, H, W, K, stride, pad, dilation, block): depthwise windows wider than 3 (unrolled, the
# padding inlined), odd sizes, stride 2, dilation, size-1 map, a block that is not a vector
DW_CASES = [
    (1, 32, 13, 17, 7, 1, 3, 1, 16),
    (1, 12, 11, 9, 5, 2, 2, 1, 4),
    (2, 6, 10, 10, 9, 1, 8, 2, 3),
    (1, 16, 1, 1, 5, 1, 2, 1, 16),
    (1, 10, 15, 7, (5, 7), 1, (2, 3, 2, 3), 1, 5),
]


@pytest.mark.parametrize("case", DW_CASES)
def test_wide_depthwise_NCHWc_default_schedule(case):
    n, c, h, w, k, stride, pad, dil, cb = case
    kh, kw = k if isinstance(k, tuple) else (k, k)
    A = te.placeholder((n, c // cb, h, w, cb), name="A")
    W = te.placeholder((c // cb, 1, kh, kw, 1, cb), name="W")
    conv = nn.depthwise_conv2d_NCHWc(A, W, stride, pad, dil, f"NCHW{cb}c", f"NCHW{cb}c")
    out = topi.multiply(conv, topi.erf(conv))  # an epilogue on the register tile
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (c, 1, kh, kw)).astype("float32")
    ref = testing.group_conv2d_nchw_python(a, wt, stride, pad, dil, c)  # pad: (t, l, b, r)
    from scipy.special import erf

    want = testing.nchw_to_nchwc((ref * erf(ref)).astype("float32"), cb)
    wb = np.ascontiguousarray(wt.reshape(c // cb, cb, 1, kh, kw).transpose(0, 2, 3, 4, 1))
    check([A, W], out, schedule_conv2d_NCHWc, lambda x, y: want,
          arrays=[testing.nchw_to_nchwc(a, cb), wb[:, :, :, :, None, :]])


def test_default_oc_tile_one_chunk_for_dilated_windows_within_the_map():
    """Two channel blocks a tile, except for plain/grouped convolutions whose width-dilated
    window fits the output width; depthwise, undilated, 1x1 and wider-than-the-map windows
    keep :func:`_nchwc_tile`'s choice."""
    A = te.placeholder((1, 4, 28, 28, 16), name="A")
    W = te.placeholder((4, 4, 3, 3, 16, 16), name="W")
    Wg = te.placeholder((4, 2, 3, 3, 16, 16), name="Wg")  # 2 groups of 32 channels
    assert default_oc_tile(nn.conv2d_NCHWc(A, W, 1, 2, 2), False) == 1
    assert default_oc_tile(nn.conv2d_NCHWc(A, Wg, 1, 4, 4, groups=2), False) == 1
    assert default_oc_tile(nn.conv2d_NCHWc(A, Wg, 1, 1, 1, groups=2), False) == 2
    assert default_oc_tile(nn.conv2d_NCHWc(A, W, 1, 2, (2, 1)), False) == 2  # height only
    assert default_oc_tile(nn.conv2d_NCHWc(A, W, 1, 12, 12), False) == 1  # 25 <= 28
    assert default_oc_tile(nn.conv2d_NCHWc(A, W, 1, 14, 14), False) == 2  # 29 > 28
    W1 = te.placeholder((4, 4, 1, 1, 16, 16), name="W1")
    assert default_oc_tile(nn.conv2d_NCHWc(A, W1, 1, 0, 2), False) == 2
    W3 = te.placeholder((3, 4, 3, 3, 16, 16), name="W3")  # odd chunk count: one anyway
    assert default_oc_tile(nn.conv2d_NCHWc(A, W3, 1, 2, 2), False) == 1
    Wd = te.placeholder((4, 1, 3, 3, 1, 16), name="Wd")
    assert default_oc_tile(nn.depthwise_conv2d_NCHWc(A, Wd, 1, 2, 2), True) == 1


# (N, C, H, W, OC, groups, K, stride, pad, dilation, ic_bn, oc_bn, columns with two FMA units):
# one-chunk register tiles of fewer than 8 columns, widened on a core with two 512-bit FMA units
WIDE_ONE_CHUNK_CASES = [
    (1, 64, 9, 28, 64, 4, 3, 1, 2, 2, 16, 16, 14),  # 4 groups of 16, d2: 7 -> 14 columns
    (1, 36, 7, 19, 36, 3, 3, 1, 3, 3, 4, 4, 10),    # 3 groups of 12, d3, prime 19: 10 + 9
    (1, 40, 6, 21, 40, 1, 3, 1, 1, 1, 8, 8, 11),    # plain, 5 chunks (odd): 11 + 10
    (2, 24, 5, 27, 24, 1, 3, 2, 2, 2, 8, 8, 14),    # batch 2, stride 2 -> 14 wide, 3 chunks
    (1, 32, 3, 13, 32, 2, 3, 1, 2, 2, 16, 16, 13),  # 2 groups, d2, 13 wide: the whole row
]


@pytest.mark.parametrize("case", WIDE_ONE_CHUNK_CASES)
def test_one_chunk_tile_widened_with_two_fma_units(monkeypatch, case):
    """A one-chunk tile of a window whose default width holds fewer than 8 accumulators takes
    up to 16 columns with two FMA units (guarded tails where no divisor fits), 7 with one;
    the result still numpy's."""
    *shape, cols = case
    inputs, conv, arrays, want = _grouped_case(*shape, seed=5)
    assert conv2d_nchwc._default_reg_n(conv, 1, False) < 8  # one unit (no target): unchanged
    monkeypatch.setattr(conv2d_nchwc, "_fma_units", lambda: 2)
    assert default_oc_tile(conv, False) == 1
    assert conv2d_nchwc._default_reg_n(conv, 1, False) == cols
    check(inputs, topi.nn.relu(conv), schedule_conv2d_NCHWc, lambda x, y: want, arrays=arrays)


def test_one_chunk_columns_rule():
    """Only one-chunk tiles of windows, not depthwise, not 1x1, not tiles of 8 columns or more,
    nor rows that one tile already covers."""
    A = te.placeholder((1, 4, 28, 28, 16), name="A")
    W = te.placeholder((4, 4, 3, 3, 16, 16), name="W")
    conv = nn.conv2d_NCHWc(A, W, 1, 2, 2)
    cols = conv2d_nchwc._one_chunk_columns
    assert cols(conv, 1, False, 7, fma_units=2) == 14
    assert cols(conv, 1, False, 7, fma_units=1) == 7
    assert cols(conv, 2, False, 7, fma_units=2) == 7
    assert cols(conv, 1, False, 8, fma_units=2) == 8
    W1 = te.placeholder((4, 4, 1, 1, 16, 16), name="W1")
    assert cols(nn.conv2d_NCHWc(A, W1, 1, 0, 1), 1, False, 7, fma_units=2) == 7
    Wd = te.placeholder((4, 1, 3, 3, 1, 16), name="Wd")
    assert cols(nn.depthwise_conv2d_NCHWc(A, Wd, 1, 1, 1), 1, True, 7, fma_units=2) == 7
    A7 = te.placeholder((1, 4, 7, 7, 16), name="A7")  # a 7-wide row: one tile already
    assert cols(nn.conv2d_NCHWc(A7, W, 1, 1, 1), 1, False, 7, fma_units=2) == 7
