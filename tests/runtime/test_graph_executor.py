"""The graph executor (runtime/graph_executor/), GraphModule (contrib/graph_executor.py), the
factory module and its export/load (relay/backend/executor_factory.py), on hand-written graph
JSON over kernels built with tvm.build from te schedules; numpy is the reference."""

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.contrib import graph_executor
from tvmpy.relay.backend.executor_factory import GraphExecutorFactoryModule
from tvmpy.runtime.graph_executor import PARAMS_SYMBOL, GraphJSONError

N, M, K = 5, 7, 11
BIG = (256, 384)
rng = np.random.default_rng(3)


def rand(shape, dtype="float32"):
    if dtype == "int8":
        return rng.integers(-9, 10, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


def _lower(outs, ins, name):
    s = te.create_schedule([o.op for o in outs])
    return tvm.lower(s, ins + outs, name=name)


@pytest.fixture(scope="module")
def lib():
    A = te.placeholder((N, M), name="A")
    B = te.placeholder((N, M), name="B")
    X = te.placeholder((N, K), name="X")
    W = te.placeholder((K, M), name="W")
    k = te.reduce_axis((0, K), name="k")
    zero = tvm.tir.const(0.0, "float32")
    P = te.placeholder(BIG, name="P")
    Q = te.placeholder(BIG, name="Q")
    I1 = te.placeholder((N, M), name="I1", dtype="int8")
    I2 = te.placeholder((N, M), name="I2", dtype="int8")
    funcs = [
        _lower([te.compute((N, M), lambda i, j: A[i, j] + B[i, j], name="C")], [A, B], "add"),
        _lower([te.compute((N, M), lambda i, j: A[i, j] * B[i, j], name="C")], [A, B], "mul"),
        _lower([te.compute((N, M), lambda i, j: te.max(A[i, j], zero), name="C")], [A], "relu"),
        _lower([te.compute((N, M), lambda i, j: -A[i, j], name="C")], [A], "neg"),
        _lower([te.compute((N, M), lambda i, j: te.sum(X[i, k] * W[k, j], axis=k), name="C")],
               [X, W], "matmul"),
        _lower([te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="C"),
                te.compute((N, M), lambda i, j: A[i, j] * 2.0, name="D")], [A], "split2"),
        _lower([te.compute(BIG, lambda i, j: P[i, j] + Q[i, j], name="R")], [P, Q], "addbig"),
        _lower([te.compute((N, M), lambda i, j: I1[i, j] + I2[i, j], name="C")], [I1, I2],
               "add_i8"),
        _lower([te.compute((N, M), lambda i, j: I1[i, j].astype("float32") + A[i, j],
                           name="C")], [I1, A], "cast_add"),
    ]
    return tvm.build(funcs, target="llvm")


class G:
    """Builder of graph JSON (contract C3); every entry is (N, M) float32 unless given."""

    def __init__(self):
        self.nodes, self.shapes, self.dtypes, self.row, self.args = [], [], [], [0], []

    def _add(self, node, outs):
        self.nodes.append(node)
        for shape, dtype in outs:
            self.shapes.append(list(shape))
            self.dtypes.append(dtype)
        self.row.append(self.row[-1] + len(outs))
        return len(self.nodes) - 1

    def input(self, name, shape=(N, M), dtype="float32"):
        nid = self._add({"op": "null", "name": name, "inputs": []}, [(shape, dtype)])
        self.args.append(nid)
        return (nid, 0)

    def op(self, func, inputs, nout=1, shape=(N, M), dtype="float32", name=None):
        node = {"op": "tvm_op", "name": name or f"{func}_{len(self.nodes)}",
                "inputs": [[n, i, 0] for n, i in inputs],
                "attrs": {"func_name": func, "num_inputs": str(len(inputs)),
                          "num_outputs": str(nout), "flatten_data": "0"}}
        nid = self._add(node, [(shape, dtype)] * nout)
        return [(nid, j) for j in range(nout)]

    def graph(self, heads):
        return {"nodes": self.nodes, "arg_nodes": self.args,
                "heads": [[n, i, 0] for n, i in heads], "node_row_ptr": self.row,
                "attrs": {"dltype": ["list_str", self.dtypes],
                          "shape": ["list_shape", self.shapes]}}

    def json(self, heads):
        from tvmpy.relay.backend.graph_plan_memory import plan_memory

        g = self.graph(heads)
        plan_memory(g)
        return json.dumps(g)


