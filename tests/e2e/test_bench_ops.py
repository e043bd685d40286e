"""bench/ops.py and its timing helpers (bench/common.py): both sides compute the same thing, the
onnxruntime side reuses bound inputs and a preallocated output, every side gets the same number
of interleaved rounds. No timing is asserted (the figures live in bench/RESULTS.md)."""

from __future__ import annotations

import importlib
import os
import sys
import time

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


@pytest.fixture(scope="module")
def bench(request):
    """(ops, common) imported without bench's BLAS re-exec (which would replace pytest)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("BENCH_KEEP_BLAS_ENV", "1")
    mp.syspath_prepend(os.path.abspath(BENCH))
    request.addfinalizer(mp.undo)
    common = importlib.import_module("common")
    ops = importlib.import_module("ops")
    yield ops, common
    for name in ("ops", "common"):
        sys.modules.pop(name, None)


def test_interleaved_samples_same_rounds_rotating_order(bench, monkeypatch):
    _, common = bench
    monkeypatch.setattr(common, "calibrate_number", lambda fn, target_s: 1)
    order: list[str] = []
    sides = {k: (lambda k=k: order.append(k)) for k in "abc"}
    out = common.interleaved_samples(sides, rounds=4, pause=0.0)
    assert {k: len(v) for k, v in out.items()} == {"a": 4, "b": 4, "c": 4}
    assert all(t > 0 for v in out.values() for t in v)
    assert "".join(order) == "abc" "bca" "cab" "abc"


def test_timing_helpers(bench):
    _, common = bench
    n = common.calibrate_number(lambda: None, 1e-3)
    assert 1 <= n <= 1 << 16
    # a one-time cost in the first calls (a runtime's first-run compile) is not a call's cost
    calls = [0]

    def slow_first_calls():
        calls[0] += 1
        time.sleep(0.05 if calls[0] <= common.CALIBRATE_WARMUP else 0.0)

    assert common.calibrate_number(slow_first_calls, 0.02) > 4
    assert common.quartiles([3.0, 1.0, 2.0, 4.0, 5.0]) == (2.0, 3.0, 4.0)
    assert common.geomean([1.0, 4.0]) == pytest.approx(2.0)


def test_ort_bound_runner_matches_run_and_reuses_output(bench):
    ops, common = bench
    c = ops.conv_case("t", 5, 9, 7, 3, 2, "res_relu")
    sess = common.ort_session(c.onnx_fn())
    run, outs = common.ort_bound_runner(sess, c.feeds)
    run()
    first = outs[0].numpy().copy()
    np.testing.assert_array_equal(first, sess.run(None, c.feeds)[0])
    ptr = outs[0].data_ptr()
    run()
    assert outs[0].data_ptr() == ptr  # written in place, not reallocated
    np.testing.assert_array_equal(outs[0].numpy(), first)


@pytest.mark.parametrize("make", [
    lambda ops: ops.conv_case("t", 5, 9, 7, 3, 2, "res_relu"),          # primes, stride 2
    lambda ops: ops.conv_case("t", 6, 7, 6, 3, 1, "clip", groups=6),    # depthwise, odd size
    lambda ops: ops.conv_case("t", 3, 11, 1, 1, 1, "none"),             # one output channel
    lambda ops: ops.dense_case("t", 3, 13, 5, "gelu"),
    lambda ops: ops.bmm_case("t", 2, 3, 5, 7, 0.5),
    lambda ops: ops.pool_case("t", "max", 3, 9),
    lambda ops: ops.layer_norm_case("t", 1, 7),
])
def test_run_case_agrees_with_onnxruntime(bench, make):
    ops, _ = bench
    c = make(ops)
    r = ops.run_case(c, rounds=2, pause=0.0, opt_levels=[2, 3], target_s=1e-4)
    assert r["err"] < 1e-5
    for side in ("O2", "O3", "ort"):
        lo, med, hi = r[side]
        assert 0 < lo <= med <= hi
    assert 0.0 <= r["layout share O3"] <= 1.0


def test_case_sets_are_distinct_and_named_by_model(bench):
    ops, _ = bench
    for key, make in ops.CASE_SETS.items():
        names = [c.name for c in make()]
        assert names and len(set(names)) == len(names)
        assert all(n.startswith(key + ":") for n in names)


def test_breakdown_splits_reorders_from_compute(bench):
    ops, _ = bench
    r = ops.breakdown(ops.conv_case("t", 5, 9, 7, 3, 2, "relu"), 3, number=3)
    assert r["tvmpy"] and r["ort"]
    # opt_level 3 blocks the conv: tvmpy's graph has layout_transform kernels at its boundary
    assert any("layout_transform" in n for n, _ in r["tvmpy"])
    for side in ("tvmpy", "ort"):
        assert r[f"{side} compute"] > 0 and r[f"{side} reorder"] >= 0


def test_bench_threads_pin_every_side(bench, monkeypatch):
    """common.bench_threads resolves tvmpy's count and writes it where tvmpy's pool reads it;
    numpy_blas_threads gives numpy's OpenBLAS the same count (issue 24: one tvmpy thread was
    compared with two of the other side's)."""
    _, common = bench
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert common.bench_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
    assert common.bench_threads(2) == 2 and os.environ["TVM_NUM_THREADS"] == "2"
    before = common.numpy_blas_threads()
    if before is None:
        pytest.skip("numpy's BLAS is not a scipy-openblas build")
    try:
        assert common.numpy_blas_threads(1) == 1
    finally:
        common.numpy_blas_threads(before)
