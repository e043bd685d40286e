"""The x86 NCHWc 1x1 convolution with and without reduction blocking (``k_block``, the default
``default_k_block`` chooses from the target's cache sizes), next to onnxruntime's Conv of the
same shape (one-node model, NCHW in and out, its own blocked layout inside) and tvmpy's
``nn.matmul`` form of it (``W[OC, IC] @ x[IC, H*W]``, what AlterOpLayout uses when the input
arrives in NCHW), 1 thread, same process, interleaved rounds, CPU time.

    python bench/conv1x1_kblock.py [--shapes 2048x1024x28,1024x2048x28] [--rounds 7]

Kernels only on tvmpy's side (bias + relu fused; the NCHWc input already blocked), the whole
one-node model on onnxruntime's: printed per shape: ms and GFLOP/s of each side, the default's
``k_block``, and the ratios to onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import bench_threads, ensure_native_blas, interleaved_samples  # noqa: E402

ensure_native_blas()


def _sides(ic: int, oc: int, hw: int) -> tuple[dict, int]:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import tvmpy as tvm
    from tvmpy import te, topi
    from tvmpy.relay.testing import compare
    from tvmpy.topi import nn
    from tvmpy.topi.x86 import conv2d_nchwc as cn
    from tvmpy.topi.x86 import dense as xdense

    bn = 16
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, ic, hw, hw)).astype("float32")
    w = (rng.uniform(-1, 1, (oc, ic, 1, 1)) / np.sqrt(ic)).astype("float32")
    b = rng.uniform(-1, 1, (oc,)).astype("float32")
    sides, kb, default_kb = {}, 0, 0
    for name, block in (("nchwc_default", None), ("nchwc_unblocked", 0)):
        A = te.placeholder((1, ic // bn, hw, hw, bn), name="A")
        W = te.placeholder((oc // bn, ic // bn, 1, 1, bn, bn), name="W")
        B = te.placeholder((1, oc // bn, 1, 1, bn), name="B")
        conv = nn.conv2d_NCHWc(A, W, 1, 0, 1, f"NCHW{bn}c", f"NCHW{bn}c")
        out = topi.nn.relu(topi.add(conv, B))
        with tvm.target.Target("llvm"):
            s, c, o, _ = cn.find_nchwc([out])
            d_oc, d_reg = cn._nchwc_tile(oc // bn, False)  # noqa: SLF001
            kb = cn.default_k_block(c, d_oc, False) if block is None else block
            cn.schedule_nchwc_tile(s, c, o, d_oc, cn.default_ow_tile(hw, d_reg), True,
                                   tile_oh=cn.default_k_rows(c, d_oc) if kb else 1, k_block=kb)
        f = tvm.build(s, [A, W, B, out], "llvm")
        arrs = [tvm.nd.array(np.zeros([int(d) for d in t.shape], "float32"))
                for t in (A, W, B, out)]
        sides[name] = (lambda f=f, a=arrs: f(*a))
        if block is None:
            default_kb = kb
    Xm = te.placeholder((ic, hw * hw), name="X")
    Wm = te.placeholder((oc, ic), name="Wm")
    Bm = te.placeholder((oc, 1), name="Bm")
    mm = topi.nn.relu(topi.add(nn.matmul(Wm, Xm), Bm))
    fm = tvm.build(xdense.schedule_matmul([mm]), [Wm, Xm, Bm, mm], "llvm")
    marrs = [tvm.nd.array(np.zeros([int(d) for d in t.shape], "float32")) for t in (Wm, Xm, Bm, mm)]
    sides["matmul"] = lambda: fm(*marrs)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        "conv1x1", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, oc, hw, hw])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    ort = compare.ort_runner(model, threads=1)
    sides["onnxruntime"] = lambda: ort({"x": x})
    return sides, default_kb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="2048x1024x28,1536x512x28,1024x2048x28,2048x512x7")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    bench_threads(1)
    import time

    for spec in args.shapes.split(","):
        ic, oc, hw = (int(v) for v in spec.split("x"))
        sides, kb = _sides(ic, oc, hw)
        got = interleaved_samples(sides, args.rounds, pause=0.2, target_s=0.1,
                                  clock=time.process_time)
        flop = 2 * ic * oc * hw * hw
        ort = min(got["onnxruntime"])
        row = ", ".join(f"{k} {min(v) * 1e3:.2f} ms ({flop / min(v) / 1e9:.0f} GF/s, "
                        f"{min(v) / ort:.2f}x)" for k, v in got.items())
        print(f"{ic}->{oc} {hw}x{hw} (default k_block {kb}): {row}", flush=True)


if __name__ == "__main__":
    main()
