"""CUDA graphs in the graph executor (runtime/graph_executor/cuda_graph.py) on the fake driver
(testing/cuda_fake.py FakeDriver: a launch on a capturing stream is recorded with its parameter
values, ``graph_launch`` replays the records in order, and what a capture must not contain
fails as on a GPU). Hand-written graph JSON over kernels built by tvm.build(target="cuda"),
run as numpy functions; numpy is the reference, inputs change between runs."""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.contrib import graph_executor
from tvmpy.contrib.cuda_graph import cuda_graph_executor
from tvmpy.relay.backend.executor_factory import GraphExecutorFactoryModule
from tvmpy.relay.backend.graph_plan_memory import plan_memory
from tvmpy.runtime import cuda_module as cuda
from tvmpy.runtime.graph_executor import GraphExecutor
from tvmpy.testing.cuda_fake import FakeDriver, view

N = 37  # prime: one partial block of 32 threads (test_cuda_ctypes_driver.py uses G too)


def _gpu(outs, ins, name):
    s = te.create_schedule([o.op for o in outs])
    for o in outs:
        bx, tx = s[o].split(o.op.axis[0], factor=32)
        s[o].bind(bx, te.thread_axis("blockIdx.x"))
        s[o].bind(tx, te.thread_axis("threadIdx.x"))
    return tvm.lower(s, ins + outs, name=name)


@pytest.fixture(scope="module")
def lib():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    T = te.compute((n,), lambda i: A[i] * 2.0, name="T")  # an intermediate buffer between
    U = te.compute((n,), lambda i: T[i] + 1.0, name="U")  # two kernels (an "alloc" step)
    s = te.create_schedule(U.op)
    for o in (T, U):
        bx, tx = s[o].split(o.op.axis[0], factor=32)
        s[o].bind(bx, te.thread_axis("blockIdx.x"))
        s[o].bind(tx, te.thread_axis("threadIdx.x"))
    return tvm.build([
        _gpu([te.compute((n,), lambda i: A[i] + B[i], name="C")], [A, B], "vadd"),
        _gpu([te.compute((n,), lambda i: A[i] * 2.0 - 1.0, name="C")], [A], "vaffine"),
        tvm.lower(s, [A, U], name="twostage"),
    ], target="cuda")


def _vadd(drv, grid, block, shared, a, b, c, n):
    assert grid[0] * block[0] >= n
    view(c, n, "float32")[:] = view(a, n, "float32") + view(b, n, "float32")


def _vaffine(drv, grid, block, shared, a, c, n):
    view(c, n, "float32")[:] = view(a, n, "float32") * np.float32(2) - np.float32(1)


def _twostage0(drv, grid, block, shared, a, t, n):
    view(t, n, "float32")[:] = view(a, n, "float32") * np.float32(2)


def _twostage1(drv, grid, block, shared, u, t, n):
    view(u, n, "float32")[:] = view(t, n, "float32") + np.float32(1)


@pytest.fixture
def fake(lib):
    impl = {"vadd_kernel0": _vadd, "vaffine_kernel0": _vaffine,
            "twostage_kernel0": _twostage0, "twostage_kernel1": _twostage1}
    kernels = {k: (types, impl[k]) for k, types in lib.plan["kernels"].items()}
    lib.imported_modules[0]._programs.clear()
    drv = FakeDriver(kernels)
    prev = cuda.set_driver(drv)
    yield drv
    cuda.set_driver(prev)


class G:
    def __init__(self):
        self.nodes, self.row, self.args = [], [0], []

    def input(self, name):
        self.nodes.append({"op": "null", "name": name, "inputs": []})
        self.args.append(len(self.nodes) - 1)
        self.row.append(self.row[-1] + 1)
        return len(self.nodes) - 1

    def op(self, func, inputs, name):
        self.nodes.append({"op": "tvm_op", "name": name, "inputs": [[i, 0, 0] for i in inputs],
                           "attrs": {"func_name": func, "num_inputs": str(len(inputs)),
                                     "num_outputs": "1", "flatten_data": "0"}})
        self.row.append(self.row[-1] + 1)
        return len(self.nodes) - 1

    def json(self, heads):
        n = self.row[-1]
        g = {"nodes": self.nodes, "arg_nodes": self.args, "heads": [[h, 0, 0] for h in heads],
             "node_row_ptr": self.row, "attrs": {"dltype": ["list_str", ["float32"] * n],
                                                 "shape": ["list_shape", [[N]] * n]}}
        plan_memory(g)
        return json.dumps(g)


