"""The three showcase models built for a GPU target and checked against onnxruntime.

    PYTHONPATH=. python bench/gpu_models.py [--target opencl] [--image 224] [--runs 3]

relay.build(target=...) (host code llvm), the graph executor on the target's device (storage,
parameters and activations in device memory), one input, the output copied back and compared
with onnxruntime on the host (max |diff| / max |ref|). On this machine the OpenCL device is
PoCL on the CPU: its times say nothing of a GPU (correctness is what counts); on a machine with
an NVIDIA GPU use --target cuda.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules, as every bench)

import tvmpy as tvm
from tvmpy.contrib import graph_executor
from tvmpy.relay.testing import compare, onnx_models


def _device(target: str):
    return tvm.opencl(0) if target.startswith("opencl") else tvm.cuda(0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="opencl")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    models = [("resnet18", onnx_models.resnet18(image=args.image)),
              ("mobilenet_v2", onnx_models.mobilenet_v2(image=args.image)),
              ("bert_encoder", onnx_models.bert_encoder())]
    print(f"target {args.target}, device {_device(args.target)}, image {args.image}")
    print("| model | build (s) | first run (s) | warm run median (ms) | onnxruntime CPU median (ms) "
          "| max abs err / max abs ref |")
    print("|---|---|---|---|---|---|")
    for name, m in models:
        feeds = onnx_models.input_feeds(m)
        ort = compare.ort_runner(m)
        want = ort(feeds)
        mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
        t = time.perf_counter()
        lib, _ = compare.build(mod, params, opt_level=3, target=args.target)
        t_build = time.perf_counter() - t
        g = graph_executor.GraphModule(lib["default"](_device(args.target)))
        g.set_input(**feeds)
        t = time.perf_counter()
        g.run()
        out = g.get_output(0).numpy()
        t_first = time.perf_counter() - t
        warm, ref = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            g.run()
            g.get_output(0).numpy()
            warm.append(time.perf_counter() - t)
            t = time.perf_counter()
            ort(feeds)
            ref.append(time.perf_counter() - t)
        rel = float(np.abs(out - want[0]).max() / max(np.abs(want[0]).max(), 1e-30))
        print(f"| {name} | {t_build:.1f} | {t_first:.1f} | {np.median(warm) * 1e3:.0f} | "
              f"{np.median(ref) * 1e3:.1f} | {rel:.1e} |", flush=True)


if __name__ == "__main__":
    main()
