"""Per-node overhead of the graph executor's ``run()``.

A chain of N nodes, each a 1-element float32 add built with tvm.build, so that the kernels do
(almost) nothing: ``run()`` time / N is the cost of dispatching one node: by the plan's native
runner (runtime/graph_executor/native_run.py: one foreign call per run, built here on the
plan's second run; ``native build ms`` that run, with the table walker's one-time JIT compile
for the first size) and by the Python loop (``native_after = None``).
Compared in the same run with (a) the bare Python loop over the executor's prepared ctypes calls
and (b) one ctypes call repeated, the floor of any Python dispatch.

    python bench/graph_executor_overhead.py [--nodes 200 1000]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import tvmpy as tvm
from tvmpy import te
from tvmpy.contrib import graph_executor
from tvmpy.relay.backend.graph_plan_memory import plan_memory


def chain_graph(n: int) -> str:
    nodes = [{"op": "null", "name": "x", "inputs": []}]
    for k in range(n):
        nodes.append({"op": "tvm_op", "name": f"add{k}", "inputs": [[k, 0, 0], [0, 0, 0]],
                      "attrs": {"func_name": "add", "num_inputs": "2", "num_outputs": "1"}})
    g = {"nodes": nodes, "arg_nodes": [0], "heads": [[n, 0, 0]],
         "node_row_ptr": list(range(n + 2)),
         "attrs": {"dltype": ["list_str", ["float32"] * (n + 1)],
                   "shape": ["list_shape", [[1]] * (n + 1)]}}
    plan_memory(g)
    return json.dumps(g)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[200, 1000])
    args = ap.parse_args()
    a = te.placeholder((1,), name="A")
    b = te.placeholder((1,), name="B")
    c = te.compute((1,), lambda i: a[i] + b[i], name="C")
    lib = tvm.build([tvm.lower(te.create_schedule(c.op), [a, b, c], name="add")])
    print(f"{'nodes':>6} {'load ms':>8} {'native build ms':>15} {'run us/node':>12} "
          f"{'loop run us/node':>16} {'bare loop us/node':>18} {'one ctypes call us':>19}")
    for n in args.nodes:
        t0 = time.perf_counter()
        m = graph_executor.create(chain_graph(n), lib)
        load = time.perf_counter() - t0
        m.module.native_after = 1
        m.set_input("x", np.ones(1, "float32"))
        m.run()
        assert m.get_output(0).numpy()[0] == n + 1
        t0 = time.perf_counter()
        m.run()  # the second run: the native runner is built
        build = time.perf_counter() - t0
        assert m.module._active.native and m.get_output(0).numpy()[0] == n + 1
        run = m.benchmark(number=100, repeat=7).median
        m.module.native_after = None
        m.module._active.native = None
        loop_run = m.benchmark(number=100, repeat=7).median
        calls = m.module._calls
        t0 = time.perf_counter()
        for _ in range(100):
            for f, fargs in calls:
                f(*fargs)
        bare = (time.perf_counter() - t0) / 100
        f, fargs = calls[0]
        t0 = time.perf_counter()
        for _ in range(100 * n):
            f(*fargs)
        one = (time.perf_counter() - t0) / (100 * n)
        print(f"{n:>6} {load * 1e3:>8.1f} {build * 1e3:>15.1f} {run / n * 1e6:>12.3f} "
              f"{loop_run / n * 1e6:>16.3f} {bare / n * 1e6:>18.3f} {one * 1e6:>19.3f}")


if __name__ == "__main__":
    main()
