"""How fast the VTA simulator runs a ResNet-18 conv layer, and what its cycle model says.

The layer (56x56, 64 -> 64 channels, 3x3, pad 1, int8) is written by hand against the runtime
API (tests/vta/programs.py's conv2d_tiled: row tiles, the border padding done by the DMA, one
or two interleaved buffer slots) and checked bit-exact against numpy. Prints the wall time of
the simulation (functional + cycle model), the GEMM micro-op iterations per second, and the
cycle count / GEMM utilization with and without the second slot (latency hiding).

    PYTHONPATH=. python bench/vta_sim_speed.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.vta import programs  # noqa: E402
from tvmpy.vta import hw_config as hc  # noqa: E402
from tvmpy.vta import simulator  # noqa: E402
from tvmpy.vta.runtime import CommandQueue  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cfg = hc.default_config()
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (4, 56, 56, 1, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (4, 4, 3, 3, 16, 16), dtype=np.int8)
    t0 = time.perf_counter()
    want = programs.conv_ref(x, w, 1, 10)
    t_ref = time.perf_counter() - t0
    print(f"config: {cfg}; numpy reference {t_ref:.2f} s")
    for rows, nslots in ((6, 1), (2, 1), (2, 2)):
        best = float("inf")
        for _ in range(args.rounds):
            simulator.clear_stats()
            cq = CommandQueue(cfg)
            t0 = time.perf_counter()
            got = programs.conv2d_tiled(cq, x, w, 10, rows, nslots)
            best = min(best, time.perf_counter() - t0)
            assert np.array_equal(got, want), "simulator result differs from numpy"
        s = simulator.stats()
        uops = s["gemm_counter"] + s["alu_counter"]
        print(f"rows/tile {rows} slots {nslots}: {best:.2f} s wall (best of {args.rounds}), "
              f"{uops / best / 1e6:.2f} M uop iterations/s ({s['gemm_counter']} GEMM + "
              f"{s['alu_counter']} ALU), {s['insn_count']} insns; cycles {s['cycle_count']} "
              f"= {s['cycle_count'] / cfg.clock_mhz / 1e3:.2f} ms @{cfg.clock_mhz:g} MHz, "
              f"GEMM utilization {s['gemm_utilization']:.2f}, DRAM read "
              f"{s['dram_read_bytes'] / 1e6:.2f} MB, compute stall "
              f"{s['compute_stall_cycles']} cycles; bit-exact vs numpy")


if __name__ == "__main__":
    main()
