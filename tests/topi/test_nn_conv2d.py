"""topi.nn convolutions (NCHW, NCHWc, depthwise, grouped, transposed) with their x86 schedules
against the numpy references; bad arguments raise clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from tvmpy import te, topi
from tvmpy.topi import nn, testing

from .nn_util import check

# (N, C, H, W, OC, K, stride, padding, dilation)
CONV_CASES = [
    (1, 3, 11, 13, 13, 3, 1, 1, 1),          # odd sizes, OC not a multiple of the tile
    (2, 5, 9, 17, 7, 3, 2, (1, 0, 2, 1), 1),  # batch 2, stride 2, asymmetric padding
    (1, 4, 15, 10, 16, 3, 1, 2, 2),          # dilation 2
    (2, 3, 8, 7, 5, 1, (2, 1), 0, 1),         # 1x1, per-axis strides
    (1, 2, 37, 41, 9, 5, 3, "SAME", 1),        # wide rows (two vector tiles + tail), "SAME"
    (1, 3, 7, 7, 4, (3, 2), 1, "VALID", (1, 2)),  # rectangular kernel
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_nchw(case):
    n, c, h, w, oc, k, stride, pad, dil = case
    kh, kw = k if isinstance(k, tuple) else (k, k)
    A = te.placeholder((n, c, h, w), name="A")
    W = te.placeholder((oc, c, kh, kw), name="W")
    out = nn.conv2d_nchw(A, W, stride, pad, dil)
    check([A, W], out, topi.x86.schedule_conv2d_nchw,
          lambda a, b: testing.conv2d_nchw_python(a, b, stride, pad, dil))


def test_conv2d_nchw_c_target_and_conv2d_alias():
    A = te.placeholder((2, 3, 6, 5), name="A")
    W = te.placeholder((5, 3, 3, 3), name="W")
    out = nn.conv2d(A, W, 2, (1, 1, 0, 2), 1, layout="NCHW")
    check([A, W], out, topi.x86.schedule_conv2d_nchw,
          lambda a, b: testing.conv2d_nchw_python(a, b, 2, (1, 1, 0, 2), 1), target="c")


def test_conv2d_fused_relu():
    A = te.placeholder((1, 4, 9, 9), name="A")
    W = te.placeholder((6, 4, 3, 3), name="W")
    out = topi.relu(nn.conv2d_nchw(A, W, 1, 1, 1))
    check([A, W], out, topi.x86.schedule_conv2d_nchw,
          lambda a, b: np.maximum(testing.conv2d_nchw_python(a, b, 1, 1, 1), 0))


# (N, C, H, W, OC, K, stride, padding, ic_bn, oc_bn)
NCHWC_CASES = [
    (1, 6, 11, 13, 12, 3, 1, 1, 3, 4),
    (2, 4, 9, 17, 16, 3, 2, (1, 0, 2, 1), 2, 16),
    (1, 8, 7, 23, 8, 1, 1, 0, 8, 8),
]


@pytest.mark.parametrize("case", NCHWC_CASES)
def test_conv2d_NCHWc(case):
    n, c, h, w, oc, k, stride, pad, icb, ocb = case
    A = te.placeholder((n, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="W")
    out = nn.conv2d_NCHWc(A, W, stride, pad, 1, f"NCHW{icb}c", f"NCHW{ocb}c")
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c, k, k)).astype("float32")
    ab, wb = testing.nchw_to_nchwc(a, icb), testing.oihw_to_kcrsck(wt, icb, ocb)
    res = check([A, W], out, topi.x86.schedule_conv2d_NCHWc,
                lambda x, y: testing.conv2d_NCHWc_python(x, y, stride, pad), arrays=[ab, wb])
    # the blocked result is the NCHW convolution, re-laid out
    np.testing.assert_allclose(testing.nchwc_to_nchw(res),
                               testing.conv2d_nchw_python(a, wt, stride, pad), rtol=1e-4,
                               atol=1e-4)


def test_conv2d_NCHWc_c_target():
    A = te.placeholder((1, 2, 5, 6, 2), name="A")
    W = te.placeholder((2, 2, 3, 3, 2, 4), name="W")
    out = nn.conv2d_NCHWc(A, W, 1, 1, 1)
    check([A, W], out, topi.x86.schedule_conv2d_NCHWc,
          lambda x, y: testing.conv2d_NCHWc_python(x, y, 1, 1), target="c")


def test_conv2d_infer_layout():
    assert nn.conv2d_infer_layout(3, 64) == (3, 16)
    assert nn.conv2d_infer_layout(24, 20) == (12, 10)


@pytest.mark.parametrize("n,c,h,w,mult,k,stride,pad,dil", [
    (1, 5, 11, 13, 1, 3, 1, 1, 1),
    (2, 3, 12, 9, 2, 3, 2, (1, 0, 2, 1), 1),
    (1, 4, 20, 19, 1, 5, 1, 4, 2),
])
def test_depthwise_conv2d_nchw(n, c, h, w, mult, k, stride, pad, dil):
    A = te.placeholder((n, c, h, w), name="A")
    W = te.placeholder((c, mult, k, k), name="W")
    out = nn.depthwise_conv2d_nchw(A, W, stride, pad, dil)
    check([A, W], out, topi.x86.schedule_depthwise_conv2d_nchw,
          lambda a, b: testing.depthwise_conv2d_nchw_python(a, b, stride, pad, dil))


@pytest.mark.parametrize("n,c,h,w,oc,groups,stride,pad,target", [
    (1, 6, 9, 10, 9, 3, 1, 1, "llvm"),
    (2, 4, 11, 7, 6, 2, 2, (0, 1, 1, 0), "llvm"),
    (1, 4, 5, 6, 4, 2, 1, 1, "c"),
])
def test_group_conv2d_nchw(n, c, h, w, oc, groups, stride, pad, target):
    A = te.placeholder((n, c, h, w), name="A")
    W = te.placeholder((oc, c // groups, 3, 3), name="W")
    out = nn.group_conv2d_nchw(A, W, stride, pad, 1, groups)
    check([A, W], out, topi.x86.schedule_group_conv2d_nchw,
          lambda a, b: testing.group_conv2d_nchw_python(a, b, stride, pad, 1, groups),
          target=target)


@pytest.mark.parametrize("n,c,h,w,oc,k,stride,pad,opad,target", [
    (2, 5, 7, 6, 3, 3, 2, (1, 1, 0, 2), (1, 0), "llvm"),
    (1, 3, 5, 5, 4, 4, 2, 1, 0, "llvm"),
    (1, 4, 6, 7, 5, 3, 1, 0, 0, "llvm"),
    (1, 2, 4, 3, 3, 3, 3, 1, 2, "c"),
])
def test_conv2d_transpose_nchw(n, c, h, w, oc, k, stride, pad, opad, target):
    A = te.placeholder((n, c, h, w), name="A")
    W = te.placeholder((c, oc, k, k), name="W")
    out = nn.conv2d_transpose_nchw(A, W, stride, pad, "float32", opad)
    check([A, W], out, topi.x86.schedule_conv2d_transpose_nchw,
          lambda a, b: testing.conv2d_transpose_nchw_python(a, b, stride, pad, opad),
          target=target)


def test_references_agree_with_direct_loops():
    """The einsum-based reference against a naive loop (the reference itself is tested)."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (1, 2, 5, 6)).astype("float32")
    w = rng.uniform(-1, 1, (3, 2, 3, 3)).astype("float32")
    ap = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    naive = np.zeros((1, 3, 3, 3))
    for o in range(3):
        for y in range(3):
            for x in range(3):
                naive[0, o, y, x] = (ap[0, :, 2 * y:2 * y + 3, 2 * x:2 * x + 3] * w[o]).sum()
    np.testing.assert_allclose(testing.conv2d_nchw_python(a, w, 2, 1), naive, rtol=1e-5)
    # transposed convolution is the adjoint of the convolution: <conv(x), y> == <x, convT(y)>
    y = rng.uniform(-1, 1, (1, 3, 3, 3))
    lhs = (testing.conv2d_nchw_python(a, w, 2, 1).astype(np.float64) * y).sum()
    rhs = (a * testing.conv2d_transpose_nchw_python(y, w.astype(np.float64), 2, 1, (0, 1))).sum()
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5)


