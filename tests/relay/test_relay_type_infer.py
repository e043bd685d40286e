"""Type inference: shapes/dtypes of model building blocks (ResNet, MobileNetV2, BERT), symbolic
dimensions, every registered operator, and errors that name the node and the shapes."""

import numpy as np
import pytest
from relay_op_cases import data_dependent_cases, op_cases

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.relay import RelayTypeError
from tvmpy.relay.op import list_op_names
from tvmpy.relay.transform import infer_type

rng = np.random.default_rng(0)


def _c(*shape, dtype="float32"):
    return relay.const(rng.standard_normal(shape).astype(dtype))


def _shape(e):
    return infer_type(e).checked_type.shape


def _typed_main(*params, body):
    mod = tvm.IRModule.from_expr(relay.Function(list(params), body))
    return relay.transform.InferType()(mod)


def _conv_bn_relu(x, cin, cout, stride=1, groups=1):
    w = _c(cout, cin // groups, 3, 3)
    y = relay.nn.conv2d(x, w, strides=stride, padding=1, groups=groups, channels=cout,
                        kernel_size=3)
    bn = relay.nn.batch_norm(y, _c(cout), _c(cout), _c(cout), relay.const(np.ones(cout, "float32")))
    return relay.nn.relu(bn[0])


def test_resnet_basic_block():
    x = relay.var("x", shape=(1, 16, 15, 15))
    y = _conv_bn_relu(x, 16, 32, stride=2)
    y = _conv_bn_relu(y, 32, 32)
    short = relay.nn.conv2d(x, _c(32, 16, 1, 1), strides=(2, 2))
    out = relay.nn.relu(relay.add(y, short))
    mod = _typed_main(x, body=out)
    ft = mod["main"].checked_type
    assert ft.ret_type.shape == (1, 32, 8, 8)
    assert str(ft.ret_type) == "Tensor[(1, 32, 8, 8), float32]"
    pooled = relay.nn.max_pool2d(x, pool_size=3, strides=2, padding=1)
    assert _shape(pooled) == (1, 16, 8, 8)
    gap = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(out))
    logits = relay.nn.bias_add(relay.nn.dense(gap, _c(10, 32)), _c(10))
    assert _shape(relay.nn.softmax(logits)) == (1, 10)


def test_mobilenet_inverted_residual():
    x = relay.var("x", shape=(1, 24, 14, 14))
    e = relay.clip(relay.nn.conv2d(x, _c(144, 24, 1, 1)), 0.0, 6.0)
    d = relay.clip(relay.nn.conv2d(e, _c(144, 1, 3, 3), padding=1, groups=144), 0.0, 6.0)
    p = relay.nn.conv2d(d, _c(24, 144, 1, 1))
    assert _shape(relay.add(p, x)) == (1, 24, 14, 14)
    nhwc = relay.var("n", shape=(1, 14, 14, 24))
    out = relay.nn.conv2d(nhwc, _c(3, 3, 24, 5), strides=2, padding=1, data_layout="NHWC")
    assert _shape(out) == (1, 7, 7, 5)


def test_dense_softmax_and_reductions():
    x = relay.var("x", shape=(3, 7))
    y = relay.nn.softmax(relay.nn.dense(x, _c(5, 7), units=5), axis=1)
    assert _shape(y) == (3, 5)
    assert _shape(relay.sum(x)) == ()
    assert _shape(relay.mean(x, axis=1, keepdims=True)) == (3, 1)
    assert _shape(relay.max(x, axis=[0], exclude=True)) == (3,)
    am = infer_type(relay.argmax(x, axis=1)).checked_type
    assert am.shape == (3,) and am.dtype == "int32"


