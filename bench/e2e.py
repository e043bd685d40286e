"""End-to-end batch-1 latency of ResNet-18, MobileNetV2 and the BERT encoder (4 layers, hidden
256, seq 128), random weights: tvmpy at opt_level 0 and 3 (default untuned schedules) vs
onnxruntime and eager PyTorch, same run, every side on ``--threads`` threads (tvmpy:
TVM_NUM_THREADS; onnxruntime: intra_op_num_threads; torch: set_num_threads), plus relay.build
times and where opt_level 3 spends its time (the graph executor's per-node profile; the sum of
the kernels' median times is printed too: on a loaded machine it is steadier than end-to-end).

    python bench/e2e.py [--models resnet18,mobilenet_v2,bert_encoder] [--repeat 10]
                        [--threads 2] [--levels 0,3] [--profile 8] [--no-torch]

Timing (bench/common.interleaved_samples): ``--repeat`` interleaved rounds (the order rotates),
each round ~0.1 s of calls after a 0.3 s pause; every call feeds the inputs and fetches the
outputs. Per side: best, median and max round. Ratios are tvmpy opt3's latency over
onnxruntime's (lower is faster): best round over best round, and the median with the min-max of
the per-round ratios (each round of tvmpy against the same round of onnxruntime).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
)

ensure_native_blas()  # numpy's BLAS is not timed here, but keep the benches' environment alike

import numpy as np  # noqa: E402

from tvmpy.cli.bench import bench_threads  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402

CONFIGS = {
    "resnet18": lambda: onnx_models.resnet18(batch=1, image=224),
    "mobilenet_v2": lambda: onnx_models.mobilenet_v2(batch=1, image=224),
    "bert_encoder": lambda: onnx_models.bert_encoder(layers=4, hidden=256, heads=4, seq=128),
}


def _profile(run, top: int) -> tuple[str, float]:
    """The ``top`` slowest kernels of a runner's graph executor, the share per op kind, and the
    sum of the kernels' median times (robust against a loaded machine, unlike end-to-end)."""
    prof = run.module.module.profile(number=20)
    rows = prof.sorted_rows()
    total = sum(r["time"] for r in rows) or 1.0
    by_kind: dict[str, float] = {}
    for r in rows:
        name = r["func_name"] or r["node"]
        kind = next((k for k in ("conv2d", "dense", "batch_matmul", "softmax", "layer_norm",
                                 "pool", "layout_transform", "transpose") if k in name), "other")
        by_kind[kind] = by_kind.get(kind, 0.0) + r["time"]
    lines = [f"    kernels: {len(rows)}, sum {total * 1e3:.2f} ms; by kind: " + ", ".join(
        f"{k} {v / total:.0%}" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]))]
    for r in rows[:top]:
        lines.append(f"    {r['time'] * 1e3:7.3f} ms {r['time'] / total:5.1%}  {r['node']}  "
                     f"-> {tuple(r['shape'])}")
    return "\n".join(lines), total


def add_torch_runner(runners: dict, model, threads: int = 2) -> None:
    """PyTorch eager on ``threads`` threads as ``runners["torch"]`` when torch is installed."""
    try:
        import torch

        from tvmpy.relay.testing.onnx_torch import torch_runner

        torch.set_num_threads(threads)
        runners["torch"] = torch_runner(model)
    except ImportError:
        pass


def bench_model(name: str, repeat: int, top: int, with_torch: bool, threads: int = 2,
                levels: tuple[int, ...] = (0, 3), cpu_time: bool = False) -> dict:
    model = CONFIGS[name]()
    feeds = onnx_models.input_feeds(model)
    shapes = {k: v.shape for k, v in feeds.items()}
    ort = compare.ort_runner(model, threads=threads)
    want = ort(feeds)[0]
    mod, params = compare.import_onnx(model, shapes)
    runners, row = {}, {"model": name}
    for level in levels:
        lib, secs = compare.build(mod, params, opt_level=level)
        run = compare.tvm_runner(lib)
        _, rel = compare.errors(run(feeds)[0], want)
        row[f"build{level}"], row[f"err{level}"] = secs, rel
        row[f"graph{level}"] = compare.graph_summary(lib)
        runners[f"opt{level}"] = run
    runners["ort"] = ort
    if with_torch:
        add_torch_runner(runners, model, threads)
    row["load"] = [os.getloadavg()[0]]
    samples = interleaved_samples({k: (lambda f=f: f(feeds)) for k, f in runners.items()},
                                  repeat, pause=0.3, target_s=0.1,
                                  clock=bench_clock(cpu_time, threads))
    row["load"].append(os.getloadavg()[0])
    row["samples"] = samples
    for k, v in samples.items():
        row[k] = min(v)
    if "opt3" in runners:
        per_round = sorted(a / b for a, b in zip(samples["opt3"], samples["ort"]))
        row["ratio_rounds"] = (per_round[0], float(np.median(per_round)), per_round[-1])
        time.sleep(0.3)
        row["profile"], row["kernels3"] = _profile(runners["opt3"], top)
    return row


