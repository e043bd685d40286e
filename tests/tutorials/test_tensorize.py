"""The steps of TVM's tutorial "Use Tensorize to Leverage Hardware Intrinsics", in our own code:
a matrix-vector product declared as a tensor intrinsic (``te.decl_tensor_intrin``) whose body
calls a C micro-kernel compiled to LLVM IR with ``tvm.contrib.clang`` and linked with
``pragma import_llvm``; then the reduce-update form (reset / update bodies) over a split
reduction. Shapes are small and not all powers of two; results against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.contrib import clang

RNG = np.random.default_rng(26)

_UPDATE = """
extern "C" int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < l; ++j) {
      cc[i] += aa[j] * bb[i * stride + j];
    }
  }
  return 0;
}
"""
_RESET = """
extern "C" int gemv_reset(float *cc, int m) {
  for (int i = 0; i < m; ++i) {
    cc[i] = 0.0f;
  }
  return 0;
}
"""


def _micro_kernel(source: str, cc: str | None = None) -> str:
    temp = tvm.contrib.utils.tempdir()
    return clang.create_llvm(source, output=temp.relpath("kernel.ll"), options=["-O2"], cc=cc)


def _gemv_intrin(m: int, l: int, reduce_update: bool):
    """``c[i] = sum_k a[k] * b[i, k]`` over an ``m x l`` tile, through the C micro-kernel."""
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    binds = {
        a: tvm.tir.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1]),
        b: tvm.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1,
                               strides=[te.var("s1"), 1]),
        c: tvm.tir.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1]),
    }

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def emit(reset: bool, update: bool):
            ib = tvm.tir.ir_builder.create()
            if reset:
                ib.emit(tvm.tir.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m))
            if update:
                ib.emit(tvm.tir.call_extern("int32", "gemv_update", cc.access_ptr("w"),
                                            aa.access_ptr("r"), bb.access_ptr("r"), m, l,
                                            bb.strides[0]))
            return ib.get()

        if not reduce_update:  # the output must start at zero (the caller's zeroed array)
            return emit(False, True)
        # body (the whole reduction in the tile), reduce_reset, reduce_update
        return emit(True, True), emit(True, False), emit(False, True)

    return te.decl_tensor_intrin(c.op, intrin_func, binds=binds)


def _matmul_nt(n: int, m: int, l: int):
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def _check(s, A, B, C):
    f = tvm.build(s, [A, B, C], target="llvm", name="gemv")
    a = RNG.uniform(-1, 1, tuple(int(d) for d in A.shape)).astype("float32")
    b = RNG.uniform(-1, 1, tuple(int(d) for d in B.shape)).astype("float32")
    c = tvm.nd.array(np.zeros(tuple(int(d) for d in C.shape), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), np.dot(a, b.T), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def has_clang():
    if not clang.find_clang(required=False):
        pytest.skip("no clang nor zig cc")


@pytest.mark.parametrize("cc", clang.find_clang(required=False))  # clang-N, zig cc: each
def test_gemv_tensorized(cc):
    n, m, l, factor = 6, 48, 20, 16
    A, B, C = _matmul_nt(n, m, l)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    s[C].reorder(x, yo, yi, z)
    s[C].tensorize(yi, _gemv_intrin(factor, l, reduce_update=False))
    s[C].pragma(yo, "import_llvm", _micro_kernel(_UPDATE, cc))
    assert "gemv_update" in str(tvm.lower(s, [A, B, C], simple_mode=True))
    _check(s, A, B, C)


def test_gemv_reduce_update(has_clang):
    n, m, l, factor = 5, 32, 48, 16
    A, B, C = _matmul_nt(n, m, l)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    zo, zi = s[C].split(z, factor=factor)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, _gemv_intrin(factor, factor, reduce_update=True))
    s[C].pragma(yo, "import_llvm", _micro_kernel(_UPDATE + _RESET))
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    assert "gemv_reset" in text and "gemv_update" in text
    _check(s, A, B, C)


def test_same_kernel_imported_twice(has_clang):
    """Two import_llvm blocks defining the same symbol (the kernel compiled twice, so the two
    IR texts differ in their file names) link to one copy, on llvm and c."""
    n, m, l, factor = 4, 32, 12, 16
    A, B, C = _matmul_nt(n, m, l)
    D = te.compute(C.shape, lambda i, j: C[i, j] * 2.0, name="D")
    s = te.create_schedule(D.op)
    x, y = C.op.axis
    yo, yi = s[C].split(y, factor=factor)
    s[C].tensorize(yi, _gemv_intrin(factor, l, reduce_update=True))  # C is not zeroed
    first, second = _micro_kernel(_UPDATE + _RESET), _micro_kernel(_UPDATE + _RESET)
    assert first != second
    s[C].pragma(yo, "import_llvm", first)
    s[D].pragma(D.op.axis[0], "import_llvm", second)
    a = RNG.uniform(-1, 1, (n, l)).astype("float32")
    b = RNG.uniform(-1, 1, (m, l)).astype("float32")
    for target in ("llvm", "c"):
        f = tvm.build(s, [A, B, D], target=target)
        d = tvm.nd.empty((n, m), "float32")
        f(tvm.nd.array(a), tvm.nd.array(b), d)
        tvm.testing.assert_allclose(d.numpy(), 2 * np.dot(a, b.T), rtol=1e-5, atol=1e-5)


def test_no_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(clang.shutil, "which", lambda name: None)
    monkeypatch.setattr(clang, "_versioned_clangs", lambda: [])
    monkeypatch.setattr(clang.importlib.util, "find_spec", lambda name: None)
    assert clang.find_clang(required=False) == []
    with pytest.raises(RuntimeError, match="no clang found"):
        clang.create_llvm("int f(void) { return 0; }")


def test_create_llvm_errors():
    with pytest.raises(TypeError, match="inputs"):
        clang.create_llvm([])
    if clang.find_clang(required=False):
        with pytest.raises(RuntimeError, match="compilation failed"):
            clang.create_llvm("int broken( {")
    with pytest.raises(RuntimeError, match="cannot run"):
        clang.create_llvm("int f(void) { return 0; }", cc="/nonexistent/clang")
