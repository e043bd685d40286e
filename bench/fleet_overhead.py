"""Wall time per tuning trial: RPCRunner over the loopback fleet vs LocalRunner, same x86 task.

The ``gemm.x86`` task (``--size``^3 fp32, default 512), ``--trials`` configs spread over its
space. Per batch (``--batch`` configs, default 2 = LocalBuilder's n_parallel here) the configs
are built once (LocalBuilder), each library copied, then timed by both runners, alternating
which goes first: LocalRunner (number/repeat as given, ``check_correctness=False`` like the RPC
side) and RPCRunner on a fleet of one native device (a Dask tracker + one device worker with
its RPC server, started here). Per trial: build wall / batch + run wall / batch; reported as
median and 10th-90th percentiles over the batches, and the ratio of the totals.

    PYTHONPATH=. python bench/fleet_overhead.py [--trials 32] [--size 512] [--number 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time

from tvmpy import autotvm
from tvmpy.autotvm.measure import BuildResult, MeasureInput
from tvmpy.rpc.tracker import DeviceWorker, Tracker


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def _copy(bres: list[BuildResult], tag: str) -> list[BuildResult]:
    out = []
    for b in bres:
        if b.filename:
            dst = b.filename[:-3] + f".{tag}.so"
            shutil.copyfile(b.filename, dst)
            b = b._replace(filename=dst)
        out.append(b)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--number", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    n = a.size
    task = autotvm.task.create("gemm.x86", (n, n, n, "float32"), "llvm")
    space = task.config_space
    step = max(1, len(space) // a.trials)
    configs = [space.get((i * step + 7) % len(space)) for i in range(a.trials)]
    tracker = Tracker(port=0)
    device = DeviceWorker(tracker.address, "bench-x86", name="bench-x86-0")
    try:
        builder = autotvm.LocalBuilder(n_parallel=a.batch, timeout=60)
        local = autotvm.LocalRunner(number=a.number, repeat=a.repeat, timeout=60,
                                    check_correctness=False)
        remote = autotvm.RPCRunner("bench-x86", port=tracker.port, number=a.number,
                                   repeat=a.repeat, timeout=60)
        for r in (builder, local, remote):
            r.set_task(task)
        warm = [MeasureInput(task.target, task, configs[0])]  # start workers and sessions
        wb = builder.build(warm)
        local.run(warm, _copy(wb, "l"))
        remote.run(warm, _copy(wb, "r"))
        per = {"local": [], "rpc": []}
        errors = {"local": 0, "rpc": 0}
        kernel = {"local": 0.0, "rpc": 0.0}
        for k, i in enumerate(range(0, len(configs), a.batch)):
            inputs = [MeasureInput(task.target, task, c) for c in configs[i:i + a.batch]]
            t0 = time.perf_counter()
            bres = builder.build(inputs)
            t_build = time.perf_counter() - t0
            sides = [("local", local, _copy(bres, "l")), ("rpc", remote, _copy(bres, "r"))]
            for b in bres:
                if b.filename:
                    os.remove(b.filename)
            for name, runner, libs in (sides if k % 2 == 0 else sides[::-1]):
                t0 = time.perf_counter()
                res = runner.run(inputs, libs)
                t_run = time.perf_counter() - t0
                per[name].append((t_build + t_run) / len(inputs))
                for r in res:
                    if r.error_no:
                        errors[name] += 1
                    else:
                        kernel[name] += statistics.mean(r.costs) * a.number * a.repeat
        for r in (builder, local, remote):
            r.close()
    finally:
        device.terminate()
        tracker.terminate()
    nt = len(configs)
    print(f"gemm.x86 {n}^3, {nt} trials in batches of {a.batch}, number={a.number} "
          f"repeat={a.repeat}, cpus={os.cpu_count()}")
    for name in ("local", "rpc"):
        xs = per[name]
        total = sum(xs) * a.batch
        print(f"{name:5s}: per trial median {statistics.median(xs) * 1e3:.0f} ms "
              f"(p10 {_pct(xs, 0.1) * 1e3:.0f}, p90 {_pct(xs, 0.9) * 1e3:.0f}); total "
              f"{total:.1f} s, timed kernel {kernel[name]:.1f} s, errors {errors[name]}")
    ratio = sum(per["rpc"]) / sum(per["local"])
    med = statistics.median(r / l for r, l in zip(per["rpc"], per["local"]))
    print(f"rpc / local wall per trial: {ratio:.3f} (totals), median of per-batch ratios {med:.3f}")


if __name__ == "__main__":
    main()
