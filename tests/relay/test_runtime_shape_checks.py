"""Run-time size checks (relay/size_checks.py): an operator that needs two ``relay.Any`` sizes
equal gets them checked before any kernel runs, on the graph executor, the VM and the
interpreter; consistent sizes give numpy's answer, inconsistent ones an error naming the
operator and the dimensions (never a crash or a wrong answer)."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay import Any
from tvmpy.relay.size_checks import size_checks_of
from tvmpy.relay.type_infer import infer_type
from tvmpy.topi import testing

EXECUTORS = ["graph", "vm", "debug"]


def _rand(*shape, dtype="float32"):
    if dtype == "bool":
        return np.random.rand(*shape) > 0.5
    return (np.random.rand(*shape) - 0.5).astype(dtype)


def _run(kind, func, args):
    mod = tvm.IRModule.from_expr(func)
    if kind == "graph":
        lib = relay.build(mod, "llvm")
        m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        for p, a in zip(func.params, args):
            m.set_input(p.name_hint, a)
        m.run()
        return m.get_output(0).numpy()
    out = relay.create_executor(kind, mod=mod, target="llvm").evaluate()(*args)
    return out.numpy() if hasattr(out, "numpy") else np.asarray(out)


def _ln(x, g, b):
    return testing.layer_norm_python(x, g, b, -1, 1e-5)


def _case(name):
    """(function, [good inputs...], reference, bad inputs, error pattern) of each operator."""
    v = relay.var
    if name == "concatenate":
        x, y = v("x", shape=(Any(), Any())), v("y", shape=(1, Any()))
        return (relay.Function([x, y], relay.concatenate([x, y], 0)),
                [[_rand(4, 3), _rand(1, 3)], [_rand(1, 7), _rand(1, 7)]],
                lambda a, b: np.concatenate([a, b], 0), [_rand(4, 3), _rand(1, 5)],
                r"concatenate.*dimension 1 of field 1 is 5, but dimension 1 of field 0 is 3")
    if name == "add":
        x, y = v("x", shape=(Any(), 3)), v("y", shape=(Any(), 3))
        return (relay.Function([x, y], relay.exp(x + y)),
                [[_rand(4, 3), _rand(4, 3)], [_rand(4, 3), _rand(1, 3)], [_rand(1, 3), _rand(5, 3)]],
                lambda a, b: np.exp(a + b), [_rand(4, 3), _rand(5, 3)],
                r"add.*dimension -2 of the lhs is 4, but dimension -2 of the rhs is 5")
    if name == "add_static":
        x, y = v("x", shape=(Any(), 3)), v("y", shape=(5, 3))
        return (relay.Function([x, y], x * y),
                [[_rand(5, 3), _rand(5, 3)], [_rand(1, 3), _rand(5, 3)]],
                lambda a, b: a * b, [_rand(4, 3), _rand(5, 3)],
                r"multiply.*dimension -2 of the lhs is 4, but dimension -2 of the rhs is 5")
    if name == "where":
        c, x, y = v("c", shape=(Any(),), dtype="bool"), v("x", shape=(Any(),)), v("y", shape=(Any(),))
        return (relay.Function([c, x, y], relay.where(c, x, y)),
                [[_rand(6, dtype="bool"), _rand(6), _rand(6)], [_rand(1, dtype="bool"), _rand(7), _rand(1)]],
                np.where, [_rand(6, dtype="bool"), _rand(6), _rand(7)],
                r"where.*dimension -1 of x is 6, but dimension -1 of y is 7")
    if name == "stack":
        x, y = v("x", shape=(Any(), 3)), v("y", shape=(Any(), 3))
        return (relay.Function([x, y], relay.stack([x, y], 1)),
                [[_rand(4, 3), _rand(4, 3)], [_rand(1, 3), _rand(1, 3)]],
                lambda a, b: np.stack([a, b], 1), [_rand(4, 3), _rand(2, 3)],
                r"stack.*dimension 0 of field 1 is 2, but dimension 0 of field 0 is 4")
    if name == "dense":
        d, w = v("d", shape=(2, Any())), v("w", shape=(5, Any()))
        return (relay.Function([d, w], relay.nn.dense(d, w)),
                [[_rand(2, 7), _rand(5, 7)], [_rand(2, 1), _rand(5, 1)]],
                lambda a, b: a @ b.T, [_rand(2, 3), _rand(5, 4)],
                r"dense.*dimension -1 of the data is 3, but dimension 1 of the weight is 4")
    if name == "matmul":
        a, b = v("a", shape=(2, Any())), v("b", shape=(Any(), 5))
        return (relay.Function([a, b], relay.nn.matmul(a, b)),
                [[_rand(2, 7), _rand(7, 5)]], lambda x, y: x @ y, [_rand(2, 3), _rand(4, 5)],
                r"matmul.*dimension -1 of tensor_a is 3, but dimension 0 of tensor_b is 4")
    if name == "batch_matmul":
        x, y = v("x", shape=(Any(), 2, Any())), v("y", shape=(Any(), 5, Any()))
        return (relay.Function([x, y], relay.nn.batch_matmul(x, y)),
                [[_rand(3, 2, 7), _rand(3, 5, 7)], [_rand(1, 2, 4), _rand(3, 5, 4)]],
                lambda a, b: a @ b.transpose(0, 2, 1), [_rand(3, 2, 7), _rand(3, 5, 6)],
                r"batch_matmul.*dimension 2 of x is 7, but dimension 2 of y is 6")
    if name == "layer_norm":
        d, g, b = v("d", shape=(2, Any())), v("g", shape=(Any(),)), v("b", shape=(Any(),))
        return (relay.Function([d, g, b], relay.nn.layer_norm(d, g, b)),
                [[_rand(2, 11), _rand(11), _rand(11)]], _ln, [_rand(2, 11), _rand(11), _rand(3)],
                r"layer_norm.*dimension 0 of beta is 3, but dimension -1 of the data is 11")
    raise KeyError(name)


CASES = ["concatenate", "add", "add_static", "where", "stack", "dense", "matmul", "batch_matmul",
         "layer_norm"]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name", CASES)
def test_run_time_sizes_checked(name, executor):
    func, goods, ref, bad, pattern = _case(name)
    for args in goods:
        np.testing.assert_allclose(_run(executor, func, args), ref(*args), rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception, match=pattern) as info:
        _run(executor, func, bad)
    assert isinstance(info.value, (ValueError, RuntimeError)), info.value


def test_relations_record_the_equalities():
    x, y = relay.var("x", shape=(Any(), Any())), relay.var("y", shape=(1, Any()))
    call = infer_type(relay.concatenate([x, y], 0))
    (eq,) = size_checks_of(call)
    assert "dimension 1 of field 1" in str(eq) and not eq.bcast
    # provably equal sizes need no check
    n = Any()
    a, b = relay.var("a", shape=(n, 3)), relay.var("b", shape=(n, 3))
    assert size_checks_of(infer_type(relay.concatenate([a, b], 0))) == ()
    assert size_checks_of(infer_type(a + b)) == ()


def test_compiled_kernels_run_without_numpy_fallback():
    """Every call above runs as a compiled kernel on the VM (no per-call numpy fallback)."""
    for name in CASES:
        func = _case(name)[0]
        exe = relay.vm.compile(tvm.IRModule.from_expr(func), target="llvm")
        assert [k.name for k in exe.kernels if k.symbol is None] == [], (name, exe.stats)


def test_graph_json_carries_the_checks_and_static_graphs_none():
    import json

    func = _case("concatenate")[0]
    lib = relay.build(tvm.IRModule.from_expr(func), "llvm")
    nodes = json.loads(lib.get_graph_json())["nodes"]
    rows = [r for n in nodes for r in n.get("attrs", {}).get("size_checks", [])]
    assert len(rows) == 1 and rows[0][0] == "concatenate"
    x, y = relay.var("x", shape=(4, 3)), relay.var("y", shape=(1, 3))
    lib = relay.build(relay.Function([x, y], relay.concatenate([x, y], 0)), "llvm")
    assert "size_checks" not in lib.get_graph_json()


def test_mismatch_then_good_run_still_correct():
    """A refused run leaves the executor usable: the next consistent run is right."""
    func, goods, ref, bad, pattern = _case("concatenate")
    lib = relay.build(tvm.IRModule.from_expr(func), "llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for args in (bad, goods[0]):
        m.set_input("x", args[0])
        m.set_input("y", args[1])
        if args is bad:
            with pytest.raises(ValueError, match=pattern):
                m.run()
        else:
            m.run()
            np.testing.assert_allclose(m.get_output(0).numpy(), ref(*args))


def test_data_dependent_size_in_relay_build_names_node_and_dimension():
    from tvmpy.relay.backend.graph_codegen import GraphCodegenError

    x, s = relay.var("x", shape=(6,)), relay.var("s", shape=(2,), dtype="int64")
    func = relay.Function([x, s], relay.exp(relay.op.dyn.reshape(x, s)))
    with pytest.raises(GraphCodegenError, match=r"node \d+ \(fused_dyn_reshape\) output 0 has "
                                                 r"shape .*dimension\(s\) \[0, 1\].*relay\.vm"):
        relay.build(tvm.IRModule.from_expr(func), "llvm")


@pytest.mark.parametrize("target", ["cuda", "opencl"])
def test_symbolic_shapes_build_for_a_gpu_target(target):
    """relay.build of a graph with a run-time dimension for a GPU target (it was refused
    before): the kernel keeps the symbolic extent; on opencl (PoCL) the graph executor runs it
    at two sizes (device storage per input shape) and checks the static dimension."""
    x = relay.var("x", shape=(3, Any()))
    func = relay.Function([x], relay.exp(x))
    lib = relay.build(tvm.IRModule.from_expr(func), target)
    if target != "opencl":
        assert "__global__" in lib.get_lib().imported_modules[0].get_source()
        return
    g = graph_executor.GraphModule(lib["default"](tvm.opencl(0)))
    for n in (5, 2):
        a = _rand(3, n)
        g.set_input("x", a)
        g.run()
        np.testing.assert_allclose(g.get_output(0).numpy(), np.exp(a), rtol=1e-6)
    with pytest.raises(ValueError, match="dimension 0 must be 3"):
        g.set_input("x", _rand(4, 2))


def test_checks_of_a_call_typed_elsewhere_come_from_its_relation():
    """A call whose type a pass copied (no relation run on it) still has its checks."""
    from tvmpy.relay import size_checks

    x, y = relay.var("x", shape=(Any(), Any())), relay.var("y", shape=(1, Any()))
    call = infer_type(relay.concatenate([x, y], 0))
    size_checks._BY_CALL.pop(id(call))
    (eq,) = size_checks_of(call)
    assert eq.lhs_what == "dimension 1 of field 1" and eq.rhs_what == "dimension 1 of field 0"


@pytest.mark.parametrize("executor", EXECUTORS)
def test_three_fields_each_checked_against_field_0(executor):
    x, y, z = (relay.var(n, shape=(Any(), Any())) for n in "xyz")
    func = relay.Function([x, y, z], relay.concatenate([x, y, z], 0))
    a, b = _rand(2, 3), _rand(1, 3)
    np.testing.assert_allclose(_run(executor, func, [a, b, a]), np.concatenate([a, b, a]))
    with pytest.raises(ValueError, match="dimension 1 of field 2 is 4, but dimension 1 of field 0 "
                                         "is 3"):
        _run(executor, func, [a, b, _rand(2, 4)])