def chain_graph(host: bool = False):
    """z = affine(x + w) + y (three kernels; with ``host``, a host node negating the sum in the
    middle, then one more affine): outputs (z, x + w)."""
    g = G()
    x, w, y = g.input("x"), g.input("w"), g.input("y")
    s = g.op("vadd", [x, w], "add_w")
    a = g.op("vaffine", [s], "affine")
    if host:
        a = g.op("host_neg", [a], "neg_on_host")
    z = g.op("vadd", [a, y], "add_y")
    if host:
        z = g.op("vaffine", [z], "affine2")
    return g.json([z, s])


def chain_ref(x, w, y, host=False):
    s = x + w
    a = s * np.float32(2) - np.float32(1)
    if host:
        return [(-a + y) * np.float32(2) - np.float32(1), s]
    return [a + y, s]


rng = np.random.default_rng(29)


def rand():
    return rng.uniform(-2, 2, N).astype("float32")


def check_runs(ex, host=False, runs=4):
    w = rand()
    ex.set_input("w", w)
    for _ in range(runs):
        x, y = rand(), rand()
        ex.set_input(x=x, y=y)
        ex.run()
        got = [ex.get_output(i).numpy() for i in range(2)]
        for g, want in zip(got, chain_ref(x, w, y, host)):
            np.testing.assert_allclose(g, want, rtol=1e-6)


def test_replay_across_changing_inputs(fake, lib):
    """The first run launches every kernel on the executor's stream and captures them; each
    later run is one graph launch (no Python launch), reading what set_input copied into the
    same buffers: outputs equal numpy's for new inputs on every run."""
    ex = GraphExecutor(chain_graph(), lib, tvm.cuda(0), use_cuda_graph=True)
    assert len(fake.streams) == 1
    check_runs(ex, runs=1)
    assert len(fake.launches) == 3 and fake.stream_launches == 3  # warm-up, on the stream
    assert fake.graphs_made == 1 and fake.graph_launches == 0
    check_runs(ex, runs=5)
    assert len(fake.launches) == 3  # nothing launched outside the graph since
    assert fake.graph_launches == 5 and fake.replayed == 15
    assert fake.graphs_made == 1 and fake.capture_errors == []
    assert fake.async_copies >= 2 * 6  # set_input: on the stream
    info = ex.cuda_graph_info()
    assert info["enabled"] and info["graphs"] == [3] and info["plain"] == []
    assert info["captures"] == 1 and info["disabled"] is None
    assert "'add_w'" in info["segments"][0] and "'add_y'" in info["segments"][0]


def test_plain_executor_uses_the_stream_too(fake, lib):
    ex = GraphExecutor(chain_graph(), lib, tvm.cuda(0))
    check_runs(ex, runs=3)
    assert fake.stream_launches == 9 and fake.graph_launches == 0
    assert ex.cuda_graph_info() == {"enabled": False, "stream": True}
    out = np.empty(N, "float32")
    copies = fake.async_copies
    assert ex.get_output(1, out=out) is out  # on the stream, then waited for
    assert fake.async_copies == copies + 1
    np.testing.assert_array_equal(out, ex.get_output(1).numpy())
    wide = np.empty(N, "float64")  # another dtype, a read-only array: numpy's copy
    ex.get_output(1, out=wide)
    np.testing.assert_array_equal(wide, out)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ex.get_output(1, out=out)
    assert fake.async_copies == copies + 1


def test_time_evaluator_times_the_replay(fake, lib):
    ex = GraphExecutor(chain_graph(), lib, tvm.cuda(0), use_cuda_graph=True)
    check_runs(ex, runs=2)
    launches, replays = len(fake.launches), fake.graph_launches
    res = ex.time_evaluator("run", tvm.cuda(0), number=3, repeat=2)()
    assert len(res.results) == 2
    assert fake.graph_launches == replays + 1 + 6 and len(fake.launches) == launches
    b = ex.benchmark(tvm.cuda(0), repeat=2, number=2)
    assert len(b.results) == 2 and len(fake.launches) == launches


class HostNeg:
    """A host function in a GPU graph (the prepared-call protocol of runtime/function.py):
    reads the device array back, negates it, writes it to the device."""

    def prepare(self, args):
        return list(args), []

    def _cfunc(self, a, out):
        out.copyfrom(-a.numpy())
        return 0

    def _raise_error(self, rc):
        raise RuntimeError(f"host_neg failed ({rc})")


