"""AutoTVM tuning curve of one ResNet-18 conv2d layer with the GPU template
``conv2d_nchw.cuda`` on an OpenCL device (PoCL's CPU device here: correctness is what counts
there, its timings say nothing about a real GPU).

    python bench/gpu_tune_conv.py [--trials 48] [--layer 56|28|14|7] [--target opencl]

Prints the best GFLOP/s after each batch, the error counts by kind, the fallback config's
speed measured the same way, and the tuned best's max error against numpy.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import tempfile
import time
import warnings

import numpy as np

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm.measure import MeasureErrorNo
from tvmpy.topi import cuda, testing

# ResNet-18's 3x3 stride-1 layers (batch 1): H=W, channels
LAYERS = {56: 64, 28: 128, 14: 256, 7: 512}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=48)
    ap.add_argument("--layer", type=int, default=56, choices=sorted(LAYERS))
    ap.add_argument("--target", default="opencl")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log", default="", help="keep the tuning log here")
    a = ap.parse_args()
    hw, c = a.layer, LAYERS[a.layer]
    dshape, wshape = (1, c, hw, hw), (c, c, 3, 3)
    args = (("TENSOR", dshape, "float32"), ("TENSOR", wshape, "float32"), 1, 1, 1)
    task = autotvm.task.create("conv2d_nchw.cuda", args, target=a.target)
    print(f"layer {dshape} * {wshape} on {a.target}: {task.flop / 1e9:.3f} GFLOP, "
          f"space {len(task.config_space)}")
    opt = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2, timeout=60),
                                 runner=autotvm.LocalRunner(number=3, repeat=1, timeout=60))
    log = a.log or os.path.join(tempfile.mkdtemp(), "conv.log")
    results: list = []
    curve: list[tuple[int, float, float]] = []
    t0 = time.time()

    def track(tuner, inputs, res):
        results.extend(res)
        curve.append((len(results), time.time() - t0, tuner.best_flops / 1e9))

    np.random.seed(a.seed)
    tuner = autotvm.tuner.XGBTuner(task, feature_type="itervar")
    tuner.tune(n_trial=a.trials, measure_option=opt,
               callbacks=[autotvm.callback.log_to_file(log), track])
    opt["builder"].close()
    opt["runner"].close()

    print("trials  seconds  best GFLOP/s")
    for n, sec, g in curve:
        print(f"{n:6d} {sec:8.1f} {g:12.3f}")
    print("outcomes:", dict(collections.Counter(MeasureErrorNo(r.error_no).name for r in results)))

    # correctness of the tuned best and the fallback, against numpy; speed of both
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, dshape).astype("float32")
    w = rng.uniform(-1, 1, wshape).astype("float32")
    want = testing.conv2d_nchw_python(x, w, 1, 1)
    dev = tvm.opencl(0) if a.target.startswith("opencl") else tvm.cuda(0)
    for label, ctx in (("tuned best", autotvm.apply_history_best(log)), ("fallback", None)):
        with warnings.catch_warnings(), tvm.target.Target(a.target):
            warnings.simplefilter("ignore")  # the fallback's "no tuned config"
            data = te.placeholder(dshape, name="data")
            weight = te.placeholder(wshape, name="weight")
            with ctx if ctx is not None else contextlib.nullcontext():
                out = cuda.conv2d_nchw(data, weight, 1, 1, 1)
                s = cuda.schedule_conv2d_nchw([out])
        f = tvm.build(s, [data, weight, out], target=a.target)
        o = tvm.nd.empty(want.shape, "float32", dev)
        xd, wd = tvm.nd.array(x, dev), tvm.nd.array(w, dev)
        f(xd, wd, o)
        err = float(np.abs(o.numpy() - want).max()) / float(np.abs(want).max())
        sec = f.time_evaluator(f.entry_name, dev, number=3, repeat=3)(xd, wd, o).mean
        print(f"{label}: {task.flop / sec / 1e9:.3f} GFLOP/s ({sec * 1e3:.2f} ms), "
              f"max error {err:.2e} of max |out|")


if __name__ == "__main__":
    main()
