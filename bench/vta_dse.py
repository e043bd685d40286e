"""Issue 27 point 5(d): a design-space sweep of VTA's hardware parameters over ResNet-18's conv
layers C2-C11 (224 network), cycles from the cycle-model simulator against an on-chip area
model, and the Pareto front (bench/vta_dse.png).

Each design is a ``HardwareConfig`` (BATCH, BLOCK_IN, BLOCK_OUT, input/weight/accumulator
buffer sizes, DRAM bytes per cycle); every layer is ``vta.top.conv2d_packed`` + its schedule
with the quantized epilogue under that design's *default tiles* (``default_tiles``: chosen from
the shape and the design's buffer sizes, two virtual threads), built with ``vta.build`` and
run on the simulator. Cycles are per image: a BATCH=2 design runs the layers at batch 2 and
its cycles are halved (its throughput; at batch 1 half its GEMM rows would idle).

Sampling (the full grid, 2 x 3 x 3 x 3^3 x 3 = 1458 points, would take hours here):
stage 1 builds every GEMM-core shape (BATCH 1/2 x BLOCK_IN 8/16/32 x BLOCK_OUT 8/16/32) with
three buffer scales (all three buffers at the default size, half it, twice it) plus each buffer
alone halved/doubled on the default core, all at the default 8 B/cycle DRAM; stage 2 re-runs
the designs on stage 1's Pareto front (and the default) at 4 and 16 B/cycle (the program does
not depend on the bandwidth, so stage 2 only re-simulates). Designs that ``HardwareConfig``
refuses (an instruction field does not fit its 128 bits) or for which a layer has no tiling
that fits the buffers are skipped and counted.

Area model (a model, not silicon): area = SRAM bits of the input, weight, accumulator, output
and micro-op buffers x 1 + int8 MACs of the GEMM core (BATCH x BLOCK_IN x BLOCK_OUT) x
``--mac-bits`` (default 3000 bit-equivalents: an int8 multiplier with its share of the int32
adder tree is about the area of 3000 SRAM bits, bitcell plus periphery, in a standard-cell
ASIC; a ballpark for relative comparisons only; the ALU, DMA engines and control are common to
every design and omitted).

    PYTHONPATH=. python bench/vta_dse.py [--layers C2,C8] [--png bench/vta_dse.png]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tvmpy.vta as vta  # noqa: E402
from tvmpy.vta.hw_config import ConfigError, HardwareConfig, default_config  # noqa: E402
from tvmpy.vta.top import workloads as W  # noqa: E402


def area_bits(c: HardwareConfig, mac_bits: float) -> dict[str, float]:
    """The area model's terms (bit-equivalents)."""
    sram = 8 * (c.INP_BUFF_SIZE + c.WGT_BUFF_SIZE + c.ACC_BUFF_SIZE + c.OUT_BUFF_SIZE
                + c.UOP_BUFF_SIZE)
    macs = c.BATCH * c.BLOCK_IN * c.BLOCK_OUT
    return {"sram_bits": sram, "macs": macs, "area": sram + mac_bits * macs}


def designs() -> list[HardwareConfig | tuple[dict, str]]:
    """Stage 1's design points (refused ones as (fields, reason))."""
    d = default_config()
    pts: list[dict] = []
    for lb in (0, 1):
        for bi in (3, 4, 5):
            for bo in (3, 4, 5):
                for scale in (-1, 0, 1):
                    pts.append(dict(log_batch=lb, log_block_in=bi, log_block_out=bo,
                                    log_inp_buff_size=d.log_inp_buff_size + scale,
                                    log_wgt_buff_size=d.log_wgt_buff_size + scale,
                                    log_acc_buff_size=d.log_acc_buff_size + scale))
    for buf in ("inp", "wgt", "acc"):
        for delta in (-1, 1):
            key = f"log_{buf}_buff_size"
            pts.append({key: getattr(d, key) + delta})
    out: list[Any] = []
    for p in pts:
        try:
            out.append(d.replace(**p))
        except ConfigError as e:
            out.append((p, str(e)))
    return out


def label(c: HardwareConfig) -> str:
    return (f"{c.BATCH}x{c.BLOCK_IN}x{c.BLOCK_OUT} i{c.INP_BUFF_SIZE >> 10}"
            f"w{c.WGT_BUFF_SIZE >> 10}a{c.ACC_BUFF_SIZE >> 10}K "
            f"{c.dram_bytes_per_cycle:g}B/c")


def build_design(c: HardwareConfig, layers: list[str]) -> list[tuple[Any, list, tuple, int]]:
    """(module, packed inputs, output shape, batch) per layer under ``c``'s default tiles."""
    out = []
    with vta.Environment(c) as env:
        for name in layers:
            w = W.RESNET18_CONVS[name]
            w = dataclasses.replace(w, batch=env.BATCH)
            f = W.build_conv2d(w)
            packed = W.pack_conv2d_inputs(w, W.conv2d_inputs(w, seed=1))
            oh, ow = w.out_hw()
            shape = (packed[0].shape[0], packed[1].shape[0], oh, ow, env.BATCH, env.BLOCK_OUT)
            out.append((f, packed, shape, env.BATCH))
    return out


