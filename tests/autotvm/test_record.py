"""JSON-lines tuning logs: encode/decode round trip, truncated and corrupt lines, pick_best."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm import record
from tvmpy.autotvm.measure.measure import MeasureErrorNo, MeasureInput, MeasureResult
from tvmpy.autotvm.task.task import TemplateNotFoundError
from tvmpy.target.target import target_as_built

RNG = np.random.default_rng(5)


@autotvm.template("test/record_mm")
def record_mm(N, L, M):
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((L, M), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=3)
    cfg.define_split("tile_x", x, num_outputs=2, policy="power2")
    cfg.define_annotate("ann", [x], policy="try_vec")
    cfg.define_knob("unroll", [True, False])
    yo, ym, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, ym, k, yi, xi)
    cfg["ann"].apply(s, C, [xi])
    if cfg["unroll"].val:
        s[C].unroll(yi)
    return s, [A, B, C]


def _records(task, n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for idx in rng.choice(len(task.config_space), size=n, replace=False):
        err = int(rng.choice([0, 0, 0, MeasureErrorNo.RUNTIME_DEVICE]))
        costs = tuple(rng.uniform(1e-4, 1e-2, 3)) if err == 0 else ("segfault in kernel",)
        out.append((MeasureInput(task.target, task, task.config_space.get(int(idx))),
                    MeasureResult(costs, err, float(rng.uniform(0.1, 1)), time.time())))
    return out


def _same(a, b):
    (ia, ra), (ib, rb) = a, b
    # a record names the CPU it was tuned for: "llvm" is written as "llvm -mcpu=<this CPU>"
    assert target_as_built(ia.target) == target_as_built(ib.target)
    assert ia.task.workload == ib.task.workload
    assert ia.config == ib.config and ia.config.index == ib.config.index
    assert ra.costs == pytest.approx(rb.costs) if ra.error_no == 0 else ra.costs == rb.costs
    assert (ra.error_no, ra.all_cost, ra.timestamp) == (rb.error_no, rb.all_cost, rb.timestamp)


def test_encode_decode_round_trip():
    task = autotvm.task.create("test/record_mm", args=(24, 10, 20), target="llvm")
    recs = _records(task, 12)
    for inp, res in recs:
        line = record.encode(inp, res)
        assert "\n" not in line
        row = json.loads(line)
        assert row["input"][:3] == [target_as_built("llvm"), "test/record_mm", [24, 10, 20]]
        assert set(row) == {"input", "result", "version"}
        back = record.decode(line)
        _same((inp, res), back)
        assert record.encode(*back) == line
    # decoded tasks of one workload are shared, and their space is rebuilt from the template
    decoded = [record.decode(record.encode(i, r)) for i, r in recs]
    assert len({id(i.task) for i, _ in decoded}) == 1
    space = decoded[0][0].task.config_space
    assert space.dims() == task.config_space.dims()
    assert decoded[0][0].task.flop == task.flop == 2 * 24 * 10 * 20


def test_decoded_input_builds_and_computes():
    task = autotvm.task.create("test/record_mm", args=(13, 7, 18), target="llvm")
    for inp, res in _records(task, 3, seed=1):
        inp2, _ = record.decode(record.encode(inp, res))
        s, args = inp2.task.instantiate(inp2.config)
        f = tvm.build(s, args, "llvm")
        a = RNG.standard_normal((13, 7)).astype("float32")
        b = RNG.standard_normal((7, 18)).astype("float32")
        c = tvm.nd.array(np.zeros((13, 18), "float32"))
        f(tvm.nd.array(a), tvm.nd.array(b), c)
        np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_unknown_template_decodes_but_has_no_space():
    line = json.dumps({"input": ["llvm", "test/not_registered", [3, "float32"],
                                 {"index": 4, "code_hash": None,
                                  "entity": [["t", "sp", [-1, 4]], ["k", "ot", "x"]]}],
                       "result": [[0.001], 0, 0.2, 1.0], "version": 1})
    inp, res = record.decode(line)
    assert inp.config["t"].size == [-1, 4] and inp.config["k"].val == "x"
    assert inp.task.workload == ("test/not_registered", 3, "float32")
    with pytest.raises(TemplateNotFoundError, match="not registered"):
        _ = inp.task.config_space


@pytest.mark.parametrize("line", [
    "", "{", "[1, 2]", '{"input": [1, 2], "result": [[1], 0, 0, 0]}',
    '{"input": ["llvm", "x", [], {"entity": [["t", "zz", 1]]}], "result": [[1], 0, 0, 0]}',
    '{"input": ["llvm", "x", [], {"entity": []}], "result": [[1], 0]}',
])
def test_decode_malformed_raises_value_error(line):
    with pytest.raises(ValueError):
        record.decode(line)


def test_truncated_and_corrupt_lines_are_skipped(tmp_path):
    task = autotvm.task.create("test/record_mm", args=(24, 10, 20), target="llvm")
    recs = _records(task, 6, seed=2)
    path = tmp_path / "log.json"
    lines = [record.encode(i, r) for i, r in recs]
    text = lines[0] + "\n" + "garbage{\n" + "\n".join(lines[1:]) + "\n"
    path.write_text(text[: len(text) - len(lines[-1]) // 2])  # cut the last line in half
    with pytest.warns(UserWarning, match="skipped 2 corrupt or truncated line") as w:
        loaded = record.load_from_file(path)
    assert len(w) == 1
    assert len(loaded) == 5
    for a, b in zip(loaded, recs[:5]):
        _same(a, b)


def test_log_survives_kill_9(tmp_path):
    """A writer killed mid-line leaves a truncated last line; every flushed line loads."""
    task = autotvm.task.create("test/record_mm", args=(24, 10, 20), target="llvm")
    recs = _records(task, 4, seed=3)
    lines = [record.encode(i, r) for i, r in recs]
    path = tmp_path / "killed.json"
    code = (
        "import sys, time\n"
        "lines = sys.stdin.read().split('\\n')\n"
        f"f = open({str(path)!r}, 'a')\n"
        "for ln in lines[:-1]:\n"
        "    f.write(ln + '\\n'); f.flush()\n"
        "f.write(lines[-1][:40]); f.flush()\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    proc.stdin.write("\n".join(lines))
    proc.stdin.close()
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = record.load_from_file(path)
    assert len(loaded) == 3
    assert sum("truncated" in str(w.message) for w in caught) == 1
    for a, b in zip(loaded, recs[:3]):
        _same(a, b)
    # appending after the truncated line starts a new line: the next record must still load
    record.save_to_file([recs[3]], path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = record.load_from_file(path)
    assert len(loaded) == 4
    _same(loaded[3], recs[3])


class _FakeMeasureBatch:
    """Measures nothing: a random cost per configuration (the log is what is tested)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def __call__(self, inputs):
        return [MeasureResult(tuple(self.rng.uniform(1e-4, 1e-2, 2)), 0, 0.01, time.time())
                for _ in inputs]


