"""TVM's ``relay.testing`` helpers (``run_infer_type``, ``run_opt_pass``, ``create_workload``),
``relay.scalar_type`` and the ``relay.backend.use_auto_scheduler`` PassContext key, as TVM's
test files use them."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.relay.testing
from tvmpy import relay


def test_scalar_type():
    t = relay.scalar_type("int8")
    assert isinstance(t, relay.TensorType) and tuple(t.shape) == () and t.dtype == "int8"
    x = relay.var("x", relay.scalar_type("float32"))
    f = relay.testing.run_infer_type(relay.Function([x], x * x))
    assert str(f.body.checked_type) == str(relay.scalar_type("float32"))


def test_run_infer_type_on_expression_and_function():
    x = relay.var("x", shape=(3, 5))
    y = relay.nn.softmax(x)
    typed = relay.testing.run_infer_type(y)
    assert tuple(int(d) for d in typed.checked_type.shape) == (3, 5)
    f = relay.testing.run_infer_type(relay.Function([x], relay.sum(y, axis=1)))
    assert isinstance(f, relay.Function)
    assert tuple(int(d) for d in f.body.checked_type.shape) == (3,)


def test_run_opt_pass_folds_constants():
    c = relay.add(relay.const(np.full((2,), 2.0, "float32")), relay.const(1.0))
    x = relay.var("x", shape=(2,))
    f = relay.Function([x], x * c)
    out = relay.testing.run_opt_pass(f, relay.transform.FoldConstant())
    assert isinstance(out.body.args[1], relay.Constant)
    np.testing.assert_array_equal(out.body.args[1].data.numpy(), [3.0, 3.0])
    both = relay.testing.run_opt_pass(f, [relay.transform.FoldConstant(),
                                          relay.transform.InferType()])
    assert tvm.ir.structural_equal(both, out)
    with pytest.raises(TypeError, match="relay expression"):
        relay.testing.run_opt_pass(np.ones(2), relay.transform.FoldConstant())


def test_create_workload_builds_and_matches_numpy():
    data = relay.var("data", shape=(2, 7))
    w = relay.var("fc_weight", shape=(5, 7))
    b = relay.var("fc_bias", shape=(5,))
    g = relay.var("bn_gamma", shape=(5,))
    net = relay.Function([data, w, b, g], relay.nn.bias_add(relay.nn.dense(data, w), b) * g)
    mod, params = relay.testing.create_workload(net, seed=3)
    assert sorted(params) == ["bn_gamma", "fc_bias", "fc_weight"]
    wv = params["fc_weight"].numpy()
    assert wv.shape == (5, 7) and wv.std() > 0 and np.abs(wv).max() <= np.sqrt(3 / 6)
    np.testing.assert_array_equal(params["fc_bias"].numpy(), 0)
    np.testing.assert_array_equal(params["bn_gamma"].numpy(), 1)
    lib = relay.build(mod, target="llvm", params=params)
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    x = np.random.default_rng(0).standard_normal((2, 7)).astype("float32")
    m.set_input("data", x)
    m.run()
    tvm.testing.assert_allclose(m.get_output(0).numpy(), x @ wv.T, rtol=1e-5, atol=1e-6)
    _, again = relay.testing.create_workload(net, seed=3)
    np.testing.assert_array_equal(again["fc_weight"].numpy(), wv)

    def ones(name, arr):
        arr[...] = 1.0

    _, custom = relay.testing.create_workload(net, initializer=ones)
    np.testing.assert_array_equal(custom["fc_weight"].numpy(), 1)


def test_use_auto_scheduler_config():
    with tvm.transform.PassContext(opt_level=3,
                                   config={"relay.backend.use_auto_scheduler": False}):
        pass
    # tvmpy has the auto_scheduler now: True is accepted (tests/auto_scheduler/test_relay_integration.py)
    with tvm.transform.PassContext(config={"relay.backend.use_auto_scheduler": True}) as ctx:
        assert ctx.config["relay.backend.use_auto_scheduler"] is True
