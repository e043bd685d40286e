"""``dense.cuda`` and ``batch_matmul.cuda``: tiled matrix products with shared-memory tiles.

The output ``[(batch,) M, N]`` is split ``[block, thread, inner]`` along rows (``tile_y``) and
columns (``tile_x``): blocks on ``blockIdx.y/x`` (the batch on ``blockIdx.z``), threads on
``threadIdx.y/x``, each thread accumulating ``inner_y x inner_x`` outputs in a ``local`` stage.
The reduction is split by ``tile_k``: per outer step the block copies its ``A`` rows and ``B``
columns (``k`` chunk) into ``shared`` memory, cooperatively. Knobs: ``tile_y``, ``tile_x``,
``tile_k``, ``auto_unroll_max_step``, ``unroll_explicit``.

Fallback: up to 8 x 16 threads (4 rows x 2 columns... see :func:`_fallback`), k chunks of up to
16, divisors only; with a single row (batch 1 inference) all threads go to the columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import autotvm
from ...autotvm.space import SplitEntity
from ...te import Tensor, create_schedule, thread_axis
from ..nn.dense import batch_matmul as _nn_batch_matmul
from ..nn.dense import dense as _nn_dense
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

__all__ = ["dense", "schedule_dense", "batch_matmul", "schedule_batch_matmul"]


@autotvm.register_topi_compute("dense.cuda")
def dense(cfg: Any, data: Tensor, weight: Tensor, bias: Tensor | None = None,
          out_dtype: str | None = None) -> Tensor:
    """``topi.nn.dense`` (``data[M, K] @ weight[N, K]^T (+ bias)``), tunable on GPUs."""
    out = _nn_dense(data, weight, bias, out_dtype)
    m, k = (const_int(d, "dense.cuda: data shape") for d in data.shape)
    n = const_int(weight.shape[0], "dense.cuda: weight shape")
    cfg.add_flop(2 * m * n * k)
    return out


@autotvm.register_topi_schedule("dense.cuda")
def schedule_dense(cfg: Any, outs: Any) -> Schedule:
    """Schedule ``dense.cuda`` (bias and elementwise stages fused after it)."""
    return _schedule(cfg, outs, "dense")


@autotvm.register_topi_compute("batch_matmul.cuda")
def batch_matmul(cfg: Any, tensor_a: Tensor, tensor_b: Tensor, oshape: Any = None,
                 out_dtype: str | None = None, transpose_a: bool = False,
                 transpose_b: bool = True) -> Tensor:
    """``topi.nn.batch_matmul``, tunable on GPUs."""
    out = _nn_batch_matmul(tensor_a, tensor_b, oshape, out_dtype, transpose_a, transpose_b)
    b, m, n = (const_int(d, "batch_matmul.cuda: output shape") for d in out.shape)
    k = const_int(tensor_a.shape[1] if transpose_a else tensor_a.shape[2],
                  "batch_matmul.cuda: reduction extent")
    cfg.add_flop(2 * b * m * n * k)
    return out


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


def _fallback(cfg: Any, m: int, n: int, k: int) -> None:
    limit = max_threads()
    if m == 1:
        cfg["tile_y"] = SplitEntity([-1, 1, 1])
        cfg["tile_x"] = fallback_tile(n, min(64, limit), 1, parts=3)
    else:
        cfg["tile_y"] = fallback_tile(m, min(8, limit), 4, parts=3)
        cfg["tile_x"] = fallback_tile(n, max(1, min(16, limit // 8)), 2, parts=3)
    cfg["tile_k"] = SplitEntity([-1, _largest_divisor(k, 16)])


def schedule_matmul_tiles(cfg: Any, s: Schedule, mm: Tensor) -> None:
    """The knobs and the schedule of the product stage ``mm`` (2-D dense or 3-D batched)."""
    a, b = mm.op.input_tensors
    axes = s[mm].op.axis
    y, x = axes[-2], axes[-1]
    (kk,) = s[mm].op.reduce_axis
    cfg.define_split("tile_y", y, num_outputs=3)
    cfg.define_split("tile_x", x, num_outputs=3)
    cfg.define_split("tile_k", kk, num_outputs=2)
    unroll_knobs(cfg, (0, 64, 512, 1500))
    if cfg.is_fallback:
        _fallback(cfg, const_int(y.dom.extent), const_int(x.dom.extent),
                  const_int(kk.dom.extent))

    output, CL = output_stages(s, mm)
    AA = s.cache_read(a, "shared", [CL])
    BB = s.cache_read(b, "shared", [CL])
    st = s[output]
    oaxes = st.op.axis
    by, ty, yi = cfg["tile_y"].apply(s, output, oaxes[-2])
    bx, tx, xi = cfg["tile_x"].apply(s, output, oaxes[-1])
    if len(oaxes) == 3:
        bz = oaxes[0]
        st.reorder(bz, by, bx, ty, tx, yi, xi)
        st.bind(bz, thread_axis("blockIdx.z"))
        scope = bz
    else:
        st.reorder(by, bx, ty, tx, yi, xi)
        scope = by
    st.bind(by, thread_axis("blockIdx.y"))
    st.bind(bx, thread_axis("blockIdx.x"))
    st.bind(ty, thread_axis("threadIdx.y"))
    st.bind(tx, thread_axis("threadIdx.x"))
    s[CL].compute_at(st, tx)
    caxes = s[CL].op.axis
    (kk,) = s[CL].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, CL, kk)
    s[CL].reorder(ko, ki, caxes[-2], caxes[-1])
    s[AA].compute_at(s[CL], ko)
    s[BB].compute_at(s[CL], ko)
    threads = [("threadIdx.y", cfg["tile_y"].size[1]), ("threadIdx.x", cfg["tile_x"].size[1])]
    for load in (AA, BB):
        cooperative_fetch(s, load, threads)
    apply_unroll(cfg, st, scope)
