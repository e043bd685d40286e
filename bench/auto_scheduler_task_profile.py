"""Per subgraph: the best auto-scheduled kernel of a log against the untuned default kernel of
the same fused subgraph (same layout: both are the te compute relay lowers at opt_level 3),
timed in the same process, interleaved rounds.

    PYTHONPATH=. python bench/auto_scheduler_task_profile.py --model cnn --log as_e2e.json \
        [--tune-minutes 3] [--dump-ir DIR]

Models: ``cnn`` (bench/auto_scheduler_e2e.py's small CNN), ``effnet`` (an EfficientNet-style
block: 1x1 expand + SiLU, depthwise 3x3 + SiLU, squeeze-and-excitation, 1x1 project +
residual), ``tconv`` (a transposed convolution + relu, as in a DCGAN generator).
``effnet_blocks`` (bench/auto_scheduler_models.py's EfficientNet-style stack, through ONNX).
``--tune-minutes``: tune the model's tasks with the task scheduler first (the log is resumed).
Prints per task: GFLOPS of the default and of the best record (the log's fastest, even where
``ApplyHistoryBest``'s ``min_speedup`` keeps the default), and their ratio. ``--analytic``: also
every analytic initial state of the task (what the search measures first), the best of them
against the default. ``--short``: each kernel timed as the minimum over many short runs
(2 calls x ``--rounds``, interleaved): robust where other processes share the cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def model(name: str):
    """``(mod, params)`` of a model by name (relay, NCHW float32, batch 1)."""
    import tvmpy as tvm
    from tvmpy import relay

    rng = np.random.default_rng(0)

    def w(*shape):
        return tvm.nd.array((rng.standard_normal(shape) * 0.2).astype(np.float32))

    if name == "effnet_blocks":
        from auto_scheduler_models import MODELS

        from tvmpy.relay.testing import compare

        onnx_model, feeds = MODELS[name]()
        return compare.import_onnx(onnx_model, {k: v.shape for k, v in feeds.items()})
    if name == "cnn":
        from auto_scheduler_e2e import make_model

        from tvmpy.relay.testing import compare

        return compare.import_onnx(make_model(), {"x": (1, 16, 28, 28)})
    params = {}

    def var(n, *shape):
        params[n] = w(*shape)
        return relay.var(n, shape=shape)

    if name == "effnet":
        c, e, hw, se = 24, 96, 28, 6
        x = relay.var("x", shape=(1, c, hw, hw))
        silu = lambda t: relay.multiply(t, relay.sigmoid(t))  # noqa: E731
        y = silu(relay.nn.bias_add(relay.nn.conv2d(x, var("w1", e, c, 1, 1), kernel_size=(1, 1)),
                                   var("b1", e)))
        y = silu(relay.nn.bias_add(relay.nn.conv2d(y, var("wd", e, 1, 3, 3), kernel_size=(3, 3),
                                                   padding=(1, 1), groups=e), var("bd", e)))
        s = relay.nn.global_avg_pool2d(y)
        s = silu(relay.nn.bias_add(relay.nn.conv2d(s, var("ws1", se, e, 1, 1), kernel_size=(1, 1)),
                                   var("bs1", se)))
        s = relay.sigmoid(relay.nn.bias_add(relay.nn.conv2d(s, var("ws2", e, se, 1, 1),
                                                            kernel_size=(1, 1)), var("bs2", e)))
        y = relay.multiply(y, s)
        y = relay.nn.bias_add(relay.nn.conv2d(y, var("w2", c, e, 1, 1), kernel_size=(1, 1)),
                              var("b2", c))
        out = relay.add(y, x)
    elif name == "tconv":
        x = relay.var("x", shape=(1, 64, 14, 14))
        y = relay.nn.conv2d_transpose(x, var("wt", 64, 32, 4, 4), channels=32, kernel_size=(4, 4),
                                      strides=(2, 2), padding=(1, 1))
        out = relay.nn.relu(relay.nn.bias_add(y, var("bt", 32)))
    else:
        raise SystemExit(f"unknown model {name!r} (cnn, effnet, tconv)")
    func = relay.Function(relay.analysis.free_vars(out), out)
    return tvm.IRModule.from_expr(func), params


def tune(mod, params, log: str, minutes: float) -> None:
    from tvmpy import auto_scheduler

    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    deadline = time.time() + minutes * 60

    class _Up(Exception):
        pass

    class Clock(auto_scheduler.task_scheduler.PrintTableInfo):
        def post_round(self, s, task_id):
            super().post_round(s, task_id)
            if time.time() > deadline:
                raise _Up

    sched = auto_scheduler.TaskScheduler(tasks, weights, load_log_file=log if os.path.exists(log)
                                         else None, callbacks=[Clock()])
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=100000, num_measures_per_round=16, verbose=0,
        builder=auto_scheduler.LocalBuilder(timeout=60, n_parallel=2),
        runner=auto_scheduler.LocalRunner(number=5, repeat=3, min_repeat_ms=20),
        measure_callbacks=[auto_scheduler.RecordToFile(log)])
    try:
        sched.tune(opts)
    except _Up:
        pass


def profile(mod, params, log: str | None, rounds: int, dump_ir: str | None,
            analytic: bool = False, short: bool = False, top: int = 0) -> list[dict]:
    import tvmpy as tvm
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.workload_registry import WORKLOAD_FUNC_REGISTRY, decode_workload_key
    from tvmpy.relay.backend.te_compiler import _GroupLowering
    from tvmpy.target import as_target

    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm",
                                                  include_simple_tasks=True)
    ctx = auto_scheduler.ApplyHistoryBest(log, min_speedup=1.0) if log and os.path.exists(log) \
        else None
    tgt = as_target("llvm")
    dev = tvm.cpu()
    if top:  # the heaviest tasks (FLOPs x occurrences) only
        order = sorted(range(len(tasks)), key=lambda i: -tasks[i].compute_dag.flop_ct() * weights[i])
        tasks = [tasks[i] for i in sorted(order[:top])]
    rows = []
    for task in tasks:
        name, _ = decode_workload_key(task.workload_key)
        wl = WORKLOAD_FUNC_REGISTRY[name]
        g = _GroupLowering(wl.func, tgt, "default")
        outs = g.outputs(wl.func.body)
        tensors = [*g.inputs, *outs]
        kernels = {"default": (g.schedule(outs), tensors)}
        steps = ctx.query("llvm", task.workload_key) if ctx else None
        if steps is not None:
            from tvmpy.auto_scheduler.loop_state import State
            from tvmpy.auto_scheduler.transform_step import step_from_record

            dag = task.compute_dag
            sch, args = dag.apply_steps_from_state(State(dag, [step_from_record(r) for r in steps]))
            kernels["tuned"] = (sch, args)
        if analytic:
            from tvmpy.auto_scheduler.analytic_init import analytic_states
            from tvmpy.auto_scheduler.sketch_policy import generate_sketches

            for j, st in enumerate(analytic_states(task, generate_sketches(task))):
                kernels[f"analytic{j}"] = task.compute_dag.apply_steps_from_state(st)
        funcs = {}
        data = None
        for k, (sch, args) in kernels.items():
            if dump_ir:
                os.makedirs(dump_ir, exist_ok=True)
                with open(os.path.join(dump_ir, f"{task.desc}.{k}.txt"), "w") as f:
                    f.write(str(tvm.lower(sch, args, simple_mode=True)))
            f = tvm.build(sch, args, "llvm")
            if data is None:
                rng = np.random.default_rng(0)
                data = [tvm.nd.array(rng.standard_normal([int(d) for d in t.shape]).astype(t.dtype))
                        for t in args]
            funcs[k] = f.time_evaluator(f.entry_name, dev, number=2 if short else 20, repeat=1,
                                        min_repeat_ms=0 if short else 20)
        best = {k: float("inf") for k in funcs}
        for _ in range(rounds * (6 if short else 1)):
            for k, ev in funcs.items():
                best[k] = min(best[k], ev(*data).mean)
        flop = max(1, task.compute_dag.flop_ct())
        an = {k: v for k, v in best.items() if k.startswith("analytic")}
        for k in an:
            del best[k]
        if an:
            best["analytic"] = min(an.values())
        row = {"task": task.desc, "flop": flop, **{f"{k}_ms": v * 1e3 for k, v in best.items()}}
        rows.append(row)
        line = f"{task.desc:44s} default {best['default'] * 1e3:8.4f} ms " \
               f"({flop / best['default'] / 1e9:6.1f} GFLOPS)"
        if "tuned" in best:
            line += f"  tuned {best['tuned'] * 1e3:8.4f} ms ({flop / best['tuned'] / 1e9:6.1f} " \
                    f"GFLOPS)  tuned/default {best['tuned'] / best['default']:.2f}x"
        if "analytic" in best:
            line += f"  best of {len(an)} analytic/default {best['analytic'] / best['default']:.2f}x"
        print(line, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--log")
    ap.add_argument("--tune-minutes", type=float, default=0)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dump-ir")
    ap.add_argument("--analytic", action="store_true")
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--top", type=int, default=0, help="only the N heaviest tasks")
    args = ap.parse_args()
    mod, params = model(args.model)
    if args.tune_minutes > 0:
        if not args.log:
            raise SystemExit("--tune-minutes needs --log")
        tune(mod, params, args.log, args.tune_minutes)
    rows = profile(mod, params, args.log, args.rounds, args.dump_ir, args.analytic, args.short,
                   args.top)
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
