"""x86 computes and schedules for dense / matmul / batch_matmul: the packed-GEMM idea of
``gemm.py`` applied to the operator library.

``dense_pack`` / ``batch_matmul_pack`` repack the weight into column panels
``[N/nr, K, nr]`` (inside the parallel panel loop, right before use), so that the micro-kernel
reads ``nr`` contiguous weights per ``k``; each ``mr x nr`` output tile accumulates in vector
registers. The plain ``topi.nn`` computes get the same tiling without the packing (good for
``matmul`` with an untransposed B, whose columns are already contiguous). A product of 1-2 rows
by packed panels (a GEMV) streams each panel once with its reduction split into interleaved
partial sums (``_schedule_gemv``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...autotvm.space import OtherOptionEntity, SplitEntity
from ...autotvm.task.topi_integration import register_topi_compute, register_topi_schedule
from ...target import resolve_target
from ...target.cpu_features import fma512_units
from ...te import compute, create_schedule, reduce_axis
from ...te import sum as te_sum
from ...tir.expr import const
from ...tir.op import if_then_else
from ..nn.conv2d import _cast
from ..nn.dense import _same, add_bias, batch_matmul
from ..nn.dense import dense as _nn_dense
from ..nn.utils import batch_const_shape, check_rank, infer_out_dtype, traverse_inline
from ..utils import get_const_tuple
from .conv2d import _outputs, anchor
from .injective import vector_lanes

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["dense_pack", "dense_prepacked", "matmul_pack", "panel_width", "batch_matmul_pack", "schedule_dense",
           "default_unroll_k",
           "schedule_dense_pack", "schedule_matmul", "schedule_batch_matmul",
           # AutoTVM templates (tasks "dense.x86", "dense_pack.x86", "contrib_dense_pack.x86",
           # "batch_matmul.x86", "batch_matmul_pack.x86")
           "dense_nopack", "schedule_dense_nopack", "dense_pack_x86", "schedule_dense_pack_x86",
           "contrib_dense_pack", "schedule_contrib_dense_pack", "batch_matmul_x86",
           "schedule_batch_matmul_x86", "batch_matmul_pack_x86", "schedule_batch_matmul_pack_x86"]

_TAGS = ("dense", "dense_pack", "matmul", "batch_matmul", "batch_matmul_pack")


def _panel(n: int) -> int:
    """Two vectors of the target (32 floats with AVX-512, 16 with AVX2, 8 with SSE) when ``n``
    has at least two such panels, else one vector, else ``n``."""
    lanes = vector_lanes("float32")
    return 2 * lanes if n >= 4 * lanes else lanes if n >= lanes else n


def tile_rows() -> int:
    """Rows of the default register tile (``rows x 2`` vector accumulators).

    - 6 with the 16 vector registers of AVX2/SSE (8 x 2 spilled there: the 6 x 1500 x 64 x
      1500 batch_matmul built for Haswell ran 1.4x slower at 8 rows than at 6, one thread,
      2026-11-29; the classic 6 x 16 kernel);
    - 8 with the 32 of AVX-512;
    - 12 with AVX-512 on cores with two 512-bit FMA units
      (:func:`~tvmpy.target.cpu_features.fma512_units` of the target). Such a core retires a
      ``k`` step of the tile twice as fast, so it also consumes the packed panel (2 vectors
      per ``k``, streamed from L2 once K x 128 bytes exceeds L1D) twice as fast; 12 rows
      reuse each panel vector for 12 FMAs instead of 8 (24 accumulators + 2 panel vectors +
      1 broadcast of the 32 registers). (The likely cause; this KVM guest has no performance
      counters to show it.) Emerald Rapids-class Xeon, one thread, CPU time, interleaved
      (2026-11-30): 128 x 768 x 768 0.94x the time of 8 rows, 128 x 768 x 3072 0.96x,
      128 x 3072 x 768 0.97x, 197 x 768 x 3072 0.98x, 24 x 768 x 768 0.91x, 32 x 1024 x 512
      0.94x, 1500 x 1536 x 384 1.02x (10 and 14 rows, 6 x 64 tiles on 64-wide panels: no
      better; bench/gemm_tile_ab.py). The attention kernel's two tiles (scores over the head
      size, P V over the keys) likewise: 12 x 197 x 197 x 64 0.94-0.97x, 6 x 1500 x 1500 x 64
      0.98-0.99x, 12 x 128 x 128 x 64 0.99x."""
    if vector_lanes("float32") < 16:
        return 6
    return 12 if _fma512_units() >= 2 else 8


def _fma512_units() -> int:
    """512-bit FMA units per core of the target being built for (the host without one)."""
    return fma512_units(resolve_target().isa_features)


SYMBOLIC_NR = 16  # the register tile's width when N is symbolic (a guarded last panel)


def default_unroll_k(k: Any) -> int:
    """The default unroll of a register tile's reduction loop: 4 when a constant ``k`` is a
    multiple of 4 (2 when even), else 1 (no guarded tail). Each ``k`` step of the ``8 x 2``
    vector tile is 16 FMAs + 10 loads; the loop's counter, pointer bump and branch are scalar
    ALU uops, which on cores whose 512-bit FMAs issue on the same ports as scalar ALU ops
    (Intel: ports 0 and 5 with AVX-512) take FMA slots every step. Unrolled by 4 they are paid
    once per 64 FMAs: Emerald Rapids-class Xeon, one thread, 128 x 768 x 2048 3.18 -> 2.87 ms,
    1500 x 1536 x 384 12.5 -> 10.8 ms (onnxruntime 2.77 / 11.4; 2026-11-30). On Zen 4 (FP
    pipes apart from the ALUs) unroll_k 4 measured the same as 1 (2026-11-29)."""
    k = getattr(k, "value", k)
    if not isinstance(k, int) or k < 8:
        return 1
    return 4 if k % 4 == 0 else 2 if k % 2 == 0 else 1


def _pack(b: Tensor, batched: bool, n: int, k: int, nr: int, name: str,
          trans: bool = True) -> Tensor:
    """``B[(batch,) N, K]`` (``trans``; else ``B[(batch,) K, N]``) ->
    ``[(batch,) ceil(N/nr), K, nr]``, zero past N."""
    zero = const(0, b.dtype)
    npanel = (n + nr - 1) // nr

    def get(bi: Any, jo: Any, kk: Any, ji: Any) -> Any:
        j = jo * nr + ji
        at = (j, kk) if trans else (kk, j)
        v = b[(bi, *at)] if batched else b[at]
        return v if isinstance(n, int) and n % nr == 0 else if_then_else(j < n, v, zero)

    if batched:
        return compute((b.shape[0], npanel, k, nr), get, name=name, tag="matmul_pack")
    return compute((npanel, k, nr), lambda jo, kk, ji: get(None, jo, kk, ji), name=name,
                   tag="matmul_pack")


def _crop(full: Tensor, n: int) -> Tensor:
    """The first ``n`` columns of a product computed over whole panels (``full``'s last axis
    padded to a multiple of the panel width): the register tiles of the tail panel then run at
    the full vector width on the zero-padded weights, and only their stores are guarded. The
    schedules inline this stage into the output (tag "injective")."""
    last = getattr(full.shape[-1], "value", full.shape[-1])
    if isinstance(last, int) and last == n:
        return full
    return compute((*full.shape[:-1], n), lambda *idx: full(*idx), name=full.op.name + "_crop",
                   tag="injective")


def dense_pack(data: Tensor, weight: Tensor, bias: Tensor | None = None,
               out_dtype: str | None = None, nr: int | None = None) -> Tensor:
    """``topi.nn.dense`` with the weight packed into panels of ``nr`` columns (default
    :func:`panel_width`; tag "dense_pack")."""
    check_rank(data, 2, "dense_pack", "data")
    check_rank(weight, 2, "dense_pack", "weight")
    m, k = batch_const_shape(data.shape, "dense_pack: data shape")
    n, k2 = get_const_tuple(weight.shape, "dense_pack: weight shape", symbolic=False)
    if k != k2:
        raise ValueError(f"dense_pack: data has {k} input features, weight {(n, k2)} expects {k2}")
    out_dtype = infer_out_dtype(out_dtype, data)
    nr = _panel(n) if nr is None else int(nr)
    packed = _pack(weight, False, n, k, nr, "weight_pack")
    kk = reduce_axis((0, k), name="k")
    out = compute((m, -(-n // nr) * nr), lambda i, j: te_sum(
        _cast(data[i, kk], out_dtype) * _cast(packed[j // nr, kk, j % nr], out_dtype), axis=kk),
        name="T_dense_pack", tag="dense_pack")
    return add_bias(_crop(out, n), bias, "dense")


def matmul_pack(tensor_a: Tensor, tensor_b: Tensor, bias: Tensor | None = None,
                out_dtype: str | None = None, nr: int | None = None) -> Tensor:
    """``topi.nn.matmul`` of ``A[M, K] @ B[K, N]`` (neither transposed) with B packed into
    panels of ``nr`` columns inside the kernel (each parallel task copies its panel, rows of
    ``nr`` contiguous floats, right before use; the last panel zero-padded). Tag "dense_pack":
    scheduled by ``schedule_dense_pack``."""
    check_rank(tensor_a, 2, "matmul_pack", "tensor_a")
    check_rank(tensor_b, 2, "matmul_pack", "tensor_b")
    m, k = batch_const_shape(tensor_a.shape, "matmul_pack: tensor_a shape")
    k2, n = get_const_tuple(tensor_b.shape, "matmul_pack: tensor_b shape", symbolic=False)
    if k != k2:
        raise ValueError(f"matmul_pack: A has {k} columns, B {(k2, n)} has {k2} rows")
    out_dtype = infer_out_dtype(out_dtype, tensor_a)
    nr = _panel(n) if nr is None else int(nr)
    packed = _pack(tensor_b, False, n, k, nr, "B_pack", trans=False)
    kk = reduce_axis((0, k), name="k")
    out = compute((m, -(-n // nr) * nr), lambda i, j: te_sum(
        _cast(tensor_a[i, kk], out_dtype) * _cast(packed[j // nr, kk, j % nr], out_dtype),
        axis=kk), name="T_matmul_pack", tag="dense_pack")
    return add_bias(_crop(out, n), bias, "matmul")


def panel_width(n: int) -> int:
    """The column-panel width ``nr`` that ``dense_pack``'s schedule tiles ``n`` columns by."""
    return _panel(n)


