"""x86 schedule of the Winograd convolution (``topi.nn.conv2d_winograd_nchwc``) as the AutoTVM
template ``conv2d_winograd_NCHWc.x86``.

The task's arguments are the blocked input ``[N, C/ib, H, W, ib]``, the *transformed* weight
``[alpha, alpha, OC/ob, C, ob]`` (the tile size is part of the workload: relay transforms the
weight at compile time for the size it chose), the padding and the output dtype. Its FLOP count
is the direct convolution's, so its GFLOP/s compare with ``conv2d_NCHWc.x86``'s ("effective"
GFLOP/s) and the faster of the two can be picked from the records.

Loop nests (all vectorized along the channel block, parallel over the outer loops):

- ``data_pad``: one parallel pass;
- input transform: per (tile, input-channel block) the ``alpha x alpha`` window is transformed
  in registers (both 1-D passes unrolled) and written to ``V[e, n, tile, c]``;
- the ``alpha^2`` products ``M[e, n] = U[e, n] @ V[e, n]``: a register tile of ``tile_p``
  tiles x ``tile_oc`` output-channel blocks, accumulated over the input channels (weights
  vector-loaded, ``V`` broadcast), parallel over (e, n, channel group);
  the products prefetch their weight stream when it takes at least half of L2
  (:func:`default_prefetch`);
- output transform: per (output-channel block, tile row, tile) the inverse transform in
  registers, written straight into the ``[N, OC/ob, OH, OW, ob]`` output, fused element-wise
  consumers (bias, residual add, relu) applied there.

Knobs: ``tile_p`` (1-8), ``tile_oc`` (1, 2, 4 channel blocks), ``unroll_k`` (reduction unroll
1, 2, 4), ``p_outer`` (tile loop outside the channel-group loop inside a product).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...autotvm.space import OtherOptionEntity
from ...autotvm.task.topi_integration import register_topi_compute, register_topi_schedule
from ..nn.winograd import conv2d_winograd_nchwc
from ..utils import get_const_tuple
from .conv2d import _find, _outputs, _schedule_pad, anchor
from .conv2d_nchwc import PREFETCH_BYTES, streams_weights, tensor_bytes

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["conv2d_winograd_nchwc_x86", "schedule_conv2d_winograd_nchwc_x86",
           "schedule_conv2d_winograd_nchwc"]

TASK = "conv2d_winograd_NCHWc.x86"


def _define_space(cfg: Any, ntile: int, oc_chunk: int) -> None:
    cfg.define_knob("tile_p", [4] + [p for p in range(1, min(8, ntile) + 1) if p != 4]
                    if ntile >= 4 else list(range(1, ntile + 1)))
    cfg.define_knob("tile_oc", [c for c in (2, 1, 4) if oc_chunk % c == 0])
    cfg.define_knob("unroll_k", [1, 2, 4])
    cfg.define_knob("p_outer", [False, True])
    if cfg.is_fallback:
        cfg["tile_p"] = OtherOptionEntity(min(4, ntile))
        cfg["tile_oc"] = OtherOptionEntity(2 if oc_chunk % 2 == 0 else 1)
        cfg["unroll_k"] = OtherOptionEntity(1)
        cfg["p_outer"] = OtherOptionEntity(False)


@register_topi_compute(TASK)
def conv2d_winograd_nchwc_x86(cfg: Any, data: Tensor, weight: Tensor, padding: Any,
                              out_dtype: str | None = None) -> Tensor:
    """``topi.nn.conv2d_winograd_nchwc`` with the tile size of the transformed ``weight``."""
    alpha = int(get_const_tuple(weight.shape[:1], "winograd weight", symbolic=False)[0])
    out = conv2d_winograd_nchwc(data, weight, padding, alpha - 2, out_dtype)
    n, oc_chunk, oh, ow, oc_bn = (int(d) for d in get_const_tuple(out.shape, "winograd out", symbolic=False))
    m = alpha - 2
    _define_space(cfg, n * (-(-oh // m)) * (-(-ow // m)), oc_chunk)
    ic = int(weight.shape[3])
    cfg.add_flop(2 * n * oc_chunk * oc_bn * oh * ow * ic * 9)
    return out


@register_topi_schedule(TASK)
def schedule_conv2d_winograd_nchwc_x86(cfg: Any, outs: Any) -> Schedule:
    """The tunable x86 schedule of :func:`conv2d_winograd_nchwc_x86`."""
    return schedule_conv2d_winograd_nchwc(outs, cfg)


def default_prefetch(weight: Tensor) -> int:
    """Bytes ahead of the transformed weight stream that the products prefetch
    (``pragma(rc, "prefetch", ...)``, ``tir.transform.InjectPrefetch``): :data:`PREFETCH_BYTES`
    when the weight takes at least half of L2 (it then comes from L3 or memory on every run of
    a model), else 0. The transformed weight is 4x the direct one (F(4x4): 36 / 9), and each
    product reads its panel of ``tile_oc`` channel blocks once per ``tile_p`` tiles: on a
    small map (few tiles) each weight vector is loaded once for ``tile_p`` FMAs, and the
    out-of-order window holds too few of the stream's loads to cover L3's latency. 1 thread,
    CPU time, Intel Xeon (Emerald Rapids, KVM; 2 MiB L2), kernel + relu alone, weights rotated
    over 100 MB of copies (as in a model: from L3), loaded, 2026-11-30 (us, no prefetch / 4096
    bytes ahead / 8192; direct convolution): 448 -> 384 8x8 (Inception-v3's Mixed_7, 24.8 MB
    transformed) 1855 / 1005-1273 / 1217, direct 1801-1844; 512 -> 512 14x14 5165 / 4248 /
    4148; 256 -> 256 14x14 1297 / 1131; 128 -> 128 28x28 692 / 655 / 676; 96 -> 96 35x35 596 /
    588 / 570; the weight hot in L2: 448 -> 384 8x8 983 / 928, 256 -> 256 14x14 818 / 811.
    64 -> 64 56x56 (0.6 MB, stays in L2): 1596 / 1583 (not prefetched)."""
    return PREFETCH_BYTES if streams_weights(tensor_bytes(weight)) else 0


def _stage(t: Tensor, name: str) -> Tensor:
    for x in t.op.input_tensors:
        if x.op.name == name:
            return x
    raise ValueError(f"winograd schedule: no stage {name!r} feeds {t.op.name!r}")


def schedule_conv2d_winograd_nchwc(outs: Any, cfg: Any = None, prefetch: int | None = None
                                   ) -> Schedule:
    """Schedule the Winograd convolution among ``outs`` (knobs from ``cfg``, else defaults);
    ``prefetch``: bytes ahead of the weight stream the products prefetch (0: none; None:
    :func:`default_prefetch`)."""
    outs = _outputs(outs)
    s, conv = _find(outs, "conv2d_winograd_nchwc")
    if conv is None:
        raise ValueError("schedule_conv2d_winograd_nchwc: no conv2d_winograd_nchwc stage found")
    out = anchor(conv, outs[0])
    m = int(conv.op.attrs["tile_size"])
    S = _stage(conv, "winograd_S")
    M = _stage(S, "winograd_M")
    V = next(t for t in M.op.input_tensors if t.op.name == "winograd_V")
    weight = next(t for t in M.op.input_tensors if t is not V)
    d1 = _stage(V, "winograd_d")
    dpad = d1.op.input_tensors[0]
    oc_bn = int(conv.shape[4])
    ic_bn = int(dpad.shape[4])
    oc_chunk = int(conv.shape[1])
    ntile_e = getattr(V.shape[2], "value", V.shape[2])
    # a symbolic batch makes the tile count symbolic: the knobs' defaults for many tiles
    ntile = int(ntile_e) if isinstance(ntile_e, int) else 64
    if cfg is None:
        from ...autotvm.space import FallbackConfigEntity

        cfg = FallbackConfigEntity()
        _define_space(cfg, ntile, oc_chunk)
    tile_p = int(cfg["tile_p"].val)
    tile_oc = int(cfg["tile_oc"].val)
    unroll_k = int(cfg["unroll_k"].val)

    # padding: a parallel pass of its own
    _schedule_pad(s, dpad)
    # if the weight is transformed in the graph (not a constant), compute it at root
    if weight.op in s and weight.op.input_tensors:
        for t in (weight, *weight.op.input_tensors):
            if t.op in s and t.op.input_tensors:
                s[t].parallel(s[t].op.axis[0])

    # input transform: per (tile, input block) in registers
    e, nu, p, c = s[V].op.axis
    co, ci = s[V].split(c, factor=ic_bn)
    s[V].reorder(p, co, e, nu, ci)
    s[V].parallel(s[V].fuse(p, co))
    s[V].unroll(e)
    s[V].unroll(nu)
    s[V].vectorize(ci)
    s[d1].set_scope("local")
    s[d1].compute_at(s[V], s[V].leaf_iter_vars[0])
    de, dr, _, dc = s[d1].op.axis
    s[d1].unroll(de)
    s[d1].unroll(dr)
    s[d1].vectorize(dc)

    # the alpha^2 products: register tile tile_p tiles x tile_oc channel blocks
    MC = s.cache_write(M, "local")
    e, nu, p, co = s[M].op.axis
    coo, coi = s[M].split(co, factor=oc_bn * tile_oc)
    po, pi = s[M].split(p, factor=tile_p)
    if cfg["p_outer"].val:
        s[M].reorder(e, nu, po, coo, pi, coi)
        task = s[M].fuse(e, nu, po)
        tile_at = coo
    else:
        s[M].reorder(e, nu, coo, po, pi, coi)
        task = s[M].fuse(e, nu, coo)
        tile_at = po
    s[M].parallel(task)
    s[M].unroll(pi)
    s[M].vectorize(coi)
    s[MC].compute_at(s[M], tile_at)
    _, _, cp, cco = s[MC].op.axis
    (rc,) = s[MC].op.reduce_axis
    ccoo, ccoi = s[MC].split(cco, factor=oc_bn)
    if unroll_k > 1:
        rco, rci = s[MC].split(rc, factor=unroll_k)
        s[MC].reorder(rco, rci, cp, ccoo, ccoi)
        s[MC].unroll(rci)
    else:
        s[MC].reorder(rc, cp, ccoo, ccoi)
    if prefetch is None:
        prefetch = default_prefetch(weight)
    if prefetch:
        s[MC].pragma(rco if unroll_k > 1 else rc, "prefetch", prefetch)
    s[MC].unroll(cp)
    s[MC].unroll(ccoo)
    s[MC].vectorize(ccoi)

    # output transform into the image, element-wise consumers on the tile
    if out.op is not conv.op:
        s[conv].compute_inline()
    b, oco, y, x, oci = s[out].op.axis
    yo, yi = s[out].split(y, factor=m)
    xo, xi = s[out].split(x, factor=m)
    s[out].reorder(b, oco, yo, xo, yi, xi, oci)
    s[out].parallel(s[out].fuse(b, oco, yo))
    s[out].unroll(yi)
    s[out].unroll(xi)
    s[out].vectorize(oci)
    s[S].set_scope("local")
    s[S].compute_at(s[out], xo)
    sv, sr, _, sc = s[S].op.axis
    s[S].unroll(sv)
    s[S].unroll(sr)
    s[S].vectorize(sc)
    return s