def mlp_graph():
    """y = relu(x @ w + b); z = y * x2 ; outputs (z, y + 1) via split2's first output."""
    g = G()
    x, w, b, x2 = g.input("x", (N, K)), g.input("w", (K, M)), g.input("b"), g.input("x2")
    (mm,) = g.op("matmul", [x, w], name="dense")
    (ab,) = g.op("add", [mm, b], name="bias")
    (y,) = g.op("relu", [ab], name="relu")
    (z,) = g.op("mul", [y, x2], name="mul")
    s1, _s2 = g.op("split2", [y], nout=2, name="split")
    return g.json([z, s1])


def mlp_ref(x, w, b, x2):
    y = np.maximum(x @ w + b, 0)
    return [y * x2, y + 1]


@pytest.fixture(scope="module")
def mlp(lib):
    params = {"w": rand((K, M)), "b": rand((N, M))}
    return GraphExecutorFactoryModule(mlp_graph(), lib, params), params


def test_mlp_matches_numpy(mlp):
    factory, params = mlp
    m = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
    x, x2 = rand((N, K)), rand((N, M))
    m.set_input("x", x)
    m.set_input(x2=tvm.nd.array(x2))
    m.run()
    want = mlp_ref(x, params["w"], params["b"], x2)
    assert m.get_num_outputs() == 2
    for i, w in enumerate(want):
        np.testing.assert_allclose(m.get_output(i).numpy(), w, rtol=1e-5, atol=1e-5)
    # run(**inputs), set by index, out= copies
    x = rand((N, K))
    m.set_input(m.get_input_index("x"), x)
    m.run(x2=x2)
    want = mlp_ref(x, params["w"], params["b"], x2)
    out = tvm.nd.empty((N, M))
    m.get_output(0, out=out)
    np.testing.assert_allclose(out.numpy(), want[0], rtol=1e-5, atol=1e-5)
    npout = np.empty((N, M), "float32")
    m.get_output(1, out=npout)
    np.testing.assert_allclose(npout, want[1], rtol=1e-5, atol=1e-5)


def test_inputs_introspection(mlp):
    factory, params = mlp
    m = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
    assert m.get_num_inputs() == 4  # as TVM: parameters count
    assert m.get_input_names() == ["x", "x2"]
    assert m.get_input_names(include_params=True) == ["x", "w", "b", "x2"]
    shapes, dtypes = m.get_input_info()
    assert shapes == {"x": (N, K), "x2": (N, M)} and dtypes == {"x": "float32", "x2": "float32"}
    np.testing.assert_array_equal(m.get_input("w").numpy(), params["w"])
    np.testing.assert_array_equal(m.get_input(2).numpy(), params["b"])
    assert m.get_input_index("nope") == -1
    x = rand((N, K))
    m.set_input("x", x)
    np.testing.assert_array_equal(m.get_input("x").numpy(), x)
    # overriding a parameter works and is used
    x2 = rand((N, M))
    m.set_input(w=np.zeros((K, M), "float32"), x2=x2)
    m.run()
    want = mlp_ref(x, np.zeros((K, M), "float32"), params["b"], x2)[0]
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-6)


def test_executors_are_independent(mlp):
    factory, params = mlp
    m1 = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
    m2 = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
    xs = [(rand((N, K)), rand((N, M))) for _ in range(2)]
    for m, (x, x2) in zip((m1, m2), xs):
        m.set_input(x=x, x2=x2)
        m.run()
    for m, (x, x2) in zip((m1, m2), xs):
        want = mlp_ref(x, params["w"], params["b"], x2)
        np.testing.assert_allclose(m.get_output(0).numpy(), want[0], rtol=1e-5, atol=1e-5)


def test_create_without_factory_needs_params(lib):
    m = graph_executor.create(mlp_graph(), lib, tvm.cpu(0))
    x, x2, w, b = rand((N, K)), rand((N, M)), rand((K, M)), rand((N, M))
    m.set_input(x=x, x2=x2)
    with pytest.raises(RuntimeError, match=r"inputs 'w', 'b' not set; call set_input"):
        m.run()
    m.load_params(relay.save_param_dict({"w": w, "b": b, "unused": np.ones(3)}))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), mlp_ref(x, w, b, x2)[0], rtol=1e-5,
                               atol=1e-5)
    assert m.get_input_names() == ["x", "x2"]  # loaded parameters are not user inputs


