"""Tests of the tuner framework: Random, GridSearch and GA tuners, the tune loop, callbacks.

The tuners are exercised on a synthetic task whose space is a product of knobs and whose
"measured" cost is the distance of the configuration's knobs to a hidden target (plus one), so
the optimum is known. Measurement is injected through ``measure_option["measure_batch"]``.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

import numpy as np
import pytest
from autotvm_fakes import FakeSpace

from tvmpy import autotvm, te
from tvmpy.autotvm import record
from tvmpy.autotvm.measure.measure import MeasureErrorNo, MeasureResult
from tvmpy.autotvm.task import get_config, template
from tvmpy.autotvm.tuner import GATuner, GridSearchTuner, RandomTuner, Tuner, callback
from tvmpy.autotvm.tuner.ga_tuner import knob2point, point2knob

FLOP = 2.0e9




@dataclass
class FakeTask:
    dims: list[int]
    name: str = "synthetic"
    args: tuple = (1,)
    target: str = "llvm"
    flop: float = FLOP
    config_space: FakeSpace = field(init=False)

    def __post_init__(self):
        self.config_space = FakeSpace(self.dims)

    @property
    def workload(self):
        return (self.name, *self.args)


class FakeMeasure:
    """Cost (seconds) = 1e-3 * (1 + L1 distance of the knobs to ``target``); ``fail`` indices
    return ``error_no`` RUNTIME_DEVICE. Records every measured index and batch size."""

    def __init__(self, target, fail=(), n_parallel=4):
        self.target = np.asarray(target)
        self.fail = set(fail)
        self.n_parallel = n_parallel
        self.measured: list[int] = []
        self.batches: list[int] = []
        self.flops: list[float] = []

    def cost(self, knobs):
        return 1e-3 * (1.0 + float(np.abs(np.asarray(knobs) - self.target).sum()))

    def __call__(self, inputs):
        self.batches.append(len(inputs))
        out = []
        for inp in inputs:
            self.measured.append(inp.config.index)
            if inp.config.index in self.fail:
                out.append(MeasureResult(("crash",), MeasureErrorNo.RUNTIME_DEVICE, 0.01,
                                         time.time()))
                self.flops.append(0.0)
                continue
            c = self.cost(inp.config.knobs)
            out.append(MeasureResult((c, c * 1.01, c * 0.99), MeasureErrorNo.NO_ERROR, 0.01,
                                     time.time()))
            self.flops.append(FLOP / np.mean([c, c * 1.01, c * 0.99]))
        return out

    def option(self):
        return {"measure_batch": self, "n_parallel": self.n_parallel}


def _target(dims, rng):
    return [int(rng.integers(0, d)) for d in dims]


def _collector():
    records = []

    def cb(_tuner, inputs, results):
        records.extend(zip(inputs, results))

    return records, cb


# ---- helpers ------------------------------------------------------------------------------------
def test_point2knob_roundtrip():
    rng = np.random.default_rng(0)
    dims = [3, 7, 1, 5, 2]
    size = int(np.prod(dims))
    for p in rng.integers(0, size, 50):
        knob = point2knob(int(p), dims)
        assert all(0 <= k < d for k, d in zip(knob, dims))
        assert knob2point(knob, dims) == p
    assert sorted(knob2point(point2knob(p, dims), dims) for p in range(size)) == list(range(size))


# ---- finding the optimum ------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_and_grid_find_optimum_of_exhausted_space(seed):
    rng = np.random.default_rng(seed)
    dims = [5, 3, 4]
    target = _target(dims, rng)
    best_index = knob2point(target, dims)
    for make in (lambda t: RandomTuner(t, seed=seed), GridSearchTuner):
        task = FakeTask(dims)
        meas = FakeMeasure(target, n_parallel=3)
        tuner = make(task)
        tuner.tune(n_trial=1000, measure_option=meas.option())
        assert tuner.best_config.index == best_index
        assert tuner.best_flops == pytest.approx(FLOP / 1e-3)
        inp, res = tuner.best_measure_pair
        assert inp.config.index == best_index and res.error_no == 0
        # never repeats, stops when exhausted
        assert sorted(meas.measured) == list(range(len(task.config_space)))
        assert not tuner.has_next()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ga_finds_optimum_within_budget(seed):
    rng = np.random.default_rng(100 + seed)
    dims = [6, 6, 6, 6]  # 1296 configs, budget 300
    target = _target(dims, rng)
    task = FakeTask(dims)
    meas = FakeMeasure(target, n_parallel=8)
    tuner = GATuner(task, pop_size=30, elite_num=4, mutation_prob=0.1, seed=seed)
    tuner.tune(n_trial=300, measure_option=meas.option())
    assert tuner.best_config.index == knob2point(target, dims)
    assert len(meas.measured) == len(set(meas.measured)) == 300


def test_ga_beats_random_at_same_budget():
    dims = [10, 10, 10, 10]
    ga_best, rand_best = [], []
    for seed in range(3):
        target = _target(dims, np.random.default_rng(200 + seed))
        for tuner_cls, out in ((GATuner, ga_best), (RandomTuner, rand_best)):
            meas = FakeMeasure(target, n_parallel=10)
            kw = {"pop_size": 20} if tuner_cls is GATuner else {}
            tuner = tuner_cls(FakeTask(dims), seed=seed, **kw)
            tuner.tune(n_trial=200, measure_option=meas.option())
            out.append(tuner.best_flops)
    assert np.mean(ga_best) > np.mean(rand_best)


def test_ga_improves_over_generations():
    dims = [12, 12, 12]
    target = _target(dims, np.random.default_rng(7))
    meas = FakeMeasure(target, n_parallel=25)
    tuner = GATuner(FakeTask(dims), pop_size=25, elite_num=3, mutation_prob=0.1, seed=3)
    tuner.tune(n_trial=200, measure_option=meas.option())
    gens = np.asarray(meas.flops).reshape(8, 25).mean(axis=1)
    # later generations are much better on average than the random first one (near the end
    # they thin out: the neighbours of the optimum are all measured)
    assert gens[1:].max() > 1.5 * gens[0]
    assert gens[2:].mean() > 1.3 * gens[0]
    assert tuner.generation >= 7


def test_ga_exhausts_small_space_without_duplicates():
    dims = [3, 2, 4]
    meas = FakeMeasure([1, 1, 1], n_parallel=5)
    tuner = GATuner(FakeTask(dims), pop_size=7, seed=1)
    tuner.tune(n_trial=500, measure_option=meas.option())
    assert sorted(meas.measured) == list(range(24))
    assert not tuner.has_next()
    assert tuner.best_config.index == knob2point([1, 1, 1], dims)


# ---- range_idx, batching ------------------------------------------------------------------------
def test_range_idx_restricts_and_exhausts():
    dims = [10, 10]
    for cls in (RandomTuner, GridSearchTuner):
        meas = FakeMeasure([0, 0], n_parallel=3)
        tuner = cls(FakeTask(dims), range_idx=(17, 41))
        tuner.tune(n_trial=100, measure_option=meas.option())
        assert sorted(meas.measured) == list(range(17, 42))
    assert meas.measured == list(range(17, 42))  # grid search in order


@pytest.mark.parametrize("bad", [(5, 3), (-1, 3), (0, 100), (1,), "ab", (0.0, 3)])
def test_range_idx_rejected(bad):
    with pytest.raises((ValueError, TypeError)):
        RandomTuner(FakeTask([10, 10]), range_idx=bad)


def test_batches_respect_n_parallel_and_budget():
    meas = FakeMeasure([2, 2], n_parallel=4)
    tuner = RandomTuner(FakeTask([9, 9]), seed=5)
    tuner.tune(n_trial=10, measure_option=meas.option())
    assert meas.batches == [4, 4, 2]
    assert len(set(meas.measured)) == 10


def test_n_parallel_from_measure_batch_attribute():
    meas = FakeMeasure([2, 2], n_parallel=3)
    tuner = GridSearchTuner(FakeTask([9, 9]))
    tuner.tune(n_trial=7, measure_option={"measure_batch": meas})
    assert meas.batches == [3, 3, 1]


def test_random_tuner_nearly_full_space():
    # most of the range already visited: the tuner still proposes only the rest
    task = FakeTask([6, 7])
    records, cb = _collector()
    GridSearchTuner(task).tune(n_trial=38, measure_option=FakeMeasure([0, 0]).option(),
                               callbacks=[cb])
    tuner = RandomTuner(task, seed=0)
    tuner.load_history(records)
    meas = FakeMeasure([0, 0], n_parallel=3)
    tuner.tune(n_trial=50, measure_option=meas.option())
    assert sorted(meas.measured) == list(range(38, 42))


# ---- early stopping, failures -------------------------------------------------------------------
def test_early_stopping():
    # grid order with the optimum at index 0: no improvement afterwards
    meas = FakeMeasure([0, 0], n_parallel=1)
    tuner = GridSearchTuner(FakeTask([10, 10]))
    tuner.tune(n_trial=100, measure_option=meas.option(), early_stopping=5)
    assert len(meas.measured) == 5
    assert tuner.best_config.index == 0
    # an improvement late restarts the count
    meas = FakeMeasure([7, 0], n_parallel=1)
    tuner = GridSearchTuner(FakeTask([10, 10]))
    tuner.tune(n_trial=100, measure_option=meas.option(), early_stopping=5)
    assert len(meas.measured) == 7 + 5
    assert tuner.best_config.index == 7


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_early_stopping_rejected(bad):
    with pytest.raises(ValueError):
        GridSearchTuner(FakeTask([3])).tune(5, FakeMeasure([0]).option(), early_stopping=bad)


def test_failures_do_not_stop_tuning():
    dims = [6, 6]
    target = [3, 4]
    best = knob2point(target, dims)
    fail = {best, 0, 1, 2, 5, 11, 20}
    meas = FakeMeasure(target, fail=fail, n_parallel=4)
    tuner = RandomTuner(FakeTask(dims), seed=0)
    tuner.tune(n_trial=36, measure_option=meas.option())
    assert len(set(meas.measured)) == 36
    # the failed optimum is never the best; the runners-up at distance 1 are
    assert tuner.best_config.index not in fail
    assert tuner.best_flops == pytest.approx(FLOP / 2e-3)


def test_all_failures():
    meas = FakeMeasure([0, 0], fail=set(range(16)), n_parallel=2)
    tuner = GATuner(FakeTask([4, 4]), pop_size=4, seed=0)
    tuner.tune(n_trial=16, measure_option=meas.option())
    assert sorted(meas.measured) == list(range(16))
    assert tuner.best_config is None and tuner.best_flops == 0.0


def test_zero_flop_task_ranks_by_time():
    task = FakeTask([5, 5])
    task.flop = 0
    meas = FakeMeasure([2, 3], n_parallel=5)
    tuner = GridSearchTuner(task)
    tuner.tune(n_trial=25, measure_option=meas.option())
    assert tuner.best_config.index == knob2point([2, 3], [5, 5])


def test_malformed_costs_count_as_failure():
    def weird(inputs):
        return [MeasureResult(("fast",), 0, 0.0, 0.0) for _ in inputs]

    tuner = GridSearchTuner(FakeTask([3]))
    tuner.tune(3, {"measure_batch": weird})
    assert tuner.best_config is None and len(tuner.visited) == 3


def test_bad_arguments():
    task = FakeTask([4])
    opt = FakeMeasure([0]).option()
    with pytest.raises(ValueError):
        RandomTuner(task).tune(-1, opt)
    with pytest.raises(TypeError):
        RandomTuner(task).tune(2.5, opt)
    with pytest.raises(TypeError):
        RandomTuner(task).tune(3, ["not", "a", "dict"])
    with pytest.raises(TypeError):
        RandomTuner(task).tune(3, {"measure_batch": 42})
    with pytest.raises(TypeError):
        RandomTuner(task).tune(3, opt, callbacks=[None])
    with pytest.raises(TypeError):
        RandomTuner(object())
    with pytest.raises(ValueError):
        GATuner(task, pop_size=0)
    with pytest.raises(ValueError):
        GATuner(task, mutation_prob=1.5)
    with pytest.raises(NotImplementedError):
        Tuner(task).tune(1, opt)

    def short(inputs):
        return []

    with pytest.raises(RuntimeError, match="0 results for"):
        RandomTuner(task).tune(3, {"measure_batch": short})


def test_zero_trials_measures_nothing():
    meas = FakeMeasure([0])
    tuner = RandomTuner(FakeTask([4]))
    tuner.tune(0, meas.option())
    assert meas.measured == [] and tuner.best_config is None


# ---- resume from history ------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [RandomTuner, GridSearchTuner, GATuner])
def test_resume_from_history_measures_no_config_twice(cls):
    dims = [6, 5, 4]
    target = [5, 0, 3]
    task = FakeTask(dims)
    records, cb = _collector()
    meas1 = FakeMeasure(target, n_parallel=4)
    kw = {"pop_size": 10} if cls is GATuner else {}
    cls(task, seed=1, **kw).tune(n_trial=40, measure_option=meas1.option(), callbacks=[cb]) \
        if cls is not GridSearchTuner else cls(task).tune(
            n_trial=40, measure_option=meas1.option(), callbacks=[cb])
    # "restart" a fresh tuner with the records, plus records of another task (ignored)
    other = FakeTask(dims, name="other")
    other_records, other_cb = _collector()
    RandomTuner(other, seed=9).tune(30, FakeMeasure(target).option(), callbacks=[other_cb])
    tuner = cls(task, **({"pop_size": 10} if cls is GATuner else {}))
    tuner.load_history(records + other_records)
    assert tuner.num_history == 40
    assert tuner.best_flops == pytest.approx(max(meas1.flops))
    meas2 = FakeMeasure(target, n_parallel=4)
    tuner.tune(n_trial=60, measure_option=meas2.option())
    assert len(meas2.measured) == 60
    assert not set(meas1.measured) & set(meas2.measured)
    assert len(set(meas2.measured)) == 60
    # then to the end of the space: exactly the rest
    tuner.tune(n_trial=1000, measure_option=meas2.option())
    assert sorted(meas1.measured + meas2.measured) == list(range(120))
    assert tuner.best_config.index == knob2point(target, dims)


def test_ga_resumed_breeds_from_history():
    dims = [10, 10, 10]
    target = _target(dims, np.random.default_rng(11))
    task = FakeTask(dims)
    records, cb = _collector()
    hist = FakeMeasure(target, n_parallel=10)
    RandomTuner(task, seed=2).tune(100, hist.option(), callbacks=[cb])
    tuner = GATuner(task, pop_size=20, seed=2)
    tuner.load_history(records)
    assert len(tuner.genes) == 20 and tuner.scores == sorted(hist.flops, reverse=True)[:20]
    meas = FakeMeasure(target, n_parallel=10)
    tuner.tune(20, meas.option())
    assert tuner.generation == 1  # the first generation was bred, not random
    assert np.mean(meas.flops) > 1.2 * np.mean(hist.flops)
    assert not set(meas.measured) & set(hist.measured)


def test_history_best_kept_when_new_trials_are_worse():
    dims = [10, 10]
    task = FakeTask(dims)
    records, cb = _collector()
    GridSearchTuner(task, range_idx=(0, 9)).tune(10, FakeMeasure([0, 0]).option(),
                                                 callbacks=[cb])
    tuner = GridSearchTuner(task)
    tuner.load_history(records)
    tuner.tune(20, FakeMeasure([0, 0]).option())
    assert tuner.best_config.index == 0
    assert tuner.best_measure_pair[0].config.index == 0


# ---- callbacks ----------------------------------------------------------------------------------
def test_progress_bar_output():
    out = io.StringIO()
    meas = FakeMeasure([1, 1], n_parallel=3)
    tuner = GridSearchTuner(FakeTask([4, 4]))
    tuner.tune(8, meas.option(), callbacks=[callback.progress_bar(8, prefix="[t1]", stream=out)])
    text = out.getvalue()
    frames = text.split("\r")[1:]
    assert len(frames) == 3  # one redraw per batch
    assert all(f.startswith("[t1] Current/Best:") for f in frames)
    assert "(3/8)" in frames[0] and "(6/8)" in frames[1] and "(8/8)" in frames[2]
    assert text.count("Done.") == 1 and text.endswith(" Done.\n")
    best = float(frames[-1].split("Current/Best:")[1].split("GFLOPS")[0].split("/")[1])
    assert best == pytest.approx(tuner.best_flops / 1e9, abs=0.01)


def test_progress_bar_done_on_early_stop_and_exhaustion():
    out = io.StringIO()
    tuner = GridSearchTuner(FakeTask([10]))
    tuner.tune(100, FakeMeasure([0], n_parallel=1).option(), early_stopping=3,
               callbacks=[callback.progress_bar(100, stream=out)])
    assert out.getvalue().endswith("(3/100) | " + out.getvalue().split("| ")[-1])
    assert out.getvalue().count("Done.\n") == 1
    out = io.StringIO()
    tuner = RandomTuner(FakeTask([5]))
    tuner.tune(100, FakeMeasure([0], n_parallel=2).option(),
               callbacks=[callback.progress_bar(100, stream=out)])
    assert "(5/100)" in out.getvalue() and out.getvalue().count("Done.\n") == 1


def test_progress_bar_bad_args():
    with pytest.raises(ValueError):
        callback.progress_bar(-1)
    with pytest.raises(ValueError):
        callback.progress_bar(5, si_prefix="X")


def test_log_to_file_bad_args(tmp_path):
    with pytest.raises(TypeError):
        callback.log_to_file(12)
    with pytest.raises(FileNotFoundError):
        callback.log_to_file(str(tmp_path / "missing_dir" / "x.log"))


# ---- a real template's ConfigSpace --------------------------------------------------------------
SPLIT_TEMPLATE = "test_tuner/split_scale"
APPLIED: list = []  # configs the template ran with (apply_history_best test)


@template(SPLIT_TEMPLATE)
def split_scale(n, m):
    a = te.placeholder((n, m), name="A")
    b = te.compute((n, m), lambda i, j: a[i, j] * 2.0, name="B")
    s = te.create_schedule(b.op)
    i, j = s[b].op.axis
    cfg = get_config()
    APPLIED.append(cfg)
    cfg.define_split("tile_i", i, num_outputs=3)
    cfg.define_split("tile_j", j, num_outputs=2)
    cfg.define_knob("unroll", [0, 1])
    io, ii, iii = cfg["tile_i"].apply(s, b, i)
    jo, ji = cfg["tile_j"].apply(s, b, j)
    s[b].reorder(io, jo, ii, iii, ji)
    if cfg["unroll"].val:
        s[b].unroll(iii)
    return s, [a, b]


def _split_task():
    return autotvm.task.create(SPLIT_TEMPLATE, (64, 48), "llvm")


class SplitMeasure(FakeMeasure):
    """Cost = 1e-3 * (1 + sum over inner split factors of |log2(size) - log2(hidden size)|
    + |unroll - hidden unroll|): the hidden configuration is the unique optimum."""

    def __init__(self, hidden, delay=0.0, **kw):
        super().__init__([0], **kw)
        self.hidden = hidden
        self.delay = delay

    def _vec(self, cfg):
        # size[0] is -1 ("the rest"): the inner factors determine the split
        return np.array([*np.log2(cfg["tile_i"].size[1:]), *np.log2(cfg["tile_j"].size[1:]),
                         cfg["unroll"].val], dtype=np.float64)

    def cost(self, knobs):
        raise AssertionError("unused")

    def __call__(self, inputs):
        self.batches.append(len(inputs))
        time.sleep(self.delay)
        out = []
        for inp in inputs:
            self.measured.append(inp.config.index)
            c = 1e-3 * (1.0 + float(np.abs(self._vec(inp.config) - self._vec(self.hidden)).sum()))
            out.append(MeasureResult((c,), MeasureErrorNo.NO_ERROR, 0.01, time.time()))
            self.flops.append(inp.task.flop / c)
        return out


@pytest.mark.parametrize("seed", [0, 1])
def test_tuners_find_hidden_split_of_real_template(seed):
    task = _split_task()
    space = task.config_space
    assert space.dims() == [28, 10, 2] and len(space) == 560
    assert task.flop > 0
    hidden = space.get(int(np.random.default_rng(seed).integers(0, len(space))))
    for make, budget in ((lambda t: RandomTuner(t, seed=seed), 560), (GridSearchTuner, 560),
                         (lambda t: GATuner(t, pop_size=20, seed=seed), 200)):
        meas = SplitMeasure(hidden, n_parallel=4)
        tuner = make(task)
        tuner.tune(budget, meas.option())
        assert tuner.best_config.index == hidden.index, make
        assert tuner.best_flops == pytest.approx(task.flop / 1e-3)
        assert len(set(meas.measured)) == len(meas.measured) == budget


# ---- log_to_file, resume, apply_history_best --------------------------------------------------
def test_log_to_file_one_flushed_line_per_measurement(tmp_path):
    task = _split_task()
    log = tmp_path / "tune.log"
    on_disk = []

    def count_lines(_tuner, _inputs, _results):  # runs while tuning goes on
        with open(log, encoding="utf-8") as f:
            on_disk.append(sum(1 for _ in f))

    meas = SplitMeasure(task.config_space.get(77), n_parallel=3)
    RandomTuner(task, seed=0).tune(
        10, meas.option(), callbacks=[callback.log_to_file(str(log)), count_lines]
    )
    assert on_disk == [3, 6, 9, 10]
    recs = record.load_from_file(log)
    assert [inp.config.index for inp, _ in recs] == meas.measured
    assert [res.costs[0] for _, res in recs] == pytest.approx(
        [task.flop / f for f in meas.flops])
    assert all(inp.task.workload == task.workload for inp, _ in recs)
    # a file object works too, and is left open
    buf = io.StringIO()
    GridSearchTuner(task).tune(4, meas.option(), callbacks=[callback.log_to_file(buf)])
    lines = buf.getvalue().splitlines()
    assert len(lines) == 4 and not buf.closed
    assert [record.decode(x)[0].config.index for x in lines] == [0, 1, 2, 3]


class Killed(Exception):
    pass


def test_interrupted_run_resumes_from_log(tmp_path):
    task = _split_task()
    log = tmp_path / "tune.log"
    hidden = task.config_space.get(301)
    meas = SplitMeasure(hidden, n_parallel=4)

    def dies_in_batch_4(inputs):
        if len(meas.batches) == 3:
            raise Killed
        return meas(inputs)

    with pytest.raises(Killed):
        GATuner(task, pop_size=10, seed=0).tune(
            100, {"measure_batch": dies_in_batch_4, "n_parallel": 4},
            callbacks=[callback.log_to_file(log)])
    # the completed batches are on disk; a line cut by the kill is skipped with a warning
    with open(log, "a", encoding="utf-8") as f:
        f.write('{"input": ["llvm", "test_tuner/spl')
    with pytest.warns(UserWarning, match="truncated"):
        recs = record.load_from_file(log)
    assert [inp.config.index for inp, _ in recs] == meas.measured and len(recs) == 12
    first = list(meas.measured)
    for cls in (RandomTuner, GATuner, GridSearchTuner):
        tuner = cls(task)
        tuner.load_history(recs)
        assert tuner.num_history == 12
        assert tuner.best_flops == pytest.approx(max(meas.flops))
        meas2 = SplitMeasure(hidden, n_parallel=4)
        tuner.tune(40 - tuner.num_history, meas2.option())
        assert len(meas2.measured) == 28
        assert not set(first) & set(meas2.measured)
        assert len(set(meas2.measured)) == 28


_KILL_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import test_tuner as T
from tvmpy.autotvm import callback
from tvmpy.autotvm.tuner import RandomTuner
task = T._split_task()
meas = T.SplitMeasure(task.config_space.get(5), delay=0.05, n_parallel=2)
print("start", flush=True)
RandomTuner(task, seed=1).tune(500, meas.option(), callbacks=[callback.log_to_file({log!r})])
"""


