"""End to end: a random search measures candidates with autotvm's builder and runner (each
checked against the untransformed schedule's outputs), logs them, and ``apply_best`` gives a
schedule that builds and equals numpy and is faster than the default schedule measured in the
same run."""

from __future__ import annotations

import json

import numpy as np
from as_workloads import make_task, matmul

import tvmpy as tvm
from tvmpy import auto_scheduler
from tvmpy.auto_scheduler.measure import ProgramMeasurer


def _mean(costs):
    return sum(costs) / len(costs)


def test_random_search_end_to_end(tmp_path):
    task = make_task(matmul, (64, 64, 64))
    log = str(tmp_path / "matmul.json")
    builder = auto_scheduler.LocalBuilder(timeout=120, n_parallel=2)
    runner = auto_scheduler.LocalRunner(number=5, repeat=3)
    opts = auto_scheduler.TuningOptions(num_measure_trials=8, num_measures_per_round=8,
                                        builder=builder, runner=runner, verbose=0,
                                        measure_callbacks=[auto_scheduler.RecordToFile(log)])
    policy = auto_scheduler.RandomSearch(task, seed=1, verbose=0)
    task.tune(opts, search_policy=policy)
    lines = [json.loads(x) for x in open(log).read().splitlines()]
    assert len(lines) == 8
    assert all(rec["r"][1] == 0 for rec in lines), [rec["r"] for rec in lines]
    assert policy.build_times and policy.best_state is not None

    sch, args = task.apply_best(log)
    f = tvm.build(sch, args, "llvm")
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (64, 64)).astype("float32") for _ in range(2))
    out = tvm.nd.array(np.zeros((64, 64), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)

    # the best record against the default schedule, both measured now by the same runner
    best, _ = auto_scheduler.load_best_record(log, task.workload_key)
    for _ in range(3):  # the machine is shared: compare the best of a few rounds
        m = ProgramMeasurer(task, auto_scheduler.LocalBuilder(timeout=120, n_parallel=1),
                            auto_scheduler.LocalRunner(number=5, repeat=3))
        try:
            d, t = m.measure(None, [task.compute_dag.init_state(), best.state])
        finally:
            m.close()
        assert d.error_no == 0 and t.error_no == 0
        if min(t.costs) < min(d.costs):
            break
    assert min(t.costs) < min(d.costs), (t.costs, d.costs)


def test_measure_task_travels_by_value_and_replays():
    import pickle

    from as_workloads import matmul_relu

    from tvmpy.auto_scheduler.measure import _MeasureTask

    task = make_task(matmul_relu, (9, 7, 5))
    state = auto_scheduler.sample_initial_population(task, 1, seed=0)[0]
    mt = pickle.loads(pickle.dumps(_MeasureTask(task)))
    # the runner's reference (None): a plain workload's untransformed schedule
    assert mt.workload_key == task.workload_key and mt.config_space.get(0) is None
    _, ref_args = mt.instantiate(None)
    assert [t.name for t in ref_args] == ["A", "B", "D"]
    sch, args = mt.instantiate([s.to_record() for s in state.transform_steps])
    assert [t.name for t in args] == ["A", "B", "D"]


def test_search_stops_when_the_space_is_exhausted(tmp_path):
    from as_workloads import elementwise

    task = make_task(elementwise, (1, 3))
    log = str(tmp_path / "ew.json")
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=200, num_measures_per_round=16, verbose=0,
        builder=auto_scheduler.LocalBuilder(timeout=120, n_parallel=2),
        measure_callbacks=[auto_scheduler.RecordToFile(log)])
    policy = auto_scheduler.RandomSearch(task, seed=0, verbose=0)
    task.tune(opts, search_policy=policy)
    n = len(open(log).read().splitlines())
    assert 0 < n < 200 and n == len(policy.measured)
    sch, args = task.apply_best(log)
    assert [t.name for t in args] == ["A", "B", "E"]
