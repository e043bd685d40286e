"""The model zoo at its real sizes (tvmpy.relay.testing.zoo, random weights): tvmpy
(relay.build opt_level 3, untuned default schedules, graph executor; the detector's NMS on the
VM) vs onnxruntime on the same ONNX export, same process, at each ``--threads`` count.

    python bench/zoo.py [--models resnet50,bert] [--threads 1,2] [--rounds 7] [--cpu-time]

Each thread count runs in its own process (tvmpy's thread pool is sized once per process):
TVM_NUM_THREADS / OMP_NUM_THREADS and onnxruntime's intra_op_num_threads are the same count
(bench/common.bench_threads). Timing (bench/common.interleaved_samples): ``--rounds``
interleaved rounds, each the mean of ~0.1 s of calls after a pause; every call feeds the inputs
and fetches the outputs as numpy arrays on both sides. Printed per model: build seconds, best
round of each side, the ratio tvmpy / onnxruntime (lower is faster; median of per-round ratios
with its min-max), and whether the outputs agree (tests/e2e/test_models.py's norm); then the
geomean of the ratios. ``--cpu-time`` times the 1-thread rounds by process CPU time (a loaded
machine's preemption does not inflate it; other thread counts stay on wall time).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    ensure_native_blas,
    geomean,
    interleaved_samples,
    machine_description,
)

ensure_native_blas()


def _run_one(name: str, threads: int, rounds: int,
             cpu_time: bool = False) -> tuple[float, float, float, list, str]:
    """(build s, tvmpy best s, onnxruntime best s, per-round ratios, agreement note)."""

    from tvmpy.relay.testing import compare, zoo

    entry = zoo.MODELS[name]
    spec = entry("real")
    model = zoo.to_onnx(spec)
    if entry.vm:
        model = zoo.append_onnx_nms(model)
    feeds = spec.feeds(seed=1)
    mod, params = zoo.from_onnx(model, spec)
    t0 = time.perf_counter()
    built = zoo.build(mod, params, vm=entry.vm)
    build_s = time.perf_counter() - t0
    ort = compare.ort_runner(model, threads=threads)
    try:
        zoo.assert_close(built.run(feeds), ort(feeds), name)
        note = "ok"
    except AssertionError as e:
        note = f"MISMATCH: {e}"
    samples = interleaved_samples({"tvmpy": lambda: built.run(feeds), "ort": lambda: ort(feeds)},
                                  rounds, pause=0.3, target_s=0.1,
                                  clock=bench_clock(cpu_time, threads))
    ratios = [a / b for a, b in zip(samples["tvmpy"], samples["ort"])]
    return build_s, min(samples["tvmpy"]), min(samples["ort"]), ratios, note


def _one_thread_count(models: list[str], threads: int, rounds: int,
                      cpu_time: bool = False) -> None:
    from common import bench_threads

    threads = bench_threads(threads)  # before tvmpy's pool starts
    print(f"== {threads} thread(s)", flush=True)
    print(f"{'model':<20} {'build':>7} {'tvmpy':>10} {'ort':>10} {'ratio':>6}  (min-max)",
          flush=True)
    best = []
    for name in models:
        try:
            b, tv, ort, ratios, note = _run_one(name, threads, rounds, cpu_time)
        except Exception as e:  # noqa: BLE001  (a model that fails is reported, others go on)
            print(f"{name:<20} FAILED: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        r = sorted(ratios)
        best.append(tv / ort)
        print(f"{name:<20} {b:6.1f}s {tv * 1e3:8.2f}ms {ort * 1e3:8.2f}ms {tv / ort:6.2f}  "
              f"(median {r[len(r) // 2]:.2f}, {r[0]:.2f}-{r[-1]:.2f}) {note}", flush=True)
    print(f"geomean tvmpy/onnxruntime at {threads} thread(s): {geomean(best):.2f} "
          f"over {len(best)} models", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=None, help="comma-separated zoo names (default: all)")
    ap.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cpu-time", action="store_true",
                    help="time rounds by the process's CPU time (1 thread only): steadier than "
                         "wall time on a loaded machine (bench/common.bench_clock)")
    args = ap.parse_args()
    from tvmpy.relay.testing import zoo

    models = args.models.split(",") if args.models else list(zoo.MODELS)
    unknown = [m for m in models if m not in zoo.MODELS]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; the zoo has {sorted(zoo.MODELS)}")
    counts = [int(t) for t in args.threads.split(",")]
    if len(counts) == 1:
        print(machine_description(), flush=True)
        _one_thread_count(models, counts[0], args.rounds, args.cpu_time)
        return
    for t in counts:  # one process per thread count
        subprocess.run([sys.executable, os.path.abspath(__file__), "--models", ",".join(models),
                        "--threads", str(t), "--rounds", str(args.rounds)]
                       + (["--cpu-time"] if args.cpu_time and t == 1 else []), check=False)


if __name__ == "__main__":
    main()
