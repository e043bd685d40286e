"""bench/auto_scheduler_models.py's bookkeeping: the convergence curves (a task not yet
measured counts at its first valid record), the progress file refusing another CPU's logs,
the op kinds compared with onnxruntime, the log statistics of a resumed run."""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import auto_scheduler_models as bench  # noqa: E402


def test_auto_scheduler_curve_fills_unmeasured_tasks(tmp_path):
    p = bench.Progress(str(tmp_path / "m.as.progress.json"), "cpuA")
    p.data["tasks"] = [{"desc": "a", "weight": 2}, {"desc": "b", "weight": 1},
                       {"desc": "c", "weight": 3}]
    p.data["rows"] = [[1.0, 4, [5e-3, None, None]], [2.0, 8, [4e-3, 3e-3, None]],
                      [3.0, 12, [4e-3, 1e-3, None]]]
    assert bench.as_curve(p, {}) == []  # task c has no record and no fallback
    curve = bench.as_curve(p, {"c": 1e-3})
    assert [r[:2] for r in curve] == [[1.0, 4], [2.0, 8], [3.0, 12]]
    assert curve[0][2] == pytest.approx(2 * 5e-3 + 3e-3 + 3 * 1e-3)  # b at its first record
    assert curve[2][2] == pytest.approx(2 * 4e-3 + 1e-3 + 3 * 1e-3)


def test_autotvm_curve_is_the_running_best(tmp_path):
    p = bench.Progress(str(tmp_path / "m.autotvm.progress.json"), "cpuA")
    p.data["tasks"] = [{"name": "x"}, {"name": "y"}]
    p.data["rows"] = [[1, 0, 4e-3], [2, 0, None], [3, 0, 2e-3], [4, 1, 1e-3], [5, 1, 3e-3]]
    curve = bench.autotvm_curve(p)
    assert [r[1] for r in curve] == [1, 2, 3, 4, 5]
    assert [r[2] for r in curve] == pytest.approx([5e-3, 5e-3, 3e-3, 3e-3, 3e-3])
    p.data["rows"] = p.data["rows"][:3]  # task y never measured: left out
    assert [r[2] for r in bench.autotvm_curve(p)] == pytest.approx([4e-3, 4e-3, 2e-3])
    p.data["rows"] = [[1, 0, None]]
    assert bench.autotvm_curve(p) == []


def test_progress_refuses_another_cpus_file(tmp_path):
    path = str(tmp_path / "m.as.progress.json")
    p = bench.Progress(path, "znver4-aaaa")
    p.data["spent_s"] = 61.0
    p.save()
    assert bench.Progress(path, "znver4-aaaa").spent == 61.0
    with pytest.raises(SystemExit, match="tuned on CPU"):
        bench.Progress(path, "skylake-bbbb")


def test_log_task_stats_and_kinds(tmp_path):
    log = tmp_path / "m.as.json"
    rec = lambda key, costs, err: json.dumps(  # noqa: E731
        {"i": [[key, "llvm"], [[], []]], "r": [costs, err, 0.1, 0.0], "v": "v0.6"})
    log.write_text("\n".join([rec("k1", [2e-3, 4e-3], 0), rec("k1", [], 4), rec("k2", [1e-3], 0),
                              "{truncated", rec("k1", [1e-3], 0)]) + "\n")
    stats = bench.log_task_stats(str(log))
    assert stats["k1"] == (pytest.approx(1e-3), 3) and stats["k2"] == (pytest.approx(1e-3), 1)
    assert bench.tvm_kind("fused_nn_contrib_conv2d_NCHWc_add") == "conv"
    assert bench.tvm_kind("fused_nn_conv2d_transpose_add") == "conv"
    assert bench.tvm_kind("fused_nn_contrib_dense_pack_add") == "matmul/dense"
    assert bench._strip("tvmgen_default_fused_nn_softmax") == "fused_nn_softmax"


def test_table_flags_wrong_outputs(capsys):
    meas = {"threads": 1, "median": {"untuned": 2e-3, "auto_scheduler": 1e-3, "ort": 2e-3},
            "ratio_rounds": {"untuned": 1.0, "auto_scheduler": 0.5},
            "errors": {"untuned": 1e-6, "auto_scheduler": 0.2}}
    row = {"model": "m", "as_min": 1.0, "as_trials": 8, "tvm_min": None, "tvm_trials": None,
           "n_tasks": 1, "measured": [meas], "report": []}
    assert bench.print_table([row]) == 1
    out = capsys.readouterr().out
    assert "WRONG OUTPUT: m auto_scheduler at 1 thread(s)" in out
    assert "| m | 1 | 2.00 | - | 1.00 | 2.00 | 1.00 | - | 0.50 | - | 1.0, 8 | - |" in out
    meas["errors"]["auto_scheduler"] = float("nan")  # a NaN output is wrong too
    assert bench.print_table([row]) == 1


def test_estimate_against_the_model_counts_a_stepped_task(tmp_path):
    """A task run several times a call (the recurrence's cell: desc ``<kernel> (<note>)``) is
    compared with its kernel in the model, not left out of the model's side."""
    assert bench.task_kernel("fused_nn_rnn_scan (topi.rnn_cell, 32 run(s) a call)") == \
        "fused_nn_rnn_scan"
    assert bench.task_kernel("fused_nn_dense_add") == "fused_nn_dense_add"
    p = bench.Progress(str(tmp_path / "m.as.progress.json"), "cpuA")
    p.data["search_threads"] = 1
    p.data["tasks"] = [{"desc": "fused_nn_dense", "weight": 2, "best_s": 1e-4, "flop": 1},
                       {"desc": "fused_nn_rnn_scan (topi.rnn_cell, 32 run(s) a call)",
                        "weight": 64, "best_s": 5e-6, "flop": 1}]
    prof = {"fused_nn_dense": 2.2e-4, "fused_nn_rnn_scan": 3.5e-4, "fused_take": 1e-6}
    meas = {"threads": 1, "profile": {"auto_scheduler": prof, "untuned": prof},
            "ort_profile": {"matmul/dense": 2e-4}}
    line = [x for x in bench.subgraph_report(p, meas) if "search's estimate" in x][0]
    assert "estimate 0.520 ms" in line and "in the model 0.570 ms" in line


def test_auto_scheduler_progress_is_per_search_thread_count(tmp_path):
    d = str(tmp_path)
    # an older side file of a search at 1 thread is resumed at 1, not at 2
    with open(os.path.join(d, "m.as.progress.json"), "w") as f:
        json.dump({"cpu": "c", "spent_s": 60.0, "search_threads": 1}, f)
    assert bench.as_progress_path(d, "m", 1) == os.path.join(d, "m.as.progress.json")
    assert bench.as_progress_path(d, "m", 2) == os.path.join(d, "m.as.t2.progress.json")
    assert bench.Progress(bench.as_progress_path(d, "m", 2), "c").spent == 0.0
