"""Measurement layer: LocalBuilder + LocalRunner survive bad candidates, in input order.

The template below has a ``mode`` knob whose values make a candidate raise at instantiation,
fail to compile, hang while building, segfault, run too long or compute a wrong result; the
``normal`` candidates must still be measured, with positive costs.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from tvmpy import te, tir
from tvmpy.autotvm.measure import (
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    create_measure_batch,
    measure_option,
)
from tvmpy.autotvm.measure.local_runner import compare_outputs, random_inputs
from tvmpy.autotvm.space import ConfigEntity
from tvmpy.autotvm.task import create, get_config, template

MODES = ["normal", "raise", "badbuild", "hang", "segv", "slow", "wrong", "killbuild"]


@template("test_measure/matmul")
def _matmul(n: int, l: int, m: int, first_mode: str):  # noqa: E741
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    cfg = get_config()
    modes = [first_mode] + [x for x in MODES if x != first_mode]
    cfg.define_knob("mode", modes)
    mode = cfg["mode"].val
    if mode == "raise" and isinstance(cfg, ConfigEntity):  # not while the space is collected
        raise ValueError("this configuration is invalid on purpose")
    if mode == "hang":
        time.sleep(600)
    if mode == "killbuild" and isinstance(cfg, ConfigEntity):  # the build worker dies
        os.kill(os.getpid(), signal.SIGKILL)
    extra = tir.const(0.0, "float32")
    if mode == "segv":
        extra = tir.call_extern("int32", "raise", 11).astype("float32")
    elif mode == "slow":
        extra = tir.call_extern("int32", "usleep", 200000).astype("float32")
    elif mode == "wrong":
        extra = tir.const(0.5, "float32")
    S = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="S")
    C = te.compute((n, m), lambda i, j: S[i, j] + extra, name="C")
    s = te.create_schedule(C.op)
    y, x = s[S].op.axis
    cfg.define_split("tile_x", x, num_outputs=2)
    xo, xi = cfg["tile_x"].apply(s, S, x)
    s[S].reorder(y, xo, k, xi)
    if mode == "badbuild":
        return s, [B, C]  # A is read but not an argument: tvm.build refuses it
    return s, [A, B, C]


def _pick(task, mode: str, nth: int = 0):
    """The ``nth`` config of ``task`` with knob ``mode``."""
    found = [task.config_space.get(i) for i in range(len(task.config_space))]
    found = [c for c in found if c["mode"].val == mode]
    return found[nth % len(found)]


def _inputs(task, modes_and_nth):
    return [MeasureInput(task.target, task, _pick(task, m, k)) for m, k in modes_and_nth]


@pytest.fixture(scope="module")
def task():
    return create("test_measure/matmul", (24, 20, 36, "normal"), "llvm")


@pytest.fixture(scope="module")
def measure(task):
    option = measure_option(LocalBuilder(timeout=30, n_parallel=2),
                            LocalRunner(number=2, repeat=2, timeout=30))
    batch = create_measure_batch(task, option)
    yield batch
    batch.close()


def test_bad_candidates_are_survived_in_input_order(task, measure):
    plan = [("normal", 0), ("raise", 0), ("badbuild", 1), ("normal", 1), ("wrong", 2),
            ("segv", 0), ("normal", 2)]
    inputs = _inputs(task, plan)
    results = measure(inputs)
    assert len(results) == len(plan)
    assert all(isinstance(r, MeasureResult) for r in results)
    expect = [MeasureErrorNo.NO_ERROR, MeasureErrorNo.INSTANTIATION_ERROR,
              MeasureErrorNo.COMPILE_HOST, MeasureErrorNo.NO_ERROR, MeasureErrorNo.WRONG_ANSWER,
              MeasureErrorNo.RUNTIME_DEVICE, MeasureErrorNo.NO_ERROR]
    assert [r.error_no for r in results] == [int(e) for e in expect], results
    for r in results:
        assert r.all_cost >= 0 and r.timestamp > 0
        if r.error_no == 0:
            assert len(r.costs) == 2 and all(c > 0 for c in r.costs)
        else:
            assert len(r.costs) == 1 and isinstance(r.costs[0], str)
    assert "invalid on purpose" in results[1].costs[0]
    assert "not in args" in results[2].costs[0]
    assert "differ from the reference" in results[4].costs[0]
    assert "process crashed (signal 11" in results[5].costs[0]
    # the runner was respawned: a later batch still measures
    again = measure(_inputs(task, [("normal", 3), ("wrong", 0)]))
    assert [r.error_no for r in again] == [0, int(MeasureErrorNo.WRONG_ANSWER)]


def test_build_timeout_kills_and_replaces_the_worker(task):
    builder = LocalBuilder(timeout=5, n_parallel=2)
    option = measure_option(builder, LocalRunner(number=1, repeat=1, timeout=30))
    batch = create_measure_batch(task, option)
    try:
        t0 = time.monotonic()
        res = batch(_inputs(task, [("hang", 0), ("normal", 0), ("hang", 1), ("normal", 1)]))
        assert time.monotonic() - t0 < 60
        assert [r.error_no for r in res] == [6, 0, 6, 0], res
        assert "timed out" in res[0].costs[0]
        res = batch(_inputs(task, [("normal", 2)]))
        assert res[0].error_no == 0
    finally:
        batch.close()


def test_run_timeout_kills_and_respawns_the_runner(task):
    option = measure_option(LocalBuilder(timeout=30, n_parallel=1),
                            LocalRunner(number=1, repeat=1, timeout=3))
    batch = create_measure_batch(task, option)
    try:
        res = batch(_inputs(task, [("slow", 0), ("normal", 0)]))
        assert [r.error_no for r in res] == [int(MeasureErrorNo.RUN_TIMEOUT), 0], res
        assert "timed out" in res[0].costs[0]
    finally:
        batch.close()


def test_reference_falls_back_to_first_good_candidate():
    # config 0 raises: the first candidate that runs becomes the reference
    task = create("test_measure/matmul", (9, 7, 13, "raise"), "llvm")
    assert task.config_space.get(0)["mode"].val == "raise"
    option = measure_option(LocalBuilder(timeout=30, n_parallel=1),
                            LocalRunner(number=1, repeat=1, timeout=30,
                                        enable_cpu_cache_flush=True))
    batch = create_measure_batch(task, option)
    try:
        res = batch(_inputs(task, [("normal", 0), ("wrong", 1), ("normal", 1)]))
        assert [r.error_no for r in res] == [0, int(MeasureErrorNo.WRONG_ANSWER), 0], res
    finally:
        batch.close()


def test_check_correctness_off_worker_crash_and_recycling(task):
    # one build per worker: every candidate gets a fresh worker; a killed worker is replaced
    option = measure_option(LocalBuilder(timeout=30, n_parallel=1, max_builds_per_worker=1),
                            LocalRunner(number=1, repeat=1, timeout=30, check_correctness=False))
    batch = create_measure_batch(task, option)
    try:
        res = batch(_inputs(task, [("wrong", 0), ("killbuild", 0), ("normal", 1)]))
        assert [r.error_no for r in res] == [0, int(MeasureErrorNo.COMPILE_HOST), 0], res
        assert res[0].costs[0] > 0 and res[2].costs[0] > 0
        assert "crashed (signal 9" in res[1].costs[0]
        assert batch(()) == []
    finally:
        batch.close()


def test_random_inputs_and_compare():
    info = [((3, 5), "float32"), ((4,), "int32"), ((2, 2), "bool"), ((), "float64")]
    a = random_inputs(info, 7)
    b = random_inputs(info, 7)
    assert [x.shape for x in a] == [(3, 5), (4,), (2, 2), ()]
    assert [str(x.dtype) for x in a] == ["float32", "int32", "bool", "float64"]
    assert np.all(a[0] != 0) and np.all(a[1] != 0)
    assert compare_outputs(a, b) is None
    c = [x.copy() for x in a]
    c[0][1, 2] += 0.5
    msg = compare_outputs(c, a)
    assert msg is not None and "argument 0" in msg and "(1, 2)" in msg
    c = [x.copy() for x in a]
    c[0] = c[0] * (1 + 1e-6)  # reordered float sums differ slightly: accepted
    assert compare_outputs(c, a) is None
    c[1] = c[1] + 1
    assert "argument 1" in compare_outputs(c, a)
    assert "shape" not in (compare_outputs(a[:1], a) or "") and compare_outputs(a[:1], a)


def test_option_validation(task):
    with pytest.raises(TypeError, match="builder"):
        measure_option(builder=object(), runner=LocalRunner())
    with pytest.raises(TypeError, match="option"):
        create_measure_batch(task, {"builder": LocalBuilder()})
    with pytest.raises(ValueError, match="timeout"):
        LocalBuilder(timeout=0)
    with pytest.raises(ValueError, match="n_parallel"):
        LocalBuilder(n_parallel=0)
    with pytest.raises(ValueError, match="number"):
        LocalRunner(number=0)
    assert LocalBuilder().n_parallel == (os.cpu_count() or 1)
    assert [int(e) for e in MeasureErrorNo] == list(range(9))
    assert MeasureErrorNo.BUILD_TIMEOUT == 6 and MeasureErrorNo.RUN_TIMEOUT == 7
