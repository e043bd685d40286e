"""FuseOps (relay.transform.FuseOps, contract C1): before/after structure against hand-built
expected modules (TVM's fusion rules), the fused form's invariants, and numerical equality with
the unfused graph under the numpy interpreter on random inputs."""

import numpy as np
import pytest
from _pass_util import random_inputs, run
from hypothesis import given, settings
from hypothesis import strategies as st
from test_relay_random_graphs import _grow

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.relay import IRModule, testing, transform
from tvmpy.relay.transform import bind_params_by_name

# --------------------------------------------------------------------------- helpers


def _mod(out, params=None):
    from tvmpy.relay.analysis import free_vars

    f = relay.Function(params if params is not None else free_vars(out), out)
    return transform.InferType()(IRModule.from_expr(f))


def _fuse(mod, level=2, **cfg):
    with tvm.transform.PassContext(opt_level=3, config=cfg):
        out = transform.FuseOps(level)(mod)
    check_fused_form(out)
    return out


def _prim(params, body, name):
    return relay.Function(params, body, attrs={"Primitive": 1, "Name": name})


def _p(i, shape, dtype="float32"):
    return relay.var(f"p{i}", shape=shape, dtype=dtype)


def _groups(mod):
    """Names of the primitive functions called in main, in post order."""
    names = []

    def f(e):
        if isinstance(e, relay.Call) and isinstance(e.op, relay.Function):
            names.append(e.op.attrs["Name"])

    relay.post_order_visit(mod["main"].body, f)
    return names


def _assert_same_values(before, after, inputs):
    want, got = run(before, inputs), run(after, inputs)
    if not isinstance(want, tuple):
        want, got = (want,), (got,)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(w).max())))


def check_fused_form(mod):
    """Contract C1: outside primitive functions main holds only Vars, Constants, primitive calls,
    Tuples and TupleGetItems; every operator call sits in exactly one primitive function whose
    params are fresh typed Vars, whose args are main's Vars, Constants, primitive calls or items
    of them, whose body is an operator call (or a Tuple of them) with only scalar constants."""
    main = mod["main"]
    main_vars = {id(p) for p in main.params}
    seen_params, done = set(), set()

    def check_outside(e):
        if id(e) in done:
            return
        done.add(id(e))
        if isinstance(e, relay.Var):
            assert id(e) in main_vars, f"free variable %{e.name_hint} in main"
        elif isinstance(e, relay.Constant):
            pass
        elif isinstance(e, relay.Tuple):
            for f in e.fields:
                check_outside(f)
        elif isinstance(e, relay.TupleGetItem):
            check_outside(e.tuple_value)
        elif isinstance(e, relay.Call):
            fn = e.op
            assert isinstance(fn, relay.Function), f"operator call {fn} outside a primitive function"
            assert fn.attrs["Primitive"] == 1 and fn.attrs["Name"].startswith("fused_")
            assert len(fn.params) == len(e.args)
            for p, a in zip(fn.params, e.args):
                assert id(p) not in seen_params and id(p) not in main_vars
                seen_params.add(id(p))
                assert isinstance(p.type_annotation, relay.TensorType)
                assert tvm.ir.structural_equal(p.type_annotation, a.checked_type)
                ok = isinstance(a, (relay.Var, relay.Constant)) or (
                    isinstance(a, relay.Call) and isinstance(a.op, relay.Function)) or (
                    isinstance(a, relay.TupleGetItem))
                assert ok, f"argument {type(a).__name__} of a primitive call"
                check_outside(a)
            check_body(fn)
        else:
            raise AssertionError(f"{type(e).__name__} outside primitive functions")

    def check_body(fn):
        params = {id(p) for p in fn.params}
        b = fn.body
        heads = b.fields if isinstance(b, relay.Tuple) else (b,)
        assert all(isinstance(h, relay.Call) and isinstance(h.op, relay.op.Op) for h in heads)

        def f(e):
            if isinstance(e, relay.Var):
                assert id(e) in params, f"%{e.name_hint} is not a parameter of {fn.attrs['Name']}"
            elif isinstance(e, relay.Constant):
                assert e.data.shape == (), "non-scalar constant inside a primitive function"
            elif isinstance(e, relay.Function):
                raise AssertionError("nested function in a primitive function")
            elif isinstance(e, relay.Call):
                assert isinstance(e.op, relay.op.Op)

        relay.post_order_visit(b, f)

    check_outside(main.body)


