"""EliminateCommonSubexpr and DeadCodeElimination."""

import numpy as np
from _pass_util import count_ops, random_inputs, run

from tvmpy import relay
from tvmpy.relay import transform


def test_cse_merges_equal_chains():
    x = relay.var("x", shape=(2, 3, 6, 6))
    w = relay.var("w", shape=(4, 3, 3, 3))

    def branch():
        return relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))

    y = relay.add(branch(), branch())
    y = relay.add(relay.nn.leaky_relu(y, alpha=0.1), relay.nn.leaky_relu(y, alpha=0.2))
    z = relay.add(y, relay.nn.conv2d(x, w, padding=(1, 1), dilation=(1, 1), strides=1))
    z = relay.Tuple([z, relay.nn.max_pool2d(z, pool_size=2), relay.nn.max_pool2d(z, pool_size=2)])
    mod = relay.IRModule.from_expr(relay.Function([x, w], z))
    out = transform.EliminateCommonSubexpr()(mod)
    body = out["main"].body
    assert count_ops(body, "nn.conv2d") == 1 and count_ops(body, "nn.relu") == 1
    assert count_ops(body, "nn.leaky_relu") == 2  # other attrs: not merged
    assert count_ops(body, "nn.max_pool2d") == 1 and count_ops(mod["main"].body, "nn.conv2d") == 3
    inputs = random_inputs(mod["main"])
    for got, want in zip(run(out, inputs), run(mod, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_cse_fskip():
    x = relay.var("x", shape=(3,))
    y = relay.add(relay.exp(x), relay.exp(x))
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    out = transform.EliminateCommonSubexpr(fskip=lambda c: c.op.name == "exp")(mod)
    assert count_ops(out["main"].body, "exp") == 2
    assert count_ops(transform.EliminateCommonSubexpr()(mod)["main"].body, "exp") == 1


def test_dce_removes_unused_lets_transitively():
    x = relay.var("x", shape=(4,))
    a, b, c = relay.var("a"), relay.var("b"), relay.var("c")
    # a is used only by b, which is unused: both go; c is used and stays
    body = relay.Let(a, relay.exp(x), relay.Let(b, relay.add(a, x), relay.Let(
        c, relay.nn.relu(x), relay.multiply(c, c))))
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    out = transform.DeadCodeElimination()(mod)
    text = out["main"].astext(show_types=False)
    assert "exp(" not in text and "add(" not in text and text.count("let ") == 1, text
    inputs = random_inputs(mod["main"])
    np.testing.assert_allclose(run(out, inputs), run(mod, inputs), rtol=1e-6)


def test_dce_keeps_used_and_params():
    x, y = relay.var("x", shape=(4,)), relay.var("y", shape=(4,))
    v = relay.var("v")
    f = relay.Function([x, y], relay.Let(v, relay.exp(x), relay.add(v, v)))
    out = transform.DeadCodeElimination()(relay.IRModule.from_expr(f))
    assert out["main"].body is f.body and len(out["main"].params) == 2
