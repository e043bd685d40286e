"""Winograd vs direct convolution on ResNet-18's 3x3 stride-1 layers (batch 1, + relu): tvmpy's
direct NCHW16c schedule, Winograd F(4x4, 3x3) and F(6x6, 3x3) with the default (fallback)
knobs, and onnxruntime (NCHW Conv + Relu, as many threads as tvmpy), same run. Effective GFLOP/s count the
direct convolution's FLOPs. This is the evidence behind the untuned rule of
``relay/op/strategy/x86_winograd.py``.

The tvmpy sides are kernels called on NDArrays in the blocked NCHW16c layout (input blocked
and weights transformed beforehand, output preallocated): comparable among themselves. The
onnxruntime side takes NCHW in and out (its own reorders included) through
``run_with_iobinding`` (input and a preallocated output bound once), so the F(4)/ORT column is
a tvmpy-kernel-only figure, not a like-for-like ratio: bench/ops.py gives that one (NCHW on
both sides). Timing: interleaved rounds (order rotating), medians over the rounds.

    python bench/winograd.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import (  # noqa: E402
    bench_threads,
    interleaved_samples,
    machine_description,
    ort_bound_runner,
    ort_session,
)

import tvmpy as tvm  # noqa: E402
from tvmpy import te, topi  # noqa: E402
from tvmpy.topi import testing  # noqa: E402
from tvmpy.topi.nn import winograd as W  # noqa: E402
from tvmpy.topi.x86 import schedule_conv2d_NCHWc, schedule_conv2d_winograd_nchwc  # noqa: E402

LAYERS = [(64, 56), (128, 28), (256, 14), (512, 7)]  # (channels, H = W); OC = C


def _ort(c: int, hw: int, k: np.ndarray, x: np.ndarray):
    """onnxruntime's NCHW Conv + Relu on ``x``: a call runs it with the input and a preallocated
    output bound once."""
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["y"], ["z"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, c, hw, hw])],
        [numpy_helper.from_array(k, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    run, _ = ort_bound_runner(ort_session(m, threads=bench_threads()), {"x": x})
    return run


def _tvm(kind: str, c: int, hw: int, k: np.ndarray):
    A = te.placeholder((1, c // 16, hw, hw, 16), name="A")
    if kind == "direct":
        w = k.reshape(c // 16, 16, c // 16, 16, 3, 3).transpose(0, 2, 4, 5, 3, 1)
        K = te.placeholder(w.shape, name="K")
        out = topi.nn.relu(topi.nn.conv2d_NCHWc(A, K, 1, 1, 1))
        s = schedule_conv2d_NCHWc([out])
    else:
        m = int(kind[-1])
        w = W.winograd_weight_transform_np(k, m, 16)
        K = te.placeholder(w.shape, name="K")
        out = topi.nn.relu(W.conv2d_winograd_nchwc(A, K, 1, m))
        s = schedule_conv2d_winograd_nchwc([out])
    t0 = time.perf_counter()
    f = tvm.build(s, [A, K, out], "llvm")
    build_s = time.perf_counter() - t0
    wk = tvm.nd.array(np.ascontiguousarray(w, dtype="float32"))
    o = tvm.nd.empty([int(d) for d in out.shape])

    def run(xb):
        f(xb, wk, o)
        return o

    return run, build_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=10)
    opts = p.parse_args()
    bench_threads()  # before any tvmpy library runs; onnxruntime gets the same
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; median of {opts.repeat} "
          "interleaved rounds; tvmpy: NCHW16c kernels only; onnxruntime: NCHW, I/O binding")
    print("| layer | direct ms | F(4x4) ms | F(6x6) ms | onnxruntime ms | F(4)/direct | "
          "F(4) kernel/ORT "
          "| F(4) eff. GFLOP/s | max rel err F(4) / F(6) | build direct / F(4) / F(6) s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for c, hw in LAYERS:
        x = rng.uniform(-1, 1, (1, c, hw, hw)).astype("float32")
        k = (rng.uniform(-1, 1, (c, c, 3, 3)) / np.sqrt(9 * c)).astype("float32")
        want = np.maximum(testing.conv2d_nchw_python(x, k, 1, 1), 0)
        xb = tvm.nd.array(testing.nchw_to_nchwc(x, 16))
        sides, builds, errs = {}, {}, {}
        for kind in ("direct", "wino4", "wino6"):
            run, builds[kind] = _tvm(kind, c, hw, k)
            got = testing.nchwc_to_nchw(run(xb).numpy())
            errs[kind] = float(np.abs(got - want).max() / np.abs(want).max())
            sides[kind] = lambda r=run, xb=xb: r(xb)
        sides["ort"] = _ort(c, hw, k, x)
        samples = interleaved_samples(sides, opts.repeat, pause=0.1, target_s=0.05)
        med = {name: float(np.median(ts)) for name, ts in samples.items()}
        flop = 2 * c * c * 9 * hw * hw
        print(f"| {c}x{hw}x{hw} | {med['direct'] * 1e3:.3f} | {med['wino4'] * 1e3:.3f} | "
              f"{med['wino6'] * 1e3:.3f} | {med['ort'] * 1e3:.3f} | "
              f"{med['wino4'] / med['direct']:.2f} | {med['wino4'] / med['ort']:.2f} | "
              f"{flop / med['wino4'] / 1e9:.0f} | {errs['wino4']:.1e} / {errs['wino6']:.1e} | "
              f"{builds['direct']:.1f} / {builds['wino4']:.1f} / {builds['wino6']:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
