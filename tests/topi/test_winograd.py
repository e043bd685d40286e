"""Winograd F(m x m, 3x3) convolution: the transform matrices (exact identity), the weight
transform (te vs numpy), the compute with the x86 schedule and random AutoTVM configs against
numpy's direct convolution on awkward shapes (odd channel blocks, sizes no tile divides,
asymmetric and zero padding, size-1 images), a fused epilogue, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te, topi
from tvmpy.topi import testing
from tvmpy.topi.nn import winograd as W
from tvmpy.topi.x86.conv2d_winograd import TASK, schedule_conv2d_winograd_nchwc


@pytest.mark.parametrize("m", W.winograd_tile_sizes())
def test_matrices_compute_the_correlation(m):
    at, bt, g = W.winograd_matrices(m)
    assert at.shape == (m, m + 2) and bt.shape == (m + 2, m + 2) and g.shape == (m + 2, 3)
    rng = np.random.default_rng(m)
    for _ in range(5):
        d, k = rng.standard_normal(m + 2), rng.standard_normal(3)
        y = at @ ((g @ k) * (bt @ d))
        want = np.array([d[i:i + 3] @ k for i in range(m)])
        np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


def test_f4x4_matrices_of_the_points_0_1_m1_half_m2():
    at, bt, g = W.winograd_matrices(4)
    assert at[1].tolist() == [0, 1, -1, 0.5, -2, 0]
    assert at[3].tolist() == [0, 1, -1, 0.125, -8, 1]
    assert bt[0].tolist() == [1, -1.5, -2, 1.5, 1, 0]
    # the bilinear identity: sum_j A^T[i, j] G[j, k] B^T[j, l] = [l == i + k]
    ident = np.einsum("ij,jk,jl->ikl", at, g, bt)
    want = np.zeros_like(ident)
    for i in range(4):
        for k in range(3):
            want[i, k, i + k] = 1
    np.testing.assert_allclose(ident, want, atol=1e-12)


@pytest.mark.parametrize("m", [1, 7, 0])
def test_unsupported_tile_size(m):
    with pytest.raises(ValueError, match="not supported"):
        W.winograd_matrices(m)


@pytest.mark.parametrize("m,oc_bn", [(2, 4), (4, 8), (6, 16)])
def test_weight_transform_te_matches_numpy(m, oc_bn):
    rng = np.random.default_rng(1)
    k = rng.uniform(-1, 1, (16, 5, 3, 3)).astype("float32")
    K = te.placeholder(k.shape, name="K")
    U = W.conv2d_winograd_weight_transform(K, m, oc_bn)
    f = tvm.build(te.create_schedule(U.op), [K, U], "llvm")
    u = tvm.nd.empty([int(d) for d in U.shape])
    f(tvm.nd.array(k), u)
    np.testing.assert_allclose(u.numpy(), W.winograd_weight_transform_np(k, m, oc_bn),
                               rtol=1e-5, atol=1e-6)


def _conv(c, h, w, oc, pad, m, icb, ocb, cfg_index=None, epilogue=None, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    k = rng.uniform(-1, 1, (oc, c, 3, 3)).astype("float32")
    A = te.placeholder((1, c // icb, h, w, icb), name="A")
    u = W.winograd_weight_transform_np(k, m, ocb)
    U = te.placeholder(u.shape, name="U")
    if cfg_index is None:
        out = W.conv2d_winograd_nchwc(A, U, pad, m)
        if epilogue is not None:
            out = epilogue(out)
        s = schedule_conv2d_winograd_nchwc([out])
        args = [A, U, out]
    else:
        task = autotvm.task.create(TASK, (A, U, pad, "float32"), "llvm")
        s, args = task.instantiate(task.config_space.get(cfg_index % len(task.config_space)))
        out = args[-1]
    f = tvm.build(s, args, "llvm")
    o = tvm.nd.array(np.full([int(d) for d in out.shape], np.nan, "float32"))
    f(tvm.nd.array(testing.nchw_to_nchwc(x, icb)), tvm.nd.array(u), o)
    pt, pl, pb, pr = topi.nn.get_pad_tuple(pad, (3, 3))
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    want = testing.conv2d_nchw_python(xp, k, 1, 0)
    return testing.nchwc_to_nchw(o.numpy()), want


# (C, H, W, OC, padding, m, ic_bn, oc_bn)
SHAPES = [
    (16, 14, 14, 32, 1, 4, 16, 16),  # a ResNet-like layer, tiles divide the output
    (8, 9, 11, 16, 1, 4, 4, 8),  # no tile divides 9 x 11
    (3, 7, 5, 8, 0, 2, 3, 4),  # 3-channel block, no padding, 5 x 3 output
    (6, 13, 13, 12, (1, 0, 2, 1), 6, 3, 6),  # asymmetric padding, F(6x6)
    (4, 1, 1, 4, 1, 4, 4, 4),  # a 1x1 image (one tile, mostly padding)
    (5, 17, 3, 10, 1, 3, 5, 5),  # prime sizes, F(3x3)
]


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_default_schedule_matches_direct_convolution(shape):
    got, want = _conv(*shape)
    tol = 1e-4 if shape[5] <= 4 else 5e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("shape", SHAPES[:4], ids=[str(s) for s in SHAPES[:4]])
def test_random_tuning_configs_compute_the_convolution(shape):
    for i in (0, 7, 23, 101):
        got, want = _conv(*shape, cfg_index=i, seed=i)
        tol = 1e-4 if shape[5] <= 4 else 5e-4
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_fused_epilogue_runs_on_the_tile():
    got, want = _conv(16, 10, 10, 16, 1, 4, 16, 16, epilogue=topi.nn.relu)
    np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def test_template_space_and_flops():
    A = te.placeholder((1, 4, 28, 28, 16), name="A")
    U = te.placeholder((6, 6, 8, 64, 16), name="U")
    task = autotvm.task.create(TASK, (A, U, (1, 1, 1, 1), "float32"), "llvm")
    assert set(task.config_space.space_map) == {"tile_p", "tile_oc", "unroll_k", "p_outer"}
    assert len(task.config_space) > 50
    # the direct convolution's FLOPs: GFLOP/s comparable with conv2d_NCHWc.x86
    assert task.flop == 2 * 128 * 64 * 9 * 28 * 28


def test_errors():
    A = te.placeholder((1, 1, 8, 8, 4), name="A")
    with pytest.raises(ValueError, match="6x6"):
        W.conv2d_winograd_nchwc(A, te.placeholder((4, 4, 1, 4, 4), name="U"), 1, 4)
    with pytest.raises(ValueError, match="input channels"):
        W.conv2d_winograd_nchwc(A, te.placeholder((6, 6, 1, 8, 4), name="U"), 1, 4)
    with pytest.raises(ValueError, match="3x3"):
        W.conv2d_winograd_weight_transform(te.placeholder((4, 4, 5, 5), name="K"), 4, 4)
    with pytest.raises(ValueError, match="multiple"):
        W.winograd_weight_transform_np(np.ones((6, 4, 3, 3), "float32"), 4, 4)
    with pytest.raises(ValueError, match="larger than"):
        W.conv2d_winograd_nchwc(te.placeholder((1, 1, 1, 1, 4), name="B"),
                                te.placeholder((6, 6, 1, 4, 4), name="U"), 0, 4)


@pytest.mark.parametrize("l2,want", [(1024, True), (1 << 30, False)])
def test_products_prefetch_a_weight_beyond_l2(monkeypatch, l2, want):
    """The products prefetch the transformed weight's stream when it takes at least half of L2
    (here a small L2 patched in), and compute the same convolution either way (prime sizes,
    a 5-channel block, asymmetric padding)."""
    from tvmpy.target.cpu_features import CacheSizes
    from tvmpy.topi.x86 import conv2d_nchwc

    monkeypatch.setattr(conv2d_nchwc, "_caches", lambda: CacheSizes(l1d=512, l2=l2))
    rng = np.random.default_rng(3)
    c, h, w, oc, pad, icb, ocb = 10, 7, 11, 15, (1, 0, 2, 1), 5, 5
    x = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    k = rng.uniform(-1, 1, (oc, c, 3, 3)).astype("float32")
    A = te.placeholder((1, c // icb, h, w, icb), name="A")
    u = W.winograd_weight_transform_np(k, 4, ocb)
    U = te.placeholder(u.shape, name="U")
    out = topi.nn.relu(W.conv2d_winograd_nchwc(A, U, pad, 4))
    s = schedule_conv2d_winograd_nchwc([out])
    assert ("prefetch" in str(tvm.lower(s, [A, U, out]))) == want
    f = tvm.build(s, [A, U, out], "llvm")
    o = tvm.nd.array(np.full([int(d) for d in out.shape], np.nan, "float32"))
    f(tvm.nd.array(testing.nchw_to_nchwc(x, icb)), tvm.nd.array(u), o)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 2), (0, 1)))
    want_o = np.maximum(testing.conv2d_nchw_python(xp, k, 1, 0), 0)
    np.testing.assert_allclose(testing.nchwc_to_nchw(o.numpy()), want_o, rtol=1e-4, atol=1e-4)
