"""relay.build's per-kernel compilation: the persistent kernel cache (a rebuild compiles
nothing and gives the same outputs; damaged entries are rebuilt; keys change with what changes
code; atomic writes; LRU cap) and the worker processes (fork and spawn give the build of the
test process; a worker's error or death is reported, not hung on)."""

import multiprocessing
import os

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import config, relay
from tvmpy.codegen.kernel_cache import KernelCache, cache_dir, default_cache
from tvmpy.ir.digest import Undigestable, structural_digest
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.backend import kernel_build
from tvmpy.target import Target

rng = np.random.default_rng(11)


def _model():
    """Five distinct kernels (two convolutions, a residual add, a reduction, a dense + tanh)
    at awkward sizes (5 channels in, 13x11 map, 7 outputs)."""
    x = relay.var("x", shape=(1, 5, 13, 11))
    w1 = relay.var("w1", shape=(8, 5, 3, 3))
    b1 = relay.var("b1", shape=(8,))
    w2 = relay.var("w2", shape=(8, 8, 1, 1))
    w3 = relay.var("w3", shape=(7, 8))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w1, padding=(1, 1)), b1))
    y = relay.add(relay.nn.conv2d(y, w2), y)
    y = relay.mean(y, axis=(2, 3))
    out = relay.tanh(relay.nn.dense(y, w3))
    mod = tvm.IRModule.from_expr(relay.Function(free_vars(out), out))
    values = {p.name_hint: rng.uniform(-1, 1, [int(d) for d in p.type_annotation.shape])
              .astype("float32") for p in mod["main"].params}
    params = {k: v for k, v in values.items() if k != "x"}
    return mod, params, values


MOD, PARAMS, VALUES = _model()


def _reference():
    args = [VALUES[p.name_hint] for p in MOD["main"].params]
    return np.asarray(relay.create_executor("debug", MOD).evaluate()(*args))


REF = _reference()


def _build(target="llvm", opt_level=3):
    with tvm.transform.PassContext(opt_level=opt_level):
        return relay.build(MOD, target=target, params=PARAMS)


def _run(lib):
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", VALUES["x"])
    m.run()
    return m.get_output(0).numpy()


@pytest.fixture
def cache_folder(tmp_path):
    """The kernel cache on, in a folder of this test's own."""
    folder = tmp_path / "kcache"
    with config.config(CACHE=1, CACHE_DIR=str(folder), BUILD_WORKERS=1):
        yield folder


def _entries(folder):
    return sorted(p for p in folder.rglob("*.kc") if not p.name.startswith(".tmp-"))


def _no_compiles(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("a kernel was compiled although the cache holds it")

    monkeypatch.setattr(kernel_build, "compile_kernel", fail)


def test_rebuild_from_cache_compiles_nothing_and_agrees(cache_folder, monkeypatch):
    first = _run(_build())
    np.testing.assert_allclose(first, REF, rtol=1e-5, atol=1e-5)
    stored = _entries(cache_folder)
    assert len(stored) >= 4  # one entry per distinct kernel
    _no_compiles(monkeypatch)
    lib = _build()
    np.testing.assert_array_equal(_run(lib), first)
    assert len(lib.lowered_funcs) == len(stored)  # the loop IR comes back from the cache too
    assert all(f.attrs.get("tir.lowered") for f in lib.lowered_funcs)
    path = str(cache_folder.parent / "model.so")  # and it exports and loads like any build
    lib.export_library(path)
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(tvm.runtime.load_module(path)["default"](tvm.cpu(0)))
    m.set_input("x", VALUES["x"])
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), first)


def test_damaged_entries_are_rebuilt(cache_folder):
    first = _run(_build())
    stored = _entries(cache_folder)
    stored[0].write_bytes(stored[0].read_bytes()[:40])  # truncated
    raw = bytearray(stored[1].read_bytes())
    raw[-5] ^= 0xFF  # one flipped byte
    stored[1].write_bytes(bytes(raw))
    stored[2].write_bytes(b"")  # empty
    before = {p: p.read_bytes() for p in stored[:3]}
    np.testing.assert_array_equal(_run(_build()), first)
    for p in stored[:3]:  # rewritten whole
        assert p.read_bytes() != before[p]
        assert KernelCache(cache_folder).get(p.stem) is not None


def test_disabled_cache_writes_nothing(tmp_path):
    with config.config(CACHE=0, CACHE_DIR=str(tmp_path / "k"), BUILD_WORKERS=1):
        assert default_cache() is None
        np.testing.assert_allclose(_run(_build()), REF, rtol=1e-5, atol=1e-5)
    assert not (tmp_path / "k").exists()


