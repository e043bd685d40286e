"""conv2d 56x56x64 -> 64, 3x3, pad 1, stride 1, NCHW, batch 1: tvmpy's hand-written schedule
vs onnxruntime, same run, both on the same thread count (common.bench_threads: TVM_NUM_THREADS,
else OMP_NUM_THREADS, else the CPUs).

Both sides take the NCHW input and write the NCHW output into preallocated memory, the weights
prepared once (tvmpy's packed kernel layout; onnxruntime prepacks its initializer): tvmpy calls
the compiled function on NDArrays, onnxruntime runs ``run_with_iobinding`` with the input and a
preallocated output bound once. Interleaved rounds (order rotating), median and interquartile
range over the rounds (bench/common.py ``interleaved_samples``).

    python bench/conv2d.py [--ocb 16 --reg-n 14] [--repeat 15]
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
    quartiles,
)

import tvmpy as tvm  # noqa: E402
from tvmpy.te import compute, create_schedule, placeholder, reduce_axis  # noqa: E402
from tvmpy.te import sum as te_sum  # noqa: E402
from tvmpy.te.schedule import Schedule  # noqa: E402
from tvmpy.te.tensor import Tensor  # noqa: E402
from tvmpy.tir import all as tir_all  # noqa: E402
from tvmpy.tir.op import if_then_else  # noqa: E402

C, H, W, OC, KH, KW = 64, 56, 56, 64, 3, 3


# ``conv2d_nchw_packed`` (the first hand-written example, from topi/x86/conv2d.py) is a self-contained
# NCHW-in/NCHW-out conv (batch 1): the kernel is pre-packed (at compile time, as graph-level
# layout transformation would do) into
# ``[OC/ocb, IC, KH, KW, ocb]`` so that one vector of ``ocb`` output channels is contiguous.
# The convolution runs in a blocked ``[OC/ocb, OH, OW, ocb]`` layout: each tile of ``reg_n`` output
# columns x ``ocb`` channels accumulates in vector registers (reg_n * ocb/16 zmm registers), fed by
# broadcasts of input pixels; a final vectorized stage writes NCHW.
def pack_kernel(w: np.ndarray, ocb: int) -> np.ndarray:
    """OIHW -> [O/ocb, I, H, W, ocb] (the layout the schedule reads)."""
    oc, ic, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(oc // ocb, ocb, ic, kh, kw).transpose(0, 2, 3, 4, 1))


def conv2d_nchw_packed(ic: int, h: int, w: int, oc: int, kh: int = 3, kw: int = 3, pad: int = 1,
                       ocb: int = 32, reg_n: int = 7, dtype: str = "float32"
                       ) -> tuple[Schedule, list[Tensor]]:
    """Return ``(schedule, [data, packed_kernel, out])`` for a stride-1 conv2d."""
    if oc % ocb:
        raise ValueError(f"conv2d_nchw_packed: oc={oc} must be a multiple of ocb={ocb}")
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    data = placeholder((1, ic, h, w), dtype, name="data")
    kernel = placeholder((oc // ocb, ic, kh, kw, ocb), dtype, name="kernel")
    padded = compute(
        (1, ic, h + 2 * pad, w + 2 * pad),
        lambda n, c, y, x: if_then_else(
            tir_all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[n, c, y - pad, x - pad], 0.0),
        name="pad")
    rc = reduce_axis((0, ic), name="rc")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    conv = compute(
        (1, oc // ocb, oh, ow, ocb),
        lambda n, co, y, x, ci: te_sum(padded[n, rc, y + ry, x + rx] * kernel[co, rc, ry, rx, ci],
                                       axis=[rc, ry, rx]),
        name="conv")
    out = compute((1, oc, oh, ow), lambda n, c, y, x: conv[n, c // ocb, y, x, c % ocb], name="out")

    s = create_schedule(out.op)
    CC = s.cache_write(conv, "local")
    # padding: one parallel pass over the input
    pn, pc, py, px = s[padded].op.axis
    s[padded].parallel(pc)
    # the NCHW output is the root loop nest: one parallel task per (channel block, row) ...
    on, oc_, oy, ox = s[out].op.axis
    oco, oci = s[out].split(oc_, factor=ocb)
    s[out].reorder(oco, oy, oci, ox)
    s[out].vectorize(ox)
    task = s[out].fuse(oco, oy)
    s[out].parallel(task)
    # ... computing that row in the blocked layout [ow, ocb] first
    s[conv].compute_at(s[out], task)
    n, co, y, x, ci = s[conv].op.axis
    xo, xi = s[conv].split(x, factor=reg_n)
    s[conv].reorder(co, y, xo, xi, ci)
    s[conv].vectorize(ci)
    # ... one register tile of reg_n columns x ocb channels at a time
    s[CC].compute_at(s[conv], xo)
    _, _, _, cx, cci = s[CC].op.axis
    crc, cry, crx = s[CC].op.reduce_axis
    s[CC].reorder(crc, cry, crx, cx, cci)
    s[CC].unroll(cx)
    s[CC].vectorize(cci)
    return s, [data, kernel, out]

FLOP = 2.0 * OC * H * W * C * KH * KW


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, OC, H, W), np.float32)
    for dy in range(KH):
        for dx in range(KW):
            out += np.einsum("chw,fc->fhw", xp[0, :, dy:dy + H, dx:dx + W], w[:, :, dy, dx])[None]
    return out


def ort_session(w: np.ndarray, threads: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, OC, H, W])],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ocb", type=int, default=32)
    p.add_argument("--reg-n", type=int, default=7)
    p.add_argument("--repeat", type=int, default=15, help="interleaved rounds")
    opts = p.parse_args()
    threads = bench_threads()  # before tvmpy's pool starts
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, C, H, W), dtype=np.float32)
    w = rng.standard_normal((OC, C, KH, KW), dtype=np.float32)
    t0 = time.perf_counter()
    s, args = conv2d_nchw_packed(C, H, W, OC, ocb=opts.ocb, reg_n=opts.reg_n)
    f = tvm.build(s, args, target="llvm", name="conv")
    build_s = time.perf_counter() - t0
    X, Wp, Y = tvm.nd.array(x), tvm.nd.array(pack_kernel(w, opts.ocb)), tvm.nd.empty((1, OC, H, W))
    f(X, Wp, Y)
    ref = reference(x, w)
    err = float(np.abs(Y.numpy() - ref).max() / np.abs(ref).max())
    sess = ort_session(w, threads)
    ort_run, ort_outs = ort_bound_runner(sess, {"x": x})
    ort_run()
    assert np.allclose(ort_outs[0].numpy(), ref, rtol=1e-4, atol=1e-3)
    samples = interleaved_samples({"tvmpy": lambda: f(X, Wp, Y), "ort": ort_run},
                                  rounds=opts.repeat, pause=0.3)
    qt, qo = quartiles(samples["tvmpy"]), quartiles(samples["ort"])
    print(f"# {time.strftime('%Y-%m-%d')} {machine_description()}; conv2d 1x{C}x{H}x{W} -> {OC}, "
          f"3x3 pad 1; median (25th-75th percentile) of {opts.repeat} interleaved rounds; "
          f"{threads} thread(s) each side")
    print(f"tvmpy (ocb={opts.ocb}, reg_n={opts.reg_n}): {qt[1] * 1e3:7.3f} ms ({qt[0] * 1e3:.3f}-"
          f"{qt[2] * 1e3:.3f}) {FLOP / qt[1] / 1e9:7.1f} GFLOP/s  (build {build_s:.2f} s, "
          f"rel err {err:.1e})")
    print(f"onnxruntime (I/O binding): {qo[1] * 1e3:7.3f} ms ({qo[0] * 1e3:.3f}-"
          f"{qo[2] * 1e3:.3f}) {FLOP / qo[1] / 1e9:7.1f} GFLOP/s")
    print(f"speed ratio tvmpy/onnxruntime (ratio of medians) = {qo[1] / qt[1]:.2f}")


if __name__ == "__main__":
    main()
