"""AutoTVM tuning of ResNet-18's 3x3 conv2d layers with the GPU template ``conv2d_nchw.cuda``
on an OpenCL or CUDA device, and the tuned kernels against cuDNN (torch) on the same device.

    python bench/gpu_tune_conv.py [--trials 48] [--layers 56,28,14,7] [--target opencl|cuda]
                                  [--tuner xgb|ga|random] [--log conv.log]

Per layer: the best GFLOP/s after each batch, the error counts by kind, then the tuned best and
the fallback config re-measured by ``time_evaluator`` (median of repeats) with their max error
against numpy, and, with --target cuda and torch on a GPU, ``torch.nn.functional.conv2d``
(cuDNN, ``cudnn.benchmark`` on, TF32 off) timed on the same inputs with CUDA events. The log is
appended per measurement; a rerun with the same --log resumes (configs measured are skipped).
On PoCL (this machine's OpenCL) correctness is what counts: its timings say nothing of a GPU.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import sys
import tempfile
import time
import warnings

import numpy as np

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm.measure import MeasureErrorNo
from tvmpy.topi import cuda, testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_common import cuda_event_times, cuda_target, torch_no_tf32  # noqa: E402

# ResNet-18's 3x3 stride-1 layers (batch 1): H=W, channels
LAYERS = {56: 64, 28: 128, 14: 256, 7: 512}


def _tuner(kind: str, task):
    if kind == "xgb":
        try:
            import xgboost  # noqa: F401
        except ImportError:
            print("xgboost not installed: using the GA tuner")
            kind = "ga"
    if kind == "xgb":
        return autotvm.tuner.XGBTuner(task, feature_type="itervar")
    if kind == "ga":
        return autotvm.tuner.GATuner(task, pop_size=32)
    return autotvm.tuner.RandomTuner(task)


def _torch_conv_ms(x: np.ndarray, w: np.ndarray, number: int, repeat: int) -> float | None:
    """cuDNN's time (median over repeats of the mean of ``number`` calls), or None without
    torch on a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch_no_tf32()
    tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
    conv = torch.nn.functional.conv2d
    with torch.inference_mode():
        for _ in range(5):
            conv(tx, tw, padding=1)
        torch.cuda.synchronize()
        times = cuda_event_times(lambda: conv(tx, tw, padding=1), number, repeat)
    return float(np.median(times)) * 1e3


def tune_layer(hw: int, a: argparse.Namespace, target: str, log: str) -> dict:
    c = LAYERS[hw]
    dshape, wshape = (1, c, hw, hw), (c, c, 3, 3)
    # the arguments exactly as relay's conv2d strategy passes them, so that the log applies
    # when a model is built (apply_history_best matches workloads by their arguments)
    conv_args = ((1, 1), (1, 1, 1, 1), (1, 1), "float32")
    args = (("TENSOR", dshape, "float32"), ("TENSOR", wshape, "float32"), *conv_args)
    task = autotvm.task.create("conv2d_nchw.cuda", args, target=target)
    print(f"layer {dshape} * {wshape} on {target}: {task.flop / 1e9:.3f} GFLOP, "
          f"space {len(task.config_space)}", flush=True)
    workers = a.n_parallel or max(2, os.cpu_count() or 2)
    opt = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=workers, timeout=60),
                                 runner=autotvm.LocalRunner(number=a.number, repeat=1,
                                                            timeout=60))
    results: list = []
    curve: list[tuple[int, float, float]] = []
    t0 = time.time()

    def track(tuner, inputs, res):
        results.extend(res)
        curve.append((len(results), time.time() - t0, tuner.best_flops / 1e9))

    np.random.seed(a.seed)
    tuner = _tuner(a.tuner, task)
    if os.path.exists(log):
        tuner.load_history(autotvm.record.load_from_file(log))
    tuner.tune(n_trial=max(0, a.trials - tuner.num_history), measure_option=opt,
               callbacks=[autotvm.callback.log_to_file(log), track])
    opt["builder"].close()
    opt["runner"].close()

    print("trials  seconds  best GFLOP/s")
    for n, sec, g in curve[:: max(1, len(curve) // 12)] + curve[-1:]:
        print(f"{n:6d} {sec:8.1f} {g:12.3f}")
    outcomes = dict(collections.Counter(MeasureErrorNo(r.error_no).name for r in results))
    print("outcomes:", outcomes)

    # correctness of the tuned best and the fallback, against numpy; speed of both (and cuDNN)
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, dshape).astype("float32")
    w = rng.uniform(-1, 1, wshape).astype("float32")
    want = testing.conv2d_nchw_python(x, w, 1, 1)
    dev = tvm.opencl(0) if target.startswith("opencl") else tvm.cuda(0)
    row: dict = {"layer": f"{dshape}*{wshape}", "gflop": task.flop / 1e9, "outcomes": outcomes,
                 "tune_seconds": time.time() - t0}
    for label, ctx in (("tuned", autotvm.apply_history_best(log)), ("fallback", None)):
        with warnings.catch_warnings(), tvm.target.Target(target):
            warnings.simplefilter("ignore")  # the fallback's "no tuned config"
            data = te.placeholder(dshape, name="data")
            weight = te.placeholder(wshape, name="weight")
            with ctx if ctx is not None else contextlib.nullcontext():
                out = cuda.conv2d_nchw(data, weight, *conv_args)
                s = cuda.schedule_conv2d_nchw([out])
        f = tvm.build(s, [data, weight, out], target=target)
        o = tvm.nd.empty(want.shape, "float32", dev)
        xd, wd = tvm.nd.array(x, dev), tvm.nd.array(w, dev)
        f(xd, wd, o)
        err = float(np.abs(o.numpy() - want).max()) / float(np.abs(want).max())
        sec = f.time_evaluator(f.entry_name, dev, number=a.number, repeat=a.repeat)(xd, wd, o).median
        row[f"{label}_ms"], row[f"{label}_err"] = sec * 1e3, err
        print(f"{label}: {task.flop / sec / 1e9:.1f} GFLOP/s ({sec * 1e3:.4f} ms), "
              f"max error {err:.2e} of max |out|", flush=True)
    if target.startswith("cuda"):
        ms = _torch_conv_ms(x, w, a.number, a.repeat)
        if ms is not None:
            row["cudnn_ms"] = ms
            print(f"cuDNN (torch conv2d): {task.flop / (ms / 1e3) / 1e9:.1f} GFLOP/s "
                  f"({ms:.4f} ms); tuned / cuDNN time = {row['tuned_ms'] / ms:.2f}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=48)
    ap.add_argument("--layers", default="56", help="comma-separated map sizes of "
                    f"{sorted(LAYERS)}")
    ap.add_argument("--target", default="opencl")
    ap.add_argument("--tuner", default="xgb", choices=["xgb", "ga", "random"])
    ap.add_argument("--n-parallel", type=int, default=0, help="builder workers (0: CPU count)")
    ap.add_argument("--number", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log", default="", help="tuning log (appended; resumes)")
    ap.add_argument("--json", default="", help="write the per-layer rows here")
    a = ap.parse_args()
    target = cuda_target(a.target)
    log = a.log or os.path.join(tempfile.mkdtemp(), "conv.log")
    rows = []
    for hw in (int(v) for v in a.layers.split(",") if v):
        if hw not in LAYERS:
            raise SystemExit(f"--layers: {hw} is not one of {sorted(LAYERS)}")
        rows.append(tune_layer(hw, a, target, log))
        if a.json:
            with open(a.json, "w") as fh:
                json.dump({"target": target, "tuner": a.tuner, "trials": a.trials,
                           "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
