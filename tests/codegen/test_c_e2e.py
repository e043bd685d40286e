"""The C backend behind ``tvm.build(s, args, target="c")``: schedules lowered by the tir pipeline,
run on random data and compared with numpy and with the LLVM backend on the same schedule."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.tir import op


def _run(s, args, arrays, target: str):
    f = tvm.build(s, args, target=target, name="kernel")
    nds = [tvm.nd.array(a) for a in arrays]
    f(*nds)
    return [x.numpy() for x in nds], f


def _check(s, args, arrays, want, out_index=-1, rtol=1e-5, atol=1e-5):
    """Build for "c" and "llvm"; both must match numpy (``want``) at ``out_index``."""
    got_c, f = _run(s, args, [a.copy() for a in arrays], "c")
    got_llvm, _ = _run(s, args, [a.copy() for a in arrays], "llvm")
    np.testing.assert_allclose(got_c[out_index], want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(got_c[out_index], got_llvm[out_index], rtol=rtol, atol=atol)
    return f


def _rand(rng, *shape, dtype="float32"):
    return rng.uniform(-1, 1, shape).astype(dtype)


def test_matmul_tiled_vectorized_parallel():
    rng = np.random.default_rng(0)
    n, m, l = 67, 45, 31  # primes-ish: no factor divides
    A, B = te.placeholder((n, l), name="A"), te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    yo, xo, yi, xi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    s[CC].compute_at(s[C], xo)
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=4)
    s[CC].reorder(ko, ki, *CC.op.axis)
    s[CC].vectorize(CC.op.axis[1])
    s[C].vectorize(xi)
    s[C].parallel(yo)
    a, b = _rand(rng, n, l), _rand(rng, l, m)
    f = _check(s, [A, B, C], [a, b, np.zeros((n, m), "float32")], a @ b, rtol=1e-4, atol=1e-4)
    src = f.get_source()
    assert "#pragma omp parallel for" in src and "kernel_parallel_body" in src


def test_symbolic_shape_elementwise_with_intrinsics():
    rng = np.random.default_rng(1)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: op.sigmoid(A[i]) * op.exp(A[i] * 0.5) + op.sqrt(op.fabs(A[i])),
                   name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    a = _rand(rng, 101)
    want = 1 / (1 + np.exp(-a)) * np.exp(a * 0.5) + np.sqrt(np.abs(a))
    _check(s, [A, B], [a, np.zeros(101, "float32")], want.astype("float32"))


def test_fuse_split_unroll_int_arithmetic():
    """Fused and split axes produce floordiv/floormod index arithmetic; int8 data wraps."""
    rng = np.random.default_rng(2)
    A = te.placeholder((13, 7), dtype="int8", name="A")
    B = te.compute((13, 7), lambda i, j: A[i, j] * A[i, j] + A[i, j] - (i * 7 + j).astype("int8"),
                   name="B")
    s = te.create_schedule(B.op)
    f = s[B].fuse(*B.op.axis)
    fo, fi = s[B].split(f, factor=5)
    s[B].unroll(fi)
    a = rng.integers(-128, 128, (13, 7), dtype=np.int8)
    idx = (np.arange(13)[:, None] * 7 + np.arange(7)).astype(np.int8)
    with np.errstate(all="ignore"):
        want = (a * a + a - idx).astype(np.int8)
    _check(s, [A, B], [a, np.zeros((13, 7), np.int8)], want)


def test_reduction_rfactor_and_max():
    rng = np.random.default_rng(3)
    n = 97
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((1,), lambda _: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ki)
    s[BF].parallel(BF.op.axis[0])
    a = _rand(rng, n)
    _check(s, [A, B], [a, np.zeros(1, "float32")], np.array([a.sum()], "float32"), rtol=1e-4)

    k2 = te.reduce_axis((0, n), name="k2")
    M = te.compute((1,), lambda _: te.max(A[k2], axis=k2), name="M")
    s2 = te.create_schedule(M.op)
    _check(s2, [A, M], [a, np.zeros(1, "float32")], np.array([a.max()], "float32"))


def test_compute_at_with_inline_and_cache_read():
    rng = np.random.default_rng(4)
    n, m = 29, 19
    A = te.placeholder((n, m), name="A")
    T = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="T")
    U = te.compute((n, m), lambda i, j: T[i, j] + 1.0, name="U")
    V = te.compute((n, m), lambda i, j: U[i, j] * U[i, j] - op.floor(T[i, j]), name="V")
    s = te.create_schedule(V.op)
    AA = s.cache_read(A, "local", [T])
    s[T].compute_inline()
    s[U].compute_at(s[V], V.op.axis[0])
    s[AA].compute_at(s[V], V.op.axis[0])
    a = _rand(rng, n, m)
    t = a * 2
    want = (t + 1) ** 2 - np.floor(t)
    _check(s, [A, V], [a, np.zeros((n, m), "float32")], want.astype("float32"))


def test_float16_and_casts_through_pipeline():
    rng = np.random.default_rng(5)
    A = te.placeholder((40,), dtype="float16", name="A")
    B = te.compute((40,), lambda i: (A[i] * A[i]).astype("float32") + A[i].astype("float32"),
                   name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    a = rng.uniform(-4, 4, 40).astype("float16")
    want = (a * a).astype("float32") + a.astype("float32")
    _check(s, [A, B], [a, np.zeros(40, "float32")], want, rtol=0, atol=0)


def test_conv2d_small():
    rng = np.random.default_rng(6)
    c_in, h, w, c_out = 3, 11, 9, 5
    data = te.placeholder((c_in, h + 2, w + 2), name="data")
    kern = te.placeholder((c_out, c_in, 3, 3), name="kern")
    rc = te.reduce_axis((0, c_in), name="rc")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    out = te.compute((c_out, h, w), lambda f, y, x: te.sum(
        data[rc, y + ry, x + rx] * kern[f, rc, ry, rx], axis=[rc, ry, rx]), name="out")
    s = te.create_schedule(out.op)
    s[out].parallel(out.op.axis[0])
    xo, xi = s[out].split(out.op.axis[2], factor=4)
    s[out].unroll(xi)
    d, kk = _rand(rng, c_in, h + 2, w + 2), _rand(rng, c_out, c_in, 3, 3)
    want = np.zeros((c_out, h, w), "float32")
    for ky in range(3):
        for kx in range(3):
            want += np.einsum("chw,fc->fhw", d[:, ky:ky + h, kx:kx + w], kk[:, :, ky, kx])
    _check(s, [data, kern, out], [d, kk, want * 0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_floordiv_floormod_of_data(dtype):
    rng = np.random.default_rng(7)
    A = te.placeholder((50,), dtype=dtype, name="A")
    B = te.compute((50,), lambda i: op.floordiv(A[i], 7) * 100 + op.floormod(A[i], 7), name="B")
    s = te.create_schedule(B.op)
    lo = 0 if dtype == "uint8" else -100
    a = rng.integers(lo, 100, 50).astype(dtype)
    want = (np.floor_divide(a, 7) * 100 + np.mod(a, 7)).astype(dtype)
    _check(s, [A, B], [a, np.zeros(50, dtype)], want)