def test_conv_errors():
    A = te.placeholder((1, 3, 8, 8), name="A")
    with pytest.raises(ValueError, match="Filter expects 4 input channels.*Input has 3"):
        nn.conv2d_nchw(A, te.placeholder((5, 4, 3, 3), name="W"), 1, 1, 1)
    with pytest.raises(ValueError, match="Input must be 4-D"):
        nn.conv2d_nchw(te.placeholder((3, 8, 8), name="A"), te.placeholder((5, 3, 3, 3)), 1, 1)
    with pytest.raises(ValueError, match="larger than the padded input"):
        nn.conv2d_nchw(A, te.placeholder((5, 3, 9, 9), name="W"), 1, 0, 1)
    with pytest.raises(ValueError, match="stride must be >= 1"):
        nn.conv2d_nchw(A, te.placeholder((5, 3, 3, 3), name="W"), 0, 1, 1)
    with pytest.raises(ValueError, match="divisible by groups=2"):
        nn.group_conv2d_nchw(A, te.placeholder((4, 1, 3, 3), name="W"), 1, 1, 1, 2)
    with pytest.raises(ValueError, match="Filter has 4 channels, Input has 3"):
        nn.depthwise_conv2d_nchw(A, te.placeholder((4, 1, 3, 3), name="W"), 1, 1)
    with pytest.raises(ValueError, match="output_padding"):
        nn.conv2d_transpose_nchw(A, te.placeholder((3, 2, 3, 3), name="W"), 2, 1, None, 2)
    with pytest.raises(ValueError, match="Filter has 4 input channels"):
        nn.conv2d_transpose_nchw(A, te.placeholder((4, 2, 3, 3), name="W"), 2, 1)
    with pytest.raises(ValueError, match="kernel expects 2x4 input channels, data has 2x2"):
        nn.conv2d_NCHWc(te.placeholder((1, 2, 5, 5, 2)), te.placeholder((1, 2, 3, 3, 4, 8)),
                        1, 1, 1)
    with pytest.raises(ValueError, match="does not match the block size"):
        nn.conv2d_NCHWc(te.placeholder((1, 2, 5, 5, 2)), te.placeholder((1, 2, 3, 3, 2, 8)),
                        1, 1, 1, layout="NCHW4c")
    with pytest.raises(ValueError, match="layout 'NHWC' is not supported"):
        nn.conv2d(A, te.placeholder((5, 3, 3, 3)), 1, 1, 1, layout="NHWC")
    with pytest.raises(ValueError, match="padding must have 1, 2 or 4 values"):
        nn.conv2d_nchw(A, te.placeholder((5, 3, 3, 3)), 1, (1, 1, 1), 1)
    with pytest.raises(ValueError, match="no conv2d_nchw stage"):
        topi.x86.schedule_conv2d_nchw([topi.relu(A)])


