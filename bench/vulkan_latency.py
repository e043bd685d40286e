"""Latency of small models on target "vulkan" (SPIR-V on Mesa's lavapipe: Vulkan on the CPU)
next to the same models built for host llvm and onnxruntime on the CPU, in one run.

    PYTHONPATH=. python bench/vulkan_latency.py [--models mobilenet_v2,bert_encoder,resnet18]
        [--rounds 5] [--threads 2] [--profile N]

Each model is checked against onnxruntime first (max |diff| / max |ref|). Sides, timed
interleaved (common.interleaved_samples: rotating order, one sample per round, each the mean of
back-to-back calls): ``vulkan`` the graph executor on tvm.vulkan(0) (storage on the device; each
call ``run()`` + wait for the queue), ``llvm`` the graph executor on the CPU (TVM_NUM_THREADS
threads), ``ort`` onnxruntime with I/O binding (``--threads`` intra-op threads). Lavapipe is a
CPU rasterizer's compute path (its own LP_NUM_THREADS threads): the vulkan figures say nothing of
a GPU; correctness is what counts there. Untuned (fallback) GPU schedules. ``--profile N``
lists each model's N slowest kernels on the device (each launch waited for and timed alone).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402

MODELS = {
    "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=32, classes=10),
    "bert_encoder": lambda: onnx_models.bert_encoder(layers=1, hidden=64, heads=4, seq=16),
    "resnet18": lambda: onnx_models.resnet18(image=32, classes=10),
}


def _graph(m, feeds, target, dev):
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target=target)
    g = graph_executor.GraphModule(lib["default"](dev))
    for k, v in feeds.items():
        g.set_input(k, v)
    g.run()
    return g


def _profile(m, feeds, dev, top: int) -> None:
    """Seconds of each kernel in one run: every bound launch waits for the queue around it."""
    from tvmpy.runtime import vulkan_module as vm

    times: dict[str, float] = collections.defaultdict(float)
    shapes: dict[str, tuple] = {}
    orig = vm.VulkanAPI.bind_launch

    def bind(self, program, name, grid, block, shared, args, dev_id):
        f = orig(self, program, name, grid, block, shared, args, dev_id)
        shapes[name] = (tuple(grid), tuple(block))

        def timed():
            program.ctx.wait_idle()
            t = time.perf_counter()
            f()
            program.ctx.wait_idle()
            times[name] += time.perf_counter() - t

        return timed

    vm.VulkanAPI.bind_launch = bind
    try:
        g = _graph(m, feeds, "vulkan", dev)
        times.clear()
        g.run()
    finally:
        vm.VulkanAPI.bind_launch = orig
    total = sum(times.values())
    print(f"  kernels: {len(times)}, {total * 1e3:.1f} ms waited one by one; slowest:")
    for k, v in sorted(times.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {v * 1e3:8.2f} ms  {k}  grid {shapes[k][0]} block {shapes[k][1]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mobilenet_v2,bert_encoder,resnet18")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    args = ap.parse_args()
    vk_dev = tvm.vulkan(0)
    from tvmpy.runtime.vulkan_module import VULKAN_API

    print(f"# {common.machine_description()}; vulkan(0): {VULKAN_API.device_name(0)}; "
          f"ort threads {args.threads}; TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS', '-')}")
    print("model            vulkan ms (min-max)      llvm ms (min-max)     ort ms (min-max)   "
          "vulkan/llvm  vulkan/ort  rel.err(vulkan)")
    for name in args.models.split(","):
        m = MODELS[name]()
        feeds = onnx_models.input_feeds(m)
        want = compare.ort_runner(m)(feeds)
        gv = _graph(m, feeds, "vulkan", vk_dev)
        gl = _graph(m, feeds, "llvm", tvm.cpu(0))
        _, rel = compare.errors(gv.get_output(0).numpy(), want[0])
        sess = common.ort_session(m, args.threads)
        ort_run, _ = common.ort_bound_runner(sess, feeds)

        def vk_run(g=gv):
            g.run()
            vk_dev.sync()

        samples = common.interleaved_samples({"vulkan": vk_run, "llvm": gl.run, "ort": ort_run},
                                             args.rounds, target_s=0.2)
        med = {k: float(np.median(v)) * 1e3 for k, v in samples.items()}
        span = {k: (min(v) * 1e3, max(v) * 1e3) for k, v in samples.items()}
        cells = "  ".join(f"{med[k]:8.3f} ({span[k][0]:.3f}-{span[k][1]:.3f})"
                          for k in ("vulkan", "llvm", "ort"))
        print(f"{name:16s} {cells}  {med['vulkan'] / med['llvm']:9.2f}x  "
              f"{med['vulkan'] / med['ort']:9.2f}x  {rel:.1e}", flush=True)
        if args.profile:
            _profile(m, feeds, vk_dev, args.profile)


if __name__ == "__main__":
    main()
