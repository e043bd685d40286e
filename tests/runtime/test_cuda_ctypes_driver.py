"""The real ctypes binding of the CUDA driver API (runtime/cuda_module.py CtypesDriver) against a
C stand-in for libcuda.so.1 (fake_libcuda.c, host memory, one CPU "kernel"): every driver call
the runtime makes crosses the same C signatures as on a GPU machine, with 64-bit pointers."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.runtime import cuda_module

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def fake_lib(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    out = str(tmp_path_factory.mktemp("fakecuda") / "libcuda_fake.so")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", out,
                    os.path.join(HERE, "fake_libcuda.c")], check=True, timeout=120)
    return ctypes.CDLL(out)


@pytest.fixture(scope="module")
def vadd():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=128)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return tvm.build(s, [A, B, C], target="cuda", name="vadd")


@pytest.fixture
def driver(fake_lib, vadd):
    vadd.imported_modules[0]._programs.clear()
    drv = cuda_module.CtypesDriver(fake_lib)
    prev = cuda_module.set_driver(drv)
    yield fake_lib
    cuda_module.set_driver(prev)


def _u(lib, name, n=3):
    return tuple((ctypes.c_uint * n).in_dll(lib, name)) if n > 1 else ctypes.c_uint.in_dll(lib, name).value


@pytest.mark.parametrize("n", [1, 300])
def test_build_and_run_through_ctypes(driver, vadd, n):
    dev = tvm.cuda(0)
    assert dev.exist and not tvm.cuda(1).exist
    assert cuda_module.CUDA_API.device_name(0) == "Fake GPU"
    assert cuda_module.get_driver().driver_version() == 12090
    x = np.random.default_rng(n).standard_normal(n).astype("float32")
    y = np.random.default_rng(n + 1).standard_normal(n).astype("float32")
    c = tvm.nd.empty((n,), "float32", dev)
    vadd(tvm.nd.array(x, dev), tvm.nd.array(y, dev), c)
    np.testing.assert_array_equal(c.numpy(), x + y)
    assert _u(driver, "fake_last_grid") == ((n + 127) // 128, 1, 1)
    assert _u(driver, "fake_last_block") == (128, 1, 1)
    assert ctypes.c_int.in_dll(driver, "fake_loaded_elf").value == 1  # the sm_90 cubin
    d = tvm.nd.empty((n,), "float32", dev)
    d.copyfrom(c)  # device to device
    np.testing.assert_array_equal(d.numpy(), x + y)
    res = vadd.time_evaluator("vadd", dev, number=2, repeat=2)(tvm.nd.array(x, dev),
                                                               tvm.nd.array(y, dev), d)
    assert len(res.results) == 2 and all(t > 0 for t in res.results)


def test_ptx_on_an_arch_without_cubin(driver, vadd):
    ctypes.c_int.in_dll(driver, "fake_attr_minor").value = 9  # sm_89
    try:
        cuda_module.CUDA_API._reset()
        a = tvm.nd.array(np.ones(4, "float32"), tvm.cuda(0))
        vadd(a, a, a)
        assert ctypes.c_int.in_dll(driver, "fake_loaded_elf").value == 0  # PTX text
        np.testing.assert_array_equal(a.numpy(), 2 * np.ones(4, "float32"))
    finally:
        ctypes.c_int.in_dll(driver, "fake_attr_minor").value = 0
        cuda_module.CUDA_API._reset()


def test_driver_errors_are_named(driver):
    api = cuda_module.CUDA_API
    prog = api.load_binaries({"sm_90": b"\x7fELF..."}, 0)
    with pytest.raises(cuda_module.CUDAError, match="cuModuleGetFunction.*CUDA_ERROR_NOT_FOUND"):
        api.launch(prog, "missing_kernel", [1, 1, 1], [1, 1, 1], 0, [], 0)
    with pytest.raises(cuda_module.CUDAError, match="no CUDA device: cuda\\(2\\)"):
        api.alloc(16, 2)


def test_dynamic_shared_opt_in(driver):
    api = cuda_module.CUDA_API
    prog = api.load_binaries({"sm_90": b"\x7fELF..."}, 0)
    m = api.alloc(16, 0)
    api.launch(prog, "vadd_kernel0", [1, 1, 1], [4, 1, 1], 80 * 1024,
               [m, m, m, np.int32(0)], 0)
    assert _u(driver, "fake_dyn_shared", 1) == 80 * 1024
    assert _u(driver, "fake_last_shared", 1) == 80 * 1024


def test_prepared_calls_bind_launches_once(driver, vadd):
    # the graph executor's path: prepare once, then every call replays the launch bound on
    # the first (sizes, packed kernel parameters), reading whatever the buffers hold by then
    dev = tvm.cuda(0)
    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal(300).astype("float32") for _ in range(2))
    a, b, c = tvm.nd.array(x, dev), tvm.nd.array(y, dev), tvm.nd.empty((300,), "float32", dev)
    f = vadd.get_function("vadd")
    raw, _ = f.prepare([a, b, c])
    assert f._cfunc(*raw) == 0
    first = raw[0]["bound"]
    np.testing.assert_array_equal(c.numpy(), x + y)
    x2 = rng.standard_normal(300).astype("float32")
    a.copyfrom(x2)
    assert f._cfunc(*raw) == 0
    assert raw[0]["bound"] is first and len(first) == 1
    np.testing.assert_array_equal(c.numpy(), x2 + y)
    assert _u(driver, "fake_last_grid") == (3, 1, 1)
    # a direct call binds its own launch (another size here) and leaves the prepared one alone
    d = tvm.nd.empty((5,), "float32", dev)
    vadd(tvm.nd.array(x[:5], dev), tvm.nd.array(y[:5], dev), d)
    np.testing.assert_array_equal(d.numpy(), x[:5] + y[:5])
    assert f._cfunc(*raw) == 0 and _u(driver, "fake_last_grid") == (3, 1, 1)




def test_output_in_the_same_device_memory_as_an_input(driver, vadd, monkeypatch):
    """vadd(x, x, out) reads one device array twice, as it is; vadd(x, y, x) writes a device
    copy of x, copied back after the kernel (a kernel whose threads read what others write,
    a transpose, would otherwise see half-written data); two written arguments in one
    device array are refused before anything runs, naming both."""
    from tvmpy.runtime import gpu_module

    made = []
    real = gpu_module.device_empty
    monkeypatch.setattr(gpu_module, "device_empty",
                        lambda *a: made.append(a[0]) or real(*a))
    dev = tvm.cuda(0)
    v = np.random.default_rng(3).standard_normal(37).astype("float32")
    vd, out = tvm.nd.array(v, dev), tvm.nd.empty((37,), "float32", dev)
    made.clear()
    vadd(vd, vd, out)
    np.testing.assert_array_equal(out.numpy(), 2 * v)
    assert made == []  # nothing written is shared: no copy
    vadd(vd, out, vd)
    np.testing.assert_array_equal(vd.numpy(), 3 * v)
    assert made == [(37,)]  # C's private copy

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0, name="C")
    s = te.create_schedule([B.op, C.op])
    for t in (B, C):
        bx, tx = s[t].split(t.op.axis[0], factor=64)
        s[t].bind(bx, te.thread_axis("blockIdx.x"))
        s[t].bind(tx, te.thread_axis("threadIdx.x"))
    two = tvm.build(s, [A, B, C], target="cuda", name="two")
    with pytest.raises(ValueError, match="arguments B and C are the same device memory, and "
                                         "two writes both"):
        two(vd, out, out)


def test_cuda_graph_through_ctypes(driver, vadd):
    """The graph executor's stream and CUDA graph through the real ctypes binding: launches on
    a stream of its own, the capture (thread-local mode) recorded by the C stand-in and replayed
    by cuGraphLaunch with new inputs each run; stream and graph destroyed with the executor."""
    import gc

    from tvmpy.runtime.graph_executor import GraphExecutor

    from .test_cuda_graph import G

    g = G()
    x, w, y = g.input("x"), g.input("w"), g.input("y")
    s = g.op("vadd", [x, w], "add_w")
    z = g.op("vadd", [s, y], "add_y")
    graph = g.json([z, s])

    def c_int(name):
        return ctypes.c_int.in_dll(driver, name).value

    base = {k: c_int(k) for k in ("fake_kernel_runs", "fake_graph_launches", "fake_graphs_made",
                                  "fake_graphs_freed", "fake_streams")}
    ex = GraphExecutor(graph, vadd, tvm.cuda(0), use_cuda_graph=True)
    assert c_int("fake_streams") == base["fake_streams"] + 1
    rng = np.random.default_rng(11)
    wv = rng.standard_normal(37).astype("float32")
    ex.set_input("w", wv)
    for run in range(4):
        xv, yv = (rng.standard_normal(37).astype("float32") for _ in range(2))
        ex.set_input(x=xv, y=yv)
        ex.run()
        out = np.empty(37, "float32")
        ex.get_output(0, out=out)
        np.testing.assert_allclose(out, xv + wv + yv, rtol=1e-6)
        np.testing.assert_array_equal(ex.get_output(1).numpy(), xv + wv)
        assert c_int("fake_kernel_runs") == base["fake_kernel_runs"] + 2 * (run + 1)
        assert c_int("fake_graph_launches") == base["fake_graph_launches"] + run
    assert c_int("fake_graphs_made") == base["fake_graphs_made"] + 1
    assert c_int("fake_capture_mode") == 1  # CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    assert ex.cuda_graph_info()["graphs"] == [2]
    assert ctypes.c_int.in_dll(driver, "fake_async_copies").value >= 4 * 3
    del ex
    gc.collect()
    assert c_int("fake_graphs_freed") == base["fake_graphs_freed"] + 1
    assert c_int("fake_streams") == base["fake_streams"]
