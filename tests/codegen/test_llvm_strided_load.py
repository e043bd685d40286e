"""LLVM codegen: vector loads with a small constant stride (2..4) are a masked contiguous load
plus a shuffle (no gather), and read only the addressed elements (the masked-off lanes past the
last one are not touched); predicated (padded) strided loads keep their masks."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.tir import all as tir_all
from tvmpy.tir.op import if_then_else


@pytest.mark.parametrize("dtype", ["float32", "int8", "float64", "int32", "float16"])
@pytest.mark.parametrize("stride", [2, 3, 4])
@pytest.mark.parametrize("n", [16, 13, 37])
def test_strided_load(dtype, stride, n):
    # the last element read is A[(n - 1) * stride + 1]: the buffer ends right after it
    A = te.placeholder(((n - 1) * stride + 2,), dtype, name="A")
    B = te.compute((n,), lambda i: A[i * stride] + A[i * stride + 1], name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    f = tvm.build(s, [A, B], "llvm")
    assert "gather" not in f.get_source("ll")
    a = (np.random.default_rng(0).random((n - 1) * stride + 2) * 100).astype(dtype)
    b = tvm.nd.empty((n,), dtype)
    f(tvm.nd.array(a), b)
    ref = (a[0:(n - 1) * stride + 1:stride] + a[1::stride][:n]).astype(dtype)
    np.testing.assert_array_equal(b.numpy(), ref)


def test_strided_load_with_padding_predicate():
    """A stride-2 window over a zero-padded row (the pooling/convolution pattern)."""
    n, w = 9, 16
    A = te.placeholder((w,), "float32", name="A")
    B = te.compute((n,), lambda i: if_then_else(tir_all(i * 2 - 1 >= 0, i * 2 - 1 < w),
                                                A[i * 2 - 1], -1.0), name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    f = tvm.build(s, [A, B], "llvm")
    a = np.arange(1, w + 1, dtype="float32")
    b = tvm.nd.empty((n,), "float32")
    f(tvm.nd.array(a), b)
    ref = np.array([a[i * 2 - 1] if 0 <= i * 2 - 1 < w else -1.0 for i in range(n)], "float32")
    np.testing.assert_array_equal(b.numpy(), ref)


@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
@pytest.mark.parametrize("stride", [2, 3, 4])
def test_strided_store_leaves_other_elements(dtype, stride):
    """Stores at stride 2..4 (a masked store of the spread value, no scatter) write only
    their own elements: the ones in between keep their previous contents."""
    n = 21
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n, stride), lambda i, j: A[i] + j.astype(dtype), name="B")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    io, ii = s[B].split(i, factor=16)
    s[B].reorder(io, j, ii)
    s[B].vectorize(ii)
    f = tvm.build(s, [A, B], "llvm")
    assert "scatter" not in f.get_source("ll")
    a = (np.random.default_rng(1).random(n) * 50).astype(dtype)
    b = tvm.nd.array(np.zeros((n, stride), dtype))
    f(tvm.nd.array(a), b)
    np.testing.assert_array_equal(b.numpy(), a[:, None] + np.arange(stride, dtype=dtype))


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64", "int8"])
@pytest.mark.parametrize("lanes", [5, 7, 9, 12, 13, 15])
def test_odd_width_vectors_masked(dtype, lanes):
    """Contiguous vectors whose width is not a power of two (a 12-lane channel block, a 13-wide
    row): with AVX-512 one masked load/store of the next power of two (32/64-bit elements);
    only the vector's own elements are read and written (the buffers end right after them;
    the element after the output's vector keeps its value)."""
    n = 3 * lanes
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=lanes)
    s[B].vectorize(xi)
    ir = tvm.build(s, [A, B], "llvm -mcpu=skylake-avx512").get_source("ll")
    wide = 1 << (lanes - 1).bit_length()
    if dtype in ("float32", "int32") or (dtype == "float64" and wide <= 8):
        assert f"llvm.masked.load.v{wide}" in ir and f"llvm.masked.store.v{wide}" in ir
    else:
        assert "llvm.masked.load" not in ir
    f = tvm.build(s, [A, B], "llvm")  # run on the host, whatever its vectors
    rng = np.random.default_rng(lanes)
    a = (rng.random(n) * 50).astype(dtype)
    b = tvm.nd.empty((n,), dtype)
    f(tvm.nd.array(a), b)
    np.testing.assert_array_equal(b.numpy(), (a * 2).astype(dtype))
    avx2 = tvm.build(s, [A, B], "llvm -mcpu=haswell").get_source("ll")
    assert "llvm.masked.load" not in avx2  # (only where AVX-512 masks are cheap)