def test_input_errors(mlp):
    factory, _ = mlp
    m = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
    with pytest.raises(KeyError, match=r"no input named 'data'; inputs: x, x2 \(and 2 param"):
        m.set_input("data", rand((N, K)))
    with pytest.raises(KeyError, match="no input named 'y'"):
        m.set_input(y=rand((N, K)))
    with pytest.raises(ValueError, match=r"set_input\('x'\): expected shape \(5, 11\), got "
                                         r"\(5, 12\)"):
        m.set_input("x", rand((N, K + 1)))
    with pytest.raises(ValueError, match=r"expected dtype float32, got complex64, which does "
                                         r"not convert"):
        m.set_input("x", rand((N, K)).astype("complex64"))
    with pytest.raises(ValueError, match=r"expected dtype float32, got int8"):
        m.set_input("x2", tvm.nd.array(rand((N, M), "int8")))
    with pytest.raises(IndexError, match="input index 4 out of range: the graph has 4 inputs"):
        m.set_input(4, rand((N, K)))
    with pytest.raises(TypeError, match="name .str. or an index"):
        m.set_input(1.5, rand((N, K)))
    with pytest.raises(RuntimeError, match=r"inputs 'x', 'x2' not set"):
        m.run()
    m.set_input("x", rand((N, K)).tolist())  # nested lists convert to the input's dtype
    with pytest.raises(RuntimeError, match=r"input 'x2' not set"):
        m.run()
    with pytest.raises(IndexError, match="index 2 out of range: the graph has 2 outputs"):
        m.get_output(2)
    with pytest.raises(IndexError, match="out of range"):
        m.get_output(-1)
    with pytest.raises(TypeError, match="index must be an int"):
        m.get_output("0")
    with pytest.raises(ValueError, match="out has shape"):
        m.get_output(0, out=np.empty((2, 2), "float32"))
    with pytest.raises(TypeError, match="GraphModule wraps the executor"):
        graph_executor.GraphModule(factory)


def test_dtypes_int8_and_mixed(lib):
    g = G()
    a, b = g.input("a", dtype="int8"), g.input("b", dtype="int8")
    f = g.input("f")
    (s,) = g.op("add_i8", [a, b], dtype="int8")
    (c,) = g.op("cast_add", [s, f])
    m = graph_executor.create(g.json([c, s]), lib)
    va, vb, vf = rand((N, M), "int8"), rand((N, M), "int8"), rand((N, M))
    m.set_input(a=va, b=vb, f=vf)
    m.run()
    s_want = (va + vb).astype("int8")
    np.testing.assert_array_equal(m.get_output(1).numpy(), s_want)
    np.testing.assert_allclose(m.get_output(0).numpy(), s_want.astype("float32") + vf)
    assert m.get_output(1).dtype == "int8"


def test_graph_output_is_an_input_and_repeated_head(lib):
    g = G()
    x = g.input("x")
    (y,) = g.op("neg", [x])
    m = graph_executor.create(g.json([y, x, y]), lib)
    v = rand((N, M))
    m.set_input("x", v)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), -v)
    np.testing.assert_array_equal(m.get_output(1).numpy(), v)
    np.testing.assert_array_equal(m.get_output(2).numpy(), -v)


def test_graph_without_storage_id_gets_a_storage_per_entry(lib):
    # the memory plan is made at compile time (relay); a hand-written graph may leave it out
    g = G()
    x = g.input("x")
    (y,) = g.op("neg", [x])
    (z,) = g.op("relu", [y])
    m = graph_executor.create(json.dumps(g.graph([z])), lib)
    v = rand((N, M))
    m.set_input("x", v)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.maximum(-v, 0))


# ---- random graphs: the planner's reuse must never change results -------------------------------
UNARY = {"relu": lambda a: np.maximum(a, 0), "neg": lambda a: -a}
BINARY = {"add": np.add, "mul": np.multiply}


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_graphs_match_numpy(lib, data):
    g = G()
    n_in = data.draw(st.integers(1, 3))
    entries = [g.input(f"in{k}") for k in range(n_in)]
    values = {e: rand((N, M)) for e in entries}
    inputs = {f"in{k}": values[e] for k, e in enumerate(entries)}
    for _ in range(data.draw(st.integers(1, 16))):
        kind = data.draw(st.sampled_from(["relu", "neg", "add", "mul", "split2"]))
        pick = st.sampled_from(entries[-6:] if data.draw(st.booleans()) else entries)
        if kind in UNARY:
            a = data.draw(pick)
            (e,) = g.op(kind, [a])
            values[e] = UNARY[kind](values[a])
            entries.append(e)
        elif kind in BINARY:
            a, b = data.draw(pick), data.draw(pick)
            (e,) = g.op(kind, [a, b])
            values[e] = BINARY[kind](values[a], values[b])
            entries.append(e)
        else:
            a = data.draw(pick)
            e1, e2 = g.op("split2", [a], nout=2)
            values[e1], values[e2] = values[a] + 1, values[a] * 2
            entries += [e1, e2]
    heads = data.draw(st.lists(st.sampled_from(entries), min_size=1, max_size=3))
    m = graph_executor.create(g.json(heads), lib)
    m.set_input(**inputs)
    for _ in range(2):  # a second run over the same storage gives the same answer
        m.run()
        for i, h in enumerate(heads):
            np.testing.assert_allclose(m.get_output(i).numpy(), values[h], rtol=1e-6)