@pytest.mark.parametrize("cut", ["half", "first_char", "all_but_three"])
def test_resumed_tuning_appends_after_a_cut_last_line(tmp_path, cut):
    """Tune into a log, cut its last line (no trailing newline), resume tuning into the same
    log: every complete old record and every new one loads; only the cut line is skipped."""
    task = autotvm.task.create("test/record_mm", args=(24, 10, 20), target="llvm")
    path = tmp_path / "tune.log"
    tuner = autotvm.tuner.RandomTuner(task, seed=1)
    tuner.tune(n_trial=6, measure_option={"measure_batch": _FakeMeasureBatch(1)},
               callbacks=[autotvm.callback.log_to_file(str(path))])
    text = path.read_text()
    lines = text.splitlines()
    assert len(lines) == 6 and text.endswith("\n")
    keep = {"half": len(lines[-1]) // 2, "first_char": 1,
            "all_but_three": len(lines[-1]) - 3}[cut]
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:keep])
    with pytest.warns(UserWarning, match="skipped 1 corrupt or truncated line"):
        old = record.load_from_file(path)
    assert len(old) == 5
    resumed = autotvm.tuner.RandomTuner(task, seed=2)
    resumed.load_history(old)
    new: list = []
    resumed.tune(n_trial=4, measure_option={"measure_batch": _FakeMeasureBatch(2)},
                 callbacks=[autotvm.callback.log_to_file(str(path)),
                            lambda _t, inputs, results: new.extend(zip(inputs, results))])
    assert len(new) == 4
    with pytest.warns(UserWarning, match="skipped 1 corrupt or truncated line"):
        loaded = record.load_from_file(path)
    assert len(loaded) == 9
    for a, b in zip(loaded, old + new):
        _same(a, b)
    # the cut line is kept as it was, on a line of its own
    assert path.read_text().splitlines()[5] == lines[-1][:keep]


def test_append_to_a_file_without_final_newline_keeps_both(tmp_path):
    """save_to_file and a stream-less log_to_file after a partial line: both records kept."""
    task = autotvm.task.create("test/record_mm", args=(24, 10, 20), target="llvm")
    recs = _records(task, 3, seed=7)
    path = tmp_path / "a.log"
    path.write_text(record.encode(*recs[0]))  # a complete record, but no newline
    record.save_to_file([recs[1]], path)
    autotvm.callback.log_to_file(str(path))(None, [recs[2][0]], [recs[2][1]])
    loaded = record.load_from_file(path)  # no warning: nothing is corrupt
    assert len(loaded) == 3
    assert path.read_text().count("\n") == 3 and "\n\n" not in path.read_text()
    for a, b in zip(loaded, recs):
        _same(a, b)
    empty = tmp_path / "new.log"
    record.save_to_file([recs[0]], empty)
    assert empty.read_text() == record.encode(*recs[0]) + "\n"  # no blank first line


def test_pick_best(tmp_path):
    t1 = autotvm.task.create("test/record_mm", args=(24, 10, 20), target="llvm")
    t2 = autotvm.task.create("test/record_mm", args=(16, 8, 8), target="llvm")
    recs = _records(t1, 10, seed=4) + _records(t2, 6, seed=5)
    recs.append((MeasureInput(t1.target, t1, t1.config_space.get(0)),
                 MeasureResult((1e-9,), int(MeasureErrorNo.WRONG_ANSWER), 0.1, 0.0)))
    src, dst = tmp_path / "all.json", tmp_path / "best.json"
    record.save_to_file(recs, src)
    assert record.pick_best(str(src), str(dst)) == 2
    best = record.load_from_file(dst)
    assert len(best) == 2
    for task, part in ((t1, recs[:10]), (t2, recs[10:16])):
        ok = [(i, r) for i, r in part if r.error_no == 0]
        want = min(ok, key=lambda p: np.mean(p[1].costs))
        got = [p for p in best if p[0].task.workload == task.workload]
        assert len(got) == 1
        _same(got[0], want)
    # apply_history_best on the picked log selects the same configs
    with autotvm.apply_history_best(str(dst)) as ctx:
        for inp, _ in best:
            assert ctx.query(inp.target, inp.task.workload) == inp.config
