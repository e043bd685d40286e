"""Pass infrastructure: Sequential gating by PassContext opt_level / required / disabled."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay import transform


def _mod():
    x = relay.var("x", shape=(2, 3))
    y = relay.add(relay.add(relay.const(np.ones((2, 3), "float32")),
                            relay.const(np.ones((2, 3), "float32"))), x)
    return tvm.relay.IRModule.from_expr(relay.Function([x], y))


def _n_adds(mod):
    return str(mod["main"]).count("add(")


def test_infer_type_is_a_pass_and_importable():
    mod = transform.InferType()(_mod())
    assert isinstance(transform.InferType(), transform.Pass)
    assert mod["main"].body.checked_type.shape == (2, 3)
    with pytest.raises(TypeError, match="IRModule"):
        transform.InferType()(relay.var("x", shape=(1,)))


def test_sequential_respects_opt_level():
    seq = transform.Sequential([transform.FoldConstant()])  # FoldConstant is opt_level 2
    with tvm.transform.PassContext(opt_level=1):
        assert _n_adds(seq(_mod())) == 2
    with tvm.transform.PassContext(opt_level=2):
        assert _n_adds(seq(_mod())) == 1


def test_required_and_disabled_pass():
    seq = transform.Sequential([transform.FoldConstant()])
    with tvm.transform.PassContext(opt_level=0, required_pass=["FoldConstant"]):
        assert _n_adds(seq(_mod())) == 1
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["FoldConstant"]):
        assert _n_adds(seq(_mod())) == 2


def test_direct_call_always_runs_and_input_unchanged():
    mod = _mod()
    out = transform.FoldConstant()(mod)
    assert _n_adds(out) == 1 and _n_adds(mod) == 2


def test_module_and_function_pass_decorators():
    calls = []

    @transform.module_pass(opt_level=1, name="Spy")
    def spy(mod, ctx):
        calls.append(ctx.opt_level)
        return mod

    @transform.function_pass(opt_level=0)
    def double(func, mod, ctx):
        return relay.Function(func.params, relay.multiply(func.body, relay.const(2.0)))

    assert spy.name == "Spy" and spy.info.opt_level == 1
    with tvm.transform.PassContext(opt_level=0):
        transform.Sequential([spy])(_mod())
    assert calls == []
    with tvm.transform.PassContext(opt_level=1):
        out = transform.Sequential([spy, double])(_mod())
    assert calls == [1]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype("float32")
    got = relay.create_executor("debug", out).evaluate()(x)
    np.testing.assert_allclose(got, 2 * (x + 2), rtol=1e-6)


def test_bad_inputs():
    with pytest.raises(TypeError, match="Pass"):
        transform.Sequential([lambda m: m])
    with pytest.raises(TypeError, match="IRModule"):
        transform.FoldConstant()(relay.var("x", shape=(1,)))


def test_required_passes_of_a_pass_run_first():
    seen = []

    @transform.module_pass(opt_level=0, name="NeedsFold", required=["FoldConstant"])
    def needs_fold(mod, ctx):
        seen.append(_n_adds(mod))
        return mod

    transform.Sequential([needs_fold])(_mod())
    assert seen == [1]
    bad = transform.module_pass(lambda m, c: m, opt_level=0, name="Bad", required=["NoSuchPass"])
    with pytest.raises(ValueError, match="NoSuchPass"):
        transform.Sequential([bad])(_mod())
