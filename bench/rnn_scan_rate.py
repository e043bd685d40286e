"""Is ``nn.rnn_scan``'s recurrence at the machine's bound? Its multiply-add rate per step over
hidden sizes whose recurrent weight fits L1, L2 or not, beside the same step's GEMV
(``h @ R^T``, batch 1) through numpy's BLAS, one thread, same run.

    TVM_NUM_THREADS=1 PYTHONPATH=. python bench/rnn_scan_rate.py [--cell LSTM] [--hidden 64,128,256]
        [--batch 1] [--steps 32] [--layout packed|plain] [--threads 1] [--cpu-time]

At batch 1 every step reads the whole recurrent weight once (``H x G*Hp`` floats) for one FMA
per element, so past L1 the rate is the L2-to-L1 read bandwidth (bytes/4 MAC per second)
whatever the layout: a rate flat over hidden sizes from L2-resident to L2-sized weights is
that bound; numpy's per-step GEMV shows what a BLAS reaches on the same product (without the
gates). Printed per size: the kernel's time per step, its GMAC/s, numpy's GEMV per step and
GMAC/s, and the weight's size. ``--layout packed`` (default) gives the kernel ``R^T`` packed
by its blocks, as a built model does (``topi.rnn.pack_rt_np``); ``plain`` the gate-major
(H, G*Hp). ``--threads 2`` runs the kernel on a team of two (wall clock; numpy stays on one
thread): a step's jobs then split between the cores, each reading its share of ``R^T`` from
its own L2, with one parallel launch a step (on a loaded machine run it under ``chrt -f 1``).
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


def _kernel(cell: str, hidden: int, batch: int, steps: int, packed: bool) -> tuple:
    import tvmpy as tvm
    from tvmpy import te
    from tvmpy.relay.op.rnn import padded_hidden
    from tvmpy.topi.rnn import GATES, pack_rt_np, packed_block, rnn_scan
    from tvmpy.topi.x86.injective import vector_lanes

    G, hp = GATES[cell], padded_hidden(hidden)
    lanes = vector_lanes("float32")
    ub = packed_block(cell, hp, lanes, batch)
    packed = packed and ub < hp  # one block: the packed layout is the plain one
    target = tvm.target.Target("llvm")
    with target:
        xw = te.placeholder((steps, batch, G * hp), name="xw")
        rt = te.placeholder((hp // ub, hidden, G * ub) if packed else (hidden, G * hp), name="rt")
        h0 = te.placeholder((batch, hidden), name="h0")
        aux = te.placeholder((batch, hidden) if cell == "LSTM" else (hp,), name="aux")
        outs = rnn_scan(xw, rt, h0, aux, cell, hidden, lanes=lanes)
        f = tvm.build(te.create_schedule([o.op for o in outs]), [xw, rt, h0, aux, *outs],
                      target=target)
    rng = np.random.default_rng(0)
    dev = tvm.cpu()
    vals = [(0.1 * rng.standard_normal([int(d) for d in t.shape])).astype("float32")
            for t in (xw, rt, h0, aux)]
    if packed:  # the same weights as the plain layout's, in the kernel's block order
        vals[1] = pack_rt_np((0.1 * rng.standard_normal((hidden, G * hp))).astype("float32"),
                             cell, ub)
    args = [tvm.nd.array(v, dev) for v in vals]
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
    p.add_argument("--layout", default="packed", choices=("packed", "plain"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cpu-time", action="store_true")
    a = p.parse_args()
    threads = bench_threads(a.threads)
    numpy_blas_threads(1)
    clock = bench_clock(a.cpu_time, threads)
    print(f"# {machine_description()}; {threads} thread(s) (numpy 1); {a.cell}, batch {a.batch}, "
          f"{a.steps} steps, R^T {a.layout}; {'CPU' if a.cpu_time else 'wall'} time; "
          f"load {os.getloadavg()[0]:.1f}")
    print("| hidden | weight KiB | rnn_scan us/step | GMAC/s | numpy GEMV us/step | GMAC/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for H in (int(x) for x in a.hidden.split(",")):
        run, cols = _kernel(a.cell, H, a.batch, a.steps, a.layout == "packed")
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
