"""x86 schedule of ``topi.nn.attention``: one parallel task per block of query rows of one head.
Inside a task the block's scores (rows x keys) are computed by register tiles (the
batch_matmul micro-kernel: ``tile_rows() x 2`` vectors, the reduction over the head size
outermost), scaled and biased as they are stored, reduced to the row maxima, exponentiated,
summed and multiplied by ``v`` with the same register tiles; only the output is divided by the
row sums. Injective producers fused into the kernel (Q/K/V head splits) are inlined: the
register tiles load the projections through the view. The block's scores and exponentials stay in cache: the ``[B, M, N]`` score tensor
that the separate batch_matmul -> softmax -> batch_matmul kernels write and read back three
times never exists whole."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...te import ComputeOp, create_schedule
from ..generic import inline_injective
from .conv2d import _outputs
from .dense import default_unroll_k, register_tile, tile_rows
from .injective import _has_transcendental, schedule_injective_from_existing, vector_lanes
from .softmax import _vector_rfactor

if TYPE_CHECKING:
    from ...te.schedule import Schedule

__all__ = ["schedule_attention", "ROW_BLOCK_TILES", "V_VIEW_MAX_BYTES"]

# register tiles of query rows per parallel task: the block's scores + exponentials
# (2 x rows x N floats) and one head's k and v stay in the core's L2 at N = 1500
ROW_BLOCK_TILES = 2
# the largest head of V (N x E elements) read through a fused view (a head split
# of the projection); a larger one is copied first. Measured at 1 thread on an Intel Xeon
# (Emerald Rapids class): 6 heads x 1500 keys x 64 (384 KB a head) 2% slower through the view
# than after separate copies, 4% faster with V copied inside the kernel; 12 x 197 x 64
# (50 KB) 21% faster through the view.
V_VIEW_MAX_BYTES = 256 * 1024


def _const(x: Any) -> int | None:
    x = getattr(x, "value", x)
    return x if isinstance(x, int) else None


def _stages(out: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def visit(t: Any) -> None:
        for u in t.op.input_tensors:
            tag = u.op.tag
            if tag.startswith("attention_") and tag not in found:
                found[tag] = u
                visit(u)

    visit(out)
    return found


def _bytes(dtype: str) -> int:
    bits = "".join(ch for ch in dtype if ch.isdigit())
    return max(1, int(bits or 32) // 8)


def _read_through(s: Schedule, outs: list, st: dict[str, Any]) -> None:
    """Fused producers of q / k / v / bias (head splits, scales, casts, a mask's broadcast):
    inlined, so the tiles read the projections through the view. An input that calls a
    vector math function (``tanh(x)`` as V: the tiles would evaluate it once per row tile) is
    computed whole first, as its own kernel would, its producers inlined into it; so is a
    V whose head is larger than ``V_VIEW_MAX_BYTES`` (the P·V tiles stream a head's V once
    per row tile: through the view that is a range the whole projection's row stride wide)."""
    stages = [out.op for out in outs] + [t.op for t in st.values()]
    ours = {id(op) for op in stages}
    whole: dict[int, Any] = {}
    for op in stages:
        for t in op.input_tensors:
            if (id(t.op) not in ours and isinstance(t.op, ComputeOp)
                    and _has_transcendental(t)):
                whole[id(t.op)] = t
    pv = st["attention_pv"].op
    for t in pv.input_tensors:  # v, read whole once per row tile: a large head is copied
        n, e = _const(t.shape[1]), _const(t.shape[2])
        if (id(t.op) not in ours and isinstance(t.op, ComputeOp) and n is not None
                and e is not None and n * e * _bytes(t.dtype) > V_VIEW_MAX_BYTES):
            whole[id(t.op)] = t
    inline_injective(s, outs)
    for t in whole.values():
        s[t.op].compute_root()
        schedule_injective_from_existing(s, t, tiled_transforms=False)


def _unroll(st: Any, unroll_k: int | None) -> int:
    if unroll_k is not None:
        return int(unroll_k)
    return default_unroll_k(st.op.reduce_axis[0].dom.extent)


def _tile(s: Schedule, st: Any, i: Any, j: Any, mr: int, nr: int) -> tuple[Any, Any]:
    """Split rows by ``mr`` and columns by ``nr`` (columns outer): returns (row tile, col)."""
    io, ii = s[st].split(i, factor=mr)
    jo, ji = s[st].split(j, factor=nr)
    s[st].reorder(jo, io, ii, ji)
    s[st].unroll(ii)
    s[st].vectorize(ji)
    return io, ji


def schedule_attention(outs: Any, unroll_k: int | None = None) -> Schedule:
    """x86 schedule of ``topi.nn.attention`` (tag "attention_output"). ``unroll_k``: the
    unroll of both register tiles' reduction loops (default: :func:`default_unroll_k` of
    each reduction's length)."""
    outs = _outputs(outs)
    out = outs[0]
    if out.op.tag != "attention_output":
        raise ValueError(f"schedule_attention: expected an attention output, got a "
                         f"{out.op.tag or out.op.name!r} stage")
    s = create_schedule([o.op for o in outs])
    st = _stages(out)
    _read_through(s, outs, st)
    lanes = vector_lanes(out.dtype)
    mr = tile_rows()
    m = _const(out.shape[1])
    if m is not None:
        mr = max(1, min(mr, m))
    rows = mr * ROW_BLOCK_TILES
    if m is not None and m <= rows:
        rows = m

    def width(ext: Any) -> int:
        e = _const(ext)
        if e is None:
            return 2 * lanes
        return 2 * lanes if e >= 4 * lanes else lanes if e >= lanes else e

    # the output: (head, row block) tasks; inside, the row block in register tiles
    bb, i, c = s[out].op.axis
    io, ii = s[out].split(i, factor=rows)
    task = s[out].fuse(bb, io)
    s[out].parallel(task)
    nr_e = width(out.shape[2])
    iio, iii = s[out].split(ii, factor=mr)
    co, ci = s[out].split(c, factor=nr_e)
    s[out].reorder(task, iio, co, iii, ci)
    s[out].vectorize(ci)
    pv = st["attention_pv"]
    s[pv].compute_at(s[out], co)
    s[pv].set_scope("local")
    register_tile(s, pv, _unroll(pv, unroll_k))
    inv = st["attention_inv"]
    s[inv].compute_at(s[out], task)
    s[inv].set_scope("local")

    # the scores of the block: register tiles over (keys, rows), scale + bias on the store
    scores, acc = st["attention_scores"], st["attention_scores_acc"]
    s[scores].compute_at(s[out], task)
    s[scores].set_scope("local")
    _, si, sj = s[scores].op.axis
    sio, _ = _tile(s, scores, si, sj, mr, width(scores.shape[2]))
    s[acc].compute_at(s[scores], sio)
    s[acc].set_scope("local")
    register_tile(s, acc, _unroll(acc, unroll_k))
    if "attention_kt" in st:  # k as [B, N, D] (or a fused view): transposed once, outside
        kt = st["attention_kt"]
        kb, kx, kj = s[kt].op.axis
        if _const(kt.shape[2]) is None or _const(kt.shape[2]) >= lanes:
            # blocks of ``lanes`` keys, each read whole (all D features) before the next: a
            # head-split view of the projection puts the block's rows a projection row apart,
            # so the block's lines and pages stay in L1 / the TLB while the lanes gather
            jo, kv = s[kt].split(kj, factor=lanes)
            s[kt].reorder(kb, jo, kx, kv)
            s[kt].parallel(s[kt].fuse(kb, jo))
            s[kt].vectorize(kv)
        else:
            s[kt].parallel(s[kt].fuse(kb, kx))

    # the row passes: max, exp, sum (vector rfactors, as the softmax schedule)
    for tag in ("attention_max", "attention_sum"):
        red = st[tag]
        rf = _vector_rfactor(s, red, lanes)
        if rf is not None:
            s[rf].compute_at(s[out], task)
        s[red].compute_at(s[out], task)
        s[red].set_scope("local")
    ex = st["attention_exp"]
    s[ex].compute_at(s[out], task)
    s[ex].set_scope("local")
    n = _const(ex.shape[2])
    if n is None or n >= lanes:
        _, ev = s[ex].split(s[ex].op.axis[2], factor=lanes)
        s[ex].vectorize(ev)
    return s
