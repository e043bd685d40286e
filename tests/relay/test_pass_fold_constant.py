"""FoldConstant and bind_params_by_name: constant subgraphs evaluated at compile time."""

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

from tvmpy import relay
from tvmpy.relay import transform
from tvmpy.relay.transform import bind_params_by_name


def _rand(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32")


def test_fold_chain_tuple_and_let():
    x = relay.var("x", shape=(3, 5))
    a, b = relay.const(_rand((3, 5), 1)), relay.const(_rand((5,), 2))
    c = relay.exp(relay.add(a, b))  # folds
    t = relay.Tuple([c, relay.multiply(c, relay.const(2.0))])
    v = relay.var("v")
    body = relay.Let(v, relay.TupleGetItem(t, 1), relay.add(relay.multiply(x, v), c))
    sp = relay.split(relay.const(_rand((4, 5), 3)), 2, axis=0)
    body = relay.add(body, relay.sum(sp[1], axis=0))
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    out = transform.FoldConstant()(mod)
    text = out["main"].astext(show_types=False)
    for name in ("exp(", "split(", "sum(", "let "):
        assert name not in text, text
    assert count_ops(out["main"].body, "add") == 2 and count_ops(out["main"].body, "multiply") == 1
    inputs = random_inputs(mod["main"])
    np.testing.assert_allclose(run(out, inputs), run(mod, inputs), rtol=1e-6, atol=1e-6)


def test_nonconstant_untouched():
    x = relay.var("x", shape=(4,))
    f = relay.Function([x], relay.nn.relu(relay.add(x, x)))
    mod = relay.IRModule.from_expr(f)
    out = transform.FoldConstant()(mod)
    assert out["main"].body is f.body


def test_bind_params_then_fold():
    x = relay.var("x", shape=(2, 4))
    w = relay.var("w", shape=(3, 4))
    s = relay.var("s", shape=(3,))
    f = relay.Function([x, w, s], relay.nn.dense(x, relay.multiply(w, relay.const(0.5))) + s)
    params = {"w": _rand((3, 4), 5), "s": _rand((3,), 6)}
    bound = bind_params_by_name(f, params)
    assert [p.name_hint for p in bound.params] == ["x"]
    out = transform.FoldConstant()(relay.IRModule.from_expr(bound))
    assert count_ops(out["main"].body, "multiply") == 0
    xin = _rand((2, 4), 7)
    want = run(relay.IRModule.from_expr(f), {"x": xin, **params})
    np.testing.assert_allclose(run(out, {"x": xin}), want, rtol=1e-6)


def test_bind_params_bad_input():
    x = relay.var("x", shape=(2, 4))
    f = relay.Function([x], relay.nn.relu(x))
    with pytest.raises(ValueError, match="expects"):
        bind_params_by_name(f, {"x": np.zeros((2, 5), "float32")})
    with pytest.raises(ValueError, match="expects"):
        bind_params_by_name(f, {"x": np.zeros((2, 4), "float64")})


def test_bind_params_skips_names_that_are_no_parameter(caplog):
    """As TVM: a name of ``params`` that no parameter has is skipped (logged at debug level),
    the others are bound; the result computes as the unbound function fed the same values."""
    x = relay.var("x", shape=(3, 5))
    w = relay.var("w", shape=(5,))
    f = relay.Function([x, w], relay.nn.relu(x * w))
    wv = _rand((5,), 11)
    with caplog.at_level("DEBUG", logger="tvmpy.relay.transform.bind_params"):
        bound = bind_params_by_name(f, {"w": wv, "unused_bias": _rand((5,), 12)})
    assert "unused_bias" in caplog.text
    assert [p.name_hint for p in bound.params] == ["x"]
    xin = _rand((3, 5), 13)
    want = np.maximum(xin * wv, 0)
    np.testing.assert_allclose(run(relay.IRModule.from_expr(bound), {"x": xin}), want, rtol=1e-6)
    same = bind_params_by_name(f, {"nothing": wv})  # no name matches: nothing bound
    assert [p.name_hint for p in same.params] == ["x", "w"]


def test_bind_params_duplicate_parameter_names():
    a = relay.var("p", shape=(2,))
    b = relay.var("p", shape=(2,))
    c = relay.var("c", shape=(2,))
    f = relay.Function([a, b, c], a + b + c)
    with pytest.raises(ValueError, match=r"multiple parameters .* named \['p'\]"):
        bind_params_by_name(f, {"p": np.ones(2, "float32")})
    bound = bind_params_by_name(f, {"c": np.ones(2, "float32")})  # the unique name still binds
    assert [p.name_hint for p in bound.params] == ["p", "p"]


def test_constant_broadcast_to_a_symbolic_batch_is_kept():
    """broadcast_to(constant, (batch, 1, 5)) with ``batch`` a relay.Any has constant inputs
    but no constant value (its size is known at run time): kept, not evaluated (evaluating it
    raised "symbolic expression ... cannot be used as a Python integer"); then built and run at
    two batch sizes (ViT's class token expanded to the batch)."""
    import tvmpy as tvm
    from tvmpy.contrib import graph_executor

    n = relay.Any()
    x = relay.var("x", shape=(n, 3, 5))
    tok = _rand((1, 1, 5), 8)
    y = relay.concatenate([relay.broadcast_to(relay.const(tok), (n, 1, 5)), x], 1)
    mod = relay.IRModule.from_expr(relay.Function([x], relay.exp(y)))
    out = transform.FoldConstant()(mod)
    assert count_ops(out["main"].body, "broadcast_to") == 1
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for b in (1, 4):
        xin = _rand((b, 3, 5), b)
        m.set_input(x=xin)
        m.run()
        want = np.exp(np.concatenate([np.broadcast_to(tok, (b, 1, 5)), xin], 1))
        np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-6)


def test_folded_layout_chain_copies_the_weight_once():
    # a frontend's transposed weight, then the layout packing's reshape + transpose (what
    # AlterOpLayout adds for x86 dense): folded one step at a time, the intermediate constants
    # stay views of the weight, and the one that survives is copied when it is read
    w = _rand((12, 10), 7)  # (in, out), as ONNX MatMul holds it
    x = relay.var("x", shape=(3, 12))
    wt = relay.transpose(relay.const(w), (1, 0))  # (out, in)
    packed = relay.transpose(relay.reshape(wt, (5, 2, 12)), (0, 2, 1))  # (out/2, in, 2)
    body = relay.nn.dense(x, wt)
    mod = relay.IRModule.from_expr(relay.Function([x], relay.Tuple([body, packed])))
    out = transform.FoldConstant()(mod)
    consts = [out["main"].body.fields[0].args[1], out["main"].body.fields[1]]
    assert all(isinstance(c, relay.Constant) for c in consts)
    src = mod["main"].body.fields[0].args[1].args[0].data.numpy()
    for c in consts:  # still views of the weight: no copy was made while folding
        assert np.shares_memory(c.data.strided(), src)
    np.testing.assert_array_equal(consts[0].data.numpy(), w.T)
    np.testing.assert_array_equal(consts[1].data.numpy(),
                                  w.T.reshape(5, 2, 12).transpose(0, 2, 1))
    assert consts[1].data.numpy().flags.c_contiguous
    inputs = random_inputs(mod["main"])
    got, want = run(out, inputs), run(mod, inputs)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
