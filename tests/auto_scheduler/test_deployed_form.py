"""A workload measured in its deployed form (workload_registry.deployed_program): candidates,
the runner's reference, the default-schedule line and the re-timing after the search all time
the program the schedule runs in once deployed, costs divided by ``deployed_runs``; the rnn cell
is measured as the recurrence kernel over ``MEASURE_STEPS`` steps (issue 28 point 2)."""

from __future__ import annotations

import numpy as np

from tvmpy import auto_scheduler, te
from tvmpy.auto_scheduler import relay_integration
from tvmpy.auto_scheduler.loop_state import State
from tvmpy.auto_scheduler.measure import MeasureErrorNo, ProgramMeasurer, _MeasureTask
from tvmpy.auto_scheduler.workload_registry import deployed_runs
from tvmpy.topi import rnn

N = 517  # odd, prime: no tile divides it
RUNS = 10 ** 9  # a call takes far more than 1e-9 s: a cost below that was divided by RUNS
HOOK_CALLS: list[str] = []


def _scaled(n, factor, name):
    a = te.placeholder((n,), "float32", "A")
    return [a, te.compute((n,), lambda i: a[i] * factor, name=name)]


def _program(n, factor):
    a, b = _scaled(n, factor, "deployed")
    return te.create_schedule(b.op), [a, b]


@auto_scheduler.register_workload("test_deployed.hooked")
def hooked(n):
    """Computes A * 2, but is deployed as (and its default is) a program computing A * 3."""
    return _scaled(n, 2.0, "B")


def _hooked_deployed(sch, tensors, n):
    HOOK_CALLS.append("hooked")
    return _program(n, 3.0)


hooked.deployed_program = _hooked_deployed
hooked.default_schedule = lambda n: _program(n, 3.0)
hooked.deployed_runs = RUNS


@auto_scheduler.register_workload("test_deployed.checked")
def checked(n):
    """Deployed as itself, but its default (in deployed form) computes A * 3: every candidate
    differs from that reference."""
    return _scaled(n, 2.0, "B")


checked.deployed_program = lambda sch, tensors, n: (sch, tensors)
checked.default_schedule = lambda n: _program(n, 3.0)


def _measure(task, states):
    m = ProgramMeasurer(task, builder=auto_scheduler.LocalBuilder(n_parallel=1),
                        runner=auto_scheduler.LocalRunner(number=2, repeat=1))
    try:
        return m.measure(None, states)
    finally:
        m.close()


def _split_states(task):
    dag = task.compute_dag
    empty = State(dag, [])
    split = State(dag, [])
    split.split(1, split.stages[1].iters[0], [16])
    return [empty, split]


def test_candidates_are_built_and_checked_as_the_deployed_program():
    """The candidates of ``hooked`` (A * 2) are built through its hook (A * 3) and so match the
    reference (its default, A * 3); their costs are divided by its runs."""
    task = auto_scheduler.SearchTask(func=hooked, args=(N,), target="llvm")
    res = _measure(task, _split_states(task))
    assert [r.error_no for r in res] == [0, 0], [r.error_msg for r in res]
    assert all(0 < c < 1e-9 for r in res for c in r.costs)


def test_the_reference_is_the_default_in_deployed_form():
    task = auto_scheduler.SearchTask(func=checked, args=(N,), target="llvm")
    res = _measure(task, _split_states(task))
    assert [r.error_no for r in res] == [MeasureErrorNo.WRONG_ANSWER] * 2
    assert "differ from the reference" in res[0].error_msg


def test_default_line_and_retiming_use_the_deployed_form(tmp_path):
    task = auto_scheduler.SearchTask(func=hooked, args=(N,), target="llvm")
    log = str(tmp_path / "log.json")
    state = _split_states(task)[1]
    auto_scheduler.save_records(log, [auto_scheduler.MeasureInput(task, state)],
                                [auto_scheduler.MeasureResult((1e-10,), 0, "", 0.0, 0.0)])
    costs = relay_integration.measure_default_schedules([task], log, number=2, repeat=1,
                                                        min_repeat_ms=1)
    assert 0 < costs[0] < 1e-9  # per run
    HOOK_CALLS.clear()
    ratio = relay_integration.recheck_default_schedules([task], log, rounds=1, number=2,
                                                        min_repeat_ms=1)
    assert HOOK_CALLS == ["hooked"] and ratio[0] > 0
    ctx = auto_scheduler.ApplyHistoryBest(log)
    assert ctx.best_of(task.target, task.workload_key) is not None


