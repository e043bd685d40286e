"""One NCHW{L}c convolution kernel (+ relu) under several schedule variants, 1 thread, process
CPU time, variants interleaved round by round, built for the host target (its cache sizes,
FMA units and vector registers; ``L`` its float32 lanes, 16 with AVX-512, 8 with AVX2, or
``BENCH_BLOCK``); the direct variants checked against each other. Winograd F(4x4) with ``wino``.

    python bench/conv_nchwc_variants.py IC,OC,HW,K,STRIDE "{'default': {'default': 1},
        'r7kb4': {'reg_n': 7, 'kb': 4, 'tile_oh': 7}, 'wino': {'wino': 1}}" [rounds]

Variant keys: ``default`` (schedule_conv2d_NCHWc), else ``oc_tile``, ``reg_n``, ``tile_oh``,
``ukw`` (unroll_kw, default the default's), ``ko`` (kernel_outer), ``kb`` (k_block), ``co`` (cols_outer: 0/1, default from the
target's registers) of ``schedule_nchwc_tile``.
"""
import ast
import os
import sys
import time

os.environ.setdefault("TVM_NUM_THREADS", "1")
import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import te, topi  # noqa: E402
from tvmpy.topi.nn import winograd as W  # noqa: E402
from tvmpy.topi.x86 import conv2d_nchwc as X  # noqa: E402
from tvmpy.topi.x86 import schedule_conv2d_winograd_nchwc  # noqa: E402

L = int(os.environ.get("BENCH_BLOCK") or tvm.target.Target("llvm").vector_lanes("float32"))


def build(ic, oc, hw, k, s, var):
    A = te.placeholder((1, ic // L, hw, hw, L), name="A")
    if var.get("wino"):
        kk = np.random.default_rng(0).uniform(-1, 1, (oc, ic, 3, 3)).astype("float32")
        K = te.placeholder(W.winograd_weight_transform_np(kk, 4, L).shape, name="K")
        out = topi.nn.relu(W.conv2d_winograd_nchwc(A, K, 1, 4))
        sch = schedule_conv2d_winograd_nchwc([out])
    else:
        K = te.placeholder((oc // L, ic // L, k, k, L, L), name="K")
        out = topi.nn.relu(topi.nn.conv2d_NCHWc(A, K, s, k // 2, 1))
        if var.get("default"):
            sch = X.schedule_conv2d_NCHWc([out])
        else:
            sch, conv, o, _ = X.find_nchwc([out])
            X.schedule_nchwc_tile(sch, conv, o, var.get("oc_tile", 2), var.get("reg_n", 8), True,
                                  unroll_kw=var.get("ukw", X.default_unroll_kw(conv, False)),
                                  tile_oh=var.get("tile_oh", 1), kernel_outer=var.get("ko", False),
                                  k_block=var.get("kb", 0), cols_outer=var.get("co"))
    f = tvm.build(sch, [A, K, out], "llvm")
    rng = np.random.default_rng(1)
    args = [tvm.nd.array(rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32"))
            for t in (A, K)]
    o = tvm.nd.empty([int(d) for d in out.shape])
    return (lambda: f(*args, o)), o


def main():
    ic, oc, hw, k, s = (int(v) for v in sys.argv[1].split(","))
    variants = ast.literal_eval(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    oh = (hw + 2 * (k // 2) - k) // s + 1
    flop = 2 * ic * oc * k * k * oh * oh
    with tvm.target.Target("llvm"):
        fns = {n: build(ic, oc, hw, k, s, v) for n, v in variants.items()}
    ref = None
    for n, (fn, o) in fns.items():
        fn()
        if not variants[n].get("wino"):
            if ref is None:
                ref = o.numpy()
            else:
                assert np.allclose(o.numpy(), ref, rtol=1e-3, atol=1e-3), n
    reps = {}
    for n, (fn, _) in fns.items():
        t0 = time.process_time()
        fn()
        reps[n] = max(1, int(0.03 / max(time.process_time() - t0, 1e-5)))
    ts = {n: [] for n in fns}
    for _ in range(rounds):
        for n, (fn, _) in fns.items():
            time.sleep(0.01)
            t0 = time.process_time()
            for _ in range(reps[n]):
                fn()
            ts[n].append((time.process_time() - t0) / reps[n])
    print(f"# {time.strftime('%H:%M')} UTC, load {os.getloadavg()[0]:.1f}, 1 thread, CPU time, "
          f"blocks of {L}, "
          f"median [min-max] of {rounds} rounds")
    base = None
    for n in fns:
        a = np.array(ts[n])
        med = float(np.median(a))
        base = base or med
        print(f"{(ic, oc, hw, k, s)} {n:12s} {med * 1e3:8.3f} ms [{a.min() * 1e3:.3f}-"
              f"{a.max() * 1e3:.3f}] {flop / med / 1e9:6.1f} GFLOP/s  x{med / base:.2f}")


if __name__ == "__main__":
    main()
