"""The LLVM backend's parallel runtime: tvmpy's thread pool vs libgomp (``PARALLEL_RUNTIME``).

1. Per-launch overhead: ``B[r, i] = A[r, i] + 1`` with a serial ``r`` loop around a parallel
   ``i`` loop of E iterations (each of ``--extents``): one call launches ``--launches``
   parallel loops; time per launch = call time / launches (best and median of 15 calls).
2. End to end: ResNet-18 (1x3x224x224) and the BERT encoder (4 layers, hidden 256, seq 128) at
   opt_level 3, built once per runtime, beside onnxruntime (as many threads as tvmpy): the best, median,
   90th percentile and mean of single-call latencies, quiet and then with ``--busy``
   background busy-loop processes (``python -c "while True: pass"``), same run. Sides are
   interleaved in rounds of ~0.3 s of calls each, after a 0.3 s pause (idle-spinning threads
   of the previous side).

    python bench/parallel_overhead.py [--models bert_encoder,resnet18] [--rounds 8] [--busy 2]

The thread count is the runtimes' default (TVM_NUM_THREADS / OMP_NUM_THREADS, else all CPUs),
pinned for every side by common.bench_threads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import bench_threads, ensure_native_blas, machine_description  # noqa: E402

ensure_native_blas()

import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import te  # noqa: E402
from tvmpy.config import config  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402

RUNTIMES = ("pool", "gomp")
MODELS = {
    "resnet18": lambda: onnx_models.resnet18(batch=1, image=224),
    "bert_encoder": lambda: onnx_models.bert_encoder(layers=4, hidden=256, heads=4, seq=128),
}


def launch_overhead(runtime: str, launches: int, extent: int) -> tuple[float, float]:
    """(best, median) seconds per parallel-loop launch."""
    A = te.placeholder((launches, extent), name="A")
    B = te.compute((launches, extent), lambda r, i: A[r, i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[1])
    with config(PARALLEL_RUNTIME=runtime):
        f = tvm.build(s, [A, B], "llvm")
    src = f.get_source("ll")
    assert ("GOMP_parallel" if runtime == "gomp" else "tvmpy_parallel_run") in src
    a = tvm.nd.array(np.random.default_rng(0).random((launches, extent), "float32"))
    b = tvm.nd.empty((launches, extent))
    f(a, b)
    np.testing.assert_allclose(b.numpy(), a.numpy() + 1, rtol=1e-6)
    times = []
    for _ in range(15):
        t = time.perf_counter()
        f(a, b)
        times.append((time.perf_counter() - t) / launches)
    return min(times), statistics.median(times)


def per_call_latencies(runners: Mapping[str, Callable], feeds: Mapping[str, np.ndarray],
                       rounds: int, round_s: float = 0.3,
                       pause: float = 0.3) -> dict[str, list[float]]:
    """Single-call latencies of each runner, interleaved in ``rounds`` rounds."""
    out: dict[str, list[float]] = {k: [] for k in runners}
    for fn in runners.values():
        fn(feeds)
    for _ in range(rounds):
        for name, fn in runners.items():
            time.sleep(pause)
            start = time.perf_counter()
            while True:
                t = time.perf_counter()
                fn(feeds)
                now = time.perf_counter()
                out[name].append(now - t)
                if now - start >= round_s:
                    break
    return out


def build_sides(name: str) -> tuple[dict[str, Callable], dict[str, np.ndarray]]:
    model = MODELS[name]()
    feeds = onnx_models.input_feeds(model)
    mod, params = compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})
    ort = compare.ort_runner(model, threads=bench_threads())
    want = ort(feeds)[0]
    runners: dict[str, Callable] = {}
    for rt in RUNTIMES:
        with config(PARALLEL_RUNTIME=rt):
            lib, _ = compare.build(mod, params, opt_level=3)
        run = compare.tvm_runner(lib)
        _, rel = compare.errors(run(feeds)[0], want)
        assert rel < 1e-4, f"{name} {rt}: relative error {rel:.1e} vs onnxruntime"
        runners[f"tvmpy {rt}"] = run
    runners["onnxruntime"] = ort
    return runners, feeds


def _busy(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="bert_encoder,resnet18")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--busy", type=int, default=2, help="background busy-loop processes")
    p.add_argument("--launches", type=int, default=20000)
    p.add_argument("--extents", default="2,256")
    opts = p.parse_args()
    bench_threads()  # before any tvmpy library runs; onnxruntime gets the same
    names = [n for n in opts.models.split(",") if n]
    bad = [n for n in names if n not in MODELS]
    if bad:
        p.error(f"unknown models {bad}; choose from {list(MODELS)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"\nper-launch overhead ({opts.launches} launches per call):")
    for ext in (int(e) for e in opts.extents.split(",") if e):
        for rt in RUNTIMES:
            best, med = launch_overhead(rt, opts.launches, ext)
            print(f"  {ext:5d} iterations, {rt:5s}: best {best * 1e6:6.2f} us, median "
                  f"{med * 1e6:6.2f} us", flush=True)
    if not names:
        return
    sides = {n: build_sides(n) for n in names}
    rows = []
    for label, nbusy in (("quiet", 0), (f"{opts.busy} busy loops", opts.busy)):
        procs = _busy(nbusy)
        try:
            time.sleep(0.5 if procs else 0.0)
            for n in names:
                runners, feeds = sides[n]
                lat = per_call_latencies(runners, feeds, opts.rounds)
                load = os.getloadavg()[0]  # 1-minute average, at the end of the measurement
                for side, ts in lat.items():
                    ts = sorted(ts)
                    rows.append((n, f"{label} (load {load:.1f})", side, len(ts), ts[0],
                                 statistics.median(ts), ts[int(0.9 * (len(ts) - 1))],
                                 statistics.fmean(ts)))
                    print(f"  {n} {label} (load {load:.1f}) {side}: median "
                          f"{rows[-1][5] * 1e3:.2f} ms over {len(ts)} calls", flush=True)
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
    print("\n| model | machine | side | calls | best (ms) | median (ms) | p90 (ms) | mean (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for n, label, side, cnt, best, med, p90, mean in rows:
        print(f"| {n} | {label} | {side} | {cnt} | {best * 1e3:.2f} | {med * 1e3:.2f} | "
              f"{p90 * 1e3:.2f} | {mean * 1e3:.2f} |")


if __name__ == "__main__":
    main()
