"""The Relay VM (relay.vm.compile + runtime.vm.VirtualMachine): static models equal the graph
executor, dynamic batch, If on run-time conditions, loops as recursive functions whose carried
values change shape, tuples, lets and local functions, data-dependent operators (test-only ops
registered here), and inputs checked before any kernel runs. References: the interpreter
(create_executor("debug")) and numpy, on random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te, topi
from tvmpy.contrib import graph_executor
from tvmpy.relay.op.registry import OpPattern, make_call, register_op, register_strategy
from tvmpy.relay.op.shape_func import register_shape_func
from tvmpy.relay.op.strategy import OpStrategy
from tvmpy.relay.op.strategy.generic import schedule_injective
from tvmpy.relay.type_infer import infer_type
from tvmpy.runtime.vm import VirtualMachine, VMError

rng = np.random.default_rng(11)


def _rand(*shape, dtype="float32"):
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def _vm(mod, params=None, opt_level=3):
    with tvm.transform.PassContext(opt_level=opt_level):
        exe = relay.vm.compile(mod, "llvm", params=params)
    return exe, VirtualMachine(exe, tvm.cpu(0))


def _ref(mod, *args, **kwargs):
    return relay.create_executor("debug", mod).evaluate()(*args, **kwargs)


def _check(out, ref, rtol=1e-5, atol=1e-5):
    if isinstance(ref, (tuple, list)):
        assert isinstance(out, tuple) and len(out) == len(ref)
        for o, r in zip(out, ref):
            _check(o, r, rtol, atol)
        return
    assert out.shape == np.shape(ref), (out.shape, np.shape(ref))
    np.testing.assert_allclose(out.numpy(), ref, rtol=rtol, atol=atol)


# ---- static models ---------------------------------------------------------------------------
def _convnet(batch=1):
    x = relay.var("data", shape=(batch, 3, 13, 13))
    w = relay.var("w", shape=(8, 3, 3, 3))
    g, b = relay.var("g", shape=(8,)), relay.var("b", shape=(8,))
    m, v = relay.var("m", shape=(8,)), relay.var("v", shape=(8,))
    d = relay.var("d", shape=(5, 8))
    y = relay.nn.conv2d(x, w, padding=(1, 1), channels=8, kernel_size=(3, 3))
    y = relay.nn.batch_norm(y, g, b, m, v)[0]
    y = relay.nn.relu(y)
    y = relay.nn.global_avg_pool2d(y)
    y = relay.nn.dense(relay.nn.batch_flatten(y), d)
    f = relay.Function([x, w, g, b, m, v, d], relay.nn.softmax(y))
    params = {"w": _rand(8, 3, 3, 3), "g": _rand(8) + 2, "b": _rand(8), "m": _rand(8),
              "v": np.abs(_rand(8)) + 1, "d": _rand(5, 8)}
    return tvm.IRModule.from_expr(f), params


def test_static_model_equals_graph_executor():
    mod, params = _convnet()
    exe, vm = _vm(mod, params)
    assert len(exe.segments) == 1 and not exe.kernels  # a static model is one graph
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    xv = _rand(1, 3, 13, 13)
    gm.set_input("data", xv)
    gm.run()
    out = vm.invoke("main", xv)
    np.testing.assert_allclose(out.numpy(), gm.get_output(0).numpy(), rtol=1e-6, atol=1e-7)
    _check(out, _ref(mod, xv, **params), rtol=1e-4, atol=1e-5)
    # the stateful API and the executor front ends
    vm.set_input("main", data=xv)
    vm.run()
    np.testing.assert_array_equal(vm.get_outputs()[0].numpy(), out.numpy())
    f = relay.create_executor("vm", mod, tvm.cpu(0), "llvm", params=params).evaluate()
    np.testing.assert_allclose(f(xv).numpy(), out.numpy(), rtol=1e-6)
    assert vm.benchmark(tvm.cpu(0), xv, number=1, repeat=1).mean > 0
    assert vm.time_evaluator("invoke", tvm.cpu(0), number=1)("main", xv).mean > 0
    assert list(vm.profile(xv, number=1)) == ["segment 0 (@main:region0)"]
    vm.set_one_input("main", "data", 2 * xv)
    np.testing.assert_allclose(vm.run().numpy(), vm.invoke("main", 2 * xv).numpy())
    assert "segment 0" in exe.bytecode and "1 segments" in exe.stats


def test_dynamic_batch():
    n = relay.Any()
    x = relay.var("x", shape=(n, 6))
    w = relay.var("w", shape=(4, 6))
    y = relay.nn.relu(relay.nn.dense(x, w)) * relay.const(2.0)
    y = relay.sum(y, axis=1, keepdims=True) + relay.take(relay.reshape(x, (-1, 3, 2)), relay.const(0),
                                                       axis=2)
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    _, vm = _vm(mod)
    wv = _rand(4, 6)
    for b in (1, 7, 3, 7):
        xv = _rand(b, 6)
        ref = 2 * np.maximum(xv @ wv.T, 0).sum(1, keepdims=True) + xv.reshape(b, 3, 2)[:, :, 0]
        _check(vm.invoke("main", xv, wv), ref, rtol=1e-5)


# ---- control flow --------------------------------------------------------------------------------
def test_if_on_runtime_condition_with_branches_of_different_shapes():
    x = relay.var("x", shape=(3, 4))
    c = relay.var("c", shape=(), dtype="bool")
    shared = relay.nn.relu(x)  # used by both branches: computed once, before the If
    y = relay.If(c, shared * relay.const(2.0), relay.concatenate([shared, x], axis=0))
    body = relay.Tuple([relay.exp(y), x + relay.const(1.0)])
    mod = tvm.IRModule.from_expr(relay.Function([x, c], body))
    mod = relay.transform.InferType()(mod)
    assert str(mod["main"].body.checked_type.fields[0]).startswith("Tensor[(?, 4)")
    exe, vm = _vm(mod)
    xv = _rand(3, 4)
    for cv in (True, False):
        out = vm.invoke("main", xv, np.array(cv))
        ref = _ref(mod, xv, np.array(cv))
        assert out[0].shape == ((3, 4) if cv else (6, 4))
        _check(out, ref)
    np.testing.assert_allclose(out[0].numpy(), np.exp(np.concatenate([np.maximum(xv, 0), xv])),
                               rtol=1e-5)


def test_if_condition_computed_from_data():
    x = relay.var("x", shape=(5,))
    c = relay.greater(relay.sum(x), relay.const(0.0))
    y = relay.If(c, relay.nn.relu(x), relay.negative(x) * relay.const(3.0))
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    _, vm = _vm(mod)
    seen = set()
    for _ in range(6):
        xv = _rand(5)
        seen.add(bool(xv.sum() > 0))
        _check(vm.invoke("main", xv), _ref(mod, xv))
    xv = np.abs(_rand(5))
    _check(vm.invoke("main", xv), xv)
    _check(vm.invoke("main", -xv), 3 * xv)


def test_nested_ifs_share_values_across_scopes():
    x = relay.var("x", shape=(4,))
    a, b = relay.var("a", shape=(), dtype="bool"), relay.var("b", shape=(), dtype="bool")
    u = relay.exp(x)            # used in the inner then-branch and the outer else-branch
    v = relay.sigmoid(x)        # used by the inner If only
    inner = relay.If(b, u + v, relay.concatenate([v, x], axis=0))
    outer = relay.If(a, relay.nn.relu(inner), relay.tile(u, (3,)))
    mod = tvm.IRModule.from_expr(relay.Function([x, a, b], relay.Tuple([outer, u * x])))
    exe, vm = _vm(mod)
    xv = _rand(4)
    for av in (True, False):
        for bv in (True, False):
            out = vm.invoke("main", xv, np.array(av), np.array(bv))
            _check(out, _ref(mod, xv, np.array(av), np.array(bv)), rtol=1e-5)
    assert exe.bytecode.count("if $") == 2


def _growing_loop(steps_input=False):
    """@loop(i, acc): while i < n: acc = concat(acc, acc * 0.5 + i) (the shape doubles)."""
    loop = relay.GlobalVar("loop")
    i = relay.var("i", shape=(), dtype="int32")
    n = relay.var("n", shape=(), dtype="int32")
    acc = relay.var("acc", shape=(relay.Any(), 2))
    grown = relay.concatenate([acc, acc * relay.const(0.5) + relay.cast(i, "float32")], axis=0)
    body = relay.If(relay.less(i, n),
                    relay.Call(loop, [i + relay.const(1, "int32"), n, grown]), acc)
    mod = tvm.IRModule()
    mod[loop] = relay.Function([i, n, acc], body,
                               ret_type=relay.TensorType((relay.Any(), 2), "float32"))
    m = relay.var("m", shape=(3, 2))
    steps = relay.var("steps", shape=(), dtype="int32")
    mod["main"] = relay.Function([m, steps], relay.Call(loop, [relay.const(0, "int32"), steps, m]))
    return relay.transform.InferType()(mod)


def test_while_loop_as_recursion_grows_a_tensor():
    mod = _growing_loop()
    exe, vm = _vm(mod)
    assert "tail invoke @loop" in exe.bytecode
    mv = _rand(3, 2)
    for steps in (0, 1, 4, 2):
        out = vm.invoke("main", mv, np.array(steps, "int32"))
        acc = mv
        for k in range(steps):
            acc = np.concatenate([acc, acc * 0.5 + k])
        assert out.shape == (3 * 2 ** steps, 2)
        np.testing.assert_allclose(out.numpy(), acc, rtol=1e-6)
    _check(vm.invoke("main", mv, np.array(3, "int32")), _ref(mod, mv, np.array(3, "int32")))


def test_deep_tail_recursion_runs_in_constant_stack():
    loop = relay.GlobalVar("count")
    i = relay.var("i", shape=(), dtype="int32")
    s = relay.var("s", shape=(2,))
    body = relay.If(relay.less(i, relay.const(3000, "int32")),
                    relay.Call(loop, [i + relay.const(1, "int32"), s + relay.const(1.0)]), s)
    mod = tvm.IRModule()
    mod[loop] = relay.Function([i, s], body, ret_type=relay.TensorType((2,), "float32"))
    x = relay.var("x", shape=(2,))
    mod["main"] = relay.Function([x], relay.Call(loop, [relay.const(0, "int32"), x]))
    _, vm = _vm(mod)
    xv = _rand(2)
    np.testing.assert_allclose(vm.invoke("main", xv).numpy(), xv + 3000, rtol=1e-6)


def test_non_tail_recursion():
    """@fact(n, x) = n <= 0 ? x : fact(n - 1, x) * (n + x): the multiply after the call."""
    fact = relay.GlobalVar("fact")
    n = relay.var("n", shape=(), dtype="int32")
    x = relay.var("x", shape=(3,))
    nf = relay.cast(n, "float32")
    body = relay.If(relay.less_equal(n, relay.const(0, "int32")), x,
                    relay.Call(fact, [n - relay.const(1, "int32"), x]) * (x + nf))
    mod = tvm.IRModule()
    mod[fact] = relay.Function([n, x], body, ret_type=relay.TensorType((3,), "float32"))
    a, k = relay.var("a", shape=(3,)), relay.var("k", shape=(), dtype="int32")
    mod["main"] = relay.Function([a, k], relay.Call(fact, [k, a]))
    _, vm = _vm(mod)
    av = _rand(3)
    out = vm.invoke("main", av, np.array(4, "int32"))
    ref = av.copy()
    for j in range(1, 5):
        ref = ref * (av + j)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5)
    _check(out, _ref(mod, av, np.array(4, "int32")), rtol=1e-5)


# ---- tuples, lets, local functions ---------------------------------------------------------------
def test_tuples_lets_and_local_functions():
    swap = relay.GlobalVar("swap")
    p = relay.var("p", relay.TupleType([relay.TensorType((2, 3)), relay.TensorType((3,))]))
    mod = tvm.IRModule()
    mod[swap] = relay.Function([p], relay.Tuple([relay.TupleGetItem(p, 1),
                                                 relay.TupleGetItem(p, 0) * relay.const(2.0)]))
    x, y = relay.var("x", shape=(2, 3)), relay.var("y", shape=(3,))
    t = relay.var("t")
    sq = relay.var("sq")
    z = relay.var("z", shape=(3,))
    local = relay.Function([z], z * z)
    r = relay.Call(swap, [relay.Tuple([x, y])])
    body = relay.Let(sq, local, relay.Let(
        t, r, relay.Tuple([relay.Call(sq, [relay.TupleGetItem(t, 0)]),
                           relay.Tuple([relay.TupleGetItem(t, 1), relay.split(x, 3, axis=1)[2]]),
                           relay.Call(sq, [y + relay.const(1.0)])])))
    mod["main"] = relay.Function([x, y], body)
    mod = relay.transform.InferType()(mod)
    _, vm = _vm(mod)
    xv, yv = _rand(2, 3), _rand(3)
    out = vm.invoke("main", xv, yv)
    _check(out, _ref(mod, xv, yv))
    np.testing.assert_allclose(out[0].numpy(), yv * yv, rtol=1e-6)
    np.testing.assert_allclose(out[1][0].numpy(), 2 * xv, rtol=1e-6)
    # a tuple-typed input of main
    mod2 = tvm.IRModule({"main": mod[swap]})
    _, vm2 = _vm(mod2)
    out = vm2.invoke("main", (xv, yv))
    _check(out, (yv, 2 * xv))
    # a tuple input consumed by an operator (its fields become the segment's inputs)
    q = relay.var("q", relay.TupleType([relay.TensorType((2, 3)), relay.TensorType((4, 3))]))
    mod3 = tvm.IRModule.from_expr(relay.Function([q], relay.concatenate(q, axis=0)))
    _, vm3 = _vm(mod3)
    zv = _rand(4, 3)
    _check(vm3.invoke("main", (xv, zv)), np.concatenate([xv, zv]))
    with pytest.raises(TypeError, match=r"input 'q': expected a tuple of 2 values"):
        vm3.invoke("main", xv)


# ---- data-dependent operators --------------------------------------------------------------------
def _head_rel(arg_types, attrs):
    return relay.TensorType((relay.Any(),), arg_types[0].dtype)


def _register_test_ops():
    """test.vm_head(data, k) = data[:k] (compiled: output extent symbolic, bound from the output
    buffer) and test.vm_positive(data) = data[data > 0] (numpy implementation only)."""
    if "test.vm_head" in relay.op.list_op_names():
        return
    register_op("test.vm_head", _head_rel, OpPattern.OPAQUE, 2)
    register_shape_func("test.vm_head", lambda attrs, ins: [(min(int(ins[1]), ins[0].shape[0]),)],
                        data_dependent=True)
    relay.op.registry.register_op_attr(
        "test.vm_head", "FNumpy", lambda attrs, args, out_type: args[0][: int(args[1])])

    def compute(attrs, inputs, out_type):
        return [te.compute(tuple(out_type.shape), lambda i: inputs[0][i], name="head")]

    @register_strategy("test.vm_head")
    def strategy(attrs, inputs, out_type, target):
        s = OpStrategy()
        s.add_implementation(compute, schedule_injective, "test.vm_head.generic")
        return s

    register_op("test.vm_positive", lambda t, a: relay.TensorType((relay.Any(),), t[0].dtype),
                OpPattern.OPAQUE, 1)
    register_shape_func("test.vm_positive",
                        lambda attrs, ins: [(int((ins[0] > 0).sum()),)], data_dependent=True)
    relay.op.registry.register_op_attr(
        "test.vm_positive", "FNumpy", lambda attrs, args, out_type: args[0][args[0] > 0])
    assert topi is not None


def test_data_dependent_outputs():
    _register_test_ops()
    x = relay.var("x", shape=(9,))
    k = relay.var("k", shape=(), dtype="int32")
    head = make_call("test.vm_head", [relay.exp(x), k])       # compiled kernel
    pos = make_call("test.vm_positive", [x])                   # numpy implementation
    body = relay.Tuple([head * relay.const(2.0), relay.sum(pos), pos])
    mod = tvm.IRModule.from_expr(relay.Function([x, k], body))
    exe, vm = _vm(mod)
    how = {k.name: k.symbol for k in exe.kernels}
    assert how["test.vm_head"] and how["test.vm_positive"] is None
    for kv in (0, 4, 9):
        xv = _rand(9)
        out = vm.invoke("main", xv, np.array(kv, "int32"))
        _check(out, (2 * np.exp(xv[:kv]), np.sum(xv[xv > 0]), xv[xv > 0]), rtol=1e-5)


def test_runtime_builtin_runs_its_numpy_implementation():
    """An operator marked TRuntimeBuiltin (e.g. the list.* operators of ONNX sequences) runs
    on the VM's values with its numpy implementation; its result is checked against its
    type."""
    name = "test.vm_builtin_rsort"
    if name not in relay.op.list_op_names():
        register_op(name, lambda t, a: t[0], OpPattern.OPAQUE, 1)
        relay.op.registry.register_op_attr(name, "FNumpy", lambda a, ins, t: np.sort(ins[0])[::-1])
        relay.op.registry.register_op_attr(name, "TRuntimeBuiltin", True)
    x = relay.var("x", shape=(relay.Any(),))
    mod = tvm.IRModule.from_expr(relay.Function([x], make_call(name, [relay.exp(x)]) + x))
    exe, vm = _vm(mod)
    assert "[numpy]" in exe.bytecode
    for n in (1, 6):
        xv = _rand(n)
        _check(vm.invoke("main", xv), np.sort(np.exp(xv))[::-1] + xv, rtol=1e-5)



@pytest.mark.parametrize("size_first", [False, True])
def test_kernel_with_a_size_that_an_earlier_kernel_decided(size_first):
    """``broadcast_to(c, shape=[K, 3])`` with K the row count of an argwhere that is not an
    input of the broadcast: the kernel gets the argwhere's result for its sizes ('sizes of' in
    the bytecode) and runs after it whatever order the outputs name them in; its output shape
    is its type's (K, 3) evaluated. The shape function of broadcast_to, which cannot read a
    size variable from its attributes, failed ('symbolic expression any cannot be used as a
    Python integer'). Checked at several sizes, and K = 0."""
    x = relay.var("x", shape=(relay.Any(), 4))
    c = relay.var("c", shape=(1, 3))
    idx = relay.argwhere(relay.greater(x, relay.const(0.0)))
    k = infer_type(relay.Function([x], idx)).body.checked_type.shape[0]
    y = relay.broadcast_to(relay.exp(c), [k, 3])
    mod = tvm.IRModule.from_expr(relay.Function([x, c], relay.Tuple(
        [y, idx] if size_first else [idx, y])))
    exe, vm = _vm(mod)
    assert "sizes of" in exe.bytecode
    cv = _rand(1, 3)
    for n, shift in ((1, 0.0), (5, 0.0), (3, -2.0)):  # (the last: nothing positive)
        xv = (_rand(n, 4) + shift).astype("float32")
        want_idx = np.argwhere(xv > 0).astype("int32")
        want_y = np.broadcast_to(np.exp(cv), (len(want_idx), 3))
        out = vm.invoke("main", xv, cv)
        _check(out, (want_y, want_idx) if size_first else (want_idx, want_y), rtol=1e-6)


def _register_static_only_op():
    """test.vm_static_only(x) = cumsum(x): its compute refuses symbolic shapes (as a kernel
    that cannot be lowered for run-time sizes); its numpy implementation runs any."""
    name = "test.vm_static_only"
    if name in relay.op.list_op_names():
        return name
    register_op(name, lambda t, a: t[0], OpPattern.OPAQUE, 1)
    register_shape_func(name, lambda attrs, ins: [tuple(ins[0])])
    relay.op.registry.register_op_attr(
        name, "FNumpy", lambda attrs, args, t: np.cumsum(args[0]).astype(args[0].dtype))

    def compute(attrs, inputs, out_type):
        if not all(isinstance(d, int) for d in out_type.shape):
            raise NotImplementedError(f"{name}: static shapes only")
        return [te.compute(tuple(out_type.shape), lambda i: inputs[0][i], name="s")]

    @register_strategy(name)
    def strategy(attrs, inputs, out_type, target):
        s = OpStrategy()
        s.add_implementation(compute, schedule_injective, f"{name}.generic")
        return s

    return name


def test_kernel_that_fails_to_lower_warns_or_is_refused_under_strict():
    """A compute that fails to lower in the VM falls back to the numpy implementation with a
    RuntimeWarning naming the node, the operator and the error (not silently); under strict
    mode (relay.backend.strict_schedules, the suite's default) it is a VMCompileError."""
    name = _register_static_only_op()
    x = relay.var("x", shape=(relay.Any(),))
    mod = tvm.IRModule.from_expr(
        relay.Function([x], make_call(name, [relay.exp(x)]) * relay.const(2.0)))
    with pytest.raises(relay.vm.VMCompileError,
                       match=rf"node `{name}\(exp.*{name}: static shapes only.*strict_schedules"):
        relay.vm.compile(mod, "llvm")  # the suite runs with TVMPY_STRICT_SCHEDULES=1
    with tvm.transform.PassContext(config={"relay.backend.strict_schedules": True}):
        with pytest.raises(relay.vm.VMCompileError, match="no numpy fallback"):
            relay.vm.compile(mod, "llvm")
    with tvm.transform.PassContext(config={"relay.backend.strict_schedules": False}):
        with pytest.warns(RuntimeWarning, match=rf"operator {name} failed to lower "
                                                r"\(NotImplementedError: .*static shapes only"):
            exe = relay.vm.compile(mod, "llvm")
    assert f"kernel {name} [numpy]" in exe.bytecode
    vm = VirtualMachine(exe, tvm.cpu(0))
    for n in (1, 7):
        xv = _rand(n)
        _check(vm.invoke("main", xv), 2 * np.cumsum(np.exp(xv)), rtol=1e-5)

def test_stack_of_unrelated_run_time_sizes_is_compiled_and_checked():
    """stack of two unrelated run-time sizes: the kernel unifies them (relay/size_checks.py), so
    the whole region is compiled; sizes that differ are refused before any kernel runs."""
    a, b = relay.var("a", shape=(relay.Any(), 3)), relay.var("b", shape=(relay.Any(), 3))
    y = relay.stack([relay.exp(a), b], axis=1) * relay.const(2.0)
    mod = tvm.IRModule.from_expr(relay.Function([a, b], y))
    exe, vm = _vm(mod)
    assert exe.kernels == []
    for n in (1, 4):
        av, bv = _rand(n, 3), _rand(n, 3)
        _check(vm.invoke("main", av, bv), 2 * np.stack([np.exp(av), bv], axis=1), rtol=1e-5)
    with pytest.raises((VMError, ValueError), match="stack: dimension 0 of field 1 is 3"):
        vm.invoke("main", _rand(2, 3), _rand(3, 3))


def test_fresh_size_runs_through_its_shape_function():
    """add of two unrelated Any sizes: the result size is known only at run time."""
    a, b = relay.var("a", shape=(relay.Any(),)), relay.var("b", shape=(relay.Any(),))
    mod = tvm.IRModule.from_expr(relay.Function([a, b], relay.exp(a + b)))
    _, vm = _vm(mod)
    for na, nb in ((5, 5), (1, 7), (4, 1)):
        av, bv = _rand(na), _rand(nb)
        _check(vm.invoke("main", av, bv), np.exp(av + bv), rtol=1e-5)
    with pytest.raises((VMError, ValueError), match="add: dimension -1 of the lhs is 3"):
        vm.invoke("main", _rand(3), _rand(4))


def test_save_and_load(tmp_path):
    _register_test_ops()
    mod = _growing_loop()
    x = relay.var("x", shape=(9,))
    k = relay.var("k", shape=(), dtype="int32")
    mod["head"] = relay.Function([x, k], make_call("test.vm_head", [x, k]))
    exe, _ = _vm(mod)
    code, lib = exe.save()
    lib.export_library(str(tmp_path / "vm.so"))
    exe2 = relay.vm.Executable.load_exec(code, tvm.runtime.load_module(str(tmp_path / "vm.so")))
    assert exe2.bytecode == exe.bytecode
    vm = VirtualMachine(exe2, tvm.cpu(0))
    mv, xv = _rand(3, 2), _rand(9)
    np.testing.assert_allclose(vm.invoke("main", mv, np.array(2, "int32")).numpy(),
                               VirtualMachine(exe, tvm.cpu(0)).invoke(
                                   "main", mv, np.array(2, "int32")).numpy())
    np.testing.assert_allclose(vm.invoke("head", xv, np.array(5, "int32")).numpy(), xv[:5])


# ---- errors --------------------------------------------------------------------------------------
def test_bad_inputs_are_refused_before_running():
    n = relay.Any()
    x, y = relay.var("x", shape=(n, 4)), relay.var("y", shape=(n, 4))
    mod = tvm.IRModule.from_expr(relay.Function([x, y], x + y))
    _, vm = _vm(mod)
    with pytest.raises(ValueError, match=r"input 'x': dimension 1 must be 4"):
        vm.invoke("main", _rand(2, 5), _rand(2, 4))
    with pytest.raises(TypeError, match=r"input 'y': expected dtype float32, got float64"):
        vm.invoke("main", _rand(2, 4), _rand(2, 4).astype("float64"))
    with pytest.raises(ValueError, match=r"input 'y': dimension 0 is 3, but input 'x' "
                                         r"dimension 0 is 2"):
        vm.invoke("main", _rand(2, 4), _rand(3, 4))
    with pytest.raises(ValueError, match=r"input 'x': expected 2 dimensions"):
        vm.invoke("main", _rand(8), _rand(2, 4))
    with pytest.raises(TypeError, match=r"'y' not given"):
        vm.invoke("main", _rand(2, 4))
    with pytest.raises(TypeError, match="no input named 'z'"):
        vm.invoke("main", _rand(2, 4), z=1)


def test_shape_function_that_breaks_the_type_names_the_node():
    _register_test_ops()
    name = "test.vm_bad_shape"
    if name not in relay.op.list_op_names():
        register_op(name, _head_rel, OpPattern.OPAQUE, 1)
        register_shape_func(name, lambda attrs, ins: [(2, 2)], data_dependent=True)
        relay.op.registry.register_op_attr(name, "FNumpy", lambda attrs, args, t: args[0])
    x = relay.var("x", shape=(4,))
    mod = tvm.IRModule.from_expr(relay.Function([x], make_call(name, [x])))
    _, vm = _vm(mod)
    with pytest.raises(VMError, match=r"test.vm_bad_shape.*shape \(2, 2\).*Tensor\[\(\?\)"):
        vm.invoke("main", _rand(4))


def test_recursion_needs_a_return_type():
    loop = relay.GlobalVar("loop")
    i = relay.var("i", shape=(), dtype="int32")
    body = relay.If(relay.less(i, relay.const(3, "int32")),
                    relay.Call(loop, [i + relay.const(1, "int32")]), i)
    mod = tvm.IRModule()
    mod[loop] = relay.Function([i], body)
    mod["main"] = relay.Function([], relay.Call(loop, [relay.const(0, "int32")]))
    with pytest.raises(relay.RelayTypeError, match="@loop.*return type annotation"):
        relay.vm.compile(mod, "llvm")


def test_let_inlining_has_one_home():
    """The VM's inliner and FuseOps' normalization are InlineLets (issue 30): a let chain whose
    value is used twice inlines to one shared subexpression in both."""
    from tvmpy.relay.backend.vm import _Inline
    from tvmpy.relay.transform.fuse_ops import _Normalize
    from tvmpy.relay.visitor import InlineLets

    x = relay.var("x", shape=(3,))
    a, b = relay.var("a"), relay.var("b")
    body = relay.Let(a, relay.exp(x), relay.Let(b, relay.add(a, a), relay.multiply(b, a)))
    for cls in (InlineLets, _Inline, _Normalize):
        out = cls().visit(body)
        assert isinstance(out, relay.Call) and out.op.name == "multiply"
        exp = out.args[1]
        assert exp.op.name == "exp" and out.args[0].args[0] is exp is out.args[0].args[1]
