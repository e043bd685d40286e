"""x86 computes and schedules for dense / matmul / batch_matmul: the packed-GEMM idea of
``gemm.py`` applied to the operator library.

``dense_pack`` / ``batch_matmul_pack`` repack the weight into column panels
``[N/nr, K, nr]`` (inside the parallel panel loop, right before use), so that the micro-kernel
reads ``nr`` contiguous weights per ``k``; each ``mr x nr`` output tile accumulates in vector
registers. The plain ``topi.nn`` computes get the same tiling without the packing (good for
``matmul`` with an untransposed B, whose columns are already contiguous).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...te import compute, create_schedule, reduce_axis
from ...te import sum as te_sum
from ...tir.expr import const
from ...tir.op import if_then_else
from ..nn.conv2d import _cast
from ..nn.dense import _same, add_bias, batch_matmul
from ..nn.utils import (
    batch_const_shape,
    check_rank,
    get_const_tuple,
    infer_out_dtype,
    traverse_inline,
)
from .conv2d import _outputs, anchor

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["dense_pack", "dense_prepacked", "panel_width", "batch_matmul_pack", "schedule_dense", "schedule_dense_pack",
           "schedule_matmul", "schedule_batch_matmul"]

_TAGS = ("dense", "dense_pack", "matmul", "batch_matmul", "batch_matmul_pack")


def _panel(n: int) -> int:
    return 32 if n >= 64 else 16 if n >= 16 else n


def _pack(b: Tensor, batched: bool, n: int, k: int, nr: int, name: str) -> Tensor:
    """``B[(batch,) N, K]`` -> ``[(batch,) ceil(N/nr), K, nr]``, zero past N."""
    zero = const(0, b.dtype)
    npanel = (n + nr - 1) // nr

    def get(bi: Any, jo: Any, kk: Any, ji: Any) -> Any:
        j = jo * nr + ji
        v = b[bi, j, kk] if batched else b[j, kk]
        return v if n % nr == 0 else if_then_else(j < n, v, zero)

    if batched:
        return compute((b.shape[0], npanel, k, nr), get, name=name, tag="matmul_pack")
    return compute((npanel, k, nr), lambda jo, kk, ji: get(None, jo, kk, ji), name=name,
                   tag="matmul_pack")


def dense_pack(data: Tensor, weight: Tensor, bias: Tensor | None = None,
               out_dtype: str | None = None) -> Tensor:
    """``topi.nn.dense`` with the weight packed into panels (tag "dense_pack")."""
    check_rank(data, 2, "dense_pack", "data")
    check_rank(weight, 2, "dense_pack", "weight")
    m, k = batch_const_shape(data.shape, "dense_pack: data shape")
    n, k2 = get_const_tuple(weight.shape, "dense_pack: weight shape")
    if k != k2:
        raise ValueError(f"dense_pack: data has {k} input features, weight {(n, k2)} expects {k2}")
    out_dtype = infer_out_dtype(out_dtype, data)
    nr = _panel(n)
    packed = _pack(weight, False, n, k, nr, "weight_pack")
    kk = reduce_axis((0, k), name="k")
    out = compute((m, n), lambda i, j: te_sum(
        _cast(data[i, kk], out_dtype) * _cast(packed[j // nr, kk, j % nr], out_dtype), axis=kk),
        name="T_dense_pack", tag="dense_pack")
    return add_bias(out, bias, "dense")


def panel_width(n: int) -> int:
    """The column-panel width ``nr`` that ``dense_pack``'s schedule tiles ``n`` columns by."""
    return _panel(n)


