"""Convolutions at awkward shapes (issue 12): tvmpy vs onnxruntime on one-conv models.

Each case is one model, NCHW in and NCHW out: conv2d (constant weight) + bias + relu, batch 1.

* tvmpy: ``relay.build`` at opt_level 3 for the host CPU ("llvm"), run by the graph executor:
  ``set_input`` once, then ``run()`` only (the output stays in the module);
* onnxruntime: the same ONNX model (intra_op_num_threads = --threads, default 2; graph optimizations on), run with
  I/O binding: the input bound once, the output bound to a preallocated OrtValue,
  ``run_with_iobinding`` only.

Both sides run the same number of calls per sample, the samples interleaved (tvm, ort, tvm,
...); per case it prints the medians, the spread (10th-90th percentile of the samples, in % of
the median) and the ratio ORT time / tvmpy time (> 1: tvmpy faster; the median of the
per-round ratios; best/best: the ratio of the fastest samples, steadier on a loaded machine).
The results are also checked against onnxruntime.

    python bench/conv_shapes.py [--filter TEXT] [--quick] [--samples 15] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import (  # noqa: E402
    bench_clock,
    bench_threads,
    ensure_native_blas,
    machine_description,
)

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402

# (in channels, out channels, map size, kernel, stride)
_PAIRS = [(24, 24), (57, 57), (24, 57), (57, 128), (64, 57), (3, 24)]
_MAPS = [7, 13, 17, 56]
_KINDS = [(3, 1), (3, 2), (1, 1)]
CASES = [(ic, oc, hw, k, s) for hw in _MAPS for ic, oc in _PAIRS for k, s in _KINDS
         if not (ic == 3 and k == 1)]
CASES += [(3, 64, hw, 7, 2) for hw in (56, 17)] + [(64, 64, 56, 3, 1)] + [(3, 24, 13, 7, 2)]
# a small subset for a quick look: one of each kind
QUICK = [(24, 24, 56, 3, 1), (57, 57, 56, 3, 1), (57, 128, 13, 3, 1), (64, 57, 17, 3, 2),
         (57, 57, 17, 1, 1), (3, 24, 56, 3, 2), (3, 64, 56, 7, 2), (24, 57, 7, 3, 1)]


def case_name(c: tuple) -> str:
    ic, oc, hw, k, s = c
    return f"conv{k}x{k} s{s} {ic}x{hw}x{hw}->{oc}"


def _weights(c: tuple, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ic, oc, hw, k, _ = c
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, ic, hw, hw)).astype("float32")
    w = (rng.uniform(-1, 1, (oc, ic, k, k)) / np.sqrt(ic * k * k)).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    return x, w, b


def build_tvm(c: tuple, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> Any:
    """The graph-executor module of conv + bias + relu, the input already set."""
    ic, oc, hw, k, s = c
    p = k // 2
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.conv2d(xv, relay.const(w), strides=(s, s), padding=(p, p, p, p),
                        channels=oc, kernel_size=(k, k))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", x)
    return m


def build_ort(c: tuple, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[Any, Any, Any]:
    """``(session, io_binding, output OrtValue)`` with the input bound once."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    ic, oc, hw, k, s = c
    p = k // 2
    oh = (hw + 2 * p - k) // s + 1
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[p] * 4, strides=[s, s],
                          kernel_shape=[k, k]),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, oc, oh, oh])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    io = sess.io_binding()
    xin = ort.OrtValue.ortvalue_from_numpy(x)
    out = ort.OrtValue.ortvalue_from_shape_and_type([1, oc, oh, oh], np.float32)
    io.bind_ortvalue_input("x", xin)
    io.bind_ortvalue_output("y", out)
    sess._keep = (xin,)  # the bound input must outlive the binding
    return sess, io, out


THREADS = 2  # both sides; --threads sets it (tvmpy's through TVM_NUM_THREADS, before any run)


def _calls(fn: Any, target_s: float) -> int:
    fn()
    t0 = time.perf_counter()
    fn()
    dt = max(time.perf_counter() - t0, 1e-7)
    return max(1, min(2000, int(target_s / dt)))


CLOCK = time.perf_counter  # --cpu-time: time.process_time (one thread on both sides)


def _sample(fn: Any, n: int) -> float:
    t0 = CLOCK()
    for _ in range(n):
        fn()
    return (CLOCK() - t0) / n