def simulate(c: HardwareConfig, built: list) -> dict[str, float]:
    """Run the built layers on the design ``c`` (its bandwidth may differ from the build's:
    the program does not depend on it); cycles per image, summed over the layers."""
    cyc = 0.0
    util = []
    with vta.Environment(c):
        for f, packed, shape, batch in built:
            f.hw_config = c.to_dict()
            _, st = W.run_module(f, packed, shape)
            cyc += st["cycle_count"] / batch
            util.append(st["gemm_utilization"])
    return {"cycles": cyc, "util": float(np.mean(util))}


def pareto(points: list[dict]) -> list[dict]:
    """The points no other point beats on both cycles and area (ascending area)."""
    front = []
    for p in sorted(points, key=lambda p: (p["area"], p["cycles"])):
        if not front or p["cycles"] < front[-1]["cycles"]:
            front.append(p)
    return front


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default=",".join(W.RESNET18_CONVS))
    ap.add_argument("--mac-bits", type=float, default=3000.0)
    ap.add_argument("--bandwidths", default="4,16")
    ap.add_argument("--png", default="bench/vta_dse.png")
    args = ap.parse_args()
    layers = args.layers.split(",")
    t_start = time.perf_counter()
    refused: list[str] = []
    no_fit: list[str] = []
    points: list[dict] = []
    builds: dict[HardwareConfig, list] = {}
    for c in designs():
        if isinstance(c, tuple):
            refused.append(f"{c[0]}: {c[1][:90]}")
            continue
        t0 = time.perf_counter()
        try:
            built = build_design(c, layers)
        except ValueError as e:  # no tiling of some layer fits the buffers
            no_fit.append(f"{label(c)}: {str(e)[:90]}")
            continue
        r = simulate(c, built)
        builds[c] = built
        points.append({"cfg": c, **r, **area_bits(c, args.mac_bits)})
        print(f"#  {label(c)}: {r['cycles']:,.0f} cycles, util {r['util']:.2f}, "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    d = default_config()
    stage2 = {p["cfg"] for p in pareto(points)} | {d}  # all stage-1 points are at 8 B/cycle
    for c in sorted(stage2, key=label):
        for bw in (float(x) for x in args.bandwidths.split(",")):
            c2 = c.replace(dram_bytes_per_cycle=bw)
            r = simulate(c2, builds[c])
            points.append({"cfg": c2, **r, **area_bits(c2, args.mac_bits)})
    d_bw = d.dram_bytes_per_cycle
    # DRAM bandwidth costs no on-chip area in the model: fronts are per bandwidth
    fronts = {bw: pareto([p for p in points if p["cfg"].dram_bytes_per_cycle == bw])
              for bw in sorted({p["cfg"].dram_bytes_per_cycle for p in points})}
    on_front = [p for f in fronts.values() for p in f]
    front = fronts[d_bw]
    base = next(p for p in points if p["cfg"] == d)
    wall = time.perf_counter() - t_start
    print(f"# {len(points)} design points simulated over {','.join(layers)} in {wall:.0f} s; "
          f"skipped: {len(refused)} refused by HardwareConfig, {len(no_fit)} with a layer that "
          f"no tiling fits. Area: SRAM bits + {args.mac_bits:g} x MACs (a model).")
    for r in refused:
        print(f"#   refused {r}")
    for r in no_fit:
        print(f"#   no fit  {r}")
    print("\n| design (BATCHxBLOCK_INxBLOCK_OUT, inp/wgt/acc KiB, DRAM) | MACs | SRAM KiB | "
          "area (Mbit-eq) | cycles C2-C11 / image | vs default | mean GEMM util | "
          "Pareto (at its DRAM bandwidth) |")
    print("|---|---:|---:|---:|---:|---:|---:|:---:|")
    for p in sorted(points, key=lambda p: p["area"]):
        on = "**yes**" if any(p is q for q in on_front) else ""
        dflt = " (default)" if p is base else ""
        print(f"| {label(p['cfg'])}{dflt} | {p['macs']} | {p['sram_bits'] / 8192:.0f} | "
              f"{p['area'] / 1e6:.2f} | {p['cycles']:,.0f} | "
              f"{base['cycles'] / p['cycles']:.2f}x | {p['util']:.2f} | {on} |")
    from vta_plot import plot

    series = []
    for bw in fronts:
        pts = [p for p in points if p["cfg"].dram_bytes_per_cycle == bw
               and not any(p is q for q in front)]
        series.append((f"designs, DRAM {bw:g} B/cycle", [p["area"] / 1e6 for p in pts],
                       [p["cycles"] for p in pts], "points"))
    series += [(f"Pareto front at {d_bw:g} B/cycle", [p["area"] / 1e6 for p in front],
                [p["cycles"] for p in front], "line"),
               ("default 1x16x16 (PYNQ)", [base["area"] / 1e6], [base["cycles"]], "points")]
    notes = [(p["area"] / 1e6, p["cycles"], label(p["cfg"])) for p in front]
    how = plot(args.png, series, "VTA design space: ResNet-18 C2-C11 cycles vs on-chip area",
               "area model (Mbit-equivalents: SRAM bits + 3000 x MACs)",
               "cycles per image (C2-C11)", logx=True, logy=True, notes=notes)
    print(f"\nwrote {args.png} ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
