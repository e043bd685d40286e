"""Target webgpu on wgpu-py (lavapipe: Mesa's software Vulkan, i.e. the CPU) against host llvm
and onnxruntime, in the same run: kernels (elementwise, reduction, shared-memory matmul) and
small models (MobileNetV2 32x32, ResNet-18 32x32, a one-layer BERT encoder). Correctness is
checked for every side; the WebGPU figures measure lavapipe (compute shaders JIT-compiled by
llvmpipe), not a GPU, so they say whether the path works end to end and what the dispatch
overhead is, not what a browser GPU would do.

Usage: PYTHONPATH=. python bench/webgpu_latency.py [--threads 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402


def _time_graph(g, rounds: int) -> float:
    g.run()
    g.get_output(0).numpy()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(3):
            g.run()
        g.get_output(0).numpy()  # waits for the device
        best = min(best, (time.perf_counter() - t) / 3)
    return best


def models(threads: int, rounds: int) -> None:
    import tvmpy as tvm
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.testing import compare, onnx_models

    cases = {
        "mobilenet_v2_32": lambda: onnx_models.mobilenet_v2(image=32, classes=10),
        "resnet18_32": lambda: onnx_models.resnet18(image=32, classes=10),
        "bert_1x64_seq16": lambda: onnx_models.bert_encoder(layers=1, hidden=64, heads=4, seq=16),
    }
    print(f"{'model':18s} {'webgpu ms':>10s} {'llvm ms':>9s} {'ort ms':>8s} {'wgpu/llvm':>9s} "
          f"{'rel err':>8s}")
    for name, make in cases.items():
        m = make()
        feeds = onnx_models.input_feeds(m)
        sess = common.ort_session(m, threads)
        run_ort, outs = common.ort_bound_runner(sess, feeds)
        run_ort()
        want = outs[0].numpy()
        mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
        times, errs = {}, []
        for tgt, dev in (("webgpu", tvm.webgpu(0)), ("llvm", tvm.cpu(0))):
            lib, _ = compare.build(mod, params, opt_level=3, target=tgt)
            g = graph_executor.GraphModule(lib["default"](dev))
            g.set_input(**feeds)
            times[tgt] = _time_graph(g, rounds)
            errs.append(compare.errors(g.get_output(0).numpy(), want)[1])
        t_ort = common.best_time(run_ort, repeat=rounds, number=3)
        print(f"{name:18s} {times['webgpu'] * 1e3:10.2f} {times['llvm'] * 1e3:9.2f} "
              f"{t_ort * 1e3:8.2f} {times['webgpu'] / times['llvm']:9.1f} {max(errs):8.1e}")


def kernels(rounds: int) -> None:
    import tvmpy as tvm
    from tvmpy import te, topi

    def elementwise(tgt):
        n = 1 << 20
        A = te.placeholder((n,), name="A")
        C = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="C")
        s = topi.cuda.schedule_injective([C]) if tgt == "webgpu" else topi.x86.schedule_injective([C])
        return s, [A, C], lambda a: a * 2 + 1

    def matmul(tgt):
        n = 256
        A = te.placeholder((n, n), name="A")
        B = te.placeholder((n, n), name="B")
        if tgt == "webgpu":
            out = topi.cuda.dense(A, B)
            return topi.cuda.schedule_dense([out]), [A, B, out], lambda a, b: a @ b.T
        out = topi.nn.dense(A, B)
        return topi.x86.schedule_dense([out]), [A, B, out], lambda a, b: a @ b.T

    def row_sum(tgt):
        A = te.placeholder((512, 1024), name="A")
        k = te.reduce_axis((0, 1024), name="k")
        C = te.compute((512,), lambda i: te.sum(A[i, k], axis=k), name="C")
        s = topi.cuda.schedule_reduce([C]) if tgt == "webgpu" else te.create_schedule(C.op)
        return s, [A, C], lambda a: a.sum(1)

    print(f"{'kernel':12s} {'webgpu ms':>10s} {'llvm ms':>9s} {'wgpu/llvm':>9s}")
    for name, make in (("add1M", elementwise), ("dense256", matmul), ("rowsum", row_sum)):
        times = {}
        for tgt in ("webgpu", "llvm"):
            with tvm.target.Target(tgt):
                s, args, ref = make(tgt)
            f = tvm.build(s, args, tgt)
            dev = tvm.webgpu(0) if tgt == "webgpu" else tvm.cpu(0)
            rng = np.random.default_rng(0)
            host = [rng.standard_normal([int(x) for x in t.shape]).astype("float32")
                    for t in args[:-1]]
            arrs = [tvm.nd.array(h, dev) for h in host]
            o = tvm.nd.empty([int(x) for x in args[-1].shape], "float32", dev)
            ev = f.time_evaluator(f.entry_name, dev, number=5, repeat=rounds)
            times[tgt] = min(ev(*arrs, o).results)
            np.testing.assert_allclose(o.numpy(), ref(*host), rtol=1e-3, atol=1e-3)
        print(f"{name:12s} {times['webgpu'] * 1e3:10.3f} {times['llvm'] * 1e3:9.3f} "
              f"{times['webgpu'] / times['llvm']:9.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    threads = common.bench_threads(a.threads)
    import wgpu

    info = wgpu.gpu.request_adapter_sync().info
    print(f"# {common.machine_description()}, threads {threads}; WebGPU adapter "
          f"{info['device']} ({info['backend_type']})")
    kernels(a.rounds)
    models(threads, a.rounds)


if __name__ == "__main__":
    main()
