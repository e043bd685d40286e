"""Zoo models with and without the convolutions' right-edge padding hint
(``topi.nn.conv2d.PAD_LIKELY_W`` "none", the code before 2026-11-30, vs "after"), both builds
and onnxruntime in one process, 1 thread, interleaved rounds timed in process CPU time
(bench/common.interleaved_samples), inputs fed and outputs fetched on every side.

    PYTHONPATH=. python bench/pad_edge_zoo.py [--models resnet50,...] [--rounds 9]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["TVM_NUM_THREADS"] = "1"
os.environ.setdefault("TVMPY_CACHE", "0")
from common import bench_clock, ensure_native_blas, interleaved_samples  # noqa: E402

ensure_native_blas()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v3_large,efficientnet_b0")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    from tvmpy.relay.testing import compare, zoo

    conv2d = importlib.import_module("tvmpy.topi.nn.conv2d")
    default = conv2d.PAD_LIKELY_W
    print("| model | none ms | after ms | ORT ms | after/none (min) | after/none (median "
          "of rounds) | none/ORT | after/ORT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.models.split(","):
        entry = zoo.MODELS[name]
        spec = entry("real")
        model = zoo.to_onnx(spec)
        feeds = spec.feeds(seed=1)
        mod, params = zoo.from_onnx(model, spec)
        built = {}
        for mode in ("none", "after"):
            conv2d.PAD_LIKELY_W = mode
            try:
                built[mode] = zoo.build(mod, params, vm=entry.vm)
            finally:
                conv2d.PAD_LIKELY_W = default
        ort = compare.ort_runner(model, threads=1)
        ref = ort(feeds)
        for b in built.values():
            zoo.assert_close(b.run(feeds), ref, name)
        sides = {m: (lambda b=b, f=feeds: b.run(f)) for m, b in built.items()}
        sides["ORT"] = lambda o=ort, f=feeds: o(f)
        t = interleaved_samples(sides, args.rounds, pause=0.3, target_s=0.1,
                                clock=bench_clock(True, 1))
        ms = {k: min(v) * 1e3 for k, v in t.items()}
        per = sorted(a / b for a, b in zip(t["after"], t["none"]))
        print(f"| {name} | {ms['none']:.2f} | {ms['after']:.2f} | {ms['ORT']:.2f} | "
              f"{ms['after'] / ms['none']:.3f} | {per[len(per) // 2]:.3f} "
              f"({per[0]:.2f}-{per[-1]:.2f}) | {ms['none'] / ms['ORT']:.2f} | "
              f"{ms['after'] / ms['ORT']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