def test_kill_9_loses_at_most_the_batch_in_flight(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    log = tmp_path / "killed.log"
    script = _KILL_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__)), log=str(log))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 50
        while time.time() < deadline:
            if log.exists() and log.read_text().count("\n") >= 8:
                break
            if proc.poll() is not None:
                pytest.fail(f"tuning process died: {proc.stderr.read()[-2000:]}")
            time.sleep(0.02)
        else:
            pytest.fail("tuning process wrote no log in time")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    text = log.read_text()
    full = text.count("\n")
    assert 8 <= full < 500
    recs = record.load_from_lines(text.splitlines()[:full])
    assert len(recs) == full  # every completed line decodes
    seen = [inp.config.index for inp, _ in recs]
    assert len(set(seen)) == full
    task = _split_task()
    tuner = RandomTuner(task, seed=1)
    tuner.load_history(recs)
    meas = SplitMeasure(task.config_space.get(5), n_parallel=2)
    tuner.tune(30, meas.option())
    assert not set(seen) & set(meas.measured) and len(set(meas.measured)) == 30


def test_apply_history_best_picks_tuned_best(tmp_path):
    task = _split_task()
    log = tmp_path / "best.log"
    hidden = task.config_space.get(123)
    meas = SplitMeasure(hidden, n_parallel=4)
    # 30 trials of GA, then resume with Random: both runs append to one log
    tuner = GATuner(task, pop_size=10, seed=4)
    tuner.tune(30, meas.option(), callbacks=[callback.log_to_file(log)])
    tuner2 = RandomTuner(task, seed=4)
    tuner2.load_history(record.load_from_file(log))
    tuner2.tune(30, meas.option(), callbacks=[callback.log_to_file(log)])
    assert len(record.load_from_file(log)) == 60 == len(set(meas.measured))
    best = max(tuner.best_flops, tuner2.best_flops)
    assert tuner2.best_flops == best
    APPLIED.clear()
    with autotvm.apply_history_best(str(log)):
        split_scale(64, 48)
    assert APPLIED[-1].index == tuner2.best_config.index
    assert APPLIED[-1]["tile_i"].size == tuner2.best_config["tile_i"].size


