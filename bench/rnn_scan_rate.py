"""Is ``nn.rnn_scan``'s recurrence at the machine's bound? Its multiply-add rate per step over
hidden sizes whose recurrent weight fits L1, L2 or not, beside the same step's GEMV
(``h @ R^T``, batch 1) through numpy's BLAS, one thread, same run.

    TVM_NUM_THREADS=1 PYTHONPATH=. python bench/rnn_scan_rate.py [--cell LSTM] [--hidden 64,128,256]
        [--batch 1] [--steps 32] [--cpu-time]

At batch 1 every step reads the whole recurrent weight once (``H x G*Hp`` floats) for one FMA
per element, so past L1 the rate is the L2-to-L1 read bandwidth (bytes/4 MAC per second)
whatever the layout: a rate flat over hidden sizes from L2-resident to L2-sized weights is
that bound; numpy's per-step GEMV shows what a BLAS reaches on the same product (without the
gates). Printed per size: the kernel's time per step, its GMAC/s, numpy's GEMV per step and
GMAC/s, and the weight's size.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    bench_threads,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    numpy_blas_threads,
)

ensure_native_blas()

import numpy as np  # noqa: E402


def _kernel(cell: str, hidden: int, batch: int, steps: int) -> tuple:
    import tvmpy as tvm
    from tvmpy import te
    from tvmpy.relay.op.rnn import padded_hidden
    from tvmpy.topi.rnn import GATES, rnn_scan
    from tvmpy.topi.x86.injective import vector_lanes

    G, hp = GATES[cell], padded_hidden(hidden)
    target = tvm.target.Target("llvm")
    with target:
        xw = te.placeholder((steps, batch, G * hp), name="xw")
        rt = te.placeholder((hidden, G * hp), name="rt")
        h0 = te.placeholder((batch, hidden), name="h0")
        aux = te.placeholder((batch, hidden) if cell == "LSTM" else (hp,), name="aux")
        outs = rnn_scan(xw, rt, h0, aux, cell, hidden, lanes=vector_lanes("float32"))
        f = tvm.build(te.create_schedule([o.op for o in outs]), [xw, rt, h0, aux, *outs],
                      target=target)
    rng = np.random.default_rng(0)
    dev = tvm.cpu()
    args = [tvm.nd.array((0.1 * rng.standard_normal([int(d) for d in t.shape])).astype(
        "float32"), dev) for t in (xw, rt, h0, aux)]
    args += [tvm.nd.empty([int(d) for d in o.shape], "float32", dev) for o in outs]
    fn = f[f.entry_name]
    return (lambda: fn(*args)), G * hp


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cell", default="LSTM", choices=("LSTM", "GRU"))
    p.add_argument("--hidden", default="64,128,256,384")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cpu-time", action="store_true")
    a = p.parse_args()
    threads = bench_threads(1)
    numpy_blas_threads(1)
    clock = bench_clock(a.cpu_time, threads)
    print(f"# {machine_description()}; 1 thread; {a.cell}, batch {a.batch}, {a.steps} steps; "
          f"{'CPU' if a.cpu_time else 'wall'} time; load {os.getloadavg()[0]:.1f}")
    print("| hidden | weight KiB | rnn_scan us/step | GMAC/s | numpy GEMV us/step | GMAC/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for H in (int(x) for x in a.hidden.split(",")):
        run, cols = _kernel(a.cell, H, a.batch, a.steps)
        rng = np.random.default_rng(1)
        r = rng.standard_normal((H, cols)).astype("float32")
        h = rng.standard_normal((a.batch, H)).astype("float32")
        out = np.empty((a.batch, cols), "float32")

        def gemv(r: np.ndarray = r, h: np.ndarray = h, out: np.ndarray = out) -> None:
            for _ in range(a.steps):
                np.matmul(h, r, out=out)

        s = interleaved_samples({"scan": run, "numpy": gemv}, a.rounds, pause=0.05,
                                target_s=0.02, clock=clock)
        macs = a.batch * H * cols
        ts, tn = min(s["scan"]) / a.steps, min(s["numpy"]) / a.steps
        print(f"| {H} | {H * cols * 4 // 1024} | {ts * 1e6:.2f} | {macs / ts / 1e9:.1f} | "
              f"{tn * 1e6:.2f} | {macs / tn / 1e9:.1f} |", flush=True)


if __name__ == "__main__":
    main()
