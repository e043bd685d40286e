"""Symbolic dimensions (``relay.Any``): type inference, shape functions, one build run at
several sizes (against the interpreter and onnxruntime), from_onnx's dim_params, and the
errors for a mismatched run-time shape."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.op.shape_func import concrete_type, infer_shapes, shape_func
from tvmpy.relay.size_checks import size_checks_of
from tvmpy.relay.ty import Any, type_str
from tvmpy.relay.type_infer import infer_type
from tvmpy.topi import testing

RNG = np.random.default_rng(11)


def _np(v):
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


def _t(e):
    return type_str(infer_type(e).checked_type)


# ---- type inference -------------------------------------------------------------------------
def test_any_prints_as_question_mark_and_flows_through_a_cnn():
    n = relay.Any()
    x = relay.var("x", shape=(n, 3, 16, 16))
    y = relay.nn.conv2d(x, relay.var("w", shape=(8, 3, 3, 3)), padding=(1, 1))
    y = relay.nn.relu(y + relay.var("b", shape=(8, 1, 1)))
    y = relay.nn.max_pool2d(y, (2, 2), (2, 2))
    assert _t(y) == "Tensor[(?, 8, 8, 8), float32]"
    y = relay.nn.global_avg_pool2d(y)
    assert _t(y) == "Tensor[(?, 8, 1, 1), float32]"
    y = relay.nn.softmax(relay.nn.dense(relay.nn.batch_flatten(y), relay.var("w2", shape=(5, 8))))
    f = infer_type(relay.Function(relay.analysis.free_vars(y), y))
    assert type_str(f.checked_type.ret_type) == "Tensor[(?, 5), float32]"
    assert "Tensor[(?, 3, 16, 16), float32]" in str(f)


@pytest.mark.parametrize("build, want", [
    (lambda x: relay.reshape(x, (-1, 16)), "Tensor[(? * 21, 16), float32]"),
    (lambda x: relay.reshape(x, (0, -1)), "Tensor[(?, 336), float32]"),
    (lambda x: relay.transpose(x, (1, 0, 2)), "Tensor[(7, ?, 48), float32]"),
    (lambda x: relay.concatenate([x, x], axis=1), "Tensor[(?, 14, 48), float32]"),
    (lambda x: relay.sum(x, axis=0), "Tensor[(7, 48), float32]"),
    (lambda x: relay.mean(x, axis=2, keepdims=True), "Tensor[(?, 7, 1), float32]"),
    (lambda x: relay.nn.softmax(x, axis=-1), "Tensor[(?, 7, 48), float32]"),
    (lambda x: relay.nn.layer_norm(x, relay.var("g", shape=(48,)), relay.var("b", shape=(48,))),
     "Tensor[(?, 7, 48), float32]"),
    (lambda x: relay.nn.batch_matmul(x, relay.var("k", shape=(1, 5, 48))),
     "Tensor[(?, 7, 5), float32]"),
    (lambda x: relay.nn.dense(x, relay.var("w", shape=(9, 48))), "Tensor[(?, 7, 9), float32]"),
])
def test_common_ops_with_any_batch(build, want):
    x = relay.var("x", shape=(relay.Any(), 7, 48))
    assert _t(build(x)) == want


def test_broadcast_rules_with_any():
    n, m = Any(), Any()
    a = relay.var("a", shape=(n, 4))
    assert _t(a + relay.var("b", shape=(n, 1))) == "Tensor[(?, 4), float32]"
    assert _t(a + relay.var("c", shape=(5, 4))) == "Tensor[(5, 4), float32]"  # ? takes 5
    assert _t(a + relay.var("d", shape=(1, 4))) == "Tensor[(?, 4), float32]"
    call = infer_type(a + relay.var("e", shape=(m, 4)))
    # two ? broadcast: the larger at run time, their equality (or a side of 1) checked then
    assert str(call.checked_type.shape[0]) == f"max({n.name}, {m.name})"
    (eq,) = size_checks_of(call)
    assert eq.lhs is n and eq.rhs is m and eq.bcast
    with pytest.raises(relay.RelayTypeError, match="do not broadcast"):
        infer_type(a + relay.var("f", shape=(n, 3)))


def test_any_unifies_with_a_concrete_size_in_calls():
    p = relay.var("p", shape=(relay.Any(), 3))
    f = relay.Function([p], relay.nn.relu(p))
    x = relay.var("x", shape=(2, 3))
    assert _t(relay.Call(f, [x])) == "Tensor[(?, 3), float32]"
    with pytest.raises(relay.RelayTypeError, match="argument 0"):
        infer_type(relay.Call(f, [relay.var("y", shape=(2, 4))]))


def test_each_any_is_distinct_and_named_for_kernels():
    a, b = Any("batch"), Any("batch")
    assert a is not b and a.name != b.name and a.name.startswith("batch_")
    assert str(relay.TensorType((a, 2))) == "Tensor[(?, 2), float32]"


# ---- shape functions ------------------------------------------------------------------------
@pytest.mark.parametrize("op, attrs_fn, shapes, ref", [
    ("nn.relu", lambda x: relay.nn.relu(x), [(3, 5)], lambda a: a),
    ("add", None, [(4, 1, 5), (3, 1)], lambda a, b: a + b),
    ("nn.dense", None, [(6, 7), (9, 7)], lambda a, b: a @ b.T),
    ("transpose", lambda x: relay.transpose(x, (2, 0, 1)), [(2, 3, 4)],
     lambda a: a.transpose(2, 0, 1)),
    ("reshape", lambda x: relay.reshape(x, (0, -1)), [(3, 4, 5)], lambda a: a.reshape(3, -1)),
    ("sum", lambda x: relay.sum(x, axis=1, keepdims=True), [(3, 4, 5)],
     lambda a: a.sum(axis=1, keepdims=True)),
    ("nn.max_pool2d", lambda x: relay.nn.max_pool2d(x, (3, 3), (2, 2), padding=(1, 1)),
     [(2, 3, 9, 7)], None),
])
def test_shape_functions_match_numpy(op, attrs_fn, shapes, ref):
    attrs = None
    if attrs_fn is not None:
        attrs = attrs_fn(relay.var("x", shape=shapes[0])).attrs
    got = shape_func(op, attrs, shapes)
    if ref is not None:
        assert got == [ref(*[RNG.standard_normal(s) for s in shapes]).shape]
    else:
        assert got == [(2, 3, 5, 4)]


def test_shape_function_errors_name_the_operator():
    with pytest.raises(ValueError, match="do not broadcast"):
        shape_func("add", None, [(3, 4), (5, 4)])
    with pytest.raises(ValueError, match="nn.conv2d: no output shape"):
        x = relay.var("x", shape=(1, 3, 8, 8))
        call = relay.nn.conv2d(x, relay.var("w", shape=(4, 3, 3, 3)))
        concrete_type(call.op, call.attrs, [relay.TensorType((1, 5, 8, 8)),
                                            relay.TensorType((4, 3, 3, 3))])


def test_infer_shapes_of_a_function():
    x = relay.var("x", shape=(relay.Any(), 4))
    f = relay.Function([x], relay.reshape(relay.nn.dense(x, relay.const(np.ones((6, 4),
                                                                                  "float32"))),
                                          (-1, 3)))
    assert tuple(infer_shapes(f, [(5, 4)]).shape) == (10, 3)


# ---- one build, several sizes ----------------------------------------------------------------
def _mlp_cnn():
    n = relay.Any()
    x = relay.var("x", shape=(n, 3, 10, 9))
    c = lambda *s: relay.const(RNG.standard_normal(s).astype("float32"))  # noqa: E731
    y = relay.nn.conv2d(x, c(6, 3, 3, 3), padding=(1, 1))
    y = relay.nn.relu(relay.nn.bias_add(y, c(6)))
    y = relay.nn.avg_pool2d(y, (2, 2), (2, 2))
    y = relay.nn.batch_flatten(y)
    y = relay.nn.dense(y, c(7, 6 * 5 * 4)) + c(7)
    y = relay.nn.softmax(relay.tanh(y))
    return relay.Function([x], y)


@pytest.mark.parametrize("opt_level", [0, 3])
def test_one_build_runs_every_batch(opt_level):
    f = _mlp_cnn()
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(f, "llvm")
    # kernels are generated with a symbolic batch: one function per op for all sizes
    assert any(isinstance(d, str) for s in __import__("json").loads(lib.graph_json)["attrs"]
               ["shape"][1] for d in s)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    ref = relay.create_executor("debug", mod=tvm.IRModule.from_expr(f)).evaluate()
    for b in (1, 3, 8, 3):
        x = RNG.standard_normal((b, 3, 10, 9)).astype("float32")
        m.set_input("x", x)
        m.run()
        out = m.get_output(0).numpy()
        assert out.shape == (b, 7)
        np.testing.assert_allclose(out, _np(ref(x)), rtol=1e-5, atol=1e-6)
    assert len(m.module._plans) == 3  # one storage plan per batch size seen


def test_run_time_shape_errors_name_input_and_dimension():
    n = relay.Any()
    x, y = relay.var("x", shape=(n, 4)), relay.var("y", shape=(n, 1))
    lib = relay.build(relay.Function([x, y], relay.nn.relu(x + y)), "llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    with pytest.raises(ValueError, match=r"set_input\('x'\): expected 2 dimensions \(\?, 4\)"):
        m.set_input("x", np.zeros((2, 4, 1), "float32"))
    with pytest.raises(ValueError, match=r"set_input\('x'\): dimension 1 must be 4"):
        m.set_input("x", np.zeros((2, 5), "float32"))
    m.set_input("x", np.ones((2, 4), "float32"))
    m.set_input("y", np.ones((3, 1), "float32"))
    with pytest.raises(ValueError, match="input 'y' dimension 0 is 3, but input 'x' dimension 0 "
                                         "is 2"):
        m.run()
    m.set_input("y", np.full((2, 1), -2.0, "float32"))
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), np.zeros((2, 4), "float32"))


def test_get_output_before_the_first_run_of_a_symbolic_graph():
    x = relay.var("x", shape=(relay.Any(), 2))
    m = graph_executor.GraphModule(relay.build(relay.Function([x], relay.exp(x)),
                                               "llvm")["default"](tvm.cpu(0)))
    with pytest.raises(RuntimeError, match="call run"):
        m.get_output(0)


def test_static_graphs_keep_a_single_plan():
    x = relay.var("x", shape=(2, 3))
    m = graph_executor.GraphModule(relay.build(relay.Function([x], relay.exp(x)),
                                               "llvm")["default"](tvm.cpu(0)))
    assert not m.module._symbolic
    m.set_input("x", np.ones((2, 3), "float32"))
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), np.exp(np.ones((2, 3))), rtol=1e-6)


def test_symbolic_reshape_is_a_view():
    """A reshape between two kernels of a symbolic-size graph (dense, then softmax over the
    new axis) runs as a view of the dense output's storage (``__nop``), the storage sized per
    run; the result is right at several sizes."""
    x = relay.var("x", shape=(Any(), 6), dtype="float32")
    w = relay.var("w", shape=(8, 6), dtype="float32")
    y = relay.nn.softmax(relay.reshape(relay.nn.dense(x, w), (-1, 2, 4)), axis=1)
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    lib = relay.build(mod, target="llvm")
    assert '"__nop"' in lib.get_graph_json()
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    rng = np.random.default_rng(3)
    wv = rng.standard_normal((8, 6)).astype("float32")
    gm.set_input("w", wv)
    for n in (5, 1, 8):
        a = rng.standard_normal((n, 6)).astype("float32")
        gm.set_input("x", a)
        gm.run()
        d = (a @ wv.T).reshape(-1, 2, 4)
        np.testing.assert_allclose(gm.get_output(0).numpy(), testing.softmax_python(d, 1),
                                   rtol=1e-5, atol=1e-6)


def test_symbolic_reshape_of_an_input_returned_as_output_is_a_copy():
    """A graph output is never a view of an input: the reshape-only function runs as a copy
    kernel, with the sizes it cannot read off its buffers passed by value."""
    x = relay.var("x", shape=(Any(), 6), dtype="float32")
    y = relay.expand_dims(relay.reshape(x, (-1,)), 0)
    lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    assert '"__nop"' not in lib.get_graph_json()
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for n in (4, 1):
        a = np.random.default_rng(n).standard_normal((n, 6)).astype("float32")
        gm.set_input("x", a)
        gm.run()
        np.testing.assert_array_equal(gm.get_output(0).numpy(), a.reshape(1, -1))


def test_exported_symbolic_library_round_trip(tmp_path):
    f = _mlp_cnn()
    lib = relay.build(f, "llvm")
    path = str(tmp_path / "dyn.so")
    lib.export_library(path)
    loaded = tvm.runtime.load_module(path)
    m = graph_executor.GraphModule(loaded["default"](tvm.cpu(0)))
    ref = relay.create_executor("debug", mod=tvm.IRModule.from_expr(f)).evaluate()
    for b in (2, 5):
        x = RNG.standard_normal((b, 3, 10, 9)).astype("float32")
        m.set_input("x", x)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), _np(ref(x)),
                                   rtol=1e-5, atol=1e-6)


# ---- ONNX ------------------------------------------------------------------------------------
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _onnx_model(batch="batch"):
    """x [batch, 3, 9, 11], z [batch, 6] -> Conv, BatchNorm, Relu, MaxPool, Flatten, Gemm,
    + z, LayerNormalization, Softmax."""
    init = lambda name, *s: numpy_helper.from_array(  # noqa: E731
        RNG.standard_normal(s).astype(np.float32), name)
    inits = [init("w", 4, 3, 3, 3), init("s", 4), init("bb", 4), init("mu", 4),
             numpy_helper.from_array(RNG.uniform(0.5, 2, 4).astype(np.float32), "var"),
             init("fw", 6, 4 * 4 * 5), init("fb", 6), init("g", 6), init("lb", 6)]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "mu", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["gm"], transB=1),
             helper.make_node("Add", ["gm", "z"], ["a"]),
             helper.make_node("LayerNormalization", ["a", "g", "lb"], ["ln"], axis=-1),
             helper.make_node("Softmax", ["ln"], ["out"], axis=-1)]
    unknown = batch is None
    xb = "" if unknown else batch
    g = helper.make_graph(
        nodes, "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [xb, 3, 9, 11]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1 if unknown else batch, 6])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [xb, 6])], initializer=inits)
    if unknown:  # an unknown dim: no dim_value, no dim_param
        g.input[0].type.tensor_type.shape.dim[0].Clear()
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def test_from_onnx_keeps_dim_params_as_any():
    mod, _ = relay.frontend.from_onnx(_onnx_model())
    main = mod["main"]
    tx, tz = main.params[0].type_annotation, main.params[1].type_annotation
    assert tx.shape[0] is tz.shape[0] and isinstance(tx.shape[0], Any)  # one "batch"
    assert type_str(main.checked_type.ret_type) == "Tensor[(?, 6), float32]"
    mod, _ = relay.frontend.from_onnx(_onnx_model(), shape={"x": (2, 3, 9, 11)})
    assert type_str(mod["main"].params[0].type_annotation) == "Tensor[(2, 3, 9, 11), float32]"
    mod, _ = relay.frontend.from_onnx(_onnx_model(None))  # an unknown dim: an Any of its own
    assert isinstance(mod["main"].params[0].type_annotation.shape[0], Any)


@pytest.mark.parametrize("batch", ["batch", None])
def test_onnx_dynamic_batch_against_onnxruntime(batch):
    m = _onnx_model(batch)
    mod, params = relay.frontend.from_onnx(m)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for b in (1, 3, 8):
        feeds = {"x": RNG.standard_normal((b, 3, 9, 11)).astype(np.float32),
                 "z": RNG.standard_normal((1 if batch is None else b, 6)).astype(np.float32)}
        g.set_input(**feeds)
        g.run()
        np.testing.assert_allclose(g.get_output(0).numpy(), sess.run(None, feeds)[0],
                                   rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_onnx_cnn_dynamic_batch_against_onnxruntime(name):
    from tvmpy.relay.testing import onnx_models

    m = getattr(onnx_models, name)(batch="N", image=32, classes=10)
    mod, params = relay.frontend.from_onnx(m)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for b in (1, 3, 8):
        feeds = onnx_models.input_feeds(m, seed=b, dims={"N": b})
        g.set_input(**feeds)
        g.run()
        want = sess.run(None, feeds)[0]
        np.testing.assert_allclose(g.get_output(0).numpy(), want, rtol=1e-4,
                                   atol=1e-4 * float(np.abs(want).max()))


def test_onnx_shape_of_a_symbolic_dim():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["out"])]
    g = helper.make_graph(nodes, "shape",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ValueError, match=r"Shape node .*known only at run time \(N_\d+\)"):
        relay.frontend.from_onnx(m, dynamic_inputs=False)
    mod, _ = relay.frontend.from_onnx(m)  # shape_of + dyn.reshape, run in the interpreter
    f = relay.create_executor("debug", mod=mod).evaluate()
    for b in (1, 3):
        x = np.arange(4 * b, dtype=np.float32).reshape(b, 4)
        np.testing.assert_array_equal(f(x), x)
    mod, _ = relay.frontend.from_onnx(m, shape={"x": (3, 4)})  # fixed: imports
    assert type_str(mod["main"].checked_type.ret_type) == "Tensor[(3, 4), float32]"


def _f32(*s):
    return RNG.standard_normal(s).astype(np.float32)


_OPS = {  # name: (nodes, x shape with "N", initializers, output elem type)
    "matmul_3d_2d": ([helper.make_node("MatMul", ["x", "w"], ["y"])], ["N", 5, 8],
                     {"w": _f32(8, 6)}),
    "matmul_3d_3d": ([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
                      helper.make_node("MatMul", ["x", "t"], ["y"])], ["N", 5, 7], {}),
    "reshape_minus_one": ([helper.make_node("Reshape", ["x", "s"], ["y"])], ["N", 4, 6],
                          {"s": np.array([-1, 24], np.int64)}),
    "reshape_zero": ([helper.make_node("Reshape", ["x", "s"], ["y"])], ["N", 4, 6],
                     {"s": np.array([0, 2, 12], np.int64)}),
    "flatten_axis2": ([helper.make_node("Flatten", ["x"], ["y"], axis=2)], ["N", 4, 6], {}),
    "expand": ([helper.make_node("Expand", ["x", "s"], ["y"])], ["N", 1, 5],
               {"s": np.array([1, 4, 5], np.int64)}),
    "resize_nearest": ([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
                       ["N", 3, 4, 5], {"sc": np.array([1, 1, 2, 2], np.float32)}),
    "split": ([helper.make_node("Split", ["x", "sp"], ["y", "z"], axis=1)], ["N", 8],
              {"sp": np.array([3, 5], np.int64)}),
    "gather": ([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], ["N", 8],
               {"i": np.array([1, 5, 2], np.int64)}),
    "slice_static_axis": ([helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], ["N", 8],
                          {"s": np.array([2], np.int64), "e": np.array([6], np.int64),
                           "a": np.array([1], np.int64)}),
    "concat_batch": ([helper.make_node("Concat", ["x", "x"], ["y"], axis=0)], ["N", 5], {}),
    "reduce_mean": ([helper.make_node("ReduceMean", ["x"], ["y"], axes=[-1], keepdims=1)],
                    ["N", 5, 8], {}),
    "unsqueeze_squeeze": ([helper.make_node("Unsqueeze", ["x", "a"], ["u"]),
                           helper.make_node("Squeeze", ["u", "a"], ["y"])], ["N", 5],
                          {"a": np.array([1], np.int64)}),
    "conv_transpose": ([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])],
                       ["N", 3, 5, 5], {"w": _f32(3, 4, 3, 3)}),
}


@pytest.mark.parametrize("name", sorted(_OPS))
def test_onnx_ops_with_a_symbolic_batch(name):
    nodes, shape, inits = _OPS[name]
    outs = [o for o in nodes[-1].output]
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    mod, params = relay.frontend.from_onnx(m)
    assert isinstance(mod["main"].params[0].type_annotation.shape[0], Any)
    lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for b in (1, 3):
        x = _f32(b, *shape[1:])
        gm.set_input("x", x)
        gm.run()
        for k, want in enumerate(sess.run(None, {"x": x})):
            np.testing.assert_allclose(gm.get_output(k).numpy(), want, rtol=1e-5, atol=1e-5)


def test_concatenate_unifies_any_with_a_known_size():
    x = relay.var("x", shape=(relay.Any(), 5))
    assert _t(relay.concatenate([x, relay.var("c", shape=(1, 3))], 1)) == \
        "Tensor[(1, 8), float32]"
    with pytest.raises(relay.RelayTypeError, match="does not match"):
        infer_type(relay.concatenate([x, relay.var("d", shape=(2, 3))], 0))


def test_bert_encoder_dynamic_batch_and_sequence_against_onnxruntime():
    """Batch and sequence length both symbolic: the attention's (B * heads, S, d) reshapes
    leave B only inside products, so those kernels take it as a scalar argument."""
    from tvmpy.relay.backend.te_compiler import primitive_shape_args
    from tvmpy.relay.testing import onnx_models

    m = onnx_models.bert_encoder(layers=1, hidden=32, heads=4, seq="S", batch="B",
                                 embeddings=False)
    mod, params = relay.frontend.from_onnx(m)
    assert type_str(mod["main"].checked_type.ret_type) == "Tensor[(?, ?, 32), float32]"
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    import json

    nodes = json.loads(lib.graph_json)["nodes"]
    assert any(n.get("attrs", {}).get("shape_args") for n in nodes)
    assert primitive_shape_args(relay.Function([relay.var("x", shape=(2, 3))],
                                               relay.var("x", shape=(2, 3)))) == []
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = relay.create_executor("debug", mod=mod).evaluate()
    for b, s in ((1, 5), (2, 16), (3, 7)):
        feeds = onnx_models.input_feeds(m, seed=s, dims={"B": b, "S": s})
        g.set_input(**feeds)
        g.run()
        want = sess.run(None, feeds)[0]
        np.testing.assert_allclose(g.get_output(0).numpy(), want, rtol=1e-4, atol=1e-5)
        got = _np(ref(feeds["hidden_states"], **params))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # the interpreter too


def test_two_unrelated_any_dims_broadcast_at_run_time():
    """Broadcasting two independent run-time sizes: the kernel reads a side of size 1 at index
    0; sizes that do not broadcast are refused before any kernel runs, naming the operator."""
    a, b = relay.var("a", shape=(Any(), 4)), relay.var("b", shape=(Any(), 4))
    lib = relay.build(relay.Function([a, b], a + b), "llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for na, nb in ((3, 3), (1, 5), (5, 1)):
        av = np.random.rand(na, 4).astype("float32")
        bv = np.random.rand(nb, 4).astype("float32")
        m.set_input("a", av)
        m.set_input("b", bv)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), av + bv, rtol=1e-6)
    m.set_input("a", np.random.rand(2, 4).astype("float32"))
    m.set_input("b", np.random.rand(3, 4).astype("float32"))
    with pytest.raises(ValueError, match=r"operator add: dimension -2 of the lhs is 2, but "
                                         r"dimension -2 of the rhs is 3"):
        m.run()


def _attention_reshape_model():
    """x (B, S, 32) reshaped to (B, S, 4, 8) by a target computed from Shape(x) (Gather,
    Unsqueeze, Concat with constants: what torch's exporter emits for ``x.view(b, s, 4, 8)``),
    then scores = q @ k^T per head: a batch_matmul of two such reshapes."""
    i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "i0"], ["b"], axis=0),
             helper.make_node("Gather", ["shp", "i1"], ["s"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
             helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
             helper.make_node("Concat", ["b1", "s1", "hd"], ["tgt"], axis=0),
             helper.make_node("Reshape", ["x", "tgt"], ["q"]),
             helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["q"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["qt", "kt"], ["out"])]
    g = helper.make_graph(
        nodes, "attn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 32])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=[i64("i0", 0), i64("i1", 1), i64("ax0", [0]), i64("hd", [4, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def test_onnx_reshape_to_a_shape_computed_from_shape_ops_keeps_its_dims():
    """The Reshape target (B, S, 4, 8) is followed symbolically: the result keeps the input's
    own B and S (not fresh Anys) and the static 4, 8, so the attention's batch_matmul types
    (it did not: 'broadcast_to ... cannot broadcast'), and the build runs at several sizes."""
    m = _attention_reshape_model()
    mod, params = relay.frontend.from_onnx(m)
    b, s = mod["main"].params[0].type_annotation.shape[:2]
    ret = mod["main"].checked_type.ret_type
    assert ret.shape[0] is b and ret.shape[2] is s and ret.shape[3] is s and ret.shape[1] == 4
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for bs in ((1, 5), (3, 7), (2, 1)):
        x = RNG.standard_normal((*bs, 32)).astype(np.float32)
        g.set_input(x=x)
        g.run()
        want = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(g.get_output(0).numpy(), want, rtol=1e-5, atol=1e-5)


def test_onnx_shape_values_not_known_stay_dynamic():
    """A Reshape target from data (not from Shape ops) still takes the dyn.reshape path."""
    nodes = [helper.make_node("Cast", ["t"], ["ti"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["x", "ti"], ["out"])]
    g = helper.make_graph(
        nodes, "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 6]),
                     helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    mod, _ = relay.frontend.from_onnx(m)
    assert "dyn.reshape" in mod.astext()


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("h0", [False, True])
def test_onnx_recurrence_with_run_time_batch_and_steps(op, h0):
    """LSTM / GRU over X (S, B, 5) with both sizes symbolic: a loop on the VM whose output
    accumulator starts as 0 rows of the state's own (symbolic) shape. It was a (0, 0, 0)
    constant that the first concatenation could not type when the state's batch is an
    expression (an initial state whose batch is another symbol: ``max(Bh, B)``):
    'float32(1, max(any, batch), H) does not match float32(0, 0, 0)'. Without initial states
    the zero state is taken from step 0 of a symbolic step axis."""
    from tvmpy.runtime.vm import VirtualMachine

    H, E, G = 3, 5, 4 if op == "LSTM" else 3
    w = RNG.standard_normal((1, G * H, E)).astype(np.float32) * 0.5
    r = RNG.standard_normal((1, G * H, H)).astype(np.float32) * 0.5
    b = RNG.standard_normal((1, 2 * G * H)).astype(np.float32) * 0.1
    ins = ["x", "w", "r", "b"] + (["", "h0"] if h0 else [])
    node = helper.make_node(op, ins, ["y", "yh"], hidden_size=H)
    g = helper.make_graph(
        [node], "rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S", "B", E])]
        + ([helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, "Bh", H])] if h0 else []),
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("yh", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(r, "r"),
                     numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    mod, params = relay.frontend.from_onnx(m)
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    vm = VirtualMachine(exe, tvm.cpu(0))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for s, bt in ((4, 1), (7, 3), (1, 2)):
        feeds = {"x": RNG.standard_normal((s, bt, E)).astype(np.float32)}
        if h0:
            feeds["h0"] = RNG.standard_normal((1, bt, H)).astype(np.float32)
        got = vm.invoke("main", **feeds)
        for o, want in zip(got, sess.run(None, feeds)):
            np.testing.assert_allclose(o.numpy(), want, rtol=1e-5, atol=1e-5)


def test_onnx_expand_to_the_batch_by_torch_minus_one_pattern():
    """``cls.expand(x.shape[0], -1, -1)`` as torch's exporter writes it (the target vector
    reshaped, compared with -1 by Equal, Where picks the data's dims): followed symbolically,
    the Expand keeps the input's batch and the static 1, 8, so the concatenation with x and
    the position add type and build (ViT's class token); the dims came out as fresh Anys and
    the add failed to lower ('cannot prove ... any + 16 vs 17')."""
    torch = pytest.importorskip("torch")
    import io

    class ClsToken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cls = torch.nn.Parameter(torch.randn(1, 1, 8))
            self.pos = torch.nn.Parameter(torch.randn(1, 6, 8))

        def forward(self, x):
            return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos

    f = io.BytesIO()
    torch.onnx.export(ClsToken().eval(), (torch.randn(2, 5, 8),), f, input_names=["x"],
                      dynamic_axes={"x": {0: "B"}}, opset_version=17, dynamo=False)
    m = onnx.load_from_string(f.getvalue())
    assert {"Equal", "Where", "Expand"} <= {n.op_type for n in m.graph.node}
    mod, params = relay.frontend.from_onnx(m)
    ret = mod["main"].checked_type.ret_type
    assert ret.shape[0] is mod["main"].params[0].type_annotation.shape[0] and \
        list(ret.shape[1:]) == [6, 8]
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for b in (1, 3):
        x = RNG.standard_normal((b, 5, 8)).astype(np.float32)
        g.set_input(x=x)
        g.run()
        np.testing.assert_allclose(g.get_output(0).numpy(), sess.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)


def test_onnx_resize_to_sizes_computed_from_shape_ops():
    """Resize by ``sizes = Concat(Shape(x)[:2], [9, 7])`` (torch's
    ``F.interpolate(y, size=(9, 7))`` on a dynamic batch, as DeepLabV3's ASPP pooling branch
    exports): the batch and channels are the input's own, only H and W resize, so the output
    keeps its static channel count (it was an Any that the next conv refused)."""
    i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Slice", ["shp", "s0", "s2"], ["nc"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear",
                              coordinate_transformation_mode="half_pixel")]
    g = helper.make_graph(
        nodes, "rs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[i64("s0", [0]), i64("s2", [2]), i64("hw", [9, 7])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    mod, params = relay.frontend.from_onnx(m)
    assert list(mod["main"].checked_type.ret_type.shape[1:]) == [3, 9, 7]
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for b in (1, 2):
        x = RNG.standard_normal((b, 3, 4, 5)).astype(np.float32)
        gm.set_input(x=x)
        gm.run()
        np.testing.assert_allclose(gm.get_output(0).numpy(), sess.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)


def test_onnx_slice_and_range_to_a_symbolic_sequence_length():
    """``table[:, :S]`` (Slice with an end read by Shape) and ``arange(S)`` (Range) with S the
    input's symbolic sequence length, as transformers' position ids are written: both keep S
    itself as their dimension (take of the indices 0..S-1), so adding them to the input types
    as (B, S) (they were fresh Anys: ``max(any, S)``, and BERT's attention reshapes then could
    not be lowered); compared with onnxruntime at several sizes."""
    i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)  # noqa: E731
    table = RNG.standard_normal((1, 10)).astype(np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "i1"], ["s"], axis=0),
             helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
             helper.make_node("Slice", ["table", "zero1", "s1", "ax1"], ["pos"]),
             helper.make_node("Range", ["zero", "s", "one"], ["ar"]),
             helper.make_node("Cast", ["ar"], ["arf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "pos"], ["y0"]),
             helper.make_node("Add", ["y0", "arf"], ["out"])]
    g = helper.make_graph(
        nodes, "pos", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=[i64("i1", 1), i64("ax0", [0]), i64("zero1", [0]), i64("ax1", [1]),
                     i64("zero", 0), i64("one", 1), numpy_helper.from_array(table, "table")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    mod, params = relay.frontend.from_onnx(m)
    b, s = mod["main"].params[0].type_annotation.shape
    ret = mod["main"].checked_type.ret_type
    assert ret.shape[0] is b and ret.shape[1] is s
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in ((1, 7), (3, 10), (2, 1)):
        x = RNG.standard_normal(shape).astype(np.float32)
        gm.set_input(x=x)
        gm.run()
        np.testing.assert_allclose(gm.get_output(0).numpy(), sess.run(None, {"x": x})[0],
                                   rtol=1e-6, atol=1e-6)


def test_onnx_mask_of_ones_of_the_input_shape():
    """``mask = ones(ids.shape)`` as transformers write it (ConstantOfShape(Shape(ids))),
    reshaped to ``(B, -1)`` and added to scores of shape (B, S, S): the mask keeps the input's
    own (B, S) (a static ``full`` over them), so the graph executor builds it. It was a
    ``dyn.full`` of fresh sizes: GPT-2 and T5 with a dynamic batch and sequence then failed
    ('dimension(s) [0, 1] (any, any) are not sizes of any graph input', and in the VM 'the shape
    function of reshape failed ... batch * 4 cannot be used as a Python integer')."""
    i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("ConstantOfShape", ["shp"], ["ones"],
                              value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("Gather", ["shp", "i0"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
             helper.make_node("Concat", ["b1", "minus1"], ["tgt"], axis=0),
             helper.make_node("Reshape", ["ones", "tgt"], ["mask"]),
             helper.make_node("Unsqueeze", ["mask", "ax1"], ["mask3"]),     # (B, 1, S)
             helper.make_node("Unsqueeze", ["x", "ax2"], ["xq"]),           # (B, S, 1)
             helper.make_node("Mul", ["xq", "mask3"], ["scores"]),          # (B, S, S)
             helper.make_node("Sub", ["one", "mask3"], ["inv"]),
             helper.make_node("Mul", ["inv", "neg"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["biased"]),
             helper.make_node("Softmax", ["biased"], ["out"], axis=-1)]
    g = helper.make_graph(
        nodes, "mask", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=[i64("i0", 0), i64("ax0", [0]), i64("minus1", [-1]), i64("ax1", [1]),
                     i64("ax2", [2]), numpy_helper.from_array(np.float32(1), "one"),
                     numpy_helper.from_array(np.float32(-1e4), "neg")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    mod, params = relay.frontend.from_onnx(m)
    assert "dyn." not in mod.astext()
    b, s = mod["main"].params[0].type_annotation.shape
    ret = mod["main"].checked_type.ret_type
    assert ret.shape[0] is b and ret.shape[1] is s and ret.shape[2] is s
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in ((1, 7), (3, 11), (2, 1)):
        x = RNG.standard_normal(shape).astype(np.float32)
        gm.set_input(x=x)
        gm.run()
        np.testing.assert_allclose(gm.get_output(0).numpy(), sess.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)


def test_onnx_shape_of_a_size_decided_by_data_stays_dynamic():
    """An Expand to ``(B, K)`` with K the count of a NonZero whose result is used only by a
    Shape op: a static ``broadcast_to(shape=[B, K])`` would keep K in an attribute while the
    NonZero that decides it is dead code (nothing can compute K: the VM failed with 'the shape
    function of broadcast_to failed ... B cannot be used as a Python integer'); a size that
    neither the data nor a graph input has takes the dyn operator, which reads the shape
    tensor (compared with onnxruntime at several sizes and counts, 0 included)."""
    from tvmpy.runtime.vm import VirtualMachine

    i64 = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["nz"]),              # (2, K)
             helper.make_node("Shape", ["nz"], ["nzs"]),
             helper.make_node("Slice", ["nzs", "s1", "s2"], ["k1"]),    # [K]
             helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Slice", ["xs", "s0", "s1"], ["b1"]),     # [B]
             helper.make_node("Concat", ["b1", "k1"], ["tgt"], axis=0),
             helper.make_node("Slice", ["x", "s0", "s1", "s1"], ["col"]),   # (B, 1)
             helper.make_node("Expand", ["col", "tgt"], ["e"]),         # (B, K)
             helper.make_node("Concat", ["k1", "b1"], ["tgt2"], axis=0),
             helper.make_node("ConstantOfShape", ["tgt2"], ["ones"],
                              value=numpy_helper.from_array(np.full(1, 2, np.float32))),
             helper.make_node("Transpose", ["ones"], ["onest"]),        # (B, K)
             helper.make_node("Mul", ["e", "onest"], ["out"])]
    g = helper.make_graph(
        nodes, "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 5])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.float32(0), "zero"), i64("s0", [0]),
                     i64("s1", [1]), i64("s2", [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    mod, params = relay.frontend.from_onnx(m)
    assert "dyn.broadcast_to" in mod.astext() and "dyn.full" in mod.astext()
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    vm = VirtualMachine(exe, tvm.cpu(0))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    for b, lo in ((1, 0.0), (3, 0.0), (2, 9.0)):  # (the last: no positive value, K = 0)
        x = (RNG.standard_normal((b, 5)) - lo).astype(np.float32)
        want = sess.run(None, {"x": x})[0]
        got = vm.invoke("main", x=x).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_batch_matmul_over_a_broadcast_reduction_extent():
    """``batch_matmul(a + c, b)`` with a (2, 3, P), c (1, 1, Q), b (2, R, 5): A's reduction
    extent is ``max(P, Q)`` and B's is R, which only run time can compare; relay.build lowered
    it with 'batch_matmul: reduction extents differ' (the T5 encoder's bias over relative
    positions). Now the kernel asserts the extents before computing: right at several sizes,
    and sizes that disagree are refused before anything runs."""
    p, q, r = Any(), Any(), Any()
    a, b = relay.var("a", shape=(2, 3, p)), relay.var("b", shape=(2, r, 5))
    c = relay.var("c", shape=(1, 1, q))
    out = relay.nn.batch_matmul(relay.add(a, c), b, transpose_b=False)
    mod = tvm.IRModule.from_expr(relay.Function([a, b, c], out))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for kp, kq in ((1, 1), (7, 7), (6, 1), (1, 4)):  # (a side of 1 broadcasts)
        k = max(kp, kq)
        av = RNG.standard_normal((2, 3, kp)).astype(np.float32)
        bv = RNG.standard_normal((2, k, 5)).astype(np.float32)
        cv = RNG.standard_normal((1, 1, kq)).astype(np.float32)
        g.set_input(a=av, b=bv, c=cv)
        g.run()
        np.testing.assert_allclose(g.get_output(0).numpy(), (av + cv) @ bv, rtol=1e-5,
                                   atol=1e-5)
    g.set_input(a=RNG.standard_normal((2, 3, 4)).astype(np.float32),
                b=RNG.standard_normal((2, 6, 5)).astype(np.float32),
                c=RNG.standard_normal((1, 1, 4)).astype(np.float32))
    with pytest.raises(ValueError, match="must be equal|reduction extents differ"):
        g.run()
