"""The layout rules (``relay/transform/layout_rules.py``, TVM's FInferCorrectLayout): one rule
per operator, registered once, read by every layout pass. A rule registered for an operator
that had none makes ConvertLayout (permuted layouts), AlterOpLayout (blocked NCHW{c}c) and
AlterOpLayout's demand analysis follow the layout through it; an operator without a rule gets
its input back in its original layout (the answer stays right), checked against numpy."""

import numpy as np
import pytest
from _pass_util import count_ops, run

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay.transform import layout_demand
from tvmpy.relay.transform.layout_rules import (
    RULE_KEY,
    Propagation,
    layout_rule,
    register_layout_rule,
)
from tvmpy.topi.testing.nn_ref import conv2d_nchw_python

RNG = np.random.default_rng(11)
CIN, COUT, HW = 3, 16, 7  # 16 output channels: the x86 hook blocks them


def _softmax_np(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _net(axis):
    """conv2d -> softmax(axis) -> relu, the weight bound; with the numpy reference."""
    x_np = RNG.uniform(-1, 1, (2, CIN, HW, HW)).astype("float32")
    w_np = RNG.uniform(-1, 1, (COUT, CIN, 3, 3)).astype("float32")
    x = relay.var("x", shape=x_np.shape)
    y = relay.nn.conv2d(x, relay.const(w_np), padding=(1, 1))
    y = relay.nn.relu(relay.nn.softmax(y, axis=axis))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], y)))
    ref = np.maximum(_softmax_np(conv2d_nchw_python(x_np, w_np, 1, 1), axis), 0)
    return mod, x_np, ref


def _softmax_rule(call, ctx):
    """The axis follows its letter; a blocked axis cannot be normalised over alone."""
    data = call.args[0]
    lay = ctx.layout(data)
    if lay is None:
        return None
    letter = lay.orig[call.attrs.axis % len(lay.orig)]
    if lay.block is not None and letter == "C":
        return None
    axis = lay.cur.index(letter)
    return Propagation(lay, lambda: relay.Call(call.op, [ctx.get(data, lay)],
                                               {**call.attrs.values, "axis": axis}))


@pytest.fixture
def softmax_rule():
    """``nn.softmax`` given a layout rule for the test, the registry restored after."""
    attrs = relay.op.get("nn.softmax").entry.attrs
    saved = dict(attrs)
    assert RULE_KEY not in attrs  # the test is about an op that had no rule
    register_layout_rule("nn.softmax", _softmax_rule)
    yield
    attrs.clear()
    attrs.update(saved)


def _convert(mod):
    with tvm.transform.PassContext(opt_level=3):
        return relay.transform.ConvertLayout({"nn.conv2d": ["NHWC", "default"]})(mod)


def _alter(mod):
    with tvm.transform.PassContext(opt_level=3, config={"relay.x86.winograd": False}):
        with tvm.target.Target("llvm"):
            return relay.transform.AlterOpLayout()(mod)


def _softmax_input(mod):
    """The call that feeds the softmax, and the softmax's axis."""
    found = []
    relay.post_order_visit(mod["main"].body, lambda e: found.append(e) if isinstance(
        e, relay.Call) and getattr(e.op, "name", None) == "nn.softmax" else None)
    (sm,) = found
    return sm.args[0], sm.attrs.axis


def _check(mod, x_np, ref):
    out = run(mod, {"x": x_np})
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_one_rule_serves_convert_and_alter(softmax_rule):
    mod, x_np, ref = _net(axis=3)  # over W
    conv = _convert(mod)
    arg, axis = _softmax_input(conv)
    assert arg.op.name == "nn.conv2d" and arg.attrs.data_layout == "NHWC"
    assert axis == 2  # W in NHWC
    assert count_ops(conv["main"], "layout_transform") == 2  # in, and out after the relu
    _check(conv, x_np, ref)

    alt = _alter(mod)
    arg, axis = _softmax_input(alt)
    assert arg.op.name == "nn.contrib_conv2d_NCHWc"
    assert axis == 3  # W in NCHW{c}c
    _check(alt, x_np, ref)


def _conv_softmax_conv():
    """conv2d -> softmax over W -> conv2d: the second convolution reads its data blocked."""
    x = relay.var("x", shape=(1, CIN, HW, HW))
    c1 = relay.nn.conv2d(x, relay.const(RNG.uniform(-1, 1, (COUT, CIN, 3, 3)).astype("float32")),
                         padding=(1, 1))
    sm = relay.nn.softmax(c1, axis=3)
    c2 = relay.nn.conv2d(sm, relay.const(RNG.uniform(-1, 1, (COUT, COUT, 1, 1))
                                         .astype("float32")))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], c2)))
    c2 = mod["main"].body
    return c2, c2.args[0], c2.args[0].args[0]


def _wanted(body):
    with tvm.transform.PassContext(config={"relay.x86.winograd": False}):
        with tvm.target.Target("llvm"):
            return layout_demand.wanted_blocked(body)


def test_demand_asks_the_same_rule(softmax_rule):
    body, sm, c1 = _conv_softmax_conv()
    assert layout_rule(sm) is _softmax_rule
    assert layout_rule(c1) is None  # nn.conv2d: entered by the hooks, no rule
    wanted = _wanted(body)
    assert id(sm) in wanted and id(c1) in wanted  # through the softmax's rule


def test_demand_stops_at_an_op_without_rule():
    body, sm, c1 = _conv_softmax_conv()
    wanted = _wanted(body)
    assert id(sm) in wanted and id(c1) not in wanted


@pytest.mark.parametrize("axis", [1, 3])
def test_op_without_rule_reads_the_original_layout(axis):
    mod, x_np, ref = _net(axis=axis)
    conv = _convert(mod)
    arg, got = _softmax_input(conv)
    assert got == axis
    assert arg.op.name == "layout_transform" and (arg.attrs.src_layout,
                                                  arg.attrs.dst_layout) == ("NHWC", "NCHW")
    _check(conv, x_np, ref)

    alt = _alter(mod)
    arg, got = _softmax_input(alt)
    assert got == axis
    assert arg.op.name == "layout_transform" and arg.attrs.dst_layout == "NCHW"
    assert arg.attrs.src_layout.startswith("NCHW") and arg.attrs.src_layout.endswith("c")
    _check(alt, x_np, ref)


def test_rule_refusing_a_layout_falls_back(softmax_rule):
    """Over the channels: the blocked layout cannot normalise over C alone, so the rule says
    no there (a transform back to NCHW), while the permuted NHWC renames the axis."""
    mod, x_np, ref = _net(axis=1)
    conv = _convert(mod)
    arg, axis = _softmax_input(conv)
    assert arg.op.name == "nn.conv2d" and axis == 3
    _check(conv, x_np, ref)
    alt = _alter(mod)
    arg, axis = _softmax_input(alt)
    assert arg.op.name == "layout_transform" and axis == 1
    _check(alt, x_np, ref)
