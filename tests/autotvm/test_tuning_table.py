"""Tests of the pre-measured tuning table (tvmpy/testing/tuning_table.py): the table file and its
statistics, the table-driven measure, keeping tuners inside the sample, and "reached a target"
beyond the noise. Small fake tables only; nothing is timed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pytest
from autotvm_fakes import FakeSpace

from tvmpy.autotvm.measure.measure import MeasureErrorNo, MeasureInput
from tvmpy.autotvm.tuner import GATuner, RandomTuner, XGBTuner
from tvmpy.autotvm.tuner.ga_tuner import point2knob
from tvmpy.testing.tuning_table import (
    MeasurementTable,
    SampleOptimizer,
    TableMeasure,
    draw_sample,
    noise_band,
    restrict_to_sample,
    round_order,
    trials_to_reach,
)

FLOP = 1.0e9


@dataclass
class FakeTask:
    dims: list[int]
    target: str = "llvm"
    flop: float = FLOP
    workload: tuple = ("fake", 1)
    config_space: FakeSpace = field(init=False)

    def __post_init__(self):
        self.config_space = FakeSpace(self.dims)


def _table(tmp_path, sample=(3, 5, 7)):
    return MeasurementTable(str(tmp_path / "t.jsonl"),
                            {"workload": "w", "space_size": 10, "sample": list(sample)})


def test_draw_sample_fixed_distinct_and_whole_space_when_small():
    a = draw_sample(1000, 50, seed=3)
    assert a == draw_sample(1000, 50, seed=3)
    assert a != draw_sample(1000, 50, seed=4)
    assert len(set(a)) == 50 and a == sorted(a) and 0 <= min(a) and max(a) < 1000
    assert draw_sample(7, 50, seed=0) == list(range(7))
    with pytest.raises(ValueError):
        draw_sample(0, 5, seed=0)


def test_round_order_is_a_fresh_permutation_per_round():
    idx = list(range(40))
    orders = [round_order(idx, r, seed=1) for r in range(3)]
    for o in orders:
        assert sorted(o) == idx
    assert orders[0] != orders[1] != orders[2]
    assert round_order(idx, 1, seed=1) == orders[1]


def test_table_median_spread_and_resume(tmp_path):
    t = _table(tmp_path)
    for r, (a, b) in enumerate([(1.0, 2.0), (1.2, 2.0), (0.9, 2.0)]):
        t.add(3, r, a)
        t.add(5, r, b)
    t.add(7, 0, error_no=int(MeasureErrorNo.WRONG_ANSWER), message="differs")
    assert t.done(3, 2) and not t.done(3, 3) and t.done(7, 5)  # a failure counts as done
    assert t.complete(3) and not t.complete(4)
    assert t.median_costs() == {3: 1.0, 5: 2.0, 7: None}
    assert t.median_costs(repeats=2) == {3: 1.1, 5: 2.0, 7: None}
    spreads = t.relative_spreads()
    assert spreads[3] == pytest.approx(0.3) and spreads[5] == 0.0 and 7 not in spreads
    assert t.costs_by("min") == {3: 0.9, 5: 2.0, 7: None}
    with pytest.raises(ValueError):
        t.costs_by("mean")
    noise = t.noise()
    assert noise["median"] == pytest.approx(0.15) and noise["n"] == 2
    # fastest two of config 3: 0.9, 1.0 -> 1/9; config 5: 0
    assert noise["fastest_two"] == pytest.approx(0.5 / 9)
    # round slowdowns vs each config's fastest: r0 (1/0.9, 1), r1 (1.2/0.9, 1), r2 (1, 1)
    assert noise["round_slowdown"] == pytest.approx([(1 / 0.9 + 1) / 2, (1.2 / 0.9 + 1) / 2, 1])
    # a killed run: the last line is cut; reloading drops it and keeps the rest
    with open(t.path, "a") as f:
        f.write('{"i": 5, "r": 3, "c"')
    t2 = MeasurementTable(t.path, {"workload": "w", "space_size": 10, "sample": [3, 5, 7]})
    assert t2.median_costs() == t.median_costs() and not t2.done(5, 3)
    assert t2.sample == [3, 5, 7]
    t2.add(5, 3, 2.0)  # appends after the dropped line, not onto it
    assert MeasurementTable(t.path).costs[5][3] == 2.0


def test_table_rejects_other_sample_and_bad_values(tmp_path):
    t = _table(tmp_path)
    with pytest.raises(ValueError, match="sample"):
        MeasurementTable(t.path, {"workload": "w", "space_size": 10, "sample": [1, 2]})
    with pytest.raises(ValueError):
        t.add(3, 0, cost=-1.0)
    with pytest.raises(ValueError):
        t.add(3, 0)
    with pytest.raises(FileNotFoundError):
        MeasurementTable(str(tmp_path / "missing.jsonl"))
    lines = open(t.path).read().splitlines()
    assert json.loads(lines[0])["header"]["sample"] == [3, 5, 7] and len(lines) == 1


def test_table_measure_answers_medians_and_refuses_unsampled():
    task = FakeTask([4, 4])
    m = TableMeasure({1: 2e-3, 2: None}, n_parallel=2)
    inp = [MeasureInput("llvm", task, task.config_space.get(i)) for i in (1, 2)]
    ok, bad = m(inp)
    assert ok.error_no == 0 and ok.costs == (2e-3,)
    assert bad.error_no == MeasureErrorNo.RUNTIME_DEVICE
    assert m.proposed == [1, 2]
    with pytest.raises(KeyError):
        m([MeasureInput("llvm", task, task.config_space.get(3))])


def _costs(task, sample, seed=0):
    """Cost = 1 + L1 distance to a hidden target (ms): a structured fake landscape."""
    rng = np.random.default_rng(seed)
    goal = np.array([int(rng.integers(d)) for d in task.dims])
    return {i: 1e-3 * (1 + float(np.abs(np.array(point2knob(i, task.dims)) - goal).sum()))
            for i in sample}


@pytest.mark.parametrize("kind", ["random", "ga", "xgb"])
def test_restricted_tuners_propose_only_sampled_configs(kind):
    task = FakeTask([6, 5, 4, 3])
    sample = draw_sample(len(task.config_space), 60, seed=2)
    costs = _costs(task, sample)
    costs[sample[0]] = None  # a config that failed in the table
    if kind == "random":
        tuner = RandomTuner(task, seed=0)
    elif kind == "ga":
        tuner = GATuner(task, pop_size=8, seed=0)
    else:
        tuner = XGBTuner(task, plan_size=8, feature_type="knob", seed=0,
                         optimizer=SampleOptimizer(sample))
    restrict_to_sample(tuner, sample)
    measure = TableMeasure(costs, n_parallel=4)
    tuner.tune(100, {"measure_batch": measure, "n_parallel": 4})  # more than the sample
    assert set(measure.proposed) <= set(sample)
    assert len(measure.proposed) == len(set(measure.proposed))
    if kind != "ga":  # GA may stop breeding before it has found every last sampled config
        assert sorted(measure.proposed) == sample
    best = min(c for c in costs.values() if c is not None)
    if kind != "ga":
        assert tuner.best_flops == pytest.approx(FLOP / best)


def test_restrict_rejects_bad_samples():
    tuner = RandomTuner(FakeTask([3, 3]), seed=0)
    with pytest.raises(ValueError):
        restrict_to_sample(tuner, [])
    with pytest.raises(ValueError):
        restrict_to_sample(tuner, [0, 9])


def test_sample_optimizer_ranks_unvisited_candidates():
    class Model:
        def predict(self, xs):
            return np.array([-abs(x - 10) for x in xs], dtype=float)

    opt = SampleOptimizer([2, 9, 11, 10, 30])
    assert opt.find_maximums(Model(), 2, exclusive=set()) == [10, 9]
    assert opt.find_maximums(Model(), 3, exclusive={10}) == [9, 11, 2]
    assert opt.find_maximums(Model(), 3, exclusive={2, 9, 10, 11, 30}) == []


def test_reaching_a_target_counts_only_beyond_the_noise():
    curve = [50.0, 90.0, 97.0, 99.5, 101.0]
    target = 100.0
    assert trials_to_reach(curve, target) == 5  # strict
    band = noise_band(target, 0.04)  # 4% spread of repeats
    assert band == pytest.approx(4.0)
    assert trials_to_reach(curve, target, band) == 3  # 97 is within the noise of 100
    assert trials_to_reach(curve, 200.0, band) is None
    assert trials_to_reach([], 1.0) is None
    with pytest.raises(ValueError):
        noise_band(100.0, -0.1)