def _rand(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")


# --------------------------------------------------------------------------- basic rules


def test_conv_bias_relu_one_group():
    x = relay.var("x", shape=(1, 3, 7, 5))
    w = relay.var("w", shape=(4, 3, 3, 3))
    b = relay.var("b", shape=(4,))
    mod = _mod(relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, padding=(1, 1)), b)))
    out = _fuse(mod)
    p0, p1, p2 = _p(0, (1, 3, 7, 5)), _p(1, (4, 3, 3, 3)), _p(2, (4,))
    body = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(p0, p1, padding=(1, 1)), p2))
    f = _prim([p0, p1, p2], body, "fused_nn_conv2d_nn_bias_add_nn_relu")
    x2, w2, b2 = (relay.var(v.name_hint, v.type_annotation) for v in (x, w, b))
    want = relay.Function([x2, w2, b2], relay.Call(f, [x2, w2, b2]))
    assert tvm.ir.structural_equal(out["main"], want)
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    text = str(out)
    assert 'Name="fused_nn_conv2d_nn_bias_add_nn_relu"' in text and "Primitive=1" in text


def test_conv_residual_add_relu():
    x = relay.var("x", shape=(1, 4, 6, 6))
    w = relay.var("w", shape=(4, 4, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)) + x)
    mod = _mod(y)
    out = _fuse(mod)
    assert _groups(out) == ["fused_nn_conv2d_add_nn_relu"]
    assert out["main"].body.args == tuple(out["main"].params)  # x passed once, reused inside
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_tvm_conv2d_fuse_case():
    """TVM's test_fuse_ops.py::test_conv2d_fuse: conv groups absorb elementwise successors; an
    add joining two convs fuses with the later conv; an add before a conv stays alone."""
    shp = (1, 16, 9, 9)
    x = relay.var("x", shape=shp)
    w1, w2, w3 = (relay.var(f"w{i}", shape=(16, 16, k, k)) for i, k in ((1, 3), (2, 1), (3, 3)))
    x1 = relay.add(x, relay.const(1, "float32"))
    y = relay.nn.conv2d(x1, w1, padding=(1, 1))
    y = relay.add(y, relay.add(relay.const(1, "float32"), y))
    z2 = relay.nn.conv2d(y, w2)
    z3 = relay.nn.conv2d(y, w3, padding=(1, 1))
    mod = _mod(relay.add(z2, z3), [x, w1, w2, w3])
    out = _fuse(mod)

    p0 = _p(0, shp)
    f0 = _prim([p0], relay.add(p0, relay.const(1, "float32")), "fused_add")
    p0, p1 = _p(0, shp), _p(1, (16, 16, 3, 3))
    c = relay.nn.conv2d(p0, p1, padding=(1, 1))
    f1 = _prim([p0, p1], relay.add(c, relay.add(relay.const(1, "float32"), c)),
               "fused_nn_conv2d_add_add")
    p0, p1 = _p(0, shp), _p(1, (16, 16, 3, 3))
    f2 = _prim([p0, p1], relay.nn.conv2d(p0, p1, padding=(1, 1)), "fused_nn_conv2d")
    p0, p1, p2 = _p(0, shp), _p(1, (16, 16, 1, 1)), _p(2, shp)
    f3 = _prim([p0, p1, p2], relay.add(relay.nn.conv2d(p0, p1), p2), "fused_nn_conv2d_add")
    xs = [relay.var(v.name_hint, v.type_annotation) for v in (x, w1, w2, w3)]
    yv = relay.Call(f1, [relay.Call(f0, [xs[0]]), xs[1]])
    want = relay.Function(xs, relay.Call(f3, [yv, xs[2], relay.Call(f2, [yv, xs[3]])]))
    assert tvm.ir.structural_equal(out["main"], want), str(out)
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_level0_one_op_per_group():
    x = relay.var("x", shape=(3, 5))
    y = relay.exp(relay.nn.relu(x) + relay.const(2.0)) * x
    mod = _mod(relay.sum(y, axis=[1]))
    out = _fuse(mod, level=0)
    assert _groups(out) == ["fused_nn_relu", "fused_add", "fused_exp", "fused_multiply",
                            "fused_sum"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    # fuse_opt_level=-1 takes the PassContext's opt_level
    with tvm.transform.PassContext(opt_level=0):
        assert len(_groups(transform.FuseOps()(mod))) == 5
    with tvm.transform.PassContext(opt_level=1):
        assert _groups(transform.FuseOps()(mod)) == ["fused_nn_relu_add_exp_multiply_sum"]


def test_elementwise_chain_and_diamond():
    x = relay.var("x", shape=(2, 7))
    e = relay.exp(x)
    y = relay.sqrt(relay.abs(e)) + relay.log(e + relay.const(1.5))  # diamond on e
    y = relay.nn.relu(y)
    mod = _mod(y)
    out = _fuse(mod)
    assert _groups(out) == ["fused_exp_abs_sqrt_add_log_add_nn_relu"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    # a producer used twice is never duplicated
    assert sum(relay.op.get("exp") is getattr(n, "op", None) for n in _all_nodes(out)) == 1


def _all_nodes(mod):
    nodes = []
    relay.post_order_visit(mod["main"], nodes.append)
    return nodes


def test_diamond_through_conv_not_fused():
    """relu feeds a conv and a sigmoid that join at an add: relu's post-dominator (the add) is
    reached through a conv, so relu stays alone; the parallel sigmoid joins the conv's group."""
    x = relay.var("x", shape=(1, 4, 5, 5))
    w = relay.var("w", shape=(4, 4, 3, 3))
    r = relay.nn.relu(x)
    y = relay.add(relay.nn.conv2d(r, w, padding=(1, 1)), relay.sigmoid(r))
    mod = _mod(y)
    out = _fuse(mod)
    assert sorted(_groups(out)) == ["fused_nn_conv2d_sigmoid_add", "fused_nn_relu"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_shared_producer_with_external_use():
    """A value that is also an output of main is a group root: nothing downstream absorbs it."""
    x = relay.var("x", shape=(4, 3))
    e = relay.exp(x)
    mod = _mod(relay.Tuple([e, relay.nn.relu(e)]))
    out = _fuse(mod)
    assert _groups(out) == ["fused_exp", "fused_nn_relu"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_reduction_fuses_elementwise_inputs_not_outputs():
    x = relay.var("x", shape=(3, 11))
    s = relay.sum(relay.exp(x * relay.const(0.5)), axis=[1], keepdims=True)
    mod = _mod(relay.sqrt(s))
    out = _fuse(mod)
    assert _groups(out) == ["fused_multiply_exp_sum", "fused_sqrt"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    # TVM's rule: an injective (non-broadcast) op does not fuse into a reduction
    mod2 = _mod(relay.max(relay.transpose(x, (1, 0)), axis=[0]))
    assert _groups(_fuse(mod2)) == ["fused_transpose", "fused_max"]


def test_softmax_chain():
    x = relay.var("x", shape=(2, 3, 13))
    m = relay.max(x, axis=[-1], keepdims=True)
    e = relay.exp(x - m)
    y = e / relay.sum(e, axis=[-1], keepdims=True)
    mod = _mod(y)
    out = _fuse(mod)
    # exp's post-dominator (the divide) is reached through the sum: no fusion past a reduction
    assert _groups(out) == ["fused_max", "fused_subtract_exp", "fused_sum", "fused_divide"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_layer_norm_chain():
    x = relay.var("x", shape=(1, 5, 16))
    g, b = relay.var("g", shape=(16,)), relay.var("b", shape=(16,))
    mu = relay.mean(x, axis=[-1], keepdims=True)
    d = x - mu
    var = relay.mean(d * d, axis=[-1], keepdims=True)
    y = d * relay.rsqrt(var + relay.const(1e-5)) * g + b
    mod = _mod(y, [x, g, b])
    out = _fuse(mod)
    # d = x - mean is used by the variance and the output: its post-dominator is reached
    # through a reduction, so it stays alone; d * d fuses into the variance's mean
    assert _groups(out) == ["fused_mean", "fused_subtract", "fused_multiply_mean",
                            "fused_add_rsqrt_multiply_multiply_add"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    # the opaque nn.layer_norm op is a group of its own
    mod2 = _mod(relay.nn.relu(relay.nn.layer_norm(x, g, b)), [x, g, b])
    assert _groups(_fuse(mod2)) == ["fused_nn_layer_norm", "fused_nn_relu"]


def test_opaque_boundaries():
    x = relay.var("x", shape=(2, 16))
    g, b = relay.var("g", shape=(16,)), relay.var("b", shape=(16,))
    y = relay.nn.relu(relay.nn.layer_norm(relay.exp(x), g, b))
    mod = _mod(y, [x, g, b])
    out = _fuse(mod)
    assert _groups(out) == ["fused_exp", "fused_nn_layer_norm", "fused_nn_relu"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_takes_its_elementwise_producers(op):
    """softmax is a row reduction (COMM_REDUCE): the scores' scale and broadcast mask add fuse
    into it (read inside its row passes, not written out first); an injective producer
    (transpose) and what follows it (relu) stay apart."""
    x = relay.var("x", shape=(2, 3, 9))
    mask = relay.var("mask", shape=(2, 1, 9))
    sm = getattr(relay.nn, op)
    y = relay.nn.relu(sm(relay.add(relay.multiply(x, relay.const(0.125)), mask)))
    mod = _mod(y, [x, mask])
    out = _fuse(mod)
    assert _groups(out) == [f"fused_multiply_add_nn_{op}", "fused_nn_relu"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    mod2 = _mod(sm(relay.transpose(x, (0, 2, 1))), [x])
    assert _groups(_fuse(mod2)) == ["fused_transpose", f"fused_nn_{op}"]


def test_two_anchors_never_share_a_group():
    x = relay.var("x", shape=(4, 8))
    w1, w2 = relay.var("w1", shape=(6, 8)), relay.var("w2", shape=(5, 6))
    y = relay.nn.dense(relay.nn.relu(relay.nn.dense(x, w1)), w2)
    mod = _mod(y)
    out = _fuse(mod)
    assert _groups(out) == ["fused_nn_dense_nn_relu", "fused_nn_dense"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_anchor_does_not_absorb_injective():
    """conv2d fuses elementwise/broadcast followers only; a reshape after it starts a group."""
    x = relay.var("x", shape=(1, 2, 4, 4))
    w = relay.var("w", shape=(3, 2, 1, 1))
    y = relay.exp(relay.reshape(relay.nn.relu(relay.nn.conv2d(x, w)), (1, 48)))
    mod = _mod(y)
    out = _fuse(mod)
    assert _groups(out) == ["fused_nn_conv2d_nn_relu", "fused_reshape_exp"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def _group_ops(mod):
    """The operator names inside each primitive function called in main, in post order."""
    groups = []

    def f(e):
        if isinstance(e, relay.Call) and isinstance(e.op, relay.Function):
            names = set()

            def g(x):
                if isinstance(x, relay.Call) and hasattr(x.op, "name"):
                    names.add(x.op.name)

            relay.post_order_visit(e.op.body, g)
            groups.append(names)

    relay.post_order_visit(mod["main"].body, f)
    return groups


def test_attention_takes_its_injective_producers():
    """nn.attention (TFuseInjectiveInputs) takes the head splits of Q/K/V, a scale and a cast
    into its group; a view with another use, a dense (anchor) and what follows the attention
    (the head merge) stay apart."""
    t, h, d = 5, 3, 4
    x = relay.var("x", shape=(t, h * d))
    w = relay.var("w", shape=(h * d, h * d))

    def heads(y):
        return relay.reshape(relay.transpose(relay.reshape(y, (t, h, d)), (1, 0, 2)), (h, t, d))

    q = heads(relay.multiply(x, relay.const(0.5)))
    kv = heads(relay.nn.dense(x, w))
    v = heads(relay.cast(relay.cast(x, "float64"), "float32"))
    att = relay.op.nn_attention.attention(q, kv, v, scale=0.3, heads=h)
    y = relay.reshape(relay.transpose(att, (1, 0, 2)), (t, h * d))
    mod = _mod(y, [x, w])
    out = _fuse(mod)
    names = _groups(out)
    assert names[0] == "fused_nn_dense" and names[-1] == "fused_transpose_reshape", names
    ops = _group_ops(out)
    assert len(ops) == 3 and "nn.attention" in ops[1], ops
    assert {"multiply", "cast", "transpose", "reshape"} <= ops[1], ops
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    # the same view as K and as an output: computed once, in its own group
    shared = heads(x)
    att2 = relay.op.nn_attention.attention(q, shared, v, scale=0.3, heads=h)
    mod2 = _mod(relay.Tuple([att2, shared]), [x])
    ops2 = _group_ops(_fuse(mod2))
    assert {"reshape", "transpose"} in ops2, ops2


# --------------------------------------------------------------------------- tuples


def test_concatenate_with_tuple_input():
    x = relay.var("x", shape=(2, 3))
    y = relay.var("y", shape=(2, 5))
    c = relay.concatenate([relay.nn.relu(x), relay.exp(y)], axis=1)
    mod = _mod(relay.tanh(c))
    out = _fuse(mod)
    assert _groups(out) == ["fused_nn_relu_exp_concatenate_tanh"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    # level 0: the tuple still lands inside the concatenate's function, fields as params
    out0 = _fuse(mod, level=0)
    assert _groups(out0) == ["fused_nn_relu", "fused_exp", "fused_concatenate", "fused_tanh"]
    cat = [n for n in _all_nodes(out0) if isinstance(n, relay.Function)
           and n.attrs.get("Name") == "fused_concatenate"][0]
    assert len(cat.params) == 2 and isinstance(cat.body.args[0], relay.Tuple)
    _assert_same_values(mod, out0, random_inputs(mod["main"]))


def test_concatenate_of_variables_and_stack():
    x, y = relay.var("x", shape=(3, 2)), relay.var("y", shape=(3, 2))
    t = relay.Tuple([x, y])
    mod = _mod(relay.Tuple([relay.concatenate(t, axis=0), relay.stack(t, axis=1)]))
    out = _fuse(mod)
    assert _groups(out) == ["fused_concatenate", "fused_stack"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_split_with_tuple_get_item():
    x = relay.var("x", shape=(2, 9))
    s = relay.split(x, 3, axis=1)
    y = relay.nn.relu(s[0]) + relay.exp(s[2])
    mod = _mod(y)
    out = _fuse(mod)
    assert _groups(out) == ["fused_split_nn_relu_exp_add"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    # level 0: split returns its tuple, the items are taken outside
    out0 = _fuse(mod, level=0)
    assert _groups(out0) == ["fused_split", "fused_nn_relu", "fused_exp", "fused_add"]
    items = [n for n in _all_nodes(out0) if isinstance(n, relay.TupleGetItem)]
    assert sorted(i.index for i in items) == [0, 2]
    _assert_same_values(mod, out0, random_inputs(mod["main"]))


def test_split_outputs_to_separate_anchors():
    x = relay.var("x", shape=(4, 6))
    w1, w2 = relay.var("w1", shape=(5, 3)), relay.var("w2", shape=(2, 3))
    s = relay.split(relay.exp(x), 2, axis=1)
    mod = _mod(relay.Tuple([relay.nn.dense(s[0], w1), relay.nn.dense(s[1], w2)]))
    out = _fuse(mod)
    assert _groups(out) == ["fused_exp_split", "fused_nn_dense", "fused_nn_dense"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_split_item_as_output():
    """A group ending in a TupleGetItem of its own split returns the split's tuple instead."""
    x = relay.var("x", shape=(6, 4))
    s = relay.split(relay.nn.relu(x), 2, axis=0)
    mod = _mod(s[1])
    out = _fuse(mod)
    assert _groups(out) == ["fused_nn_relu_split"]
    assert isinstance(out["main"].body, relay.TupleGetItem)
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_tuple_typed_parameter():
    t = relay.var("t", relay.TupleType([relay.TensorType((2, 3)), relay.TensorType((2, 4))]))
    y = relay.concatenate(t, axis=1)
    mod = _mod(relay.Tuple([y, relay.nn.relu(relay.TupleGetItem(t, 0))]), [t])
    out = _fuse(mod)
    assert _groups(out) == ["fused_concatenate", "fused_nn_relu"]
    a, b = _rand((2, 3), 1), _rand((2, 4), 2)
    want, got = run(mod, {"t": (a, b)}), run(out, {"t": (a, b)})
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w)


# --------------------------------------------------------------------------- constants, limits


def test_constants_outside_scalars_inside():
    x = relay.var("x", shape=(2, 3))
    k = relay.const(_rand((2, 3), 5))
    mod = _mod(relay.nn.relu(x * k + relay.const(0.25)))
    out = _fuse(mod)
    call = out["main"].body
    assert isinstance(call.args[1], relay.Constant) and call.args[1].data.shape == (2, 3)
    assert _groups(out) == ["fused_multiply_add_nn_relu"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_max_depth_config():
    x = relay.var("x", shape=(3,))
    y = x
    for _ in range(10):
        y = relay.nn.relu(y + relay.const(0.1))
    mod = _mod(y)
    assert len(_groups(_fuse(mod))) == 1
    out = _fuse(mod, **{"relay.FuseOps.max_depth": 5})
    assert len(_groups(out)) > 1
    for f in (n for n in _all_nodes(out) if isinstance(n, relay.Function) and n.attrs.get("Name")):
        assert len([n for n in _all_nodes(IRModule.from_expr(f)) if isinstance(n, relay.Call)]) <= 5
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    with pytest.raises(ValueError, match="max_depth must be a positive int"):
        _fuse(mod, **{"relay.FuseOps.max_depth": 0})


def test_idempotent_and_pass_registration():
    x = relay.var("x", shape=(1, 3, 4, 4))
    w = relay.var("w", shape=(2, 3, 1, 1))
    mod = _mod(relay.nn.relu(relay.nn.conv2d(x, w)))
    once = _fuse(mod)
    twice = _fuse(once)
    assert tvm.ir.structural_equal(once["main"], twice["main"])
    p = transform.FuseOps()
    assert p.info.name == "FuseOps" and p.opt_level == 0
    with tvm.transform.PassContext(opt_level=0):
        seq = transform.Sequential([transform.FuseOps()])(mod)
    assert _groups(seq) == ["fused_nn_conv2d", "fused_nn_relu"]
    with pytest.raises(TypeError, match="fuse_opt_level must be an int"):
        transform.FuseOps("2")


# --------------------------------------------------------------------------- odd inputs


def test_symbolic_shape():
    n = te.var("n")
    x = relay.var("x", shape=(n, 4))
    mod = _mod(relay.nn.relu(relay.exp(x) + relay.const(1.0)))
    out = _fuse(mod)
    assert _groups(out) == ["fused_exp_add_nn_relu"]
    assert "(n, 4)" in str(out)
    _assert_same_values(mod, out, {"x": _rand((3, 4))})


def test_let_inlined_if_refused():
    x = relay.var("x", shape=(2, 3))
    v = relay.var("v", shape=(2, 3))
    body = relay.Let(v, relay.exp(x), relay.nn.relu(v) + v)
    mod = _mod(body, [x])
    out = _fuse(mod)
    assert _groups(out) == ["fused_exp_nn_relu_add"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))
    c = relay.var("c", shape=(), dtype="bool")
    mod = _mod(relay.If(c, relay.exp(x), relay.nn.relu(x)), [c, x])
    with pytest.raises(NotImplementedError, match="If inside the function body"):
        transform.FuseOps(2)(mod)


def test_item_of_literal_tuple():
    x = relay.var("x", shape=(3,))
    t = relay.Tuple([relay.exp(x), relay.nn.relu(x)])
    mod = _mod(relay.sqrt(relay.TupleGetItem(t, 1)) + relay.TupleGetItem(t, 0))
    out = _fuse(mod)
    assert _groups(out) == ["fused_nn_relu_sqrt_exp_add"]
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_long_chain():
    x = relay.var("x", shape=(4,))
    y = x
    for i in range(1500):
        y = relay.nn.relu(y) if i % 2 else y + relay.const(0.001)
    mod = _mod(y)
    out = _fuse(mod)
    # 1500 ops + 750 scalar constants: groups of at most 256 nodes (constants count, as in TVM)
    assert len(_groups(out)) == 9
    for f in (n for n in _all_nodes(out) if isinstance(n, relay.Function) and n.attrs.get("Name")):
        assert len([n for n in _all_nodes(IRModule.from_expr(f))
                    if isinstance(n, (relay.Call, relay.Constant))]) <= 256
    _assert_same_values(mod, out, random_inputs(mod["main"]))


def test_function_typed_parameter_refused():
    f = relay.var("f", relay.FuncType([relay.TensorType((2,))], relay.TensorType((2,))))
    x = relay.var("x", shape=(2,))
    mod = _mod(relay.nn.relu(relay.Call(f, [x])), [f, x])
    with pytest.raises(NotImplementedError, match="calling a Var of type fn"):
        transform.FuseOps(2)(mod)


# --------------------------------------------------------------------------- workloads


def _prepare(mod, params):
    bound = IRModule.from_expr(bind_params_by_name(mod["main"], params))
    with tvm.transform.PassContext(opt_level=3):
        return transform.Sequential([
            transform.SimplifyInference(), transform.FoldConstant(), transform.FoldScaleAxis(),
            transform.FoldConstant(),
        ])(bound)  # fmt: skip


def _count(names):
    out = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return out


def test_resnet18_groups_and_values():
    mod, params = testing.resnet.get_workload(18, image_shape=(3, 32, 32), num_classes=10)
    opt = _prepare(mod, params)
    out = _fuse(opt, level=3)
    # 20 convs, batch norms folded into them: stem + first conv of each unit: conv+bias+relu;
    # second conv of each unit: conv+bias+residual add+relu; 3 projection shortcuts: conv+bias
    assert _count(_groups(out)) == {
        "fused_nn_conv2d_add_nn_relu": 9, "fused_nn_conv2d_add_add_nn_relu": 8,
        "fused_nn_conv2d_add": 3, "fused_nn_max_pool2d": 1, "fused_nn_global_avg_pool2d": 1,
        "fused_nn_batch_flatten": 1, "fused_nn_dense_nn_bias_add": 1}
    n_ops = sum(isinstance(n, relay.Call) and isinstance(n.op, relay.op.Op)
                for n in _all_nodes(opt))
    assert len(_groups(_fuse(opt, level=0))) == n_ops == 70
    _assert_same_values(opt, out, {"data": _rand((1, 3, 32, 32), 7)})


def test_mobilenet_v2_groups_and_values():
    mod, params = testing.mobilenet_v2.get_workload(image_shape=(3, 32, 32), num_classes=10,
                                                    width_mult=0.5)
    opt = _prepare(mod, params)
    out = _fuse(opt, level=3)
    # conv(+folded bn)+relu6 (clip); projection conv+bias, with the residual add where the
    # block has one
    assert _count(_groups(out)) == {
        "fused_nn_conv2d_add_clip": 35, "fused_nn_conv2d_add_add": 10, "fused_nn_conv2d_add": 7,
        "fused_nn_global_avg_pool2d": 1, "fused_nn_batch_flatten": 1,
        "fused_nn_dense_nn_bias_add": 1}
    _assert_same_values(opt, out, {"data": _rand((1, 3, 32, 32), 8)})


def test_bert_groups_and_values():
    mod, params = testing.bert.get_workload(num_layers=2, hidden=32, heads=2, seq_len=8,
                                            vocab_size=50)
    opt = _prepare(mod, params)
    out = _fuse(opt, level=3)
    # per layer: q/k/v/ffn input reshapes of the (opaque) layer norm's output stay alone (no
    # CSE ran), dense+bias (anchor + broadcast), head split reshape/transpose chains, scores
    # batch_matmul*scale, the softmax, residual reshape+add, reshape+gelu+reshape
    per_layer = {"fused_nn_dense_nn_bias_add": 6, "fused_reshape": 4,
                 "fused_reshape_reshape_transpose_reshape": 3, "fused_nn_layer_norm": 2,
                 "fused_reshape_add": 2, "fused_nn_batch_matmul_multiply": 1,
                 "fused_nn_softmax": 1, "fused_nn_batch_matmul": 1,
                 "fused_reshape_transpose_reshape_reshape": 1, "fused_reshape_nn_gelu_reshape": 1}
    want = {k: 2 * v for k, v in per_layer.items()}
    want["fused_nn_layer_norm"] += 1  # embedding layer norm
    want["fused_take_add"] = 1
    assert _count(_groups(out)) == want
    ids = np.random.default_rng(4).integers(0, 50, (1, 8)).astype("int64")
    _assert_same_values(opt, out, {"input_ids": ids})


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "bert"])
def test_full_size_group_counts(name):
    """Group counts of the full-size workloads (structure only; no evaluation)."""
    mod, params = {
        "resnet18": lambda: testing.resnet.get_workload(18),
        "mobilenet_v2": lambda: testing.mobilenet_v2.get_workload(),
        "bert": lambda: testing.bert.get_workload(),
    }[name]()
    out = _fuse(_prepare(mod, params), level=3)
    assert len(_groups(out)) == {"resnet18": 24, "mobilenet_v2": 55, "bert": 90}[name]


# --------------------------------------------------------------------------- random graphs


def _grow_more(draw, nodes, rng):
    """One more node: the shared random-graph step, or a dense (an anchor with a constant
    weight), a split with its items, or a scalar-constant arithmetic op."""
    kind = draw(st.sampled_from(["shared", "shared", "dense", "split", "scalar"]))
    x = draw(st.sampled_from(nodes))
    shape = tuple(int(d) for d in x.checked_type.shape)
    if kind == "dense" and len(shape) == 2:
        w = relay.const(rng.uniform(-1, 1, (draw(st.integers(1, 4)), shape[1])).astype("float32"))
        y = relay.nn.dense(x, w)
    elif kind == "split" and shape and shape[-1] >= 2:
        parts = relay.split(x, 2 if shape[-1] % 2 == 0 else [1], axis=-1)
        if draw(st.booleans()):
            y = relay.concatenate(relay.Tuple([parts[1], parts[0]]), axis=-1)
        else:
            y = parts[1]
    elif kind == "scalar":
        y = relay.multiply(x, relay.const(0.5)) + relay.const(0.25)
    else:
        _grow(draw, nodes)
        return
    transform.infer_type(y)
    nodes.append(y)


@st.composite
def _programs(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    shapes = draw(st.lists(st.lists(st.integers(1, 5), min_size=0, max_size=3),
                           min_size=1, max_size=3))
    inputs = [relay.var(f"in{i}", shape=tuple(s)) for i, s in enumerate(shapes)]
    nodes = list(inputs)
    for _ in range(draw(st.integers(1, 14))):
        _grow_more(draw, nodes, rng)
    inner = nodes[len(inputs):]
    outs = [inner[-1]] + [n for n in inner[:-1] if draw(st.integers(0, 3)) == 0]
    return inputs, relay.Tuple(outs) if len(outs) > 1 else outs[0]


@settings(max_examples=60, deadline=None)
@given(_programs(), st.sampled_from([0, 1, 3]), st.integers(0, 2**31 - 1))
def test_random_graphs_fuse_to_equal_programs(prog, level, seed):
    """Random graphs: the fused form holds, every operator call is kept exactly once (nothing
    duplicated, nothing lost), and the interpreter computes the same outputs."""
    inputs, out = prog
    mod = _mod(out, inputs)
    fused = _fuse(mod, level=level)

    def n_ops(m):
        return sum(isinstance(n, relay.Call) and isinstance(n.op, relay.op.Op)
                   for n in _all_nodes(m))

    assert n_ops(fused) == n_ops(mod)
    if level == 0:
        assert len(_groups(fused)) == n_ops(mod)
    with np.errstate(over="ignore", invalid="ignore"):
        _assert_same_values(mod, fused, random_inputs(mod["main"], seed))
