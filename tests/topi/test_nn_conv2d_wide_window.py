"""x86 NCHWc convolutions with windows wider than 3 columns and at most 9 taps (1x5, 1x7, 1x9,
2x4: Inception-v3's factorized 1x7): the default schedule inlines their padding and unrolls the
kernel-width loop (``default_unroll_kw``), so that the column tests fold; checked against numpy
on awkward shapes (prime sizes, asymmetric padding, stride 2, odd channel blocks, a one-column
map, a fused bias + relu). Taller windows, 3x3 and windows of more than 9 taps stay rolled."""

from __future__ import annotations

import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.topi.x86.conv2d_nchwc import default_unroll_kw, find_nchwc

from .nn_util import check, nchwc_conv_case

# (C, H, W, OC, kh, kw, stride, padding (top, left, bottom, right), ic_bn, oc_bn)
CASES = [
    (32, 17, 17, 48, 1, 7, 1, (0, 3, 0, 3), 16, 16),  # Inception-v3's 1x7
    (12, 13, 11, 20, 1, 7, 2, (0, 3, 0, 2), 4, 5),  # stride 2, asymmetric padding, primes
    (10, 7, 5, 6, 1, 5, 1, (0, 1, 0, 3), 5, 3),  # the window wider than the padded row - 1
    (8, 9, 1, 8, 1, 9, 1, (0, 4, 0, 4), 8, 8),  # a one-column map: all but one tap padding
    (6, 11, 13, 9, 2, 4, 1, (1, 2, 0, 1), 3, 3),  # 2x4, both axes padded
]


def _run(c, h, w, oc, kh, kw, stride, pad, icb, ocb, bias_relu):
    inputs, out, arrays, want = nchwc_conv_case(c, h, w, oc, kh, kw, stride, pad, icb, ocb,
                                                bias_relu, seed=c * kw + h)
    _, cv, _, _ = find_nchwc([out])
    assert default_unroll_kw(cv, False)
    check(inputs, out, _schedule, lambda *xs: want, arrays=arrays)


def _schedule(outs):
    with tvm.target.Target("llvm"):
        return topi.x86.schedule_conv2d_NCHWc(outs)


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("bias_relu", [False, True])
def test_wide_window_default_matches_numpy(case, bias_relu):
    _run(*case, bias_relu)


@pytest.mark.parametrize("kh,kw,want", [(1, 7, True), (1, 5, True), (2, 4, True), (1, 3, False),
                                         (3, 3, False), (7, 1, False), (3, 5, False),
                                         (7, 7, False)])
def test_unrolled_windows(kh, kw, want):
    A = te.placeholder((1, 2, 9, 9, 8), name="A")
    K = te.placeholder((2, 2, kh, kw, 8, 8), name="K")
    conv = topi.nn.conv2d_NCHWc(A, K, 1, (kh // 2, kw // 2), 1, "NCHW8c", "NCHW8c")
    assert default_unroll_kw(conv, False) == want
