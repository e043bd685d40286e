"""Tutorial check: TVM's "Writing Tunable Templates and Using the Auto-tuner"
(tutorials/autotvm/tune_simple_template.py), in our own words and small sizes.

Steps: a plain matmul schedule; the same as a template with knobs (define_knob, then
define_split); a task and its config space; the autotvm DEBUG log; tuning a few trials with
RandomTuner and XGBTuner measured by LocalBuilder + LocalRunner into a log; building with the
best record (apply_history_best) and checking the product against numpy."""

from __future__ import annotations

import io
import logging

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te

N, L, M = 24, 40, 18  # non-powers of two: the split candidates are the divisors


def matmul_plain(n, l, m, dtype):  # noqa: E741 - the tutorial's names
    A = te.placeholder((n, l), name="A", dtype=dtype)
    B = te.placeholder((l, m), name="B", dtype=dtype)
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    yo, yi = s[C].split(y, 8)
    xo, xi = s[C].split(x, 6)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


@autotvm.template("tests_tutorial/matmul_knob")
def matmul_knob(n, l, m, dtype):  # noqa: E741
    A = te.placeholder((n, l), name="A", dtype=dtype)
    B = te.placeholder((l, m), name="B", dtype=dtype)
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    cfg.define_knob("tile_y", [1, 2, 3, 4, 8])
    cfg.define_knob("tile_x", [1, 2, 3, 6])
    yo, yi = s[C].split(y, cfg["tile_y"].val)
    xo, xi = s[C].split(x, cfg["tile_x"].val)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


@autotvm.template("tests_tutorial/matmul")
def matmul(n, l, m, dtype):  # noqa: E741
    A = te.placeholder((n, l), name="A", dtype=dtype)
    B = te.placeholder((l, m), name="B", dtype=dtype)
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


def _check(func, rng):
    a = rng.uniform(-1, 1, (N, L)).astype("float32")
    b = rng.uniform(-1, 1, (L, M)).astype("float32")
    c = tvm.nd.array(np.zeros((N, M), dtype="float32"))
    func(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-5)


def test_plain_schedule_and_knob_template():
    rng = np.random.default_rng(0)
    s, args = matmul_plain(N, L, M, "float32")
    _check(tvm.build(s, args, "llvm"), rng)
    task = autotvm.task.create("tests_tutorial/matmul_knob", args=(N, L, M, "float32"),
                               target="llvm")
    assert len(task.config_space) == 5 * 4
    for idx in (0, 7, 19):
        with tvm.target.Target("llvm"):
            s, args = task.instantiate(task.config_space.get(idx))
        _check(tvm.build(s, args, "llvm"), rng)


@pytest.mark.parametrize("tuner_name", ["random", "xgb"])
def test_tune_and_apply_history_best(tmp_path, tuner_name):
    task = autotvm.task.create("tests_tutorial/matmul", args=(N, L, M, "float32"),
                               target="llvm")
    space = task.config_space
    # the divisors of 24 and 18 as inner split sizes
    assert len(space) == len([d for d in range(1, 25) if 24 % d == 0]) * \
        len([d for d in range(1, 19) if 18 % d == 0])

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("autotvm")
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    log_file = str(tmp_path / "matmul.log")
    option = autotvm.measure_option(builder="local",
                                    runner=autotvm.LocalRunner(number=3, repeat=1))
    try:
        tuner = (autotvm.tuner.RandomTuner(task) if tuner_name == "random"
                 else autotvm.tuner.XGBTuner(task, loss_type="rank"))
        tuner.tune(n_trial=4, measure_option=option,
                   callbacks=[autotvm.callback.log_to_file(log_file)])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    trial_lines = [ln for ln in stream.getvalue().splitlines() if ln.startswith("No: ")]
    assert len(trial_lines) == 4 and all("GFLOPS" in ln for ln in trial_lines)
    records = autotvm.record.load_from_file(log_file)
    assert len(records) == 4 and any(r.error_no == 0 for _, r in records)

    with autotvm.apply_history_best(log_file) as ctx:
        with tvm.target.Target("llvm"):
            s, args = matmul(N, L, M, "float32")
            func = tvm.build(s, args)
    best_inp, _ = min(((i, r) for i, r in records if r.error_no == 0),
                      key=lambda p: np.mean(p[1].costs))
    chosen = ctx.query(tvm.target.Target("llvm"), task.workload)
    assert chosen.index == best_inp.config.index
    _check(func, np.random.default_rng(1))
