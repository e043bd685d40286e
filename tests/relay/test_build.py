"""relay.build: small graphs built at opt_level 0 and 3, run through the graph executor and
compared with the relay interpreter (numpy) on random data; deduplication of identical fused
groups; the graph JSON (contract C3); errors on bad input."""

import json

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.backend.te_compiler import TECompiler, lower_primitive
from tvmpy.relay.build_module import RelayBuildError, lower_module, optimize

rng = np.random.default_rng(7)


def _rand(shape, dtype="float32"):
    if dtype.startswith("int"):
        return rng.integers(-5, 6, size=shape).astype(dtype)
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


def _module(out):
    return tvm.IRModule.from_expr(relay.Function(free_vars(out), out))


def _inputs(mod, skip=()):
    return {p.name_hint: _rand(tuple(int(d) for d in p.type_annotation.shape),
                               p.type_annotation.dtype)
            for p in mod["main"].params if p.name_hint not in skip}


def _reference(mod, values):
    args = [values[p.name_hint] for p in mod["main"].params]
    with np.errstate(all="ignore"):
        out = relay.create_executor("debug", mod).evaluate()(*args)
    return [np.asarray(o) for o in out] if isinstance(out, (list, tuple)) else [np.asarray(out)]


def _run(lib, inputs):
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(**inputs)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def check_build(out, opt_level, params_names=(), rtol=1e-5, atol=1e-5, target="llvm"):
    """Build ``out`` (an expression over free vars) at ``opt_level`` binding the inputs named
    in ``params_names`` as params; run it and compare with the interpreter."""
    mod = _module(out)
    values = _inputs(mod)
    params = {k: values[k] for k in params_names}
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, target=target, params=params)
    got = _run(lib, {k: v for k, v in values.items() if k not in params})
    want = _reference(mod, values)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return lib


def _conv_bias_relu(x, cin, cout, name):
    w = relay.var(f"{name}_w", shape=(cout, cin, 3, 3))
    b = relay.var(f"{name}_b", shape=(cout,))
    return relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, padding=(1, 1)), b))


