"""fp32 GEMM (1024^3, 2048^3): tvmpy's hand-written packed schedule vs numpy (OpenBLAS), same run.

    python bench/gemm.py [--sizes 1024 2048] [--target "llvm -mcpu=..."]

Prints GFLOP/s of both and the ratio, plus the build (lower + codegen) time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_time, blas_description, ensure_native_blas, machine_description  # noqa: E402

ensure_native_blas()

import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy.topi.x86.gemm import packed_gemm  # noqa: E402

PAUSE_S = 0.3


def run(size: int, target: str, repeat: int) -> dict:
    M = N = K = size
    t0 = time.perf_counter()
    s, args = packed_gemm(M, N, K)
    f = tvm.build(s, args, target=target, name="gemm")
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    A, B, C = tvm.nd.array(a), tvm.nd.array(b), tvm.nd.empty((M, N))
    f(A, B, C)
    ref = a @ b
    err = float(np.abs(C.numpy() - ref).max() / np.abs(ref).max())
    flop = 2.0 * M * N * K
    # interleave the two measurements so that load changes hit both alike; pause between them:
    # OpenBLAS's threads busy-wait ~0.1 s after a call (and libgomp's briefly), which would
    # steal the other side's second core
    t_tvm, t_np = [], []
    ev = f.time_evaluator(f.entry_name, tvm.cpu(0), number=3, repeat=1)
    for _ in range(repeat):
        time.sleep(PAUSE_S)
        t_tvm.append(ev(A, B, C).mean)
        time.sleep(PAUSE_S)
        t_np.append(best_time(lambda: a @ b, repeat=1, number=3))
    g_tvm, g_np = flop / min(t_tvm) / 1e9, flop / min(t_np) / 1e9
    return {"size": size, "build_s": build_s, "rel_err": err, "tvmpy": g_tvm, "numpy": g_np}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--target", default="llvm")
    p.add_argument("--repeat", type=int, default=10)
    opts = p.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')} {machine_description()}; numpy: {blas_description()}")
    print(f"{'size':>6} {'build s':>8} {'tvmpy GFLOP/s':>14} {'numpy GFLOP/s':>14} {'ratio':>6} {'rel err':>8}")
    for size in opts.sizes:
        r = run(size, opts.target, opts.repeat)
        print(f"{r['size']:>6} {r['build_s']:>8.2f} {r['tvmpy']:>14.1f} {r['numpy']:>14.1f} "
              f"{r['tvmpy'] / r['numpy']:>6.2f} {r['rel_err']:>8.1e}")


if __name__ == "__main__":
    main()
