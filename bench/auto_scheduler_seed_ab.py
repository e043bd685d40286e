"""A/B of the search's start: the analytic initial states (``analytic_init=1``, now the
default) against random annotations only (``analytic_init=0``, the code before), per task,
same seed, same process, against the untuned default kernel of the same fused subgraph.

    PYTHONPATH=. python bench/auto_scheduler_seed_ab.py --model cnn --trials 32 \
        [--checkpoints 8,16,32] [--tasks conv,dense] [--per-round 8]

Models: those of ``auto_scheduler_task_profile.py`` (cnn, effnet, tconv) and ``bert_dense``
(the BERT-base encoder's dense layers: 128 tokens x 768 -> 768 / 3072, bias). For each task
and arm the SketchPolicy searches ``--trials`` trials (LocalRunner, correctness checked);
at each checkpoint the best state so far (by the runner's time) is kept; then all those
states and the default kernel are built and timed interleaved (best of ``--rounds``), so the
ratios best/default are same-process, same-load. Prints per task and checkpoint
best/default for both arms, and the first checkpoint where the best reaches the default.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def model(name: str):
    if name == "bert_dense":
        import tvmpy as tvm
        from tvmpy import relay

        rng = np.random.default_rng(0)
        x = relay.var("x", shape=(128, 768))
        params = {}
        outs = []
        for i, n in enumerate((768, 3072)):
            params[f"w{i}"] = tvm.nd.array((rng.standard_normal((n, 768)) * 0.05).astype("float32"))
            params[f"b{i}"] = tvm.nd.array(rng.standard_normal(n).astype("float32"))
            y = relay.nn.bias_add(relay.nn.dense(x, relay.var(f"w{i}", shape=(n, 768))),
                                  relay.var(f"b{i}", shape=(n,)))
            outs.append(relay.sum(y))
        out = relay.add(outs[0], outs[1])
        return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(out), out)), params
    from auto_scheduler_task_profile import model as m

    return m(name)


class _Trace:
    """Measure callback: the (cost, state) of every trial in order (inf for an error)."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, object]] = []

    def __call__(self, policy, inputs, results) -> None:
        for inp, res in zip(inputs, results):
            c = sum(res.costs) / len(res.costs) if res.error_no == 0 and res.costs else np.inf
            self.rows.append((c, inp.state))


def search(task, arm: int, trials: int, per_round: int, seed: int) -> _Trace:
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.search_policy import SketchPolicy

    trace = _Trace()
    pol = SketchPolicy(task, params={"analytic_init": arm}, seed=seed, verbose=0)
    pol.search(auto_scheduler.TuningOptions(
        num_measure_trials=trials, num_measures_per_round=per_round, verbose=0,
        builder=auto_scheduler.LocalBuilder(timeout=60, n_parallel=2),
        runner=auto_scheduler.LocalRunner(number=5, repeat=1, min_repeat_ms=10),
        measure_callbacks=[trace]))
    return trace


def best_at(trace: _Trace, n: int):
    rows = [r for r in trace.rows[:n] if np.isfinite(r[0])]
    return min(rows, key=lambda r: r[0])[1] if rows else None


def analytic_only(task, default, rounds: int) -> None:
    """Every analytic state of ``task`` against its default kernel, timed interleaved."""
    from tvmpy.auto_scheduler.analytic_init import analytic_states
    from tvmpy.auto_scheduler.relay_integration import _timer
    from tvmpy.auto_scheduler.sketch_policy import generate_sketches

    states = analytic_states(task, generate_sketches(task))
    timers = {"default": _timer(*default, task.target, 5, 10)}
    for j, st in enumerate(states):
        timers[j] = _timer(*task.compute_dag.apply_steps_from_state(st), task.target, 5, 10)
    best = {k: np.inf for k in timers}
    for _ in range(rounds):
        for k, t in timers.items():
            best[k] = min(best[k], t())
    d = best.pop("default")
    r = [best[j] / d for j in range(len(states))]
    print(f"{task.desc}: default {d * 1e3:.4f} ms; {len(states)} analytic states: first "
          f"{r[0] if r else np.inf:.2f}x, best {min(r, default=np.inf):.2f}x, median "
          f"{float(np.median(r)) if r else np.inf:.2f}x the default (load {os.getloadavg()[0]:.1f})",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--checkpoints", default="8,16,32")
    ap.add_argument("--per-round", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", default="", help="substrings of task names to keep")
    ap.add_argument("--analytic-only", action="store_true",
                    help="no search: every analytic state and the default, timed interleaved")
    args = ap.parse_args()
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.relay_integration import _timer, default_schedule_of

    mod, params = model(args.model)
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    keep = [k for k in args.tasks.split(",") if k]
    cps = [int(c) for c in args.checkpoints.split(",")]
    print(f"# {args.model}: {len(tasks)} tasks, trials {args.trials}, seed {args.seed}, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    for task in tasks:
        if keep and not any(k in task.desc for k in keep):
            continue
        got = default_schedule_of(task)
        if got is None:
            continue
        if args.analytic_only:
            analytic_only(task, got, args.rounds)
            continue
        t0 = time.time()
        traces = {arm: search(task, arm, args.trials, args.per_round, args.seed) for arm in (0, 1)}
        wall = time.time() - t0
        dag = task.compute_dag
        timers = {"default": _timer(*got, task.target, 5, 10)}
        picks: dict[tuple[int, int], str] = {}
        by_key: dict[str, object] = {}
        for arm, tr in traces.items():
            for c in cps:
                st = best_at(tr, c)
                if st is None:
                    continue
                key = repr([x.to_record() for x in st.transform_steps])
                picks[(arm, c)] = key
                if key not in by_key:
                    by_key[key] = st
                    timers[key] = _timer(*dag.apply_steps_from_state(st), task.target, 5, 10)
        best = {k: np.inf for k in timers}
        for _ in range(args.rounds):
            for k, t in timers.items():
                best[k] = min(best[k], t())
        d = best["default"]
        print(f"{task.desc}: default {d * 1e3:.4f} ms, search {wall:.0f} s "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        for arm in (0, 1):
            ratios = [best[picks[(arm, c)]] / d if (arm, c) in picks else np.inf for c in cps]
            reach = next((c for c, r in zip(cps, ratios) if r <= 1.0), None)
            name = "analytic" if arm else "random  "
            cells = "  ".join(f"@{c}: {r:5.2f}x" for c, r in zip(cps, ratios))
            errs = sum(1 for r in traces[arm].rows if not np.isfinite(r[0]))
            print(f"    {name} best/default {cells}   reaches default at "
                  f"{reach if reach else '>' + str(cps[-1])} trials; {errs} errors", flush=True)


if __name__ == "__main__":
    main()