OPT_LEVELS = [0, 3]


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_conv_bias_relu(opt):
    x = relay.var("x", shape=(1, 3, 7, 5))
    check_build(_conv_bias_relu(x, 3, 5, "c1"), opt, params_names=("c1_w", "c1_b"), rtol=1e-4)


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_dense_bias(opt):
    x = relay.var("x", shape=(3, 11))
    w = relay.var("w", shape=(7, 11))
    b = relay.var("b", shape=(7,))
    check_build(relay.nn.bias_add(relay.nn.dense(x, w), b), opt, params_names=("w",), rtol=1e-4)


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_softmax(opt):
    x = relay.var("x", shape=(2, 13))
    check_build(relay.nn.softmax(x * relay.const(2.0)), opt)


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_concat_split(opt):
    a = relay.var("a", shape=(1, 2, 3))
    b = relay.var("b", shape=(1, 5, 3))
    c = relay.concatenate([relay.exp(a), b], axis=1)
    parts = relay.split(c, indices_or_sections=(3,), axis=1)
    out = relay.Tuple([parts[0] + relay.const(1.0), relay.nn.relu(parts[1])])
    check_build(out, opt)


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_residual_and_batch_norm(opt):
    x = relay.var("x", shape=(1, 4, 5, 3))
    y = _conv_bias_relu(x, 4, 4, "r1")
    gamma, beta = relay.var("g", shape=(4,)), relay.var("be", shape=(4,))
    mean, var = relay.var("m", shape=(4,)), relay.var("v", shape=(4,))
    bn = relay.nn.batch_norm(y, gamma, beta, mean, var)[0]
    out = relay.nn.relu(bn + x)
    mod = _module(out)
    values = _inputs(mod)
    values["v"] = np.abs(values["v"]) + 0.5
    params = {k: values[k] for k in ("g", "be", "m", "v", "r1_w")}
    with tvm.transform.PassContext(opt_level=opt):
        lib = relay.build(mod, params=params)
    got = _run(lib, {k: v for k, v in values.items() if k not in params})
    np.testing.assert_allclose(got[0], _reference(mod, values)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_multiple_outputs_and_shared_input(opt):
    x = relay.var("x", shape=(2, 1, 3))
    y = relay.var("y", shape=(2, 5, 3))
    s = x + y
    out = relay.Tuple([relay.sum(s, axis=1), relay.sigmoid(s), relay.transpose(y, (2, 0, 1))])
    check_build(out, opt)


@pytest.mark.parametrize("opt", [0, 2])
def test_int_ops_and_reduce(opt):
    x = relay.var("x", shape=(3, 4), dtype="int32")
    out = relay.max(relay.abs(x) * relay.const(3, "int32"), axis=0)
    check_build(out, opt)


def test_heads_that_are_inputs_or_constants():
    x = relay.var("x", shape=(2, 3))
    c = relay.const(_rand((4,)))
    out = relay.Tuple([relay.exp(x), x, c])
    mod = _module(out)
    lib = relay.build(mod)
    xv = _rand((2, 3))
    got = _run(lib, {"x": xv})
    np.testing.assert_allclose(got[0], np.exp(xv), rtol=1e-6)
    np.testing.assert_array_equal(got[1], xv)
    np.testing.assert_array_equal(got[2], c.data.numpy())


def test_params_become_p_nodes():
    x = relay.var("x", shape=(1, 3, 6, 6))
    mod = _module(_conv_bias_relu(x, 3, 2, "k"))
    values = _inputs(mod)
    with tvm.transform.PassContext(opt_level=0):
        lib = relay.build(mod, params={"k_w": values["k_w"]})
    graph = json.loads(lib.get_graph_json())
    null_names = [n["name"] for n in graph["nodes"] if n["op"] == "null"]
    assert null_names[:2] == ["x", "k_b"]  # main's remaining parameters, in order
    assert [n for n in null_names if n.startswith("p")] == ["p0"]
    params = lib.get_params()
    assert set(params) == {"p0"}
    p0 = params["p0"]
    np.testing.assert_array_equal(p0.numpy() if hasattr(p0, "numpy") else p0, values["k_w"])


def test_graph_json_well_formed():
    x = relay.var("x", shape=(1, 3, 5, 5))
    y = _conv_bias_relu(x, 3, 4, "a")
    parts = relay.split(y, indices_or_sections=2, axis=1)
    out = relay.Tuple([parts[1], relay.nn.max_pool2d(parts[0], pool_size=(2, 2))])
    mod = _module(out)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, params={"a_w": _rand((4, 3, 3, 3))})
    g = json.loads(lib.get_graph_json())
    nodes, rp = g["nodes"], g["node_row_ptr"]
    assert len(rp) == len(nodes) + 1 and rp[0] == 0
    n_entries = rp[-1]
    for key, kind in (("dltype", "list_str"), ("shape", "list_shape"),
                      ("storage_id", "list_int")):
        assert g["attrs"][key][0] == kind and len(g["attrs"][key][1]) == n_entries
    assert g["arg_nodes"] == [i for i, n in enumerate(nodes) if n["op"] == "null"]
    lib_mod = lib.get_lib()
    for nid, n in enumerate(nodes):
        assert rp[nid + 1] - rp[nid] == (1 if n["op"] == "null"
                                         else int(n["attrs"]["num_outputs"]))
        for e in n["inputs"]:
            assert e[0] < nid and e[1] < rp[e[0] + 1] - rp[e[0]] and e[2] == 0
        if n["op"] == "tvm_op":
            assert int(n["attrs"]["num_inputs"]) == len(n["inputs"])
            if n["attrs"]["func_name"] == "__nop":  # a reshape: its output aliases its input
                src = n["inputs"][0]
                sid = g["attrs"]["storage_id"][1]
                assert sid[rp[src[0]] + src[1]] == sid[rp[nid]]
            else:
                assert n["attrs"]["func_name"] in lib_mod
    assert len(g["heads"]) == 2
    shapes = g["attrs"]["shape"][1]
    assert [shapes[rp[h[0]] + h[1]] for h in g["heads"]] == [[1, 2, 5, 5], [1, 2, 4, 4]]