def dense_prepacked(data: Tensor, packed: Tensor, out_dtype: str | None = None) -> Tensor:
    """``dense`` with the weight already packed (at compile time, by AlterOpLayout):
    ``packed[N/nr, K, nr]`` holds ``W[j, k]`` at ``[j // nr, k, j % nr]`` (tag "dense_pack",
    scheduled by ``schedule_dense_pack`` without the in-kernel packing)."""
    check_rank(data, 2, "dense_prepacked", "data")
    check_rank(packed, 3, "dense_prepacked", "packed weight")
    m, k = batch_const_shape(data.shape, "dense_prepacked: data shape")
    npanel, k2, nr = get_const_tuple(packed.shape, "dense_prepacked: packed weight shape")
    if k != k2:
        raise ValueError(f"dense_prepacked: data has {k} input features, the packed weight "
                         f"{(npanel, k2, nr)} expects {k2}")
    out_dtype = infer_out_dtype(out_dtype, data)
    kk = reduce_axis((0, k), name="k")
    return compute((m, npanel * nr), lambda i, j: te_sum(
        _cast(data[i, kk], out_dtype) * _cast(packed[j // nr, kk, j % nr], out_dtype), axis=kk),
        name="T_dense_pack", tag="dense_pack")


def batch_matmul_pack(tensor_a: Tensor, tensor_b: Tensor, out_dtype: str | None = None) -> Tensor:
    """``topi.nn.batch_matmul`` (``transpose_b=True``: B ``[b, N, K]``) with B packed."""
    ref = batch_matmul(tensor_a, tensor_b, out_dtype=out_dtype)  # argument checks, out shape
    batch, m, n = batch_const_shape(ref.shape, "batch_matmul_pack: shape")
    k = get_const_tuple(tensor_a.shape[2:], "batch_matmul_pack: K")[0]
    a1 = _same(tensor_a.shape[0], 1)
    out_dtype = infer_out_dtype(out_dtype, tensor_a)
    nr = _panel(n)
    packed = _pack(tensor_b, True, n, k, nr, "B_pack")
    b1 = _same(tensor_b.shape[0], 1)
    kk = reduce_axis((0, k), name="k")
    return compute((batch, m, n), lambda b, i, j: te_sum(
        _cast(tensor_a[0 if a1 else b, i, kk], out_dtype)
        * _cast(packed[0 if b1 else b, j // nr, kk, j % nr], out_dtype), axis=kk),
        name="T_batch_matmul_pack", tag="batch_matmul_pack")


def _schedule_tiled(s: Schedule, mm: Tensor, out: Tensor, mr: int = 8) -> None:
    """Tile ``mr x nr`` over the last two axes of ``out``, accumulate each tile in registers
    (reduction outermost, rows unrolled, columns vectorized), parallel over (batch, panel)."""
    n = get_const_tuple(mm.shape[-1:], "matmul schedule: N")[0]
    m = mm.shape[-2]
    m = int(m.value) if hasattr(m, "value") else m  # a symbolic M keeps the default tile
    nr, mr = _panel(n), (max(1, min(mr, m)) if isinstance(m, int) else mr)
    if mm.op is out.op:
        CC = s.cache_write(mm, "local")
    else:
        s[mm].set_scope("local")
        CC = mm
    *batch, i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=mr)
    jo, ji = s[out].split(j, factor=nr)
    s[out].reorder(*batch, jo, io, ii, ji)
    s[out].vectorize(ji)
    task = s[out].fuse(*batch, jo) if batch else jo
    s[out].parallel(task)
    s[CC].compute_at(s[out], io)
    *_, ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(ck, ci, cj)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    for t in mm.op.input_tensors:
        if t.op.tag == "matmul_pack":
            s[t].compute_at(s[out], task)
            s[t].vectorize(s[t].op.axis[-1])


def _schedule_dot(s: Schedule, mm: Tensor, out: Tensor, nj: int = 8, mi: int = 2) -> None:
    """For ``dense`` with its untransposed ``[N, K]`` weight (rows contiguous along K): each
    output is a dot product of two contiguous rows. The reduction is split by the vector width
    and factored (rfactor), so an ``mi x nj`` tile of outputs accumulates in ``mi * nj`` vector
    registers over K/16 steps (each data vector reused for ``nj`` weight rows, each weight
    vector for ``mi`` data rows), then each is reduced horizontally. Without a packed copy of
    the weight this wins when K is long (the horizontal sums amortized, and packing a
    ``[N, K]`` weight with a 4 KiB row stride is slow)."""
    k = get_const_tuple((mm.op.reduce_axis[0].dom.extent,), "dense schedule: K")[0]
    n = get_const_tuple(mm.shape[-1:], "dense schedule: N")[0]
    m = mm.shape[-2]
    m = int(m.value) if hasattr(m, "value") else m
    vec = 16 if k >= 16 else k
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


def _schedule(outs: Any, what: str) -> Schedule:
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
    out = anchor(mm, outs[0])
    attrs = mm.op.attrs
    # B read along K (dense, or a B-transposed product): contiguous rows -> dot products
    dot = mm.op.tag == "dense" or (mm.op.tag in ("matmul", "batch_matmul")
                                   and attrs.get("transpose_b") and not attrs.get("transpose_a"))
    # ... worth it when the rows are few or long (each dot ends in a 16-lane horizontal sum;
    # otherwise the tiled nest with strided B loads wins, measured)
    m, k = mm.shape[-2], mm.op.reduce_axis[0].dom.extent
    m = int(m.value) if hasattr(m, "value") else None
    k = int(k.value) if hasattr(k, "value") else 0
    if dot and (m is None or m <= 8):
        _schedule_dot(s, mm, out, nj=4, mi=1)
    elif dot and k >= 256:
        _schedule_dot(s, mm, out)
    else:
        _schedule_tiled(s, mm, out)
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
