"""The log format: TVM's record lines, written and read back, best-record selection."""

from __future__ import annotations

import json
import random

from as_workloads import check_state, make_task, matmul, row_sum

from tvmpy import auto_scheduler
from tvmpy.auto_scheduler import MeasureInput, MeasureResult, generate_sketches
from tvmpy.auto_scheduler.measure_record import dump_record_to_string, load_record_from_string
from tvmpy.auto_scheduler.sketch_policy import annotate
from tvmpy.runtime.parallel_pool import num_threads
from tvmpy.target.target import target_as_built


def _states(task, n, seed=0):
    rng = random.Random(seed)
    sk = generate_sketches(task)
    return [annotate(sk[k % len(sk)], rng, task.hardware_params) for k in range(n)]


def test_round_trip(tmp_path):
    task = make_task(matmul, (13, 8, 6))
    states = _states(task, 4)
    log = str(tmp_path / "log.json")
    results = [MeasureResult((3e-4, 2e-4), 0, "", 0.5, 1.0), MeasureResult((), 5, "wrong", 0.1, 2.0),
               MeasureResult((1e-4,), 0, "", 0.3, 3.0), MeasureResult((5e-4,), 0, "", 0.3, 4.0)]
    auto_scheduler.RecordToFile(log)(None, [MeasureInput(task, s) for s in states], results)
    lines = open(log).read().splitlines()
    assert len(lines) == 4
    rec = json.loads(lines[0])
    assert rec["i"][0][:2] == [task.workload_key, target_as_built("llvm")] and rec["v"] == "v0.6"
    # TVM's hardware-parameter array: num_cores is the thread count the record was measured at
    assert rec["i"][0][2][0] == num_threads() and len(rec["i"][0][2]) == 8
    assert rec["r"][:2] == [[3e-4, 2e-4], 0]
    assert rec["i"][1][1] == [s.to_record() for s in states[0].transform_steps]
    loaded = list(auto_scheduler.load_records(log))
    assert [r.error_no for _, r in loaded] == [0, 5, 0, 0]
    for (inp, _), st in zip(loaded, states):
        assert inp.task.workload_key == task.workload_key
        assert inp.state.transform_steps == st.transform_steps
        check_state(task, inp.state)
    best, res = auto_scheduler.load_best_record(log, task.workload_key)
    assert res.costs == (1e-4,) and best.state.transform_steps == states[2].transform_steps
    sch, args = task.apply_best(log)
    assert [t.name for t in args] == ["A", "B", "C"]
    # a line written again reads back identically
    assert dump_record_to_string(*load_record_from_string(lines[2])) == lines[2]


def test_bad_lines_are_skipped_and_other_workloads_ignored(tmp_path, caplog):
    task = make_task(matmul, (5, 4, 3))
    other = make_task(row_sum, (2, 9))
    log = str(tmp_path / "log.json")
    auto_scheduler.save_records(log, [MeasureInput(other, _states(other, 1)[0])],
                                [MeasureResult((1e-9,), 0, "", 0.1, 1.0)])
    with open(log, "a") as f:
        f.write("{not json\n")
        f.write("[" * 100_000 + "]" * 100_000 + "\n")  # nested too deeply for json
        f.write(json.dumps({"i": [[task.workload_key, "llvm"], [[], [["ZZ", 1]]]],
                            "r": [[1e-9], 0, 0.1, 1.0], "v": "v0.6"}) + "\n")
    auto_scheduler.save_records(log, [MeasureInput(task, _states(task, 1)[0])],
                                [MeasureResult((2e-3,), 0, "", 0.1, 1.0)])
    recs = list(auto_scheduler.load_records(log))
    assert len(recs) == 2 and "skipped a bad record" in caplog.text
    inp, res = auto_scheduler.load_best_record(log, task.workload_key)
    assert res.costs == (2e-3,) and inp.task.workload_key == task.workload_key
    assert auto_scheduler.load_best_record(log, json.dumps(["matmul", 1, 1, 1])) == (None, None)
