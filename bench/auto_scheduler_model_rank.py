"""Ranking quality of the auto-scheduler's XGB cost model on measured records.

Per log (one tuning run: its timings share one load level), the records of every task are
split into a training and a held-out half, in one of two ways: ``alternate`` (every other
record) or ``time`` (the first half trains, the later half is held out: what the search does,
it scores new candidates with a model of the earlier ones). One model is trained on the
training halves of all tasks together (as the search does) per feature set (``old``: the loop
structure features alone; ``new``: with the per buffer access features) and training
objective; each scores the held-out records of each task. Printed per task and as means over
tasks: Spearman rank correlation of score and measured throughput, whether the top-scored
record is within 10% of the best held-out one, top-k recall (how many of the k fastest
held-out records are among the k best-scored, k = n/8 at least 2), and the best throughput
among the top-k scored relative to the best held-out ("top-k best"). With ``--time-features``
also the feature extraction time per state, old and new code in the same process.

    PYTHONPATH=. python bench/auto_scheduler_model_rank.py LOG [LOG...] --models cnn,effnet
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _metrics(scores: np.ndarray, thr: np.ndarray) -> dict[str, float]:
    from scipy.stats import spearmanr

    n = len(thr)
    k = max(2, n // 8)
    top_s = np.argsort(-scores, kind="stable")[:k]
    top_t = set(np.argsort(-thr, kind="stable")[:k].tolist())
    rho = spearmanr(scores, thr).statistic if np.ptp(scores) > 0 else 0.0
    return {"rho": float(rho), "top1": float(thr[int(np.argmax(scores))] >= 0.9 * thr.max()),
            "recall": len(top_t & set(top_s.tolist())) / k,
            "topk_best": float(thr[top_s].max() / thr.max())}


def _load(log: str) -> dict[str, list]:
    from tvmpy import auto_scheduler

    by_task: dict[str, list] = {}
    for inp, res in auto_scheduler.load_records(log):
        if res.error_no == 0 and res.costs:
            by_task.setdefault(inp.task.workload_key, []).append((inp, res))
    return by_task


def feature_sets(names: list[str]) -> dict[str, np.ndarray]:
    """Column sets: ``old`` (loop structure), ``new`` (all), ``compact`` (all but the per
    access columns of the summed "rest" stages)."""
    from tvmpy.auto_scheduler.feature import FEATURE_NAMES, OLD_FEATURES

    allc = np.arange(len(FEATURE_NAMES))
    compact = np.array([i for i, n in enumerate(FEATURE_NAMES)
                        if not n.startswith(("rest.read", "rest.write"))])
    table = {"old": OLD_FEATURES, "new": allc, "compact": compact}
    return {n: table[n] for n in names}


def evaluate(by_task: dict[str, list], split: str, objectives: list[str],
             desc: dict[str, str], verbose: bool, sets: dict[str, np.ndarray],
             params: dict | None = None) -> dict[tuple[str, str], list[dict]]:
    import xgboost as xgb

    from tvmpy.auto_scheduler.cost_model import train_booster
    from tvmpy.auto_scheduler.feature import get_per_state_features

    tr_x, tr_c, tr_k = [], [], []
    held: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for key, recs in by_task.items():
        feats = get_per_state_features([i.state for i, _ in recs])
        costs = np.array([sum(r.costs) / len(r.costs) for _, r in recs])
        ok = ~np.isnan(feats).any(axis=1)
        idx = np.flatnonzero(ok)
        if split == "alternate":
            tr, te = idx[0::2], idx[1::2]
        else:
            tr, te = idx[:len(idx) // 2], idx[len(idx) // 2:]
        tr_x.append(feats[tr])
        tr_c += costs[tr].tolist()
        tr_k += [key] * len(tr)
        if len(te) >= 8:
            held[key] = (feats[te], 1.0 / costs[te])
    x = np.concatenate(tr_x)
    out: dict[tuple[str, str], list[dict]] = {}
    for fs, cols in sets.items():
        for obj in objectives:
            b = train_booster(x[:, cols], tr_c, tr_k, obj, seed=0, params=params)
            rows = []
            for key, (fx, thr) in held.items():
                m = _metrics(b.predict(xgb.DMatrix(fx[:, cols])), thr)
                rows.append(m)
                if verbose:
                    print(f"  {fs:3s} {obj:10s} {desc.get(key, key)[:40]:40s} n={len(thr):3d} "
                          f"rho {m['rho']:+.2f} top1 {int(m['top1'])} recall {m['recall']:.2f} "
                          f"topk_best {m['topk_best']:.2f}")
            out[(fs, obj)] = rows
    return out


def time_features(by_task: dict[str, list], reps: int = 3) -> None:
    """us/state of the old (loop structure only) and the new feature code, interleaved; the
    states are replayed first (replay is timed separately: the search pays it either way)."""
    from tvmpy.auto_scheduler import feature
    from tvmpy.auto_scheduler.loop_state import State

    states = [State(i.state.dag, i.state.transform_steps) for recs in by_task.values()
              for i, _ in recs]
    t0 = time.process_time()
    for s in states:
        s.ctx  # noqa: B018 - replay
    t_replay = time.process_time() - t0
    feature.get_per_state_features(states)  # warm the per-DAG caches

    def old(s):  # the loop-structure part alone, as the old code computed it
        return feature.state_features(s, access=False)

    best = {"old": np.inf, "new": np.inf}
    for _ in range(reps):
        for name, fn in (("old", old), ("new", feature.state_features)):
            t0 = time.process_time()
            for s in states:
                fn(s)
            best[name] = min(best[name], time.process_time() - t0)
    n = len(states)
    print(f"feature extraction, {n} states (best of {reps}, CPU time): replay {t_replay / n * 1e6:.0f} "
          f"us/state; features old {best['old'] / n * 1e6:.0f} us/state, new "
          f"{best['new'] / n * 1e6:.0f} us/state")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--models", default="cnn", help="models whose tasks the logs hold")
    ap.add_argument("--splits", default="alternate,time")
    ap.add_argument("--objectives", default="throughput,weighted,rank,log")
    ap.add_argument("--features", default="old,new", help="feature sets: old,new,compact")
    ap.add_argument("--xgb", default="", help="xgboost parameter overrides, k=v,k=v")
    ap.add_argument("--time-features", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    from auto_scheduler_task_profile import model

    from tvmpy import auto_scheduler

    desc: dict[str, str] = {}
    for name in args.models.split(","):
        mod, params = model(name)
        tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")  # registers them
        desc.update({t.workload_key: t.desc for t in tasks})
    objectives = args.objectives.split(",")
    sets = feature_sets(args.features.split(","))
    params = {k: (int(v) if v.isdigit() else float(v))
              for k, v in (kv.split("=") for kv in args.xgb.split(",") if kv)}
    total: dict[tuple[str, str, str], list[dict]] = {}
    for log in args.logs:
        by_task = _load(log)
        print(f"{log}: {sum(len(v) for v in by_task.values())} records, {len(by_task)} tasks")
        if args.time_features:
            time_features(by_task)
        for split in args.splits.split(","):
            if args.verbose:
                print(f" split {split}")
            res = evaluate(by_task, split, objectives, desc, args.verbose, sets, params)
            for (fs, obj), rows in res.items():
                total.setdefault((split, fs, obj), []).extend(rows)
    print("\nmeans over (log, task) pairs with >= 8 held-out records:")
    print(f"{'split':9s} {'features':8s} {'objective':10s} {'n':>3s} {'spearman':>8s} "
          f"{'top1<10%':>8s} {'recall@k':>8s} {'topk_best':>9s}")
    for (split, fs, obj), rows in total.items():
        mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]} if rows else {}
        if rows:
            print(f"{split:9s} {fs:8s} {obj:10s} {len(rows):3d} {mean['rho']:+8.2f} "
                  f"{mean['top1']:8.2f} {mean['recall']:8.2f} {mean['topk_best']:9.2f}")


if __name__ == "__main__":
    main()
