"""The numpy reference interpreter: every operator has an implementation whose result has the
type inference's shape and dtype; small graphs agree with direct numpy on random data; the
workload models run; bad inputs get clear errors."""

import numpy as np
import pytest
from relay_op_cases import op_cases

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay import testing
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.interpreter import create_executor, evaluate
from tvmpy.relay.op import list_op_names
from tvmpy.relay.op.numpy_impl import layout_transform_np
from tvmpy.topi import testing as topi_ref

rng = np.random.default_rng(3)


def _random(t):
    shape = tuple(int(d) for d in t.shape)
    if t.dtype == "bool":
        return rng.random(shape) < 0.5
    if t.dtype.startswith("int"):
        return rng.integers(0, 2, size=shape).astype(t.dtype)
    return rng.uniform(0.5, 1.5, size=shape).astype(t.dtype)


def _run(expr):
    params = free_vars(expr)
    f = relay.Function(params, expr)
    with np.errstate(invalid="ignore", divide="ignore"):  # acos(1.3) etc.: only shapes matter
        return evaluate(f, *[_random(p.type_annotation) for p in params])


def test_every_op_result_matches_its_type():
    cases = op_cases()
    missing = [n for n in list_op_names()
               if not n.startswith("test.") and relay.op.get(n).get_attr("FNumpy") is None]
    assert not missing, f"operators without a numpy implementation: {missing}"
    for name, case in cases.items():
        out = _run(case[0])
        t = case[0].checked_type
        assert len(out.shape) == len(t.shape) and all(  # a "?" dim: any run-time size
            isinstance(d, relay.Any) or g == d for g, d in zip(out.shape, t.shape)), \
            (name, out.shape, str(t))
        assert str(out.dtype) == t.dtype, (name, out.dtype, str(t))


def test_conv_bn_relu_matches_numpy():
    x = rng.standard_normal((2, 3, 7, 9)).astype("float32")
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    g, b, m = (rng.standard_normal(4).astype("float32") for _ in range(3))
    v = rng.uniform(0.5, 2, 4).astype("float32")
    xv = relay.var("x", shape=x.shape)
    y = relay.nn.conv2d(xv, relay.const(w), padding=1)
    y = relay.nn.relu(relay.nn.batch_norm(y, *map(relay.const, (g, b, m, v)), epsilon=1e-3)[0])
    out = evaluate(relay.Function([xv], y), x)
    conv = topi_ref.conv2d_nchw_python(x.astype("float64"), w, 1, 1)
    ref = topi_ref.batch_norm_python(conv, g, b, m, v, epsilon=1e-3)
    np.testing.assert_allclose(out, np.maximum(ref, 0), rtol=1e-4, atol=1e-4)


def test_attention_matches_numpy():
    q, k, v = (rng.standard_normal((3, 5, 4)).astype("float32") for _ in range(3))
    qv, kv, vv = (relay.var(n, shape=(3, 5, 4)) for n in "qkv")
    s = relay.nn.softmax(relay.nn.batch_matmul(qv, kv) * relay.const(0.5))
    o = relay.nn.batch_matmul(s, vv, transpose_b=False)
    out = evaluate(relay.Function([qv, kv, vv], o), q, k, v)
    sc = q @ k.transpose(0, 2, 1) * 0.5
    np.testing.assert_allclose(out, topi_ref.softmax_python(sc) @ v, rtol=1e-5, atol=1e-6)


def test_tuple_let_if_and_calls():
    x = relay.var("x", shape=(4,))
    t = relay.var("t")
    c = relay.var("c", shape=(), dtype="bool")
    body = relay.Let(t, relay.Tuple([relay.exp(x), x]),
                     relay.If(c, relay.TupleGetItem(t, 0), relay.negative(relay.TupleGetItem(t, 1))))
    f = relay.Function([c, x], body)
    xv = rng.standard_normal(4).astype("float32")
    np.testing.assert_allclose(evaluate(f, np.array(True), xv), np.exp(xv), rtol=1e-6)
    np.testing.assert_allclose(evaluate(f, np.array(False), xv), -xv)
    a = relay.var("a", shape=(4,))
    mod = tvm.IRModule()
    mod["double"] = relay.Function([a], relay.add(a, a))
    mod["main"] = relay.Function([x], relay.Call(mod.get_global_var("double"), [relay.nn.relu(x)]))
    np.testing.assert_allclose(create_executor(mod=mod).evaluate()(xv), 2 * np.maximum(xv, 0))
    split = relay.split(x, [1, 3]).astuple()
    parts = evaluate(relay.Function([x], split), xv)
    assert [p.tolist() for p in parts] == [xv[:1].tolist(), xv[1:3].tolist(), xv[3:].tolist()]


