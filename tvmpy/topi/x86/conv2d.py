"""Direct fp32 conv2d (NCHW in, NCHW out, batch 1) with a hand-written x86 schedule.

The kernel is pre-packed (at compile time, as graph-level layout transformation would do) into
``[OC/ocb, IC, KH, KW, ocb]`` so that one vector of ``ocb`` output channels is contiguous.
The convolution runs in a blocked ``[OC/ocb, OH, OW, ocb]`` layout: each tile of ``reg_n`` output
columns x ``ocb`` channels accumulates in vector registers (reg_n * ocb/16 zmm registers), fed by
broadcasts of input pixels; a final vectorized stage writes NCHW.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...te import compute, create_schedule, placeholder, reduce_axis
from ...te import sum as te_sum
from ...tir import all as tir_all
from ...tir.op import if_then_else

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["conv2d_nchw_packed", "pack_kernel"]


def pack_kernel(w: np.ndarray, ocb: int) -> np.ndarray:
    """OIHW -> [O/ocb, I, H, W, ocb] (the layout the schedule reads)."""
    oc, ic, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(oc // ocb, ocb, ic, kh, kw).transpose(0, 2, 3, 4, 1))


def conv2d_nchw_packed(ic: int, h: int, w: int, oc: int, kh: int = 3, kw: int = 3, pad: int = 1,
                       ocb: int = 32, reg_n: int = 7, dtype: str = "float32"
                       ) -> tuple[Schedule, list[Tensor]]:
    """Return ``(schedule, [data, packed_kernel, out])`` for a stride-1 conv2d."""
    if oc % ocb:
        raise ValueError(f"conv2d_nchw_packed: oc={oc} must be a multiple of ocb={ocb}")
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    data = placeholder((1, ic, h, w), dtype, name="data")
    kernel = placeholder((oc // ocb, ic, kh, kw, ocb), dtype, name="kernel")
    padded = compute(
        (1, ic, h + 2 * pad, w + 2 * pad),
        lambda n, c, y, x: if_then_else(
            tir_all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[n, c, y - pad, x - pad], 0.0),
        name="pad")
    rc = reduce_axis((0, ic), name="rc")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    conv = compute(
        (1, oc // ocb, oh, ow, ocb),
        lambda n, co, y, x, ci: te_sum(padded[n, rc, y + ry, x + rx] * kernel[co, rc, ry, rx, ci],
                                       axis=[rc, ry, rx]),
        name="conv")
    out = compute((1, oc, oh, ow), lambda n, c, y, x: conv[n, c // ocb, y, x, c % ocb], name="out")

    s = create_schedule(out.op)
    CC = s.cache_write(conv, "local")
    # padding: one parallel pass over the input
    pn, pc, py, px = s[padded].op.axis
    s[padded].parallel(pc)
    # the NCHW output is the root loop nest: one parallel task per (channel block, row) ...
    on, oc_, oy, ox = s[out].op.axis
    oco, oci = s[out].split(oc_, factor=ocb)
    s[out].reorder(oco, oy, oci, ox)
    s[out].vectorize(ox)
    task = s[out].fuse(oco, oy)
    s[out].parallel(task)
    # ... computing that row in the blocked layout [ow, ocb] first
    s[conv].compute_at(s[out], task)
    n, co, y, x, ci = s[conv].op.axis
    xo, xi = s[conv].split(x, factor=reg_n)
    s[conv].reorder(co, y, xo, xi, ci)
    s[conv].vectorize(ci)
    # ... one register tile of reg_n columns x ocb channels at a time
    s[CC].compute_at(s[conv], xo)
    _, _, _, cx, cci = s[CC].op.axis
    crc, cry, crx = s[CC].op.reduce_axis
    s[CC].reorder(crc, cry, crx, cx, cci)
    s[CC].unroll(cx)
    s[CC].vectorize(cci)
    return s, [data, kernel, out]
