"""int8 kernels (issue 10, acceptance 3): tvmpy's uint8 x int8 -> int32 conv2d / dense on the
VNNI micro-kernel (with the requantize to uint8 fused) vs tvmpy float32 on the same shapes vs
onnxruntime's QLinearConv / QLinearMatMul (uint8 activations, int8 weights, uint8 output; I/O
bound once), interleaved rounds in one process, 2 threads each; medians and quartiles, GOPS
(2 x multiply-adds per second).

Run: ``flock /tmp/tvmpy-bench.lock python bench/int8_kernels.py [--rounds 15]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tvmpy as tvm  # noqa: E402
from bench.common import (  # noqa: E402
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    quartiles,
)
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402

CONVS = [  # (ic, oc, hw, k, stride): ResNet-18's 3x3 layers and a 1x1
    (64, 64, 56, 3, 1), (128, 128, 28, 3, 1), (256, 256, 14, 3, 1), (512, 512, 7, 3, 1),
    (64, 256, 56, 1, 1)]
DENSES = [(128, 768, 768), (128, 3072, 768), (128, 768, 3072), (1, 1000, 512)]  # (M, N, K)
SCALE, ZP = 0.002, 3


def _requant(y: Any) -> Any:
    f = relay.round(relay.cast(y, "float32") * relay.const(SCALE, "float32"))
    return relay.cast(relay.clip(f + relay.const(float(ZP), "float32"), 0, 255), "uint8")


def _tvm_runner(f: Any, x: np.ndarray) -> tuple[Any, Any]:
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(f), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", x)
    return m.run, m


def _ort_runner(graph: Any, x: np.ndarray, out_shape: list[int]) -> tuple[Any, Any]:
    import onnxruntime as ort
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    io = sess.io_binding()
    xin = ort.OrtValue.ortvalue_from_numpy(x)
    out = ort.OrtValue.ortvalue_from_numpy(np.empty(out_shape, np.uint8))
    io.bind_ortvalue_input("x", xin)
    io.bind_ortvalue_output("y", out)

    def run() -> None:
        sess.run_with_iobinding(io)

    run._keep = (sess, io, xin, out)  # type: ignore[attr-defined]
    return run, out


def _q_inits(w: np.ndarray, name: str = "w") -> list:
    """The weight and the quantization parameters: scales 1, SCALE (weight), 1 (output); zero
    points 0, 0, ZP: the output is round(acc * SCALE) + ZP, as tvmpy's requantize here."""
    from onnx import numpy_helper

    return [numpy_helper.from_array(w, name),
            numpy_helper.from_array(np.array(1.0, np.float32), "xs"),
            numpy_helper.from_array(np.array(0, np.uint8), "xz"),
            numpy_helper.from_array(np.array(SCALE, np.float32), "ws"),
            numpy_helper.from_array(np.array(0, np.int8), "wz"),
            numpy_helper.from_array(np.array(1.0, np.float32), "ys"),
            numpy_helper.from_array(np.array(ZP, np.uint8), "yz")]


def conv_sides(c: tuple, rng: np.random.Generator) -> tuple[dict, float, Any]:
    from onnx import TensorProto, helper

    ic, oc, hw, k, s = c
    p = k // 2
    oh = (hw + 2 * p - k) // s + 1
    x = rng.integers(0, 256, (1, ic, hw, hw)).astype("uint8")
    w = rng.integers(-128, 128, (oc, ic, k, k)).astype("int8")
    xv = relay.var("x", shape=x.shape, dtype="uint8")
    y = relay.nn.conv2d(xv, relay.const(w), strides=(s, s), padding=(p, p), channels=oc,
                        kernel_size=(k, k), out_dtype="int32")
    int8_run, int8_mod = _tvm_runner(relay.Function([xv], _requant(y)), x)
    xf, wf = x.astype("float32"), w.astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.conv2d(xv, relay.const(wf), strides=(s, s), padding=(p, p), channels=oc,
                        kernel_size=(k, k))
    fp32_run, _ = _tvm_runner(relay.Function([xv], y), xf)
    g = helper.make_graph(
        [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                          pads=[p] * 4, strides=[s, s], kernel_shape=[k, k])], "qconv",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, oc, oh, oh])],
        _q_inits(w))
    ort_run, ort_out = _ort_runner(g, x, [1, oc, oh, oh])
    # the two int8 sides agree (same requantization; ORT rounds half to even too)
    int8_run()
    ort_run()
    diff = np.abs(int8_mod.get_output(0).numpy().astype(int) - ort_out.numpy().astype(int))
    macs = oc * ic * k * k * oh * oh
    sides = {"tvmpy int8": int8_run, "tvmpy fp32": fp32_run, "ORT QLinearConv": ort_run}
    return sides, 2.0 * macs, int(diff.max())


def dense_sides(d: tuple, rng: np.random.Generator) -> tuple[dict, float, Any]:
    from onnx import TensorProto, helper

    m, n, k = d
    x = rng.integers(0, 256, (m, k)).astype("uint8")
    w = rng.integers(-128, 128, (n, k)).astype("int8")
    xv = relay.var("x", shape=x.shape, dtype="uint8")
    y = relay.nn.dense(xv, relay.const(w), out_dtype="int32")
    int8_run, int8_mod = _tvm_runner(relay.Function([xv], _requant(y)), x)
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.dense(xv, relay.const(w.astype("float32")))
    fp32_run, _ = _tvm_runner(relay.Function([xv], y), x.astype("float32"))
    g = helper.make_graph(
        [helper.make_node("QLinearMatMul", ["x", "xs", "xz", "wt", "ws", "wz", "ys", "yz"],
                          ["y"])], "qmm",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])],
        _q_inits(np.ascontiguousarray(w.T), "wt"))
    ort_run, ort_out = _ort_runner(g, x, [m, n])
    int8_run()
    ort_run()
    diff = np.abs(int8_mod.get_output(0).numpy().astype(int) - ort_out.numpy().astype(int))
    sides = {"tvmpy int8": int8_run, "tvmpy fp32": fp32_run, "ORT QLinearMatMul": ort_run}
    return sides, 2.0 * m * n * k, int(diff.max())


def main() -> None:
    ensure_native_blas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"# {machine_description()}, load {os.getloadavg()[0]:.2f}, {args.rounds} interleaved "
          "rounds, 2 threads; median [q1-q3] us, GOPS at the median")
    print("| case | tvmpy int8 | tvmpy fp32 | onnxruntime int8 | int8 vs fp32 | "
          "int8 vs ORT | max diff vs ORT |")
    print("|---|---|---|---|---|---|---|")
    cases = [("conv", c) for c in CONVS] + [("dense", d) for d in DENSES]
    for kind, c in cases:
        sides, ops, diff = (conv_sides if kind == "conv" else dense_sides)(c, rng)
        samples = interleaved_samples(sides, args.rounds)
        cells, meds = [], []
        for name in sides:
            q1, med, q3 = quartiles(samples[name])
            meds.append(med)
            cells.append(f"{med * 1e6:.1f} [{q1 * 1e6:.1f}-{q3 * 1e6:.1f}] "
                         f"{ops / med / 1e9:.0f} GOPS")
        label = (f"conv {c[0]}->{c[1]} {c[2]}x{c[2]} {c[3]}x{c[3]}" if kind == "conv"
                 else f"dense {c[0]}x{c[2]} -> {c[1]}")
        print(f"| {label} | {' | '.join(cells)} | {meds[1] / meds[0]:.2f}x | "
              f"{meds[2] / meds[0]:.2f}x | {diff} |", flush=True)


if __name__ == "__main__":
    main()
