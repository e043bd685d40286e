"""``dense_tensorcore.cuda`` and ``batch_matmul_tensorcore.cuda``: float16 (or bfloat16, sm_80+)
matrix products on tensor cores (wmma, TVM's templates of those names), accumulated in float32.

Compute: ``out[(b,) i, j] = sum_k float32(A[(b,) i, k]) * float32(B[(b,) j, k])`` (tag
``dense_tensorcore`` / ``batch_matmul_tensorcore``), then ``+ bias`` and a cast to ``out_dtype``
when asked (float16 output from the float32 accumulator). Shapes: M, N, K multiples of one wmma
shape's (m, n, 16) with m x n in 16x16, 32x8, 8x32 (TVM's rule, :func:`tensorcore_shape`).

Schedule (per block: ``block_row_warps x block_col_warps`` warps, each a ``warp_row_tiles x
warp_col_tiles`` grid of m x n accumulator fragments):

- the reduction is split into chunks of ``chunk * 16``; per chunk the block copies its A rows
  and B rows into shared memory cooperatively (``vec`` elements, 16 bytes at vec 8, per thread
  and copy), rows padded by ``offset`` elements (bank conflicts of the wmma loads), the copies
  double buffered (``s.double_buffer``: the next chunk's copy goes to the other half, one
  barrier per chunk);
- per 16-wide k step each warp loads its A and B fragments from shared memory
  (``wmma.matrix_a`` / ``wmma.matrix_b``) and issues ``warp_row_tiles x warp_col_tiles``
  ``mma_sync`` into its accumulators (``wmma.accumulator``), loops unrolled (fragment arrays
  must stay in registers);
- epilogue: with no fused stage and a float32 output, each warp stores its accumulators straight
  to global memory (``store_matrix_sync``); otherwise through shared memory (rows padded by
  ``offsetCS``), from where all threads apply the fused stages (bias, activation, cast) and
  write the output ``vec`` elements at a time.

Knobs: ``block_row_warps``, ``block_col_warps``, ``warp_row_tiles``, ``warp_col_tiles``,
``chunk``, ``offset``, ``offsetCS``, ``vec``, ``wmma_m`` (with ``wmma_n`` following: 16->16,
32->8, 8->32), ``swizzle`` (1: a 2-D grid; G > 1: one grid axis ordered G block rows fastest,
for L2 reuse on large products; 2-D products whose block rows G divides). Configurations whose static shared memory exceeds 48 KiB, or whose tiles do not
divide the shape, are invalid (InstantiationError). Fallback (no tuned config): the largest
block tile up to 128 x 128 that divides the shape and fits (:func:`_fallback`).
"""

from __future__ import annotations

from typing import Any

from ... import autotvm, te
from ...autotvm.space import OtherOptionEntity
from ...te import Tensor, create_schedule, thread_axis
from ..nn.utils import traverse_inline
from .tensor_intrin import (
    intrin_wmma_gemm,
    intrin_wmma_load_matrix_a,
    intrin_wmma_load_matrix_b,
    intrin_wmma_store_matrix,
)
from .utils import const_int, max_threads

__all__ = ["dense_tensorcore", "schedule_dense_tensorcore", "batch_matmul_tensorcore",
           "schedule_batch_matmul_tensorcore", "tensorcore_shape", "SHARED_LIMIT"]

SHARED_LIMIT = 48 * 1024  # static shared memory per block
_WMMA_N = {16: 16, 32: 8, 8: 32}


def tensorcore_shape(m: int, n: int, k: int) -> tuple[int, int, int] | None:
    """The wmma (m, n, k) shape that tiles an ``m x n x k`` product, or None (TVM's rule: M, N,
    K multiples of (16, 16, 16), (32, 8, 16) or (8, 32, 16); 16x16 first)."""
    if k % 16:
        return None
    for wm in (16, 32, 8):
        if m % wm == 0 and n % _WMMA_N[wm] == 0:
            return wm, _WMMA_N[wm], 16
    return None


