"""Vector code never touches memory outside the buffer.

The input lives right before (and right after) a PROT_NONE guard page: a vectorized
``if_then_else`` whose disabled lanes would read one element past either end, and vectorized
loops with a tail (13 = 8 + 5), strided or transposed reads, or a symbolic size, must not fault.
Runs in a subprocess so that a segfault fails the test instead of killing pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from .util import TARGETS

_CHILD = textwrap.dedent("""
    import ctypes, mmap, sys
    import numpy as np
    import tvmpy as tvm
    from tvmpy import te, tir

    PAGE = mmap.PAGESIZE
    mem = mmap.mmap(-1, 3 * PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    libc = ctypes.CDLL(None)
    assert libc.mprotect(ctypes.c_void_p(base + PAGE), PAGE, 0) == 0  # page 1: guard
    n = 16
    end_of_page0 = np.frombuffer(mem, "float32", n, PAGE - 4 * n)  # guard right after
    start_of_page2 = np.frombuffer(mem, "float32", n, 2 * PAGE)    # guard right before
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(i < n - 1, A[tir.min(i + 1, n)], 0.0) +
                   te.if_then_else(i > 0, A[tir.max(i - 1, -1)], 0.0), name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    f = tvm.build(s, [A, B], target=sys.argv[1])
    for a in (end_of_page0, start_of_page2):
        a[:] = np.arange(1, n + 1)
        b = np.full(n, np.nan, "float32")
        f(a, b)
        want = np.concatenate([a[1:], [0]]) + np.concatenate([[0], a[:-1]])
        np.testing.assert_array_equal(b, want)

    def flush_with_guard(shape):
        return np.frombuffer(mem, "float32", int(np.prod(shape)),
                             PAGE - 4 * int(np.prod(shape))).reshape(shape)

    # vectorized tails (13 = 8 + 5), strided and transposed reads, symbolic sizes
    n = te.var("n")
    cases = []
    A = te.placeholder((3, 13), name="A")
    B = te.compute((3, 13), lambda i, j: A[i, j] * 2.0, name="B")
    cases.append((A, B, lambda a: a * 2))
    A = te.placeholder((26,), name="A")
    B = te.compute((13,), lambda i: A[2 * i + 1], name="B")
    cases.append((A, B, lambda a: a[1::2]))
    A = te.placeholder((13, 3), name="A")
    B = te.compute((3, 13), lambda i, j: A[j, i], name="B")
    cases.append((A, B, lambda a: a.T))
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]), name="B")
    cases.append((A, B, np.exp))
    for A, B, ref in cases:
        s = te.create_schedule(B.op)
        o, i = s[B].split(B.op.axis[-1], 8)
        s[B].vectorize(i)
        s[B].parallel(o)
        f = tvm.build(s, [A, B], target=sys.argv[1])
        symbolic = not isinstance(A.shape[0], tir.IntImm)
        for size in ((1,), (13,), (21,)) if symbolic else ([int(d) for d in A.shape],):
            a = flush_with_guard(size)
            a[...] = np.linspace(-1, 1, a.size).reshape(a.shape)
            b = np.full(ref(a).shape, np.nan, "float32")
            f(a, b)
            np.testing.assert_allclose(b, ref(a), rtol=1e-6)
    print("ok")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mmap/mprotect guard page")
@pytest.mark.parametrize("target", TARGETS)
def test_vector_loads_stay_inside_the_buffer(target):
    out = subprocess.run([sys.executable, "-c", _CHILD, target], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-2000:])
