"""InjectVirtualThread keeps one copy of a buffer that every virtual thread fills identically
(a shared-memory tile fetched the same way), and one copy per virtual thread of buffers that
depend on the virtual thread or accumulate into themselves."""

from __future__ import annotations

import re

import numpy as np

import tvmpy as tvm
from tvmpy import te


def _gemm_like(vthreads: int):
    """C[i, j] = sum_k A[i, k] * B[j, k]; rows split over vthreads; the B tile in shared memory
    does not depend on the row, so all virtual threads share it."""
    n, m, kk = 8, 4, 6
    A = te.placeholder((n, kk), name="A")
    B = te.placeholder((m, kk), name="B")
    k = te.reduce_axis((0, kk), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    BB = s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    vi, ii = s[C].split(i, nparts=vthreads)
    s[C].reorder(vi, j, ii)
    s[C].bind(vi, te.thread_axis("vthread"))
    s[C].bind(j, te.thread_axis("threadIdx.x"))
    s[CL].compute_at(s[C], j)
    s[BB].compute_at(s[CL], s[CL].op.reduce_axis[0])
    return s, [A, B, C]


def _alloc_sizes(text: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"(\S+) = allocate\(\((\d+),\)", text)}


def test_shared_tile_not_replicated_and_correct():
    s, args = _gemm_like(4)
    text = str(tvm.lower(s, args, target="opencl"))
    sizes = _alloc_sizes(text)
    assert sizes["B.shared"] == 4, sizes  # one tile (4 threads x 1 k) for the 4 vthreads
    assert sizes["C.local"] == 4 * 2, sizes  # the accumulators stay private (4 x 2 rows)
    f = tvm.build(s, args, target="opencl")
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (8, 6)).astype("float32")
    b = rng.uniform(-1, 1, (4, 6)).astype("float32")
    c = np.zeros((8, 4), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5, atol=1e-5)


def test_vt_independent_accumulator_stays_private():
    """A local sum that does not depend on the virtual thread is still one per virtual thread:
    shared, the replicated update would add n times."""
    A = te.placeholder((5,), name="A")
    k = te.reduce_axis((0, 5), name="k")
    B = te.compute((4, 3), lambda i, j: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    BL = s.cache_write(B, "local")
    i, j = s[B].op.axis
    s[B].bind(i, te.thread_axis("vthread"))
    s[BL].compute_at(s[B], i)
    f = tvm.build(s, [A, B], target="llvm")
    a = np.arange(1, 6, dtype="float32")
    out = np.zeros((4, 3), "float32")
    f(a, out)
    np.testing.assert_allclose(out, np.full((4, 3), a.sum()))