# ---- malformed graphs and graph/library mismatches -----------------------------------------------
def _small():
    g = G()
    x = g.input("x")
    (y,) = g.op("neg", [x])
    (z,) = g.op("relu", [y])
    return g.graph([z])


def _set(path, value):
    def f(g):
        obj = g
        for p in path[:-1]:
            obj = obj[p]
        obj[path[-1]] = value
    return f


@pytest.mark.parametrize("mutate, msg", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be an object"),
    (lambda g: g.pop("nodes"), "missing 'nodes'"),
    (lambda g: g.pop("heads"), "missing 'heads'"),
    (lambda g: g["attrs"].pop("dltype"), "no 'dltype'"),
    (_set(["nodes", 1, "op"], "conv"), "has op 'conv'; expected \"null\" or \"tvm_op\""),
    (lambda g: g["nodes"][1]["attrs"].pop("func_name"), "node 1 ('neg_1') has no attrs.func_name"),
    (_set(["nodes", 1, "attrs", "num_inputs"], "2"), "attrs.num_inputs is 2 but the node has 1"),
    (_set(["nodes", 1, "inputs"], [[9, 0, 0]]), "output 0 of node 9, which does not exist"),
    (_set(["nodes", 1, "inputs"], [[2, 0, 0]]), "topological order"),
    (_set(["nodes", 1, "inputs"], [["a"]]), "must be [node_id, output_index, version]"),
    (_set(["heads"], [[2, 1, 0]]), "heads refers to output 1 of node 2"),
    (_set(["arg_nodes"], [1]), "arg_nodes entry 1 is not a \"null\""),
    (_set(["attrs", "storage_id"], ["list_int", [0, 1]]), "storage_id"),
    (_set(["attrs", "shape", 1, 1], [N, M + 1]), "node 1 ('neg_1'): the graph's entries do not "
                                                 "match function neg"),
    (_set(["attrs", "dltype", 1, 2], "int8"), "node 2 ('relu_2'): the graph's entries do not "
                                              "match function relu"),
    (_set(["attrs", "dltype", 1, 0], "float8x"), "unknown dtype"),
    (_set(["nodes", 2, "attrs", "func_name"], "fused_conv"),
     "calls function 'fused_conv', which the library does not define (it has: add, mul"),
    (_set(["nodes", 0], {"name": "x"}), "node 0 must be an object with \"op\" and \"name\""),
])
def test_malformed_graph_json(lib, mutate, msg):
    g = _small()
    if isinstance(mutate, str):
        text = mutate  # the JSON text itself
    else:
        mutate(g)
        text = json.dumps(g)
    with pytest.raises(GraphJSONError) as info:
        graph_executor.create(text, lib)
    assert msg in str(info.value)


@pytest.mark.parametrize("sid, msg", [
    ([0, 1, 1, 2], r"storage 1 holds entry 1 \(live\) when node 2 \('b'\) writes entry 2"),
    ([0, 1, 2, 0], r"storage 0 holds entry 0 \(a graph input or output\) when node 3"),
    ([0, 1, 2, 1], None),  # a is dead when c is written: a valid reuse
    ([0, 1, 2, 2], r"storage 2 holds entry 2 \(live\)"),
])
def test_storage_plan_is_checked(lib, sid, msg):
    g = G()
    x = g.input("x")
    (a,) = g.op("neg", [x], name="a")
    (b,) = g.op("relu", [a], name="b")
    (c,) = g.op("neg", [b], name="c")
    (d,) = g.op("relu", [c], name="d")
    graph = g.graph([d])
    sid = sid + [3]
    graph["attrs"]["storage_id"] = ["list_int", sid]
    if msg is None:
        m = graph_executor.create(json.dumps(graph), lib)
        v = rand((N, M))
        m.set_input("x", v)
        m.run()
        np.testing.assert_array_equal(m.get_output(0).numpy(), np.maximum(np.maximum(-v, 0) * -1, 0))
        return
    with pytest.raises(GraphJSONError, match=msg + ".*not a valid memory plan"):
        graph_executor.create(json.dumps(graph), lib)


def test_kernel_failure_names_node(lib):
    from tvmpy.codegen.abi import signature
    from tvmpy.runtime.module import Module

    src = r"""
    #include <stdint.h>
    extern const char* __tvmpy_last_error;
    int32_t boom(void* A, void* B) { __tvmpy_last_error = "Assert fail: boom"; return -1; }
    """
    A = te.placeholder((N, M), name="A")
    sig = _lower([te.compute((N, M), lambda i, j: A[i, j], name="B")], [A], "boom")
    bad = Module.from_c_source(textwrap.dedent(src), [signature(sig)])
    g = G()
    x = g.input("x")
    (y,) = g.op("boom", [x], name="explode")
    m = graph_executor.create(g.json([y]), bad)
    m.set_input("x", rand((N, M)))
    with pytest.raises(RuntimeError, match=r"graph node 1 \('explode'\): boom failed .*boom"):
        m.run()


