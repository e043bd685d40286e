"""Loop metadata the LLVM backend adds so that LLVM's own optimizations help, not hurt.

An innermost serial loop storing scalars at unit stride is kept rolled
(llvm.loop.unroll.disable) so that LLVM's loop vectorizer vectorizes it; otherwise LLVM's early
full unroll flattens it and then vectorizes the enclosing loop with gathers/scatters (the
"blocking" step of the GEMM tutorial ran ~7x slower that way).
"""

import numpy as np

import tvmpy as tvm
from tvmpy import te
from tvmpy.codegen.llvm import emit_assembly, emit_llvm_ir


def _blocked_matmul(n=64, bn=16):
    k = te.reduce_axis((0, n), "k")
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    C = te.compute((n, n), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    ko, ki = s[C].split(s[C].op.reduce_axis[0], factor=4)
    s[C].reorder(xo, yo, ko, ki, xi, yi)
    return s, [A, B, C]


def test_unit_stride_inner_loop_stays_rolled_and_is_vectorized_without_gathers():
    s, args = _blocked_matmul()
    f = tvm.lower(s, args, name="blocked")["blocked"]
    ir = emit_llvm_ir([f])
    assert "llvm.loop.unroll.disable" in ir
    asm = emit_assembly([f], "llvm -mcpu=znver4")
    assert "gather" not in asm and "scatter" not in asm
    assert "vfmadd" in asm or "vmulps" in asm  # vector arithmetic on the unit-stride loop
    m = tvm.build(s, args, "llvm")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    c = tvm.nd.empty((64, 64))
    m(a, b, c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_loops_of_vector_statements_keep_llvm_defaults():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[1])
    ir = emit_llvm_ir([tvm.lower(s, [A, B])["main"]])
    assert "llvm.loop.unroll.disable" not in ir
