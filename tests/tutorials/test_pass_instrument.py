"""Tutorial check: TVM's "How to Use TVM Pass Instrument" (our own code, same steps): time
passes with PassTimingInstrument (in a new context and on the current one through
override_instruments), write an instrument that counts call nodes before and after each pass,
and see what happens when an instrument raises. Numerics against numpy."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.topi.testing.nn_ref import conv2d_nchw_python

RNG = np.random.default_rng(11)
SHAPE = (2, 3, 9, 7)
W = RNG.uniform(-0.5, 0.5, (5, 3, 3, 3)).astype("float32")
GAMMA = RNG.uniform(0.5, 1.5, 5).astype("float32")
BETA = RNG.uniform(-0.5, 0.5, 5).astype("float32")


def model():
    """conv -> multiply by a per-channel scale -> add a per-channel shift -> relu: FoldScaleAxis
    moves the scale into the weight."""
    x = relay.var("x", shape=SHAPE)
    y = relay.nn.conv2d(x, relay.const(W), padding=(1, 1))
    y = relay.multiply(y, relay.const(GAMMA.reshape(5, 1, 1)))
    y = relay.nn.relu(relay.add(y, relay.const(BETA.reshape(5, 1, 1))))
    return tvm.IRModule.from_expr(relay.Function([x], y))


def reference(x):
    conv = conv2d_nchw_python(x, W, 1, 1)
    return np.maximum(conv * GAMMA[:, None, None] + BETA[:, None, None], 0)


def build_and_run(mod, x):
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


def count_calls(mod):
    n = [0]
    for _, f in mod.items():
        if isinstance(f, relay.Function):
            relay.post_order_visit(f, lambda e: n.__setitem__(0, n[0] + 1)
                                   if isinstance(e, relay.Call) else None)
    return n[0]


def test_pass_timing_in_a_new_context():
    timing = tvm.ir.instrument.PassTimingInstrument()
    with tvm.transform.PassContext(opt_level=3, instruments=[timing]):
        mod = relay.transform.InferType()(model())
        mod = relay.transform.FoldScaleAxis()(mod)
        profiles = timing.render()
    names = [ln.split(":")[0].strip() for ln in profiles.splitlines()]
    assert names[0] == "InferType" and "FoldScaleAxis" in names
    assert tvm.ir.instrument.PassTimingInstrument.render() == ""  # cleared on exit
    x = RNG.uniform(-1, 1, SHAPE).astype("float32")
    tvm.testing.assert_allclose(build_and_run(mod, x), reference(x), rtol=1e-4, atol=1e-5)


def test_pass_timing_on_the_current_context():
    timing = tvm.ir.instrument.PassTimingInstrument()
    ctx = tvm.transform.PassContext.current()
    ctx.override_instruments([timing])
    try:
        mod = relay.transform.InferType()(model())
        relay.transform.FoldScaleAxis()(mod)
        profiles = timing.render()
    finally:
        ctx.override_instruments([])
    assert "FoldScaleAxis" in profiles and "InferType" in profiles
    assert ctx.instruments == [] and timing.render() == ""


@tvm.instrument.pass_instrument
class CallCountDiffer:
    """Call nodes before and after each pass: ``diffs[pass] = after - before``."""

    def __init__(self):
        self.diffs = {}
        self._stack = []

    def enter_pass_ctx(self):
        self.diffs = {}
        self._stack = []

    def run_before_pass(self, mod, info):
        self._stack.append((info.name, count_calls(mod)))

    def run_after_pass(self, mod, info):
        name, before = self._stack.pop()
        assert name == info.name
        self.diffs.setdefault(name, []).append(count_calls(mod) - before)


def test_custom_instrument_counts_call_nodes():
    differ = CallCountDiffer()
    x = RNG.uniform(-1, 1, SHAPE).astype("float32")
    with tvm.transform.PassContext(opt_level=3, instruments=[differ]):
        with tvm.target.Target("llvm"):
            mod = relay.transform.FoldScaleAxis()(relay.transform.InferType()(model()))
    # FoldScaleAxis folds the multiply into the weight: one call fewer
    assert differ.diffs["FoldScaleAxis"] == [-1]
    assert differ.diffs["InferType"][0] == 0
    tvm.testing.assert_allclose(build_and_run(mod, x), reference(x), rtol=1e-4, atol=1e-5)
    with tvm.transform.PassContext(opt_level=3, instruments=[differ]):
        lib = relay.build(model(), "llvm")
    assert differ.diffs["FuseOps"][0] > 0  # the calls of the fused functions
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    tvm.testing.assert_allclose(m.get_output(0).numpy(), reference(x), rtol=1e-4, atol=1e-5)


events = []


@tvm.instrument.pass_instrument
class Fine:
    def enter_pass_ctx(self):
        events.append("Fine enter")

    def exit_pass_ctx(self):
        events.append("Fine exit")


@tvm.instrument.pass_instrument
class Throwing:
    def __init__(self, where):
        self.where = where

    def enter_pass_ctx(self):
        events.append("Throwing enter")
        if self.where == "enter":
            raise ValueError("enter_pass_ctx failed")

    def exit_pass_ctx(self):
        events.append("Throwing exit")

    def run_before_pass(self, mod, info):
        if self.where == "before":
            raise ValueError("run_before_pass failed")


def test_exception_in_enter_pass_ctx():
    events.clear()
    with pytest.raises(ValueError, match="enter_pass_ctx failed"):
        with tvm.transform.PassContext(instruments=[Fine(), Throwing("enter")]):
            events.append("body")
    # the instrument entered before the failing one is exited; the body never runs
    assert events == ["Fine enter", "Throwing enter", "Fine exit"]


def test_exception_in_run_before_pass():
    events.clear()
    with pytest.raises(ValueError, match="run_before_pass failed"):
        with tvm.transform.PassContext(instruments=[Fine(), Throwing("before")]):
            relay.transform.InferType()(model())
    # leaving the context (by the exception) still exits every instrument
    assert events == ["Fine enter", "Throwing enter", "Fine exit", "Throwing exit"]
