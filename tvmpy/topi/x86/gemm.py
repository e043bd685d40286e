"""Packed fp32 GEMM for x86: the hand-written schedule of the paper's matrix-multiply example.

``C[M, N] = A[M, K] @ B[K, N]``. B is packed into column panels ``packedB[N/nr, K, nr]`` so
that the micro-kernel reads it contiguously; each ``mr x nr`` tile of C accumulates in a local
buffer that LLVM keeps in vector registers (nr/16 zmm per row with AVX-512); the panel loop
runs in parallel, each task packing its panel just before using it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...autotvm.task.task import template as _template
from ...te import compute, create_schedule, placeholder, reduce_axis
from ...te import sum as te_sum

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["packed_gemm", "gemm_template"]


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


# ---------------------------------------------------------------------------------------------
# The same GEMM as an AutoTVM template ("gemm.x86"): the choices of ``packed_gemm`` as knobs,
# plus row blocking, loop order, whether to pack B at all, reduction unrolling and the parallel
# loop. The fallback config is ``packed_gemm``'s schedule (mr 8, nr 32, panel-major, packed).
_NR_CANDIDATES = (16, 32, 48, 64, 96, 128)
_MAX_MR = 16


def _gemm_space(cfg, M: int, N: int) -> None:
    from ...autotvm.space import OtherOptionEntity, SplitEntity

    cfg.define_split("tile_y", M, num_outputs=3, filter=lambda e: e.size[-1] <= _MAX_MR)
    nrs = [c for c in _NR_CANDIDATES if c <= N and N % c == 0] or [N]
    cfg.define_split("tile_x", N, policy="candidate", candidate=[[-1, c] for c in nrs])
    cfg.define_knob("order", ["panel_major", "row_major"])
    cfg.define_knob("pack_b", [True, False])
    cfg.define_knob("unroll_k", [1, 2, 4, 8])
    cfg.define_knob("fuse_parallel", [False, True])
    if cfg.is_fallback:
        mr = max(d for d in range(1, min(8, M) + 1) if M % d == 0)
        cfg["tile_y"] = SplitEntity([-1, 1, mr])
        cfg["tile_x"] = SplitEntity([-1, 32 if 32 in nrs else nrs[0]])
        for k, v in (("order", "panel_major"), ("pack_b", True), ("unroll_k", 1),
                     ("fuse_parallel", False)):
            cfg[k] = OtherOptionEntity(v)


def _gemm_template(M: int, N: int, K: int, dtype: str = "float32"
                   ) -> tuple[Schedule, list[Tensor]]:
    """The AutoTVM template ``gemm.x86`` (call it as :data:`gemm_template`, which applies the
    dispatch context's config): ``C[M, N] = A[M, K] @ B[K, N]`` with the knobs of the current AutoTVM config:

    - ``tile_y`` ``[-1, mb, mr]``: ``mr`` rows per register tile (<= 16), ``mb`` such tiles
      per row block (the A rows a block of tiles shares while in cache);
    - ``tile_x`` ``[-1, nr]``: columns per register tile = width of a packed B panel;
    - ``order``: ``panel_major`` (panel outside the row blocks: a packed panel stays in L2
      while all of A streams past it) or ``row_major`` (row blocks outside: A's block stays,
      panels stream, and are re-packed per row block);
    - ``pack_b``: pack B into ``[N/nr, K, nr]`` panels inside the loop that owns a panel, or
      read B in place (rows of N floats apart);
    - ``unroll_k``: the reduction loop unrolled by this factor;
    - ``fuse_parallel``: run the two outermost loops as one parallel loop (more, smaller
      tasks) instead of only the outermost.
    """
    from ... import autotvm
    from .dense import register_tile

    cfg = autotvm.get_config()
    _gemm_space(cfg, M, N)
    nr = cfg["tile_x"].size[-1]
    A = placeholder((M, K), dtype, name="A")
    B = placeholder((K, N), dtype, name="B")
    k = reduce_axis((0, K), name="k")
    if cfg["pack_b"].val:
        packed = compute((N // nr, K, nr), lambda jo, k, ji: B[k, jo * nr + ji],
                         name="packedB")
        C = compute((M, N), lambda i, j: te_sum(A[i, k] * packed[j // nr, k, j % nr], axis=k),
                    name="C")
    else:
        packed = None
        C = compute((M, N), lambda i, j: te_sum(A[i, k] * B[k, j], axis=k), name="C")
    cfg.add_flop(2.0 * M * N * K)

    s = create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    yo, yb, yi = cfg["tile_y"].apply(s, C, i)
    xo, xi = s[C].split(j, factor=nr)
    if cfg["order"].val == "panel_major":
        s[C].reorder(xo, yo, yb, yi, xi)
        outer, second = xo, yo
    else:
        s[C].reorder(yo, xo, yb, yi, xi)
        outer, second = yo, xo
    owner = xo  # the loop that owns one panel of B
    if cfg["fuse_parallel"].val:
        outer = owner = s[C].fuse(outer, second)
    s[C].parallel(outer)
    s[CC].compute_at(s[C], yb)
    register_tile(s, CC, cfg["unroll_k"].val)
    s[C].vectorize(xi)
    if packed is not None:
        # packed by the loop that owns one panel (xo, or the fused loop), right before use
        s[packed].compute_at(s[C], owner)
        s[packed].vectorize(s[packed].op.axis[2])
    return s, [A, B, C]



gemm_template = _template("gemm.x86", _gemm_template)
