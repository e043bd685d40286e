"""NCHWc convolutions whose padding is inlined, built through the pipeline's SkipPaddedTaps
(the multiply-adds of padded taps skipped, the row test hoisted above the input-lane loop):
values against numpy at awkward shapes (prime sizes, dilation larger than the map, padding
beyond the window's reach, size-1 maps, one-sided padding, stride 2, groups, depthwise),
with the right edge's register tile peeled ("after") and both edges' ("both"); the lowered IR
keeps no multiply of a constant zero and tests the row once per (kernel row, tile)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.tir import stmt as S
from tvmpy.tir.functor import post_order_visit
from tvmpy.topi import nn, testing

from .nn_util import check

conv2d_module = importlib.import_module("tvmpy.topi.nn.conv2d")

# (channels in, out, groups, block in, block out, h, w, (kh, kw), stride, dilation,
#  pad (top, left, bottom, right))
CASES = {
    "prime_map_d2": (8, 8, 1, 4, 4, 7, 11, (3, 3), 1, 2, (2, 2, 2, 2)),
    "dilation_beyond_map": (4, 8, 1, 4, 8, 3, 5, (3, 3), 1, 4, (4, 4, 4, 4)),
    "pad_beyond_reach": (4, 4, 1, 4, 4, 5, 6, (3, 3), 1, 1, (4, 3, 5, 2)),
    "size1_map": (8, 16, 1, 8, 8, 1, 1, (3, 3), 1, 1, (1, 1, 1, 1)),
    "size1_row": (4, 4, 1, 4, 4, 1, 13, (3, 3), 1, 3, (3, 3, 3, 3)),
    "one_sided": (12, 16, 1, 4, 8, 9, 13, (3, 3), 1, 1, (0, 1, 2, 0)),
    "stride2_same": (8, 8, 1, 8, 8, 9, 17, (3, 3), 2, 1, (0, 0, 1, 1)),
    "grouped_d3": (16, 16, 4, 4, 4, 13, 7, (3, 3), 1, 3, (3, 3, 3, 3)),
    "grouped_stride2": (24, 12, 3, 8, 4, 11, 10, (3, 3), 2, 1, (1, 1, 1, 1)),
    "wide_1x5": (4, 8, 1, 4, 4, 5, 9, (1, 5), 1, 1, (0, 2, 0, 2)),
    "tall_5x1_d2": (4, 4, 1, 4, 4, 7, 3, (5, 1), 1, 2, (4, 0, 4, 0)),
}


@pytest.mark.parametrize("likely", ["after", "both"])
@pytest.mark.parametrize("case", list(CASES))
def test_padded_conv_nchwc_against_numpy(case, likely, monkeypatch):
    c, oc, g, icb, ocb, h, w, (kh, kw), stride, dil, pad = CASES[case]
    monkeypatch.setattr(conv2d_module, "PAD_LIKELY_W", likely)
    rng = np.random.default_rng(len(case))
    a = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c // g, kh, kw)).astype("float32")
    A = te.placeholder((1, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // g // icb, kh, kw, icb, ocb), name="W")
    out = topi.nn.relu(nn.conv2d_NCHWc(A, W, stride, pad, dil, f"NCHW{icb}c", f"NCHW{ocb}c",
                                       groups=g))

    def ref(_a, _w):
        y = testing.group_conv2d_nchw_python(a, wt, stride, pad, dil, g)
        return testing.nchw_to_nchwc(np.maximum(y, 0), ocb)

    with tvm.target.Target("llvm"):
        check([A, W], out, topi.x86.schedule_conv2d_NCHWc, ref,
              arrays=[testing.nchw_to_nchwc(a, icb), testing.oihw_to_kcrsck(wt, icb, ocb)])


@pytest.mark.parametrize("likely", ["after", "both"])
@pytest.mark.parametrize("h,w,k,stride,dil,pad", [(7, 7, 3, 1, 1, (1, 1, 1, 1)),
                                                  (5, 3, 3, 1, 4, (4, 4, 4, 4)),
                                                  (1, 1, 5, 1, 1, (2, 2, 2, 2)),
                                                  (11, 13, 5, 2, 1, (2, 1, 2, 3))])
def test_padded_depthwise_nchwc_against_numpy(h, w, k, stride, dil, pad, likely, monkeypatch):
    monkeypatch.setattr(conv2d_module, "PAD_LIKELY_W", likely)
    c, cb = 8, 4
    A = te.placeholder((1, c // cb, h, w, cb), name="A")
    F = te.placeholder((c // cb, 1, k, k, 1, cb), name="F")
    out = nn.depthwise_conv2d_NCHWc(A, F, stride, pad, dil)

    def ref(a, fb):
        f_nchw = fb.transpose(0, 5, 1, 4, 2, 3).reshape(c, 1, k, k)
        return testing.nchw_to_nchwc(testing.depthwise_conv2d_nchw_python(
            testing.nchwc_to_nchw(a), f_nchw, stride, pad, dil), cb)

    with tvm.target.Target("llvm"):
        check([A, F], out, topi.x86.schedule_conv2d_NCHWc, ref)


def _lowered(c=64, hw=7, groups=2, dil=2, likely="after"):
    A = te.placeholder((1, c // 16, hw, hw, 16), name="A")
    W = te.placeholder((c // 16, c // groups // 16, 3, 3, 16, 16), name="W")
    old = conv2d_module.PAD_LIKELY_W
    conv2d_module.PAD_LIKELY_W = likely
    try:
        out = nn.conv2d_NCHWc(A, W, 1, dil, dil, "NCHW16c", "NCHW16c", groups=groups)
        with tvm.target.Target("llvm"):
            s = topi.x86.schedule_conv2d_NCHWc([out])
            return tvm.lower(s, [A, W, out])
    finally:
        conv2d_module.PAD_LIKELY_W = old


@pytest.mark.parametrize("likely", ["after", "both"])
def test_lowered_conv_skips_padded_rows_and_zero_taps(likely):
    """The row test is an ``if`` around the input-lane loop (not a select per multiply-add),
    no multiply of a constant zero is left (the right edge's tile; with "both" the left's
    too), and no ``if`` sits inside an innermost loop."""
    f = _lowered(likely=likely)
    text = str(f)
    assert "broadcast(0.0f, 16) *" not in text
    row_ifs, inner_ifs = [], []

    def visit(n):
        if isinstance(n, S.IfThenElse) and isinstance(n.then_case, S.For) and "ry" in str(
                n.condition):
            row_ifs.append(n)
        if isinstance(n, S.For):
            inner = []
            post_order_visit(n.body, lambda m: inner.append(m) if isinstance(
                m, (S.For, S.IfThenElse)) else None)
            if inner and not any(isinstance(m, S.For) for m in inner):
                inner_ifs.append(n)

    post_order_visit(f.body, visit)
    assert row_ifs
    assert not inner_ifs, "an if inside an innermost loop"


def test_nonfinite_weight_on_padding_only_is_skipped():
    """The documented difference (SkipPaddedTaps): a NaN weight whose taps read padding only
    (the kernel's first row for the output's first row) does not reach that output row, as in
    onnxruntime and PyTorch; numpy's sum over the zero-padded input would make it NaN. The
    other rows, whose first kernel row reads data, are NaN in both."""
    c, h, w = 4, 5, 6
    A = te.placeholder((1, 1, h, w, c), name="A")
    W = te.placeholder((1, 1, 3, 3, c, c), name="W")
    out = nn.conv2d_NCHWc(A, W, 1, 1, 1, f"NCHW{c}c", f"NCHW{c}c")
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_conv2d_NCHWc([out])
    f = tvm.build(s, [A, W, out], "llvm")
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (1, 1, h, w, c)).astype("float32")
    wt = rng.uniform(-1, 1, (1, 1, 3, 3, c, c)).astype("float32")
    wt[0, 0, 0, 1, 0, 0] = np.nan  # kernel row 0 (column 1): reads input row y - 1
    res = tvm.nd.array(np.zeros((1, 1, h, w, c), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(wt), res)
    got = res.numpy()
    assert np.isfinite(got[0, 0, 0]).all()  # row 0: the NaN weight only met padding
    assert np.isnan(got[0, 0, 1:, :, 0]).all()  # the others read it with data
    assert np.isfinite(got[0, 0, 1:, :, 1:]).all()
