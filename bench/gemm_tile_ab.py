"""A/B of x86 register tiles (rows x panel width, reduction unroll) on one prepacked dense.

    TVM_NUM_THREADS=1 python bench/gemm_tile_ab.py 128x768x2048 8x32x4 6x64x4 [--ort] [R=11]

Each variant ``MRxNRxUK`` builds ``dense_prepacked`` on a weight packed into ``NR``-column
panels (tvmpy/topi/x86/dense.py ``_schedule_tiled`` with ``mr``/``nr``/``unroll_k`` given;
``base``: the defaults of the tree) and all variants run interleaved (rotating order), process
CPU time. ``--ort``: onnxruntime's MatMul (MLAS) of the same product as one more side, one
intra-op thread. Printed: ms per call (median [min, max]), GFLOP/s, and the ratio to the
first side (median of per-round ratios [min, max]).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import tvmpy as tvm
import tvmpy.topi.x86.dense as D
from tvmpy import te


def _pack(w: np.ndarray, nr: int) -> np.ndarray:
    n, k = w.shape
    npanel = -(-n // nr)
    wp = np.zeros((npanel * nr, k), np.float32)
    wp[:n] = w
    return np.ascontiguousarray(wp.reshape(npanel, nr, k).transpose(0, 2, 1))


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--") and not a.startswith("R=")]
    rounds = int(next((a[2:] for a in sys.argv[1:] if a.startswith("R=")), "11"))
    m, n, k = (int(x) for x in args[0].split("x"))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    ref = a @ w.T
    ta, to = tvm.nd.array(a), tvm.nd.empty((m, n))
    sides = {}
    for v in args[1:] or ["base"]:
        if v == "base":
            mr = nr = uk = None
            nr_p = D.panel_width(n)
        else:
            mr, nr, uk = (int(x) for x in v.split("x"))
            nr_p = nr
        wp = _pack(w, nr_p)
        a_t = te.placeholder((m, k), name="A")
        w_t = te.placeholder(wp.shape, name="W")
        out = D.dense_prepacked(a_t, w_t, units=n)
        s = te.create_schedule(out.op)
        mm = out.op.input_tensors[0] if out.op.tag == "injective" else out
        D._schedule_tiled(s, mm, out, mr=mr, nr=nr, unroll_k=uk)
        f = tvm.build(s, [a_t, w_t, out], target="llvm")
        tw = tvm.nd.array(wp)
        f(ta, tw, to)
        np.testing.assert_allclose(to.numpy(), ref, rtol=1e-4, atol=1e-3)
        sides[v] = (lambda f=f, tw=tw: f(ta, tw, to))
    if "--ort" in sys.argv:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
        g = helper.make_graph(
            [helper.make_node("MatMul", ["a", "wt"], ["y"])], "mm",
            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
            [numpy_helper.from_array(np.ascontiguousarray(w.T), "wt")])
        mod = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(mod.SerializeToString(), so, providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(sess.run(None, {"a": a})[0], ref, rtol=1e-4, atol=1e-3)
        sides["ort"] = lambda: sess.run(None, {"a": a})
        _ = onnx
    names = list(sides)
    ts: dict[str, list[float]] = {v: [] for v in names}
    number = max(1, int(0.03 / max(1e-6, 1e-9 * 2 * m * n * k / 120)))
    for r in range(rounds):
        for v in names[r % len(names):] + names[:r % len(names)]:
            time.sleep(0.05)
            t0 = time.process_time()
            for _ in range(number):
                sides[v]()
            ts[v].append((time.process_time() - t0) / number)
    print(f"# load {os.getloadavg()[0]:.2f}")
    for v in names:
        t = np.array(ts[v])
        rat = t / np.array(ts[names[0]])
        med = float(np.median(t))
        print(f"{args[0]:>14} {v:>10}: {med * 1e3:.3f} ms [{t.min() * 1e3:.3f}, "
              f"{t.max() * 1e3:.3f}] {2e-9 * m * n * k / med:6.1f} GFLOP/s; / {names[0]} "
              f"{np.median(rat):.3f} [{rat.min():.3f}, {rat.max():.3f}]")


if __name__ == "__main__":
    main()