class WithHostNode:
    def __init__(self, lib):
        self.lib = lib

    def get_function(self, name):
        return HostNeg() if name == "host_neg" else self.lib.get_function(name)


def test_host_node_splits_the_capture(fake, lib):
    """A host call in the middle: the kernels before and after it are captured as two graphs,
    and it runs between their launches, every run."""
    ex = GraphExecutor(chain_graph(host=True), WithHostNode(lib), tvm.cuda(0),
                       use_cuda_graph=True)
    check_runs(ex, host=True, runs=4)
    info = ex.cuda_graph_info()
    assert info["graphs"] == [2, 2]
    assert info["plain"] == [("neg_on_host", "not a CUDA function (a host call)")]
    assert fake.graphs_made == 2 and fake.graph_launches == 2 * 3 and fake.replayed == 12
    assert len(fake.launches) == 4 and fake.capture_errors == []


def test_capture_refused_falls_back_to_launches(fake, lib):
    fake.fail_capture = "CUDA_ERROR_NOT_SUPPORTED"
    ex = GraphExecutor(chain_graph(), lib, tvm.cuda(0), use_cuda_graph=True)
    with pytest.warns(RuntimeWarning, match="CUDA graphs off.*CUDA_ERROR_NOT_SUPPORTED"):
        check_runs(ex, runs=1)
    check_runs(ex, runs=3)
    assert fake.graph_launches == 0 and len(fake.launches) == 12
    info = ex.cuda_graph_info()
    assert "CUDA_ERROR_NOT_SUPPORTED" in info["disabled"] and info["graphs"] == []
    assert [n for n, _ in info["plain"]] == ["add_w", "affine", "add_y"]


def test_unsafe_call_in_capture_falls_back(fake, lib, monkeypatch):
    """A call that synchronizes while being captured invalidates the capture: the executor
    warns, names it, and that plan runs plain launches (correct results)."""
    from tvmpy.runtime.gpu_module import GPUFunction

    real = GPUFunction._cfunc

    def syncing(self, state):
        rc = real(self, state)
        self.module.api.sync(0)
        return rc

    monkeypatch.setattr(GPUFunction, "_cfunc", syncing)
    ex = GraphExecutor(chain_graph(), lib, tvm.cuda(0), use_cuda_graph=True)
    with pytest.warns(RuntimeWarning, match="CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"):
        check_runs(ex, runs=1)
    assert fake.capture_errors == ["cuCtxSynchronize"] and not fake.streams[-1].recording
    check_runs(ex, runs=2)
    assert fake.graph_launches == 0 and fake.graphs_made == 0


def _replan(ex):
    """New device storage for every entry, the values copied, the calls prepared on it: what
    a plan for new input shapes (or re-planned storage) gives the executor."""
    from tvmpy.runtime.graph_executor.storage import _device_entries

    old = ex._entries
    ssize = ex._storage.sizes({e: a.shape for e, a in enumerate(old)})
    new = _device_entries(ex.device, ssize, ex._sids, old)
    for e in ex._input_eids:
        new[e].copyfrom(old[e])
    prev = ex._active
    ex._activate(ex._prepare_calls(new))
    return prev


def test_recapture_per_plan(fake, lib):
    """Graphs belong to a plan (its device pointers): a new plan is captured on its first run,
    switching back to an earlier plan replays its graph, and a dropped plan frees its
    graph."""
    ex = GraphExecutor(chain_graph(), lib, tvm.cuda(0), use_cuda_graph=True)
    check_runs(ex, runs=2)
    first = _replan(ex)
    check_runs(ex, runs=3)
    assert ex.cuda_graph_info()["captures"] == 2 and fake.graphs_made == 2
    second = ex._active
    ex._activate(first)
    launches = len(fake.launches)
    check_runs(ex, runs=2)
    assert fake.graphs_made == 2 and len(fake.launches) == launches  # replayed, not captured
    ex._activate(second)
    check_runs(ex, runs=1)
    del first
    gc.collect()
    assert fake.graphs_freed == 1
    ex.set_use_cuda_graph(False)
    gc.collect()
    assert fake.graphs_freed == 2
    check_runs(ex, runs=2)
    assert ex.cuda_graph_info()["enabled"] is False
    ex.set_use_cuda_graph(True)
    check_runs(ex, runs=2)
    assert fake.graphs_made == 3


