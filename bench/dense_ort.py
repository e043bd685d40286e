"""A one-node ONNX Gemm (``Y = A @ W^T + bias``, W ``[N, K]``: a PyTorch Linear) built by tvmpy
vs onnxruntime and numpy, one process, interleaved rounds (bench/common.py).

    python bench/dense_ort.py [--sizes 32x10000x512 1x1000x512 ...] [--rounds 9] [--cpu-time]

A size is ``MxNxK``. Printed per size: ms per call (median [min, max]) of each side, GFLOP/s
of tvmpy, the weight stream's GB/s (4 N K bytes / tvmpy time), and tvmpy / onnxruntime
(median of the per-round ratios [min, max]). ``--stream`` adds a plain read of a buffer the
size of the weight (numpy ``sum``) for the machine's streaming rate. ``--variant
tvmpy.topi.x86.dense.PREFETCH_BYTES=0`` adds a tvmpy side built with that module constant set
(an A/B of a schedule default in one process; run with TVMPY_CACHE=0, the kernel cache does not
key on such constants).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    numpy_blas_threads,
    ort_bound_runner,
    ort_session,
)

ensure_native_blas()

import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402


def model(m: int, n: int, k: int, w: np.ndarray, bias: np.ndarray):
    from onnx import TensorProto, helper, numpy_helper

    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])
    node = helper.make_node("Gemm", ["A", "W", "C"], ["Y"], transB=1)
    g = helper.make_graph([node], "dense", [a], [y], [numpy_helper.from_array(w, "W"),
                                                      numpy_helper.from_array(bias, "C")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def build(onnx_m, a):
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    mod, params = relay.frontend.from_onnx(onnx_m)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    gm.set_input("A", a)
    gm.run()
    return gm


def run(size: str, threads: int, rounds: int, cpu_time: bool, stream: bool,
        variants: list[str]) -> None:
    import importlib

    m, n, k = (int(d) for d in size.lower().split("x"))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    bias = rng.standard_normal((n,), dtype=np.float32)
    onnx_m = model(m, n, k, w, bias)
    gm = build(onnx_m, a)
    want = a @ w.T + bias
    err = float(np.abs(gm.get_output(0).numpy() - want).max() / np.abs(want).max())
    sess = ort_session(onnx_m, threads)
    ort_run, _ = ort_bound_runner(sess, {"A": a})
    wt = np.ascontiguousarray(w.T)
    sides = {"tvmpy": gm.run, "ort": ort_run, "numpy": lambda: a @ wt}
    for v in variants:
        name, _, value = v.partition("=")
        modname, _, attr = name.rpartition(".")
        module = importlib.import_module(modname)
        old = getattr(module, attr)
        setattr(module, attr, type(old)(value))
        try:
            gv = build(onnx_m, a)
        finally:
            setattr(module, attr, old)
        verr = float(np.abs(gv.get_output(0).numpy() - want).max() / np.abs(want).max())
        assert verr < 1e-4, (v, verr)
        sides[v] = gv.run
    if stream:
        sides["stream"] = lambda: w.sum()
    t = interleaved_samples(sides, rounds, clock=bench_clock(cpu_time, threads))
    med = {s: float(np.median(v)) for s, v in t.items()}
    ratios = np.array(t["tvmpy"]) / np.array(t["ort"])
    line = (f"{size:>14} tvmpy {med['tvmpy'] * 1e3:7.3f} ort {med['ort'] * 1e3:7.3f} "
            f"numpy {med['numpy'] * 1e3:7.3f} ms; tvmpy {2e-9 * m * n * k / med['tvmpy']:6.1f} "
            f"GFLOP/s, weight {4e-9 * n * k / med['tvmpy']:5.1f} GB/s; tvmpy/ort "
            f"{np.median(ratios):.3f} [{ratios.min():.3f}, {ratios.max():.3f}]; err {err:.1e}")
    for v in variants:
        r = np.array(t["tvmpy"]) / np.array(t[v])
        line += (f"\n{'':>14} with {v}: {med[v] * 1e3:7.3f} ms; tvmpy / it {np.median(r):.3f} "
                 f"[{r.min():.3f}, {r.max():.3f}]")
    if stream:
        line += f"; sum() of the weight {4e-9 * n * k / med['stream']:5.1f} GB/s"
    print(line, flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=["32x10000x512", "1x10000x512", "8x1000x512",
                                                  "32x1024x512", "128x768x768"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--cpu-time", action="store_true")
    p.add_argument("--stream", action="store_true")
    p.add_argument("--variant", action="append", default=[])
    o = p.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(o.threads)
    numpy_blas_threads(o.threads)
    print(f"# {machine_description()}; {o.threads} thread(s); load {os.getloadavg()[0]:.2f}")
    for size in o.sizes:
        run(size, o.threads, o.rounds, o.cpu_time, o.stream, o.variant)
    print(f"# load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
