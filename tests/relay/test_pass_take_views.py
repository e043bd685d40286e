"""CopyViewsIntoTakes: a reshape/transpose chain read only by constant-index takes is copied into
each take (the fused Q/K/V split of nn.MultiheadAttention); the rewrite, the cases left alone,
and built graphs (opt_level 3, the pass in the pipeline) against numpy on awkward shapes."""

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay import transform


def _qkv(t, b, e, heads, parts=3, idx=None, extra_use=False, weight=True):
    """x [t*b, f] (@ W [parts*e, f] when ``weight``) -> [t, b, parts, e] -> transpose to
    [parts, t, b, e] -> take(idx) -> heads split [b*heads, t, e/heads], summed into one output."""
    f = 7
    x = relay.var("x", shape=(t * b, f if weight else parts * e))
    if weight:
        w = relay.var("w", shape=(parts * e, f))
        y = relay.nn.dense(x, w)
        params = [x, w]
    else:
        y = x
        params = [x]
    y = relay.reshape(y, (t, b, parts, e))
    y = relay.reshape(y, (1, t, b, parts, e))
    v = relay.reshape(relay.transpose(y, (3, 1, 2, 0, 4)), (parts, t, b, e))
    outs = []
    for i in (idx if idx is not None else range(parts)):
        p = relay.take(v, relay.const(i, "int64"), axis=0)
        p = relay.reshape(p, (t, b * heads, e // heads))
        outs.append(relay.transpose(p, (1, 0, 2)))
    if extra_use:
        outs.append(relay.reshape(relay.sigmoid(v), (parts * t, b, e)))
    return relay.IRModule.from_expr(relay.Function(params, relay.Tuple(outs)))


def _apply(mod):
    mod = transform.InferType()(mod)
    return transform.InferType()(transform.CopyViewsIntoTakes()(mod))


def _builds_match_numpy(mod):
    inputs = random_inputs(mod["main"], seed=5)
    want = run(mod, inputs)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for k, v in inputs.items():
        gm.set_input(k, v)
    gm.run()
    for i, w in enumerate(want):
        np.testing.assert_allclose(gm.get_output(i).numpy(), np.asarray(w.numpy()), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("t,b,e,heads", [(13, 1, 24, 4), (1, 1, 5, 1), (7, 2, 18, 3),
                                         (17, 3, 16, 2)])
def test_each_take_reads_its_own_copy(t, b, e, heads):
    mod = _qkv(t, b, e, heads)
    new = _apply(mod)
    # one transpose [3, ...] per take (was one shared), the heads' transposes unchanged
    assert count_ops(mod["main"].body, "transpose") == 1 + 3
    assert count_ops(new["main"].body, "transpose") == 3 + 3
    want, got = run(mod, random_inputs(mod["main"], 2)), run(new, random_inputs(mod["main"], 2))
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    _builds_match_numpy(mod)


def test_two_takes_of_four_parts_and_a_function_input():
    mod = _qkv(11, 2, 10, 5, parts=4, idx=(3, 1), weight=False)
    new = _apply(mod)
    assert count_ops(new["main"].body, "transpose") == 2 + 2
    _builds_match_numpy(mod)


def test_left_alone_when_another_use_reads_the_whole_view():
    mod = _apply(_qkv(9, 1, 12, 2, extra_use=True))
    again = transform.CopyViewsIntoTakes()(mod)
    assert again["main"] is mod["main"] or count_ops(again["main"].body, "transpose") == 1 + 3
    assert count_ops(mod["main"].body, "transpose") == 1 + 3
    _builds_match_numpy(_qkv(9, 1, 12, 2, extra_use=True))


def test_left_alone_for_takes_of_index_vectors():
    x = relay.var("x", shape=(6, 5))
    v = relay.transpose(relay.reshape(x, (3, 2, 5)), (1, 0, 2))
    a = relay.take(v, relay.const(np.array([0, 1], "int64")), axis=0)
    c = relay.take(v, relay.const(1, "int64"), axis=0)
    mod = relay.IRModule.from_expr(relay.Function([x], relay.Tuple([a, c])))
    new = _apply(mod)
    assert count_ops(new["main"].body, "transpose") == 1
    _builds_match_numpy(mod)


def test_single_take_is_left_alone():
    x = relay.var("x", shape=(6, 5))
    v = relay.transpose(relay.reshape(x, (3, 2, 5)), (1, 0, 2))
    mod = relay.IRModule.from_expr(relay.Function([x], relay.take(v, relay.const(1), axis=1)))
    mod = transform.InferType()(mod)
    assert transform.CopyViewsIntoTakes()(mod)["main"] is mod["main"]
