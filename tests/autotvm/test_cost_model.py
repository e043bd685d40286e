"""The XGBoost cost model, the simulated-annealing optimizer and XGBTuner.

The ranking test measures a real dataset in the test: configurations of a matmul template
(tile sizes, loop order, vectorization) built with ``tvm.build`` and timed with
``time_evaluator``; the model is fit on 2/3 of them and must rank the rest with Spearman > 0.5.
"""

from __future__ import annotations

import time
from collections import namedtuple
from dataclasses import dataclass, field

import numpy as np
import pytest
from autotvm_fakes import FakeSpace

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm.tuner import XGBTuner
from tvmpy.autotvm.tuner.model_based_tuner import (
    CostModel,
    knob2point,
    point2knob,
    random_walk,
    submodular_pick,
)
from tvmpy.autotvm.tuner.sa_model_optimizer import SimulatedAnnealingOptimizer
from tvmpy.autotvm.tuner.xgboost_cost_model import FAILED_SCORE, XGBoostCostModel

# duck-typed records: (MeasureInput, MeasureResult) as the tuners read them
Inp = namedtuple("Inp", ["target", "task", "config"])
Res = namedtuple("Res", ["costs", "error_no", "all_cost", "timestamp"])


@autotvm.template("test_cost_model/matmul")
def _matmul(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    cfg.define_knob("k_inner", [0, 1])
    cfg.define_knob("vec", [0, 1])
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    if cfg["k_inner"].val:
        s[C].reorder(yo, xo, yi, xi, k)
    else:
        s[C].reorder(yo, xo, k, yi, xi)
        if cfg["vec"].val:
            s[C].vectorize(xi)
    return s, [A, B, C]


def _spearman(a, b) -> float:
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def _measure(task, indices):
    """GFLOP/s of each configuration (built and timed in this process)."""
    rng = np.random.default_rng(0)
    N, L, M, dtype = task.args
    a = tvm.nd.array(rng.random((N, L), dtype=np.float32))
    b = tvm.nd.array(rng.random((L, M), dtype=np.float32))
    c = tvm.nd.array(np.zeros((N, M), dtype=np.float32))
    dev = tvm.cpu(0)
    records = []
    for i in indices:
        cfg = task.config_space.get(int(i))
        s, args = task.instantiate(cfg)
        f = tvm.build(s, args, "llvm")
        cost = f.time_evaluator(f.entry_name, dev, number=2, repeat=3)(a, b, c).min
        records.append((Inp("llvm", task, cfg), Res((cost,), 0, cost, time.time())))
    return records


@pytest.fixture(scope="module")
def gemm_data():
    task = autotvm.task.create("test_cost_model/matmul", args=(128, 128, 128, "float32"),
                               target="llvm")
    assert len(task.config_space) == 8 * 8 * 2 * 2
    rng = np.random.default_rng(7)
    idx = rng.choice(len(task.config_space), size=150, replace=False)
    records = _measure(task, idx)
    flops = np.array([task.flop / r.costs[0] for _, r in records])
    return task, idx, flops, records


@pytest.mark.parametrize("feature_type", ["itervar", "knob", "curve"])
def test_model_ranks_held_out_configs(gemm_data, feature_type):
    task, idx, flops, _ = gemm_data
    assert flops.max() > 3 * flops.min()  # the dataset has something to rank
    perm = np.random.default_rng(3).permutation(len(idx))
    n_train = 2 * len(idx) // 3
    train, test = perm[:n_train], perm[n_train:]
    model = XGBoostCostModel(task, feature_type=feature_type, loss_type="rank")
    model.fit(idx[train], flops[train], plan_size=32)
    pred = model.predict(idx[test])
    rho = _spearman(pred, flops[test])
    print(f"{feature_type}: spearman {rho:.3f}, feature "
          f"{1e3 * model.feature_time / max(model.n_extracted, 1):.2f} ms/config")
    assert rho > 0.5
    # a random ranking does not pass
    assert _spearman(np.random.default_rng(0).random(len(test)), flops[test]) < 0.5


def test_regression_loss_and_cache(gemm_data):
    task, idx, flops, _ = gemm_data
    model = XGBoostCostModel(task, feature_type="itervar", loss_type="reg")
    model.fit(idx[:100], flops[:100], plan_size=32)
    n = model.n_extracted
    assert n == 100
    p1 = model.predict(idx[100:])
    assert model.n_extracted == len(idx)
    assert np.array_equal(p1, model.predict(idx[100:]))  # cached, deterministic
    assert model.n_extracted == len(idx)
    assert _spearman(p1, flops[100:]) > 0.3
    # features extracted in worker processes are the same
    pooled = XGBoostCostModel(task, feature_type="itervar", num_threads=2)
    xp, okp = pooled.get_features(list(idx[:70]))
    xs, oks = model.get_features(list(idx[:70]))
    assert okp.all() and oks.all() and np.array_equal(xp, xs)
    # the workers persist across calls (forked once; a base model uses its upper model's),
    # close() ends them, and a later call forks them again
    pool = pooled._pool()
    assert pooled._pool() is pool and pooled.spawn_base_model()._pool() is pool
    workers = list(pool._pool)
    assert len(workers) == 2 and all(w.is_alive() for w in workers)
    pooled.close()
    for w in workers:
        w.join(timeout=10)
    assert not any(w.is_alive() for w in workers)
    xq, okq = pooled.get_features(list(idx[70:100]))
    assert okq.all() and np.array_equal(xq, model.get_features(list(idx[70:100]))[0])
    pooled.close()
    assert XGBoostCostModel(task, feature_type="itervar", num_threads=1)._pool() is None


def test_transfer_from_other_task(gemm_data):
    """A base model trained on another shape's records ranks this shape's configurations."""
    task, _, _, records = gemm_data
    other = autotvm.task.create("test_cost_model/matmul", args=(64, 96, 192, "float32"),
                                target="llvm")
    idx = np.random.default_rng(5).choice(len(other.config_space), size=40, replace=False)
    target_records = _measure(other, idx)
    flops = np.array([other.flop / r.costs[0] for _, r in target_records])
    base = XGBoostCostModel(other, feature_type="itervar").spawn_base_model()
    assert not base.fit_log(records, plan_size=32, min_seed_records=len(records) + 1)
    assert base.fit_log(records, plan_size=32, min_seed_records=100)
    rho = _spearman(base.predict(idx), flops)
    print(f"transfer spearman {rho:.3f}")
    assert rho > 0.3
    # the tuner: history of another task seeds the first plan and becomes the model's prior
    tuner = XGBTuner(other, plan_size=16, seed=0, sa_params={"n_iter": 20, "early_stop": 5})
    tuner.load_history(records, min_seed_records=100)
    assert len(tuner.trials) == 16 and len(set(tuner.trials)) == 16
    assert tuner.cost_model.base_model is not None and not tuner.visited
    batch = tuner.next_batch(4)
    assert [c.index for c in batch] == tuner.trials[:4]
    # knob features of other tasks are not comparable: no transfer
    knob_base = XGBoostCostModel(other, feature_type="knob").spawn_base_model()
    assert not knob_base.fit_log(records, plan_size=32, min_seed_records=10)


def test_history_features_are_extracted_once_per_process(gemm_data, monkeypatch):
    """Whole-model tuning feeds the same records of earlier tasks to every later task's model:
    their features are computed once (and equal a fresh extraction)."""
    from tvmpy.autotvm.tuner import xgboost_cost_model as xcm

    task, _, _, records = gemm_data
    calls = []
    real = xcm.extract_feature
    monkeypatch.setattr(xcm, "extract_feature", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(xcm, "_HISTORY_FEATURES", {})
    inp = records[0][0]
    a = xcm.history_feature(inp.task, inp.config, "itervar")
    b = xcm.history_feature(inp.task, inp.config, "itervar")
    assert len(calls) == 1 and a is b
    np.testing.assert_array_equal(a, real(inp.task, inp.config, "itervar"))


# ---------------------------------------------------------------------------------------------
# synthetic spaces


@dataclass
class FakeTask:
    dims: list[int]
    target_knobs: list[int]
    name: str = "synthetic"
    args: tuple = (1,)
    target: str = "llvm"
    flop: float = 1e9
    config_space: FakeSpace = field(init=False)

    def __post_init__(self):
        self.config_space = FakeSpace(self.dims)

    @property
    def workload(self):
        return (self.name, *self.args)

    def cost(self, index):
        knobs = point2knob(index, self.dims)
        return 1.0 + sum(abs(a - b) for a, b in zip(knobs, self.target_knobs))

    def instantiate(self, config):
        raise RuntimeError("synthetic task has no template")


class DistanceModel(CostModel):
    def __init__(self, task):
        self.task = task

    def predict(self, xs, output_margin=False):
        return np.array([-self.task.cost(int(x)) for x in xs])


def test_point_knob_random_walk_and_pick():
    dims = [3, 1, 5, 4]
    rng = np.random.default_rng(0)
    for p in range(60):
        assert knob2point(point2knob(p, dims), dims) == p
        q = random_walk(p, dims, rng)
        diff = [a != b for a, b in zip(point2knob(p, dims), point2knob(q, dims))]
        assert sum(diff) == 1 and not diff[1]
    knobs = [[0, 0], [0, 0], [1, 1], [0, 1]]
    assert submodular_pick(np.zeros(4), knobs, 2) == [0, 2]
    with pytest.raises(ValueError):
        submodular_pick(np.zeros(3), knobs, 2)


def test_sa_finds_distinct_high_scoring_configs():
    task = FakeTask([6, 7, 8, 5], [4, 1, 6, 2])
    opt = SimulatedAnnealingOptimizer(task, n_iter=200, parallel_size=32, early_stop=40, seed=1)
    best = knob2point(task.target_knobs, task.dims)
    exclusive = {best}
    found = opt.find_maximums(DistanceModel(task), 10, exclusive)
    assert len(found) == 10 and len(set(found)) == 10 and best not in found
    costs = [task.cost(p) for p in found]
    assert costs == sorted(costs)
    assert max(costs) <= 3  # only near-optimal points: 8 points at distance 1, many at 2
    found2 = opt.find_maximums(DistanceModel(task), 5, set())
    assert found2[0] == best
    with pytest.raises(ValueError):
        SimulatedAnnealingOptimizer(task, n_iter=0)
    with pytest.raises(ValueError):
        SimulatedAnnealingOptimizer(task, temp=(1, 0, 2))


def _trials_to_optimum(tuner, task, budget):
    best = knob2point(task.target_knobs, task.dims)
    n = 0
    while n < budget and tuner.has_next():
        batch = tuner.next_batch(8)
        inputs = [Inp("llvm", task, c) for c in batch]
        results = [Res((task.cost(c.index) * 1e-3,), 0, 0.0, 0.0) for c in batch]
        for k, c in enumerate(batch):
            if c.index == best:
                return n + k + 1
        n += len(batch)
        tuner.update(inputs, results)
    return budget


def test_xgb_tuner_beats_random_on_synthetic_space():
    from tvmpy.autotvm.tuner import RandomTuner

    budget = 320
    xgb_n, rnd_n = [], []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        dims = [8, 8, 8, 6]
        task = FakeTask(dims, [int(rng.integers(d)) for d in dims])
        tuner = XGBTuner(task, plan_size=32, feature_type="knob", seed=seed,
                         sa_params={"n_iter": 80, "early_stop": 20, "parallel_size": 64})
        xgb_n.append(_trials_to_optimum(tuner, task, budget))
        np.random.seed(seed)
        rnd_n.append(_trials_to_optimum(RandomTuner(task), task, budget))
    print(f"trials to the optimum: xgb {xgb_n}, random {rnd_n}")
    assert np.mean(xgb_n) < np.mean(rnd_n)
    assert max(xgb_n) < budget


def test_failed_instantiation_is_flagged_not_fatal(gemm_data):
    task, idx, flops, _ = gemm_data

    class Flaky:
        def __init__(self, inner):
            self.inner = inner
            self.config_space = inner.config_space
            self.workload = inner.workload
            self.flop = inner.flop

        def instantiate(self, config):
            if config.index % 3 == 0:
                raise ValueError("template rejects this config")
            return self.inner.instantiate(config)

    model = XGBoostCostModel(Flaky(task), feature_type="itervar")
    x, ok = model.get_features(list(idx[:30]))
    assert list(ok) == [int(i) % 3 != 0 for i in idx[:30]]
    assert not x[~ok].any() and x[ok].any(axis=1).all()
    model.fit(idx[:90], flops[:90], plan_size=16)
    pred = model.predict(idx[90:])
    bad = np.array([int(i) % 3 == 0 for i in idx[90:]])
    assert (pred[bad] == FAILED_SCORE).all() and (pred[~bad] > FAILED_SCORE).all()


def test_bad_arguments(gemm_data):
    task = gemm_data[0]
    with pytest.raises(ValueError):
        XGBoostCostModel(task, feature_type="bogus")
    with pytest.raises(ValueError):
        XGBoostCostModel(task, loss_type="bogus")
    with pytest.raises(ValueError):
        XGBTuner(task, plan_size=0)
    with pytest.raises(ValueError):
        XGBTuner(task, optimizer="bogus")
    model = XGBoostCostModel(task)
    with pytest.raises(ValueError):
        model.fit([1, 2], [1.0], plan_size=4)


def test_xgb_tuner_tune_loop_and_resume():
    """Through Tuner.tune with an injected measurement: no config measured twice, the model is
    refit every plan, and a second tuner resumes from the first one's records."""
    task = FakeTask([6, 6, 5, 4], [5, 0, 3, 1])
    measured: list[int] = []

    def measure_batch(inputs):
        measured.extend(inp.config.index for inp in inputs)
        return [Res((task.cost(inp.config.index) * 1e-3,), 0, 0.0, 0.0) for inp in inputs]

    records = []
    tuner = XGBTuner(task, plan_size=16, feature_type="knob", seed=3,
                     sa_params={"n_iter": 40, "early_stop": 10})
    tuner.tune(n_trial=64, measure_option={"measure_batch": measure_batch, "n_parallel": 8},
               callbacks=[lambda t, i, r: records.extend(zip(i, r))])
    assert len(measured) == 64 and len(set(measured)) == 64
    assert tuner.train_ct == 4 and tuner.cost_model.bst is not None
    assert tuner.best_flops == pytest.approx(task.flop / (min(map(task.cost, measured)) * 1e-3))
    resumed = XGBTuner(task, plan_size=16, feature_type="knob", seed=4,
                       sa_params={"n_iter": 40, "early_stop": 10})
    resumed.load_history(records, min_seed_records=10)
    assert resumed.visited == set(measured) and sorted(resumed.xs) == sorted(measured)
    assert resumed.cost_model.base_model is not None and len(resumed.trials) == 16
    fresh = [c.index for c in resumed.next_batch(32)]
    assert len(set(fresh)) == 32 and not set(fresh) & set(measured)


def test_diversity_filter_plans_distinct_diverse_trials():
    task = FakeTask([8, 8, 8, 4], [2, 7, 1, 3])
    tuner = XGBTuner(task, plan_size=16, feature_type="knob", seed=1, diversity_filter_ratio=3,
                     sa_params={"n_iter": 40, "early_stop": 10})
    for _ in range(2):
        batch = tuner.next_batch(16)
        tuner.update([Inp("llvm", task, c) for c in batch],
                     [Res((task.cost(c.index) * 1e-3,), 0, 0.0, 0.0) for c in batch])
    assert tuner.train_ct == 2
    assert len(tuner.trials) == 16 and len(set(tuner.trials)) == 16
    knobs = np.array([point2knob(p, task.dims) for p in tuner.trials])
    # the filter spreads the plan: every knob takes several values
    assert all(len(set(knobs[:, k])) >= 2 for k in range(4))
    with pytest.raises(ValueError):
        XGBTuner(task, diversity_filter_ratio=0.5)
