"""A LocalRunner shared by tasks that alternate (the TaskScheduler with one ``runner=``) keeps
each task's reference outputs (bounded, most recently used): a reference is built once per task,
not on every switch, and each candidate is still checked against its own task's reference."""

from __future__ import annotations

import pytest
from as_workloads import make_task, matmul, matmul_relu

from tvmpy import auto_scheduler
from tvmpy.auto_scheduler.measure import _MeasureTask
from tvmpy.autotvm.measure import measure as atm

WRONG = int(atm.MeasureErrorNo.WRONG_ANSWER)


def _inputs(mt, state):
    return [atm.MeasureInput("llvm", mt, [s.to_record() for s in state.transform_steps])]


@pytest.mark.parametrize("cache,expect_builds", [(2, 2), (16, 2), (1, 6)])
def test_shared_runner_keeps_each_tasks_reference(cache, expect_builds):
    # the same argument shapes: a reference of the other task would be a WRONG_ANSWER
    tasks = [make_task(matmul, (8, 9, 7)), make_task(matmul_relu, (8, 9, 7))]
    mts = [_MeasureTask(t) for t in tasks]
    states = [auto_scheduler.sample_initial_population(t, 3, seed=k) for k, t in enumerate(tasks)]
    builder = auto_scheduler.LocalBuilder(timeout=300, n_parallel=1)
    ref_builds = []
    build = builder.build

    def counting_build(inputs):
        ref_builds.extend(i.task.name for i in inputs if i.config is None)
        return build(inputs)

    builder.build = counting_build
    runner = auto_scheduler.LocalRunner(timeout=60, reference_cache_size=cache)
    runner.set_task(mts[0], builder)
    try:
        for rnd in range(3):
            for mt, sts in zip(mts, states):
                inputs = _inputs(mt, sts[rnd])
                (res,) = runner.run(inputs, build(inputs))
                assert res.error_no == 0, res.costs
        assert ref_builds == [mt.name for mt in mts] * (expect_builds // 2)
        # checked against its own task's reference: matmul_relu's library run as matmul's
        runner._drop_worker()  # a new runner process gets the kept reference again
        (res,) = runner.run(_inputs(mts[0], states[0][0]), build(_inputs(mts[1], states[1][0])))
        assert res.error_no == WRONG and "differ from the reference" in res.costs[0]
        (res,) = runner.run(_inputs(mts[1], states[1][1]), build(_inputs(mts[1], states[1][1])))
        assert res.error_no == 0
        assert len(ref_builds) == expect_builds + (0 if cache > 1 else 2)
    finally:
        runner.close()
        builder.close()


def test_reference_cache_size_must_be_positive():
    with pytest.raises(ValueError, match="reference_cache_size must be a positive int"):
        auto_scheduler.LocalRunner(reference_cache_size=0)
