"""The LSTM/GRU recurrence as an auto-scheduler task: tune the cell of a zoo model, then time the
model untuned, with the tuned cell (forced, and as the default-schedule safety net decides) and
onnxruntime, interleaved in one process per thread count (issue 28 point 2, helper as-scan).

    env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=. python bench/rnn_cell_tune.py --model lstm_lm --trials 48

The model is the zoo's ``real`` one (lstm_lm: vocab 10000, 2 layers of hidden 256, 32 steps,
batch 1) through ONNX. Only the cell task (``topi.rnn_cell``, weight layers x steps) is tuned,
by the TaskScheduler (SketchPolicy, XGB model). Candidates, the "default" line and the
re-timing after the search all time the deployed form (``topi.rnn.MEASURE_STEPS`` steps of the
stepped kernel around the candidate, resp. of the untuned kernel; costs per step). Sides per thread count (a
subprocess each: TVM_NUM_THREADS is read once per process; onnxruntime gets the same
``intra_op_num_threads``): ``untuned``; ``tuned cell`` (the cell's best record applied even if
the net would keep the default); ``net`` (ApplyHistoryBest as a user gets it); ``ort``. Every call
feeds the input and fetches the output; medians and best of ``--rounds`` interleaved rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import bench_clock, interleaved_samples, machine_description, zoo_model  # noqa: E402


def _model(name: str):
    z = zoo_model(name)
    return z.model, z.mod, z.params, z.feeds


def tune(name: str, log: str, trials: int, per_round: int) -> None:
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.relay_integration import recheck_default_schedules
    from tvmpy.auto_scheduler.task_scheduler import PrintTableInfo
    from tvmpy.topi.rnn import CELL_WORKLOAD

    _, mod, params, _ = _model(name)
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    cells = [(t, w) for t, w in zip(tasks, weights) if CELL_WORKLOAD in t.workload_key]
    for t, w in cells:
        print(f"task {t.desc}: {t.workload_key} x{w}, {t.compute_dag.flop_ct()} FLOPs a step")
    ts = [t for t, _ in cells]
    t0 = time.time()
    auto_scheduler.TaskScheduler(ts, [w for _, w in cells], load_log_file=log,
                                 callbacks=[PrintTableInfo()]).tune(
        auto_scheduler.TuningOptions(
            num_measure_trials=trials * len(ts), num_measures_per_round=per_round, verbose=0,
            builder=auto_scheduler.LocalBuilder(timeout=60, n_parallel=1),
            runner=auto_scheduler.LocalRunner(number=5, repeat=3, min_repeat_ms=20),
            measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    print(f"search: {time.time() - t0:.0f} s")
    for i, r in recheck_default_schedules(ts, log).items():
        print(f"re-check {ts[i].desc}: default / best record = {r:.2f} (same process, "
              f"interleaved; > 1: the tuned step is faster)")


def _scan_kernels(log: str, records: list) -> dict:
    """The recurrence kernel alone at the tuned cell's shape (random inputs, the model's step
    count): ``scan untuned`` (rnn_scan) and ``scan tuned`` (rnn_scan_stepped, best record)."""
    from tvmpy import auto_scheduler, te
    from tvmpy.driver import build
    from tvmpy.runtime import ndarray
    from tvmpy.topi import rnn
    from tvmpy.topi.x86.injective import vector_lanes

    best = min((r for r in records if rnn.CELL_WORKLOAD in r[0].task.workload_key
                and r[1].error_no == 0), key=lambda r: float(np.mean(r[1].costs)))
    _, cell, n, hidden, hp, lbr = json.loads(best[0].task.workload_key)
    steps = 32
    G = rnn.GATES[cell]
    xw = te.placeholder((steps, n, G * hp), "float32", "xw")
    rt = te.placeholder((hidden, G * hp), "float32", "rt")
    h0 = te.placeholder((n, hidden), "float32", "h0")
    aux = te.placeholder((n, hidden) if cell == "LSTM" else (hp,), "float32", "aux")
    task = auto_scheduler.SearchTask(workload_key=best[0].task.workload_key, target="llvm")
    sch, cells = task.compute_dag.apply_steps_from_state(best[0].state)
    out = {}
    rng = np.random.default_rng(0)
    for side, outs in (("scan untuned", rnn.rnn_scan(xw, rt, h0, aux, cell, hidden, False, lbr,
                                                     lanes=vector_lanes("float32"))),
                       ("scan tuned", rnn.rnn_scan_stepped(xw, rt, h0, aux, cell, hidden, False,
                                                           lbr, sch, cells))):
        ts = [xw, rt, h0, aux, *outs]
        f = build(te.create_schedule([o.op for o in outs]), ts, "llvm")
        args = [ndarray.array(rng.uniform(-0.1, 0.1, [int(d) for d in t.shape]).astype("float32"))
                for t in ts]
        out[side] = (lambda f=f, args=args: f(*args))
    return out


def measure(name: str, log: str, threads: int, rounds: int, cpu_time: bool = False) -> dict:
    from tvmpy import auto_scheduler, relay, transform
    from tvmpy.relay.testing import compare

    model, mod, params, feeds = _model(name)

    def build(ctx):
        if ctx is None:
            lib, _ = compare.build(mod, params)
            return compare.tvm_runner(lib)
        with ctx, transform.PassContext(opt_level=3,
                                        config={"relay.backend.use_auto_scheduler": True}):
            return compare.tvm_runner(relay.build(mod, target="llvm", params=params))

    records = list(auto_scheduler.load_records(log))  # without the "default" lines
    sides = {"untuned": build(None),
             "tuned cell": build(auto_scheduler.ApplyHistoryBest(records)),
             "net": build(auto_scheduler.ApplyHistoryBest(log)),
             "ort": compare.ort_runner(model, threads=threads)}
    want = sides["ort"](feeds)[0]
    scans = _scan_kernels(log, records)
    err = {k: float(np.abs(f(feeds)[0] - want).max() / np.abs(want).max()) for k, f in sides.items()}
    clock = bench_clock(cpu_time and threads == 1, threads)
    s = interleaved_samples({**{k: (lambda f=f: f(feeds)) for k, f in sides.items()}, **scans},
                            rounds, target_s=0.05, clock=clock)
    return {"threads": threads, "median_ms": {k: 1e3 * float(np.median(v)) for k, v in s.items()},
            "best_ms": {k: 1e3 * min(v) for k, v in s.items()},
            "ratio_vs_ort": {k: float(np.median([a / b for a, b in zip(v, s["ort"])]))
                             for k, v in s.items()},
            "ratio_vs_untuned": {k: float(np.median([a / b for a, b in zip(v, s["untuned"])]))
                                 for k, v in s.items()},
            "max_rel_err": err}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="lstm_lm")
    p.add_argument("--trials", type=int, default=48, help="measured candidates for the cell")
    p.add_argument("--per-round", type=int, default=8)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--cpu-time", action="store_true",
                   help="time the 1-thread rounds by process CPU time (robust to load)")
    p.add_argument("--no-tune", action="store_true", help="measure only (the log as it is)")
    p.add_argument("--log", default=None, help="default: /tmp/rnn_cell_<model>.json (resumed)")
    p.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    log = a.log or f"/tmp/rnn_cell_{a.model}.json"
    if a.measure:
        print(json.dumps(measure(a.model, log, a.measure, a.rounds, a.cpu_time)))
        return
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; load {os.getloadavg()}")
    if not a.no_tune:
        tune(a.model, log, a.trials, a.per_round)
    print("| threads | untuned | tuned cell | net | ort | untuned/ort | tuned cell/ort | net/ort "
          "| tuned cell/untuned | scan kernel untuned / tuned (ms) | max rel err (tuned cell) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in (int(x) for x in a.threads.split(",")):
        env = dict(os.environ, TVM_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
        out = subprocess.run([sys.executable, __file__, "--model", a.model, "--log", log,
                              "--rounds", str(a.rounds), "--measure", str(t)]
                             + (["--cpu-time"] if a.cpu_time else []), env=env,
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        m, q, u = r["median_ms"], r["ratio_vs_ort"], r["ratio_vs_untuned"]
        print(f"| {t} | {m['untuned']:.3f} | {m['tuned cell']:.3f} | {m['net']:.3f} | "
              f"{m['ort']:.3f} | {q['untuned']:.2f} | {q['tuned cell']:.2f} | {q['net']:.2f} | "
              f"{u['tuned cell']:.2f} | {m['scan untuned']:.3f} / {m['scan tuned']:.3f} | "
              f"{r['max_rel_err']['tuned cell']:.1e} |", flush=True)
        print("#   best of rounds (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in r["best_ms"].items()))
    print(f"# load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