def _check_inputs(a: Tensor, b: Tensor, what: str) -> None:
    if a.dtype != b.dtype or a.dtype not in ("float16", "bfloat16"):
        raise ValueError(f"{what}: tensor cores here take float16 or bfloat16 inputs (both "
                         f"alike), got {a.dtype} and {b.dtype}")


def _epilogue(out: Tensor, bias: Tensor | None, out_dtype: str, ndim: int) -> Tensor:
    if bias is not None:
        if ndim == 2:
            out = te.compute(out.shape, lambda i, j: out[i, j] + bias[j].astype("float32"),
                             name="T_add", tag="broadcast")
        else:
            out = te.compute(out.shape, lambda b, i, j: out[b, i, j] + bias[j].astype("float32"),
                             name="T_add", tag="broadcast")
    if out_dtype != "float32":
        out = te.compute(out.shape, lambda *i: out(*i).astype(out_dtype), name="T_cast",
                         tag="elemwise")
    return out


@autotvm.register_topi_compute("dense_tensorcore.cuda")
def dense_tensorcore(cfg: Any, data: Tensor, weight: Tensor, bias: Tensor | None = None,
                     out_dtype: str | None = None) -> Tensor:
    """``data[M, K] @ weight[N, K]^T (+ bias)`` on tensor cores (float16 or bfloat16 in,
    float32 accumulation, ``out_dtype`` float32 by default or float16 / bfloat16)."""
    _check_inputs(data, weight, "dense_tensorcore")
    m, k = (const_int(d, "dense_tensorcore: data shape") for d in data.shape)
    n = const_int(weight.shape[0], "dense_tensorcore: weight shape")
    if tensorcore_shape(m, n, k) is None:
        raise ValueError(f"dense_tensorcore: (M, N, K) = ({m}, {n}, {k}) must be multiples of "
                         "(16, 16, 16), (32, 8, 16) or (8, 32, 16)")
    rk = te.reduce_axis((0, k), name="k")
    out = te.compute((m, n), lambda i, j: te.sum(
        data[i, rk].astype("float32") * weight[j, rk].astype("float32"), axis=rk),
        name="T_dense", tag="dense_tensorcore")
    cfg.add_flop(2 * m * n * k)
    return _epilogue(out, bias, out_dtype or "float32", 2)


@autotvm.register_topi_schedule("dense_tensorcore.cuda")
def schedule_dense_tensorcore(cfg: Any, outs: Any) -> Any:
    return _schedule(cfg, outs, "dense_tensorcore")


@autotvm.register_topi_compute("batch_matmul_tensorcore.cuda")
def batch_matmul_tensorcore(cfg: Any, x: Tensor, y: Tensor, out_shape: Any = None,
                            out_dtype: str | None = None) -> Tensor:
    """``x[B, M, K] @ y[B, N, K]^T`` on tensor cores (batch_matmul with transpose_b; a
    broadcast batch of 1 on either side)."""
    _check_inputs(x, y, "batch_matmul_tensorcore")
    bx, m, k = (const_int(d, "batch_matmul_tensorcore: x shape") for d in x.shape)
    by, n, k2 = (const_int(d, "batch_matmul_tensorcore: y shape") for d in y.shape)
    if k != k2 or (bx != by and 1 not in (bx, by)):
        raise ValueError(f"batch_matmul_tensorcore: shapes {x.shape} and {y.shape} do not match")
    if tensorcore_shape(m, n, k) is None:
        raise ValueError(f"batch_matmul_tensorcore: (M, N, K) = ({m}, {n}, {k}) must be "
                         "multiples of (16, 16, 16), (32, 8, 16) or (8, 32, 16)")
    batch = max(bx, by)
    rk = te.reduce_axis((0, k), name="k")
    out = te.compute((batch, m, n), lambda b, i, j: te.sum(
        x[b if bx > 1 else 0, i, rk].astype("float32")
        * y[b if by > 1 else 0, j, rk].astype("float32"), axis=rk),
        name="T_batch_matmul", tag="batch_matmul_tensorcore")
    cfg.add_flop(2 * batch * m * n * k)
    return _epilogue(out, None, out_dtype or "float32", 3)