def dense_prepacked(data: Tensor, packed: Tensor, out_dtype: str | None = None,
                    units: int | None = None) -> Tensor:
    """``dense`` with the weight already packed (at compile time, by AlterOpLayout):
    ``packed[P, K, nr]`` holds ``W[j, k]`` at ``[j // nr, k, j % nr]`` (tag "dense_pack",
    scheduled by ``schedule_dense_pack`` without the in-kernel packing). ``units``: the
    output width ``N`` when the last panel is zero-padded (``(P - 1) * nr < N <= P * nr``;
    default ``P * nr``)."""
    check_rank(data, 2, "dense_prepacked", "data")
    check_rank(packed, 3, "dense_prepacked", "packed weight")
    m, k = batch_const_shape(data.shape, "dense_prepacked: data shape")
    npanel, k2, nr = get_const_tuple(packed.shape, "dense_prepacked: packed weight shape", symbolic=False)
    if k != k2:
        raise ValueError(f"dense_prepacked: data has {k} input features, the packed weight "
                         f"{(npanel, k2, nr)} expects {k2}")
    n = npanel * nr if units is None else int(units)
    if not (npanel - 1) * nr < n <= npanel * nr:
        raise ValueError(f"dense_prepacked: units={n} does not fit the packed weight "
                         f"{(npanel, k2, nr)} (at most its last panel may be padded)")
    out_dtype = infer_out_dtype(out_dtype, data)
    kk = reduce_axis((0, k), name="k")
    full = compute((m, npanel * nr), lambda i, j: te_sum(
        _cast(data[i, kk], out_dtype) * _cast(packed[j // nr, kk, j % nr], out_dtype), axis=kk),
        name="T_dense_pack", tag="dense_pack")
    return _crop(full, n)


def batch_matmul_pack(tensor_a: Tensor, tensor_b: Tensor, out_dtype: str | None = None,
                      nr: int | None = None, transpose_b: bool = True) -> Tensor:
    """``topi.nn.batch_matmul`` (B ``[b, N, K]``, or ``[b, K, N]`` with ``transpose_b=False``)
    with B packed into panels of ``nr`` columns (default :func:`panel_width`), the last one
    zero-padded."""
    ref = batch_matmul(tensor_a, tensor_b, out_dtype=out_dtype, transpose_b=transpose_b)
    batch, m, n = (getattr(d, "value", d) for d in ref.shape)  # (checks done; M, N may be
    k = get_const_tuple(tensor_a.shape[2:], "batch_matmul_pack: K", symbolic=False)[0]  # symbolic)
    a1 = _same(tensor_a.shape[0], 1)
    out_dtype = infer_out_dtype(out_dtype, tensor_a)
    if nr is None:
        nr = _panel(n) if isinstance(n, int) else SYMBOLIC_NR
    nr = int(nr)
    packed = _pack(tensor_b, True, n, k, nr, "B_pack", trans=transpose_b)
    b1 = _same(tensor_b.shape[0], 1)
    kk = reduce_axis((0, k), name="k")
    full = compute((batch, m, (n + nr - 1) // nr * nr), lambda b, i, j: te_sum(
        _cast(tensor_a[0 if a1 else b, i, kk], out_dtype)
        * _cast(packed[0 if b1 else b, j // nr, kk, j % nr], out_dtype), axis=kk),
        name="T_batch_matmul_pack", tag="batch_matmul_pack",
        attrs={k: v for k, v in ref.op.attrs.items() if k == "preconditions"})
    return _crop(full, n)


def _schedule_tiled(s: Schedule, mm: Tensor, out: Tensor, mr: int | None = None,
                    nr: int | None = None, unroll_k: int | None = None,
                    row_blocks: int = 1) -> None:
    """Tile ``mr x nr`` over the last two axes of ``out``, accumulate each tile in registers
    (reduction outermost, rows unrolled, columns vectorized), parallel over (batch, panel).
    ``nr`` defaults to :func:`panel_width`; ``unroll_k > 1`` splits the reduction by it and
    unrolls the inner part; ``row_blocks > 1`` splits the row tiles into that many blocks and
    runs (panel, row block) pairs in parallel (more, smaller tasks; a packed panel is then
    packed once per block). Tuning knobs; the defaults are the hand-tuned schedule
    (``unroll_k``: :func:`default_unroll_k`)."""
    if unroll_k is None:
        unroll_k = default_unroll_k(mm.op.reduce_axis[0].dom.extent)
    n = mm.shape[-1]
    n = int(n.value) if hasattr(n, "value") else n  # a symbolic N (a relay.Any sequence):
    m = mm.shape[-2]
    m = int(m.value) if hasattr(m, "value") else m  # a symbolic M keeps the default tile
    nr = (_panel(n) if isinstance(n, int) else SYMBOLIC_NR) if nr is None else int(nr)
    mr = tile_rows() if mr is None else mr
    mr = max(1, min(mr, m)) if isinstance(m, int) else mr
    if mm.op is out.op:
        CC = s.cache_write(mm, "local")
    else:
        s[mm].set_scope("local")
        CC = mm
    *batch, i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=mr)
    jo, ji = s[out].split(j, factor=nr)
    if row_blocks > 1:
        ioo, io = s[out].split(io, nparts=row_blocks)
        s[out].reorder(*batch, jo, ioo, io, ii, ji)
        task = s[out].fuse(*batch, jo, ioo)
    else:
        s[out].reorder(*batch, jo, io, ii, ji)
        task = s[out].fuse(*batch, jo) if batch else jo
    s[out].vectorize(ji)
    s[out].parallel(task)
    s[CC].compute_at(s[out], io)
    register_tile(s, CC, unroll_k, prefetch=_prefetch_bytes(mm, m, mr))
    for t in mm.op.input_tensors:
        if t.op.tag == "matmul_pack":
            s[t].compute_at(s[out], task)
            s[t].vectorize(s[t].op.axis[-1])


def register_tile(s: Schedule, cc: Tensor, unroll_k: int = 1, prefetch: int = 0) -> None:
    """The micro-kernel of a matmul's register tile (the cache stage ``cc``, last two axes
    rows x columns, one reduction): reduction outermost (split by ``unroll_k`` and its inner
    part unrolled when > 1), rows unrolled, columns vectorized. ``prefetch > 0``: the reduction
    loop prefetches its streamed operand that many bytes ahead (the ``prefetch`` pragma:
    :mod:`tvmpy.tir.transform.inject_prefetch`)."""
    *_, ci, cj = s[cc].op.axis
    (ck,) = s[cc].op.reduce_axis
    if unroll_k > 1:
        cko, cki = s[cc].split(ck, factor=unroll_k)
        s[cc].reorder(cko, cki, ci, cj)
        s[cc].unroll(cki)
    else:
        cko = ck
        s[cc].reorder(ck, ci, cj)
    s[cc].unroll(ci)
    s[cc].vectorize(cj)
    if prefetch > 0:
        s[cc].pragma(cko, "prefetch", int(prefetch))


# how far ahead (bytes) the tiled schedule's register tile prefetches its packed panel: a
# panel of a weight too large for the caches streams from memory in the first row tile's pass,
# which the hardware prefetchers (stopping at each 4 KiB page) do not keep ahead of; 4 KiB
# ahead: 32 x 512 -> 10000 (20 MB weight) 0.70-0.75x the time, 128 x 768 -> 2048 and weights
# in L2 unchanged (Intel Xeon, Emerald Rapids class, one thread, 2026-11-30). 0: none.
PREFETCH_BYTES = 4096
# ... when the panel is read by at most this many row tiles (a larger M reads each panel from
# L2 many times; the first pass's wait is amortized and the prefetches cost load slots: 1500 x
# 1536 x 384 1.04-1.05x slower with them, 197 x 3072 x 768 unchanged, 128 x 768 x 2048 0.94x)
PREFETCH_MAX_ROW_TILES = 32


def _prefetch_bytes(mm: Tensor, m: Any, mr: int) -> int:
    """How far ahead the register tile of ``mm`` (``m`` rows, tiles of ``mr``) prefetches its
    packed panel: :data:`PREFETCH_BYTES` when the panel is a constant prepacked weight (a
    function argument, streamed from memory when it is large) read by at most
    :data:`PREFETCH_MAX_ROW_TILES` row tiles, else 0."""
    m = getattr(m, "value", m)
    packed = _packed_input(mm) if mm.op.tag == "dense_pack" else None
    if packed is None or packed.op.input_tensors or not isinstance(m, int):
        return 0
    return PREFETCH_BYTES if -(-m // max(1, mr)) <= PREFETCH_MAX_ROW_TILES else 0


# a product with at most this many rows, on packed panels, takes the GEMV schedule
GEMV_MAX_ROWS = 3
# FMA results in flight that the GEMV keeps (latency x throughput of a core's FMA pipes)
_GEMV_ACCUMULATORS = 8


def _gemv_accumulators(m: int, nr: int, k: int) -> int:
    """Partial sums along K per output vector for an ``m``-row GEMV on ``nr``-column panels:
    enough for :data:`_GEMV_ACCUMULATORS` independent FMA chains (a power of two, <= K)."""
    vectors = m * max(1, -(-nr // 16))
    u = 1
    while u * 2 * vectors <= _GEMV_ACCUMULATORS and u * 2 <= k:
        u *= 2
    return u


def _packed_input(mm: Tensor) -> Tensor | None:
    """The ``[P, K, nr]`` packed operand of a packed product (prepacked or packed in-kernel)."""
    for t in mm.op.input_tensors:
        if len(t.shape) == 3 and (t.op.tag == "matmul_pack" or not t.op.input_tensors):
            return t
    return None


def _schedule_gemv(s: Schedule, mm: Tensor, out: Tensor, k_acc: int) -> None:
    """A memory-bound product of few rows by packed panels ``[P, K, nr]`` (a GEMV): each
    parallel task takes a panel and streams it linearly, one broadcast-FMA per row per
    ``nr``-wide vector; the reduction is split into ``k_acc`` interleaved partial sums
    (``k = ko * k_acc + u``: rfactor over ``u``), so that ``rows * k_acc * nr / 16``
    independent accumulators hide the FMA latency (one row by one 32-column panel would
    otherwise chain every FMA on 2 registers). The partial sums are added at the end."""
    packed = _packed_input(mm)
    nr = get_const_tuple(packed.shape[-1:], "gemv: panel", symbolic=False)[0] if packed is not None else \
        _panel(get_const_tuple(mm.shape[-1:], "gemv: N", symbolic=False)[0])
    (rk,) = s[mm].op.reduce_axis
    _, ku = s[mm].split(rk, factor=k_acc)
    rf = s.rfactor(mm, ku, factor_axis=len(mm.shape) - 1)  # [M, k_acc, N]
    s[rf].set_scope("local")
    i, j = s[out].op.axis
    jo, ji = s[out].split(j, factor=nr)
    s[out].reorder(jo, i, ji)
    s[out].parallel(jo)
    if mm.op is not out.op:
        s[mm].set_scope("local")
        s[mm].compute_at(s[out], jo)
        mi, mj = s[mm].op.axis
        (mu,) = s[mm].op.reduce_axis
        s[mm].reorder(mi, mu, mj)
        s[mm].vectorize(mj)
        s[out].vectorize(ji)
    else:
        (mu,) = s[out].op.reduce_axis
        s[out].reorder(jo, i, mu, ji)
        s[out].vectorize(ji)
    s[rf].compute_at(s[out], jo)
    ri, ru, rj = s[rf].op.axis
    (rko,) = s[rf].op.reduce_axis
    s[rf].reorder(rko, ri, ru, rj)
    s[rf].unroll(ri)
    s[rf].unroll(ru)
    s[rf].vectorize(rj)
    if _prefetch_bytes(mm, mm.shape[-2], 1):
        s[rf].pragma(rko, "prefetch", PREFETCH_BYTES)
    if packed is not None and packed.op.tag == "matmul_pack":
        s[packed].compute_at(s[out], jo)
        s[packed].vectorize(s[packed].op.axis[-1])


def _schedule_dot(s: Schedule, mm: Tensor, out: Tensor, nj: int = 8, mi: int = 2) -> None:
    """For ``dense`` with its untransposed ``[N, K]`` weight (rows contiguous along K): each
    output is a dot product of two contiguous rows. The reduction is split by the vector width
    and factored (rfactor), so an ``mi x nj`` tile of outputs accumulates in ``mi * nj`` vector
    registers over K/16 steps (each data vector reused for ``nj`` weight rows, each weight
    vector for ``mi`` data rows), then each is reduced horizontally. Without a packed copy of
    the weight this wins when K is long (the horizontal sums amortized, and packing a
    ``[N, K]`` weight with a 4 KiB row stride is slow)."""
    k = get_const_tuple((mm.op.reduce_axis[0].dom.extent,), "dense schedule: K", symbolic=False)[0]
    n = get_const_tuple(mm.shape[-1:], "dense schedule: N", symbolic=False)[0]
    m = mm.shape[-2]
    m = int(m.value) if hasattr(m, "value") else m
    vec = max(1, min(k, 16))  # (K = 0: an empty reduction, the outputs are zeros)
    # tiles that divide N and M keep the register tile's extent constant (no guards)
    nj = max(d for d in range(1, min(nj, n) + 1) if n % d == 0)
    mi = max(d for d in range(1, min(mi, m) + 1) if m % d == 0) if isinstance(m, int) else 1
    (rk,) = s[mm].op.reduce_axis
    _, ki = s[mm].split(rk, factor=vec)
    rf = s.rfactor(mm, ki, factor_axis=len(mm.shape))
    s[rf].set_scope("local")
    *batch, i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=mi)
    jo, ji = s[out].split(j, factor=nj)
    s[out].reorder(*batch, jo, io, ii, ji)
    task = s[out].fuse(*batch, jo, io)
    s[out].parallel(task)
    if mm.op is not out.op:
        s[mm].compute_at(s[out], task)
    s[rf].compute_at(s[out], task)
    *rb, ri, rj, rv = s[rf].op.axis
    (rko,) = s[rf].op.reduce_axis
    s[rf].reorder(*rb, rko, ri, rj, rv)
    s[rf].unroll(ri)
    s[rf].unroll(rj)
    s[rf].vectorize(rv)


def _find(outs: Any, what: str) -> tuple[Schedule, Tensor, Tensor, list[Tensor]]:
    """The schedule of ``outs``, its matmul stage and the stage its tiles are anchored at."""
    outs = _outputs(outs)
    s = create_schedule([o.op for o in outs])
    found: list[Tensor] = []

    def cb(op: Any) -> None:
        if op.tag in _TAGS and not found:
            found.append(op.output(0))

    traverse_inline(s, outs[0].op, cb)
    if not found:
        raise ValueError(f"{what}: no dense/matmul/batch_matmul stage among the outputs' inputs")
    mm = found[0]
    return s, mm, _anchor(mm, outs[0]), outs


def _anchor(mm: Tensor, out: Tensor) -> Tensor:
    """:func:`anchor`, also when ``out`` has the shape of the product cropped to fewer columns
    (the packed computes run over whole panels, see :func:`_crop`)."""
    a, b = [str(d) for d in mm.shape], [str(d) for d in out.shape]
    if a[:-1] == b[:-1] and a[-1] != b[-1] and mm.shape[-1] != out.shape[-1]:
        wide, n = (getattr(d, "value", d) for d in (mm.shape[-1], out.shape[-1]))
        if isinstance(wide, int) and isinstance(n, int) and 0 < n < wide:
            return out
    return anchor(mm, out)


def _dot_ok(mm: Tensor) -> bool:
    """B read along K (dense, or a B-transposed product): contiguous rows -> dot products."""
    attrs = mm.op.attrs
    return mm.op.tag == "dense" or bool(mm.op.tag in ("matmul", "batch_matmul")
                                        and attrs.get("transpose_b")
                                        and not attrs.get("transpose_a"))


def _default_plan(mm: Tensor) -> tuple[str, int, int]:
    """The hand-tuned choice for ``mm``: ``("dot", nj, mi)``, ``("gemv", k_acc, 0)`` (few rows
    by packed panels) or ``("tiled", 8, 0)``."""
    dot = _dot_ok(mm)
    # ... worth it when the rows are few or long (each dot ends in a 16-lane horizontal sum;
    # otherwise the tiled nest with strided B loads wins, measured)
    m, k = mm.shape[-2], mm.op.reduce_axis[0].dom.extent
    m = int(m.value) if hasattr(m, "value") else None
    dot = dot and hasattr(k, "value")  # (a run-time K, relay.Any: the tiled nest)
    k = int(k.value) if hasattr(k, "value") else 0
    packed = _packed_input(mm) if mm.op.tag == "dense_pack" else None
    if packed is not None and m is not None and m <= GEMV_MAX_ROWS:
        k_acc = _gemv_accumulators(m, get_const_tuple(packed.shape[-1:], "gemv: panel", symbolic=False)[0], k)
        if k_acc > 1:
            return "gemv", k_acc, 0
    if dot and (m is None or m <= 8):
        return "dot", 4, 1
    if dot and k >= 256:
        return "dot", 8, 2
    return "tiled", 8, 0


def _gemv_panel(mm: Tensor) -> int | None:
    """The tile width for ``topi.nn.matmul`` of one row by an untransposed ``B[K, N]``: 128
    columns (8 vectors; 256 / 512 from N = 2048 / 4096 on) rather than 32, so each task streams wider runs of B's rows (at 32,
    N = 1024 puts every row of a panel in the same cache set: 0.34x numpy; at 128 0.79-1.05x
    on N = 1000, 1023, 1024, one thread, measured 2026-11-26). None otherwise."""
    attrs = mm.op.attrs
    if mm.op.tag != "matmul" or attrs.get("transpose_a") or attrs.get("transpose_b"):
        return None
    m, n = (getattr(d, "value", d) for d in mm.shape[-2:])
    if m != 1 or not isinstance(n, int) or n < 256:
        return None
    # wider on long rows (fewer, longer runs per row of B: one thread, 1x4096x1024 0.25 ->
    # 0.18 ms at 512 columns, 1x3072x768 0.11 -> 0.09 ms at 256), keeping >= 8 parallel tasks
    return max(w for w in (128, 256, 512) if w == 128 or n >= 8 * w)


def _schedule(outs: Any, what: str) -> Schedule:
    s, mm, out, _ = _find(outs, what)
    plan, a, b = _default_plan(mm)
    if plan == "dot":
        _schedule_dot(s, mm, out, nj=a, mi=b)
    elif plan == "gemv":
        _schedule_gemv(s, mm, out, a)
    else:
        _schedule_tiled(s, mm, out, nr=_gemv_panel(mm))
    return s


def schedule_dense(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.dense`` or ``dense_pack`` (+ fused bias/elementwise)."""
    return _schedule(outs, "schedule_dense")


def schedule_dense_pack(outs: Any) -> Schedule:
    """x86 schedule of ``dense_pack``."""
    return _schedule(outs, "schedule_dense_pack")


def schedule_matmul(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.matmul``."""
    return _schedule(outs, "schedule_matmul")


def schedule_batch_matmul(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.batch_matmul`` or ``batch_matmul_pack``."""
    return _schedule(outs, "schedule_batch_matmul")


# ---------------------------------------------------------------------------------------------
# AutoTVM templates: the schedules above with their tile sizes as knobs. The fallback config
# (no tuned record) sets every knob to the hand-tuned default, so an untuned build lowers to
# exactly the schedules above.
_MR = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16)  # rows of a register tile
_NR = (8, 16, 32, 48, 64)  # columns of a register tile / width of a packed panel
_UNROLL_K = (1, 2, 4, 8)
_ROW_BLOCKS = (1, 2, 4)


def _const_dims(t: Tensor, what: str) -> tuple[int, ...]:
    return get_const_tuple(t.shape, f"{what}: a tunable template needs constant shapes", symbolic=False)


def _divisors(n: int, most: int) -> list[int]:
    return [d for d in range(1, min(n, most) + 1) if n % d == 0]


def _define_nr(cfg: Any, n: int) -> None:
    """Knob ``tile_x``: the panel / register-tile width (default :func:`panel_width`)."""
    cands = sorted({c for c in _NR if c <= n} | {_panel(n)})
    cfg.define_split("tile_x", n, policy="candidate", candidate=[[-1, c] for c in cands])
    if cfg.is_fallback:
        cfg["tile_x"] = SplitEntity([-1, _panel(n)])


def _define_tiled(cfg: Any, m: int, k: int = 0) -> None:
    """Knobs ``tile_y`` (rows of a register tile, default :func:`tile_rows`), ``unroll_k``
    (default :func:`default_unroll_k` of the reduction length ``k``) and ``row_blocks``
    (default 1)."""
    mr0 = max(1, min(tile_rows(), m))
    cands = sorted({c for c in _MR if c <= m} | {mr0})
    cfg.define_split("tile_y", m, policy="candidate", candidate=[[-1, c] for c in cands])
    cfg.define_knob("unroll_k", list(_UNROLL_K))
    cfg.define_knob("row_blocks", [b for b in _ROW_BLOCKS if b == 1 or m >= 2 * b * mr0])
    if cfg.is_fallback:
        cfg["tile_y"] = SplitEntity([-1, mr0])
        cfg["unroll_k"] = OtherOptionEntity(default_unroll_k(k))
        cfg["row_blocks"] = OtherOptionEntity(1)


def _define_dot(cfg: Any, m: int, n: int, nj0: int, mi0: int) -> None:
    """Knobs ``dot_y`` / ``dot_x``: the ``mi x nj`` output tile of the dot-product schedule."""
    ys, xs = _divisors(m, 4), _divisors(n, 16)
    cfg.define_split("dot_y", m, policy="candidate", candidate=[[-1, c] for c in ys])
    cfg.define_split("dot_x", n, policy="candidate", candidate=[[-1, c] for c in xs])
    if cfg.is_fallback:
        cfg["dot_y"] = SplitEntity([-1, max(d for d in ys if d <= max(mi0, 1))])
        cfg["dot_x"] = SplitEntity([-1, max(d for d in xs if d <= nj0)])


def _schedule_cfg(cfg: Any, outs: Any, what: str) -> Schedule:
    """The x86 matmul schedule with the knobs of ``cfg`` (defined here, except ``tile_x`` of
    the packing computes, which is defined by the compute)."""
    s, mm, out, _ = _find(outs, what)
    *_, m, n = (int(d) for d in _const_dims(mm, what))
    k = int(getattr(mm.op.reduce_axis[0].dom.extent, "value", 0))
    plan, nj0, mi0 = _default_plan(mm)
    modes = ["dot", "tiled"] if _dot_ok(mm) else ["tiled"]
    if plan == "gemv":
        modes.append("gemv")
        cfg.define_knob("k_acc", [1 << e for e in range(4) if 1 << e <= max(1, k)])
        if cfg.is_fallback:
            cfg["k_acc"] = OtherOptionEntity(nj0)
    cfg.define_knob("mode", modes)
    packed = mm.op.tag in ("dense_pack", "batch_matmul_pack")
    if not packed:  # (the packing computes define it: it is their panel width)
        _define_nr(cfg, n)
    _define_tiled(cfg, m, k)
    if "dot" in modes:
        _define_dot(cfg, m, n, nj0 if plan == "dot" else 8, mi0 if plan == "dot" else 2)
    if cfg.is_fallback:
        cfg["mode"] = OtherOptionEntity(plan)
    if cfg["mode"].val == "gemv":
        _schedule_gemv(s, mm, out, cfg["k_acc"].val)
    elif cfg["mode"].val == "dot":
        _schedule_dot(s, mm, out, nj=cfg["dot_x"].size[-1], mi=cfg["dot_y"].size[-1])
    else:
        nr = cfg["tile_x"].size[-1] if "tile_x" in cfg else None  # prepacked: its layout's
        _schedule_tiled(s, mm, out, mr=cfg["tile_y"].size[-1], nr=nr,
                        unroll_k=cfg["unroll_k"].val,
                        row_blocks=cfg["row_blocks"].val if "row_blocks" in cfg else 1)
    return s


def _flop(cfg: Any, out: Tensor, k: int) -> None:
    size = 1
    for d in _const_dims(out, "matmul template"):
        size *= int(d)
    cfg.add_flop(2.0 * size * k)


@register_topi_compute("dense.x86")
def dense_nopack(cfg: Any, data: Tensor, weight: Tensor, out_dtype: str | None = None) -> Tensor:
    """``topi.nn.dense`` (2-D, constant shapes) as an AutoTVM template (task "dense.x86")."""
    out = _nn_dense(data, weight, None, out_dtype)
    _flop(cfg, out, int(_const_dims(data, "dense.x86")[1]))
    return out


@register_topi_schedule("dense.x86")
def schedule_dense_nopack(cfg: Any, outs: Any) -> Schedule:
    """The tunable x86 schedule of :func:`dense_nopack` (dot-product or tiled nest)."""
    return _schedule_cfg(cfg, outs, "schedule_dense_nopack")


@register_topi_compute("dense_pack.x86")
def dense_pack_x86(cfg: Any, data: Tensor, weight: Tensor, out_dtype: str | None = None) -> Tensor:
    """:func:`dense_pack` as an AutoTVM template (task "dense_pack.x86"): the panel width is
    the knob ``tile_x``."""
    n, k = (int(d) for d in _const_dims(weight, "dense_pack.x86"))
    _define_nr(cfg, n)
    out = dense_pack(data, weight, None, out_dtype, cfg["tile_x"].size[-1])
    _flop(cfg, out, k)
    return out


@register_topi_schedule("dense_pack.x86")
def schedule_dense_pack_x86(cfg: Any, outs: Any) -> Schedule:
    """The tunable x86 schedule of :func:`dense_pack_x86`."""
    return _schedule_cfg(cfg, outs, "schedule_dense_pack_x86")


@register_topi_compute("contrib_dense_pack.x86")
def contrib_dense_pack(cfg: Any, data: Tensor, packed: Tensor,
                       out_dtype: str | None = None, units: int | None = None) -> Tensor:
    """:func:`dense_prepacked` as an AutoTVM template (task "contrib_dense_pack.x86"; the
    panel width is fixed by the packed layout)."""
    out = dense_prepacked(data, packed, out_dtype, units)
    _flop(cfg, out, int(_const_dims(packed, "contrib_dense_pack.x86")[1]))
    return out


@register_topi_schedule("contrib_dense_pack.x86")
def schedule_contrib_dense_pack(cfg: Any, outs: Any) -> Schedule:
    """The tunable x86 schedule of :func:`contrib_dense_pack`."""
    return _schedule_cfg(cfg, outs, "schedule_contrib_dense_pack")


@register_topi_compute("batch_matmul.x86")
def batch_matmul_x86(cfg: Any, tensor_a: Tensor, tensor_b: Tensor, out_dtype: str | None = None,
                     transpose_a: bool = False, transpose_b: bool = True) -> Tensor:
    """``topi.nn.batch_matmul`` (constant shapes) as an AutoTVM template."""
    out = batch_matmul(tensor_a, tensor_b, None, out_dtype, bool(transpose_a), bool(transpose_b))
    dims = _const_dims(tensor_a, "batch_matmul.x86")
    _flop(cfg, out, int(dims[1] if transpose_a else dims[2]))
    return out


@register_topi_schedule("batch_matmul.x86")
def schedule_batch_matmul_x86(cfg: Any, outs: Any) -> Schedule:
    """The tunable x86 schedule of :func:`batch_matmul_x86`."""
    return _schedule_cfg(cfg, outs, "schedule_batch_matmul_x86")


@register_topi_compute("batch_matmul_pack.x86")
def batch_matmul_pack_x86(cfg: Any, tensor_a: Tensor, tensor_b: Tensor,
                          out_dtype: str | None = None, transpose_b: bool = True) -> Tensor:
    """:func:`batch_matmul_pack` as an AutoTVM template (panel width: knob ``tile_x``)."""
    _, n, k = (int(d) for d in _const_dims(tensor_b, "batch_matmul_pack.x86"))
    if not transpose_b:
        n, k = k, n
    _define_nr(cfg, n)
    out = batch_matmul_pack(tensor_a, tensor_b, out_dtype, cfg["tile_x"].size[-1],
                            bool(transpose_b))
    _flop(cfg, out, k)
    return out


@register_topi_schedule("batch_matmul_pack.x86")
def schedule_batch_matmul_pack_x86(cfg: Any, outs: Any) -> Schedule:
    """The tunable x86 schedule of :func:`batch_matmul_pack_x86`."""
    return _schedule_cfg(cfg, outs, "schedule_batch_matmul_pack_x86")
