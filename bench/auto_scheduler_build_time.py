"""Candidate build time of the auto-scheduler's random search (issue 28, point 5).

For a few computes, sample random annotated sketches and time, in this process and one
candidate at a time: the replay of the steps, ``tvm.lower`` and LLVM code generation + export
(what autotvm's LocalBuilder worker does per candidate). Prints the median and the spread
per compute, and the share of lowering spent in LoopPartition (profiled on the slowest
candidate). Usage: PYTHONPATH=. python bench/auto_scheduler_build_time.py [--n 20]

``--ab``: build every candidate twice in the same run, with LoopPartition unbounded
(``tir.LoopPartition.max_growth=None``, the pass before its budget) and with the default
budget, and print both (median and worst per compute, and the lowering / LLVM split).
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
    ap.add_argument("--ab", action="store_true", help="unbounded vs budgeted LoopPartition")
    a = ap.parse_args()
    if a.ab:
        return ab(a)
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


def ab(a: argparse.Namespace) -> None:
    """Each candidate lowered, then built (lowering + LLVM + export), under both settings."""
    import tvmpy as tvm

    tmp = tempfile.mkdtemp()
    modes = {"unbounded": None, "budget": "default"}
    total: dict[str, list[float]] = {m: [] for m in modes}
    for name, f, args in CASES:
        task = W.make_task(f, args)
        states = auto_scheduler.sample_initial_population(task, a.n, seed=a.seed)
        rows: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for k, s in enumerate(states):
            for mode, mg in modes.items():
                cfg = {} if mg == "default" else {"tir.LoopPartition.max_growth": mg}
                sch, targs = task.compute_dag.apply_steps_from_state(s)
                with tvm.transform.PassContext(config=cfg):
                    t0 = time.perf_counter()
                    tvm.lower(sch, targs)
                    t1 = time.perf_counter()
                    sch, targs = task.compute_dag.apply_steps_from_state(s)
                    t2 = time.perf_counter()
                    _build_library(sch, targs, "llvm", os.path.join(tmp, f"c{k}_{mode}.so"))
                    t3 = time.perf_counter()
                rows[mode].append((t3 - t2, t1 - t0))
        for mode in modes:
            b = [r[0] for r in rows[mode]]
            lo = [r[1] for r in rows[mode]]
            w = max(range(len(b)), key=lambda i: b[i])
            total[mode] += b
            print(f"{name:34s} {mode:9s} n={len(b):3d}  build median {statistics.median(b):.3f} s"
                  f"  max {b[w]:.3f} (its lowering {lo[w]:.3f})  lowering median "
                  f"{statistics.median(lo):.3f}", flush=True)
    for mode in modes:
        print(f"ALL {mode:9s} n={len(total[mode])} median {statistics.median(total[mode]):.3f} s"
              f"  max {max(total[mode]):.3f}")


if __name__ == "__main__":
    main()
