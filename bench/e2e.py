"""End-to-end batch-1 latency of ResNet-18, MobileNetV2 and the BERT encoder (4 layers, hidden
256, seq 128), random weights: tvmpy at opt_level 0 and 3 (default untuned schedules) vs
onnxruntime (intra_op_num_threads=2) and eager PyTorch, same run, plus relay.build times and
where opt_level 3 spends its time (the graph executor's per-node profile; the sum of the
kernels' median times is printed too: on a loaded machine it is steadier than end-to-end).

    python bench/e2e.py [--models resnet18,mobilenet_v2,bert_encoder] [--repeat 10]
                        [--profile 8] [--no-torch]

Timing (tvmpy/relay/testing/compare.py): interleaved rounds, best round, each round ~0.1 s of
calls, a 0.3 s pause before each side; every call feeds the inputs and fetches the outputs.
Ratios are tvmpy's latency over onnxruntime's (lower is faster; the target is <= 1.5).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ensure_native_blas, machine_description  # noqa: E402

ensure_native_blas()  # numpy's BLAS is not timed here, but keep the benches' environment alike

import numpy as np  # noqa: E402

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


def add_torch_runner(runners: dict, model) -> None:
    """PyTorch eager as ``runners["torch"]`` when torch is installed."""
    try:
        from tvmpy.relay.testing.onnx_torch import torch_runner

        runners["torch"] = torch_runner(model)
    except ImportError:
        pass


def bench_model(name: str, repeat: int, top: int, with_torch: bool) -> dict:
    model = CONFIGS[name]()
    feeds = onnx_models.input_feeds(model)
    shapes = {k: v.shape for k, v in feeds.items()}
    ort = compare.ort_runner(model, threads=2)
    want = ort(feeds)[0]
    mod, params = compare.import_onnx(model, shapes)
    runners, row = {}, {"model": name}
    for level in (0, 3):
        lib, secs = compare.build(mod, params, opt_level=level)
        run = compare.tvm_runner(lib)
        _, rel = compare.errors(run(feeds)[0], want)
        row[f"build{level}"], row[f"err{level}"] = secs, rel
        row[f"graph{level}"] = compare.graph_summary(lib)
        runners[f"opt{level}"] = run
    runners["ort"] = ort
    if with_torch:
        add_torch_runner(runners, model)
    row.update(compare.time_sides(runners, feeds, repeat=repeat))
    time.sleep(0.3)
    row["profile"], row["kernels3"] = _profile(runners["opt3"], top)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(CONFIGS))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--profile", type=int, default=8,
                   help="slowest opt3 kernels listed (0: no listing)")
    p.add_argument("--no-torch", dest="torch", action="store_false")
    opts = p.parse_args()
    names = [n for n in opts.models.split(",") if n]
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        p.error(f"unknown models {bad}; choose from {list(CONFIGS)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; batch 1, "
          f"best of {opts.repeat} interleaved rounds")
    rows = []
    for name in names:
        row = bench_model(name, opts.repeat, opts.profile, opts.torch)
        rows.append(row)
        print(f"{name}: built opt0 {row['build0']:.1f} s, opt3 {row['build3']:.1f} s; max rel "
              f"error vs onnxruntime opt0 {row['err0']:.1e}, opt3 {row['err3']:.1e}", flush=True)
        for level in (0, 3):
            g = row[f"graph{level}"]
            print(f"    opt{level}: {g['kernels']} kernels, intermediates "
                  f"{g['planned_bytes'] / 1e6:.1f} MB planned vs {g['naive_bytes'] / 1e6:.1f} MB "
                  "unshared", flush=True)
        if opts.profile:
            print(row["profile"], flush=True)
    print()
    print("| model | build opt0 / opt3 (s) | tvmpy opt0 (ms) | tvmpy opt3 (ms) | onnxruntime 2 "
          "threads (ms) | PyTorch eager (ms) | opt3 / ORT | opt0 / opt3 | opt3 kernel sum (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        torch_ms = f"{r['torch'] * 1e3:.2f}" if "torch" in r else "-"
        print(f"| {r['model']} | {r['build0']:.1f} / {r['build3']:.1f} | {r['opt0'] * 1e3:.2f} | "
              f"{r['opt3'] * 1e3:.2f} | {r['ort'] * 1e3:.2f} | {torch_ms} | "
              f"{r['opt3'] / r['ort']:.2f} | {r['opt0'] / r['opt3']:.2f} | "
              f"{r['kernels3'] * 1e3:.2f} |")
    worst = max(np.array([r["err0"] for r in rows] + [r["err3"] for r in rows]))
    print(f"\nlargest max|tvmpy - ort| / max|ort| over the models and levels: {worst:.1e}")


if __name__ == "__main__":
    main()
