"""Candidate build time of the auto-scheduler's random search (issue 28, point 5).

For a few computes, sample random annotated sketches and time, in this process and one
candidate at a time: the replay of the steps, ``tvm.lower`` and LLVM code generation + export
(what autotvm's LocalBuilder worker does per candidate). Prints the median and the spread
per compute, and the share of lowering spent in LoopPartition (profiled on the slowest
candidate). Usage: PYTHONPATH=. python bench/auto_scheduler_build_time.py [--n 20]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "auto_scheduler"))

import as_workloads as W  # noqa: E402

from tvmpy import auto_scheduler  # noqa: E402
from tvmpy.autotvm.measure.local_builder import _build_library  # noqa: E402

CASES = [("matmul 128", W.matmul, (128, 128, 128)),
         ("conv2d+bias+relu 1x64x28x28 k3", W.conv2d_bias_relu, (1, 28, 28, 64, 64, 3, 3, 1, 1)),
         ("depthwise 1x64x56x56 k3", W.depthwise_conv, (1, 64, 56, 56, 3, 1)),
         ("softmax 128x1000", W.softmax, (128, 1000))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    all_times = []
    for name, f, args in CASES:
        task = W.make_task(f, args)
        states = auto_scheduler.sample_initial_population(task, a.n, seed=a.seed)
        rows = []
        for k, s in enumerate(states):
            t0 = time.perf_counter()
            sch, targs = task.compute_dag.apply_steps_from_state(s)
            t1 = time.perf_counter()
            _build_library(sch, targs, "llvm", os.path.join(tmp, f"c{k}.so"))
            t2 = time.perf_counter()
            rows.append((t2 - t0, t1 - t0, s))
        times = sorted(r[0] for r in rows)
        all_times += times
        print(f"{name:34s} n={len(times):3d}  median {statistics.median(times):.3f} s  "
              f"min {times[0]:.3f}  max {times[-1]:.3f}  (replay {statistics.median(r[1] for r in rows) * 1e3:.1f} ms)")
        worst = max(rows, key=lambda r: r[0])[2]
        sch, targs = task.compute_dag.apply_steps_from_state(worst)
        prof = cProfile.Profile()
        prof.enable()
        import tvmpy as tvm

        tvm.lower(sch, targs)
        prof.disable()
        st = pstats.Stats(prof)
        total = sum(v[3] for k, v in st.stats.items() if k[2] == "lower")  # type: ignore[attr-defined]
        lp = sum(v[3] for k, v in st.stats.items() if k[2] == "loop_partition_func")  # type: ignore[attr-defined]
        if total:
            print(f"{'':34s} slowest candidate: lower {total:.2f} s, LoopPartition {lp:.2f} s "
                  f"({100 * lp / total:.0f}%)")
    print(f"ALL n={len(all_times)} median {statistics.median(all_times):.3f} s")


if __name__ == "__main__":
    main()