def test_identical_groups_are_lowered_once():
    x = relay.var("x", shape=(1, 4, 6, 6))
    y = x
    for i in range(3):  # three structurally identical conv+bias+relu blocks
        y = _conv_bias_relu(y, 4, 4, f"b{i}")
    mod = _module(y)
    values = _inputs(mod)
    params = {k: v for k, v in values.items() if k != "x"}
    with tvm.transform.PassContext(opt_level=2):
        fused = optimize(mod, params)
        res = lower_module(fused, "llvm")
    g = json.loads(res.graph_json)
    ops = [n["attrs"]["func_name"] for n in g["nodes"] if n["op"] == "tvm_op"]
    assert len(ops) >= 3 and len(set(ops)) == len(res.funcs)
    assert len(set(ops)) < len(ops)  # the repeated blocks share their symbols
    assert sorted(lf.name for lf in res.funcs) == sorted(set(ops))
    got = _run_result(res, {"x": values["x"]})
    np.testing.assert_allclose(got[0], _reference(mod, values)[0], rtol=1e-4, atol=1e-5)


def _run_result(res, inputs):
    from tvmpy.relay.backend.executor_factory import GraphExecutorFactoryModule

    return _run(GraphExecutorFactoryModule(res.graph_json, res.lib, res.params), inputs)


def test_progress_reports_every_stage():
    x = relay.var("x", shape=(2, 3))
    out = relay.nn.relu(relay.exp(x) + relay.const(1.0))
    seen = []
    with tvm.transform.PassContext(opt_level=0):
        relay.build(_module(out), progress=lambda s, d, t: seen.append((s, d, t)))
    stages = [s for s, _, _ in seen]
    assert stages[0] == "optimize" and stages[-1] == "codegen"
    assert {"optimize", "lower", "tir", "codegen"} <= set(stages)
    for stage in ("optimize", "lower", "tir", "codegen"):
        last = [(d, t) for s, d, t in seen if s == stage][-1]
        assert last[0] == last[1] >= 1


def test_lower_primitive_signature():
    """C2: parameters are the flattened inputs in params order, then the outputs."""
    a = relay.var("p0", relay.TupleType([relay.TensorType((2, 3)), relay.TensorType((2, 5))]))
    b = relay.var("p1", shape=(2, 8))
    body = relay.concatenate(relay.Tuple([relay.TupleGetItem(a, 0), relay.TupleGetItem(a, 1)]),
                             axis=1) + b
    func = relay.Function([a, b], body, attrs={"Primitive": 1})
    func = relay.transform.infer_type(func)
    pf = lower_primitive(func, "llvm", "fused_concat_add")
    assert len(pf.params) == 4
    shapes = [tuple(int(d) for d in pf.buffer_map[p].shape) for p in pf.params]
    assert shapes == [(2, 3), (2, 5), (2, 8), (2, 8)]
    f = tvm.build(pf, target="llvm")
    av, bv, cv = _rand((2, 3)), _rand((2, 5)), _rand((2, 8))
    out = tvm.nd.array(np.zeros((2, 8), "float32"))
    f(av, bv, cv, out)
    np.testing.assert_allclose(out.numpy(), np.concatenate([av, bv], axis=1) + cv, rtol=1e-6)


def test_te_compiler_cache_by_structure():
    def prim():
        p = relay.var("p0", shape=(3, 4))
        return relay.transform.infer_type(
            relay.Function([p], relay.nn.relu(p) * relay.const(2.0), attrs={"Primitive": 1}))

    comp = TECompiler("llvm")
    f1, f2 = comp.lower(prim()), comp.lower(prim())
    assert f1 is f2 and len(comp.funcs) == 1 and f1.uses == 2
    p = relay.var("p0", shape=(3, 5))
    other = relay.transform.infer_type(
        relay.Function([p], relay.nn.relu(p) * relay.const(2.0), attrs={"Primitive": 1}))
    f3 = comp.lower(other)
    assert f3 is not f1 and f3.name != f1.name and len(comp.funcs) == 2


