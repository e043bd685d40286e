"""``python -m tvmpy.demo``: build the packed GEMM schedule, check it, print GFLOP/s beside numpy.

The short tour of the compiler: tensor expression -> schedule -> loop IR -> LLVM -> run.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from . import build, lower
from . import nd as _nd
from .runtime import cpu
from .topi.x86.gemm import packed_gemm


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tvmpy.demo", description=__doc__)
    p.add_argument("--size", type=int, default=1024, help="M = N = K (multiple of 32)")
    p.add_argument("--target", default="llvm")
    p.add_argument("--show-ir", action="store_true", help="print the lowered loop IR")
    opts = p.parse_args(argv)
    n = opts.size
    s, args = packed_gemm(n, n, n)
    if opts.show_ir:
        print(lower(s, args, name="gemm"))
    t0 = time.perf_counter()
    f = build(s, args, target=opts.target, name="gemm")
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    A, B, C = _nd.array(a), _nd.array(b), _nd.empty((n, n))
    f(A, B, C)
    ref = a @ b
    err = float(np.abs(C.numpy() - ref).max() / np.abs(ref).max())
    flop = 2.0 * n**3
    t_tvm = f.time_evaluator(f.entry_name, cpu(0), number=5, repeat=5)(A, B, C).min
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(5):
            a @ b
        times.append((time.perf_counter() - t) / 5)
    t_np = min(times)
    print(f"GEMM {n}x{n}x{n} fp32, target {opts.target!r}: built in {build_s:.2f} s, "
          f"max relative error vs numpy {err:.1e}")
    print(f"  tvmpy: {flop / t_tvm / 1e9:8.1f} GFLOP/s")
    print(f"  numpy: {flop / t_np / 1e9:8.1f} GFLOP/s   (ratio tvmpy/numpy = {t_np / t_tvm:.2f})")
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core:
        print(f"  note: OPENBLAS_CORETYPE={core} pins numpy's OpenBLAS to those kernels; "
              "bench/gemm.py measures numpy without it")


if __name__ == "__main__":
    main()