def test_driver_errors_name_the_node_or_segment(fake, lib):
    ex = GraphExecutor(chain_graph(), lib, tvm.cuda(0))
    ex.set_input(x=rand(), y=rand(), w=rand())
    fake.fail_kernels = {"vaffine_kernel0"}
    with pytest.raises(cuda.CUDAError, match=r"graph node 4 \('affine'\): CUDA cuLaunchKernel "
                                             "failed: CUDA_ERROR_LAUNCH_FAILED"):
        ex.run()
    g = GraphExecutor(chain_graph(), lib, tvm.cuda(0), use_cuda_graph=True)
    g.set_input(x=rand(), y=rand(), w=rand())
    with pytest.raises(cuda.CUDAError, match=r"graph node 4 \('affine'\)"):
        g.run()  # the warm-up run
    fake.fail_kernels = set()
    g.run()
    g.run()
    fake.fail_kernels = {"vaffine_kernel0"}
    with pytest.raises(cuda.CUDAError, match=r"CUDA graph of graph nodes 3 \('add_w'\) to 5 "
                                             r"\('add_y'\), 3 calls: CUDA cuGraphLaunch failed"):
        g.run()


def test_switches(fake, lib, monkeypatch):
    graph = chain_graph()
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
        GraphExecutor(graph, lib, tvm.cpu(0), use_cuda_graph=True)
    monkeypatch.setenv("TVMPY_USE_CUDA_GRAPH", "1")
    assert GraphExecutor(graph, lib, tvm.cuda(0)).cuda_graph_info()["enabled"]
    assert not GraphExecutor(graph, lib, tvm.cuda(0), use_cuda_graph=False) \
        .cuda_graph_info()["enabled"]
    monkeypatch.delenv("TVMPY_USE_CUDA_GRAPH")
    assert not GraphExecutor(graph, lib, tvm.cuda(0)).cuda_graph_info()["enabled"]
    m = cuda_graph_executor.create(graph, lib, tvm.cuda(0))
    assert isinstance(m, graph_executor.GraphModule)
    m.set_input(w=rand())
    x, y = rand(), rand()
    m.set_input(x=x, y=y)
    m.capture_cuda_graph()
    assert m.cuda_graph_info()["graphs"] == [3]
    x = rand()
    m.run(x=x)
    np.testing.assert_allclose(m.get_output(0).numpy(), chain_ref(x, m.get_input("w").numpy(),
                                                                  y)[0], rtol=1e-6)
    assert graph_executor.create(graph, lib, tvm.cuda(0), use_cuda_graph=True) \
        .module.cuda_graph_info()["enabled"]
    w = rand()
    fac = GraphExecutorFactoryModule(graph, lib, {"w": w})
    g = graph_executor.GraphModule(fac["default"](tvm.cuda(0), use_cuda_graph=True))
    for _ in range(3):
        x, y = rand(), rand()
        g.run(x=x, y=y)
        np.testing.assert_allclose(g.get_output(0).numpy(), chain_ref(x, w, y)[0], rtol=1e-6)
    assert fake.graph_launches == 1 + 2  # m: one replay; g: the first run captures


def test_executors_of_one_library_have_their_own_scratch(fake, lib):
    """Two executors' streams may run at the same time on a GPU: a function's intermediate
    buffer (a launch plan's "alloc") is per stream, so their captured graphs never share one."""
    g = G()
    x, y = g.input("x"), g.input("y")
    t = g.op("twostage", [x], "two")
    z = g.op("vadd", [t, y], "add")
    graph = g.json([z, t])
    exs = [GraphExecutor(graph, lib, tvm.cuda(0), use_cuda_graph=True) for _ in range(2)]
    for _ in range(3):
        for ex in exs:
            xv, yv = rand(), rand()
            ex.run(x=xv, y=yv)
            u = xv * np.float32(2) + np.float32(1)
            np.testing.assert_allclose(ex.get_output(1).numpy(), u, rtol=1e-6)
            np.testing.assert_allclose(ex.get_output(0).numpy(), u + yv, rtol=1e-6)
    scratch = lib.get_function("twostage")._stream_scratch
    mems = {id(held[1]) for store in scratch.values() for held in store.values()}
    assert len(scratch) == 2 and len(mems) == 2
    assert [e.cuda_graph_info()["graphs"] for e in exs] == [[3], [3]]