# ---- benchmark and profile ----------------------------------------------------------------------
def test_benchmark_and_profile(mlp):
    factory, _ = mlp
    m = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
    x, x2 = rand((N, K)), rand((N, M))
    res = m.benchmark(tvm.cpu(0), repeat=3, number=4, x=x, x2=x2)
    assert len(res.results) == 3 and 0 < res.min <= res.median <= res.max
    assert res.mean > 0 and res.std >= 0 and "mean=" in repr(res)
    assert str(res).startswith("Execution time summary:\n")
    res = m.benchmark(tvm.cpu(0), repeat=2, number=1, min_repeat_ms=2, end_to_end=True, x=x)
    assert len(res.results) == 2
    with pytest.raises(ValueError, match="positive int"):
        m.benchmark(tvm.cpu(0), repeat=0)
    with pytest.raises(ValueError, match="can only time 'run'"):
        m.benchmark(tvm.cpu(0), func_name="set_input")
    report = m.profile(number=3)
    names = [r["node"] for r in report.rows]
    assert names == ["dense", "bias", "relu", "mul", "split"]
    table = str(report)
    assert table.splitlines()[0].split()[:4] == ["Node", "#", "Time(us)", "%"]
    assert all(n in table for n in names) and "Total (run)" in table
    assert "Total (nodes, per run)" in table and report.nodes_per_run > 0
    times = [r["time"] for r in report.sorted_rows()]
    assert times == sorted(times, reverse=True) and all(t > 0 for t in times)
    # profiling does not change results
    np.testing.assert_allclose(m.get_output(1).numpy(),
                               mlp_ref(x, factory.params["w"].numpy(), factory.params["b"].numpy(),
                                       x2)[1], rtol=1e-5, atol=1e-5)


def test_module_time_evaluator_as_in_tvm(mlp):
    """``gm.module.time_evaluator("run", dev, number=, repeat=)()`` (TVM's way of timing a
    graph module): it runs the graph (the outputs are those of the inputs set) and returns a
    BenchmarkResult of ``repeat`` per-run times."""
    from tvmpy.runtime.evaluator import BenchmarkResult

    factory, _ = mlp
    m = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
    with pytest.raises(RuntimeError, match="not set"):  # the warm-up call checks
        m.module.time_evaluator("run", tvm.cpu(0), number=1)()
    x, x2 = rand((N, K)), rand((N, M))
    m.set_input(x=x, x2=x2)
    m.run()
    want = [m.get_output(i).numpy().copy() for i in range(m.get_num_outputs())]
    m.set_input(x=np.zeros_like(x))
    m.run()  # other outputs; the timed runs of the inputs below must bring ours back
    m.module.time_evaluator("set_input", tvm.cpu(0), number=2, repeat=1)("x", x)
    calls = []
    run = m.module.run
    m.module.run = lambda: (calls.append(1), run())[1]  # count the runs
    try:
        res = m.module.time_evaluator("run", tvm.cpu(0), number=3, repeat=4)()
    finally:
        del m.module.run
    assert isinstance(res, BenchmarkResult) and len(res.results) == 4
    assert len(calls) == 1 + 3 * 4  # one warm-up, then number x repeat
    assert 0 < res.min <= res.median <= res.max and res.min <= res.mean <= res.max
    assert res.std >= 0 and "mean=" in repr(res)
    for i, w in enumerate(want):
        np.testing.assert_allclose(m.get_output(i).numpy(), w, rtol=1e-6)
    res = m.module.time_evaluator("run", tvm.cpu(0), number=1, repeat=2, min_repeat_ms=1,
                                  cooldown_interval_ms=1)()
    assert len(res.results) == 2
    with pytest.raises(AttributeError, match="no function 'nope'"):
        m.module.time_evaluator("nope", tvm.cpu(0))
    with pytest.raises(ValueError, match="number must be a positive int"):
        m.module.time_evaluator("run", tvm.cpu(0), number=0)
    with pytest.raises(ValueError, match="runs on"):
        m.module.time_evaluator("run", tvm.cuda(0))
    with pytest.raises(TypeError, match="tvm Device"):
        m.module.time_evaluator("run", "cpu")