@autotvm.register_topi_schedule("batch_matmul_tensorcore.cuda")
def schedule_batch_matmul_tensorcore(cfg: Any, outs: Any) -> Any:
    return _schedule(cfg, outs, "batch_matmul_tensorcore")


def _schedule(cfg: Any, outs: Any, tag: str) -> Any:
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    s = create_schedule([o.op for o in outs])

    def callback(op: Any) -> None:
        if op.tag == tag:
            schedule_tensorcore(cfg, s, op.output(0))

    traverse_inline(s, outs[0].op, callback)
    return s


def shared_bytes(bm: int, bn: int, chunk: int, offset: int, offset_cs: int,
                 staged: bool) -> int:
    """Static shared memory of a configuration: A and B tiles double buffered, plus the
    float32 output tile when the epilogue goes through shared memory."""
    ab = 2 * (bm + bn) * (chunk * 16 + offset) * 2
    return ab + (bm * (bn + offset_cs) * 4 if staged else 0)


def _fallback(cfg: Any, m: int, n: int, k: int, wm: int, wn: int, staged: bool) -> None:
    """The first block tile of the list below (warps x fragments per warp, largest first)
    that divides the shape, fits the shared memory and the target's threads per block; k
    chunks of 32 (16 when K is not a multiple of 32)."""
    chunk = 2 if k % 32 == 0 else 1
    limit = max_threads()
    best = None
    for rw, cw, rt, ct in ((2, 4, 4, 2), (2, 2, 4, 4), (2, 2, 4, 2), (2, 2, 2, 2), (2, 2, 2, 1),
                           (1, 2, 2, 2), (2, 1, 2, 2), (1, 2, 2, 1), (1, 1, 2, 2), (1, 1, 2, 1),
                           (1, 1, 1, 2), (1, 1, 1, 1)):
        bm, bn = rw * rt * wm, cw * ct * wn
        if m % bm or n % bn or 32 * rw * cw > limit:
            continue
        if shared_bytes(bm, bn, chunk, 8, 8 if staged else 0, staged) > SHARED_LIMIT:
            continue
        best = (rw, cw, rt, ct)
        break
    rw, cw, rt, ct = best or (1, 1, 1, 1)
    bm, bn, threads = rw * rt * wm, cw * ct * wn, 32 * rw * cw
    sizes = [bm * chunk * 16, bn * chunk * 16] + ([bm * bn] if staged else [])
    vec = next(v for v in (8, 4, 2, 1) if all(x % (v * threads) == 0 for x in sizes) or v == 1)
    for name, val in (("block_row_warps", rw), ("block_col_warps", cw), ("warp_row_tiles", rt),
                      ("warp_col_tiles", ct), ("chunk", chunk), ("offset", 8), ("offsetCS", 8),
                      ("vec", vec), ("wmma_m", wm), ("swizzle", 1)):
        cfg[name] = OtherOptionEntity(val)


