"""GPU schedules the tests of several back ends share (lowering, OpenCL, CUDA, NVPTX): one
definition each, so the back ends are checked on the same kernels."""

from __future__ import annotations

from typing import Any

from .. import te

__all__ = ["tiled_gemm", "row_reduce"]


def tiled_gemm(M: int, N: int, K: int, tile: int = 8) -> tuple[Any, list[Any]]:
    """C = A @ B with a tile x tile block of threads per tile x tile block of C, the A and B
    tiles of each k step in shared memory fetched cooperatively (one element per thread), the
    accumulator in a local stage. Returns ``(schedule, [A, B, C])``."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    bi, ii = s[C].split(i, factor=tile)
    bj, jj = s[C].split(j, factor=tile)
    s[C].reorder(bi, bj, ii, jj)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(ii, te.thread_axis("threadIdx.y"))
    s[C].bind(jj, te.thread_axis("threadIdx.x"))
    s[CL].compute_at(s[C], jj)
    ko, _ = s[CL].split(s[CL].op.reduce_axis[0], factor=tile)
    for stage in (AA, BB):
        s[stage].compute_at(s[CL], ko)
        x, y = s[stage].op.axis
        s[stage].bind(x, te.thread_axis("threadIdx.y"))
        s[stage].bind(y, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def row_reduce(n: int, m: int, rfactor: bool, reducer: str = "sum",
               factor: int = 16) -> tuple[Any, Any, Any]:
    """B[i] = sum/max_k A[i, k], one block per row, the reduction axis bound to threadIdx.x:
    directly (``m`` threads) or after ``rfactor`` of its inner split by ``factor`` (``factor``
    threads, thread 0 stores). Returns ``(schedule, A, B)``."""
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    fn = te.sum if reducer == "sum" else te.max
    B = te.compute((n,), lambda i: fn(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    tx = te.thread_axis("threadIdx.x")
    if rfactor:
        _, ki = s[B].split(B.op.reduce_axis[0], factor=factor)
        BF = s.rfactor(B, ki)
        s[B].bind(s[B].op.reduce_axis[0], tx)
        s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
        s[B].set_store_predicate(tx.var.equal(0))
    else:
        s[B].bind(s[B].op.reduce_axis[0], tx)
    s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
    return s, A, B
