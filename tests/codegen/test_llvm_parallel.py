"""LLVM backend: parallel loops (outlining, captures, errors, nesting) on tvmpy's thread pool
(the default) and on libgomp (PARALLEL_RUNTIME=gomp); tests/codegen/test_parallel_pool.py tests
the pool itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tvmpy.tir import expr as E
from tvmpy.tir import op
from tvmpy.tir import stmt as S

from .llvm_helpers import Lib, aligned, buf, func, rand

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.parametrize("runtime", ["pool", "gomp"])
def test_parallel_loop_runs_on_two_threads(runtime):
    """With OMP_NUM_THREADS=2 a parallel loop storing gettid() sees two threads (checked in a
    fresh process so that the runtime reads the variable). Each of the 256 iterations sleeps
    200 us (~51 ms in all) so that both threads take chunks from the dynamic schedule."""
    entry = {"pool": "tvmpy_parallel_run", "gomp": "GOMP_parallel"}[runtime]
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(HERE)!r})
        import numpy as np
        from tvmpy.tir import expr as E, stmt as S, op
        from codegen.llvm_helpers import Lib, aligned, buf, func
        n = 256
        T = buf("T", n, "int32")
        i = E.Var("i")
        body = S.For(i, 0, n, S.ForKind.PARALLEL, S.seq(
            S.Evaluate(op.call_extern("int32", "usleep", 200)),
            S.BufferStore(T, op.call_extern("int32", "gettid"), [i])))
        t = aligned(np.full(n, -1, "int32"))
        lib = Lib([func("tid", [T], body)])
        assert {entry!r} in lib.ir
        assert lib("tid", t) == 0
        print(len(set(t.tolist())), int((t > 0).all()))
    """)
    env = dict(os.environ, OMP_NUM_THREADS="2", TVMPY_PARALLEL_RUNTIME=runtime)
    env.pop("TVM_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "1"]


def _saxpy_2d():
    """Y[i*m + j] = a * X[i*m + j] + Y[...] with a parallel row loop, a vector inner loop, a
    scalar tail, a per-row stack scratch buffer and a nested parallel loop (run serially)."""
    n, m = E.Var("n"), E.Var("m")
    a = E.Var("a", "float32")
    X = buf("X", n * m)
    Y = buf("Y", n * m)
    T = buf("T", 4, scope="local")
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    L = 8
    vec = S.For(j, 0, m // L, S.ForKind.SERIAL, S.BufferStore(
        Y, E.Broadcast(a, L) * X[E.Ramp(i * m + j * L, 1, L)] + Y[E.Ramp(i * m + j * L, 1, L)],
        [E.Ramp(i * m + j * L, 1, L)]))
    tail = S.For(k, (m // L) * L, m - (m // L) * L, S.ForKind.PARALLEL, S.Allocate(T, S.SeqStmt([
        S.BufferStore(T, a * X[i * m + k], [0]),
        S.BufferStore(Y, T[0] + Y[i * m + k], [i * m + k])])))
    body = S.For(i, 0, n, S.ForKind.PARALLEL, S.SeqStmt([vec, tail]))
    f = func("saxpy2d", [X, Y, a], body)
    # X and Y are declared 1-D of size n*m: pass n and m explicitly
    return f.replace(params=tuple(f.params) + (n, m))


def test_parallel_correctness_with_captures_and_symbolic_sizes():
    f = _saxpy_2d()
    lib = Lib([f])
    assert "tvmpy_parallel_run" in lib.ir and "GOMP_parallel" not in lib.ir
    rng = np.random.default_rng(0)
    for n, m in [(1, 1), (7, 13), (31, 64), (3, 101)]:
        x = rand(n * m, "float32", rng)
        y = rand(n * m, "float32", rng)
        ref = 1.5 * x + y
        assert lib("saxpy2d", x, y, 1.5, n, m) == 0
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_assert_in_parallel_body_reports_error():
    n = E.Var("n")
    A = buf("A", n)
    i = E.Var("i")
    body = S.For(i, 0, n, S.ForKind.PARALLEL, S.AssertStmt(
        A[i] >= 0.0, "negative input", S.BufferStore(A, op.sqrt(A[i]), [i])))
    lib = Lib([func("psqrt", [A], body)])
    a = aligned(np.linspace(0, 9, 37).astype("float32"))
    assert lib("psqrt", a) == 0
    np.testing.assert_allclose(a, np.sqrt(np.linspace(0, 9, 37)), rtol=1e-6)
    a[30] = -1
    assert lib("psqrt", a) == -1
    assert lib.last_error() == "negative input"


