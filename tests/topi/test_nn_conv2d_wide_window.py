"""x86 NCHWc convolutions with windows wider than 3 columns and at most 9 taps (1x5, 1x7, 1x9,
2x4: Inception-v3's factorized 1x7): the default schedule inlines their padding and unrolls the
kernel-width loop (``default_unroll_kw``), so that the column tests fold; checked against numpy
on awkward shapes (prime sizes, asymmetric padding, stride 2, odd channel blocks, a one-column
map, a fused bias + relu). Taller windows, 3x3 and windows of more than 9 taps stay rolled."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.topi import testing
from tvmpy.topi.x86.conv2d_nchwc import default_unroll_kw, find_nchwc

# (C, H, W, OC, kh, kw, stride, padding (top, left, bottom, right), ic_bn, oc_bn)
CASES = [
    (32, 17, 17, 48, 1, 7, 1, (0, 3, 0, 3), 16, 16),  # Inception-v3's 1x7
    (12, 13, 11, 20, 1, 7, 2, (0, 3, 0, 2), 4, 5),  # stride 2, asymmetric padding, primes
    (10, 7, 5, 6, 1, 5, 1, (0, 1, 0, 3), 5, 3),  # the window wider than the padded row - 1
    (8, 9, 1, 8, 1, 9, 1, (0, 4, 0, 4), 8, 8),  # a one-column map: all but one tap padding
    (6, 11, 13, 9, 2, 4, 1, (1, 2, 0, 1), 3, 3),  # 2x4, both axes padded
]


def _run(c, h, w, oc, kh, kw, stride, pad, icb, ocb, bias_relu):
    rng = np.random.default_rng(c * kw + h)
    x = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    k = rng.uniform(-1, 1, (oc, c, kh, kw)).astype("float32")
    b = rng.uniform(-1, 1, (oc,)).astype("float32")
    A = te.placeholder((1, c // icb, h, w, icb), name="A")
    K = te.placeholder((oc // ocb, c // icb, kh, kw, icb, ocb), name="K")
    B = te.placeholder((1, oc // ocb, 1, 1, ocb), name="B")
    conv = topi.nn.conv2d_NCHWc(A, K, stride, pad, 1, f"NCHW{icb}c", f"NCHW{ocb}c")
    out = topi.nn.relu(conv + B) if bias_relu else conv
    _, cv, _, _ = find_nchwc([out])
    assert default_unroll_kw(cv, False)
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_conv2d_NCHWc([out])
        f = tvm.build(s, [A, K, B, out] if bias_relu else [A, K, out], "llvm")
    kk = k.reshape(oc // ocb, ocb, c // icb, icb, kh, kw).transpose(0, 2, 4, 5, 3, 1)
    o = tvm.nd.array(np.full([int(d) for d in out.shape], np.nan, "float32"))
    args = [tvm.nd.array(testing.nchw_to_nchwc(x, icb)), tvm.nd.array(np.ascontiguousarray(kk))]
    if bias_relu:
        args.append(tvm.nd.array(b.reshape(1, oc // ocb, 1, 1, ocb)))
    f(*args, o)
    pt, pl, pb, pr = pad
    want = testing.conv2d_nchw_python(np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))), k,
                                      stride, 0)
    if bias_relu:
        want = np.maximum(want + b.reshape(1, oc, 1, 1), 0)
    np.testing.assert_allclose(testing.nchwc_to_nchw(o.numpy()), want, rtol=1e-4, atol=1e-4)


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