def test_attention_block():
    seq, hidden, heads = 128, 256, 4
    dh = hidden // heads
    x = relay.var("x", shape=(1, seq, hidden))

    def proj(t):
        return relay.nn.bias_add(relay.nn.dense(t, _c(hidden, hidden)), _c(hidden), axis=-1)

    def split_heads(t):  # (1, seq, hidden) -> (heads, seq, dh)
        t = relay.reshape(t, (1, seq, heads, dh))
        t = relay.transpose(t, (0, 2, 1, 3))
        return relay.reshape(t, (-1, seq, dh))

    q, k, v = (split_heads(proj(x)) for _ in range(3))
    assert _shape(q) == (heads, seq, dh)
    scores = relay.nn.batch_matmul(q, k) * relay.const(1.0 / np.sqrt(dh), "float32")
    assert _shape(scores) == (heads, seq, seq)
    probs = relay.nn.softmax(scores, axis=-1)
    ctx = relay.nn.batch_matmul(probs, v, transpose_b=False)
    assert _shape(ctx) == (heads, seq, dh)
    ctx = relay.reshape(relay.transpose(ctx, (1, 0, 2)), (1, seq, hidden))
    out = relay.nn.layer_norm(relay.add(proj(ctx), x), _c(hidden), _c(hidden))
    mod = _typed_main(x, body=out)
    assert mod["main"].checked_type.ret_type.shape == (1, seq, hidden)
    ids = relay.var("ids", shape=(1, seq), dtype="int64")
    emb = relay.take(_c(1000, hidden), ids, axis=0)
    assert _shape(emb) == (1, seq, hidden)
    cls = relay.strided_slice(out, begin=[0], end=[1], axes=[1])
    assert _shape(cls) == (1, 1, hidden)
    assert _shape(relay.nn.gelu(out)) == (1, seq, hidden)


def test_symbolic_batch():
    n = te.var("n")
    x = relay.var("x", shape=(n, 3, 8, 8))
    y = relay.nn.conv2d(x, _c(4, 3, 3, 3), padding=1)
    t = infer_type(y).checked_type
    assert t.shape[0] is n and t.shape[1:] == (4, 8, 8)
    assert str(t) == "Tensor[(n, 4, 8, 8), float32]"
    flat = relay.reshape(y, (0, -1))
    assert _shape(flat)[1] == 256
    z = relay.reshape(y, (-1, 32))
    assert str(infer_type(z).checked_type) == "Tensor[(n*8, 32), float32]" or \
        str(_shape(z)[0]).replace(" ", "") in ("n*8", "8*n")
    b = relay.add(relay.var("a", shape=(n, 1)), relay.var("b", shape=(1, 5)))
    assert _shape(b)[1] == 5 and _shape(b)[0] is n
    m = te.var("m")
    with pytest.raises(RelayTypeError, match=r"\(n, 1\) and \(m, 2\) do not broadcast"):
        infer_type(relay.add(relay.var("a", shape=(n, 1)), relay.var("b", shape=(m, 2))))
    c = relay.concatenate([relay.var("p", shape=(n, 2)), relay.var("q", shape=(n, 3))], axis=1)
    assert _shape(c)[1] == 5


def test_let_if_and_function_calls():
    x = relay.var("x", shape=(2, 3))
    v = relay.var("v")
    let = relay.Let(v, relay.exp(x), relay.add(v, x))
    assert _shape(let) == (2, 3)
    assert v.checked_type.shape == (2, 3)
    cond = relay.var("c", shape=(), dtype="bool")
    assert _shape(relay.If(cond, x, relay.negative(x))) == (2, 3)
    with pytest.raises(RelayTypeError, match="branches have different types"):
        infer_type(relay.If(cond, x, relay.sum(x)))
    a = relay.var("a", shape=(2, 3))
    inner = relay.Function([a], relay.nn.relu(a))
    call = relay.Call(inner, [x])
    assert _shape(call) == (2, 3)
    with pytest.raises(RelayTypeError, match="argument 0 has type Tensor\\[\\(3, 3\\), float32\\]"):
        infer_type(relay.Call(inner, [relay.var("y", shape=(3, 3))]))
    mod = tvm.IRModule()
    mod["double"] = relay.Function([a], relay.add(a, a))
    mod["main"] = relay.Function([x], relay.Call(mod.get_global_var("double"), [x]))
    mod = relay.transform.InferType()(mod)
    assert mod["main"].checked_type.ret_type.shape == (2, 3)


def test_tuples_and_split():
    x = relay.var("x", shape=(6, 4))
    parts = relay.split(x, 3, axis=0)
    t = infer_type(parts.astuple()).checked_type
    assert [f.shape for f in t.fields] == [(2, 4)] * 3
    uneven = relay.split(x, [1, 4], axis=0)
    assert [f.shape for f in infer_type(uneven.astuple()).checked_type.fields] == [(1, 4), (3, 4), (2, 4)]
    tup = relay.Tuple([x, relay.sum(x)])
    assert _shape(relay.TupleGetItem(tup, 1)) == ()
    with pytest.raises(RelayTypeError, match="index 2 out of range"):
        infer_type(relay.TupleGetItem(tup, 2))
    with pytest.raises(RelayTypeError, match="not divisible into 4 sections"):
        infer_type(relay.split(x, 4).astuple())


