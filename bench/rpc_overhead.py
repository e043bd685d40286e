"""What an RPC session costs on the loopback: round trip, array transfer, a fresh session with
upload + runtime.measure (one tuning trial's RPC part), beside local time_evaluator.

    PYTHONPATH=. python bench/rpc_overhead.py [--device native|qemu-aarch64] [--runs 30]

Medians over ``--runs``; the kernel is B = A * 2 + 1 over 1024 floats (built for the device's
triple), timed number=10, repeat=3 in both paths.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

import tvmpy as tvm
from tvmpy import rpc, te

TRIPLES = {"native": "llvm", "qemu-aarch64": "llvm -mtriple=aarch64-linux-gnu -mattr=+neon"}


def _ms(f, runs: int) -> float:
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs) * 1e3


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=sorted(TRIPLES), default="native")
    p.add_argument("--runs", type=int, default=30)
    args = p.parse_args()
    folder = tempfile.mkdtemp(prefix="rpc_bench_")
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    lib = f"{folder}/affine.so"
    tvm.build(te.create_schedule(B.op), [A, B], TRIPLES[args.device], name="affine") \
        .export_library(lib)
    spec = [[[1024], "float32"], [[1024], "float32"]]
    t0 = time.perf_counter()
    with rpc.Server(port=0, device=args.device, silent=True) as srv:
        print(f"server start ({args.device}): {time.perf_counter() - t0:.2f} s")
        with rpc.connect("127.0.0.1", srv.port, token=srv.token) as remote:
            dev = remote.cpu(0)
            x = np.random.default_rng(0).random(1 << 18, dtype=np.float32)  # 1 MiB
            print(f"ping round trip: {_ms(remote.ping, args.runs * 5):.3f} ms")
            print(f"nd.array + .numpy() of 1 MiB: "
                  f"{_ms(lambda: tvm.nd.array(x, dev).numpy(), args.runs):.3f} ms")
            remote.upload(lib)
            measure = remote.get_function("runtime.measure")
            print(f"runtime.measure call, module loaded: "
                  f"{_ms(lambda: measure('affine.so', 'affine', spec, 10, 3), args.runs):.3f} ms")

        def trial() -> None:
            with rpc.connect("127.0.0.1", srv.port, token=srv.token) as s:
                s.upload(lib)
                s.get_function("runtime.measure")("affine.so", "affine", spec, 10, 3)

        print(f"fresh session + upload + measure + close: {_ms(trial, args.runs):.2f} ms")
    if args.device == "native":
        mod = tvm.runtime.load_module(lib)
        a = tvm.nd.array(np.ones(1024, "float32"))
        b = tvm.nd.empty((1024,), "float32")
        print(f"local time_evaluator (same timing, no RPC): "
              f"{_ms(lambda: mod.time_evaluator('affine', tvm.cpu(0), 10, 3)(a, b), args.runs):.3f} ms")


if __name__ == "__main__":
    main()
