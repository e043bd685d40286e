"""Padded-edge convolutions at 1 thread (issue 25 point 4 / 28 point 7): a conv with its
padding on one edge only (left, right, top, bottom, TF "SAME" at stride 2: right/bottom) or
none, tvmpy with the width padding's ``likely`` hints (``topi.nn.conv2d.PAD_LIKELY_W``: "none",
the code before 2026-11-30; "after", the default: the right edge's test; "both") against
onnxruntime, in one process (variants: env PAD_EDGE_VARIANTS, default "none,after").

Every side (each variant, onnxruntime) runs 1 thread, interleaved rounds in rotating order
(common.interleaved_samples), each round timed in process CPU time (a loaded machine's
preemption does not count); prints the minimum over the rounds (us), each variant's ratio
to the first and to onnxruntime (of the minima); outputs checked against onnxruntime.

    PYTHONPATH=. python bench/pad_edge.py [rounds=15] [filter text]
"""
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["TVM_NUM_THREADS"] = "1"
os.environ.setdefault("TVMPY_CACHE", "0")
from common import ensure_native_blas  # noqa: E402

ensure_native_blas()
import numpy as np  # noqa: E402
from common import bench_clock, interleaved_samples, ort_bound_runner, ort_session  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402

topi_conv2d = importlib.import_module("tvmpy.topi.nn.conv2d")  # the module (nn.conv2d is the op)

# (in channels, out channels, size, kernel, stride, pads (top, left, bottom, right), label)
EDGES = {"none": (0, 0, 0, 0), "left": (1, 1, 0, 0), "right": (1, 0, 0, 1),
         "bottom": (0, 1, 1, 0)}
CASES = [(ic, oc, hw, 2, 1, p, name) for ic, oc, hw in ((256, 128, 16), (128, 64, 16),
                                                        (64, 32, 32))
         for name, p in EDGES.items()]
CASES += [(256, 256, 14, 3, 1, p, name) for name, p in
          (("sym", (1, 1, 1, 1)), ("left2", (1, 2, 1, 0)), ("right2", (1, 0, 1, 2)))]
CASES += [(c, c, hw, 3, 2, p, name) for c, hw in ((64, 56), (128, 28)) for name, p in
          (("same_s2", (0, 0, 1, 1)), ("sym_s2", (1, 1, 1, 1)))]


VARIANTS = os.environ.get("PAD_EDGE_VARIANTS", "none,after").split(",")


def build(c, x, w, new):
    ic, oc, hw, k, s, pads, _ = c
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w), strides=(s, s), padding=pads,
                                      channels=oc, kernel_size=(k, k)))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    default = topi_conv2d.PAD_LIKELY_W
    topi_conv2d.PAD_LIKELY_W = new
    try:
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target="llvm")
    finally:
        topi_conv2d.PAD_LIKELY_W = default
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", x)
    return m


def ort_side(c, x, w):
    from onnx import TensorProto, helper, numpy_helper
    ic, oc, hw, k, s, (t, l, b, r), _ = c
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[t, l, b, r], strides=[s, s]),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return ort_bound_runner(ort_session(model, threads=1), {"x": x})


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    filt = sys.argv[2] if len(sys.argv) > 2 else ""
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} load {os.getloadavg()[0]:.1f}; 1 thread, "
          f"CPU time, min of {rounds} interleaved rounds")
    base = VARIANTS[0]
    print("| conv | pads (t,l,b,r) | " + " | ".join(f"{v} us" for v in VARIANTS)
          + " | ORT us | " + " | ".join(f"{v}/{base}" for v in VARIANTS[1:])
          + " | " + " | ".join(f"{v}/ORT" for v in VARIANTS) + " |")
    print("|---|---|" + "---:|" * (3 * len(VARIANTS)))
    rng = np.random.default_rng(0)
    for c in CASES:
        ic, oc, hw, k, s, pads, name = c
        label = f"{k}x{k} s{s} {ic}->{oc} {hw}x{hw} {name}"
        if filt not in label:
            continue
        x = rng.standard_normal((1, ic, hw, hw)).astype("float32")
        w = (rng.standard_normal((oc, ic, k, k)) / np.sqrt(ic * k * k)).astype("float32")
        mods = {v: build(c, x, w, v) for v in VARIANTS}
        ort_run, ort_out = ort_side(c, x, w)
        ort_run()
        ref = ort_out[0].numpy()
        for m in mods.values():
            m.run()
            np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)
        sides = {v: m.run for v, m in mods.items()}
        sides["ORT"] = ort_run
        t = interleaved_samples(sides, rounds, pause=0.02, target_s=0.02,
                                clock=bench_clock(True, 1))
        us = {k: min(v) * 1e6 for k, v in t.items()}
        cells = [f"{us[v]:.0f}" for v in VARIANTS] + [f"{us['ORT']:.0f}"]
        cells += [f"{us[v] / us[base]:.2f}" for v in VARIANTS[1:]]
        cells += [f"{us[v] / us['ORT']:.2f}" for v in VARIANTS]
        print(f"| {label} | {pads} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
