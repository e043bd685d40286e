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
        size = int(np.prod(shape))
        assert size % 16 == 0  # 64-byte aligned: used in place, not copied by the runtime
        return np.frombuffer(mem, "float32", size, PAGE - 4 * size).reshape(shape)

    # vectorized loops with a tail whose last element read/written is the buffer's last one:
    # offset, strided and transposed reads, a symbolic size; outputs of 16 split by 6 (6+6+4)
    n = te.var("n")
    cases = []
    A = te.placeholder((3, 16), name="A")
    B = te.compute((3, 13), lambda i, j: A[i, j + 3] * 2.0, name="B")
    cases.append((A, B, lambda a: a[:, 3:] * 2, 8))
    A = te.placeholder((32,), name="A")
    B = te.compute((13,), lambda i: A[2 * i + 7], name="B")
    cases.append((A, B, lambda a: a[7::2], 8))
    A = te.placeholder((16, 3), name="A")
    B = te.compute((3, 13), lambda i, j: A[j + 3, i], name="B")
    cases.append((A, B, lambda a: a[3:].T, 8))
    A = te.placeholder((n,), name="A")
    B = te.compute((n - 3,), lambda i: te.exp(A[i + 3]), name="B")
    cases.append((A, B, lambda a: np.exp(a[3:]), 8))
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    cases.append((A, B, lambda a: a + 1, 6))
    for A, B, ref, factor in cases:
        s = te.create_schedule(B.op)
        o, i = s[B].split(B.op.axis[-1], factor)
        s[B].vectorize(i)
        s[B].parallel(o)
        f = tvm.build(s, [A, B], target=sys.argv[1])
        symbolic = not isinstance(A.shape[0], tir.IntImm)
        for size in ((16,), (32,)) if symbolic else ([int(d) for d in A.shape],):
            a = flush_with_guard(size)
            a[...] = np.linspace(-1, 1, a.size).reshape(a.shape)
            b = np.full(ref(a).shape, np.nan, "float32")
            f(a, b)
            np.testing.assert_allclose(b, ref(a), rtol=1e-6)
            if b.size % 16 == 0:  # the OUTPUT flush with the guard: no store past its end
                a2 = a.copy()
                b2 = flush_with_guard(b.shape)
                b2[...] = np.nan
                f(a2, b2)
                np.testing.assert_allclose(b2, ref(a2), rtol=1e-6)
    print("ok")
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mmap/mprotect guard page")
@pytest.mark.parametrize("target", TARGETS)
def test_vector_loads_stay_inside_the_buffer(target):
    out = subprocess.run([sys.executable, "-c", _CHILD, target], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-2000:])
