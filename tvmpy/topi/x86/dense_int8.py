"""x86 int8 dense and batch_matmul: uint8 data x int8 weight -> int32, on the 16x4 dot micro-kernel
(``int8_intrin.py``: AVX-512 VNNI ``vpdpbusd`` and its fallbacks) through tensorize.

The weight is packed ``[ceil(N/16), ceil(K/4), 16, 4]``: ``W[n, k]`` at ``[n // 16, k // 4,
n % 16, k % 4]``, zero-padded, so that one 64-byte row feeds one micro-kernel call (16 output
columns x 4 reduction steps). ``dense_int8`` takes it packed (AlterOpLayout packs a constant
weight at compile time: :func:`pack_weight_int8_np`); ``batch_matmul_int8`` packs its B inside
the kernel (a stage run each time: B is usually an activation).

The product accumulates into ``acc[Mp, N/16, 16]`` (rows padded to the register tile, K to 4:
the data then goes through a zero-padded copy); the result ``[M, N]`` crops it, and the
elementwise ops fused after it (requantize: cast, multiply, round, add, clip, cast) run on
each register tile, vectorized over the 16 columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import autotvm, te
from ...te import Tensor
from ...tir import expr as E
from .int8_intrin import K_GROUP, LANES, dot_16x4_intrin, int8_isa

__all__ = ["pack_weight_int8_np", "pack_weight_int8", "flatten_rows", "dense_int8", "batch_matmul_int8",
           "schedule_dense_int8", "schedule_batch_matmul_int8", "check_int8_dtypes",
           "MAX_TILE_M"]

MAX_TILE_M = 8
"""Most rows of a register tile (x up to 4 blocks of 16 columns: 32 int32 accumulators)."""


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _ints(shape: Any, what: str) -> tuple[int, ...]:
    out = []
    for d in shape:
        v = getattr(d, "value", d)
        if not isinstance(v, int):
            raise ValueError(f"{what}: the int8 kernels need static shapes, got {tuple(shape)}")
        out.append(v)
    return tuple(out)


def check_int8_dtypes(op: str, data: Tensor, weight: Tensor, out_dtype: str | None) -> None:
    """The int8 kernels compute uint8 data x int8 weight -> int32 (vpdpbusd's operands)."""
    if data.dtype != "uint8" or weight.dtype != "int8" or (out_dtype or "int32") != "int32":
        raise ValueError(f"{op}: needs uint8 data, int8 weight and int32 output, got "
                         f"{data.dtype} x {weight.dtype} -> {out_dtype}")


def pack_weight_int8_np(w: np.ndarray) -> np.ndarray:
    """``[N, K]`` int8 -> ``[ceil(N/16), ceil(K/4), 16, 4]`` (zero-padded)."""
    if w.ndim != 2:
        raise ValueError(f"pack_weight_int8_np: needs a 2-D [N, K] weight, got {w.shape}")
    n, k = w.shape
    nb, kb = _ceil(n, LANES), _ceil(k, K_GROUP)
    full = np.zeros((nb * LANES, kb * K_GROUP), w.dtype)
    full[:n, :k] = w
    return np.ascontiguousarray(full.reshape(nb, LANES, kb, K_GROUP).transpose(0, 2, 1, 3))


def pack_weight_int8(w: Tensor, transpose_b: bool = True) -> Tensor:
    """The te stage packing ``w`` (``[(b,) N, K]``, or ``[(b,) K, N]`` when not
    ``transpose_b``) into ``[(b,) ceil(N/16), ceil(K/4), 16, 4]`` (zero-padded)."""
    *lead, d1, d2 = _ints(w.shape, "pack_weight_int8")
    n, k = (d1, d2) if transpose_b else (d2, d1)
    nb, kb = _ceil(n, LANES), _ceil(k, K_GROUP)

    def f(*idx: Any) -> Any:
        jb, kq, jl, kl = idx[-4:]
        j, kk = jb * LANES + jl, kq * K_GROUP + kl
        v = w[(*idx[:-4], j, kk) if transpose_b else (*idx[:-4], kk, j)]
        if nb * LANES == n and kb * K_GROUP == k:
            return v
        return te.if_then_else(te.all(j < n, kk < k), v, E.const(0, w.dtype))

    return te.compute((*lead, nb, kb, LANES, K_GROUP), f, name="B_int8_packed", tag="int8_pack")


def _pad_data(a: Tensor, rows: int, k: int) -> Tensor:
    """``a[..., M, K]`` zero-padded to ``rows`` x ``k`` (the identity when it fits already)."""
    *lead, m, k0 = _ints(a.shape, "int8 data")
    if m == rows and k0 == k:
        return a

    def f(*idx: Any) -> Any:
        i, kk = idx[-2], idx[-1]
        return te.if_then_else(te.all(i < m, kk < k0), a[idx], E.const(0, a.dtype))

    return te.compute((*lead, rows, k), f, name="data_int8_pad", tag="int8_pad")


def flatten_rows(a: Tensor) -> Tensor:
    """``a[..., K]`` as ``[rows, K]``, a copy stage (tag "int8_pad": scheduled, not inlined,
    so that the product reads plain rows, which tensorize matches)."""
    *lead, k = _ints(a.shape, "int8 data")
    dims = lead[1:]

    def f(i: Any, kk: Any) -> Any:
        idx = []
        for d in reversed(dims):
            idx.append(i % d)
            i = i // d
        return a[(i, *reversed(idx), kk)]

    return te.compute((int(np.prod(lead)), k), f, name="data_int8_rows", tag="int8_pad")


def default_tile_m(m: int) -> int:
    """Rows per register tile: all when few, else the largest divisor of ``m`` in
    ``[MAX_TILE_M / 2, MAX_TILE_M]``, else ``MAX_TILE_M`` (the rows padded to whole tiles)."""
    if m <= MAX_TILE_M:
        return m
    for r in range(MAX_TILE_M, MAX_TILE_M // 2 - 1, -1):
        if m % r == 0:
            return r
    return MAX_TILE_M


MAX_ACCUMULATORS = 16
"""Register tile size in 16-lane accumulators: 8 x 2 ran at ~2070 GOPS on 128 x 768 x 768/3072
where 8 x 4 (32, all the zmm registers) spilled: 1120."""


def _tile_n_cands(nb: int, tile_m: int) -> list[int]:
    """Column blocks per tile, the default first: the most (up to 4) dividing ``nb`` within
    :data:`MAX_ACCUMULATORS` with ``tile_m`` rows."""
    cands = [c for c in (4, 3, 2, 1) if nb % c == 0]
    best = next(c for c in cands if c * tile_m <= MAX_ACCUMULATORS or c == 1)
    return [best] + [c for c in cands if c != best]


def _define_space(cfg: Any, m: int, nb: int) -> tuple[int, int]:
    """Knobs ``tile_m`` (rows per register tile) and ``tile_n`` (16-column blocks per tile),
    the defaults first; returns the config's ``(tile_m, tile_n)``."""
    d_m = default_tile_m(m)
    cfg.define_knob("tile_m", [d_m] + [r for r in (1, 2, 4, 6, 8) if r != d_m and r <= m])
    cfg.define_knob("tile_n", _tile_n_cands(nb, d_m))
    if cfg.is_fallback:
        from ...autotvm.space import OtherOptionEntity

        cfg["tile_m"] = OtherOptionEntity(d_m)
        cfg["tile_n"] = OtherOptionEntity(_tile_n_cands(nb, d_m)[0])
    return int(cfg["tile_m"].val), int(cfg["tile_n"].val)


def _gemm(a: Tensor, wp: Tensor, n: int, tile_m: int, name: str, a_bcast: bool,
          w_bcast: bool) -> Tensor:
    """acc[(b,) Mp, NB, 16] then its crop [(b,) M, n]; ``a``/``wp`` with a batch axis when 3-D /
    5-D (broadcast when ``*_bcast``)."""
    batched = len(a.shape) == 3
    m = _ints(a.shape, name)[-2]
    nb, kb = _ints(wp.shape, name)[-4:-2]
    mp = _ceil(m, tile_m) * tile_m
    ap = _pad_data(a, mp, kb * K_GROUP)
    ko = te.reduce_axis((0, kb), name="ko")
    ki = te.reduce_axis((0, K_GROUP), name="ki")

    def acc(*idx: Any) -> Any:
        i, jb, jl = idx[-3:]
        lead_a = (0 if a_bcast else idx[0],) if batched else ()
        lead_w = (0 if w_bcast else idx[0],) if batched else ()
        return te.sum(ap[(*lead_a, i, ko * K_GROUP + ki)].astype("int32") *
                      wp[(*lead_w, jb, ko, jl, ki)].astype("int32"), axis=[ko, ki])

    lead: tuple[int, ...] = ()
    if batched:
        lead = (max(_ints(a.shape, name)[0], _ints(wp.shape, name)[0]),)
    accum = te.compute((*lead, mp, nb, LANES), acc, name=f"{name}_acc", tag=f"{name}_acc")
    return te.compute((*lead, m, n), lambda *idx: accum[(*idx[:-1], idx[-1] // LANES,
                                                         idx[-1] % LANES)],
                      name=name, tag=name)


@autotvm.register_topi_compute("dense_int8.x86")
def dense_int8(cfg: Any, data: Tensor, packed: Tensor, units: int | None = None,
               out_dtype: str = "int32") -> Tensor:
    """``data[M, K]`` (uint8) x ``W[N, K]`` (int8, packed ``[ceil(N/16), ceil(K/4), 16, 4]``)
    -> int32 ``[M, units]`` (``units``: N, default the packed width)."""
    check_int8_dtypes("dense_int8", data, packed, out_dtype)
    if len(data.shape) != 2 or len(packed.shape) != 4:
        raise ValueError("dense_int8: needs data [M, K] and a packed weight [N/16, K/4, 16, 4], "
                         f"got {tuple(data.shape)} and {tuple(packed.shape)}")
    m, k = _ints(data.shape, "dense_int8")
    nb, kb, l16, l4 = _ints(packed.shape, "dense_int8")
    n = nb * LANES if units is None else int(units)
    if (l16, l4) != (LANES, K_GROUP) or _ceil(k, K_GROUP) != kb or not 0 < n <= nb * LANES \
            or _ceil(n, LANES) != nb:
        raise ValueError(f"dense_int8: data [{m}, {k}] and packed weight {(nb, kb, l16, l4)} "
                         f"(units {n}) do not match: the weight must be [ceil(N/16), ceil(K/4), "
                         "16, 4]")
    tile_m, _ = _define_space(cfg, m, nb)
    cfg.add_flop(2 * m * n * k)
    return _gemm(data, packed, n, tile_m, "dense_int8", False, False)


@autotvm.register_topi_compute("batch_matmul_int8.x86")
def batch_matmul_int8(cfg: Any, a: Tensor, b: Tensor, out_dtype: str = "int32",
                      transpose_b: bool = True) -> Tensor:
    """``a[batch, M, K]`` (uint8) x ``b[batch, N, K]`` (int8; ``[batch, K, N]`` when not
    ``transpose_b``) -> int32 ``[batch, M, N]``; a batch of 1 broadcasts."""
    check_int8_dtypes("batch_matmul_int8", a, b, out_dtype)
    if len(a.shape) != 3 or len(b.shape) != 3:
        raise ValueError(f"batch_matmul_int8: needs 3-D operands, got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    ba, m, k = _ints(a.shape, "batch_matmul_int8")
    bb, d1, d2 = _ints(b.shape, "batch_matmul_int8")
    n, k2 = (d1, d2) if transpose_b else (d2, d1)
    if k != k2 or (ba != bb and 1 not in (ba, bb)):
        raise ValueError(f"batch_matmul_int8: shapes {(ba, m, k)} and {(bb, d1, d2)} "
                         f"(transpose_b={transpose_b}) do not match")
    tile_m, _ = _define_space(cfg, m, _ceil(n, LANES))
    cfg.add_flop(2 * max(ba, bb) * m * n * k)
    wp = pack_weight_int8(b, transpose_b)
    return _gemm(a, wp, n, tile_m, "batch_matmul_int8", ba == 1 and bb > 1,
                 bb == 1 and ba > 1)


def _find(outs: Any, tag: str) -> tuple[Any, Tensor, Tensor, Tensor]:
    """``(schedule, acc, crop, anchor)``: the anchor is the fused output when it has the crop's
    shape (the epilogue runs on the register tile), else the crop."""
    from ..nn.utils import traverse_inline

    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    s = te.create_schedule([o.op for o in outs])
    found: dict[str, Tensor] = {}

    def cb(op: Any) -> None:
        if op.tag in (tag, f"{tag}_acc") and op.tag not in found:
            found[op.tag] = op.output(0)

    traverse_inline(s, outs[0].op, cb)
    if tag not in found or f"{tag}_acc" not in found:
        raise ValueError(f"schedule of {tag}: no {tag} stage among the outputs' inputs")
    crop, acc = found[tag], found[f"{tag}_acc"]
    out = outs[0]
    same = [str(d) for d in out.shape] == [str(d) for d in crop.shape]
    return s, acc, crop, (out if same else crop)


def use_tensorize(target: Any) -> bool:
    return target is not None and str(getattr(target, "kind", "")) == "llvm"


def schedule_gemm_int8(s: Any, acc: Tensor, crop: Tensor, out: Tensor, tile_m: int,
                       tile_n: int) -> None:
    """Register tile: ``tile_m`` rows x ``tile_n`` blocks of 16 columns, accumulated over K by
    the micro-kernel (tensorized on the 16 columns x 4 reduction steps), the epilogue written
    from each tile; parallel over (batch, row tiles, column tiles)."""
    from ...target import Target

    target = Target.current()
    for t in acc.op.input_tensors:
        if t.op in s and t.op.tag in ("int8_pad", "int8_pack"):
            ax = s[t].op.axis
            s[t].parallel(s[t].fuse(*ax[:2]) if len(ax) > 2 else ax[0])
            if t.op.tag == "int8_pack":
                s[t].vectorize(ax[-1])
    if out is not crop:
        s[crop].compute_inline()
    s[acc].set_scope("local")
    *lead, i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=tile_m)
    jo, jr = s[out].split(j, factor=tile_n * LANES)
    jm, jv = s[out].split(jr, factor=LANES)
    # column tiles outside row tiles: a column tile's weights (K x 16 x tile_n bytes) stay in
    # cache over all the rows (the other order streamed the whole weight per row tile: 3072 x
    # 768 -> 2.4 MB, 565 GOPS; the data, M x K bytes, is the smaller operand here)
    s[out].reorder(*lead, jo, io, ii, jm, jv)
    s[out].vectorize(jv)
    s[out].parallel(s[out].fuse(*lead, jo, io))
    s[acc].compute_at(s[out], jo)
    *alead, ai, ajb, ajl = s[acc].op.axis
    ko, ki = s[acc].op.reduce_axis
    s[acc].reorder(*alead, ko, ai, ajb, ajl, ki)
    s[acc].unroll(ai)
    s[acc].unroll(ajb)
    if use_tensorize(target):
        s[acc].tensorize(ajl, dot_16x4_intrin(int8_isa(target)))
    else:
        s[acc].unroll(ki)
        s[acc].vectorize(ajl)


def _schedule(cfg: Any, outs: Any, tag: str) -> Any:
    s, acc, crop, out = _find(outs, tag)
    mp, nb = _ints(acc.shape, tag)[-3:-1]
    tile_m, tile_n = int(cfg["tile_m"].val), int(cfg["tile_n"].val)
    if mp % tile_m:  # (the compute padded the rows to its own config's tile)
        tile_m = 1
    if nb % tile_n:
        tile_n = 1
    schedule_gemm_int8(s, acc, crop, out, tile_m, tile_n)
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    if out is crop and outs[0].op is not crop.op:  # e.g. a reshape follows: its own loops
        from .injective import schedule_injective_from_existing

        schedule_injective_from_existing(s, outs[0])
    return s


@autotvm.register_topi_schedule("dense_int8.x86")
def schedule_dense_int8(cfg: Any, outs: Any) -> Any:
    """The int8 dense schedule (with the elementwise ops fused after it)."""
    return _schedule(cfg, outs, "dense_int8")


@autotvm.register_topi_schedule("batch_matmul_int8.x86")
def schedule_batch_matmul_int8(cfg: Any, outs: Any) -> Any:
    """The int8 batch_matmul schedule (with the elementwise ops fused after it)."""
    return _schedule(cfg, outs, "batch_matmul_int8")
