"""InjectPrefetch: ``pragma(axis, "prefetch", bytes)`` puts software prefetches of the loop's
streamed vector loads at the top of its body; values unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te


def _rowsum(n: int, m: int, prefetch: int, unroll_inner: bool = False):
    A = te.placeholder((n, m, 16), name="A")
    k = te.reduce_axis((0, m), name="k")
    C = te.compute((n, 16), lambda i, j: te.sum(A[i, k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    s[C].vectorize(j)
    s[CC].compute_at(s[C], i)
    _, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(ck, factor=2)
    s[CC].reorder(ko, ki, cj)
    s[CC].vectorize(cj)
    if unroll_inner:
        s[CC].unroll(ki)
    if prefetch:
        s[CC].pragma(ko, "prefetch", prefetch)
    return s, A, C


@pytest.mark.parametrize("n,m,prefetch,unroll,count", [
    (3, 7, 256, False, 2),  # k split by 2 with a tail: the main loop gets them, the tail none
    (5, 13, 64, True, 2),  # the inner loop unrolled (after the pass): still 2 prefetches
    (1, 1, 4096, False, 0),  # no loop left to mark
    (4, 6, 0, False, 0),  # no pragma
])
def test_prefetch_pragma_values_and_ir(n, m, prefetch, unroll, count):
    s, A, C = _rowsum(n, m, prefetch, unroll)
    text = str(tvm.lower(s, [A, C]))
    assert "pragma_prefetch" not in text
    # one prefetch per value of the inner loop (2 iterations of the split of k)
    assert text.count("prefetch(") == count
    f = tvm.build(s, [A, C], "llvm")
    a = np.random.default_rng(7).uniform(-1, 1, (n, m, 16)).astype("float32")
    c = tvm.nd.array(np.zeros((n, 16), "float32"))
    f(tvm.nd.array(a), c)  # prefetches past the end of A (the last rows) do not fault
    np.testing.assert_allclose(c.numpy(), a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_prefetch_in_llvm_ir():
    s, A, C = _rowsum(4, 8, 512)
    f = tvm.build(s, [A, C], "llvm")
    assert "llvm.prefetch" in f.get_source("ll")
    assert "prefetcht0" in f.get_source("asm")


def test_prefetch_c_backend_and_interpreter():
    """The C backend prints GCC's builtin and the interpreter ignores the hint."""
    from tvmpy.codegen import c as cgen
    from tvmpy.tir import interpreter as interp

    s, A, C = _rowsum(3, 8, 256)
    from tvmpy.driver import lower_primfunc

    func = lower_primfunc(s, [A, C])
    src = cgen.emit_c([func])
    assert "__builtin_prefetch(" in src
    a = np.random.default_rng(9).uniform(-1, 1, (3, 8, 16)).astype("float32")
    c = np.zeros((3, 16), "float32")
    interp.run(func, [a, c])
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    m = tvm.build(s, [A, C], target="c")
    cc = tvm.nd.array(np.zeros((3, 16), "float32"))
    m(tvm.nd.array(a), cc)
    np.testing.assert_allclose(cc.numpy(), a.sum(axis=1), rtol=1e-5, atol=1e-5)
