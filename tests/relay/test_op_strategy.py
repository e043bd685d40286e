"""Operator strategies: every operator with a compute lowers (lower_call), schedules with the
chosen implementation, builds for llvm and matches the numpy interpreter on random data; the
highest-priority implementation is the one chosen."""

import numpy as np
import pytest
from relay_op_cases import op_cases

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.backend import lower_call, placeholders_for
from tvmpy.relay.interpreter import evaluate
from tvmpy.relay.op.shape_func import is_data_dependent
from tvmpy.relay.op.strategy import OpStrategy, select_implementation
from tvmpy.relay.op.strategy.generic import COMPUTES, schedule_injective
from tvmpy.relay.op.strategy.x86 import schedule_injective_cpu
from tvmpy.relay.type_infer import infer_type

rng = np.random.default_rng(11)


def _random(t):
    shape = tuple(int(d) for d in t.shape)
    if t.dtype == "bool":
        return rng.random(shape) < 0.5
    if t.dtype.startswith("int"):
        return rng.integers(0, 2, size=shape).astype(t.dtype)
    return rng.uniform(0.5, 1.5, size=shape).astype(t.dtype)


def _fields(arg):
    return list(arg.fields) if isinstance(arg, relay.Tuple) else [arg]


def check_call(expr, target="llvm", rtol=1e-5, atol=1e-5, key=None):
    """Compile the (single) call of ``expr`` alone and compare it with the interpreter.

    ``key``: use the strategy registered for that target key (e.g. "generic", the default)
    instead of the target's."""
    params = free_vars(expr)
    func = infer_type(relay.Function(params, expr))
    body = func.body
    if isinstance(body, relay.TupleGetItem):
        body = body.tuple_value
    assert isinstance(body, relay.Call), body
    values = [_random(p.type_annotation) for p in params]
    with np.errstate(all="ignore"):
        arg_values = [np.asarray(evaluate(relay.Function(params, f), *values))
                      for a in body.args for f in _fields(a)]
        want = evaluate(relay.Function(params, body), *values)
    wants = [np.asarray(w) for w in (want if isinstance(want, (list, tuple)) else [want])]
    inputs = placeholders_for(body)
    if key is None:
        outs, schedule_fn = lower_call(body, inputs, target)
        s = schedule_fn(outs)
    else:
        gfunc = body.op.get_attr("FTVMStrategy").generic_func
        fstrategy = gfunc.fdefault if key == "generic" else gfunc.dispatch_dict[key]
        # (the generic strategy takes the target's pattern schedules: a target of no key
        # gets the generic ones)
        tgt = tvm.target.Target(f"{target} -keys=generic") if key == "generic" else target
        impl = fstrategy(body.attrs, inputs, body.checked_type, tgt).best()
        outs = impl.compute(body.attrs, inputs, body.checked_type)
        s = impl.schedule(body.attrs, outs, tgt)
    mod = tvm.build(s, [*inputs, *outs], target)
    res = [tvm.nd.array(np.zeros(tuple(int(d) for d in o.shape), o.dtype)) for o in outs]
    arg_values = [np.array(v.reshape(tuple(int(d) for d in t.shape)), order="C")
                  for v, t in zip(arg_values, inputs)]
    mod(*arg_values, *res)
    assert len(res) == len(wants)
    scratch = body.op.get_attr("FWorkspaceOutputs")  # trailing outputs of undefined value
    if scratch is not None:
        keep = len(res) - scratch(body.attrs)
        res, wants = res[:keep], wants[:keep]
    for r, w in zip(res, wants):
        got = r.numpy()
        assert got.shape == w.shape
        np.testing.assert_allclose(got, w.astype(got.dtype), rtol=rtol, atol=atol,
                                   equal_nan=True)
    return outs


_CASES = op_cases()
# every op with a case and a strategy (the ops x86 registers itself, e.g. the int8 blocked
# convolutions, included)
# (data-dependent ops need the VM: their kernels are tested in test_dyn_axes_ops.py)
_COVERED = sorted(n for n in _CASES if relay.op.get(n).get_attr("FTVMStrategy") is not None
                  and not is_data_dependent(n))