def schedule_tensorcore(cfg: Any, s: Any, C: Tensor) -> None:
    """The knobs and schedule of the tensor-core product stage ``C`` (2-D or batched 3-D)."""
    A, B = s[C].op.input_tensors
    batched = len(C.shape) == 3
    m, n = (const_int(d) for d in C.shape[-2:])
    (rk,) = C.op.reduce_axis
    k = const_int(rk.dom.extent)
    base = tensorcore_shape(m, n, k)
    if base is None:
        raise ValueError(f"{C.op.name}: ({m}, {n}, {k}) is not a tensor-core shape")
    fused = not any(op is C.op for op in s.outputs)
    output = s.outputs[0].output(0) if fused else C
    staged = fused or output.dtype != "float32"

    cfg.define_knob("block_row_warps", [1, 2, 4])
    cfg.define_knob("block_col_warps", [1, 2, 4])
    cfg.define_knob("warp_row_tiles", [1, 2, 4])
    cfg.define_knob("warp_col_tiles", [1, 2, 4])
    cfg.define_knob("chunk", [1, 2, 4])
    cfg.define_knob("offset", [0, 8])
    cfg.define_knob("offsetCS", [0, 8])
    cfg.define_knob("vec", [1, 2, 4, 8])
    cfg.define_knob("swizzle", [1, 4, 8, 16])
    wms = [wm for wm in (16, 32, 8) if tensorcore_shape(m, n, k) is not None
           and m % wm == 0 and n % _WMMA_N[wm] == 0]
    cfg.define_knob("wmma_m", wms)
    if cfg.is_fallback:
        _fallback(cfg, m, n, k, base[0], base[1], staged)

    wm = int(cfg["wmma_m"].val)
    wn, wk = _WMMA_N[wm], 16
    rw, cw = int(cfg["block_row_warps"].val), int(cfg["block_col_warps"].val)
    rt, ct = int(cfg["warp_row_tiles"].val), int(cfg["warp_col_tiles"].val)
    chunk, offset = int(cfg["chunk"].val), int(cfg["offset"].val)
    offset_cs, vec = int(cfg["offsetCS"].val), int(cfg["vec"].val)
    swizzle = int(cfg["swizzle"].val)
    bm, bn, bk = rw * rt * wm, cw * ct * wn, chunk * wk
    threads = 32 * rw * cw
    if m % bm or n % bn or k % bk:
        raise autotvm.space.InstantiationError(
            f"{C.op.name}: block tile {bm} x {bn} x {bk} does not divide ({m}, {n}, {k})")
    if (bm * bk) % (vec * threads) or (bn * bk) % (vec * threads):
        raise autotvm.space.InstantiationError(
            f"{C.op.name}: the {bm} x {bk} / {bn} x {bk} shared tiles do not split into {threads} "
            f"threads x {vec} elements")
    if swizzle > 1 and (batched or (m // bm) % swizzle):
        raise autotvm.space.InstantiationError(
            f"{C.op.name}: swizzle {swizzle} needs 2-D blocks whose {m // bm} rows it divides")
    if staged and (bm * bn) % (vec * threads):
        raise autotvm.space.InstantiationError(
            f"{C.op.name}: the {bm} x {bn} output tile does not split into {threads} threads x "
            f"{vec} elements")
    nbytes = shared_bytes(bm, bn, chunk, offset, offset_cs, staged)
    if nbytes > SHARED_LIMIT:
        raise autotvm.space.InstantiationError(
            f"{C.op.name}: {nbytes} bytes of shared memory > {SHARED_LIMIT}")

    AS = s.cache_read(A, "shared", [C])
    BS = s.cache_read(B, "shared", [C])
    AF = s.cache_read(AS, "wmma.matrix_a", [C])
    BF = s.cache_read(BS, "wmma.matrix_b", [C])
    CF = s.cache_write(C, "wmma.accumulator")
    CS = s.cache_read(CF, "shared", [C]) if staged else None
    if fused:
        s[C].compute_inline()

    tx, ty, tz = (thread_axis(f"threadIdx.{a}") for a in "xyz")
    st = s[output]
    axes = list(st.op.axis)
    i, j = axes[-2], axes[-1]
    bi, i = st.split(i, factor=bm)
    bj, j = st.split(j, factor=bn)
    lead = [axes[0]] if batched else []
    st.reorder(*lead, bi, bj, i, j)
    if batched:
        st.bind(axes[0], thread_axis("blockIdx.z"))
    if swizzle > 1:
        # one grid axis, ``swizzle`` block rows fastest: the blocks running at once share
        # fewer B columns (L2 reuse of B when it does not fit)
        bio, bii = st.split(bi, factor=swizzle)
        st.reorder(*lead, bio, bj, bii, i, j)
        blk = st.fuse(bio, bj, bii)
        st.bind(blk, thread_axis("blockIdx.x"))
        blocks = [*lead, blk]
    else:
        st.bind(bi, thread_axis("blockIdx.y"))
        st.bind(bj, thread_axis("blockIdx.x"))
        blk = bj
        blocks = [*lead, bi, bj]

    if staged:
        # output tile through shared memory: all threads, vec elements each
        t = st.fuse(i, j)
        t, vi = st.split(t, factor=vec)
        t, x = st.split(t, factor=32)
        t, y = st.split(t, factor=rw)
        t, z = st.split(t, factor=cw)
        st.bind(z, tz)
        st.bind(y, ty)
        st.bind(x, tx)
        st.vectorize(vi)
        s[CS].compute_at(st, blk)
        cs_axes = list(s[CS].op.axis)
        ci, cj = cs_axes[-2], cs_axes[-1]
        if offset_cs:
            s[CS].storage_align(ci, bn + offset_cs, 0)
        wi, ci = s[CS].split(ci, factor=rt * wm)
        wj, cj = s[CS].split(cj, factor=ct * wn)
        ti, ci = s[CS].split(ci, factor=wm)
        tj, cj = s[CS].split(cj, factor=wn)
        s[CS].reorder(*cs_axes[:-2], wi, wj, ti, tj, ci, cj)
        s[CS].bind(wi, ty)
        s[CS].bind(wj, tz)
        s[CS].unroll(ti)
        s[CS].unroll(tj)
        store, store_at, warp_at = CS, ci, (CS, wj)
    else:
        wi, i = st.split(i, factor=rt * wm)
        wj, j = st.split(j, factor=ct * wn)
        ti, i = st.split(i, factor=wm)
        tj, j = st.split(j, factor=wn)
        st.reorder(*blocks, wi, wj, ti, tj, i, j)
        st.bind(wi, ty)
        st.bind(wj, tz)
        st.unroll(ti)
        st.unroll(tj)
        store, store_at, warp_at = output, i, (output, wj)

    # the warp's accumulators
    s[CF].compute_at(s[warp_at[0]], warp_at[1])
    f_axes = list(s[CF].op.axis)
    fi, fj = f_axes[-2], f_axes[-1]
    fi, fii = s[CF].split(fi, factor=wm)
    fj, fjj = s[CF].split(fj, factor=wn)
    (fk,) = s[CF].op.reduce_axis
    fk, fkk = s[CF].split(fk, factor=wk)
    ko, ki = s[CF].split(fk, factor=chunk)
    s[CF].reorder(*f_axes[:-2], ko, ki, fi, fj, fii, fjj, fkk)
    s[CF].unroll(ki)
    s[CF].unroll(fi)
    s[CF].unroll(fj)

    # fragments of A and B per 16-wide k step
    for frag, rows in ((AF, wm), (BF, wn)):
        s[frag].compute_at(s[CF], ki)
        fa = list(s[frag].op.axis)
        r, c = fa[-2], fa[-1]
        r, rr = s[frag].split(r, factor=rows)
        c, cc = s[frag].split(c, factor=wk)
        s[frag].reorder(*fa[:-2], r, c, rr, cc)
        s[frag].unroll(r)
        s[frag].unroll(c)

    # shared tiles of A and B per chunk, cooperative vector copies, double buffered
    for sh in (AS, BS):
        s[sh].compute_at(s[CF], ko)
        sa = list(s[sh].op.axis)
        r, c = sa[-2], sa[-1]
        if offset:
            s[sh].storage_align(r, bk + offset, 0)
        t = s[sh].fuse(r, c)
        t, vi = s[sh].split(t, factor=vec)
        t, x = s[sh].split(t, factor=32)
        t, y = s[sh].split(t, factor=rw)
        t, z = s[sh].split(t, factor=cw)
        s[sh].bind(z, tz)
        s[sh].bind(y, ty)
        s[sh].bind(x, tx)
        s[sh].vectorize(vi)
        s[sh].unroll(t)
        s[sh].double_buffer()

    shape, dtype = (wm, wn, wk), A.dtype
    s[AF].tensorize(s[AF].leaf_iter_vars[-2], intrin_wmma_load_matrix_a(shape, dtype))
    s[BF].tensorize(s[BF].leaf_iter_vars[-2], intrin_wmma_load_matrix_b(shape, dtype))
    s[CF].tensorize(fii, intrin_wmma_gemm(shape, dtype, "float32", "col_major"))
    s[store].tensorize(store_at, intrin_wmma_store_matrix(
        shape, "float32", "shared" if staged else "global"))
