"""The kernel cache's key covers everything that changes a kernel's code (each part is changed
alone and the key must change: a part left out is a stale kernel served), a process running
older code than its sources uses no cache, and damaged or concurrently written entries are
rebuilt, never a crash."""

from __future__ import annotations

import multiprocessing
import os

import llvmlite
import llvmlite.binding as llvm
import numpy as np
import pytest

import tvmpy
import tvmpy as tvm
from tvmpy import config, relay
from tvmpy.codegen import kernel_cache as kc
from tvmpy.codegen import llvm as cg_llvm
from tvmpy.codegen.kernel_cache import KernelCache, default_cache
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.backend import kernel_build
from tvmpy.target import Target
from tvmpy.target import target as target_mod
from tvmpy.target.cpu_features import CacheSizes


def _key(text="llvm"):
    return kernel_build.context_key(Target(text))


def test_key_covers_the_pass_context():
    base = _key()
    assert base is not None and base == _key()
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["FoldScaleAxis"]):
        assert _key() != base
    with tvm.transform.PassContext(opt_level=3, required_pass=["FoldScaleAxis"]):
        assert _key() != base
    with tvm.transform.PassContext(opt_level=3, config={"relay.FuseOps.max_depth": 3}):
        depth3 = _key()
    with tvm.transform.PassContext(opt_level=3, config={"relay.FuseOps.max_depth": 4}):
        assert _key() not in (base, depth3)


def test_key_covers_the_host_when_the_target_names_no_cpu(monkeypatch):
    base, named = _key(), _key("llvm -mcpu=x86-64")
    # another host CPU of the same features, other features, another core count, other caches
    # (twice this host's: a fixed pair would be some machine's own sizes)
    real = target_mod.host_cache_sizes()
    other = CacheSizes(l1d=2 * real.l1d, l2=2 * real.l2)
    for attr, value in [("host_cpu_name", lambda: "some-other-cpu"),
                        ("host_cpu_features", lambda: "+sse2,-avx2"),
                        ("host_cache_sizes", lambda: other)]:
        with monkeypatch.context() as m:
            m.setattr(target_mod, attr, value)
            assert _key() != base, attr
            assert _key("llvm -mcpu=x86-64") == named, attr  # a named CPU: not the host's
    more = (os.cpu_count() or 1) + 3
    with monkeypatch.context() as m:
        m.setattr(target_mod.os, "cpu_count", lambda: more)
        assert Target("llvm").num_cores == more
        assert _key() != base
    assert _key("llvm -mattr=-avx512f") != base
    assert _key("llvm -mcpu=x86-64 -mattr=+avx2") != named


def test_key_covers_versions_and_sources(monkeypatch):
    base = _key()
    for obj, attr, value in [(llvmlite, "__version__", "0.0.1"),
                             (llvm, "llvm_version_info", (1, 2, 3)),
                             (np, "__version__", "0.0.1"),
                             (kernel_build, "source_fingerprint", lambda: "edited"),
                             (kernel_build, "_version", lambda: "9.9")]:
        with monkeypatch.context() as m:
            m.setattr(obj, attr, value)
            assert _key() != base, attr


def test_key_covers_codegen_switches_and_environment(monkeypatch):
    base = _key()
    monkeypatch.delenv("TVMPY_STRICT_SCHEDULES", raising=False)
    loose = _key()
    monkeypatch.setenv("TVMPY_STRICT_SCHEDULES", "1")
    assert _key() != loose
    monkeypatch.setenv("TVMPY_STRICT_SCHEDULES", os.environ.get("TVMPY_STRICT_SCHEDULES", ""))
    with monkeypatch.context() as m:
        m.setenv("TVMPY_PARALLEL_RUNTIME", "gomp")
        assert _key() != base
    with monkeypatch.context() as m:
        m.setattr(cg_llvm, "USE_LIBMVEC", not cg_llvm.USE_LIBMVEC)
        assert _key() != base


def test_source_changed_since(tmp_path):
    (tmp_path / "sub").mkdir()
    f = tmp_path / "sub" / "m.py"
    f.write_text("x = 1\n")
    t = f.stat().st_mtime_ns
    assert kc.source_changed_since(tmp_path, t + 1) is None
    os.utime(f, ns=(t + 10, t + 10))
    assert kc.source_changed_since(tmp_path, t + 1) == str(f)


def _model():
    x = relay.var("x", shape=(3, 7))
    w = relay.var("w", shape=(5, 7))
    y = relay.tanh(relay.nn.dense(x, w))
    out = relay.sum(relay.exp(y), axis=1)
    return tvm.IRModule.from_expr(relay.Function(free_vars(out), out))


RNG = np.random.default_rng(3)
X = RNG.uniform(-1, 1, (3, 7)).astype("float32")
W = RNG.uniform(-1, 1, (5, 7)).astype("float32")
REF = np.exp(np.tanh(X @ W.T)).sum(axis=1)


def _build_and_run():
    from tvmpy.contrib import graph_executor

    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(_model(), target="llvm", params={"w": W})
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", X)
    m.run()
    return m.get_output(0).numpy()


def _entries(folder):
    return sorted(p for p in folder.rglob("*.kc") if not p.name.startswith(".tmp-"))


@pytest.fixture
def cache_folder(tmp_path):
    folder = tmp_path / "kcache"
    with config.config(CACHE=1, CACHE_DIR=str(folder), BUILD_WORKERS=1):
        yield folder


def test_a_process_whose_sources_changed_uses_no_cache(cache_folder, monkeypatch, caplog):
    assert default_cache() is not None
    monkeypatch.setattr(kc, "_STALE", [])
    monkeypatch.setattr(tvmpy, "_IMPORTED_NS", 0)  # every source file "edited since import"
    assert default_cache() is None
    np.testing.assert_allclose(_build_and_run(), REF, rtol=1e-5)
    assert not _entries(cache_folder)
    assert sum("kernel cache off" in r.getMessage() for r in caplog.records) == 1


def test_entries_of_valid_checksum_but_bad_content_are_rebuilt(cache_folder):
    np.testing.assert_allclose(_build_and_run(), REF, rtol=1e-5)
    stored = _entries(cache_folder)
    assert stored
    store = KernelCache(cache_folder)
    for i, p in enumerate(stored):  # whole entries, checksum right, content not an artifact
        store.put(p.stem, [b"not a pickle", b"\x80\x05K\x01."][i % 2])
    np.testing.assert_allclose(_build_and_run(), REF, rtol=1e-5)
    for p in stored:
        assert store.get(p.stem) not in (None, b"not a pickle", b"\x80\x05K\x01.")


def _child(folder, q):
    with config.config(CACHE=1, CACHE_DIR=str(folder), BUILD_WORKERS=1):
        out = _build_and_run()
    q.put(bool(np.allclose(out, REF, rtol=1e-5)))


def test_concurrent_builds_share_one_cache_folder(tmp_path):
    folder = tmp_path / "shared"
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(folder, q)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert [q.get(timeout=5) for _ in procs] == [True, True, True]
    with config.config(CACHE=1, CACHE_DIR=str(folder), BUILD_WORKERS=1):
        np.testing.assert_allclose(_build_and_run(), REF, rtol=1e-5)
