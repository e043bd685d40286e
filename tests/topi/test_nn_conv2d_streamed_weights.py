"""x86 NCHWc: a plain convolution whose weights take at least half of L2 reads a padded copy of
its input (``default_inline_pad`` False) and its one-row tile prefetches the weights; a small
L2 is patched in so that small awkward shapes take the rule, checked against numpy (prime
sizes, asymmetric padding, stride 2, 1x3 / 3x1 / 3x3 windows, a fused bias + relu)."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.target.cpu_features import CacheSizes
from tvmpy.topi import testing
from tvmpy.topi.x86 import conv2d_nchwc
from tvmpy.topi.x86.conv2d_nchwc import default_inline_pad, find_nchwc

from .nn_util import check, nchwc_conv_case

# (C, H, W, OC, kh, kw, stride, padding (top, left, bottom, right), ic_bn, oc_bn)
CASES = [
    (16, 7, 7, 32, 3, 3, 1, (1, 1, 1, 1), 16, 16),  # a 7x7 map (ResNet's last stage)
    (12, 11, 13, 10, 3, 3, 2, (1, 0, 2, 1), 4, 5),  # stride 2, asymmetric padding, primes
    (10, 8, 8, 15, 1, 3, 1, (0, 1, 0, 1), 5, 5),  # 1x3 on 8x8 (Inception-v3's Mixed_7)
    (9, 5, 3, 6, 3, 1, 1, (1, 0, 1, 0), 3, 3),  # 3x1, a narrow map
    (8, 3, 3, 8, 3, 3, 1, (1, 1, 1, 1), 8, 8),  # a 3x3 map: stacked rows
]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("l2,streamed", [(1024, True), (1 << 30, False)])
def test_streamed_weights_read_a_padded_copy(monkeypatch, case, l2, streamed):
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=512, l2=l2))
    inputs, out, arrays, want = nchwc_conv_case(*case, seed=case[0] * case[1] + case[5])
    _, cv, _, _ = find_nchwc([out])
    assert default_inline_pad(cv, False) == (not streamed)
    if streamed:  # the one-row tile prefetches the weights
        assert "prefetch" in str(tvm.lower(_schedule([out]), [*inputs, out]))
    check(inputs, out, _schedule, lambda *xs: want, arrays=arrays)


def _schedule(outs):
    with tvm.target.Target("llvm"):
        return topi.x86.schedule_conv2d_NCHWc(outs)


def test_depthwise_keeps_the_inlined_padding(monkeypatch):
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=512, l2=1024))
    A = te.placeholder((1, 4, 9, 9, 16), name="A")
    K = te.placeholder((4, 1, 3, 3, 1, 16), name="K")
    conv = topi.nn.depthwise_conv2d_NCHWc(A, K, (1, 1), (1, 1), (1, 1), "NCHW16c", "NCHW16c")
    _, cv, _, dw = find_nchwc([conv])
    assert dw and default_inline_pad(cv, True)


@pytest.mark.parametrize("groups,want_inline", [(1, False), (2, True), (4, True)])
def test_grouped_keeps_the_inlined_padding(monkeypatch, groups, want_inline):
    """Grouped convolutions read only their group's weights: the rule leaves them inlined (the
    result checked against numpy's grouped convolution)."""
    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=512, l2=1024))
    c, hw, oc, bn = 16, 7, 16, 4
    A = te.placeholder((1, c // bn, hw, hw, bn), name="A")
    K = te.placeholder((oc // bn, c // groups // bn, 3, 3, bn, bn), name="K")
    conv = topi.nn.conv2d_NCHWc(A, K, 1, 1, 1, groups=groups)
    _, cv, _, _ = find_nchwc([conv])
    assert default_inline_pad(cv, False) == want_inline
    with tvm.target.Target("llvm"):
        f = tvm.build(topi.x86.schedule_conv2d_NCHWc([conv]), [A, K, conv], "llvm")
    rng = np.random.default_rng(groups)
    x = rng.uniform(-1, 1, (1, c, hw, hw)).astype("float32")
    k = rng.uniform(-1, 1, (oc, c // groups, 3, 3)).astype("float32")
    kk = k.reshape(oc // bn, bn, c // groups // bn, bn, 3, 3).transpose(0, 2, 4, 5, 3, 1)
    o = tvm.nd.array(np.full([int(d) for d in conv.shape], np.nan, "float32"))
    f(tvm.nd.array(testing.nchw_to_nchwc(x, bn)), tvm.nd.array(np.ascontiguousarray(kk)), o)
    want = testing.group_conv2d_nchw_python(x, k, 1, 1, 1, groups)
    np.testing.assert_allclose(testing.nchwc_to_nchw(o.numpy()), want, rtol=1e-4, atol=1e-4)
