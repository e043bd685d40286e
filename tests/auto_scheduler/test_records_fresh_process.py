"""``load_records`` in a process that imported only ``tvmpy.auto_scheduler``: a record of the rnn
cell (registered by ``tvmpy.topi.rnn`` on import) registers its workload on the way; a record
of a relay task (registered by ``extract_tasks``) loads, its DAG built only on use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from tvmpy import auto_scheduler, relay
from tvmpy.auto_scheduler import MeasureInput, MeasureResult
from tvmpy.topi.rnn import rnn_cell_key

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import json, sys
from tvmpy import auto_scheduler
assert "tvmpy.relay" not in sys.modules and "tvmpy.topi.rnn" not in sys.modules
out = []
for inp, res in auto_scheduler.load_records(sys.argv[1]):
    row = {"key": inp.task.workload_key, "cost": list(res.costs),
           "steps": [s.to_record() for s in inp.state.transform_steps]}
    try:  # replaying the state needs the workload's compute
        row["stages"] = len(inp.state.stages)
    except ValueError as e:
        row["error"] = str(e)
    out.append(row)
print(json.dumps(out))
"""


def _record(task, state, cost):
    return auto_scheduler.measure_record.dump_record_to_string(
        MeasureInput(task, state), MeasureResult((cost,), 0, "", 0.1, 1.0))


def test_cell_and_relay_records_load_in_a_fresh_process(tmp_path):
    cell = auto_scheduler.SearchTask(workload_key=rnn_cell_key("LSTM", 1, 8, 16, True),
                                     target="llvm")
    cell_state = auto_scheduler.sample_initial_population(cell, 1, seed=3)[0]
    x = relay.var("x", shape=(3, 5))
    w = relay.var("w", shape=(7, 5))
    mod = relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w)))
    params = {"w": np.ones((7, 5), "float32")}
    tasks, _ = auto_scheduler.extract_tasks(mod, params, "llvm")
    assert len(tasks) == 1 and json.loads(tasks[0].workload_key)[0].startswith("relay.")
    dense = tasks[0]
    log = tmp_path / "log.json"
    log.write_text(_record(cell, cell_state, 1e-4) + "\n"
                   + _record(dense, dense.compute_dag.init_state(), 2e-4) + "\n")
    got = subprocess.run([sys.executable, "-c", _CHILD, str(log)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    rows = json.loads(got.stdout.strip().splitlines()[-1])
    assert [r["key"] for r in rows] == [cell.workload_key, dense.workload_key]
    assert rows[0]["cost"] == [1e-4] and "error" not in rows[0]
    assert rows[0]["steps"] == [json.loads(json.dumps(s.to_record()))
                                for s in cell_state.transform_steps]
    assert rows[0]["stages"] == len(cell_state.stages)
    # the relay task's record loads (key, cost); its compute is unknown to that process
    assert rows[1]["cost"] == [2e-4] and "not registered" in rows[1]["error"]
    assert "not registered" not in got.stderr