def test_conv2d_bias_relu_epilogues_fuse():
    """conv + broadcast bias + relu: the x86 schedules keep the conv in registers and write the
    fused epilogue once (NCHW and NCHWc)."""
    A = te.placeholder((1, 4, 9, 11), name="A")
    W = te.placeholder((6, 4, 3, 3), name="W")
    b = te.placeholder((6, 1, 1), name="b")
    out = topi.relu(topi.add(nn.conv2d_nchw(A, W, 1, 1, 1), b))
    check([A, W, b], out, topi.x86.schedule_conv2d_nchw,
          lambda a, w, bb: np.maximum(testing.conv2d_nchw_python(a, w, 1, 1, 1) + bb, 0))
    Ab = te.placeholder((1, 2, 9, 11, 2), name="A")
    Wb = te.placeholder((2, 2, 3, 3, 2, 4), name="W")
    bb = te.placeholder((2, 1, 1, 4), name="b")
    out = topi.relu(topi.add(nn.conv2d_NCHWc(Ab, Wb, 2, 1, 1), bb))
    check([Ab, Wb, bb], out, topi.x86.schedule_conv2d_NCHWc,
          lambda a, w, bias: np.maximum(testing.conv2d_NCHWc_python(a, w, 2, 1) + bias, 0))


def test_conv2d_and_dense_on_the_loop_interpreter():
    """The same x86 schedules, run by the loop-IR interpreter (an oracle independent of
    codegen)."""
    A = te.placeholder((1, 2, 5, 4), name="A")
    W = te.placeholder((3, 2, 3, 3), name="W")
    check([A, W], nn.conv2d_nchw(A, W, 2, (1, 0, 1, 1), 1), topi.x86.schedule_conv2d_nchw,
          lambda a, w: testing.conv2d_nchw_python(a, w, 2, (1, 0, 1, 1), 1), target="interp")
    X = te.placeholder((2, 32), name="X")
    V = te.placeholder((3, 32), name="V")
    check([X, V], nn.dense(X, V), topi.x86.schedule_dense, testing.dense_python,
          target="interp")


