"""Host cost of one graph-executor run on CUDA, plain launches vs a CUDA graph replay, without a
GPU: the real ctypes binding (runtime/cuda_module.py CtypesDriver) over the C stand-in for
libcuda.so.1 (tests/runtime/fake_libcuda.c, whose "kernel" adds 1-element vectors on the CPU,
so a call costs the binding's path plus a few ns).

    PYTHONPATH=. python bench/cuda_graph_host_cost.py [--nodes 20,60,200] [--rounds 15]
        [--cpu-time]

A chain of ``nodes`` vadd nodes (y_k = y_{k-1} + x), one executor with plain launches and one
with CUDA graphs, rounds interleaved (bench/common.py); each run's result checked against numpy
first. On a GPU the replay's host cost is one cuGraphLaunch (~µs) where plain launches cost the
per-node Python (~2 µs per node with bound launches, measured here) plus the driver's
cuLaunchKernel (~2-4 µs per launch on an H100/H200, not included here: the stand-in's launch is
a C function call).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import te  # noqa: E402
from tvmpy.relay.backend.graph_plan_memory import plan_memory  # noqa: E402
from tvmpy.runtime import cuda_module  # noqa: E402
from tvmpy.runtime.graph_executor import GraphExecutor  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def chain(nodes: int) -> str:
    ns, row = [{"op": "null", "name": "x", "inputs": []}], [0, 1]
    prev = 0
    for k in range(nodes):
        ns.append({"op": "tvm_op", "name": f"add{k}", "inputs": [[prev, 0, 0], [0, 0, 0]],
                   "attrs": {"func_name": "vadd", "num_inputs": "2", "num_outputs": "1",
                             "flatten_data": "0"}})
        prev = len(ns) - 1
        row.append(row[-1] + 1)
    g = {"nodes": ns, "arg_nodes": [0], "heads": [[prev, 0, 0]], "node_row_ptr": row,
         "attrs": {"dltype": ["list_str", ["float32"] * (nodes + 1)],
                   "shape": ["list_shape", [[1]] * (nodes + 1)]}}
    plan_memory(g)
    return json.dumps(g)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", default="20,60,200")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--cpu-time", action="store_true")
    p.add_argument("--json", default="")
    args = p.parse_args()
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("no C compiler for the libcuda stand-in")
    so = os.path.join(tempfile.mkdtemp(), "libcuda_fake.so")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", so,
                    os.path.join(HERE, "..", "tests", "runtime", "fake_libcuda.c")], check=True)
    cuda_module.set_driver(cuda_module.CtypesDriver(ctypes.CDLL(so)))
    n = te.var("n")
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=128)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    lib = tvm.build(s, [A, B, C], target="cuda", name="vadd")
    clock = common.bench_clock(args.cpu_time, 1)  # (one thread: the executor's calls)
    print(f"host: {platform.processor() or platform.machine()}, load {os.getloadavg()}, "
          f"clock {'CPU' if args.cpu_time else 'wall'} time", flush=True)
    print("| nodes | plain run µs (q1-q3) | graph replay µs (q1-q3) | per node plain µs |")
    print("|---|---|---|---|")
    out = []
    for nodes in (int(x) for x in args.nodes.split(",")):
        graph = chain(nodes)
        exs = {"plain": GraphExecutor(graph, lib, tvm.cuda(0)),
               "graph": GraphExecutor(graph, lib, tvm.cuda(0), use_cuda_graph=True)}
        x = np.array([0.75], "float32")
        for ex in exs.values():
            ex.set_input(x=x)
            for _ in range(2):  # (graph: capture, then a replay)
                ex.run()
                assert ex.get_output(0).numpy()[0] == np.float32(0.75 * (nodes + 1))
        assert exs["graph"].cuda_graph_info()["graphs"] == [nodes]
        samples = common.interleaved_samples({k: e.run for k, e in exs.items()}, args.rounds,
                                             pause=0.02, clock=clock)
        q = {k: [v * 1e6 for v in common.quartiles(xs)] for k, xs in samples.items()}
        print(f"| {nodes} | {q['plain'][1]:.1f} ({q['plain'][0]:.1f}-{q['plain'][2]:.1f}) | "
              f"{q['graph'][1]:.1f} ({q['graph'][0]:.1f}-{q['graph'][2]:.1f}) | "
              f"{q['plain'][1] / nodes:.2f} |", flush=True)
        out.append({"nodes": nodes, "plain_us": q["plain"], "graph_us": q["graph"]})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