# fp32 against the float64 reference: Winograd's transforms (entries up to 8 for F(4x4)) lose
# a few more bits than a direct sum
# (also the NCHW form: 2.8e-5 off in 1 of 486 values on some draws, -n 2 without loadfile)
_TOL = {"nn.contrib_conv2d_winograd_nchwc": 1e-3,
        "nn.contrib_conv2d_winograd_without_weight_transform": 1e-3}


@pytest.mark.parametrize("name", _COVERED)
def test_op_builds_and_matches_interpreter(name):
    expr = _CASES[name][0]
    tol = _TOL.get(name, 1e-5)
    check_call(expr, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", _COVERED)
def test_generic_strategy_builds_and_matches(name):
    tol = _TOL.get(name, 1e-5)
    check_call(_CASES[name][0], key="generic", rtol=tol, atol=tol)


def test_every_op_has_a_strategy():
    missing = sorted(n for n in relay.op.list_op_names()
                     if not n.startswith("test.")
                     and relay.op.get(n).get_attr("FTVMStrategy") is None
                     # run-time builtins on list values (ONNX sequences): no kernel
                     and not relay.op.get(n).get_attr("TRuntimeBuiltin")
                     # QNN ops are lowered to standard ones (CanonicalizeOps) before codegen
                     and relay.op.get(n).get_attr("FTVMQnnCanonicalize") is None)
    assert not missing, missing
    assert {n for n in _CASES if not n.startswith(("qnn.", "list."))
            and not is_data_dependent(n)} <= set(_COVERED)


@pytest.mark.parametrize("groups,oc", [(1, 6), (3, 6), (3, 3)], ids=["conv", "group", "dw"])
def test_fused_group_scheduled_by_the_anchor(groups, oc):
    """conv2d -> bias_add -> relu lowered call by call on each other's tensors, then scheduled
    once by the conv2d implementation's schedule (how relay.build lowers a fused function)."""
    x = relay.var("x", shape=(1, 3, 10, 9))
    w = relay.var("w", shape=(oc, 3 // groups, 3, 3))
    b = relay.var("b", shape=(oc,))
    conv = _typed_call(relay.nn.conv2d(x, w, padding=(1, 1, 1, 1), groups=groups))
    ins = placeholders_for(conv)
    (c_out,), schedule_fn = lower_call(conv, ins, "llvm")
    badd = _typed_call(relay.nn.bias_add(relay.var("y", shape=(1, oc, 10, 9)), b))
    bias = placeholders_for(badd)[1]
    (b_out,), _ = lower_call(badd, [c_out, bias], "llvm")
    relu = _typed_call(relay.nn.relu(relay.var("z", shape=(1, oc, 10, 9))))
    (r_out,), _ = lower_call(relu, [b_out], "llvm")
    f = tvm.build(schedule_fn([r_out]), [*ins, bias, r_out], "llvm")
    xv = rng.uniform(-1, 1, size=(1, 3, 10, 9)).astype("float32")
    wv = rng.uniform(-1, 1, size=(oc, 3 // groups, 3, 3)).astype("float32")
    bv = rng.uniform(-1, 1, size=(oc,)).astype("float32")
    out = tvm.nd.array(np.zeros((1, oc, 10, 9), "float32"))
    f(xv, wv, bv, out)
    ref = evaluate(relay.Function([x, w, b], relay.nn.relu(relay.nn.bias_add(
        relay.nn.conv2d(x, w, padding=(1, 1, 1, 1), groups=groups), b))), xv, wv, bv)
    np.testing.assert_allclose(out.numpy(), np.asarray(ref), rtol=1e-4, atol=1e-5)


def _typed_call(expr):
    func = infer_type(relay.Function(free_vars(expr), expr))
    return func.body


def test_plevel_picks_the_higher_implementation():
    from tvmpy import topi

    def low(attrs, inputs, out_type):
        return [topi.negative(inputs[0])]

    def high(attrs, inputs, out_type):
        return [topi.abs(inputs[0])]

    sched = lambda attrs, outs, target: te.create_schedule([o.op for o in outs])  # noqa: E731
    s = OpStrategy()
    s.add_implementation(low, sched, "low", 5)
    s.add_implementation(high, sched, "high", 20)
    s.add_implementation(low, sched, "mid", 10)
    assert s.best().name == "high"
    tie = OpStrategy()
    tie.add_implementation(low, sched, "first", 7)
    tie.add_implementation(high, sched, "second", 7)
    assert tie.best().name == "first"
    with pytest.raises(ValueError, match="no implementation"):
        OpStrategy().best()


def test_dense_pack_chosen_for_many_rows_and_correct():
    w = relay.const(rng.uniform(-1, 1, size=(37, 29)).astype("float32"))
    few = _typed_call(relay.nn.dense(relay.var("a", shape=(3, 29)), w))
    many = _typed_call(relay.nn.dense(relay.var("b", shape=(50, 29)), w))
    pick = lambda c: select_implementation(  # noqa: E731
        c.op, c.attrs, placeholders_for(c), c.checked_type, tvm.target.Target("llvm")).name
    assert pick(few) == "nn.dense.x86"
    assert pick(many) == "dense_pack.x86"
    outs = check_call(relay.nn.dense(relay.var("b", shape=(50, 29)), w), rtol=1e-4, atol=1e-4)
    # (N = 37: computed over two whole 32-wide panels, then cropped to 37 columns)
    assert outs[0].op.tag == "injective" and outs[0].op.input_tensors[0].op.tag == "dense_pack"


def _pick(call, target):
    return select_implementation(call.op, call.attrs, placeholders_for(call), call.checked_type,
                                 target).name


def test_strategy_dispatch_by_target_keys():
    call = _typed_call(relay.add(relay.var("x", shape=(4,)), relay.var("y", shape=(4,))))
    assert tvm.target.Target("llvm").keys == tvm.target.Target("c").keys == ["cpu"]
    # add: the generic strategy, scheduled with the target's injective schedule
    assert "cpu" not in call.op.get_attr("FTVMStrategy").generic_func.dispatch_dict
    assert _pick(call, tvm.target.Target("llvm")) == "add.generic"
    assert _pick(call, "interp") == "add.generic"
    assert _pick_schedule(call, "llvm") is _pick_schedule(call, "c") is schedule_injective_cpu
    assert _pick_schedule(call, "llvm -keys=other,cpu") is schedule_injective_cpu
    assert _pick_schedule(call, "llvm -keys=other") is schedule_injective.fdefault
    # softmax: x86's own strategy
    sm = _typed_call(relay.nn.softmax(relay.var("x", shape=(3, 5))))
    assert "cpu" in sm.op.get_attr("FTVMStrategy").generic_func.dispatch_dict
    assert _pick(sm, tvm.target.Target("llvm")) == "nn.softmax.x86"
    assert _pick(sm, "c") == "nn.softmax.x86"
    assert _pick(sm, "llvm -keys=other") == "nn.softmax.generic"
    assert _pick(sm, "llvm -keys=other,cpu") == "nn.softmax.x86"


def _pick_schedule(call, target):
    return select_implementation(call.op, call.attrs, placeholders_for(call),
                                 call.checked_type, target).schedule


def test_a_new_target_key_registers_its_own_strategy_and_schedules():
    """A target with its own key (``-keys=mykey``) gets what is registered for "mykey" and
    otherwise the generic strategy: registration, no edit of shared code."""
    from tvmpy import topi
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.op.strategy import register_strategy_func

    used = []

    def mykey_softmax(attrs, inputs, out_type, target):
        used.append(("strategy", str(target)))
        s = OpStrategy()
        s.add_implementation(COMPUTES["nn.softmax"],
                             lambda a, outs, t: topi.generic.schedule_injective(outs),
                             "softmax.mykey", 10)
        return s

    def mykey_injective(attrs, outs, target):
        used.append(("injective", str(target)))
        return topi.generic.schedule_injective(outs)

    softmax = relay.op.get("nn.softmax").get_attr("FTVMStrategy").generic_func
    register_strategy_func("nn.softmax", "mykey", mykey_softmax)
    schedule_injective.register("mykey", mykey_injective)
    try:
        x = relay.var("x", shape=(3, 5))
        sm = _typed_call(relay.nn.softmax(x))
        assert _pick(sm, "llvm -keys=mykey") == "softmax.mykey"
        assert _pick(sm, "llvm -keys=other,mykey,cpu") == "softmax.mykey"
        assert _pick(sm, "llvm -keys=cpu,mykey") == "nn.softmax.x86"
        assert _pick(sm, "llvm -keys=other") == "nn.softmax.generic"
        add = _typed_call(relay.add(x, x))
        assert _pick(add, "llvm -keys=mykey") == "add.generic"
        # relay.build: the softmax group and an injective group use mykey's registrations
        used.clear()
        xv = rng.uniform(-1, 1, size=(3, 5)).astype("float32")
        mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.softmax(relay.exp(x)) + x))
        with tvm.transform.PassContext(opt_level=0):
            lib = relay.build(mod, "llvm -keys=mykey")
        assert ("strategy", "llvm -keys=mykey") in used
        assert ("injective", "llvm -keys=mykey") in used
        m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        m.set_input("x", xv)
        m.run()
        e = np.exp(np.exp(xv))
        np.testing.assert_allclose(m.get_output(0).numpy(),
                                   e / e.sum(-1, keepdims=True) + xv, rtol=1e-5, atol=1e-6)
    finally:
        del softmax.dispatch_dict["mykey"], schedule_injective.dispatch_dict["mykey"]


def test_the_generic_strategy_comes_first():
    from tvmpy.relay.op.strategy import register_strategy_func

    with pytest.raises(ValueError, match="'generic' strategy before"):
        register_strategy_func("test.no_such_strategy_op", "cpu", lambda *a: None)
    with pytest.raises(ValueError, match="already registered"):
        register_strategy_func("add", "generic", lambda *a: None)


@pytest.mark.parametrize("build", [
    lambda x: relay.nn.conv2d(x, relay.const(rng.uniform(size=(8, 1, 3, 3)).astype("float32")),
                              groups=8, padding=(1, 1, 1, 1), strides=(2, 2)),
    lambda x: relay.nn.conv2d(x, relay.const(rng.uniform(size=(5, 8, 1, 1)).astype("float32"))),
    lambda x: relay.nn.conv2d_transpose(
        x, relay.const(rng.uniform(size=(8, 3, 3, 3)).astype("float32")), strides=2, padding=1,
        output_padding=1),
    lambda x: relay.nn.max_pool2d(x, 3, 2, padding=(1, 1, 1, 1)),
    lambda x: relay.nn.avg_pool2d(x, (2, 3), (1, 2), count_include_pad=True),
    lambda x: relay.nn.layer_norm(x, relay.const(np.full((7,), 1.3, "float32")),
                                  relay.const(np.full((7,), -0.2, "float32"))),
    lambda x: relay.nn.softmax(x, axis=1),
    lambda x: relay.sum(x, axis=(1, 3), keepdims=True),
    lambda x: relay.mean(x, axis=1, exclude=True),
    lambda x: relay.transpose(x, (0, 2, 3, 1)),
    lambda x: relay.split(x, 3, axis=2)[2] if False else relay.split(x, (2, 5), axis=3)[1],
    lambda x: relay.image.resize2d(x, (11, 4), method="linear"),
    lambda x: relay.layout_transform(x, "NCHW", "NCHW4c"),
], ids=["depthwise", "conv1x1", "conv_t", "maxpool", "avgpool", "layer_norm", "softmax",
        "sum", "mean_exclude", "transpose", "split", "resize_linear", "layout_transform"])
def test_awkward_shapes(build):
    check_call(build(relay.var("x", shape=(1, 8, 7, 7))), rtol=1e-4, atol=1e-4)


def test_batch_norm_all_outputs():
    vec = [relay.const(rng.uniform(0.5, 1.5, size=(3,)).astype("float32")) for _ in range(4)]
    check_call(relay.nn.batch_norm(relay.var("x", shape=(2, 3, 5, 1)), *vec, epsilon=1e-3)[0],
               rtol=1e-4, atol=1e-4)


def test_symbolic_batch_elementwise():
    n = tvm.te.var("n")
    call = _typed_call(relay.add(relay.var("x", shape=(n, 5)), relay.var("y", shape=(5,))))
    ins = placeholders_for(call)
    outs, schedule_fn = lower_call(call, ins, "llvm")
    f = tvm.build(schedule_fn(outs), [*ins, *outs], "llvm")
    a = rng.uniform(size=(6, 5)).astype("float32")
    b = rng.uniform(size=(5,)).astype("float32")
    c = tvm.nd.array(np.zeros((6, 5), "float32"))
    f(a, b, c)
    np.testing.assert_allclose(c.numpy(), a + b, rtol=1e-6)


def test_lower_call_errors():
    call = _typed_call(relay.add(relay.var("x", shape=(4,)), relay.var("y", shape=(4,))))
    with pytest.raises(ValueError, match="takes 2 input tensors"):
        lower_call(call, placeholders_for(call)[:1], "llvm")
    with pytest.raises(TypeError, match="expected a relay Call"):
        lower_call(relay.var("z", shape=(1,)), [], "llvm")
    conv = _typed_call(relay.nn.conv2d(relay.var("x", shape=(1, 5, 5, 2)),
                                       relay.var("w", shape=(3, 3, 2, 4)), data_layout="NHWC",
                                       kernel_layout="HWIO"))
    with pytest.raises(NotImplementedError, match="NHWC"):
        lower_call(conv, placeholders_for(conv), "llvm")


@pytest.mark.parametrize("build", [
    lambda: relay.cumsum(relay.var("x", shape=(3, 7)), axis=None),
    lambda: relay.cumsum(relay.var("x", shape=(2, 5, 3)), axis=1),
    lambda: relay.op.reduce.variance(relay.var("x", shape=(4, 6)),
                                     relay.var("m", shape=(4, 1)), axis=1, keepdims=True,
                                     unbiased=True),
    lambda: relay.nn.depth_to_space(relay.var("x", shape=(1, 12, 3, 5)), 2, mode="CRD"),
    lambda: relay.nn.depth_to_space(relay.var("x", shape=(2, 18, 2, 3)), 3),
    lambda: relay.nn.space_to_depth(relay.var("x", shape=(1, 3, 6, 9)), 3),
    lambda: relay.one_hot(relay.var("i", shape=(5,), dtype="int32"), relay.const(2.5),
                          relay.const(-1.0), 3, axis=-1),
    lambda: relay.nn.conv1d(relay.var("x", shape=(1, 3, 13)),
                            relay.const(rng.uniform(size=(4, 3, 5)).astype("float32")),
                            dilation=2, padding=(2, 1)),
    lambda: relay.nn.dense(relay.var("x", shape=(17, 9)),
                           relay.const(rng.uniform(size=(3, 9)).astype("float32"))),
    lambda: relay.nn.batch_matmul(relay.var("a", shape=(1, 19, 7)),
                                  relay.var("b", shape=(3, 11, 7))),
], ids=["cumsum_flat", "cumsum_axis", "variance", "d2s_crd", "d2s_dcr", "s2d", "one_hot",
        "conv1d", "dense_17rows", "batch_matmul_bcast"])
def test_more_ops(build):
    check_call(build(), rtol=1e-4, atol=1e-4)


_W_DENSE = rng.uniform(-1, 1, size=(7, 5)).astype("float32")
_W_CONV = rng.uniform(-1, 1, size=(4, 3, 3, 3)).astype("float32")


@pytest.mark.parametrize("build,tail", [
    (lambda x: relay.nn.dense(x, relay.const(_W_DENSE)), (5,)),
    (lambda x: relay.nn.softmax(x), (5,)),
    (lambda x: relay.sum(x, axis=1), (5,)),
    (lambda x: relay.nn.conv2d(x, relay.const(_W_CONV), padding=(1, 0, 1, 0)), (3, 6, 7)),
    (lambda x: relay.nn.max_pool2d(x, 2, 2, ceil_mode=True), (3, 7, 6)),
], ids=["dense", "softmax", "sum", "conv2d", "max_pool2d"])
def test_symbolic_batch(build, tail):
    n = tvm.te.var("n")
    call = _typed_call(build(relay.var("x", shape=(n, *tail))))
    ins = placeholders_for(call)
    outs, schedule_fn = lower_call(call, ins, "llvm")
    f = tvm.build(schedule_fn(outs), [*ins, *outs], "llvm")
    for batch in (1, 3):
        x = relay.var("x", shape=(batch, *tail))
        xv = rng.uniform(-1, 1, size=(batch, *tail)).astype("float32")
        want = np.asarray(evaluate(relay.Function([x], build(x)), xv))
        out = tvm.nd.array(np.zeros(want.shape, "float32"))
        f(xv, *[a.data.numpy() for a in call.args[1:]], out)  # constant weights are inputs
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)


def test_batch_matmul_pack_chosen_for_many_rows():
    a = relay.var("a", shape=(2, 20, 13))
    b = relay.const(rng.uniform(-1, 1, size=(2, 9, 13)).astype("float32"))
    outs = check_call(relay.nn.batch_matmul(a, b), rtol=1e-4, atol=1e-4)
    out = outs[0]
    if out.op.tag == "injective":  # N = 9 padded to whole panels of the host's width: the crop
        out = out.op.input_tensors[0]
    assert out.op.tag == "batch_matmul_pack"
    few = check_call(relay.nn.batch_matmul(relay.var("c", shape=(2, 3, 13)), b), rtol=1e-4,
                     atol=1e-4)
    assert few[0].op.tag == "batch_matmul"


def test_op_with_only_a_compute_gets_a_pattern_schedule():
    from tvmpy import topi
    from tvmpy.relay.op.registry import make_call, register_compute, register_op

    name = "test.strategy_square"
    if name not in relay.op.list_op_names():
        register_op(name, lambda arg_types, attrs: arg_types[0], relay.op.OpPattern.ELEMWISE, 1)
        register_compute(name, lambda attrs, inputs, out_type: [
            topi.multiply(inputs[0], inputs[0])])
    call = _typed_call(make_call(name, [relay.var("x", shape=(5, 3))]))
    ins = placeholders_for(call)
    impl = select_implementation(call.op, call.attrs, ins, call.checked_type, "llvm")
    assert impl.name == f"{name}.fcompute"
    outs, schedule_fn = lower_call(call, ins, "llvm")
    f = tvm.build(schedule_fn(outs), [*ins, *outs], "llvm")
    xv = rng.uniform(-1, 1, size=(5, 3)).astype("float32")
    out = tvm.nd.array(np.zeros((5, 3), "float32"))
    f(xv, out)
    np.testing.assert_allclose(out.numpy(), xv * xv, rtol=1e-6)


def _w(*shape):
    return relay.const(rng.uniform(-1, 1, size=shape).astype("float32"))


@pytest.mark.parametrize("build", [
    lambda x: relay.nn.conv2d(x, _w(16, 1, 3, 2), groups=8, dilation=(2, 1)),  # multiplier 2
    lambda x: relay.nn.conv2d(x, _w(3, 8, 2, 5), strides=(3, 2), padding=(0, 2, 1, 1)),
    lambda x: relay.nn.conv2d(x, _w(12, 2, 3, 3), groups=4, padding=(1, 1, 1, 1)),
    lambda x: relay.image.resize2d(x, (5, 13), method="nearest_neighbor",
                                   coordinate_transformation_mode="asymmetric"),
    lambda x: relay.image.resize2d(x, (3, 10), method="linear",
                                   coordinate_transformation_mode="align_corners"),
    lambda x: relay.nn.global_max_pool2d(x),
    lambda x: relay.nn.adaptive_avg_pool2d(x, (3, 5)),
    lambda x: relay.nn.log_softmax(x, axis=2),
    lambda x: relay.strided_slice(x, [0, 7, 1], [1, 0, 7], [1, -2, 3]),
    lambda x: relay.take(x, relay.const(np.array([[2, 0], [6, 5]], "int32")), axis=3),
    lambda x: relay.nn.pad(x, ((0, 0), (1, 0), (0, 3), (2, 2)), pad_value=-0.5),
    lambda x: relay.concatenate([x, relay.var("y", shape=(1, 3, 7, 7))], axis=1),
    lambda x: relay.argmax(x, axis=2, keepdims=True),
], ids=["depthwise_mult2", "conv_rect", "group4", "resize_nearest_asym", "resize_align",
        "global_max", "adaptive", "log_softmax", "strided_neg", "take_2d", "pad", "concat",
        "argmax"])
def test_awkward_shapes_more(build):
    check_call(build(relay.var("x", shape=(1, 8, 7, 7))), rtol=1e-4, atol=1e-4)