def test_schedules_with_a_reshaping_epilogue():
    """An injective consumer of another shape (flatten/reshape): the op is computed whole,
    then the consumer reads it."""
    A = te.placeholder((1, 3, 6, 5), name="A")
    W = te.placeholder((4, 3, 3, 3), name="W")
    out = topi.reshape(topi.relu(nn.conv2d_nchw(A, W, 1, 1, 1)), (1, 120))
    check([A, W], out, topi.x86.schedule_conv2d_nchw,
          lambda a, w: np.maximum(testing.conv2d_nchw_python(a, w, 1, 1, 1), 0).reshape(1, 120))
    X = te.placeholder((2, 32), name="X")
    V = te.placeholder((6, 32), name="V")
    out = topi.reshape(nn.dense(X, V), (3, 4))
    check([X, V], out, topi.x86.schedule_dense,
          lambda x, v: testing.dense_python(x, v).reshape(3, 4))
    out = topi.reshape(nn.global_pool(A, "avg"), (1, 3))
    check([A], out, topi.x86.schedule_global_pool,
          lambda a: testing.global_pool_python(a, "avg").reshape(1, 3))
    out = topi.reshape(nn.pool2d(A, 2, 2, 1, 0, "max"), (3, 6))
    check([A], out, topi.x86.schedule_pool,
          lambda a: testing.pool2d_python(a, 2, 2, 1, 0, "max").reshape(3, 6))


@pytest.mark.parametrize("stride,pad,target", [(1, 1, "llvm"), (2, (1, 0, 2, 1), "llvm"),
                                               (1, 0, "c")])