# ---- factory: export / load ---------------------------------------------------------------------
def test_factory_api(mlp, lib):
    factory, params = mlp
    assert factory.get_lib() is lib and factory.module is factory
    assert json.loads(factory.get_graph_json())["heads"] == json.loads(mlp_graph())["heads"]
    got = factory.get_params()
    assert set(got) == {"w", "b"}
    np.testing.assert_array_equal(got["w"].numpy(), params["w"])
    assert "default" in factory and callable(factory["default"])
    assert factory["matmul"] is lib["matmul"]  # library functions stay reachable
    with pytest.raises(TypeError, match="lib must be a runtime Module"):
        GraphExecutorFactoryModule(mlp_graph(), "lib.so", {})
    with pytest.raises(GraphJSONError, match="not valid JSON"):
        GraphExecutorFactoryModule("{", lib, {})
    f2 = GraphExecutorFactoryModule(mlp_graph(), lib, params, mod_name="net")
    assert isinstance(f2["net"](tvm.cpu(0)), graph_executor.GraphExecutor)
    with pytest.raises(AttributeError, match="no function 'default'"):
        f2["default"]


def _big_factory(lib):
    g = G()
    p, q = g.input("p", BIG), g.input("weight", BIG)
    (r,) = g.op("addbig", [p, q], shape=BIG)
    params = {"weight": rand(BIG)}
    return GraphExecutorFactoryModule(g.json([r]), lib, params), params


LOADER = r"""
import os, sys, json
for blocked in ("onnx", "onnxruntime", "torch", "llvmlite"):
    sys.modules[blocked] = None  # importing them now raises ImportError
import numpy as np
import tvmpy as tvm
from tvmpy.contrib import graph_executor
path, npz = sys.argv[1], sys.argv[2]
data = np.load(npz)
lib = tvm.runtime.load_module(path)
m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
m.set_input(p=data["p"])
m.run()
np.testing.assert_allclose(m.get_output(0).numpy(), data["want"], rtol=1e-6)
assert set(lib.get_params()) == {"weight"}
lib.export_library(path + ".again.so")  # a loaded factory exports (a copy of its file)
m2 = graph_executor.GraphModule(tvm.runtime.load_module(path + ".again.so")["default"](tvm.cpu(0)))
m2.set_input("p", data["p"]); m2.run()
np.testing.assert_allclose(m2.get_output(0).numpy(), data["want"], rtol=1e-6)
print("OK", json.loads(lib.get_graph_json())["heads"])
"""


def test_export_load_in_fresh_process_without_compiler_or_frameworks(lib, tmp_path):
    factory, params = _big_factory(lib)
    path = str(tmp_path / "net.so")
    factory.export_library(path)
    p = rand(BIG)
    np.savez(tmp_path / "io.npz", p=p, want=p + params["weight"])
    env = dict(os.environ, CC="/bin/false", PATH="/nonexistent")
    proc = subprocess.run([sys.executable, "-c", LOADER, path, str(tmp_path / "io.npz")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK [[2, 0, 0]]" in proc.stdout


def test_params_are_a_binary_symbol_not_json(lib, tmp_path):
    factory, params = _big_factory(lib)
    path = str(tmp_path / "net.so")
    factory.export_library(path)
    nbytes = params["weight"].nbytes
    assert os.path.getsize(path) > nbytes
    loaded = tvm.runtime.load_module(path)
    cdll = loaded._lib
    meta = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(cdll, "__tvmpy_metadata")))
    assert len(meta) < 20000  # graph JSON and signatures only
    info = json.loads(meta)["graph_executor"]
    assert info["params_symbol"] == PARAMS_SYMBOL and info["params_nbytes"] > nbytes
    addr = ctypes.addressof(ctypes.c_char.in_dll(cdll, PARAMS_SYMBOL))
    assert addr % 64 == 0
    blob = ctypes.string_at(addr, info["params_nbytes"])
    np.testing.assert_array_equal(relay.load_param_dict(blob)["weight"].numpy(), params["weight"])
    np.testing.assert_array_equal(loaded.get_params()["weight"].numpy(), params["weight"])
    # the loaded parameters view the library's read-only data (no copy)
    view = loaded.get_params()["weight"]._arr
    assert not view.flags.writeable and view.ctypes.data > addr
    assert loaded.get_lib().function_names() == lib.function_names()