def test_dump_ir_and_tuned_configs_are_not_cached(cache_folder, tmp_path):
    from tvmpy import autotvm

    with config.config(DUMP_IR=str(tmp_path / "dump")):
        _build()
    assert not _entries(cache_folder)
    assert any((tmp_path / "dump" / "tir").iterdir())  # the tir passes ran and were dumped
    cfg = autotvm.task.space.FallbackConfigEntity()
    with autotvm.task.ApplyConfig(cfg):
        _build()
    assert not _entries(cache_folder)


def test_keys_change_with_what_changes_code():
    host = Target("llvm")
    base = kernel_build.context_key(host)
    assert base is not None and base == kernel_build.context_key(Target("llvm"))
    assert kernel_build.context_key(Target("llvm -mattr=-avx2,-avx512f")) != base
    assert kernel_build.context_key(Target("llvm -mcpu=x86-64")) != base
    with tvm.transform.PassContext(opt_level=1):
        assert kernel_build.context_key(host) != base
    with tvm.transform.PassContext(config={"relay.backend.strict_schedules": False}):
        assert kernel_build.context_key(host) != base
    with config.config(PARALLEL_RUNTIME="gomp"):
        assert kernel_build.context_key(host) != base
    # a value a key cannot capture (a function): not cached at all
    with tvm.transform.PassContext(config={"tir.add_lower_pass": [(1, lambda f: f)]}):
        assert kernel_build.context_key(host) is None


def test_structural_digest_is_up_to_renaming_and_sees_shapes():
    def fn(shape, name, axis=1):
        x = relay.var(name, shape=shape)
        return relay.Function([x], relay.nn.softmax(relay.exp(x), axis=axis))

    a = structural_digest(fn((2, 3), "a"))
    assert a == structural_digest(fn((2, 3), "b"))  # names do not matter
    assert a != structural_digest(fn((3, 2), "a"))  # shapes do
    assert a != structural_digest(fn((2, 3), "a", axis=0))  # attributes do
    x = relay.var("x", shape=(4,), dtype="float16")
    assert a != structural_digest(relay.Function([x], x))
    with pytest.raises(Undigestable):
        structural_digest([1, object()])


def test_cache_store_atomic_lru_and_garbage(tmp_path):
    c = KernelCache(tmp_path, max_bytes=10_000)
    keys = [f"{i:02x}" * 20 for i in range(8)]
    for i, k in enumerate(keys):
        assert c.put(k, os.urandom(3000))  # incompressible
        os.utime(c._path(k), (1000 + i, 1000 + i))  # written in order, oldest first
    os.utime(c._path(keys[0]), (2000, 2000))  # the oldest was used last
    assert not list(tmp_path.rglob(".tmp-*"))  # nothing half-written left behind
    c.evict()
    left = {p.stem for p in tmp_path.rglob("*.kc")}
    assert keys[0] in left and keys[7] in left and keys[1] not in left
    assert c.size() <= 10_000
    (tmp_path / "ab").mkdir(exist_ok=True)
    (tmp_path / "ab" / ("ab" * 20 + ".kc")).write_bytes(b"not an entry")
    assert c.get("ab" * 20) is None
    with pytest.raises(ValueError, match="hex"):
        c.get("../etc/passwd")


def _hammer(folder, seed, rounds):
    c = KernelCache(folder)
    payloads = [np.random.default_rng(s).bytes(200_000 + s) for s in range(4)]
    for r in range(rounds):
        c.put("ee" * 20, payloads[(seed + r) % 4])
        got = c.get("ee" * 20)
        if got is not None and got not in payloads:
            raise SystemExit(3)  # a torn or mixed entry
    raise SystemExit(0)


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(tmp_path, s, 60)) for s in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]


