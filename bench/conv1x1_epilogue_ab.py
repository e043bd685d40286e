"""The reduction-blocked x86 NCHWc 1x1 convolution (``default_k_block`` > 0) as the default
schedule runs it, against the same nest with its epilogue applied in the last reduction block's
registers: what fusing the bias / residual / relu pass into the blocked nest would give (issue
25 point 4). 1 thread, one process, interleaved rounds, CPU time.

    python bench/conv1x1_epilogue_ab.py [--shapes 512x1024x28,2048x1024x28] [--rounds 11]

Sides, per shape (``ICxOCxHW``, 16-channel blocks, NCHWc input and output), each for a bias +
relu and a bias + residual + relu epilogue:

* ``default``: ``schedule_conv2d_NCHWc`` as the strategy builds it. The task (``default_k_rows``
  rows x ``oc_tile`` chunks) accumulates in a scratch buffer (zeroed, then reloaded and stored
  back by every register tile once per reduction block), and the epilogue is a separate pass
  over the scratch buffer (reads it, the bias and the residual; writes the output).
* ``fused``: the reduction split in two stages (an experiment built here, not a tvmpy
  schedule): ``P`` sums the first ``IC/16 - k_block`` input chunks, k-blocked in the same
  scratch buffer as the default; ``C`` sums the last ``k_block`` chunks with its accumulators
  initialised from ``P`` (``te.sum(..., init=P[...])``), one register tile at a time, computed
  at the output's column tile, so the epilogue reads its accumulators from registers and
  stores the output once. Same tile, block and task as the default; checked against it.

Printed per shape and epilogue: median [min-max] ms of each side, GFLOP/s, and the median of
the per-round ratios fused / default.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import bench_threads, ensure_native_blas, interleaved_samples  # noqa: E402

ensure_native_blas()

BN = 16


def _fused_schedule(out, C, P, rows: int, oc_tile: int, reg_n: int, k_block: int):  # noqa: ANN001, ANN202
    from tvmpy import te

    s = te.create_schedule(out.op)
    for st in s.stages:  # the epilogue's elementwise stages into the output stage
        if st.op not in (out.op, C.op, P.op) and hasattr(st.op, "body"):
            st.compute_inline()
    s[P].set_scope("local")
    s[C].set_scope("local")
    n, oc, y, x, oci = s[out].op.axis
    coo, coi = s[out].split(oc, factor=oc_tile)
    yo, yi = s[out].split(y, factor=rows)
    xo, xi = s[out].split(x, factor=reg_n)
    s[out].reorder(n, coo, yo, yi, xo, coi, xi, oci)
    task = s[out].fuse(n, coo, yo)
    s[out].vectorize(oci)
    s[out].parallel(task)
    s[P].compute_at(s[out], task)  # the default's blocked nest, one block fewer
    _, pco, py, px, poi = s[P].op.axis
    pxo, pxi = s[P].split(px, factor=reg_n)
    pk, pi = s[P].op.reduce_axis
    pko, pki = s[P].split(pk, factor=k_block)
    s[P].reorder(pko, py, pxo, pki, pi, pco, pxi, poi)
    s[P].unroll(pco)
    s[P].unroll(pxi)
    s[P].vectorize(poi)
    s[C].compute_at(s[out], xo)  # the last block, one register tile at a time
    _, cco, cy, cx, cci = s[C].op.axis
    ck, ci = s[C].op.reduce_axis
    s[C].reorder(ck, ci, cco, cy, cx, cci)
    s[C].unroll(cco)
    s[C].unroll(cx)
    s[C].vectorize(cci)
    return s


def _sides(ic: int, oc: int, hw: int, residual: bool) -> tuple[dict, int]:
    import numpy as np

    import tvmpy as tvm
    from tvmpy import te, topi
    from tvmpy.topi import nn
    from tvmpy.topi.x86 import conv2d_nchwc as cn

    A = te.placeholder((1, ic // BN, hw, hw, BN), name="A")
    W = te.placeholder((oc // BN, ic // BN, 1, 1, BN, BN), name="W")
    B = te.placeholder((1, oc // BN, 1, 1, BN), name="B")
    R = te.placeholder((1, oc // BN, hw, hw, BN), name="R")
    args = [A, W, B, R] if residual else [A, W, B]

    def epilogue(c):  # noqa: ANN001, ANN202
        return topi.nn.relu(topi.add(topi.add(c, B), R) if residual else topi.add(c, B))

    rng = np.random.default_rng(0)
    vals = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32") for t in args]
    vals[1] /= np.sqrt(ic)
    sides, outs = {}, {}
    with tvm.target.Target("llvm"):
        conv = nn.conv2d_NCHWc(A, W, 1, 0, 1, f"NCHW{BN}c", f"NCHW{BN}c")
        out = epilogue(conv)
        s = cn.schedule_conv2d_NCHWc([out])
        oc_tile = cn.default_oc_tile(conv, False)
        reg_n = cn._default_reg_n(conv, oc_tile, False)  # noqa: SLF001
        kb = cn.default_k_block(conv, oc_tile, False)
        rows = cn.default_k_rows(conv, oc_tile)
        builds = {"default": (s, out)}
        if kb:
            kc = ic // BN
            ico, ici = te.reduce_axis((0, kc - kb), name="ico"), te.reduce_axis((0, BN), name="ici")
            P = te.compute(conv.shape, lambda b, o, y, x, oi: te.sum(
                A[b, ico, y, x, ici] * W[o, ico, 0, 0, ici, oi], axis=[ico, ici]), name="P")
            k2, i2 = te.reduce_axis((0, kb), name="k2"), te.reduce_axis((0, BN), name="i2")
            C = te.compute(conv.shape, lambda b, o, y, x, oi: te.sum(
                A[b, kc - kb + k2, y, x, i2] * W[o, kc - kb + k2, 0, 0, i2, oi], axis=[k2, i2],
                init=P[b, o, y, x, oi]), name="C")
            fout = epilogue(C)
            builds["fused"] = (_fused_schedule(fout, C, P, rows, oc_tile, reg_n, kb), fout)
        for name, (sch, o) in builds.items():
            f = tvm.build(sch, [*args, o], "llvm")
            arrs = [tvm.nd.array(v) for v in vals]
            arrs.append(tvm.nd.array(np.zeros([int(d) for d in o.shape], "float32")))
            f(*arrs)
            outs[name] = arrs[-1].numpy()
            sides[name] = (lambda f=f, a=arrs: f(*a))
    for name, got in outs.items():
        np.testing.assert_allclose(got, outs["default"], rtol=1e-4, atol=1e-4, err_msg=name)
    return sides, kb


def main() -> None:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="512x1024x28,1024x512x28,2048x1024x28,1024x2048x28")
    ap.add_argument("--rounds", type=int, default=11)
    args = ap.parse_args()
    bench_threads(1)
    for spec in args.shapes.split(","):
        ic, oc, hw = (int(v) for v in spec.split("x"))
        flop = 2 * ic * oc * hw * hw
        for residual in (False, True):
            sides, kb = _sides(ic, oc, hw, residual)
            got = interleaved_samples(sides, args.rounds, pause=0.1, target_s=0.1,
                                      clock=time.process_time)
            row = "  ".join(
                f"{k} {np.median(v) * 1e3:.3f} [{min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}] ms "
                f"({flop / np.median(v) / 1e9:.0f} GF/s)" for k, v in got.items())
            ratio = (f"  fused/default {np.median(np.divide(got['fused'], got['default'])):.3f}"
                     if "fused" in got else "  (not k-blocked: no fused side)")
            epi = "bias+residual+relu" if residual else "bias+relu"
            print(f"{ic}->{oc} {hw}x{hw} {epi} (k_block {kb}): {row}{ratio}", flush=True)


if __name__ == "__main__":
    main()
