"""Two exported zoo libraries (``bench/zoo_lib_ab.py export``) of the same model, node by node:
each graph node's kernel timed in the model (5 calls, median), the two sides alternating
within every round (order swapped each round), 1 thread, the thread's CPU time; per kernel
name the sum over its nodes (median of the rounds), sorted by the largest difference.

    python bench/zoo_lib_nodes.py /tmp/ab/base,/tmp/ab/new resnext_dilated [rounds] [top]

The graphs must have the same nodes in the same order (same relay passes on both sides).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import bench_threads, ensure_native_blas  # noqa: E402
from zoo_lib_ab import _model, loaded_graph  # noqa: E402

ensure_native_blas()


def main() -> None:
    bench_threads(1)
    dirs = sys.argv[1].split(",")
    name = sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 25
    if len(dirs) != 2:
        raise SystemExit("give two library folders, A,B")
    feeds = _model(name, relay=False)[1]
    gms = {d: loaded_graph(d, name, feeds) for d in dirs}
    times: dict[str, list[list[float]]] = {d: [[] for _ in gms[d]._calls] for d in dirs}  # noqa: SLF001
    for r in range(rounds):
        for d in (dirs if r % 2 == 0 else dirs[::-1]):
            calls = gms[d]._calls  # noqa: SLF001
            per: list[list[float]] = [[] for _ in calls]
            for _ in range(5):
                for j, (cf, args) in enumerate(calls):
                    t0 = time.thread_time()
                    cf(*args)
                    per[j].append(time.thread_time() - t0)
            for j, ts in enumerate(per):
                times[d][j].append(statistics.median(ts))
    a, b = dirs
    names = [n.func_name for n in gms[a]._call_nodes]  # noqa: SLF001
    if names != [n.func_name for n in gms[b]._call_nodes]:  # noqa: SLF001
        raise SystemExit("the two graphs have different nodes")
    agg: dict[str, list[float]] = {}
    for j, n in enumerate(names):
        x = agg.setdefault(n, [0, 0.0, 0.0])
        x[0] += 1
        x[1] += statistics.median(times[a][j])
        x[2] += statistics.median(times[b][j])
    ta, tb = sum(v[1] for v in agg.values()), sum(v[2] for v in agg.values())
    print(f"{name}: {a} {ta * 1e3:.2f} ms, {b} {tb * 1e3:.2f} ms ({tb / ta:.3f})")
    for k, (c, x, y) in sorted(agg.items(), key=lambda kv: -abs(kv[1][2] - kv[1][1]))[:top]:
        print(f"  {k[:80]:80s} x{int(c):2d} {x * 1e3:8.3f} {y * 1e3:8.3f} {y / x:6.3f}")


if __name__ == "__main__":
    main()