def test_cache_folder_knobs(tmp_path, monkeypatch):
    monkeypatch.setenv("TVMPY_CACHE_DIR", str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"
    with config.config(CACHE_DIR=str(tmp_path / "knob")):
        assert cache_dir() == tmp_path / "knob"
    monkeypatch.delenv("TVMPY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "tvmpy" / "kernels"
    monkeypatch.setenv("TVMPY_CACHE_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="TVMPY_CACHE_MAX_BYTES"):
        config.get("CACHE_MAX_BYTES")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_processes_build_the_same_library(method, tmp_path):
    with config.config(CACHE=1, CACHE_DIR=str(tmp_path), BUILD_WORKERS=2,
                       BUILD_START_METHOD=method):
        lib = _build()
    np.testing.assert_allclose(_run(lib), REF, rtol=1e-5, atol=1e-5)
    with config.config(CACHE=0, BUILD_WORKERS=1):
        serial = _build()
    np.testing.assert_array_equal(_run(lib), _run(serial))
    assert [f.name for f in lib.lowered_funcs] == [f.name for f in serial.lowered_funcs]


def _dies(*args, **kwargs):
    os._exit(7)


def _raises(*args, **kwargs):
    raise ValueError("boom in a worker")


def test_worker_errors_are_reported(tmp_path, monkeypatch):
    with config.config(CACHE=1, CACHE_DIR=str(tmp_path), BUILD_WORKERS=2,
                       BUILD_START_METHOD="fork"):
        monkeypatch.setattr(kernel_build, "compile_kernel", _raises)
        with pytest.raises(ValueError, match="boom in a worker"):
            _build()
        monkeypatch.setattr(kernel_build, "compile_kernel", _dies)
        with pytest.raises(kernel_build.KernelWorkerError, match="worker process died"):
            _build()
    assert not _entries(tmp_path)


def test_build_workers_setting():
    with config.config(BUILD_WORKERS=3):
        assert kernel_build.build_workers() == 3
    with config.config(BUILD_WORKERS=0):
        assert kernel_build.build_workers() == len(os.sched_getaffinity(0))
    with config.config(BUILD_WORKERS=-1), pytest.raises(ValueError, match="BUILD_WORKERS"):
        kernel_build.build_workers()
    with config.config(BUILD_START_METHOD="teleport"), pytest.raises(ValueError, match="fork"):
        kernel_build._start_method()


def test_loop_ir_too_deep_to_pickle_is_lowered_again(cache_folder, monkeypatch):
    monkeypatch.setattr(kernel_build, "_pickled", lambda func: b"")  # as for a RecursionError
    first = _build()
    want = [str(f) for f in first.lowered_funcs]
    lib = _build()  # from the cache: no pickled loop IR in the entries
    assert [str(f) for f in lib.lowered_funcs] == want
    np.testing.assert_array_equal(_run(lib), _run(first))


def test_eviction_leaves_other_folders_alone(tmp_path):
    (tmp_path / "aarch64-sysroot").mkdir()
    (tmp_path / "aarch64-sysroot" / "x.kc").write_bytes(b"0" * 5000)
    c = KernelCache(tmp_path, max_bytes=0)
    c.put("cd" * 20, b"payload")
    c.evict()
    assert (tmp_path / "aarch64-sysroot" / "x.kc").exists()
    assert not list(tmp_path.rglob("cd*.kc"))


def _untuned():
    from tvmpy.autotvm.task.dispatcher import FALLBACK

    return sorted(str(w) for _, w in FALLBACK.fallback_workloads)


@pytest.mark.parametrize("where", ["cache", "workers"])
def test_untuned_workloads_are_reported_from_the_cache_and_workers(where, tmp_path, monkeypatch,
                                                                   caplog):
    """autotvm's fallback list and the build's one notice line do not depend on where a kernel
    was compiled: here, in a worker process, or before (the cache)."""
    import logging

    from tvmpy import autotvm

    caplog.set_level(logging.WARNING, logger="tvmpy.autotvm")

    autotvm.task.clear_fallback_cache()
    with config.config(CACHE=1, CACHE_DIR=str(tmp_path), BUILD_WORKERS=1):
        _build()
    want = _untuned()
    assert any("conv2d" in w for w in want)
    autotvm.task.clear_fallback_cache()
    knobs = ({"CACHE": 1, "CACHE_DIR": str(tmp_path), "BUILD_WORKERS": 1} if where == "cache"
             else {"CACHE": 0, "BUILD_WORKERS": 2, "BUILD_START_METHOD": "fork"})
    if where == "cache":
        _no_compiles(monkeypatch)
    first = [r.getMessage() for r in caplog.records if r.name == "tvmpy.autotvm"]
    caplog.clear()
    with config.config(**knobs):
        _build()
    assert _untuned() == want
    lines = [r.getMessage() for r in caplog.records if r.name == "tvmpy.autotvm"]
    assert len(lines) == 1 and lines == first, (lines, first)  # the same count, one line
    autotvm.task.clear_fallback_cache()


def test_a_cache_folder_that_cannot_be_written_is_no_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with config.config(CACHE=1, CACHE_DIR=str(blocker / "kernels"), BUILD_WORKERS=1):
        np.testing.assert_allclose(_run(_build()), REF, rtol=1e-5, atol=1e-5)
    assert blocker.read_text() == "not a folder"


def _build_in_daemon(queue):
    try:
        with config.config(CACHE=0, BUILD_WORKERS=2):
            queue.put(_run(_build()).tolist())
    except BaseException as err:  # noqa: BLE001 - reported to the test
        queue.put(repr(err))


def test_a_daemonic_process_builds_in_process():
    """A build inside a daemonic worker process (which may not start children) compiles its
    kernels itself instead of failing to start workers."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_build_in_daemon, args=(queue,), daemon=True)
    p.start()
    got = queue.get(timeout=600)
    p.join(60)
    assert not isinstance(got, str), got
    assert p.exitcode == 0
    got = np.asarray(got, dtype="float32")
    np.testing.assert_allclose(got, REF, rtol=1e-5, atol=1e-5)
