"""The reduction-blocked x86 NCHWc 1x1 convolution (``default_k_block`` > 0) as the default
schedule runs it, against the same nest with its epilogue applied in the last reduction block's
registers: what fusing the bias / residual / relu pass into the blocked nest would give (issue
25 point 4). 1 thread, one process, interleaved rounds, CPU time.

    python bench/conv1x1_epilogue_ab.py [--shapes 512x1024x28,2048x1024x28] [--rounds 11]

Sides, per shape (``ICxOCxHW``, 16-channel blocks, NCHWc input and output), each for the
epilogues of ``--epilogues`` (none, bias + relu, bias + residual + relu):

* ``default``: ``topi.nn.conv2d_NCHWc`` and ``schedule_conv2d_NCHWc``, the single-stage
  blocked nest. The task (``default_k_rows`` rows x ``oc_tile`` chunks) accumulates in a
  scratch buffer (zeroed, then reloaded and stored back by every register tile once per
  reduction block), and the epilogue is a separate pass over the scratch buffer (reads it,
  the bias and the residual; writes the output).
* ``fused``: the same convolution through ``split_last_k_block`` (what the AutoTVM template
  ``conv2d_NCHWc.x86``, and so an untuned relay.build, computes): ``P`` sums all reduction
  blocks but the last, k-blocked in the same scratch buffer as the default; the last block's
  stage starts its accumulators from ``P`` (``te.sum(..., init=P[...])``), one register tile
  at a time, computed at the output's column tile, so the epilogue reads its accumulators from
  registers and stores the output once. Same tile, block and task as the default; checked
  against it. No ``fused`` side where ``fuses_last_k_block`` says no (not blocked, small maps).

(Session 5's h-rx2 built the ``fused`` side here by hand, before the mechanism was in tvmpy.)

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


def _sides(ic: int, oc: int, hw: int, residual: bool | None) -> tuple[dict, int]:
    import numpy as np

    import tvmpy as tvm
    from tvmpy import te, topi
    from tvmpy.topi import nn
    from tvmpy.topi.x86 import conv2d_nchwc as cn

    A = te.placeholder((1, ic // BN, hw, hw, BN), name="A")
    W = te.placeholder((oc // BN, ic // BN, 1, 1, BN, BN), name="W")
    B = te.placeholder((1, oc // BN, 1, 1, BN), name="B")
    R = te.placeholder((1, oc // BN, hw, hw, BN), name="R")
    args = [A, W] if residual is None else [A, W, B, R] if residual else [A, W, B]

    def epilogue(c):  # noqa: ANN001, ANN202
        if residual is None:
            return c
        return topi.nn.relu(topi.add(topi.add(c, B), R) if residual else topi.add(c, B))

    rng = np.random.default_rng(0)
    vals = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32") for t in args]
    vals[1] /= np.sqrt(ic)
    sides, outs = {}, {}
    with tvm.target.Target("llvm"):
        conv = nn.conv2d_NCHWc(A, W, 1, 0, 1, f"NCHW{BN}c", f"NCHW{BN}c")
        out = epilogue(conv)
        s = cn.schedule_conv2d_NCHWc([out])
        oc_tile = cn.default_row_tile(conv, False)[1]
        kb = cn.default_k_block(conv, oc_tile, False)
        builds = {"default": (s, out)}
        split = cn.split_last_k_block(conv)
        if split is not conv:
            fout = epilogue(split)
            builds["fused"] = (cn.schedule_conv2d_NCHWc([fout]), fout)
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
    ap.add_argument("--epilogues", default="bias+relu,bias+residual+relu",
                    help="comma list of none, bias+relu, bias+residual+relu")
    args = ap.parse_args()
    bench_threads(1)
    for spec in args.shapes.split(","):
        ic, oc, hw = (int(v) for v in spec.split("x"))
        flop = 2 * ic * oc * hw * hw
        for epi in args.epilogues.split(","):
            residual = {"none": None, "bias+relu": False, "bias+residual+relu": True}[epi]
            sides, kb = _sides(ic, oc, hw, residual)
            got = interleaved_samples(sides, args.rounds, pause=0.1, target_s=0.1,
                                      clock=time.process_time)
            row = "  ".join(
                f"{k} {np.median(v) * 1e3:.3f} [{min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}] ms "
                f"({flop / np.median(v) / 1e9:.0f} GF/s)" for k, v in got.items())
            ratio = (f"  fused/default {np.median(np.divide(got['fused'], got['default'])):.3f}"
                     if "fused" in got else "  (not split: no fused side)")
            print(f"{ic}->{oc} {hw}x{hw} {epi} (k_block {kb}): {row}{ratio}", flush=True)


if __name__ == "__main__":
    main()
