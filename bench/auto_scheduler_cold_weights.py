"""Per task of a model (1 thread): the default schedule and every analytic initial state of
the auto-scheduler, each timed with its weights warm (one weight buffer reused, as a plain
``time_evaluator`` measures) and cold (the weight inputs rotated through copies, as
``LocalRunner(cold_weights=True)`` measures: ``local_runner.cold_span``), interleaved rounds,
the thread's CPU time per call (median; robust to other processes on a shared machine).

    env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=. TVM_NUM_THREADS=1 \\
        python bench/auto_scheduler_cold_weights.py --model dcgan [--rounds 5] [--only conv]

States marked ``P`` prefetch (``prefetch$N``, N > 0); ``S``: the register tile stationary on
the largest operand (``analytic_init.TileChoice.stationary``). Models: those of
bench/auto_scheduler_models.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="dcgan")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="", help="only tasks whose name holds this")
    args = ap.parse_args()
    from auto_scheduler_models import MODELS

    import tvmpy as tvm
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.analytic_init import _variants, analytic_annotations
    from tvmpy.auto_scheduler.relay_integration import default_schedule_of
    from tvmpy.auto_scheduler.sketch_policy import generate_sketches
    from tvmpy.autotvm.measure.local_runner import cold_span
    from tvmpy.relay.testing import compare

    model, feeds = MODELS[args.model]()
    mod, params = compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    rng = np.random.default_rng(0)
    for task in tasks:
        if args.only not in task.desc:
            continue
        progs = {"default": default_schedule_of(task)}
        hp = task.hardware_params
        for j, sk in enumerate(generate_sketches(task)):
            for choice in _variants(hp):
                for st in analytic_annotations(sk, hp, [choice]):
                    tag = (f"sketch{j} acc{choice.accumulators} r{choice.rank} v{choice.vectors}"
                           f"{' l1' if choice.l1_block else ''}"
                           f"{' flip' if choice.inline_branchy else ''}"
                           f"{' S' if choice.stationary else ''}"
                           f"{' P' if choice.prefetch else ''}")
                    progs[tag] = task.compute_dag.apply_steps_from_state(st)
        funcs, data, sets, copies, wbytes = {}, None, [], 1, 0
        for k, (sch, targs) in progs.items():
            funcs[k] = tvm.build(sch, targs, "llvm")
            if data is None:
                data = [tvm.nd.array(rng.uniform(-1, 1, [int(d) for d in t.shape])
                                     .astype(t.dtype)) for t in targs]
                wbytes = sum(data[i].numpy().nbytes for i in task.weight_inputs)
                copies = cold_span(wbytes, task.model_weight_bytes)
                sets = [data] + [[tvm.nd.array(a.numpy()) if i in task.weight_inputs else a
                                  for i, a in enumerate(data)] for _ in range(copies - 1)]
        res: dict[str, dict[str, list[float]]] = {k: {"warm": [], "cold": []} for k in funcs}
        n = max(2 * copies, 16)
        for _ in range(args.rounds):
            for k, f in funcs.items():
                for mode in ("warm", "cold"):
                    ts = []
                    for c in range(n):
                        d = sets[c % copies] if mode == "cold" else data
                        t0 = time.thread_time()
                        f(*d)
                        ts.append(time.thread_time() - t0)
                    res[k][mode].append(float(np.median(ts[copies:])))
        print(f"{task.desc}: weights {wbytes / 2**20:.2f} MiB, {copies} copies "
              f"(model weights {task.model_weight_bytes / 2**20:.1f} MiB); ms per call")
        for k in funcs:
            w, c = np.median(res[k]["warm"]) * 1e3, np.median(res[k]["cold"]) * 1e3
            print(f"   {k:40s} warm {w:.4f}  cold {c:.4f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
