"""``dense.cuda`` and ``batch_matmul.cuda``: tiled matrix products with shared-memory tiles.

The output ``[(batch,) M, N]`` is split ``[block, thread, inner]`` along rows (``tile_y``) and
columns (``tile_x``): blocks on ``blockIdx.y/x`` (the batch on ``blockIdx.z``), threads on
``threadIdx.y/x``, each thread accumulating ``inner_y x inner_x`` outputs in a ``local`` stage.
The reduction is split by ``tile_k``: per outer step the block copies its ``A`` rows and ``B``
columns (``k`` chunk) into ``shared`` memory, cooperatively. Knobs: ``tile_y``, ``tile_x``,
``tile_k``, ``auto_unroll_max_step``, ``unroll_explicit``.

Fallback: up to 8 x 16 threads (4 rows x 2 columns... see :func:`fallback_config`), k chunks of up to
16, divisors only; with a single row (batch 1 inference) all threads go to the columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import autotvm
from ...autotvm.space import OtherOptionEntity, SplitEntity
from ...te import Tensor, create_schedule, thread_axis
from ..nn.dense import batch_matmul as _nn_batch_matmul
from ..nn.dense import dense as _nn_dense
from ..nn.dense import matmul as _nn_matmul
from ..nn.utils import traverse_inline
from .utils import (
    _largest_divisor,
    apply_unroll,
    const_int,
    cooperative_fetch,
    fallback_tile,
    max_threads,
    output_stages,
    unroll_knobs,
)

if TYPE_CHECKING:
    from ...te.schedule import Schedule

__all__ = ["dense", "schedule_dense", "batch_matmul", "schedule_batch_matmul", "fallback_config",
           "schedule_matmul_tiles"]


def _kmajor(t: Tensor, k_last: bool) -> Tensor:
    """The operand ``t`` with the reduction axis first (after a batch axis): a copy stage that
    the schedule keeps in shared memory, so that a thread's outputs read it as short vectors
    (``float4``) without bank conflicts; ``k_last``: ``t`` is ``[(b,) X, K]`` (transposed
    while copied), else already ``[(b,) K, X]``."""
    from ...te import compute

    if not k_last:
        return compute(t.shape, lambda *i: t(*i), name=f"{t.op.name}_kmajor", tag=OPERAND_TAG)
    if len(t.shape) == 2:
        return compute((t.shape[1], t.shape[0]), lambda k, x: t[x, k],
                       name=f"{t.op.name}_kmajor", tag=OPERAND_TAG)
    return compute((t.shape[0], t.shape[2], t.shape[1]), lambda b, k, x: t[b, x, k],
                   name=f"{t.op.name}_kmajor", tag=OPERAND_TAG)


OPERAND_TAG = "matmul_operand"


@autotvm.register_topi_compute("dense.cuda")
def dense(cfg: Any, data: Tensor, weight: Tensor, bias: Tensor | None = None,
          out_dtype: str | None = None) -> Tensor:
    """``topi.nn.dense`` (``data[M, K] @ weight[N, K]^T (+ bias)``), tunable on GPUs; both
    operands pass through k-major copy stages (the shared-memory tiles)."""
    _nn_dense(data, weight, bias, out_dtype)  # the shape checks and their errors
    m, k = (const_int(d, "dense.cuda: data shape") for d in data.shape)
    n = const_int(weight.shape[0], "dense.cuda: weight shape")
    cfg.add_flop(2 * m * n * k)
    return _nn_matmul(_kmajor(data, True), _kmajor(weight, True), bias, out_dtype, True, False,
                      _op="dense")


@autotvm.register_topi_schedule("dense.cuda")
def schedule_dense(cfg: Any, outs: Any) -> Schedule:
    """Schedule ``dense.cuda`` (bias and elementwise stages fused after it)."""
    return _schedule(cfg, outs, "dense")


@autotvm.register_topi_compute("batch_matmul.cuda")
def batch_matmul(cfg: Any, tensor_a: Tensor, tensor_b: Tensor, oshape: Any = None,
                 out_dtype: str | None = None, transpose_a: bool = False,
                 transpose_b: bool = True) -> Tensor:
    """``topi.nn.batch_matmul``, tunable on GPUs (operands through k-major copy stages)."""
    out = _nn_batch_matmul(tensor_a, tensor_b, oshape, out_dtype, transpose_a, transpose_b)
    b, m, n = (const_int(d, "batch_matmul.cuda: output shape") for d in out.shape)
    k = const_int(tensor_a.shape[1] if transpose_a else tensor_a.shape[2],
                  "batch_matmul.cuda: reduction extent")
    cfg.add_flop(2 * b * m * n * k)
    return _nn_batch_matmul(_kmajor(tensor_a, not transpose_a), _kmajor(tensor_b, transpose_b),
                            oshape, out_dtype, True, False)


@autotvm.register_topi_schedule("batch_matmul.cuda")
def schedule_batch_matmul(cfg: Any, outs: Any) -> Schedule:
    """Schedule ``batch_matmul.cuda`` (elementwise stages fused after it)."""
    return _schedule(cfg, outs, "batch_matmul")


def _schedule(cfg: Any, outs: Any, tag: str) -> Schedule:
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    s = create_schedule([o.op for o in outs])

    def callback(op: Any) -> None:
        if op.tag == tag:
            schedule_matmul_tiles(cfg, s, op.output(0))

    traverse_inline(s, outs[0].op, callback)
    return s


def fallback_config(cfg: Any, m: int, n: int, k: int, batch: int) -> None:
    """The untuned config of the matmul template for an ``m x n x k`` product (``batch`` of
    them), set into ``cfg``: every knob of :func:`schedule_matmul_tiles`."""
    limit = max_threads()
    cfg["double_buffer"] = OtherOptionEntity(0)
    cfg["vectorize"] = OtherOptionEntity(1)
    if m == 1:  # a row (GEMV): all threads on the columns
        cfg["tile_y"] = SplitEntity([-1, 1, 1, 1])
        cfg["tile_x"] = fallback_tile(n, min(64, limit), 1, parts=4)
        cfg["tile_k"] = SplitEntity([-1, _largest_divisor(k, 16)])
        cfg["vectorize"] = OtherOptionEntity(0)
        return
    # the SIMT GEMM recipe: 16 x 16 threads, 2 x 2 virtual threads of 4 x 4 outputs (a
    # 128 x 128 block tile), smaller where the grid would not fill the device's SMs
    sms = _multiprocessors()
    best: tuple[int, tuple[int, ...]] | None = None
    for ty, tx, vy, vx, iy, ix in ((16, 16, 2, 2, 4, 4), (16, 16, 1, 2, 4, 4),
                                   (16, 16, 1, 1, 4, 4), (16, 16, 1, 1, 2, 4),
                                   (8, 16, 1, 1, 4, 4), (8, 16, 1, 1, 2, 2)):
        if ty * tx > limit:
            continue
        bm, bn = ty * vy * iy, tx * vx * ix
        if m % bm or n % bn:
            continue
        blocks = batch * (m // bm) * (n // bn)
        if best is None or blocks > best[0]:
            best = (blocks, (ty, tx, vy, vx, iy, ix))
        if blocks * 10 >= sms * 9:  # the largest tile that (nearly) fills the SMs: on the
            break  # H200, 2048x256x1024 in 128 64x64 tiles 0.066 ms, in 256 32x64 ones 0.19
    if best is None:  # no exact tiling: the guarded classic tiles (divisors only)
        cfg["tile_y"] = fallback_tile(m, min(8, limit), 4, parts=4)
        cfg["tile_x"] = fallback_tile(n, max(1, min(16, limit // 8)), 2, parts=4)
        cfg["tile_k"] = SplitEntity([-1, _largest_divisor(k, 16)])
        cfg["vectorize"] = OtherOptionEntity(0)
        return
    ty, tx, vy, vx, iy, ix = best[1]
    cfg["tile_y"] = SplitEntity([-1, vy, ty, iy])
    cfg["tile_x"] = SplitEntity([-1, vx, tx, ix])
    # k steps of 16 where that gives every thread one vector of each tile per virtual thread
    kt = 16 if (16 * ty * iy) % (4 * ty * tx) == 0 and k % 16 == 0 else _largest_divisor(k, 8)
    cfg["tile_k"] = SplitEntity([-1, kt])
    # double buffering with virtual threads is correct too (each vthread's copy gets both
    # halves) but not yet measured against the single-buffered 128x128 tiles on a GPU
    # (bench/gpu_gemm.py "... db" variants): the fallback keeps it for vthread-free tiles
    cfg["double_buffer"] = OtherOptionEntity(1 if k // kt > 1 and vy * vx == 1 else 0)


def _multiprocessors() -> int:
    """Multiprocessors of the current target (``-num_sms``... attribute if any), else 132
    (an H100/H200): the fallback picks smaller tiles when the grid would not fill them."""
    from ...target import Target

    tgt = Target.current()
    n = getattr(tgt, "multi_processor_count", None) if tgt is not None else None
    return int(n) if n else 132


def schedule_matmul_tiles(cfg: Any, s: Schedule, mm: Tensor) -> None:
    """The knobs and the schedule of the product stage ``mm`` (2-D dense or 3-D batched)
    whose operands are the k-major copy stages of :func:`_kmajor`: they become the
    shared-memory tiles (fetched cooperatively, in vectors along the source's contiguous axis
    with knob ``vectorize``; double-buffered with knob ``double_buffer``); each thread copies
    its ``inner`` rows/columns of a k step to registers (vectors along them) and accumulates
    ``vthread x inner`` outputs per axis."""
    a, b = mm.op.input_tensors
    axes = s[mm].op.axis
    y, x = axes[-2], axes[-1]
    (kk,) = s[mm].op.reduce_axis
    cfg.define_split("tile_y", y, num_outputs=4)
    cfg.define_split("tile_x", x, num_outputs=4)
    cfg.define_split("tile_k", kk, num_outputs=2)
    cfg.define_knob("vectorize", [0, 1])
    cfg.define_knob("double_buffer", [0, 1])
    unroll_knobs(cfg, (0, 64, 512, 1500))
    if cfg.is_fallback:
        batch = const_int(axes[0].dom.extent) if len(axes) == 3 else 1
        fallback_config(cfg, const_int(y.dom.extent), const_int(x.dom.extent),
                  const_int(kk.dom.extent), batch)

    output, CL = output_stages(s, mm)
    operands = []
    for t in (a, b):
        if t.op.tag == OPERAND_TAG:
            s[t].set_scope("shared")
            operands.append(t)
        else:  # a product built elsewhere: plain cache reads
            operands.append(s.cache_read(t, "shared", [CL]))
    AA, BB = operands
    st = s[output]
    oaxes = st.op.axis
    by, vy, ty, yi = cfg["tile_y"].apply(s, output, oaxes[-2])
    bx, vx, tx, xi = cfg["tile_x"].apply(s, output, oaxes[-1])
    if len(oaxes) == 3:
        bz = oaxes[0]
        st.reorder(bz, by, bx, vy, vx, ty, tx, yi, xi)
        st.bind(bz, thread_axis("blockIdx.z"))
        scope = bz
    else:
        st.reorder(by, bx, vy, vx, ty, tx, yi, xi)
        scope = by
    st.bind(by, thread_axis("blockIdx.y"))
    st.bind(bx, thread_axis("blockIdx.x"))
    st.bind(vy, thread_axis("vthread", name="vy"))
    st.bind(vx, thread_axis("vthread", name="vx"))
    st.bind(ty, thread_axis("threadIdx.y"))
    st.bind(tx, thread_axis("threadIdx.x"))
    s[CL].compute_at(st, tx)
    caxes = s[CL].op.axis
    (kk,) = s[CL].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, CL, kk)
    s[CL].reorder(ko, ki, caxes[-2], caxes[-1])
    vec = bool(cfg["vectorize"].val)
    if vec:  # registers: each thread's inner rows / columns of a k step, as vectors
        s[CL].unroll(ki)
        s[CL].unroll(caxes[-2])
        s[CL].unroll(caxes[-1])
        for load, inner in ((AA, cfg["tile_y"].size[3]), (BB, cfg["tile_x"].size[3])):
            LL = s.cache_read(load, "local", [CL])
            s[LL].compute_at(s[CL], ki)
            if inner in (2, 4):
                s[LL].vectorize(s[LL].op.axis[-1])
    threads = [("threadIdx.y", cfg["tile_y"].size[2]), ("threadIdx.x", cfg["tile_x"].size[2])]
    for load in (AA, BB):
        s[load].compute_at(s[CL], ko)
        if vec and load.op.tag == OPERAND_TAG:
            _vector_fetch(s, load, threads)
        else:
            cooperative_fetch(s, load, threads)
        # double buffering (knob); with virtual threads each one's copy of a tile gets the
        # two halves (InjectDoubleBuffer takes all the copies of a buffer together)
        if cfg["double_buffer"].val:
            s[load].double_buffer()
    apply_unroll(cfg, st, scope)


def _vector_fetch(s: Schedule, load: Tensor, threads: list[tuple[str, int]]) -> None:
    """Cooperative fetch of a k-major copy stage in vectors of 4 (2) along its source's
    contiguous axis (k for a transposing copy, else the row), where the source's row length
    allows aligned vectors; consecutive threads take consecutive vectors' other axis."""
    st = s[load]
    src = load.op.input_tensors[0]
    inner_src = const_int(src.shape[-1])
    transposing = not _is_identity_copy(load)
    width = 4 if inner_src % 4 == 0 else 2 if inner_src % 2 == 0 else 1
    kax, xax = st.op.axis[-2], st.op.axis[-1]
    kext, xext = const_int(kax.dom.extent), const_int(xax.dom.extent)
    if width > 1 and transposing and kext % width == 0:
        ko, kv = st.split(kax, factor=width)
        st.reorder(ko, xax, kv)
        fused = st.fuse(*st.op.axis[:-2], ko, xax) if len(st.op.axis) > 2 else st.fuse(ko, xax)
    elif width > 1 and not transposing and xext % width == 0:
        xo, kv = st.split(xax, factor=width)
        fused = st.fuse(*st.op.axis[:-1], xo)
    else:
        cooperative_fetch(s, load, threads)
        return
    # exact splits by the thread counts, innermost thread axis fastest (a guard only where the
    # tile has fewer vectors than the block threads)
    (ty_tag, ny), (tx_tag, nx) = threads
    _, inner = st.split(fused, factor=ny * nx)
    t_y, t_x = st.split(inner, factor=nx)
    st.bind(t_y, thread_axis(ty_tag))
    st.bind(t_x, thread_axis(tx_tag))
    st.vectorize(kv)


def _is_identity_copy(load: Tensor) -> bool:
    from ...tir import expr as E

    body = load.op.body[0]
    if not isinstance(body, E.ProducerLoad):
        return False
    return all(isinstance(i, E.Var) and i is ax.var for i, ax in zip(body.indices, load.op.axis))