def test_plain_workload_is_measured_as_itself():
    @auto_scheduler.register_workload("test_deployed.plain")
    def plain(n):
        return _scaled(n, 2.0, "B")

    task = auto_scheduler.SearchTask(func=plain, args=(N,), target="llvm")
    assert deployed_runs(task.workload_key) == 1
    mt = _MeasureTask(task)
    sch, args = mt.instantiate([])
    assert args == list(task.compute_dag.tensors)
    assert [r.error_no for r in _measure(task, _split_states(task))] == [0, 0]


# ---- the rnn cell --------------------------------------------------------------------------------
def _cell_task(cell, n, hidden, lbr):
    hp = -(-hidden // rnn.PAD) * rnn.PAD
    return auto_scheduler.SearchTask(workload_key=rnn.rnn_cell_key(cell, n, hidden, hp, lbr),
                                     target="llvm")


def _externs(args):
    seen, stack, out = set(), [t.op for t in args], []
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if op.tag == "rnn_scan":
            out.append(op)
        stack.extend(t.op for t in op.input_tensors)
    return out


def test_cell_candidate_is_the_stepped_kernel_and_the_reference_the_untuned_one():
    task = _cell_task("LSTM", 3, 20, True)
    mt = _MeasureTask(task)
    state = auto_scheduler.sample_initial_population(task, 1, seed=3)[0]
    _, cand = mt.instantiate([s.to_record() for s in state.transform_steps])
    _, ref = mt.instantiate(None)
    (c,), (r,) = _externs(cand), _externs(ref)
    assert c.name == "lstm_scan_tuned" and r.name == "lstm_scan"
    assert [tuple(int(d) for d in t.shape) for t in cand] == \
        [tuple(int(d) for d in t.shape) for t in ref]
    assert int(cand[0].shape[0]) == rnn.MEASURE_STEPS == deployed_runs(task.workload_key)


def test_cell_candidates_match_the_untuned_kernel_over_the_steps():
    """Random sketches of each cell kind, measured as the stepped kernel, pass the check
    against the untuned kernel's outputs over the same steps."""
    for cell, lbr in [("LSTM", True), ("GRU", True), ("GRU", False)]:
        task = _cell_task(cell, 2, 19, lbr)
        states = auto_scheduler.sample_initial_population(task, 2, seed=5)
        res = _measure(task, states)
        assert [r.error_no for r in res] == [0] * len(states), [r.error_msg for r in res]


def test_slow_cell_candidate_is_not_applied_over_the_default(tmp_path):
    """The naive cell (no schedule: serial scalar GEMVs), measured and logged by the search's
    measurer, loses to the default line and the re-timing: ApplyHistoryBest keeps the untuned
    kernel."""
    task = _cell_task("LSTM", 1, 64, True)
    log = str(tmp_path / "cell.json")
    m = ProgramMeasurer(task, builder=auto_scheduler.LocalBuilder(n_parallel=1),
                        runner=auto_scheduler.LocalRunner(number=3, repeat=2, min_repeat_ms=5),
                        callbacks=[auto_scheduler.RecordToFile(log)])
    try:
        (res,) = m.measure(None, [State(task.compute_dag, [])])
    finally:
        m.close()
    assert res.error_no == 0, res.error_msg
    relay_integration.measure_default_schedules([task], log, number=3, repeat=2, min_repeat_ms=5)
    ratio = relay_integration.recheck_default_schedules([task], log, rounds=3, number=3,
                                                        min_repeat_ms=5)
    assert ratio[0] < 1
    assert auto_scheduler.ApplyHistoryBest(log).query(task.target, task.workload_key) is None


def test_records_from_before_still_load(tmp_path):
    """A log written before the deployed form (a record and a default line of the cell, in the
    unchanged record format) still loads and its record applies when it is the faster."""
    task = _cell_task("GRU", 1, 16, False)
    state = auto_scheduler.sample_initial_population(task, 1, seed=1)[0]
    log = str(tmp_path / "old.json")
    auto_scheduler.save_records(log, [auto_scheduler.MeasureInput(task, state)],
                                [auto_scheduler.MeasureResult((2e-6,), 0, "", 0.0, 0.0)])
    from tvmpy.auto_scheduler.measure_record import dump_default_record

    with open(log, "a") as f:
        f.write(dump_default_record(task.workload_key, task.target, [3e-6]) + "\n")
    ctx = auto_scheduler.ApplyHistoryBest(log)
    assert ctx.query(task.target, task.workload_key) is not None
    inp, res = next(iter(auto_scheduler.load_records(log)))
    assert np.isclose(res.costs[0], 2e-6)