def test_export_without_params_and_reexport_in_process(mlp, tmp_path):
    factory, params = mlp
    g = G()
    x = g.input("x")
    (y,) = g.op("neg", [x])
    noparams = GraphExecutorFactoryModule(g.json([y]), factory.get_lib(), {})
    path = str(tmp_path / "neg.so")
    noparams.export_library(path)
    m = graph_executor.GraphModule(tvm.runtime.load_module(path)["default"](tvm.cpu(0)))
    v = rand((N, M))
    m.set_input("x", v)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), -v)
    # the mlp: export, load, export the loaded one elsewhere, load that
    p1, p2 = str(tmp_path / "a.so"), str(tmp_path / "sub" / "b.so")
    factory.export_library(p1)
    os.makedirs(tmp_path / "sub")
    tvm.runtime.load_module(p1).export_library(p2)
    m = graph_executor.GraphModule(tvm.runtime.load_module(p2)["default"](tvm.cpu(0)))
    x, x2 = rand((N, K)), rand((N, M))
    m.set_input(x=x, x2=x2)
    m.run()
    want = mlp_ref(x, params["w"], params["b"], x2)
    np.testing.assert_allclose(m.get_output(0).numpy(), want[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="expected the path of the library file"):
        factory.export_library(str(tmp_path))


# ---- param dict ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64", "int32", "int8",
                                   "uint8", "bool"])
@pytest.mark.parametrize("shape", [(3, 5), (), (0,), (2, 0, 3), (1, 7, 1)])
def test_param_dict_round_trip(dtype, shape):
    if dtype == "bool":
        value = rng.integers(0, 2, size=shape).astype(bool)
    else:
        value = (rng.uniform(-50, 50, size=shape)).astype(dtype)
    params = {"a": value, "b.weight": tvm.nd.array(value), "ü": np.asfortranarray(value) if value.ndim else value}
    blob = relay.save_param_dict(params)
    assert isinstance(blob, bytes)
    back = relay.load_param_dict(blob)
    assert list(back) == list(params)
    for v in back.values():
        assert isinstance(v, tvm.nd.NDArray)
        assert v.shape == shape and v.dtype == np.dtype(dtype).name
        np.testing.assert_array_equal(v.numpy(), value)
    views = relay.load_param_dict(bytearray(blob), copy=False)
    np.testing.assert_array_equal(views["a"], value)
    assert not views["a"].flags.writeable


def test_param_dict_tvm_layout():
    blob = relay.save_param_dict({"w": np.array([1.5, -2.0], "float32")})
    magic, reserved, count, namelen = np.frombuffer(blob[:32], "<u8")
    assert (magic, reserved, count, namelen) == (0xF7E58D4F05049CB7, 0, 1, 1)
    assert blob[32:33] == b"w"
    assert np.frombuffer(blob[41:49], "<u8")[0] == 0xDD5E40F096B4A13F
    assert blob[-8:] == np.array([1.5, -2.0], "<f4").tobytes()
    assert relay.save_param_dict({}) and relay.load_param_dict(relay.save_param_dict({})) == {}


@pytest.mark.parametrize("make, msg", [
    (lambda b: b[:-3], "truncated"),
    (lambda b: b"\x00" * 8 + b[8:], "not a parameter dictionary"),
    (lambda b: b + b"\x00", "trailing bytes"),
    (lambda b: b[:10], "truncated while reading the header"),
    (lambda b: b"", "truncated"),
    (lambda b: b[:41] + b"\x01" + b[42:], "bad magic"),
])
def test_param_dict_bad_bytes(make, msg):
    blob = relay.save_param_dict({"w": np.arange(6, dtype="float32").reshape(2, 3)})
    with pytest.raises(ValueError, match=msg):
        relay.load_param_dict(make(blob))


def test_param_dict_bad_input():
    with pytest.raises(TypeError, match="expected bytes"):
        relay.load_param_dict("abc")
    with pytest.raises(TypeError, match="names must be str"):
        relay.save_param_dict({1: np.ones(2)})
    with pytest.raises(TypeError, match="dtype complex64"):
        relay.save_param_dict({"c": np.ones(2, "complex64")})
    with pytest.raises(TypeError, match="expected a dict"):
        relay.save_param_dict([np.ones(2)])


def test_nop_node_aliases_storage(lib):
    g = G()
    x = g.input("x")
    (y,) = g.op("neg", [x])
    (r,) = g.op("__nop", [y], name="reshape_nop")
    (z,) = g.op("relu", [r])
    graph = g.graph([z])
    sid = list(range(4))
    sid[2] = sid[1]  # the __nop output lives in its input's storage
    graph["attrs"]["storage_id"] = ["list_int", sid]
    m = graph_executor.create(json.dumps(graph), lib)
    v = rand((N, M))
    m.set_input("x", v)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.maximum(-v, 0))
    graph["attrs"]["storage_id"] = ["list_int", [0, 1, 2, 3]]
    with pytest.raises(GraphJSONError, match="__nop, which needs one input and one output"):
        graph_executor.create(json.dumps(graph), lib)


