"""A/B of x86 dense schedule constants on one prepacked dense kernel, one set of buffers.

    TVMPY_CACHE=0 TVM_NUM_THREADS=1 python bench/dense_prefetch_ab.py 32x10000x512 \
        PREFETCH_BYTES=0 PREFETCH_BYTES=4096 [NAME=V,NAME2=V2 ...]

Each variant builds ``dense_prepacked`` + ``schedule_dense_pack`` (tvmpy/topi/x86/dense.py)
with the named module constants set ("base": none), and all variants run on the SAME input,
weight and output arrays, interleaved (rotating order), process CPU time (one thread): an A/B
of separately built relay modules also compares where their weights landed in memory (up to
1.5x on this session's KVM Xeon). Printed: ms per call (median [min, max]), the weight's GB/s,
GFLOP/s, and the ratio to the first variant (median of per-round ratios [min, max]).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import tvmpy as tvm
import tvmpy.topi.x86.dense as D
from tvmpy import te


def main() -> None:
    m, n, k = (int(x) for x in sys.argv[1].split("x"))
    nr = D.panel_width(n)
    npanel = -(-n // nr)
    a_t = te.placeholder((m, k), name="A")
    w_t = te.placeholder((npanel, k, nr), name="W")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    wp = np.zeros((npanel * nr, k), np.float32)
    wp[:n] = w
    wp = np.ascontiguousarray(wp.reshape(npanel, nr, k).transpose(0, 2, 1))
    ta, tw, to = tvm.nd.array(a), tvm.nd.array(wp), tvm.nd.empty((m, n))
    mods = {}
    for v in sys.argv[2:] or ["base"]:
        kv = dict(x.split("=") for x in v.split(",")) if v != "base" else {}
        old = {name: getattr(D, name) for name in kv}
        for name, x in kv.items():
            setattr(D, name, int(x))
        try:
            out = D.dense_prepacked(a_t, w_t, units=n)
            s = D.schedule_dense_pack([out])
            mods[v] = tvm.build(s, [a_t, w_t, out], target="llvm")
        finally:
            for name, x in old.items():
                setattr(D, name, x)
        mods[v](ta, tw, to)
        np.testing.assert_allclose(to.numpy(), a @ w.T, rtol=1e-4, atol=1e-3)
    names = list(mods)
    ts: dict[str, list[float]] = {v: [] for v in names}
    number = max(1, int(0.02 / max(1e-6, 1e-9 * 2 * m * n * k / 30)))
    for r in range(int(os.environ.get("R", "11"))):
        for v in names[r % len(names):] + names[:r % len(names)]:
            time.sleep(0.05)
            t0 = time.process_time()
            for _ in range(number):
                mods[v](ta, tw, to)
            ts[v].append((time.process_time() - t0) / number)
    print(f"# load {os.getloadavg()[0]:.2f}")
    for v in names:
        t = np.array(ts[v])
        rat = t / np.array(ts[names[0]])
        med = float(np.median(t))
        print(f"{sys.argv[1]:>14} {v:>32}: {med * 1e3:.3f} ms [{t.min() * 1e3:.3f}, "
              f"{t.max() * 1e3:.3f}] weight {4e-9 * n * k / med:5.1f} GB/s "
              f"{2e-9 * m * n * k / med:6.1f} GFLOP/s; / {names[0]} {np.median(rat):.3f} "
              f"[{rat.min():.3f}, {rat.max():.3f}]")


if __name__ == "__main__":
    main()