def test_heap_allocation_inside_parallel_body():
    n = 5
    size = 20000  # 80 KB: heap
    A = buf("A", n * size)
    B = buf("B", n)
    T = buf("T", size)
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    acc = buf("acc", 1, scope="local")
    body = S.For(i, 0, n, S.ForKind.PARALLEL, S.Allocate(T, S.Allocate(acc, S.SeqStmt([
        S.For(j, 0, size, S.ForKind.SERIAL, S.BufferStore(T, A[i * size + j] * 2.0, [j])),
        S.BufferStore(acc, E.const(0.0), [0]),
        S.For(k, 0, size, S.ForKind.SERIAL, S.BufferStore(acc, acc[0] + T[k], [0])),
        S.BufferStore(B, acc[0], [i])]))))
    lib = Lib([func("prowsum", [A, B], body)])
    assert "aligned_alloc" in lib.ir
    a = rand(n * size, "float32", np.random.default_rng(1), 0, 1)
    b = aligned(np.zeros(n, "float32"))
    assert lib("prowsum", a, b) == 0
    np.testing.assert_allclose(b, 2 * a.reshape(n, size).astype("f8").sum(1), rtol=1e-4)


def test_forked_child_runs_parallel_loops_without_hanging():
    """A child forked after a parallel region ran runs parallel loops (the pool restarts in the
    child; with libgomp, which would hang, build() installs an at-fork guard)."""
    script = textwrap.dedent(f"""
        import multiprocessing as mp, sys
        sys.path.insert(0, {os.path.dirname(HERE)!r})
        import numpy as np
        import tvmpy as tvm
        from tvmpy.codegen.llvm import build
        from tvmpy.tir import expr as E, stmt as S
        from codegen.llvm_helpers import buf, func
        n = 1000
        A = buf("A", n)
        i = E.Var("i")
        m = build([func("p", [A], S.For(i, 0, n, S.ForKind.PARALLEL,
                                        S.BufferStore(A, A[i] + 1.0, [i])))], "llvm")
        a = tvm.nd.array(np.zeros(n, "float32"))
        m(a)
        def child(q):
            b = tvm.nd.array(np.zeros(n, "float32"))
            m(b)
            q.put(float(b.numpy().sum()))
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        p.join(30)
        if p.is_alive():
            p.kill()
            print("hang")
        else:
            print(p.exitcode, q.get())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1000.0"]


def _divmod_loop(lo, extent, dtype="int32", n=None):
    """O[i - lo] = floordiv(i, 33) * 1000 + floormod(i, 33) * 10 + floormod(floordiv(i, 7), 5)
    for i in parallel(lo, extent): index math on the loop variable itself, which the outlined
    body receives as arguments (``n``: a symbolic extent)."""
    ext = n if n is not None else extent
    O = buf("O", ext, dtype)
    i = E.Var("i", dtype)
    c = lambda v: E.const(v, dtype)  # noqa: E731
    val = (E.FloorDiv(i, c(33)) * c(1000) + E.FloorMod(i, c(33)) * c(10)
           + E.FloorMod(E.FloorDiv(i, c(7)), c(5)))
    body = S.For(i, c(lo), ext if n is not None else c(extent), S.ForKind.PARALLEL,
                 S.BufferStore(O, val, [i - c(lo)]))
    params = [O] + ([n] if n is not None else [])
    return func("pdivmod", params, body)


def _divmod_ref(lo, extent, dtype):
    i = np.arange(lo, lo + extent, dtype="int64")
    return ((i // 33) * 1000 + (i % 33) * 10 + (i // 7) % 5).astype(dtype)


@pytest.mark.parametrize("threads", ["1", "2"])
@pytest.mark.parametrize("lo,extent,dtype", [(0, 8712, "int32"), (5, 1091, "int32"),
                                             (0, 1, "int32"), (3, 97, "int64"),
                                             (-40, 113, "int32"), (-1, 2, "int64")])
def test_parallel_body_range_of_loop_variable(monkeypatch, threads, lo, extent, dtype):
    """The outlined body's ``%begin``/``%end`` carry ``range`` attributes (so that LLVM drops
    the sign fix-ups of a floor division of the loop variable) exactly when the loop's min is a
    constant >= 0; floor division and modulo of the loop variable match numpy either way, on a
    team of one and of two, with prime and size-1 extents and negative mins."""
    monkeypatch.setenv("TVM_NUM_THREADS", threads)  # read by the new library's pool
    lib = Lib([_divmod_loop(lo, extent, dtype)])
    lty = "i32" if dtype == "int32" else "i64"
    has = f"{lty} range({lty} {lo}, {lo + extent}) %begin" in lib.ir
    has_end = f"{lty} range({lty} {lo}, {lo + extent + 1}) %end" in lib.ir
    assert has == has_end == (lo >= 0)
    o = aligned(np.zeros(extent, dtype))
    assert lib("pdivmod", o) == 0
    np.testing.assert_array_equal(o, _divmod_ref(lo, extent, dtype))


@pytest.mark.parametrize("threads", ["1", "2"])
def test_parallel_body_range_with_symbolic_extent(monkeypatch, threads):
    """A symbolic extent: ``%begin`` in [min, int max), ``%end`` without a range (it may be the
    maximum itself); the results match numpy for several extents."""
    monkeypatch.setenv("TVM_NUM_THREADS", threads)
    n = E.Var("n")
    lib = Lib([_divmod_loop(2, None, "int32", n=n)])
    assert f"i32 range(i32 2, {2**31 - 1}) %begin" in lib.ir
    assert re.search(r"range\([^)]*\) %end", lib.ir) is None
    for ext in (1, 34, 997):
        o = aligned(np.zeros(ext, "int32"))
        assert lib("pdivmod", o, ext) == 0
        np.testing.assert_array_equal(o, _divmod_ref(2, ext, "int32"))


def _count_loop(lo, extent, dtype="int32"):
    """O[i - lo] += i - lo + 1 for i in parallel(lo, extent): an iteration run twice (or not
    at all) leaves a wrong value (the buffer has one element more: an empty one may not be
    aligned)."""
    O = buf("O", extent + 1, dtype)
    i = E.Var("i", dtype)
    c = lambda v: E.const(v, dtype)  # noqa: E731
    body = S.For(i, c(lo), c(extent), S.ForKind.PARALLEL,
                 S.BufferStore(O, O[i - c(lo)] + (i - c(lo)) + c(1), [i - c(lo)]))
    return func("pcount", [O], body)


@pytest.mark.parametrize("runtime", ["pool", "gomp"])
@pytest.mark.parametrize("threads", ["2", "3", "5", "20"])
@pytest.mark.parametrize("lo,extent,dtype", [(0, 1, "int32"), (0, 2, "int32"), (3, 7, "int32"),
                                             (0, 17, "int64"), (-5, 1009, "int32"),
                                             (0, 4099, "int64"), (0, 0, "int32")])
def test_home_shards_run_every_iteration_once(monkeypatch, runtime, threads, lo, extent, dtype):
    """The home-shard schedule (one contiguous shard per thread, up to MAX_SHARDS; more
    threads than shards share them; extents shorter than the team, prime, empty) runs each
    iteration exactly once, on tvmpy's pool and on libgomp, in repeated calls (the shard
    counters are reset before every launch)."""
    monkeypatch.setenv("TVM_NUM_THREADS", threads)
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    monkeypatch.setenv("TVMPY_PARALLEL_RUNTIME", runtime)
    lib = Lib([_count_loop(lo, extent, dtype)])
    assert ("GOMP_parallel" in lib.ir) == (runtime == "gomp")
    o = aligned(np.zeros(extent + 1, dtype))
    for _ in range(3):
        assert lib("pcount", o) == 0
    np.testing.assert_array_equal(o[:extent], 3 * np.arange(1, extent + 1).astype(dtype))
    assert o[extent] == 0


def test_home_shards_caller_takes_the_first_shard():
    """With two threads, the caller (thread index 0) starts on the first half of the loop and
    the worker (index 1) on the second: iteration 0 runs on the calling thread, iteration n/2
    on the other one (each iteration sleeps 200 us, so the caller is still in its own half
    when the worker starts). Checked in a fresh process (the pool reads the thread count)."""
    script = textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {os.path.dirname(HERE)!r})
        import numpy as np
        from tvmpy.tir import expr as E, stmt as S, op
        from codegen.llvm_helpers import Lib, aligned, buf, func
        n = 256
        T = buf("T", n, "int32")
        i = E.Var("i")
        body = S.For(i, 0, n, S.ForKind.PARALLEL, S.seq(
            S.Evaluate(op.call_extern("int32", "usleep", 200)),
            S.BufferStore(T, op.call_extern("int32", "gettid"), [i])))
        lib = Lib([func("tid", [T], body)])
        t = aligned(np.full(n, -1, "int32"))
        assert lib("tid", t) == 0
        me = threading.get_native_id()
        print(int(t[0] == me), int(t[n // 2] != me), len(set(t.tolist())))
    """)
    env = dict(os.environ, TVM_NUM_THREADS="2")
    env.pop("TVMPY_PARALLEL_RUNTIME", None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "2"]