def test_te_compiler_hashes_a_function_object_once(monkeypatch):
    # relay.build looks each call's function up when lowering and again in the graph codegen:
    # the same object is found by identity, not hashed and compared again
    from tvmpy.relay.backend import te_compiler

    calls = []
    real = te_compiler.structural_hash
    monkeypatch.setattr(te_compiler, "structural_hash", lambda f: calls.append(f) or real(f))
    p = relay.var("p0", shape=(3, 5))
    func = relay.transform.infer_type(
        relay.Function([p], relay.nn.relu(p), attrs={"Primitive": 1}))
    comp = TECompiler("llvm")
    first = comp.lower(func, False)
    assert comp.lookup(func) is first and comp.lower(func, False) is first
    assert len([f for f in calls if f is func]) <= 2  # the first lookup and the insertion
    q = relay.var("p0", shape=(3, 5))
    twin = relay.transform.infer_type(
        relay.Function([q], relay.nn.relu(q), attrs={"Primitive": 1}))
    assert comp.lookup(twin) is first and first.uses == 2  # equal structure: shared


# ---- bad input ------------------------------------------------------------------------------
def test_unknown_param_name():
    x = relay.var("x", shape=(2, 3))
    w = relay.var("w", shape=(2, 3))
    with pytest.raises(RelayBuildError, match=r"\['wrong'\].*\['x', 'w'\]"):
        relay.build(_module(x + w), params={"wrong": np.ones((2, 3), "float32")})


def test_param_of_wrong_shape():
    x = relay.var("x", shape=(2, 3))
    w = relay.var("w", shape=(2, 3))
    with pytest.raises(ValueError, match="w"):
        relay.build(_module(x + w), params={"w": np.ones((3, 2), "float32")})


def test_not_a_module():
    with pytest.raises(TypeError, match="IRModule"):
        relay.build("not a module")
    x = relay.var("x", shape=(2,))
    with pytest.raises(TypeError, match="target"):
        relay.build(_module(relay.exp(x)), target=3)
    with pytest.raises(RelayBuildError, match="interp"):
        relay.build(_module(relay.exp(x)), target="interp")


def test_c_target():
    x = relay.var("x", shape=(1, 3, 5, 5))
    check_build(_conv_bias_relu(x, 3, 2, "ct"), 3, params_names=("ct_w",), rtol=1e-4,
                target="c")


def test_function_accepted_as_module():
    x = relay.var("x", shape=(5,))
    lib = relay.build(relay.Function([x], relay.exp(x)))
    xv = _rand((5,))
    np.testing.assert_allclose(_run(lib, {"x": xv})[0], np.exp(xv), rtol=1e-6)


def test_if_and_closures_refused_let_inlined():
    x = relay.var("x", shape=(2,))
    c = relay.var("c", shape=(), dtype="bool")
    f_if = relay.Function([c, x], relay.If(c, relay.exp(x), x) * relay.const(2.0))
    with pytest.raises(RelayBuildError, match="If"):
        relay.build(f_if)
    y = relay.var("y", shape=(2,))
    inner = relay.Function([y], relay.exp(y))
    with pytest.raises(RelayBuildError, match="local function"):
        relay.build(relay.Function([x], relay.Call(inner, [x])))
    v = relay.var("v", shape=(2,))
    f_let = relay.Function([x], relay.Let(v, relay.exp(x), v + v))
    xv = _rand((2,))
    for opt in OPT_LEVELS:
        with tvm.transform.PassContext(opt_level=opt):
            lib = relay.build(f_let)
        np.testing.assert_allclose(_run(lib, {"x": xv})[0], 2 * np.exp(xv), rtol=1e-6)


def test_unsupported_operator_refused_before_compiling():
    from tvmpy.relay.op.registry import _REGISTRY, OpPattern, register_op

    name = "test.build_no_compute"
    op = register_op(name, lambda types, attrs: types[0], OpPattern.ELEMWISE, 1)
    try:
        x = relay.var("x", shape=(2, 3))
        y = relay.Call(op, [relay.exp(x)])
        z = relay.Call(op, [y])
        with pytest.raises(RelayBuildError, match=r"test\.build_no_compute \(x2\)"):
            relay.build(_module(z))
    finally:
        _REGISTRY.pop(name, None)