def test_every_registered_op_is_typed():
    cases = op_cases()
    from tvmpy.relay.op.shape_func import is_data_dependent

    # (data-dependent ops, whose result types have Any dims, are typed and run in their own
    # tests: test_dyn_ops.py)
    missing = sorted(n for n in set(list_op_names()) - set(cases)
                     if not n.startswith("test.") and not is_data_dependent(n))
    assert not missing, f"operators without a type-inference case: {missing}"
    for name, case in cases.items():
        expr, shape = case[0], case[1]
        dtype = case[2] if len(case) > 2 else "float32"
        t = infer_type(expr).checked_type
        got = tuple("?" if isinstance(d, relay.Any) else d for d in t.shape)  # run-time dims
        assert got == shape and t.dtype == dtype, (name, str(t))
    dep = data_dependent_cases()  # test_data_dependent_ops.py runs them
    for name, case in dep.items():  # None: an Any dimension (decided by the data)
        t = infer_type(case[0]).checked_type
        got = tuple(None if isinstance(d, relay.Any) else d for d in t.shape)
        assert got == case[1] and t.dtype == (case[2] if len(case) > 2 else "float32"), (name, str(t))


def _err(expr):
    with pytest.raises(RelayTypeError) as ei:
        infer_type(expr)
    return str(ei.value)


def test_errors_name_node_and_shapes():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 5, 3, 3))
    msg = _err(relay.nn.conv2d(x, w, strides=2))
    assert "nn.conv2d(%x, %w, strides=[2, 2])" in msg
    assert "(1, 3, 8, 8)" in msg and "(4, 5, 3, 3)" in msg and "3 input channels" in msg
    msg = _err(relay.add(relay.nn.relu(relay.var("a", shape=(2, 3))), relay.var("b", shape=(4,))))
    assert "add(nn.relu(...), %b)" in msg and "(2, 3)" in msg and "(4,)" in msg
    msg = _err(relay.nn.dense(relay.var("d", shape=(2, 6)), _c(3, 5)))
    assert "nn.dense(%d, const[3, 5])" in msg and "6 input features" in msg and "(3, 5)" in msg
    msg = _err(relay.reshape(relay.var("r", shape=(2, 3)), (4, 2)))
    assert "reshape(%r, newshape=[4, 2])" in msg and "6 elements" in msg and "8 elements" in msg
    msg = _err(relay.add(relay.var("a", shape=(2,)), relay.var("b", shape=(2,), dtype="int32")))
    assert "float32" in msg and "int32" in msg
    msg = _err(relay.nn.batch_matmul(relay.var("q", shape=(4, 8, 16)), relay.var("k", shape=(4, 8, 32))))
    assert "nn.batch_matmul(%q, %k)" in msg and "16 vs 32" in msg
    msg = _err(relay.nn.batch_norm(x, _c(3), _c(3), _c(4), _c(3))[0])
    assert "moving_mean (4,)" in msg and "size 3" in msg
    msg = _err(relay.transpose(relay.var("t", shape=(2, 3)), (0, 2)))
    assert "out of range" in msg or "do not match" in msg
    msg = _err(relay.concatenate([relay.var("p", shape=(2, 3)), relay.var("q", shape=(3, 3))], axis=1))
    assert "concatenate" in msg and "(3, 3)" in msg and "(2, 3)" in msg
    msg = _err(relay.nn.max_pool2d(relay.var("p", shape=(1, 1, 2, 2)), pool_size=3))
    assert "nn.max_pool2d" in msg and "larger than the padded input" in msg


def test_function_level_errors():
    x = relay.var("x", shape=(2, 3))
    with pytest.raises(RelayTypeError, match="declares return type Tensor\\[\\(3, 2\\), float32\\]"):
        infer_type(relay.Function([x], relay.nn.relu(x), ret_type=relay.TensorType((3, 2))))
    with pytest.raises(RelayTypeError, match="%u has no type"):
        infer_type(relay.nn.relu(relay.var("u")))
    v = relay.var("v", shape=(3,))
    with pytest.raises(RelayTypeError, match="annotated Tensor\\[\\(3\\), float32\\]"):
        infer_type(relay.Let(v, x, v))


def test_type_cached_and_required():
    x = relay.var("x", shape=(2, 3))
    y = relay.nn.relu(x)
    with pytest.raises(ValueError, match="InferType"):
        _ = y.checked_type
    infer_type(y)
    assert y.checked_type.shape == (2, 3)
