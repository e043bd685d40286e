"""The steps of TVM's tutorial "How to optimize GEMM on CPU" on tvmpy: the default schedule,
blocking, vectorization, loop permutation, array packing, a write cache (cache_write) and
parallelization. Each version checks the loop nest tvm.lower gives it and matches numpy on a
small GEMM whose M and K the tiles do not divide."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.testing
from tvmpy import te

BN = 32
# numerics: M and K not multiples of the tiles (N whole packed blocks of BN columns); the loop
# nests are checked on sizes the tiles divide, where each version is one perfect nest
AWKWARD, EVEN = (53, 71, 64), (64, 64, 64)
TARGET = tvm.target.Target(target="llvm", host="llvm")
RNG = np.random.default_rng(2612)
PAR = tvm.tir.ForKind.PARALLEL


def _loops(func):
    """(name, kind) of each loop, outermost first; vectorized loops that lowering turned into
    ramps are gone, so their absence plus a ramp marks vectorization."""
    out = []
    # pre-order: a loop before the loops inside it, siblings in program order
    tvm.tir.stmt_functor.ir_transform(
        func.body, lambda s: out.append((s.loop_var.name, s.kind)), None, ["tir.For"])
    return out


def _allocs(func):
    out = []
    tvm.tir.stmt_functor.post_order_visit(
        func.body,
        lambda s: out.append(s.buffer_var.name) if isinstance(s, tvm.tir.Allocate) else None)
    return out


def _matmul(M, K, N):
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    return A, B, C


def _packed_matmul(M, K, N):
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    # N / BN: the tutorial's spelling, a float of integral value (a whole number of blocks)
    packedB = te.compute((N / BN, K, BN), lambda x, y, z: B[y, x * BN + z], name="packedB")
    C = te.compute((M, N), lambda x, y: te.sum(
        A[x, k] * packedB[y // BN, k, tvm.tir.indexmod(y, BN)], axis=k), name="C")
    return A, B, C, packedB


def _blocked(C, order):
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=4)
    axes = {"xo": xo, "yo": yo, "xi": xi, "yi": yi, "ko": ko, "ki": ki}
    s[C].reorder(*(axes[a] for a in order))
    return s, axes


def _pack_schedule(s, packedB):
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)


def default(dims):
    A, B, C = _matmul(*dims)
    return te.create_schedule(C.op), [A, B, C]


def blocking(dims):
    A, B, C = _matmul(*dims)
    s, _ = _blocked(C, ["xo", "yo", "ko", "ki", "xi", "yi"])
    return s, [A, B, C]


def vectorization(dims):
    A, B, C = _matmul(*dims)
    s, axes = _blocked(C, ["xo", "yo", "ko", "ki", "xi", "yi"])
    s[C].vectorize(axes["yi"])
    return s, [A, B, C]


def loop_permutation(dims):
    A, B, C = _matmul(*dims)
    s, axes = _blocked(C, ["xo", "yo", "ko", "xi", "ki", "yi"])
    s[C].vectorize(axes["yi"])
    return s, [A, B, C]


def array_packing(dims):
    A, B, C, packedB = _packed_matmul(*dims)
    s, axes = _blocked(C, ["xo", "yo", "ko", "xi", "ki", "yi"])
    s[C].vectorize(axes["yi"])
    _pack_schedule(s, packedB)
    return s, [A, B, C]


def write_cache(dims, parallel=False):
    A, B, C, packedB = _packed_matmul(*dims)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    assert CC.op.name == "C.global"
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    _pack_schedule(s, packedB)
    if parallel:
        s[C].parallel(xo)
    return s, [A, B, C]


def parallel(dims):
    return write_cache(dims, parallel=True)


VERSIONS = [default, blocking, vectorization, loop_permutation, array_packing, write_cache,
            parallel]


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v.__name__)
def test_version_matches_numpy(version):
    M, K, N = AWKWARD
    a = RNG.uniform(size=(M, K)).astype("float32")
    b = RNG.uniform(size=(K, N)).astype("float32")
    s, args = version(AWKWARD)
    dev = tvm.device(TARGET.kind.name, 0)
    func = tvm.build(s, args, target=TARGET, name="mmult")
    a_nd, b_nd = tvm.nd.array(a, dev), tvm.nd.array(b, dev)
    c = tvm.nd.array(np.full((M, N), np.nan, "float32"), dev)
    func(a_nd, b_nd, c)
    tvm.testing.assert_allclose(c.numpy(), a.astype("float64") @ b.astype("float64"), rtol=1e-5)
    assert func.time_evaluator(func.entry_name, dev, number=1)(a_nd, b_nd, c).mean > 0


def _lowered(version):
    s, args = version(EVEN)
    return tvm.lower(s, args, name="mmult", simple_mode=True)


def _names(func):
    return [n for n, _ in _loops(func)]


def test_loop_nests():
    assert _names(_lowered(default)) == ["x", "y", "k"]
    # blocking: 32x32 tiles of C, k split by 4 outside the tile (C's zeroing nest comes first)
    assert _names(_lowered(blocking)) == [
        "x.outer", "y.outer", "x.inner.init", "y.inner.init",
        "k.outer", "k.inner", "x.inner", "y.inner"]
    # vectorization: the innermost 32 columns are one vector (no loop, 32-lane ramps)
    vec = _lowered(vectorization)
    assert _names(vec) == ["x.outer", "y.outer", "x.inner.init", "k.outer", "k.inner", "x.inner"]
    assert f", 1, {BN})" in str(vec)
    # loop permutation: x.inner above k.inner
    assert _names(_lowered(loop_permutation)) == [
        "x.outer", "y.outer", "x.inner.init", "k.outer", "x.inner", "k.inner"]


def test_array_packing_nest():
    f = _lowered(array_packing)
    loops = _loops(f)
    assert loops[:2] == [("x", PAR), ("y", tvm.tir.ForKind.SERIAL)]  # packing B, z vectorized
    assert "packedB" in _allocs(f)
    assert [n for n, _ in loops[2:]] == _names(_lowered(loop_permutation))


def test_write_cache_and_parallel_nests():
    f = _lowered(write_cache)
    assert {"packedB", "C.global"} <= set(_allocs(f))
    names = _names(f)
    assert "k.c.outer" in names and "k.c.inner" not in names  # unrolled: 4 copies of the body
    assert ("x.outer", PAR) not in _loops(f)
    assert ("x.outer", PAR) in _loops(_lowered(parallel))
