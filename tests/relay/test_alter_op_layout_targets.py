"""AlterOpLayout's target policy lives in per-op, per-target hooks (``FTVMAlterOpLayout`` /
``FTVMLayoutDemand`` forwarding to ``target.generic_func``s): a new target registers its hooks
under its own key, in its own files, and changes the graph only under targets with that key;
a target with no hooks leaves the graph as it is."""

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay import transform
from tvmpy.relay.op.strategy.alter_layout import conv2d_alter_layout, conv2d_layout_demand
from tvmpy.target import Target, generic_func

KEY = "test_dummy_accel"


def test_generic_func_dispatches_on_target_keys():
    @generic_func
    def f(x):
        return ("default", x)

    f.register(["a", "b"], lambda x: ("ab", x))
    f.register("c", lambda x: ("c", x))
    assert f(1) == ("default", 1)  # no current target
    with Target("llvm"):  # keys: cpu
        assert f(1) == ("default", 1)
    with Target("llvm -keys=b,c"):  # the first key with an override wins
        assert f(2) == ("ab", 2)
    with Target("c -keys=c,a"):
        assert f(3) == ("c", 3)
    with pytest.raises(ValueError, match="already registered"):
        f.register("c", lambda x: x)
    f.register("c", lambda x: ("c2", x), override=True)
    with Target("llvm -keys=c"):
        assert f(4) == ("c2", 4)


def test_target_keys():
    assert Target("llvm").keys == ["cpu"] and Target("c").keys == ["cpu"]
    assert Target("interp").keys == ["interp"]
    t = Target("llvm -keys=foo,cpu")
    assert t.keys == ["foo", "cpu"] and Target(str(t)) == t and t != Target("llvm")


@pytest.fixture
def dummy_hooks():
    """The NCHW{2}c convolution of a made-up target with the key ``KEY``: what a new target's
    own file would register (a block no x86 rule picks for these 8 and 12 channels)."""

    def demand(call):
        return ["NCHW2c", "OIHW2i2o"] if call.attrs.groups == 1 else None

    def alter(call, inputs):
        if call.attrs.groups != 1:
            return None
        a = call.attrs
        data, kernel = inputs.get(0, "NCHW2c"), inputs.get(1, "OIHW2i2o", "OIHW")
        return relay.op.registry.make_call("nn.contrib_conv2d_NCHWc", [data, kernel], {
            "strides": a.strides, "padding": a.padding, "dilation": a.dilation, "groups": 1,
            "channels": a.channels, "kernel_size": a.kernel_size, "data_layout": "NCHW2c",
            "kernel_layout": "OIHW2i2o", "out_layout": "NCHW2c"}), "NCHW2c"

    conv2d_alter_layout.register(KEY, alter)
    conv2d_layout_demand.register(KEY, demand)
    yield
    del conv2d_alter_layout.dispatch_dict[KEY], conv2d_layout_demand.dispatch_dict[KEY]


def _model():
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 8, 10, 10))
    w1 = relay.const(rng.uniform(-1, 1, (8, 8, 3, 3)).astype("float32"))
    w2 = relay.const(rng.uniform(-1, 1, (12, 8, 1, 1)).astype("float32"))
    y = relay.nn.conv2d(x, w1, padding=(1, 1))
    y = relay.nn.relu(y)
    y = relay.nn.conv2d(y, w2)
    return relay.IRModule.from_expr(relay.Function([x], y))


def _alter(mod, target):
    with tvm.transform.PassContext(opt_level=3, config={"relay.x86.winograd": False}):
        return transform.AlterOpLayout(target)(transform.InferType()(mod))


def test_new_target_key_changes_the_graph_only_under_that_target(dummy_hooks):
    mod = _model()
    plain = str(transform.InferType()(_model()))
    x86 = _alter(mod, "llvm")
    assert "NCHW16c" in str(x86) or "NCHW8c" in str(x86)  # the x86 policy (key "cpu")
    assert "NCHW2c" not in str(x86)

    dummy = _alter(mod, f"llvm -keys={KEY}")
    text = str(dummy)
    assert count_ops(dummy["main"], "nn.contrib_conv2d_NCHWc") == 2
    assert "NCHW2c" in text and not any(f"NCHW{b}c" in text for b in (4, 8, 16))
    # the relu between the convolutions stays blocked: one transform in, one out
    assert count_ops(dummy["main"], "layout_transform") == 2
    inputs = random_inputs(mod["main"])
    np.testing.assert_allclose(run(dummy, inputs), run(mod, inputs),
                               rtol=1e-5, atol=1e-5)

    # the hooks of the target's own key win over the shared cpu ones; the x86 graph is as it was
    assert str(_alter(mod, f"llvm -keys={KEY},cpu")) == text
    assert str(_alter(mod, "llvm")) == str(x86)
    # a target with no hooks for its keys: unchanged
    assert str(_alter(mod, "interp")) == plain
    assert str(_alter(mod, "llvm -keys=no_such_target")) == plain


def test_new_target_key_builds(dummy_hooks):
    mod = _model()
    inputs = random_inputs(mod["main"])
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=f"llvm -keys={KEY},cpu")
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    g.set_input("x", inputs["x"])
    g.run()
    np.testing.assert_allclose(g.get_output(0).numpy(), run(mod, inputs),
                               rtol=1e-4, atol=1e-4)