def test_symbolic_shape_builds_once_for_every_size():
    """A symbolic dimension (a tir var, as relay.Any) builds one library for every size
    (tests/relay/test_dynamic_shapes.py has the rest)."""
    from tvmpy import tir
    from tvmpy.contrib import graph_executor

    n = tir.Var("n", "int32")
    x = relay.var("x", shape=(n, 3))
    m = graph_executor.GraphModule(relay.build(_module(relay.exp(x)))["default"](tvm.cpu(0)))
    for b in (1, 4):
        v = np.random.default_rng(b).standard_normal((b, 3)).astype("float32")
        m.set_input("x", v)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), np.exp(v), rtol=1e-6)


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_outputs_that_need_no_kernel(opt):
    """A main whose outputs are inputs or constants only (or fold to constants at opt >= 2)
    still builds: the outputs are copied out by one kernel."""
    x = relay.var("x", shape=(2, 3))
    c = _rand((4,))
    body = relay.Tuple([x, relay.const(c), relay.zeros((3,), "float32") + relay.const(1.0)])
    with tvm.transform.PassContext(opt_level=opt):
        lib = relay.build(relay.Function([x], body))
    xv = _rand((2, 3))
    got = _run(lib, {"x": xv})
    np.testing.assert_array_equal(got[0], xv)
    np.testing.assert_array_equal(got[1], c)
    np.testing.assert_array_equal(got[2], np.ones(3, "float32"))


def _register_test_op(name, pattern, **attrs):
    from tvmpy.relay.op.registry import register_op, register_op_attr

    op = register_op(name, lambda types, a: types[0], pattern, 1)
    for key, value in attrs.items():
        register_op_attr(name, key, value)
    return op


def test_operator_with_only_a_compute_gets_the_injective_schedule():
    from tvmpy.relay.op.registry import _REGISTRY, OpPattern

    name = "test.build_compute_only"
    op = _register_test_op(name, OpPattern.ELEMWISE, FTVMCompute=lambda attrs, ins, t: [
        te_compute_double(ins[0])])
    try:
        x = relay.var("x", shape=(3, 7))
        mod = _module(relay.Call(op, [relay.exp(x)]))
        lib = relay.build(mod)
        xv = _rand((3, 7))
        np.testing.assert_allclose(_run(lib, {"x": xv})[0], 2 * np.exp(xv), rtol=1e-6)
    finally:
        _REGISTRY.pop(name, None)


def te_compute_double(t):
    from tvmpy import te

    return te.compute(t.shape, lambda *i: t(*i) * 2.0, name="double", tag="elemwise")


def _bad_schedule_op(name):
    from tvmpy.relay.op.registry import OpPattern
    from tvmpy.relay.op.strategy import OpStrategy

    def bad_schedule(attrs, outs, target):
        raise ValueError("this schedule cannot handle the group")

    def fstrategy(attrs, inputs, out_type, target):
        s = OpStrategy()
        s.add_implementation(lambda a, ins, t: [te_compute_double(ins[0])], bad_schedule,
                             "test.bad", 10)
        return s

    return _register_test_op(name, OpPattern.OUT_ELEMWISE_FUSABLE, FTVMStrategy=fstrategy)


def test_failing_anchor_schedule_falls_back_with_a_warning():
    """Outside strict mode (opted out here: the suite runs strict) the warning names the
    fused function, the operator, the implementation, the schedule and the error."""
    from tvmpy.relay.op.registry import _REGISTRY

    name = "test.build_bad_schedule"
    op = _bad_schedule_op(name)
    try:
        x = relay.var("x", shape=(5, 3))
        mod = _module(relay.nn.relu(relay.Call(op, [x])))
        with pytest.warns(RuntimeWarning) as rec:
            with tvm.transform.PassContext(
                    opt_level=2, config={"relay.backend.strict_schedules": False}):
                lib = relay.build(mod)
        msg = str(rec[0].message)
        for part in ("fused_test_build_bad_schedule", f"operator {name}", "implementation test.bad",
                     "bad_schedule", "ValueError: this schedule cannot handle the group",
                     "default schedule"):
            assert part in msg, (part, msg)
        xv = _rand((5, 3))
        np.testing.assert_allclose(_run(lib, {"x": xv})[0], np.maximum(2 * xv, 0), rtol=1e-6)
    finally:
        _REGISTRY.pop(name, None)


