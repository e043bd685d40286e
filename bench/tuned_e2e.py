"""Tuned end-to-end latency (issue 4, point 7): tune each model with AutoTVM (``tune_model``,
XGB tuner, one trial budget split by FLOPs), then time the tuned build against the untuned one,
onnxruntime and (optionally) PyTorch in the same run; report the tuning time and the outputs'
agreement with onnxruntime.

    python bench/tuned_e2e.py [--models resnet18,mobilenet_v2,bert_encoder] [--trials 1500]
                              [--log-dir bench/tune_logs] [--repeat 10] [--no-torch]

Logs are kept (``<log-dir>/<model>.json``): a second run resumes tuning (trials already logged
count against the budget) and re-times. Timing as ``bench/e2e.py`` (interleaved rounds, best
round, inputs fed and outputs fetched every call).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import bench_threads, ensure_native_blas, machine_description  # noqa: E402

ensure_native_blas()

from e2e import CONFIGS, add_torch_runner  # noqa: E402

from tvmpy import autotvm  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402


def bench_model(name: str, trials: int, log_dir: str, repeat: int, with_torch: bool) -> dict:
    model = CONFIGS[name]()
    feeds = onnx_models.input_feeds(model)
    shapes = {k: v.shape for k, v in feeds.items()}
    mod, params = compare.import_onnx(model, shapes)
    log = os.path.join(log_dir, f"{name}.json")
    tic = time.time()
    tasks = autotvm.tune_model(mod, params, "llvm", log_file=log, n_trial_total=trials,
                               tuner="xgb")
    tune_s = time.time() - tic
    ort = compare.ort_runner(model, threads=bench_threads())
    want = ort(feeds)[0]
    runners = {"ort": ort}
    row = {"model": name, "tune_s": tune_s, "tasks": len(tasks),
           "trials": sum(getattr(t, "tuned_trials", 0) for t in tasks)}
    lib, _ = compare.build(mod, params, opt_level=3)
    runners["untuned"] = compare.tvm_runner(lib)
    with autotvm.apply_history_best(log):
        lib, row["build_s"] = compare.build(mod, params, opt_level=3)
    runners["tuned"] = compare.tvm_runner(lib)
    _, row["err"] = compare.errors(runners["tuned"](feeds)[0], want)
    if with_torch:
        add_torch_runner(runners, model, bench_threads())
    row.update(compare.time_sides(runners, feeds, repeat=repeat))
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(CONFIGS))
    p.add_argument("--trials", type=int, default=1500, help="trial budget per model")
    p.add_argument("--log-dir", default=os.path.join("bench", "tune_logs"))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--no-torch", dest="torch", action="store_false")
    opts = p.parse_args()
    bench_threads()  # before any tvmpy library runs; onnxruntime and torch get the same
    os.makedirs(opts.log_dir, exist_ok=True)
    names = [n for n in opts.models.split(",") if n]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; batch 1, "
          f"{opts.trials} trials per model (XGB), best of {opts.repeat} interleaved rounds")
    rows = []
    for name in names:
        row = bench_model(name, opts.trials, opts.log_dir, opts.repeat, opts.torch)
        rows.append(row)
        print(f"{name}: {row['tasks']} tasks, {row['trials']} trials in the log, tuning "
              f"{row['tune_s'] / 60:.1f} min; tuned build {row['build_s']:.1f} s; max rel error "
              f"vs onnxruntime {row['err']:.1e}", flush=True)
    print("\n| model | tuning (min) | untuned (ms) | tuned (ms) | onnxruntime (ms) | PyTorch (ms) "
          "| tuned / ORT | untuned / tuned |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        torch_ms = f"{r['torch'] * 1e3:.2f}" if "torch" in r else "-"
        print(f"| {r['model']} | {r['tune_s'] / 60:.1f} | {r['untuned'] * 1e3:.2f} | "
              f"{r['tuned'] * 1e3:.2f} | {r['ort'] * 1e3:.2f} | {torch_ms} | "
              f"{r['tuned'] / r['ort']:.2f} | {r['untuned'] / r['tuned']:.2f} |")


if __name__ == "__main__":
    main()
