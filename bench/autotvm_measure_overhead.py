"""Measurement overhead of autotvm's LocalBuilder + LocalRunner per trial.

32 candidates of a 512x512x512 fp32 matmul template, measured in batches of ``n_parallel``
through ``create_measure_batch``. Overhead = wall time - time spent in the kernel itself, where
the kernel time of a trial is ``mean(costs) * calls`` (calls: the correctness call, the
evaluator's warm-up call and ``number * repeat`` timed calls; ``number`` as run, at its
default ``min_repeat_ms=0`` it does not grow).

    python bench/autotvm_measure_overhead.py [--trials 32] [--number 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time

from tvmpy import autotvm, te
from tvmpy.autotvm.measure import MeasureInput, create_measure_batch


@autotvm.template("bench/measure_matmul")
def matmul(n: int, l: int, m: int):  # noqa: E741
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    cfg.add_flop(2 * n * l * m)
    return s, [A, B, C]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--number", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--flush", action="store_true", help="enable_cpu_cache_flush")
    a = ap.parse_args()
    n = a.size
    task = autotvm.task.create("bench/measure_matmul", (n, n, n), "llvm")
    space = task.config_space
    step = max(1, len(space) // a.trials)
    configs = [space.get((i * step) % len(space)) for i in range(a.trials)]
    option = autotvm.measure_option(
        autotvm.LocalBuilder(),
        autotvm.LocalRunner(number=a.number, repeat=a.repeat, enable_cpu_cache_flush=a.flush))
    t_setup = time.perf_counter()
    batch = create_measure_batch(task, option)
    batch([MeasureInput(task.target, task, configs[0])])  # start the workers, build the reference
    t_setup = time.perf_counter() - t_setup
    calls = a.number * a.repeat + 2
    builder, runner = option["builder"], option["runner"]
    results = []
    t_build = t_run = kernel = timed_out = 0.0
    for i in range(0, len(configs), batch.n_parallel):
        inputs = [MeasureInput(task.target, task, c) for c in configs[i:i + batch.n_parallel]]
        t0 = time.perf_counter()
        bres = builder.build(inputs)
        t1 = time.perf_counter()
        res = runner.run(inputs, bres)
        t_build += t1 - t0
        t_run += time.perf_counter() - t1
        for b, r in zip(bres, res):
            if r.error_no == 0:
                kernel += sum(r.costs) / len(r.costs) * calls
            elif r.error_no == autotvm.MeasureErrorNo.RUN_TIMEOUT:
                timed_out += r.all_cost - b.time_cost  # the kernel ran until it was killed
        results += res
    ok = [r for r in results if r.error_no == 0]
    best = min(sum(r.costs) / len(r.costs) for r in ok) if ok else float("nan")
    batch.close()
    nt = len(results)
    print(f"cpus={os.cpu_count()} n_parallel={batch.n_parallel} trials={nt} "
          f"ok={len(ok)} errors={[r.error_no for r in results if r.error_no]}")
    print(f"setup (workers + reference) {t_setup:.2f} s")
    print(f"build {t_build:.2f} s ({t_build / nt * 1e3:.0f} ms/trial); run {t_run:.2f} s, of which "
          f"kernel {kernel:.2f} s and killed-at-timeout kernels {timed_out:.2f} s")
    over = t_build + t_run - kernel - timed_out
    print(f"overhead per trial {over / nt * 1e3:.0f} ms (build {t_build / nt * 1e3:.0f} + run "
          f"{(t_run - kernel - timed_out) / nt * 1e3:.0f}); best {best * 1e3:.2f} ms "
          f"({2 * n ** 3 / best / 1e9:.2f} GFLOP/s)")


if __name__ == "__main__":
    main()