RELAY_LOADER = r"""
import sys
for blocked in ("onnx", "onnxruntime", "torch"):
    sys.modules[blocked] = None
import numpy as np
import tvmpy as tvm
from tvmpy.contrib import graph_executor
data = np.load(sys.argv[2])
m = graph_executor.GraphModule(tvm.runtime.load_module(sys.argv[1])["default"](tvm.cpu(0)))
m.set_input("data", data["x"])
m.run()
np.testing.assert_allclose(m.get_output(0).numpy(), data["want"], rtol=1e-4, atol=1e-5)
print("OK")
"""


def test_relay_build_export_load_in_fresh_process(tmp_path):
    """A model built by relay.build runs after export in a process without onnx/torch and with
    no C compiler."""
    from tvmpy.relay.analysis import free_vars

    x = relay.var("data", shape=(1, 3, 9, 7))
    w = relay.var("w", shape=(5, 3, 3, 3))
    b = relay.var("b", shape=(5,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, padding=(1, 1)), b))
    y = relay.nn.softmax(relay.nn.batch_flatten(y))
    mod = tvm.IRModule.from_expr(relay.Function(free_vars(y), y))
    params = {"w": rand((5, 3, 3, 3)), "b": rand((5,))}
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(mod, target="llvm", params=params)
    xv = rand((1, 3, 9, 7))
    want = relay.create_executor("debug", mod).evaluate()(xv, params["w"], params["b"])
    path = str(tmp_path / "small.so")
    factory.export_library(path)
    np.savez(tmp_path / "io.npz", x=xv, want=np.asarray(want))
    env = dict(os.environ, CC="/bin/false", PATH="/nonexistent")
    proc = subprocess.run([sys.executable, "-c", RELAY_LOADER, path, str(tmp_path / "io.npz")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]


def test_two_exported_models_in_one_process_keep_their_params(lib, tmp_path):
    paths, weights = [], []
    for k in range(2):
        factory, params = _big_factory(lib)
        paths.append(str(tmp_path / f"m{k}.so"))
        factory.export_library(paths[-1])
        weights.append(params["weight"])
    p = rand(BIG)
    for path, w in zip(paths, weights):
        m = graph_executor.GraphModule(tvm.runtime.load_module(path)["default"](tvm.cpu(0)))
        m.set_input("p", p)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), p + w, rtol=1e-6)


def test_debug_executor(lib, tmp_path, capsys):
    from tvmpy.contrib.debugger import debug_executor

    params = {"w": rand((K, M)), "b": rand((N, M))}
    m = debug_executor.create(mlp_graph(), lib, tvm.cpu(0), dump_root=str(tmp_path / "dbg"))
    m.set_input(**params)
    x, x2 = rand((N, K)), rand((N, M))
    m.run(x=x, x2=x2)
    table = capsys.readouterr().out
    assert "dense" in table and "Time(us)" in table
    assert [r["node"] for r in m.debug_report.rows] == ["dense", "bias", "relu", "mul", "split"]
    assert (tmp_path / "dbg" / "profile.txt").read_text().startswith("Node")
    want = mlp_ref(x, params["w"], params["b"], x2)
    np.testing.assert_allclose(m.get_output(0).numpy(), want[0], rtol=1e-5, atol=1e-5)


def test_low_precision_params_and_exported_module(tmp_path):
    """int4 weights and a bfloat16 output through relay.build, export_library and load_module;
    the parameter dictionary keeps ml_dtypes' types (and bits)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from tvmpy.runtime import param_dict

    x = relay.var("x", shape=(3, 7), dtype="float32")
    w = relay.var("w", shape=(3, 7), dtype="int4")
    body = relay.cast(relay.add(x, relay.cast(w, "float32")), "bfloat16")
    wv = np.random.default_rng(0).integers(-8, 8, (3, 7)).astype(ml_dtypes.int4)
    lib = relay.build(tvm.IRModule.from_expr(relay.Function([x, w], body)), "llvm",
                      params={"w": wv})
    path = str(tmp_path / "m.so")
    lib.export_library(path)
    m = graph_executor.GraphModule(tvm.runtime.load_module(path)["default"](tvm.cpu()))
    a = np.random.default_rng(1).standard_normal((3, 7)).astype(np.float32)
    m.set_input("x", a)
    m.run()
    out = m.get_output(0).numpy()
    want = (a + wv.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert out.dtype == want.dtype and np.array_equal(out.view(np.uint16), want.view(np.uint16))
    blob = param_dict.save_param_dict({"w": wv, "b": want})
    back = param_dict.load_param_dict(blob)
    assert back["w"].dtype == "int4" and np.array_equal(back["w"].numpy(), wv)
    assert np.array_equal(back["b"].numpy().view(np.uint16), want.view(np.uint16))