def test_ops_against_numpy_semantics():
    a = rng.standard_normal((3, 4)).astype("float32")
    av = relay.var("a", shape=(3, 4))

    def run(e, *extra):
        params = [av, *extra[::2]]
        return evaluate(relay.Function(params, e), a, *extra[1::2])

    np.testing.assert_array_equal(run(relay.argmax(av, axis=[0, 1])), np.argmax(a).astype("int32"))
    np.testing.assert_array_equal(run(relay.argmin(av, axis=0, keepdims=True)),
                                  np.argmin(a, axis=0)[None].astype("int32"))
    np.testing.assert_allclose(run(relay.round(av * relay.const(2.0))), np.round(2 * a))
    np.testing.assert_allclose(run(relay.strided_slice(av, [2, -1], [0, 0], [-1, -2])),
                               a[2:0:-1, -1:0:-2])
    np.testing.assert_allclose(run(relay.op.reduce.variance(av, relay.mean(av, 1, True), axis=1,
                                                            unbiased=True)), a.var(axis=1, ddof=1),
                               rtol=1e-5)
    iv = relay.var("i", shape=(2,), dtype="int32")
    idx = np.array([3, -1], "int32")
    np.testing.assert_allclose(run(relay.take(av, iv, axis=1, mode="wrap"), iv, idx),
                               np.take(a, idx, axis=1, mode="wrap"))
    np.testing.assert_allclose(run(relay.take(av, iv, axis=1), iv, idx),
                               np.take(a, idx, axis=1, mode="clip"))


def test_layout_transform_roundtrip():
    x = rng.standard_normal((2, 16, 3, 5)).astype("float32")
    b8 = layout_transform_np(x, "NCHW", "NCHW8c")
    np.testing.assert_array_equal(b8, x.reshape(2, 2, 8, 3, 5).transpose(0, 1, 3, 4, 2))
    np.testing.assert_array_equal(layout_transform_np(b8, "NCHW8c", "NCHW"), x)
    np.testing.assert_array_equal(layout_transform_np(layout_transform_np(b8, "NCHW8c", "NCHW4c"),
                                                      "NCHW4c", "NHWC"), x.transpose(0, 2, 3, 1))
    xv = relay.var("x", shape=x.shape)
    w = rng.standard_normal((8, 16, 3, 3)).astype("float32")
    ref = evaluate(relay.Function([xv], relay.nn.conv2d(xv, relay.const(w), padding=1)), x)
    wb = w.reshape(1, 8, 2, 8, 3, 3).transpose(0, 2, 4, 5, 3, 1)  # OIHW8i8o
    blocked = relay.nn.contrib_conv2d_nchwc(
        relay.layout_transform(xv, "NCHW", "NCHW8c"), relay.const(wb), padding=1,
        data_layout="NCHW8c", kernel_layout="OIHW8i8o", out_layout="NCHW4c")
    out = evaluate(relay.Function([xv], relay.layout_transform(blocked, "NCHW4c", "NCHW")), x)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_workloads_run():
    mod, params = testing.resnet.get_workload(image_shape=(3, 32, 32), num_classes=10)
    x = rng.standard_normal((1, 3, 32, 32)).astype("float32")
    out = create_executor(mod=mod).evaluate()(x, **params)
    assert out.shape == (1, 10) and np.isfinite(out).all() and out.std() > 0
    mod, params = testing.bert.get_workload(num_layers=1, hidden=32, heads=4, seq_len=8)
    out = evaluate(mod, rng.integers(0, 1000, (1, 8)), **params)
    assert out.shape == (1, 8, 32)
    np.testing.assert_allclose(out.mean(-1), 0, atol=0.2)  # ends in a layer norm


def test_bad_inputs():
    x = relay.var("x", shape=(2, 3))
    f = relay.Function([x], relay.nn.relu(x))
    with pytest.raises(ValueError, match=r"input %x: expected shape Tensor\[\(2, 3\), float32\], got \(3, 2\)"):
        evaluate(f, np.ones((3, 2), "float32"))
    with pytest.raises(TypeError, match="expected dtype float32, got float64"):
        evaluate(f, np.ones((2, 3)))
    with pytest.raises(TypeError, match="missing inputs \\['x'\\]"):
        evaluate(f)
    with pytest.raises(TypeError, match="unknown inputs \\['y'\\]"):
        evaluate(f, y=1)
    with pytest.raises(ValueError, match=r"create_executor\('graph'\) needs mod="):
        create_executor("graph")
    with pytest.raises(ValueError, match="unknown executor kind 'aot'"):
        create_executor("aot", tvm.IRModule.from_expr(f))