def test_depthwise_conv2d_NCHWc(stride, pad, target):
    n, c, h, w, cb = 2, 8, 9, 11, 4
    A = te.placeholder((n, c // cb, h, w, cb), name="A")
    W = te.placeholder((c // cb, 1, 3, 3, 1, cb), name="W")
    out = nn.depthwise_conv2d_NCHWc(A, W, stride, pad, 1, f"NCHW{cb}c", f"NCHW{cb}c")

    def ref(a, wb):
        w_nchw = wb.transpose(0, 5, 1, 4, 2, 3).reshape(c, 1, 3, 3)
        return testing.nchw_to_nchwc(testing.depthwise_conv2d_nchw_python(
            testing.nchwc_to_nchw(a), w_nchw, stride, pad), cb)

    check([A, W], out, topi.x86.schedule_depthwise_conv2d_NCHWc, ref, target=target)
    with pytest.raises(ValueError, match="does not match Input channels"):
        nn.depthwise_conv2d_NCHWc(A, te.placeholder((2, 1, 3, 3, 1, 8)), 1, 1, 1)


def test_int8_inputs_int32_accumulation():
    """out_dtype widens before the multiply: int8 data and weights, exact int32 results."""
    rng = np.random.default_rng(7)
    A = te.placeholder((1, 3, 7, 9), "int8", name="A")
    W = te.placeholder((5, 3, 3, 3), "int8", name="W")
    a = rng.integers(-100, 100, (1, 3, 7, 9)).astype("int8")
    w = rng.integers(-100, 100, (5, 3, 3, 3)).astype("int8")
    res = check([A, W], nn.conv2d_nchw(A, W, 1, 1, 1, "int32"), topi.x86.schedule_conv2d_nchw,
                lambda x, y: testing.conv2d_nchw_python(x.astype("int64"), y.astype("int64"), 1,
                                                        1, 1).astype("int32"),
                arrays=[a, w], rtol=0, atol=0)
    assert np.abs(res).max() > 127 * 4  # really accumulated wider than int8
    X = te.placeholder((3, 40), "int8", name="X")
    V = te.placeholder((7, 40), "int8", name="V")
    x = rng.integers(-100, 100, (3, 40)).astype("int8")
    v = rng.integers(-100, 100, (7, 40)).astype("int8")
    check([X, V], nn.dense(X, V, out_dtype="int32"), topi.x86.schedule_dense,
          lambda p, q: (p.astype(np.int64) @ q.astype(np.int64).T).astype("int32"),
          arrays=[x, v], rtol=0, atol=0)


def test_tvm_spellings_under_nn():
    assert nn.relu is topi.relu and nn.leaky_relu is topi.leaky_relu
    assert nn.prelu is topi.prelu and nn.batch_flatten is topi.flatten


# (N, C, H, W, OC, K, stride, padding, ic_bn, oc_bn): data given in plain NCHW (layout="NCHW")
NCHWC_PLAIN_CASES = [
    (1, 3, 17, 17, 24, 3, 1, 1, 3, 12),
    (2, 57, 13, 13, 64, 3, 2, 1, 3, 16),        # batch 2, stride 2, block 3 of 57
    (1, 1, 7, 7, 16, 7, 2, 3, 1, 16),           # one channel, 7x7 window (padded copy)
    (1, 24, 9, 11, 8, 1, 2, 0, 12, 8),          # 1x1 stride 2
    (1, 16, 13, 13, 32, 3, 1, (1, 0, 2, 1), 16, 16),
]


@pytest.mark.parametrize("case", NCHWC_PLAIN_CASES)
def test_conv2d_NCHWc_reads_nchw_data(case):
    """layout="NCHW": the blocked convolution reads plain data in place (channel ico*ic_bn+ici);
    same result as the NCHW convolution, re-laid out."""
    n, c, h, w, oc, k, stride, pad, icb, ocb = case
    A = te.placeholder((n, c, h, w), name="A")
    W = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="W")
    out = nn.conv2d_NCHWc(A, W, stride, pad, 1, "NCHW", f"NCHW{ocb}c")
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c, k, k)).astype("float32")
    wb = testing.oihw_to_kcrsck(wt, icb, ocb)
    res = check([A, W], out, topi.x86.schedule_conv2d_NCHWc,
                lambda x, y: testing.nchw_to_nchwc(
                    testing.conv2d_nchw_python(x, wt, stride, pad), ocb), arrays=[a, wb])
    assert res.shape[1:] == (oc // ocb,) + res.shape[2:4] + (ocb,)


def test_conv2d_NCHWc_nchw_data_errors():
    with pytest.raises(ValueError, match="do not split into the kernel's blocks of 4"):
        nn.conv2d_NCHWc(te.placeholder((1, 6, 5, 5)), te.placeholder((1, 2, 3, 3, 4, 8)),
                        1, 1, 1, "NCHW")
    with pytest.raises(ValueError, match="data"):
        nn.conv2d_NCHWc(te.placeholder((1, 2, 5, 5, 4)), te.placeholder((1, 2, 3, 3, 4, 8)),
                        1, 1, 1, "NCHW")