def run_case(c: tuple, samples: int, sample_s: float, pause: float) -> dict:
    x, w, b = _weights(c, seed=sum(c))
    t0 = time.perf_counter()
    m = build_tvm(c, x, w, b)
    build_s = time.perf_counter() - t0
    sess, io, out = build_ort(c, x, w, b)
    m.run()
    sess.run_with_iobinding(io)
    got, ref = m.get_output(0).numpy(), out.numpy()
    err = float(np.abs(got - ref).max() / (np.abs(ref).max() + 1e-6))
    if not np.allclose(got, ref, rtol=1e-3, atol=1e-3):
        raise AssertionError(f"{case_name(c)}: tvmpy and onnxruntime differ (rel err {err:.1e})")

    def f_tvm() -> None:
        m.run()

    def f_ort() -> None:
        sess.run_with_iobinding(io)

    n = max(_calls(f_tvm, sample_s), _calls(f_ort, sample_s))  # same count on both sides
    tt, to = [], []
    for _ in range(samples):
        # a pause before each side: onnxruntime's pool threads spin after a run (and
        # tvmpy's briefly), which would take a core from the side timed next
        time.sleep(pause)
        tt.append(_sample(f_tvm, n))
        time.sleep(pause)
        to.append(_sample(f_ort, n))
    tt_a, to_a = np.array(tt), np.array(to)
    ratios = to_a / tt_a

    def spread(a: np.ndarray) -> float:
        lo, hi = np.percentile(a, [10, 90])
        return 100.0 * (hi - lo) / np.median(a)

    ic, oc, hw, k, s = c
    oh = (hw + 2 * (k // 2) - k) // s + 1
    return {"name": case_name(c), "tvm": float(np.median(tt_a)), "ort": float(np.median(to_a)),
            "tvm_spread": spread(tt_a), "ort_spread": spread(to_a),
            "ratio": float(np.median(ratios)), "best_ratio": float(to_a.min() / tt_a.min()), "ratio_lo": float(np.percentile(ratios, 10)),
            "ratio_hi": float(np.percentile(ratios, 90)), "err": err, "build": build_s,
            "flops": 2.0 * oc * oh * oh * ic * k * k, "calls": n}


def main() -> None:
    ensure_native_blas()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--filter", default="", help="only cases whose name contains this text")
    ap.add_argument("--quick", action="store_true", help="a subset of 8 cases")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--sample-ms", type=float, default=10.0, help="length of one sample")
    ap.add_argument("--pause", type=float, default=0.03, help="seconds idle before a sample")
    ap.add_argument("--threads", type=int, default=2, help="threads of both sides (1: immune "
                    "to a second core whose share of the machine varies, as on a shared VM)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time samples in process CPU time (needs --threads 1): robust to a "
                         "loaded machine's preemption")
    o = ap.parse_args()
    global THREADS, CLOCK
    CLOCK = bench_clock(o.cpu_time, o.threads)
    THREADS = bench_threads(o.threads)  # TVM_NUM_THREADS, read when tvmpy's thread pool starts
    cases = QUICK if o.quick else CASES
    cases = [c for c in cases if o.filter in case_name(c)]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {machine_description()}, load "
          f"{os.getloadavg()[0]:.2f}; conv+bias+relu, graph executor vs onnxruntime io_binding "
          f"({o.threads} threads); {o.samples} interleaved samples ("
          f"{'process CPU time' if o.cpu_time else 'wall time'}); ratio = ORT time / tvmpy time")
    print("| case | tvmpy ms (spread) | ORT ms (spread) | ratio [p10, p90] | best/best | "
          "tvmpy GFLOP/s |")
    print("|---|---|---|---|---|---|")
    worst = []
    for c in cases:
        try:
            r = run_case(c, o.samples, o.sample_ms / 1e3, o.pause)
        except Exception as e:  # a broken case is reported, the others still run
            print(f"| {case_name(c)} | FAILED {type(e).__name__}: {e} | | | | |", flush=True)
            continue
        worst.append(r["ratio"])
        flag = " **<0.9**" if r["ratio"] < 0.9 else ""
        print(f"| {r['name']} | {r['tvm'] * 1e3:.4f} ({r['tvm_spread']:.0f}%) | "
              f"{r['ort'] * 1e3:.4f} ({r['ort_spread']:.0f}%) | {r['ratio']:.2f} "
              f"[{r['ratio_lo']:.2f}, {r['ratio_hi']:.2f}]{flag} | {r['best_ratio']:.2f} | "
              f"{r['flops'] / r['tvm'] / 1e9:.1f} |", flush=True)
    if worst:
        print(f"# {len(worst)} cases: min ratio {min(worst):.2f}, median {np.median(worst):.2f}, "
              f"below 0.9: {sum(r < 0.9 for r in worst)}")


if __name__ == "__main__":
    main()