def test_extra_ops_against_numpy():
    x = rng.standard_normal((2, 8, 3, 4)).astype("float32")
    xv = relay.var("x", shape=x.shape)

    def run(e):
        return evaluate(relay.Function([xv], e), x)

    d2s = run(relay.nn.depth_to_space(xv, 2))
    # DCR: out[n, c, h*b + i, w*b + j] = x[n, (i*b + j) * C/b^2 + c, h, w]
    assert d2s[0, 1, 2 * 1 + 1, 2 * 2 + 0] == x[0, (1 * 2 + 0) * 2 + 1, 1, 2]
    crd = run(relay.nn.depth_to_space(xv, 2, mode="CRD"))  # channel c*b^2 + i*b + j
    assert crd[1, 1, 2 * 2 + 1, 2 * 3 + 1] == x[1, 1 * 4 + 1 * 2 + 1, 2, 3]
    np.testing.assert_array_equal(run(relay.nn.space_to_depth(relay.nn.depth_to_space(
        xv, 2, mode="CRD"), 2)).shape, x.shape)
    np.testing.assert_array_equal(run(relay.nn.space_to_depth(relay.nn.depth_to_space(xv, 2), 2)),
                                  x)
    gi = rng.integers(0, 8, size=(2, 5, 3, 4))
    np.testing.assert_array_equal(run(relay.gather(xv, 1, relay.const(gi))),
                                  np.take_along_axis(x, gi, axis=1))
    nd = np.array([[1, 0], [7, 2]])
    np.testing.assert_array_equal(run(relay.gather_nd(xv, relay.const(nd))), x[[1, 0], [7, 2]])
    np.testing.assert_allclose(run(relay.cumsum(xv, axis=1, exclusive=True)),
                               np.cumsum(x, axis=1) - x, rtol=1e-5, atol=1e-5)
    g, b = rng.standard_normal(8).astype("float32"), rng.standard_normal(8).astype("float32")
    inst = run(relay.nn.instance_norm(xv, relay.const(g), relay.const(b)))
    grp = run(relay.nn.group_norm(xv, relay.const(g), relay.const(b), num_groups=8))
    np.testing.assert_allclose(inst, grp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(inst, topi_ref.instance_norm_python(x, g, b), rtol=1e-4, atol=1e-4)
    idx = np.array([[0, 3], [2, 1]], "int32")
    oh = evaluate(relay.one_hot(relay.const(idx), relay.const(5.0), relay.const(-1.0), 4))
    np.testing.assert_array_equal(oh, np.where(np.eye(4)[idx] == 1, 5.0, -1.0))
    np.testing.assert_allclose(evaluate(relay.arange(1.0, 2.0, 0.3)), np.arange(1.0, 2.0, 0.3),
                               rtol=1e-6)
    np.testing.assert_array_equal(evaluate(relay.arange(7, 0, -3, dtype="int32")), [7, 4, 1])


def test_conv1d_pool1d_agree_with_2d():
    x = rng.standard_normal((2, 4, 13)).astype("float32")
    w = rng.standard_normal((6, 2, 3)).astype("float32")
    xv = relay.var("x", shape=x.shape)
    c1 = evaluate(relay.Function([xv], relay.nn.conv1d(xv, relay.const(w), strides=2,
                                                       padding=(1, 2), dilation=2, groups=2)), x)
    x4 = relay.var("x4", shape=(2, 4, 1, 13))
    c2 = evaluate(relay.Function([x4], relay.nn.conv2d(x4, relay.const(w[:, :, None, :]),
                                                       strides=(1, 2), padding=(0, 1, 0, 2),
                                                       dilation=(1, 2), groups=2)), x[:, :, None])
    np.testing.assert_allclose(c1, c2[:, :, 0], rtol=1e-5, atol=1e-5)
    p1 = evaluate(relay.Function([xv], relay.nn.avg_pool1d(xv, 3, 2, padding=1)), x)
    p2 = evaluate(relay.Function([x4], relay.nn.avg_pool2d(x4, (1, 3), (1, 2), padding=(0, 1))),
                  x[:, :, None])
    np.testing.assert_allclose(p1, p2[:, :, 0], rtol=1e-6)


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_round_halves_to_even_compiled_and_interpreted(target):
    """relay.round is numpy's / ONNX's / torch's round (halves to even) in the compiled code and
    in the reference interpreter alike (the interpreter used to round halves away from zero)."""
    from tvmpy.contrib import graph_executor

    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -3.6, 1e7 + 0.5], "float32")
    x = relay.var("x", shape=a.shape)
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.round(x)))
    lib = relay.build(mod, target=target)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.round(a))
    np.testing.assert_array_equal(relay.create_executor("debug", mod=mod).evaluate()(a),
                                  np.round(a))
