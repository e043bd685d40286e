"""Issue 27 point 5(a): the roofline of ResNet-18's conv layers on VTA (the paper's Figure),
with and without latency hiding (virtual threads), on the default PYNQ-like design.

Each layer C2..C11 (224x224 network; C1 stays on the CPU as in the paper) is built with
``vta.top.conv2d_packed`` + its schedule (default tiles from the shape and the buffer sizes)
and the quantized epilogue (shift, bias, clip, cast), run on the cycle-model simulator, and
checked bit-exact against numpy. Without latency hiding: the same tiles with one thread.
Prints a table (cycles, GEMM utilization, ops/cycle, arithmetic intensity = ops per DRAM byte)
and writes bench/vta_roofline.png under the roofline min(peak, intensity x bandwidth).

    PYTHONPATH=. python bench/vta_roofline.py [--layers C2,C5] [--png bench/vta_roofline.png]
        [--cmd-queue-depth 512]   (entries per command queue; 8 = TVM's HLS C simulation)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tvmpy.vta as vta
from tvmpy.vta.top import workloads as W


def measure(wkl: W.Conv2DWorkload, cfg, check: dict) -> dict:
    env = vta.get_env()
    f = W.build_conv2d(wkl, cfg)
    packed = W.pack_conv2d_inputs(wkl, check["inp"])
    oh, ow = wkl.out_hw()
    out, st = W.run_module(f, packed, (packed[0].shape[0], packed[1].shape[0], oh, ow,
                                       env.BATCH, env.BLOCK_OUT))
    if not np.array_equal(W.unpack_conv2d_out(wkl, out), check["want"]):
        raise AssertionError("VTA result differs from numpy")
    ops = 2 * wkl.macs()
    dram = st["dram_read_bytes"] + st["dram_write_bytes"]
    return {"cycles": st["cycle_count"], "util": st["gemm_utilization"],
            "ops_per_cycle": ops / st["cycle_count"], "intensity": ops / dram, "dram": dram}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default=",".join(W.RESNET18_CONVS))
    ap.add_argument("--png", default="bench/vta_roofline.png")
    ap.add_argument("--cmd-queue-depth", type=int, default=0,
                    help="entries per command queue (default: the simulator's, the FPGA's 512)")
    args = ap.parse_args()
    if args.cmd_queue_depth:
        from tvmpy.vta.simulator import device
        device.CMD_QUEUE_DEPTH = args.cmd_queue_depth
    env = vta.get_env()
    hw = env.hw_config
    peak = 2 * env.BATCH * env.BLOCK_IN * env.BLOCK_OUT
    bw = float(getattr(hw, "dram_bytes_per_cycle", 8.0))
    print(f"# VTA {env}: peak {peak} ops/cycle, DRAM {bw:g} B/cycle, "
          f"clock {getattr(hw, 'clock_mhz', 100):g} MHz; ridge at {peak / bw:g} ops/B; "
          f"command queues of {vta.simulator.device.CMD_QUEUE_DEPTH} entries, ALU II "
          f"{vta.simulator.ALU_II}")
    print("| layer | shape | tiles (h,w,co,ci; threads oc x h) | cycles 1 thread | cycles latency hiding "
          "| speedup | GEMM util 1 -> LH | ops/cycle LH | ops/DRAM byte |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    for name in args.layers.split(","):
        wkl = W.RESNET18_CONVS[name]
        inp = W.conv2d_inputs(wkl, seed=1)
        check = {"inp": inp, "want": W.conv2d_reference(wkl, inp)[1]}
        lh_cfg = W.conv2d_config(wkl)
        t = {k: lh_cfg[f"tile_{k}"].size[-1] for k in ("h", "w", "co", "ci")}
        one_cfg = W.conv2d_config(wkl, oc_nthread=1, h_nthread=1, **t)
        t0 = time.perf_counter()
        one = measure(wkl, one_cfg, check)
        lh = measure(wkl, lh_cfg, check)
        wall = time.perf_counter() - t0
        nt = f"{lh_cfg['oc_nthread'].val}x{lh_cfg['h_nthread'].val}"
        shape = (f"{wkl.height}x{wkl.width} {wkl.in_filter}->{wkl.out_filter} "
                 f"k{wkl.hkernel} s{wkl.hstride}")
        print(f"| {name} | {shape} | {t['h']},{t['w']},{t['co']},{t['ci']}; {nt} | {one['cycles']:,} "
              f"| {lh['cycles']:,} | {one['cycles'] / lh['cycles']:.2f} | {one['util']:.2f} -> "
              f"{lh['util']:.2f} | {lh['ops_per_cycle']:.0f} | {lh['intensity']:.1f} |", flush=True)
        print(f"#   {name}: both runs bit-exact vs numpy, {wall:.1f} s wall", file=sys.stderr)
        rows.append((name, one, lh))
    best1 = max(r[1]["util"] for r in rows)
    bestl = max(r[2]["util"] for r in rows)
    print(f"\npeak GEMM utilization over the layers: {best1:.2f} without, {bestl:.2f} with latency "
          f"hiding (the paper: 0.70 -> 0.88)")
    from vta_plot import plot

    xs = [10 ** (k / 20) for k in range(10, 61)]
    series = [(f"roofline ({peak} ops/cycle, {bw:g} B/cycle)", xs,
               [min(peak, x * bw) for x in xs], "line"),
              ("no latency hiding", [r[1]["intensity"] for r in rows],
               [r[1]["ops_per_cycle"] for r in rows], "points"),
              ("latency hiding (virtual threads)", [r[2]["intensity"] for r in rows],
               [r[2]["ops_per_cycle"] for r in rows], "points")]
    notes = [(lh["intensity"], lh["ops_per_cycle"], name) for name, _one, lh in rows]
    how = plot(args.png, series, "ResNet-18 conv layers on VTA 1x16x16 (cycle model)",
               "arithmetic intensity (ops / DRAM byte)", "ops / cycle", logx=True, logy=True,
               notes=notes)
    print(f"wrote {args.png} ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
