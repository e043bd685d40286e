"""ResNet-18 / MobileNetV2 (224x224) and the BERT encoder built for ``arm_cpu("rasp4b")``
(AArch64 cortex-a72 NEON), exported with the cross toolchain and run in one AArch64 Python under
qemu-user (``tvmpy.contrib.qemu``): per-model latency under EMULATION (qemu's, not a board's)
and the error vs onnxruntime on the host. Also the same models built for the host, for scale.

    PYTHONPATH=. python bench/aarch64_qemu.py [--runs 5] [--image 224]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules, as every bench)

import tvmpy as tvm
from tvmpy.contrib import qemu
from tvmpy.relay.testing import compare, onnx_models

DEVICE = r"""
import json, sys, time
import numpy as np
from tvmpy.runtime.module import load_module
from tvmpy.runtime.device import cpu
from tvmpy.contrib.graph_executor import GraphModule
folder, runs = sys.argv[1], int(sys.argv[2])
res = {}
for name in sys.argv[3:]:
    d = dict(np.load(f"{folder}/{name}.npz"))
    t0 = time.perf_counter()
    m = GraphModule(load_module(f"{folder}/{name}.so")["default"](cpu(0)))
    load = time.perf_counter() - t0
    for k, v in d.items():
        m.set_input(k, v)
    m.run()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter(); m.run(); ts.append(time.perf_counter() - t0)
    np.save(f"{folder}/{name}.out.npy", m.get_output(0).numpy())
    res[name] = {"load_s": load, "runs_s": ts}
print(json.dumps(res))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--image", type=int, default=224)
    a = ap.parse_args()
    models = {"resnet18": lambda: onnx_models.resnet18(image=a.image),
              "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=a.image),
              "bert_encoder": lambda: onnx_models.bert_encoder()}
    target = tvm.target.arm_cpu("rasp4b")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tvmpy_bench_a64_") as folder:
        wants, host_ms, build_s = {}, {}, {}
        for name, make in models.items():
            m = make()
            feeds = onnx_models.input_feeds(m)
            wants[name] = compare.ort_runner(m)(feeds)[0]
            mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
            t0 = time.perf_counter()
            with tvm.transform.PassContext(opt_level=3):
                lib = tvm.relay.build(mod, target=target, params=params)
            build_s[name] = time.perf_counter() - t0
            lib.export_library(os.path.join(folder, name + ".so"))
            np.savez(os.path.join(folder, name + ".npz"), **feeds)
            hlib, _ = compare.build(mod, params, opt_level=3)
            run = compare.tvm_runner(hlib)
            run(feeds)
            t0 = time.perf_counter()
            for _ in range(10):
                run(feeds)
            host_ms[name] = (time.perf_counter() - t0) / 10 * 1e3
        t0 = time.perf_counter()
        out = qemu.run_python(DEVICE, [folder, a.runs, *models], timeout=3000)
        wall = time.perf_counter() - t0
        res = json.loads(out.strip().splitlines()[-1])
        for name in models:
            got = np.load(os.path.join(folder, name + ".out.npy"))
            want = wants[name]
            err = float(np.abs(got.astype("float64") - want).max())
            rel = err / float(np.abs(want).max())
            r = res[name]
            rows.append((name, build_s[name], r["load_s"], float(np.median(r["runs_s"])) * 1e3,
                         min(r["runs_s"]) * 1e3, host_ms[name], err, rel))
    print(f"{platform.node()} {platform.machine()}  qemu batch wall {wall:.1f} s, runs {a.runs}, "
          f"image {a.image}")
    print("| model | cross build (s) | load under qemu (s) | qemu median (ms) | qemu best (ms) | "
          "host x86 (ms) | max abs err vs ORT | / max abs ref |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.1f} | {r[2]:.2f} | {r[3]:.0f} | {r[4]:.0f} | {r[5]:.2f} | "
              f"{r[6]:.2g} | {r[7]:.2g} |")


if __name__ == "__main__":
    main()
