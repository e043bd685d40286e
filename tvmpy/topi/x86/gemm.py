"""Packed fp32 GEMM for x86: the hand-written schedule of the paper's matrix-multiply example.

``C[M, N] = A[M, K] @ B[K, N]``. B is packed into column panels ``packedB[N/nr, K, nr]`` so
that the micro-kernel reads it contiguously; each ``mr x nr`` tile of C accumulates in a local
buffer that LLVM keeps in vector registers (nr/16 zmm per row with AVX-512); the panel loop
runs in parallel, each task packing its panel just before using it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...te import compute, create_schedule, placeholder, reduce_axis
from ...te import sum as te_sum

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["packed_gemm"]


def packed_gemm(M: int, N: int, K: int, mr: int = 8, nr: int = 32,
                dtype: str = "float32", parallel: bool = True) -> tuple[Schedule, list[Tensor]]:
    """Return ``(schedule, [A, B, C])`` for the packed, register-tiled GEMM.

    ``N`` must be a multiple of ``nr`` (the panel width); other extents may be anything (tails
    are guarded and the guard is moved out of the main loop by loop partitioning).
    """
    if N % nr:
        raise ValueError(f"packed_gemm: N={N} must be a multiple of the panel width nr={nr}")
    A = placeholder((M, K), dtype, name="A")
    B = placeholder((K, N), dtype, name="B")
    packed = compute((N // nr, K, nr), lambda jo, k, ji: B[k, jo * nr + ji], name="packedB")
    k = reduce_axis((0, K), name="k")
    C = compute((M, N), lambda i, j: te_sum(A[i, k] * packed[j // nr, k, j % nr], axis=k), name="C")

    s = create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, mr, nr)
    # panel-major tile order: one packed B panel (K*nr floats) stays in L2 while the row
    # blocks of A stream past it
    s[C].reorder(jo, io, ii, ji)
    s[CC].compute_at(s[C], io)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(ck, ci, cj)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    # each panel is packed right before its tiles use it (by the thread that uses it, into
    # a buffer that stays in that core's L2), not in a separate pass over all of B
    s[packed].compute_at(s[C], jo)
    s[packed].vectorize(s[packed].op.axis[2])
    if parallel:
        s[C].parallel(jo)
    return s, [A, B, C]