@pytest.mark.parametrize("how", ["config", "environment"])
def test_failing_anchor_schedule_is_an_error_in_strict_mode(how, monkeypatch):
    from tvmpy.relay.backend.te_compiler import ScheduleError
    from tvmpy.relay.op.registry import _REGISTRY

    name = "test.build_bad_schedule_strict"
    op = _bad_schedule_op(name)
    config = {"relay.backend.strict_schedules": True}
    if how == "environment":
        monkeypatch.setenv("TVMPY_STRICT_SCHEDULES", "1")
        config = {}
    else:
        monkeypatch.setenv("TVMPY_STRICT_SCHEDULES", "0")  # the config wins either way
    try:
        x = relay.var("x", shape=(5, 3))
        mod = _module(relay.nn.relu(relay.Call(op, [x])))
        with pytest.raises(ScheduleError) as info:
            with tvm.transform.PassContext(opt_level=2, config=config):
                relay.build(mod)
        msg = str(info.value)
        for part in ("fused_test_build_bad_schedule_strict", f"operator {name}",
                     "implementation test.bad", "bad_schedule", "this schedule cannot handle"):
            assert part in msg, (part, msg)
        assert isinstance(info.value.__cause__, ValueError)
    finally:
        _REGISTRY.pop(name, None)


def test_strict_schedules_config_is_validated_and_listed():
    assert "relay.backend.strict_schedules" in tvm.transform.PassContext.list_configs()
    with pytest.raises(ValueError, match="unsupported config"):
        tvm.transform.PassContext(config={"relay.backend.strict_schedule": True})


@pytest.mark.parametrize("opt", OPT_LEVELS)
def test_small_resnet_matches_interpreter(opt):
    """relay.testing's ResNet-18 on a 32x32 image (every block kind, batch norm folded at
    opt 3, NCHWc layouts) against the numpy interpreter."""
    from tvmpy.relay.testing import resnet

    mod, params = resnet.get_workload(18, image_shape=(3, 32, 32), num_classes=10)
    x = _rand((1, 3, 32, 32))
    with tvm.transform.PassContext(opt_level=opt):
        lib = relay.build(mod, params=params)
    got = _run(lib, {"data": x})[0]
    want = np.asarray(relay.create_executor("debug", mod).evaluate()(x, **params))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    g = json.loads(lib.get_graph_json())
    ops = [n["attrs"]["func_name"] for n in g["nodes"] if n["op"] == "tvm_op"]
    assert len(set(ops)) < len(ops)  # repeated blocks share kernels


def test_small_bert_matches_interpreter():
    from tvmpy.relay.testing import bert

    mod, params = bert.get_workload(num_layers=2, hidden=32, heads=2, seq_len=11, vocab_size=50)
    ids = rng.integers(0, 50, size=(1, 11)).astype("int64")
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, params=params)
    got = _run(lib, {"input_ids": ids})[0]
    want = np.asarray(relay.create_executor("debug", mod).evaluate()(ids, **params))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_small_mobilenet_v2_matches_interpreter():
    from tvmpy.relay.testing import mobilenet_v2

    mod, params = mobilenet_v2.get_workload(image_shape=(3, 32, 32), num_classes=10,
                                            width_mult=0.5)
    x = _rand((1, 3, 32, 32))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, params=params)
    got = _run(lib, {"data": x})[0]
    want = np.asarray(relay.create_executor("debug", mod).evaluate()(x, **params))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_compute_that_disagrees_with_type_inference_is_refused():
    from tvmpy.relay.backend.te_compiler import LoweringError
    from tvmpy.relay.op.registry import _REGISTRY, OpPattern

    name = "test.build_wrong_shape"
    op = _register_test_op(name, OpPattern.ELEMWISE, FTVMCompute=lambda attrs, ins, t: [
        te_compute_double(ins[0])])
    # the type relation claims a transposed shape; the compute keeps the input's
    _REGISTRY[name].type_rel = lambda types, a: relay.TensorType(
        tuple(reversed(types[0].shape)), types[0].dtype)
    try:
        x = relay.var("x", shape=(2, 3))
        with pytest.raises(LoweringError, match=r"computes output 0 as \(2, 3\).*\(3, 2\)"):
            relay.build(_module(relay.Call(op, [x])))
    finally:
        _REGISTRY.pop(name, None)


