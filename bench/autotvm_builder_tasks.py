"""LocalBuilder across many tasks: candidate builds per second when a tuner switches task after
every small batch (as ``tune_tasks`` with many tasks, or the auto-scheduler's task scheduler).

A/B in the same run, rounds interleaved: ``keep`` is the builder as it is (workers kept across
tasks); ``restart`` closes the builder's workers at every task switch, which is what
``set_task`` did before (shut the workers down, start fresh ones that load the new task).

    PYTHONPATH=. python bench/autotvm_builder_tasks.py --tasks 8 --batch 2 --rounds 3
"""

from __future__ import annotations

import argparse
import time

import common  # noqa: F401 - strict schedules

from tvmpy import te
from tvmpy.autotvm.measure import LocalBuilder, MeasureInput
from tvmpy.autotvm.task import create, get_config, template


@template("bench_builder_tasks/matmul")
def matmul(n: int, k: int, m: int):
    a = te.placeholder((n, k), name="A")
    b = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    s = te.create_schedule(c.op)
    cfg = get_config()
    y, x = s[c].op.axis
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, c, y)
    xo, xi = cfg["tile_x"].apply(s, c, x)
    s[c].reorder(yo, xo, r, yi, xi)
    return s, [a, b, c]


def run(mode: str, tasks: list, batch: int, sweeps: int, n_parallel: int) -> tuple[float, int]:
    builder = LocalBuilder(timeout=60, n_parallel=n_parallel)
    built = 0
    try:
        builder.build([MeasureInput(tasks[0].target, tasks[0], tasks[0].config_space.get(0))])
        t0 = time.perf_counter()
        for sweep in range(sweeps):
            for t in tasks:
                if mode == "restart":
                    builder.close()  # the old set_task: workers shut down at a task switch
                builder.set_task(t)
                n = len(t.config_space)
                inputs = [MeasureInput(t.target, t, t.config_space.get((sweep * batch + j) % n))
                          for j in range(batch)]
                res = builder.build(inputs)
                assert all(r.error_no == 0 for r in res), res
                built += len(res)
        return time.perf_counter() - t0, built
    finally:
        builder.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--batch", type=int, default=2, help="candidates per task switch")
    p.add_argument("--sweeps", type=int, default=2, help="passes over the tasks per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--n-parallel", type=int, default=2)
    args = p.parse_args()
    tasks = [create("bench_builder_tasks/matmul", (8 + 3 * i, 16 + i, 12 + 5 * i), "llvm")
             for i in range(args.tasks)]
    best: dict[str, float] = {}
    for rnd in range(args.rounds):
        for mode in (("keep", "restart") if rnd % 2 == 0 else ("restart", "keep")):
            wall, n = run(mode, tasks, args.batch, args.sweeps, args.n_parallel)
            rate = n / wall
            best[mode] = max(best.get(mode, 0.0), rate)
            print(f"round {rnd} {mode:8s} {n} builds in {wall:.2f} s: {rate:.2f} builds/s")
    print(f"best: keep {best['keep']:.2f} builds/s, restart {best['restart']:.2f} builds/s, "
          f"ratio {best['keep'] / best['restart']:.2f}x")


if __name__ == "__main__":
    main()
