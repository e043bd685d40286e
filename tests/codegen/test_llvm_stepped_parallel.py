"""LLVM backend: a serial loop whose whole body is one parallel loop (a recurrence's time loop
around its step's jobs) runs as ONE parallel launch that waits between steps
(``llvm_parallel.emit_stepped_parallel_for``): every step's jobs run exactly once, each step
sees all of the previous step's writes (a job reads what other threads wrote), on tvmpy's pool
and on libgomp, at team sizes below, at and above the shard limit, with symbolic step and job
counts, empty loops, a failing body, and the switch that turns it off."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy.codegen.llvm_codegen as llvm_codegen
from tvmpy.tir import expr as E
from tvmpy.tir import op
from tvmpy.tir import stmt as S

from .llvm_helpers import Lib, aligned, buf, func

MOD = 1000003


def _recurrence(lo: int = 0, assert_below: int | None = None):
    """O[(s+1)n + i] = (O[sn + (i+1) % n] + 2 O[sn + i] + s) % MOD for s in serial(lo, lo + T),
    i in parallel(0, n) (int64; T and n symbolic; O holds (lo + T + 1) n values): each job reads
    a neighbour that another thread may have written at the step before. With
    ``assert_below``, a step s >= it fails an assert."""
    t, n = E.Var("T", "int64"), E.Var("n", "int64")
    o = buf("O", (t + E.const(lo + 1, "int64")) * n, "int64")
    s, i = E.Var("s", "int64"), E.Var("i", "int64")
    c = lambda v: E.const(v, "int64")  # noqa: E731
    src = s * n
    val = op.floormod(o[src + op.floormod(i + c(1), n)] + c(2) * o[src + i] + s, c(MOD))
    store: S.Stmt = S.BufferStore(o, val, [src + n + i])
    if assert_below is not None:
        store = S.AssertStmt(s < c(assert_below), "step out of range", store)
    body = S.For(s, c(lo), t, S.ForKind.SERIAL,
                 S.For(i, c(0), n, S.ForKind.PARALLEL, store))
    return func("recur", [o, t, n], body)


def _reference(o0: np.ndarray, lo: int, steps: int, n: int) -> np.ndarray:
    o = o0.copy()
    for s in range(lo, lo + steps):
        cur = o[s * n:(s + 1) * n]
        o[(s + 1) * n:(s + 2) * n] = (np.roll(cur, -1) + 2 * cur + s) % MOD
    return o


@pytest.mark.parametrize("runtime", ["pool", "gomp"])
@pytest.mark.parametrize("threads", ["1", "2", "3", "5", "20"])
def test_stepped_loop_matches_the_serial_recurrence(monkeypatch, runtime, threads):
    monkeypatch.setenv("TVM_NUM_THREADS", threads)
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    monkeypatch.setenv("TVMPY_PARALLEL_RUNTIME", runtime)
    for lo in (0, 3):
        lib = Lib([_recurrence(lo)])
        assert "cmpxchg" in lib.ir  # the stepped schedule, not a launch a step
        assert ("GOMP_parallel" in lib.ir) == (runtime == "gomp")
        rng = np.random.default_rng(int(threads) + lo)
        for steps, n in [(0, 5), (1, 1), (7, 0), (1, 13), (40, 1), (33, 2), (19, 37),
                         (6, 1009)]:
            # one element more: an empty buffer may not be aligned; the last stays untouched
            o0 = rng.integers(0, MOD, (lo + steps + 1) * n + 1).astype("int64")
            o = aligned(o0)
            want = np.concatenate([_reference(o0[:-1], lo, steps, n), o0[-1:]])
            for _ in range(2):  # counters and the step counter are reset for every call
                o[...] = o0
                assert lib("recur", o, steps, n) == 0
                np.testing.assert_array_equal(o, want, err_msg=f"T={steps} n={n} lo={lo}")


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_failing_step_reports_its_error_and_stops(monkeypatch, threads):
    """A body that fails at step 4: the call returns -1 with the assert's message (no thread
    left waiting for a step that never completes), and a later call runs normally."""
    monkeypatch.setenv("TVM_NUM_THREADS", threads)
    lib = Lib([_recurrence(0, assert_below=4)])
    assert "cmpxchg" in lib.ir
    n = 29
    o0 = np.arange(11 * n, dtype="int64")
    o = aligned(o0)
    assert lib("recur", o, 10, n) == -1
    assert lib.last_error() == "step out of range"
    np.testing.assert_array_equal(o[:5 * n], _reference(o0, 0, 4, n)[:5 * n])
    o[...] = o0
    assert lib("recur", o, 4, n) == 0
    np.testing.assert_array_equal(o, _reference(o0, 0, 4, n))


def test_switch_off_launches_every_step(monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    monkeypatch.setattr(llvm_codegen, "STEPPED_PARALLEL", False)
    lib = Lib([_recurrence()])
    assert "cmpxchg" not in lib.ir and "tvmpy_parallel_run" in lib.ir
    o0 = np.arange(9 * 31, dtype="int64")
    o = aligned(o0)
    assert lib("recur", o, 8, 31) == 0
    np.testing.assert_array_equal(o, _reference(o0, 0, 8, 31))


def test_only_a_serial_loop_around_one_parallel_loop_is_stepped():
    """Anything else between the two loops (a second parallel loop, a store) keeps a launch a
    step; a parallel loop whose bounds use the step variable too."""
    n = E.Var("n", "int64")
    o = buf("O", n * E.const(9, "int64"), "int64")
    s, i = E.Var("s", "int64"), E.Var("i", "int64")
    c = lambda v: E.const(v, "int64")  # noqa: E731
    par = S.For(i, c(0), n, S.ForKind.PARALLEL,
                S.BufferStore(o, o[s * n + i] + c(1), [(s + c(1)) * n + i]))
    two = S.For(s, c(0), c(8), S.ForKind.SERIAL, S.SeqStmt([par, S.BufferStore(o, s, [c(0)])]))
    tri = S.For(s, c(0), c(8), S.ForKind.SERIAL,
                S.For(i, c(0), s, S.ForKind.PARALLEL,
                      S.BufferStore(o, o[s * n + i] + c(1), [(s + c(1)) * n + i])))
    for body in (two, tri):
        lib = Lib([func("f", [o, n], body)])
        assert "cmpxchg" not in lib.ir and "tvmpy_parallel_run" in lib.ir
