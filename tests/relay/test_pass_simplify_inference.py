"""SimplifyInference: batch_norm -> scale/shift arithmetic, dropout -> identity, layer_norm kept."""

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

from tvmpy import relay
from tvmpy.relay import transform


def _bn_module(shape, axis, center=True, scale=True):
    x = relay.var("x", shape=shape)
    c = shape[axis]
    g, b, m, v = (relay.var(n, shape=(c,)) for n in ("g", "b", "m", "v"))
    y = relay.nn.batch_norm(x, g, b, m, v, axis=axis, epsilon=1e-3, center=center, scale=scale)[0]
    y = relay.nn.dropout(relay.nn.relu(y), rate=0.3)
    return relay.IRModule.from_expr(relay.Function([x, g, b, m, v], y))


@pytest.mark.parametrize("shape,axis", [((2, 5, 3, 7), 1), ((3, 4, 5), -1), ((4, 6), 1),
                                        ((1, 3, 1, 2), 1)])
@pytest.mark.parametrize("center,scale", [(True, True), (False, True), (True, False)])
def test_batch_norm_and_dropout(shape, axis, center, scale):
    mod = _bn_module(shape, axis, center, scale)
    out = transform.SimplifyInference()(mod)
    body = out["main"].body
    assert count_ops(body, "nn.batch_norm") == 0 and count_ops(body, "nn.dropout") == 0
    assert count_ops(body, "sqrt") == 1
    text = out["main"].astext(show_types=False)
    assert "nn.batch_norm" not in text and "dropout" not in text and "TupleGetItem" not in text
    assert "sqrt(" in text and text.rstrip("}\n ").splitlines()[-1].strip().startswith("nn.relu(")
    inputs = random_inputs(mod["main"], seed=1)
    inputs["v"] = np.abs(inputs["v"]) + 0.5
    np.testing.assert_allclose(run(out, inputs), run(mod, inputs), rtol=1e-5, atol=1e-6)


def test_layer_norm_kept_and_other_bn_outputs_kept():
    x = relay.var("x", shape=(2, 8))
    g, b = relay.var("g", shape=(8,)), relay.var("b", shape=(8,))
    ln = relay.nn.layer_norm(x, g, b)
    bn = relay.nn.batch_norm(ln, g, b, g, relay.abs(b) + relay.const(1.0))
    y = relay.Tuple([bn[0], bn[1]])
    mod = relay.IRModule.from_expr(relay.Function([x, g, b], y))
    out = transform.SimplifyInference()(mod)
    assert count_ops(out["main"].body, "nn.layer_norm") == 1
    assert count_ops(out["main"].body, "nn.batch_norm") == 1  # its [1] output is still used
    inputs = random_inputs(mod["main"])
    for got, want in zip(run(out, inputs), run(mod, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
