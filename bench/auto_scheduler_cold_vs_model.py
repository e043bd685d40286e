"""Is the cold-weight runner's time of a task what the model's kernel takes? Per dense-like
task of a model (1 thread, the default schedules, untuned): the kernel timed as
``LocalRunner(cold_weights=True)`` times it (weight inputs rotated through ``cold_span``
copies), warm (one weight buffer), and the same kernel inside the whole model (the graph
executor's nodes run in order, each timed: ``bench/zoo_profile.py``'s per-node loop), in
interleaved rounds, the thread's CPU time, medians.

    env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=. TVM_NUM_THREADS=1 \\
        python bench/auto_scheduler_cold_vs_model.py --model lstm_lm [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="lstm_lm")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", default="dense")
    args = ap.parse_args()
    from auto_scheduler_models import MODELS
    from common import machine_description

    import tvmpy as tvm
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.relay_integration import default_schedule_of
    from tvmpy.autotvm.measure.local_runner import cold_span
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.testing import compare

    model, feeds = MODELS[args.model]()
    mod, params = compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    lib, _ = compare.build(mod, params)
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu())).module
    for k, v in feeds.items():
        gm.set_input(k, v)
    gm.run()
    calls, nodes = gm._calls, gm._call_nodes  # noqa: SLF001
    rng = np.random.default_rng(0)
    clock = time.thread_time
    print(f"# {machine_description()}; 1 thread; CPU time; load {os.getloadavg()[0]:.1f}")
    runs: dict[str, tuple] = {}
    for task, w in zip(tasks, weights):
        if args.only not in task.desc:
            continue
        sch, targs = default_schedule_of(task)
        f = tvm.build(sch, targs, "llvm")
        data = [tvm.nd.array(rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype))
                for t in targs]
        wbytes = sum(data[i].numpy().nbytes for i in task.weight_inputs)
        copies = cold_span(wbytes, task.model_weight_bytes)
        sets = [data] + [[tvm.nd.array(a.numpy()) if i in task.weight_inputs else a
                          for i, a in enumerate(data)] for _ in range(copies - 1)]
        runs[task.desc] = (f, data, sets, copies, wbytes, task.model_weight_bytes, w)
    res: dict[str, dict[str, list[float]]] = {k: {"warm": [], "cold": []} for k in runs}
    node_t: list[list[float]] = [[] for _ in calls]
    for _ in range(args.rounds):
        for k, (f, data, sets, copies, *_r) in runs.items():
            for mode in ("warm", "cold"):
                ts = []
                for c in range(max(2 * copies, 16)):
                    d = sets[c % copies] if mode == "cold" else data
                    t0 = clock()
                    f(*d)
                    ts.append(clock() - t0)
                res[k][mode].append(float(np.median(ts[copies:])))
        per: list[list[float]] = [[] for _ in calls]
        for _ in range(10):
            for j, (cf, a) in enumerate(calls):
                t0 = clock()
                cf(*a)
                per[j].append(clock() - t0)
        for j in range(len(calls)):
            node_t[j].append(statistics.median(per[j]))
    print("task | weights MiB | copies | runs | warm ms | cold (runner) ms")
    for k, (_f, _d, _s, copies, wbytes, mbytes, w) in runs.items():
        print(f"{k} | {wbytes / 2**20:.2f} (model {mbytes / 2**20:.1f}) | {copies} | {w} | "
              f"{statistics.median(res[k]['warm']) * 1e3:.4f} | "
              f"{statistics.median(res[k]['cold']) * 1e3:.4f}")
    print("model node | ms (in the model)")
    for node, ts in zip(nodes, node_t):
        if args.only in node.func_name:
            print(f"{node.func_name} | {statistics.median(ts) * 1e3:.4f}")


if __name__ == "__main__":
    main()