def _ms(v: list[float]) -> str:
    """best / median / max of the rounds, in ms."""
    return f"{min(v) * 1e3:.2f} / {np.median(v) * 1e3:.2f} / {max(v) * 1e3:.2f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(CONFIGS))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--profile", type=int, default=8,
                   help="slowest opt3 kernels listed (0: no listing)")
    p.add_argument("--no-torch", dest="torch", action="store_false")
    p.add_argument("--threads", type=int, default=2,
                   help="threads of every side (default 2)")
    p.add_argument("--levels", default="0,3", help="tvmpy opt levels to build (default 0,3)")
    p.add_argument("--cpu-time", action="store_true",
                   help="time rounds in process CPU time (needs --threads 1): robust to a loaded "
                        "machine's preemption")
    opts = p.parse_args()
    if opts.cpu_time:
        bench_clock(True, opts.threads)  # refuses more than one thread before any build
    threads = bench_threads(opts.threads)  # before any tvmpy library runs
    levels = tuple(int(v) for v in opts.levels.split(","))
    if 3 not in levels or not set(levels) <= {0, 1, 2, 3}:
        p.error(f"--levels must include 3 (the compared level), got {opts.levels!r}")
    names = [n for n in opts.models.split(",") if n]
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        p.error(f"unknown models {bad}; choose from {list(CONFIGS)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; batch 1, "
          f"{opts.repeat} interleaved rounds; {threads} thread(s) on every side; "
          f"{'process CPU time' if opts.cpu_time else 'wall time'}")
    rows = []
    for name in names:
        row = bench_model(name, opts.repeat, opts.profile, opts.torch, threads, levels,
                          opts.cpu_time)
        rows.append(row)
        built = ", ".join(f"opt{lv} {row[f'build{lv}']:.1f} s" for lv in levels)
        errs = ", ".join(f"opt{lv} {row[f'err{lv}']:.1e}" for lv in levels)
        print(f"{name}: built {built}; max rel error vs onnxruntime {errs}; load average "
              f"{row['load'][0]:.2f} -> {row['load'][1]:.2f}", flush=True)
        for level in levels:
            g = row[f"graph{level}"]
            print(f"    opt{level}: {g['kernels']} kernels, intermediates "
                  f"{g['planned_bytes'] / 1e6:.1f} MB planned vs {g['naive_bytes'] / 1e6:.1f} MB "
                  "unshared", flush=True)
        if opts.profile:
            print(row["profile"], flush=True)
    print()
    print(f"rounds: best / median / max ms; {threads} thread(s) on every side")
    print("| model | build opt3 (s) | tvmpy opt3 (ms) | onnxruntime (ms) | opt3 / ORT best | "
          "opt3 / ORT per round: median [min, max] | opt0 (ms) | PyTorch eager (ms) | "
          "opt3 kernel sum (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["samples"]
        lo, mid, hi = r["ratio_rounds"]
        print(f"| {r['model']} | {r['build3']:.1f} | {_ms(s['opt3'])} | {_ms(s['ort'])} | "
              f"{r['opt3'] / r['ort']:.2f} | {mid:.2f} [{lo:.2f}, {hi:.2f}] | "
              f"{_ms(s['opt0']) if 'opt0' in s else '-'} | "
              f"{_ms(s['torch']) if 'torch' in s else '-'} | {r['kernels3'] * 1e3:.2f} |")
    worst = max(r[f"err{lv}"] for r in rows for lv in levels)
    print(f"\nlargest max|tvmpy - ort| / max|ort| over the models and levels: {worst:.1e}")


if __name__ == "__main__":
    main()
