"""x86 (and generic CPU) schedules of the bit-serial operators.

The packing stages run parallel over their outer axes. The products keep the packed words
innermost-contiguous where they can and vectorize the output axis whose loads are contiguous:

* ``bitserial_conv2d_nchw``: output columns (``x``) are vector lanes; the packed activation
  words of neighbouring columns are adjacent, the weight word is broadcast, and LLVM turns the
  lane-wise popcount into ``vpopcntd``/``vpopcntq`` where the CPU has AVX512-VPOPCNTDQ.
* ``bitserial_conv2d_nhwc``: output channels are the vector lanes (the weight's channel axis).
* ``bitserial_dense``: one output per (row, column); the reduction walks both operands' packed
  words contiguously, bit planes unrolled (scalar ``popcnt`` on 64 elements per instruction
  with ``uint64`` words).
"""

from __future__ import annotations

from typing import Any

from ...te import Tensor
from ...te.schedule import Schedule
from .conv2d import _find, _outputs, _schedule_pad, anchor

__all__ = ["schedule_bitserial_dense", "schedule_bitserial_conv2d_nchw",
           "schedule_bitserial_conv2d_nhwc", "schedule_bitpack"]


def _lanes(t: Tensor, vector_bits: int = 512) -> int:
    from ...ir.dtype import bits_of
    from ...target import current_target

    tgt = current_target(allow_none=True)
    if tgt is not None and hasattr(tgt, "vector_width_bits"):
        vector_bits = tgt.vector_width_bits
    return max(1, vector_bits // bits_of(t.dtype))


def _schedule_packing(s: Schedule, t: Tensor) -> None:
    """A bitpack stage at root: parallel over its outer axes (two fused when there are more)."""
    if t.op not in s or t.op.tag != "bitpack":
        return
    axes = s[t].op.axis
    outer = s[t].fuse(*axes[:2]) if len(axes) > 2 else axes[0]
    s[t].parallel(outer)


def _inputs(s: Schedule, main: Tensor) -> None:
    for t in main.op.input_tensors:
        _schedule_packing(s, t)
        _schedule_pad(s, t)
        for u in t.op.input_tensors:  # pad(bitpack(data))
            _schedule_packing(s, u)


def schedule_bitpack(outs: Any) -> Schedule:
    """A stand-alone ``nn.bitpack``: parallel over the outer axes."""
    from ...te import create_schedule

    outs = _outputs(outs)
    s = create_schedule([o.op for o in outs])
    for o in outs:
        if o.op.tag == "bitpack":
            _schedule_packing(s, o)
    return s


def schedule_bitserial_dense(outs: Any) -> Schedule:
    outs = _outputs(outs)
    s, main = _find(outs, "bitserial_dense")
    if main is None:
        raise ValueError("schedule_bitserial_dense: no bitserial_dense stage among the outputs")
    _inputs(s, main)
    out = anchor(main, outs[0])
    i, j = s[out].op.axis
    jo, ji = s[out].split(j, factor=min(16, int(out.shape[1])))
    task = s[out].fuse(i, jo)
    s[out].parallel(task)
    db, wb, k = s[main].op.reduce_axis
    if main.op is out.op:
        s[main].reorder(task, ji, k, db, wb)
    else:
        s[main].compute_at(s[out], task)
        mi, mj = s[main].op.axis
        s[main].reorder(mi, mj, k, db, wb)
    s[main].unroll(db)
    s[main].unroll(wb)
    return s


def _schedule_conv(outs: Any, layout: str) -> Schedule:
    """NCHW: ``oc_tile`` channels x one vector of output columns per register tile; NHWC: one
    vector of output channels per pixel. Reduction (channel words, window, bit planes) outside
    the vector axis, bit planes unrolled."""
    tag = f"bitserial_conv2d_{layout.lower()}"
    outs = _outputs(outs)
    s, main = _find(outs, tag)
    if main is None:
        raise ValueError(f"schedule_{tag}: no {tag} stage among the outputs")
    _inputs(s, main)
    out = anchor(main, outs[0])
    lanes = _lanes(main.op.input_tensors[0])  # packed words per vector
    if main.op is out.op:
        CC = s.cache_write(main, "local")
    else:
        s[main].set_scope("local")
        CC = main
    if layout == "NCHW":
        n, f, y, x = s[out].op.axis
        fo, fi = s[out].split(f, factor=min(4, int(main.shape[1])))
        xo, xi = s[out].split(x, factor=min(lanes, int(main.shape[3])))
        s[out].reorder(n, fo, y, xo, fi, xi)
        s[out].parallel(s[out].fuse(n, fo, y))
        at, vec = xo, xi
        cn, cf, cy, cx = s[CC].op.axis
        rc, ry, rx, ab, wb = s[CC].op.reduce_axis
        s[CC].reorder(cn, cy, rc, ry, rx, ab, wb, cf, cx)
        s[CC].unroll(cf)
        cvec = cx
    else:
        n, y, x, f = s[out].op.axis
        fo, fi = s[out].split(f, factor=min(lanes, int(main.shape[3])))
        s[out].reorder(n, y, x, fo, fi)
        s[out].parallel(s[out].fuse(n, y))
        at, vec = fo, fi
        cn, cy, cx, cf = s[CC].op.axis
        ry, rx, rc, ab, wb = s[CC].op.reduce_axis
        s[CC].reorder(cn, cy, cx, ry, rx, rc, ab, wb, cf)
        cvec = cf
    s[out].vectorize(vec)
    s[CC].compute_at(s[out], at)
    s[CC].unroll(ab)
    s[CC].unroll(wb)
    s[CC].vectorize(cvec)
    return s


def schedule_bitserial_conv2d_nchw(outs: Any) -> Schedule:
    return _schedule_conv(outs, "NCHW")


def schedule_bitserial_conv2d_nhwc(outs: Any) -> Schedule:
    return _schedule_conv(outs, "NHWC")
