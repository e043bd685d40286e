"""Per-launch cost of the parallel runtime against the work a launch holds.

One kernel runs ``--launches`` parallel loops back to back (a serial ``r`` loop around a
parallel ``i`` loop of ``--extent`` iterations, each a reduction over ``L`` floats that stay
in L1); the same compute built serial is the
reference (``B[r, i] = sum_j A[(i + r) % extent, j] * (r + 1)``). Per ``L`` (``--lengths``): the serial time per launch (the work), the parallel time
per launch, the speedup, and the excess of a launch over a perfect split (parallel - serial /
threads): the launch cost the runtime adds (publication, the workers' pick-up, chunk grabs,
the closing wait). The kernels are timed in interleaved rounds (wall clock: a latency across
threads; say the load), min and median of the rounds.

    TVM_NUM_THREADS=2 python bench/parallel_launch_cost.py [--lengths 8,32,128,512,2048]
        [--extent 16] [--launches 2000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import bench_threads, interleaved_samples, machine_description  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import te  # noqa: E402


def build(launches: int, extent: int, length: int, parallel: bool):
    A = te.placeholder((extent, length), name="A")
    j = te.reduce_axis((0, length), name="j")
    # row (i + r) % extent: nothing is invariant across launches for LLVM to hoist
    B = te.compute((launches, extent),
                   lambda r, i: te.sum(A[(i + r) % extent, j] * (r + 1).astype("float32"),
                                       axis=j), name="B")
    s = te.create_schedule(B.op)
    if parallel:
        s[B].parallel(B.op.axis[1])
    f = tvm.build(s, [A, B], "llvm")
    src = f.get_source("ll")
    assert ("tvmpy_parallel_run" in src) == parallel
    return f


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="8,32,128,512,2048")
    p.add_argument("--extent", type=int, default=16)
    p.add_argument("--launches", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=15)
    o = p.parse_args()
    threads = bench_threads()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; {threads} thread(s); "
          f"load average {os.getloadavg()[0]:.1f}; extent {o.extent}, {o.launches} launches "
          f"per call, {o.rounds} interleaved rounds (wall clock)")
    print("| L | serial us/launch (min, median) | parallel us/launch (min, median) | speedup "
          "(median) | excess us/launch (median) |")
    print("|---:|---|---|---:|---:|")
    rng = np.random.default_rng(0)
    for length in (int(x) for x in o.lengths.split(",") if x):
        a = tvm.nd.array(rng.uniform(-1, 1, (o.extent, length)).astype("float32"))
        outs = {}
        sides = {}
        for par in (False, True):
            f = build(o.launches, o.extent, length, par)
            b = tvm.nd.empty((o.launches, o.extent))
            f(a, b)
            outs[par] = b.numpy()
            sides["parallel" if par else "serial"] = (lambda f=f, a=a, b=b: f(a, b))
        rows = a.numpy().astype(np.float64).sum(1)
        r, i = np.meshgrid(np.arange(o.launches), np.arange(o.extent), indexing="ij")
        want = (r + 1) * rows[(i + r) % o.extent]
        for got in outs.values():
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
        samples = interleaved_samples(sides, o.rounds, pause=0.05, target_s=0.02)
        ser = [x / o.launches * 1e6 for x in samples["serial"]]
        pa = [x / o.launches * 1e6 for x in samples["parallel"]]
        ms, mp = statistics.median(ser), statistics.median(pa)
        print(f"| {length} | {min(ser):.2f}, {ms:.2f} | {min(pa):.2f}, {mp:.2f} | "
              f"{ms / mp:.2f} | {mp - ms / threads:.2f} |", flush=True)


if __name__ == "__main__":
    main()
