"""tvmpy's parallel runtime (runtime/parallel_pool.py) under the LLVM backend's parallel loops:
correctness on awkward extents, many launches, concurrent callers, nesting, errors, fork, thread
counts, idle exit, exported libraries, and the libgomp fallback.

Tests that depend on environment variables or count the process's threads run in a fresh
Python process (the pool reads its configuration once per process)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.codegen.llvm import build, compile_funcs
from tvmpy.codegen.llvm_parallel import parallel_runtime
from tvmpy.config import config
from tvmpy.tir import expr as E
from tvmpy.tir import op
from tvmpy.tir import stmt as S

from .llvm_helpers import Lib, aligned, buf, func, rand
from .parallel_kernels import affine

HERE = os.path.dirname(os.path.abspath(__file__))

def _script(body: str, env: dict[str, str] | None = None, timeout: float = 120) -> list[str]:
    """Run ``body`` (with ``affine`` and ``tids`` imported) in a fresh Python; return the words
    of its stdout."""
    src = (f"import sys\nsys.path.insert(0, {os.path.dirname(HERE)!r})\n"
           "from codegen.parallel_kernels import affine, tids\n" + textwrap.dedent(body))
    full_env = dict(os.environ)
    for k in ("TVM_NUM_THREADS", "OMP_NUM_THREADS", "TVMPY_PARALLEL_RUNTIME",
              "PARALLEL_RUNTIME"):
        full_env.pop(k, None)
    full_env.update(env or {})
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                         env=full_env, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


@pytest.fixture(scope="module")
def affine_lib():
    lib = Lib([affine()])
    assert "tvmpy_parallel_run" in lib.ir and "GOMP" not in lib.ir
    return lib


@pytest.mark.parametrize("n", [1, 2, 7, 13, 97, 1021, 65537, 1_000_003])
def test_awkward_extents_match_numpy(affine_lib, n):
    a = rand(n, "float32", np.random.default_rng(n))
    b = aligned(np.full(n, np.nan, "float32"))
    assert affine_lib("affine", a, b) == 0
    np.testing.assert_allclose(b, 2 * a + np.arange(n, dtype="float32"), rtol=1e-6)


@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_every_iteration_runs_exactly_once(nthreads):
    """The guided schedule's chunks (compare-and-swap on the shared counter, shrinking sizes)
    cover each iteration once, on awkward extents, with threads racing for the chunks."""
    words = _script("""
        import numpy as np
        from codegen.llvm_helpers import Lib, aligned
        from codegen.parallel_kernels import bump
        lib = Lib([bump()])
        bad = 0
        for n in (1, 2, 3, 5, 7, 13, 31, 64, 97, 255, 1021, 4099):
            a = aligned(np.arange(n, dtype="int32") * 5)
            for _ in range(3):
                assert lib("bump", a) == 0
            bad += int((a != np.arange(n, dtype="int32") * 5 + 3).sum())
        print(bad)
    """, {"TVM_NUM_THREADS": str(nthreads)})
    assert words == ["0"]


def test_int64_loop_and_huge_chunk_count():
    """An int64 loop variable over 2**21 + 3 one-element iterations (chunk counter in int64)."""
    n = 2**21 + 3
    A = buf("A", n, "int64")
    i = E.Var("i", "int64")
    f = func("iota64", [A], S.For(i, E.const(0, "int64"), E.const(n, "int64"),
                                  S.ForKind.PARALLEL, S.BufferStore(A, i * 3, [i])))
    a = aligned(np.full(n, -1, "int64"))
    assert Lib([f])("iota64", a) == 0
    np.testing.assert_array_equal(a, np.arange(n, dtype="int64") * 3)


def test_thousands_of_back_to_back_launches():
    n = 61
    A = buf("A", n)
    i = E.Var("i")
    lib = Lib([func("inc", [A], S.For(i, 0, n, S.ForKind.PARALLEL,
                                      S.BufferStore(A, A[i] + 1.0, [i])))])
    a = aligned(np.zeros(n, "float32"))
    for _ in range(3000):
        assert lib("inc", a) == 0
    np.testing.assert_array_equal(a, np.full(n, 3000, "float32"))


def test_two_python_threads_call_parallel_kernels_concurrently(affine_lib):
    """ctypes releases the GIL: both threads are in the library at once (one owns the pool, the
    other runs its loop serially, or both alternate)."""
    errors: list[str] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for k in range(300):
            n = int(rng.integers(1, 5000))
            a = rand(n, "float32", rng)
            b = aligned(np.zeros(n, "float32"))
            if affine_lib("affine", a, b) != 0 or not np.allclose(
                    b, 2 * a + np.arange(n, dtype="float32"), rtol=1e-6):
                errors.append(f"thread {seed} call {k} n={n}")
                return

    threads = [threading.Thread(target=work, args=(s,)) for s in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_nested_parallel_loops_triangular():
    """A parallel loop inside a parallel body (run serially there) whose extent depends on the
    outer variable: C[i, j] = A[i] * B[j] for j <= i, else untouched."""
    n = 37
    A, B, C = buf("A", n), buf("B", n), buf("C", n * n)
    i, j = E.Var("i"), E.Var("j")
    inner = S.For(j, 0, i + 1, S.ForKind.PARALLEL, S.BufferStore(C, A[i] * B[j], [i * n + j]))
    lib = Lib([func("tri", [A, B, C], S.For(i, 0, n, S.ForKind.PARALLEL, inner))])
    rng = np.random.default_rng(5)
    a, b = rand(n, "float32", rng), rand(n, "float32", rng)
    c = aligned(np.full(n * n, 7.0, "float32"))
    assert lib("tri", a, b, c) == 0
    ref = np.where(np.tri(n, dtype=bool), np.outer(a, b), 7.0).astype("float32")
    np.testing.assert_allclose(c.reshape(n, n), ref, rtol=1e-6)


def test_error_in_parallel_body_is_reported_and_pool_stays_usable():
    n = E.Var("n")
    A = buf("A", n)
    i = E.Var("i")
    body = S.For(i, 0, n, S.ForKind.PARALLEL, S.AssertStmt(
        A[i] >= 0.0, "negative input", S.BufferStore(A, op.sqrt(A[i]), [i])))
    lib = Lib([func("psqrt", [A], body)])
    rng = np.random.default_rng(3)
    for k in range(200):
        x = rand(1000 + k, "float32", rng, 0, 9)
        bad = k % 3 == 0
        if bad:
            x[int(rng.integers(0, x.size))] = -1.0
        ref = x.copy()
        rc = lib("psqrt", x)
        if bad:
            assert rc == -1 and lib.last_error() == "negative input"
        else:
            assert rc == 0
            np.testing.assert_allclose(x, np.sqrt(ref), rtol=1e-6)


def test_modules_linked_together_share_one_pool_object():
    """Two LLVM modules with parallel loops linked into one library (build with imports) and
    exported: the pool object is linked once (no duplicate symbols) and its symbols are not
    exported from the library."""
    m2 = build([affine("affine2")], "llvm")
    m1 = build([affine("affine1")], "llvm", imports=[m2])
    rng = np.random.default_rng(9)
    for name in ("affine1", "affine2"):
        a = rand(333, "float32", rng)
        b = tvm.nd.array(np.zeros(333, "float32"))
        m1[name](tvm.nd.array(a), b)
        np.testing.assert_allclose(b.numpy(), 2 * a + np.arange(333), rtol=1e-6)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "two.so")
        m1.export_library(path)
        dyn = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                             text=True)
        if dyn.returncode == 0:
            assert "tvmpy_parallel" not in dyn.stdout
        needed = subprocess.run(["readelf", "-d", path], capture_output=True, text=True)
        if needed.returncode == 0:
            assert "libgomp" not in needed.stdout


def test_gomp_fallback_switch():
    f = affine("affine_gomp")
    with config(PARALLEL_RUNTIME="gomp"):
        assert parallel_runtime() == "gomp"
        c = compile_funcs([f])
        lib = Lib([f])
    assert "GOMP_parallel" in c.ir and "tvmpy_parallel_run" not in c.ir
    assert "gomp" in c.link_libs and "tvmpy_parallel" not in c.link_libs
    a = rand(1001, "float32", np.random.default_rng(1))
    b = aligned(np.zeros(1001, "float32"))
    assert lib("affine_gomp", a, b) == 0
    np.testing.assert_allclose(b, 2 * a + np.arange(1001), rtol=1e-6)
    assert parallel_runtime() == "pool"
    assert compile_funcs([f]).link_libs == ["tvmpy_parallel"]
    with config(PARALLEL_RUNTIME="tbb"), pytest.raises(ValueError, match="pool, gomp"):
        compile_funcs([f])


def test_no_parallel_loop_links_no_runtime():
    A = buf("A", 8)
    i = E.Var("i")
    c = compile_funcs([func("ser", [A], S.For(i, 0, 8, S.ForKind.SERIAL,
                                              S.BufferStore(A, A[i] + 1.0, [i])))])
    assert c.link_libs == []


@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_thread_count_env_respected(nthreads):
    """TVM_NUM_THREADS (over OMP_NUM_THREADS) sets the team: distinct thread ids seen by the
    iterations, and the threads the process gained."""
    words = _script("""
        import os, numpy as np
        from codegen.llvm_helpers import Lib, aligned
        lib = Lib([tids()])
        before = len(os.listdir("/proc/self/task"))
        t = aligned(np.zeros(256, "int32"))
        assert lib("tids", t) == 0
        print(len(set(t.tolist())), len(os.listdir("/proc/self/task")) - before)
    """, {"TVM_NUM_THREADS": str(nthreads), "OMP_NUM_THREADS": "5"})
    assert words == [str(nthreads), str(nthreads - 1)]


def test_omp_num_threads_used_without_tvm_num_threads():
    words = _script("""
        import numpy as np
        from codegen.llvm_helpers import Lib, aligned
        t = aligned(np.zeros(256, "int32"))
        assert Lib([tids()])("tids", t) == 0
        print(len(set(t.tolist())))
    """, {"OMP_NUM_THREADS": "3"})
    assert words == ["3"]


def test_idle_workers_exit():
    """Workers exit after ~1 s without work, and come back on the next parallel loop."""
    words = _script("""
        import os, time, numpy as np
        from codegen.llvm_helpers import Lib, aligned
        libs = [Lib([tids()]) for _ in range(3)]   # three libraries: three pools
        base = len(os.listdir("/proc/self/task"))
        t = aligned(np.zeros(256, "int32"))
        for lib in libs:
            assert lib("tids", t) == 0
        busy = len(os.listdir("/proc/self/task")) - base
        time.sleep(2.5)
        idle = len(os.listdir("/proc/self/task")) - base
        assert libs[0]("tids", t) == 0
        again = len(set(t.tolist()))
        print(busy, idle, again)
    """, {"TVM_NUM_THREADS": "2"})
    assert words == ["3", "0", "2"]


def test_fork_child_runs_parallel_loops_in_parallel():
    words = _script("""
        import os, multiprocessing as mp, numpy as np
        from codegen.llvm_helpers import Lib, aligned
        lib = Lib([tids(), affine()])
        t = aligned(np.zeros(256, "int32"))
        assert lib("tids", t) == 0          # the parent's pool is running
        def child(q):
            t = aligned(np.zeros(256, "int32"))
            rc = lib("tids", t)
            a = aligned(np.arange(5001, dtype="float32"))
            b = aligned(np.zeros(5001, "float32"))
            rc2 = lib("affine", a, b)
            q.put((rc, rc2, len(set(t.tolist())), bool(np.array_equal(b, 3 * a))))
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        p.join(60)
        if p.is_alive():
            p.kill()
            print("hang")
        else:
            print(p.exitcode, *q.get())
    """, {"TVM_NUM_THREADS": "2"})
    assert words == ["0", "0", "0", "2", "True"]


def test_exported_library_loads_without_compiler_or_libgomp(tmp_path):
    path = str(tmp_path / "par.so")
    build([affine()], "llvm").export_library(path)
    words = _script(f"""
        import numpy as np, tvmpy as tvm
        m = tvm.runtime.load_module({path!r})
        a = np.random.default_rng(0).uniform(-1, 1, 4099).astype("float32")
        b = tvm.nd.array(np.zeros(4099, "float32"))
        m["affine"](tvm.nd.array(a), b)
        import os
        maps = open("/proc/self/maps").read()
        print(bool(np.allclose(b.numpy(), 2 * a + np.arange(4099), rtol=1e-6)),
              "libgomp" in maps)
    """, {"CC": "/bin/false", "TVM_NUM_THREADS": "2"})
    assert words == ["True", "False"]
