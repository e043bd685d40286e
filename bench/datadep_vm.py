"""Data-dependent ONNX ops through the Relay VM against onnxruntime (issue 11, helper ubound).

One-node ONNX models, every input fed at run time, the same inputs on both sides:

- NonMaxSuppression: boxes (1, 1000, 4), scores (1, 80, 1000), max_output_boxes_per_class
  ``--max-out``, IoU 0.5, score thresholds 0.05 / 0.5 / 0.9;
- Unique (sorted) of 1e5 float32 values (integers below 5000: many repeats);
- NonZero of a (1000, 1000) float32 tensor, half of it zeros.

tvmpy: ``from_onnx`` + ``relay.vm.compile`` (opt_level 3) + ``VirtualMachine.invoke``;
onnxruntime: one session per model, ``intra_op_num_threads=1``. The kernels of these ops are
serial on both sides. Interleaved rounds, the median. Run it with the tvmpy to measure on
PYTHONPATH (the before/after figures of RESULTS.md are this script on two checkouts).

    flock /tmp/tvmpy-bench.lock python bench/datadep_vm.py [--rounds 7] [--max-out 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ensure_native_blas, machine_description, ort_session  # noqa: E402

ensure_native_blas()

import numpy as np  # noqa: E402
from onnx import helper  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.relay.frontend import from_onnx  # noqa: E402
from tvmpy.runtime.vm import VirtualMachine  # noqa: E402


def _model(op_type: str, inputs: list[tuple[str, np.ndarray]], n_out: int, **attrs: Any) -> Any:
    vis = [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(v.dtype),
                                         [f"d{k}_{nm}" for k in range(v.ndim)])
           for nm, v in inputs]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op_type, [nm for nm, _ in inputs], outs, **attrs)
    graph = helper.make_graph([node], "g", vis,
                              [helper.make_empty_tensor_value_info(o) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _time(fn: Any, target_s: float = 0.25) -> tuple[int, Any]:
    fn()
    t = time.perf_counter()
    fn()
    number = max(1, min(100, int(target_s / max(time.perf_counter() - t, 1e-6))))

    def once() -> float:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - t0) / number

    return number, once


def _cases(max_out: int) -> list[tuple[str, Any, dict[str, np.ndarray]]]:
    rng = np.random.default_rng(11)
    ctr = rng.uniform(0, 1, (1, 1000, 2))
    size = rng.uniform(0.05, 0.3, (1, 1000, 2))
    boxes = np.concatenate([ctr[..., ::-1] - size / 2, ctr[..., ::-1] + size / 2], -1)
    boxes = boxes.astype("float32")  # [y1, x1, y2, x2]
    scores = rng.random((1, 80, 1000)).astype("float32")
    out = []
    for t in (0.05, 0.5, 0.9):
        feeds = {"boxes": boxes, "scores": scores, "max_out": np.array([max_out], "int64"),
                 "iou": np.array([0.5], "float32"), "score": np.array([t], "float32")}
        out.append((f"NMS 80x1000 score>{t}", _model("NonMaxSuppression", list(feeds.items()), 1),
                    feeds))
    x = rng.integers(0, 5000, 100_000).astype("float32")
    out.append(("Unique 1e5", _model("Unique", [("x", x)], 4, sorted=1), {"x": x}))
    z = np.where(rng.random((1000, 1000)) < 0.5, rng.standard_normal((1000, 1000)), 0)
    z = z.astype("float32")
    out.append(("NonZero 1e6 (50%)", _model("NonZero", [("x", z)], 1), {"x": z}))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--max-out", type=int, default=100)
    args = ap.parse_args()
    print(f"# {machine_description()}; tvmpy from {os.path.dirname(tvm.__file__)}")
    print(f"{'case':28s} {'output':>12s} {'tvmpy VM ms':>12s} {'ORT ms':>9s} {'ratio':>6s}")
    for name, model, feeds in _cases(args.max_out):
        mod, params = from_onnx(model)
        with tvm.transform.PassContext(opt_level=3):
            exe = relay.vm.compile(mod, "llvm", params=params)
        vm = VirtualMachine(exe, tvm.cpu())
        vm.set_input("main", **feeds)
        sess = ort_session(model, threads=1)
        got = vm.invoke("main")
        got = got if isinstance(got, tuple) else (got,)
        want = sess.run(None, feeds)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)
        _, t_vm = _time(lambda vm=vm: vm.invoke("main"))
        _, t_ort = _time(lambda sess=sess, feeds=feeds: sess.run(None, feeds))
        a, b = [], []
        for _ in range(args.rounds):
            a.append(t_vm())
            b.append(t_ort())
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{name:28s} {str(want[0].shape):>12s} {ma * 1e3:12.2f} {mb * 1e3:9.2f} "
              f"{ma / mb:6.2f}", flush=True)


if __name__ == "__main__":
    main()
