"""A small CNN quantized by onnxruntime (quantize_static, QDQ, per-channel int8 weights, uint8
activations, calibrated on random inputs; tests/relay/qnn/qdq_models.py): tvmpy before (the QDQ
pairs computed in float: ``disabled_pass=["FakeQuantizationToInteger"]``, what the float import
of quantized ONNX did) vs after (FakeQuantizationToInteger + CanonicalizeOps: integer conv2d /
dense on uint8 x int8 with int32 accumulation), tvmpy fp32 on the float model, and onnxruntime
(int8 QDQ model and fp32 model), the same thread count each side (TVM_NUM_THREADS, default
2), all in one interleaved run.

    flock /tmp/tvmpy-bench.lock python bench/qnn_qdq.py [--rounds 15] [--size 56]

Prints the median (IQR) per side and the agreement with onnxruntime's int8 output in
quantization steps of the output.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "relay", "qnn"))
os.environ.setdefault("TVM_NUM_THREADS", "2")

from common import (  # noqa: E402
    bench_threads,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    ort_bound_runner,
    ort_session,
    quartiles,
)

ensure_native_blas()

import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402


def tvm_side(model, shape, disabled=()):
    mod, params = relay.frontend.from_onnx(model, {"x": shape})
    with tvm.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    return m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--size", type=int, default=56)
    a = ap.parse_args()
    threads = bench_threads()  # TVM_NUM_THREADS (default 2 here) for every side
    from qdq_models import quantized_cnn

    fmodel, qmodel = quantized_cnn("QDQ", channels=(32, 64, 64), size=a.size)
    shape = (1, 3, a.size, a.size)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    from onnx import numpy_helper

    out_node = next(n for n in qmodel.graph.node if qmodel.graph.output[0].name in n.output)
    init = {i.name: numpy_helper.to_array(i) for i in qmodel.graph.initializer}
    step = float(init[out_node.input[1]])

    sides, outs = {}, {}
    for name, model, disabled in [("tvmpy int8 (FQ2I)", qmodel, ()),
                                  ("tvmpy QDQ as float (before)", qmodel,
                                   ("FakeQuantizationToInteger",)),
                                  ("tvmpy fp32 model", fmodel, ())]:
        m = tvm_side(model, shape, disabled)
        m.set_input("x", x)
        m.run()
        outs[name] = m.get_output(0).numpy()
        sides[name] = m.run
    for name, model in [("onnxruntime int8 QDQ", qmodel), ("onnxruntime fp32 model", fmodel)]:
        run, o = ort_bound_runner(ort_session(model, threads), {"x": x})
        run()
        outs[name] = o[0].numpy()
        sides[name] = run
    ref = outs["onnxruntime int8 QDQ"]
    print(f"# {machine_description()}; input {shape}; TVM_NUM_THREADS={threads}, onnxruntime "
          f"intra_op_num_threads={threads}")
    for k in ("tvmpy int8 (FQ2I)", "tvmpy QDQ as float (before)"):
        print(f"# {k}: max |diff| vs onnxruntime int8 = "
              f"{np.abs(outs[k] - ref).max() / step:.1f} output quantization steps")
    samples = interleaved_samples(sides, a.rounds)
    base = quartiles(samples["onnxruntime int8 QDQ"])[1]
    print("| side | median ms | IQR ms | best ms | / ORT int8 |")
    print("|---|---|---|---|---|")
    for k, v in samples.items():
        q1, med, q3 = quartiles(v)
        print(f"| {k} | {med * 1e3:.3f} | {q1 * 1e3:.3f}-{q3 * 1e3:.3f} | {min(v) * 1e3:.3f} | "
              f"{med / base:.2f} |")


if __name__ == "__main__":
    main()
