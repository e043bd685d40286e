"""Ranking quality of the auto-scheduler's XGB cost model on measured records: per task, train
on every other record of a log (all tasks together, as the search does), score the rest, and
print the Spearman rank correlation between the scores and the measured throughput (1/cost),
and how often the model's top pick among the held-out records is within 10% of their best.

    PYTHONPATH=. python bench/auto_scheduler_model_rank.py LOG [LOG...] --model cnn
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--model", default="cnn")
    args = ap.parse_args()
    from auto_scheduler_task_profile import model
    from scipy.stats import spearmanr

    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.cost_model import XGBModel

    mod, params = model(args.model)
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")  # registers workloads
    by_task: dict[str, list] = {}
    for log in args.logs:
        for inp, res in auto_scheduler.load_records(log):
            if res.error_no == 0 and res.costs:
                by_task.setdefault(inp.task.workload_key, []).append((inp, res))
    train_i, train_r = [], []
    held: dict[str, list] = {}
    for key, recs in by_task.items():
        for n, (i, r) in enumerate(recs):
            if n % 2 == 0:
                train_i.append(i)
                train_r.append(r)
            else:
                held.setdefault(key, []).append((i, r))
    m = XGBModel(seed=0)
    m.update(train_i, train_r)
    desc = {t.workload_key: t.desc for t in tasks}
    for key, recs in held.items():
        if len(recs) < 4:
            continue
        scores = m.predict(recs[0][0].task, [i.state for i, _ in recs])
        thr = np.array([1.0 / (sum(r.costs) / len(r.costs)) for _, r in recs])
        rho = spearmanr(scores, thr).statistic
        top = thr[int(np.argmax(scores))] >= 0.9 * thr.max()
        print(f"{desc.get(key, key)[:44]:44s} n={len(recs):3d} spearman {rho:+.2f} "
              f"top pick within 10% of best: {bool(top)}"
              + ("" if math.isfinite(rho) else " (constant scores)"))


if __name__ == "__main__":
    main()