@pytest.mark.parametrize("disabled", [(), ("AlterOpLayout",), ("FoldConstant", "FoldScaleAxis")])
def test_opt3_pipeline_and_disabled_passes(disabled):
    """opt_level 3 runs AlterOpLayout (NCHWc conv between layout transforms) unless disabled;
    every variant computes the same result."""
    x = relay.var("x", shape=(1, 16, 7, 7))
    y = relay.nn.relu(relay.nn.conv2d(x, relay.var("w", shape=(16, 16, 3, 3)), padding=(1, 1)))
    mod = _module(y * relay.const(0.5))
    values = _inputs(mod)
    with tvm.transform.PassContext(opt_level=3, disabled_pass=list(disabled)):
        lib = relay.build(mod, params={"w": values["w"]})
    names = [n["name"] for n in json.loads(lib.get_graph_json())["nodes"]]
    # (a 7x7 3x3-stride-1 conv becomes the Winograd NCHWc conv by default)
    nchwc = any("conv2d_NCHWc" in n or "winograd_nchwc" in n for n in names)
    assert nchwc == ("AlterOpLayout" not in disabled), names
    got = _run(lib, {"x": values["x"]})[0]
    np.testing.assert_allclose(got, _reference(mod, values)[0], rtol=1e-4, atol=1e-5)


def test_mod_name():
    from tvmpy.contrib import graph_executor

    x = relay.var("x", shape=(3,))
    lib = relay.build(relay.Function([x], relay.exp(x)), mod_name="net")
    m = graph_executor.GraphModule(lib["net"](tvm.cpu(0)))
    xv = _rand((3,))
    m.set_input("x", xv)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.exp(xv), rtol=1e-6)
    with pytest.raises(ValueError, match="mod_name"):
        relay.build(relay.Function([x], relay.exp(x)), mod_name="not an identifier")


@pytest.mark.parametrize("shape", [(2, 5, 7), (17, 3, 7), (3, 2, 1, 7)])
def test_dense_with_nd_data(shape):
    """relay's nn.dense takes [..., K] data (the kernels are 2-D: reshapes around them)."""
    x = relay.var("x", shape=shape)
    w = relay.var("w", shape=(3, 7))
    b = relay.var("b", shape=(3,))
    check_build(relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b, axis=-1)), 3,
                rtol=1e-5)


def test_constant_names_never_shadow_inputs():
    """Bound constants are named p<k>, skipping names that main's inputs already use."""
    p0 = relay.var("p0", shape=(2, 3))
    p2 = relay.var("p2", shape=(2, 3))
    w = relay.var("w", shape=(2, 3))
    mod = _module(relay.exp(p0) + w * p2)
    values = _inputs(mod)
    with tvm.transform.PassContext(opt_level=0):
        lib = relay.build(mod, params={"w": values["w"]})
    g = json.loads(lib.get_graph_json())
    names = [n["name"] for n in g["nodes"] if n["op"] == "null"]
    assert len(names) == len(set(names)) and "p1" in names and set(lib.get_params()) == {"p1"}
    got = _run(lib, {"p0": values["p0"], "p2": values["p2"]})[0]
    np.testing.assert_allclose(got, _reference(mod, values)[0], rtol=1e-6)


def test_duplicate_input_names_refused():
    a, b = relay.var("x", shape=(2,)), relay.var("x", shape=(2,))
    with pytest.raises(ValueError, match="several inputs named"):
        relay.build(relay.Function([a, b], a + b))


def test_dump_ir_writes_every_stage(tmp_path):
    from tvmpy.config import config

    x = relay.var("x", shape=(2, 3))
    out = relay.nn.relu(relay.exp(x) * relay.const(2.0))
    with config(DUMP_IR=str(tmp_path)), tvm.transform.PassContext(opt_level=3):
        lib = relay.build(_module(out))
    relay_files = sorted(p.name for p in (tmp_path / "relay").iterdir())
    assert relay_files[0] == "00_input.txt" and relay_files[-1].endswith("InferType.txt")
    assert any("FuseOps" in f for f in relay_files)
    fused = (tmp_path / "relay" / next(f for f in relay_files if "FuseOps" in f)).read_text()
    assert "Primitive=1" in fused
    graph = json.loads((tmp_path / "graph" / "00_graph.json").read_text())
    assert graph == json.loads(lib.get_graph_json())
    (func,) = [n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
    assert (tmp_path / "tir" / func / "00_input.txt").exists()
