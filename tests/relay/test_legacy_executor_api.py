"""TVM's executor API and its legacy (v0.6-v0.7) names: ``relay.build_config``, ``graph, lib,
params = relay.build(...)``, ``contrib.graph_runtime.create``, ``relay.create_executor`` of every
kind, ``relay.build_module.bind_params_by_name``, ``GraphModule.set_input`` dtype conversion,
and how ``benchmark`` / ``time_evaluator`` results print."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor, graph_runtime
from tvmpy.runtime.evaluator import BenchmarkResult

B, K, M = 3, 13, 7  # awkward sizes


def _dense_model():
    x = relay.var("x", shape=(B, K))
    w = relay.var("w", shape=(M, K))
    b = relay.var("b", shape=(M,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))
    mod = tvm.IRModule.from_expr(relay.Function([x, w, b], relay.Tuple([y, x * relay.const(2.0)])))
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((M, K)).astype("float32"),
              "b": rng.standard_normal(M).astype("float32")}
    return mod, params


def _ref(x, params):
    return np.maximum(x @ params["w"].T + params["b"], 0), 2 * x


@pytest.fixture(scope="module")
def model():
    return _dense_model()


def _x(seed=1, dtype="float32"):
    return np.random.default_rng(seed).standard_normal((B, K)).astype(dtype)


def test_build_config_is_a_pass_context(model):
    mod, params = model
    with pytest.warns(DeprecationWarning, match="PassContext"):
        ctx = relay.build_config(opt_level=3)
    assert isinstance(ctx, tvm.transform.PassContext) and ctx.opt_level == 3
    with ctx:
        assert tvm.transform.PassContext.current().opt_level == 3
        lib = relay.build(mod, "llvm", params=params)
    with pytest.warns(DeprecationWarning):
        ctx = relay.build_config(opt_level=0, disabled_pass=["FoldConstant"])
    assert ctx.disabled_pass == ["FoldConstant"]
    with pytest.raises(NotImplementedError, match="instruments"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        relay.build_config(trace=print)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    x = _x()
    m.run(x=x)
    for i, want in enumerate(_ref(x, params)):
        tvm.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5, atol=1e-5)


def test_legacy_three_tuple_and_graph_runtime(model):
    mod, params = model
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(mod, "llvm", params=params)
    with pytest.warns(DeprecationWarning, match="legacy"):
        graph, lib, p = factory
    assert isinstance(graph, str) and '"nodes"' in graph
    assert isinstance(lib, tvm.runtime.Module) and isinstance(p, dict) and p  # folded: p0, p1
    m = graph_runtime.create(graph, lib, tvm.cpu(0))
    m.set_input(**p)
    x = _x(2)
    m.set_input("x", x)
    m.run()
    for i, want in enumerate(_ref(x, params)):
        tvm.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5, atol=1e-5)
    assert factory["default"] is not None  # the factory API is still there


@pytest.mark.parametrize("kind", ["graph", "vm", "debug"])
def test_create_executor_kinds(model, kind):
    mod, params = model
    ex = relay.create_executor(kind, mod=mod, device=tvm.cpu(0), target="llvm")
    f = ex.evaluate()
    x = _x(3)
    out = f(x, params["w"], params["b"])
    assert len(out) == 2
    for got, want in zip(out, _ref(x, params)):
        tvm.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    # params bind main's parameters of those names (TVM's create_executor(..., params))
    f = relay.build_module.create_executor(kind, mod, tvm.cpu(0), "llvm", params).evaluate()
    got = f(tvm.nd.array(x))
    tvm.testing.assert_allclose(got[0].numpy(), _ref(x, params)[0], rtol=1e-5, atol=1e-5)


def test_graph_executor_errors(model):
    mod, params = model
    f = relay.create_executor("graph", mod=mod, params=params).evaluate()
    with pytest.raises(TypeError, match=r"missing inputs \['x'\]"):
        f()
    with pytest.raises(TypeError, match="2 positional inputs for the 1 inputs"):
        f(_x(), _x())
    with pytest.raises(ValueError, match=r"expected shape \(3, 13\), got \(3, 12\)"):
        f(np.zeros((B, K - 1), "float32"))
    with pytest.raises(TypeError, match="must be an IRModule"):
        relay.create_executor("graph", mod=mod["main"])
    n = relay.Any()  # symbolic dims run in this graph executor (TVM's needs the VM)
    d = relay.var("d", shape=(n, 4))
    dyn = relay.create_executor("graph", tvm.IRModule.from_expr(relay.Function([d], d * d)))
    run = dyn.evaluate()
    for rows in (1, 5):
        dv = np.random.default_rng(rows).standard_normal((rows, 4)).astype("float32")
        tvm.testing.assert_allclose(run(dv).numpy(), dv * dv, rtol=1e-6)
    c = relay.var("c", shape=(), dtype="bool")  # control flow: the VM's, and the error says so
    branch = relay.Function([c, d], relay.If(c, d, d * d))
    with pytest.raises(ValueError, match=r"create_executor\('vm'"):
        relay.create_executor("graph", tvm.IRModule.from_expr(branch)).evaluate()
    # a single output is one NDArray, as TVM returns it
    x = relay.var("x", shape=(5,))
    one = relay.create_executor("graph", tvm.IRModule.from_expr(relay.Function([x], x + x)))
    xv = np.arange(5, dtype="float32") + 0.5
    tvm.testing.assert_allclose(one.evaluate()(xv).numpy(), 2 * xv)


def test_bind_params_by_name(model):
    mod, params = model
    f = relay.build_module.bind_params_by_name(mod["main"], params)
    assert [p.name_hint for p in f.params] == ["x"]
    x = _x(4)
    got = relay.create_executor("debug", tvm.IRModule.from_expr(f)).evaluate()(x)
    for g, want in zip(got, _ref(x, params)):
        tvm.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-5)


# ---- set_input converts numpy data as TVM ------------------------------------------------------
@pytest.fixture(scope="module")
def mixed():
    """A float32 and an int32 input."""
    x = relay.var("x", shape=(B, K))
    i = relay.var("i", shape=(B, K), dtype="int32")
    y = x + relay.cast(i, "float32")
    lib = relay.build(tvm.IRModule.from_expr(relay.Function([x, i], y)), "llvm")
    return graph_executor.GraphModule(lib["default"](tvm.cpu(0)))


def test_set_input_converts_as_tvm(mixed):
    x64 = _x(5, "float64")
    i64 = np.random.default_rng(6).integers(-1000, 1000, (B, K)).astype("int64")
    mixed.set_input("x", x64)  # float64 data for a float32 input (TVM converts)
    mixed.set_input(i=i64)  # int64 data for an int32 input
    mixed.run()
    want = x64.astype("float32") + i64.astype("float32")
    tvm.testing.assert_allclose(mixed.get_output(0).numpy(), want, rtol=1e-6)
    mixed.set_input("i", np.full((B, K), 7.0))  # whole floats convert exactly
    mixed.run()
    tvm.testing.assert_allclose(mixed.get_output(0).numpy(), x64.astype("float32") + 7)


def test_set_input_refuses_what_does_not_convert(mixed):
    with pytest.raises(ValueError, match=r"set_input\('i'\): expected dtype int32, got int64, "
                                         r"whose values do not all convert exactly"):
        mixed.set_input("i", np.full((B, K), 2**40, "int64"))
    with pytest.raises(ValueError, match="got float64, whose values do not all convert"):
        mixed.set_input("i", np.full((B, K), 0.5))
    with pytest.raises(ValueError, match="got complex128, which does not convert"):
        mixed.set_input("x", np.ones((B, K), "complex128"))
    with pytest.raises(ValueError, match=r"expected shape \(3, 13\), got \(13, 3\)"):
        mixed.set_input("x", np.ones((K, B), "float64"))  # the shape check stays
    with pytest.raises(ValueError, match="expected dtype float32, got float64"):
        mixed.set_input("x", tvm.nd.array(np.ones((B, K))))  # an NDArray is not converted


# ---- how timings print ---------------------------------------------------------------------------
def test_benchmark_result_prints_as_tvm():
    r = BenchmarkResult([0.001, 0.003, 0.002])
    assert repr(r) == ("BenchmarkResult(min=0.001, mean=0.002, median=0.002, max=0.003, "
                       f"std={r.std}, results=(0.001, 0.003, 0.002))")
    lines = str(r).split("\n")
    assert lines[0] == "Execution time summary:"
    assert lines[1] == " mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  "
    assert lines[2].split() == ["2.0000", "2.0000", "3.0000", "1.0000", f"{r.std * 1e3:.4f}"]
    assert all(len(c) == 12 for c in re.findall(r".{12}", lines[2][:64]))
    p = tvm.runtime.module.ProfileResult(mean=0.5, results=(0.5,))
    assert repr(p) == "ProfileResult(mean=0.5, results=(0.5,))" and p.mean == p[0]


def test_benchmark_and_time_evaluator_print(mixed):
    res = mixed.benchmark(tvm.cpu(0), repeat=3, number=2, x=_x(), i=np.ones((B, K), "int32"))
    assert str(res).startswith("Execution time summary:\n mean (ms)")
    assert repr(res).startswith("BenchmarkResult(min=")
    from tvmpy import te  # a compiled function's time_evaluator prints the same way

    A = te.placeholder((K,), name="A")
    C = te.compute((K,), lambda i: A[i] * 2.0, name="C")
    f = tvm.build(te.create_schedule(C.op), [A, C], "llvm", name="dbl")
    t = f.time_evaluator("dbl", tvm.cpu(0), number=3, repeat=2)(
        tvm.nd.array(np.ones(K, "float32")), tvm.nd.array(np.zeros(K, "float32")))
    assert len(t.results) == 2 and t.mean > 0 and str(t).startswith("Execution time summary:")
