"""Features of lowered loop programs (tvmpy.autotvm.feature)."""

from __future__ import annotations

import numpy as np
import pytest

from tvmpy import te
from tvmpy.autotvm import feature as F


def _matmul(n: int, l: int, m: int, ty: int, tx: int, vec: bool = False, par: bool = False,
            unroll: bool = False, order: str = "k_outer"):
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    yo, yi = s[C].split(y, ty)
    xo, xi = s[C].split(x, tx)
    if order == "k_outer":
        s[C].reorder(yo, xo, k, yi, xi)
    else:
        s[C].reorder(yo, xo, yi, xi, k)
    if vec:
        s[C].vectorize(xi)
    if par:
        s[C].parallel(yo)
    if unroll:
        s[C].unroll(yi)
    return s, [A, B, C]


def test_fixed_length_and_deterministic():
    rng = np.random.default_rng(1)
    for _ in range(4):
        n, l, m = (int(v) for v in rng.integers(5, 70, size=3))
        ty, tx = int(rng.integers(1, 9)), int(rng.integers(1, 17))
        v1 = F.get_itervar_feature_flatten(*_matmul(n, l, m, ty, tx))
        v2 = F.get_itervar_feature_flatten(*_matmul(n, l, m, ty, tx))
        assert v1.shape == (F.itervar_feature_length(),) and v1.dtype == np.float32
        assert np.array_equal(v1, v2)
        assert np.isfinite(v1).all() and v1.any()
        c = F.get_curve_feature(*_matmul(n, l, m, ty, tx))
        assert c.shape == (F.curve_feature_length(),)
        assert np.array_equal(c, F.get_curve_feature(*_matmul(n, l, m, ty, tx)))
    assert len(F.get_flatten_name()) == F.itervar_feature_length()


def test_features_differ_with_tiling_and_annotations():
    base = F.get_itervar_feature_flatten(*_matmul(64, 48, 96, 8, 16))
    others = [
        F.get_itervar_feature_flatten(*_matmul(64, 48, 96, 4, 16)),
        F.get_itervar_feature_flatten(*_matmul(64, 48, 96, 8, 32)),
        F.get_itervar_feature_flatten(*_matmul(64, 48, 96, 8, 16, vec=True)),
        F.get_itervar_feature_flatten(*_matmul(64, 48, 96, 8, 16, par=True)),
        F.get_itervar_feature_flatten(*_matmul(64, 48, 96, 8, 16, order="k_inner")),
    ]
    for o in others:
        assert not np.array_equal(base, o)
    assert not np.array_equal(F.get_curve_feature(*_matmul(64, 48, 96, 8, 16)),
                              F.get_curve_feature(*_matmul(64, 48, 96, 2, 2)))


def test_itervar_values_of_a_gemm():
    """The hot path of a tiled GEMM: innermost first, with the exact strides and counts."""
    s, args = _matmul(64, 32, 48, 4, 16, vec=True, par=True)
    levels = F.get_itervar_feature(s, args)
    assert [lv["extent"] for lv in levels] == [16, 4, 32, 3, 16]  # xi, yi, k, xo, yo
    inner, yi, k, xo, yo = levels
    assert inner["vectorized"] == 1 and yo["parallel"] == 1 and k["serial"] == 1
    assert [b["name"] for b in inner["buffers"]] == ["C", "A", "B"]
    c, a, b = k["buffers"]
    # strides w.r.t. k: C does not move, A moves by 1, B by one row (48)
    assert (c["stride"], a["stride"], b["stride"]) == (0, 1, 48)
    # inside one k loop: 32*4*16 multiply-adds, A touches 4x32 floats, B 32x16
    assert k["mul"] == 32 * 4 * 16 and k["add"] == 32 * 4 * 16
    assert a["bytes"] == 4 * 32 * 4 and b["bytes"] == 32 * 16 * 4
    assert a["reuse"] == pytest.approx(32 * 4 * 16 / (4 * 32))
    assert yo["topdown"] == 16 and yo["bottomup"] == 64 * 48 * 32
    assert [lv["depth"] for lv in levels] == [4, 3, 2, 1, 0]


def test_math_calls_and_elementwise():
    A = te.placeholder((37, 19), name="A")
    B = te.compute((37, 19), lambda i, j: te.exp(A[i, j]) / (A[i, j] + 1.0), name="B")
    s = te.create_schedule(B.op)
    levels = F.get_itervar_feature(s, [A, B])
    assert levels[0]["extent"] == 19 and levels[0]["call"] == 19 and levels[0]["div"] == 19
    v = F.get_itervar_feature_flatten(s, [A, B])
    assert v.shape == (F.itervar_feature_length(),)
    raw = F.get_itervar_feature_flatten(s, [A, B], take_log=False)
    assert raw[0] == 19 and v[0] == pytest.approx(np.log2(20))


def test_bad_input():
    with pytest.raises(TypeError):
        F.func_itervar_feature("not a function")
    with pytest.raises(TypeError):
        F.get_itervar_feature_flatten(object(), [])