# ---- integration: real builder and runner ------------------------------------------------------
MATMUL_TEMPLATE = "test_tuner/matmul"


@template(MATMUL_TEMPLATE)
def tuner_matmul(n, l, m, dtype):
    a = te.placeholder((n, l), name="A", dtype=dtype)
    b = te.placeholder((l, m), name="B", dtype=dtype)
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    s = te.create_schedule(c.op)
    y, x = s[c].op.axis
    cfg = get_config()
    APPLIED.append(cfg)
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, c, y)
    xo, xi = cfg["tile_x"].apply(s, c, x)
    s[c].reorder(yo, xo, k, yi, xi)
    return s, [a, b, c]


def test_tune_matmul_with_local_builder_and_runner(tmp_path):
    import tvmpy as tvm
    from tvmpy.target import Target

    task = autotvm.task.create(MATMUL_TEMPLATE, (24, 20, 40, "float32"), "llvm")
    assert len(task.config_space) == 8 * 8 and task.flop == 2 * 24 * 20 * 40
    log = tmp_path / "mm.log"
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2),
                                    runner=autotvm.LocalRunner(number=2, repeat=2))
    out = io.StringIO()
    rt = RandomTuner(task, seed=0)
    rt.tune(8, option, callbacks=[callback.log_to_file(log),
                                  callback.progress_bar(8, prefix="[mm]", stream=out)])
    gt = GATuner(task, pop_size=4, seed=0)
    gt.load_history(record.load_from_file(log))
    gt.tune(8, option, callbacks=[callback.log_to_file(log)])
    recs = record.load_from_file(log)
    assert len(recs) == 16
    assert len({inp.config.index for inp, _ in recs}) == 16
    ok = [(inp, res) for inp, res in recs if res.error_no == 0]
    assert len(ok) == 16, [res for _, res in recs if res.error_no != 0]
    assert all(len(res.costs) == 2 and min(res.costs) > 0 for _, res in ok)
    assert out.getvalue().endswith("(8/8) | " + out.getvalue().split("| ")[-1])
    best_inp, best_res = max(ok, key=lambda r: task.flop / np.mean(r[1].costs))
    assert gt.best_flops == pytest.approx(task.flop / np.mean(best_res.costs))
    assert gt.best_config.index == best_inp.config.index
    # the best record drives the template; the result still computes the product
    APPLIED.clear()
    with autotvm.apply_history_best(str(log)), Target("llvm"):
        s, args = tuner_matmul(24, 20, 40, "float32")
        f = tvm.build(s, args, "llvm")
    assert APPLIED[-1].index == best_inp.config.index
    rng = np.random.default_rng(0)
    a = rng.standard_normal((24, 20)).astype("float32")
    b = rng.standard_normal((20, 40)).astype("float32")
    c = tvm.nd.array(np.zeros((24, 40), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)
