"""Bad ONNX models and inputs (issue 24, point 5): what onnxruntime refuses is refused, naming
the node (and the attribute), never imported or run into a silent wrong answer.

- indices out of range for Gather / GatherElements / GatherND / ScatterElements / ScatterND:
  an error naming the node when the model runs (graph executor, VM, interpreter); constant
  indices at import; negative indices in range still match onnxruntime;
- invalid models (attribute of the wrong type or out of range for the rank, a type constraint
  broken, an operator of a later opset, an empty model): refused at import;
- a long chain of elementwise operators (deeper than Python's recursion limit) compiles.
"""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvmpy.contrib.onnx_backend import TvmpyBackend  # noqa: E402
from tvmpy.relay.frontend import from_onnx  # noqa: E402

RNG = np.random.default_rng(24)
F, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
EXECUTORS = [("graph", 3), ("vm", 3), ("debug", None)]


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)


# ---- indices out of range ----------------------------------------------------------------------
def _gather(idx_shape, axis=1, dt=I64):
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=axis, name="gather_node")
    return _model([node], [_vi("x", F, [4, 5, 3]), _vi("i", dt, list(idx_shape))],
                  [_vi("y", F, None)]), {"x": (4, 5, 3)}, 5


def _gather_elements(idx_shape, axis=1, dt=I64):
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis, name="ge_node")
    return _model([node], [_vi("x", F, [4, 5, 3]), _vi("i", dt, list(idx_shape))],
                  [_vi("y", F, None)]), {"x": (4, 5, 3)}, 5


def _gather_nd(idx_shape, dt=I64):
    node = helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd_node")
    return _model([node], [_vi("x", F, [4, 5, 3]), _vi("i", dt, list(idx_shape))],
                  [_vi("y", F, None)]), {"x": (4, 5, 3)}, None


def _scatter_elements(idx_shape, axis=1, dt=I64, reduction="none"):
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis,
                            reduction=reduction, name="se_node")
    return _model([node], [_vi("x", F, [4, 5, 3]), _vi("i", dt, list(idx_shape)),
                           _vi("u", F, list(idx_shape))], [_vi("y", F, None)], opset=18), \
        {"x": (4, 5, 3)}, 5


def _scatter_nd(idx_shape, dt=I64):
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], name="snd_node")
    upd = list(idx_shape[:-1]) + [4, 5, 3][idx_shape[-1]:]
    return _model([node], [_vi("x", F, [4, 5, 3]), _vi("i", dt, list(idx_shape)),
                           _vi("u", F, upd)], [_vi("y", F, None)]), {"x": (4, 5, 3)}, None


def _feeds(model, idx):
    feeds = {}
    for vi in model.graph.input:
        if vi.name == "i":
            feeds["i"] = idx
        else:
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            feeds[vi.name] = RNG.standard_normal(shape).astype(np.float32)
    return feeds


def _nd_indices(rows, dt=np.int64):
    return np.asarray(rows, dtype=dt)


# (name, model, good indices with negatives, bad indices)
CASES = [
    ("Gather", _gather((2, 3)), np.array([[0, -1, 4], [-5, 2, 3]]),
     [np.array([[0, 5, 1], [1, 1, 1]]), np.array([[0, -6, 1], [1, 1, 1]])]),
    ("Gather-int32", _gather((4,), dt=I32), np.array([-2, 0, 4, -5], np.int32),
     [np.array([1, 2, 3, 70000], np.int32)]),
    ("GatherElements", _gather_elements((4, 2, 3)),
     RNG.integers(-5, 5, (4, 2, 3)),
     [np.full((4, 2, 3), 5), np.full((4, 2, 3), -6)]),
    ("GatherND", _gather_nd((2, 2)), _nd_indices([[3, -1], [-4, 4]]),
     [_nd_indices([[4, 0], [0, 0]]), _nd_indices([[0, 0], [0, -6]])]),
    ("ScatterElements", _scatter_elements((4, 2, 3)),
     np.stack([np.stack([RNG.permutation(5)[:2] - 5 * (k % 2) for _ in range(3)], -1)
               for k in range(4)]),
     [np.full((4, 2, 3), 5), np.full((4, 2, 3), -6)]),
    ("ScatterND", _scatter_nd((2, 2)), _nd_indices([[3, -1], [-4, 2]]),
     [_nd_indices([[0, 5], [1, 1]]), _nd_indices([[-5, 0], [1, 1]])]),
]


@pytest.mark.parametrize("executor,opt", EXECUTORS)
@pytest.mark.parametrize("name,case,good,bads", CASES, ids=[c[0] for c in CASES])
def test_indices_out_of_range_raise_naming_the_node(name, case, good, bads, executor, opt):
    model, _, _ = case
    node = model.graph.node[0].name
    rep = TvmpyBackend.prepare(model, executor=executor, opt_level=opt)
    feeds = _feeds(model, good)
    order = [vi.name for vi in model.graph.input]
    got = rep.run([feeds[n] for n in order])
    want = _ort(model, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    for bad in bads:
        feeds["i"] = bad.astype(good.dtype)
        with pytest.raises(Exception, match="(?i)out of (range|bounds)|invalid"):  # noqa: B017
            _ort(model, feeds)  # onnxruntime refuses it too
        with pytest.raises(RuntimeError, match=f"{model.graph.node[0].op_type} node '{node}'.*"
                                               "index out of range"):
            rep.run([feeds[n] for n in order])
    # the module still runs after the error
    feeds["i"] = good
    np.testing.assert_allclose(rep.run([feeds[n] for n in order])[0], want[0], rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("op", ["Gather", "GatherElements", "ScatterElements"])
def test_constant_indices_out_of_range_refused_at_import(op):
    idx = np.array([[0, 1], [2, 7]], np.int64)
    nodes = [helper.make_node(op, ["x", "i"] + (["u"] if op.startswith("Scatter") else []),
                              ["y"], axis=1, name="n1")]
    inits = [numpy_helper.from_array(idx, "i")]
    if op.startswith("Scatter"):
        inits.append(numpy_helper.from_array(np.ones((2, 2), np.float32), "u"))
    model = _model(nodes, [_vi("x", F, [2, 4])], [_vi("y", F, None)], inits, opset=18)
    with pytest.raises(ValueError, match=rf"{op} node 'n1': index 7 \(at \(1, 1\) of the "
                                         r"constant indices 'i'\) is out of range for axis 1 of "
                                         r"size 4 \(valid: -4..3\)"):
        from_onnx(model)


def test_gather_over_a_symbolic_axis_checks_at_run_time():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="g")
    model = _model([node], [_vi("x", F, ["N", 3]), _vi("i", I64, [2])], [_vi("y", F, None)])
    rep = TvmpyBackend.prepare(model, executor="vm", opt_level=3)
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    np.testing.assert_allclose(rep.run([x, np.array([-6, 5])])[0], x[[-6, 5]])
    with pytest.raises(RuntimeError, match="Gather node 'g': index out of range.*axis 0"):
        rep.run([x, np.array([0, 6])])


# ---- invalid models, refused at import -----------------------------------------------------------
def _one(op, inputs, attrs, opset=17, inits=(), outputs=("y",), name="bad"):
    node = helper.make_node(op, [i[0] for i in inputs], list(outputs), name=name, **attrs)
    return _model([node], [_vi(n, t, s) for n, t, s in inputs if n not in {i.name for i in inits}],
                  [_vi(o, F, None) for o in outputs], inits, opset=opset)


INVALID = [
    ("gather-axis-7", _one("Gather", [("x", F, [2, 3]), ("i", I64, [2])], {"axis": 7}),
     r"Gather node 'bad': .*axis.*\(axis=7\)"),
    ("softmax-axis-float", _one("Softmax", [("x", F, [2, 3])], {"axis": 1.5}),
     r"Softmax node 'bad': attribute 'axis' must be of type INT, got FLOAT 1.5"),
    ("transpose-perm-string", _one("Transpose", [("x", F, [2, 3])], {"perm": "abc"}),
     r"Transpose node 'bad': attribute 'perm' must be of type INTS, got STRING 'abc'"),
    ("transpose-perm-repeated", _one("Transpose", [("x", F, [2, 3])], {"perm": [0, 0]}),
     r"Transpose node 'bad': .*perm.*repeated"),
    ("quantize-int32-zero-point", _one(
        "QuantizeLinear", [("x", F, [2, 3]), ("s", F, []), ("z", I32, [])], {},
        inits=[numpy_helper.from_array(np.float32(0.1), "s"),
               numpy_helper.from_array(np.int32(3), "z")]),
     r"QuantizeLinear node 'bad': .*zero_point.*int32"),
    ("dequantize-int32-zero-point", _one(
        "DequantizeLinear", [("x", TensorProto.INT8, [2, 3]), ("s", F, []), ("z", I32, [])], {},
        inits=[numpy_helper.from_array(np.float32(0.1), "s"),
               numpy_helper.from_array(np.int32(3), "z")]),
     r"DequantizeLinear node 'bad': .*int32"),
    ("unknown-attribute", _one("Relu", [("x", F, [2, 3])], {"alpha": 0.5}),
     r"Relu node 'bad': unknown attribute 'alpha'"),
    ("missing-required-attribute", _one("Cast", [("x", F, [2, 3])], {}),
     r"Cast node 'bad': missing required attribute 'to'"),
    ("op-of-a-later-opset", _one("Mish", [("x", F, [2, 3])], {}, opset=17),
     r"Mish node 'bad': Mish is not an operator of opset 17 \(it was added in opset 18\)"),
    ("wrong-output-type", _model([helper.make_node("Relu", ["x"], ["y"], name="bad")],
                                 [_vi("x", F, [2, 3])], [_vi("y", I64, [2, 3])]),
     r"Relu node 'bad': .*float32 vs int64"),
]


@pytest.mark.parametrize("model,match", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_model_refused_at_import(model, match):
    with pytest.raises(ValueError, match=match):
        from_onnx(model)


def test_unnamed_node_is_named_by_position_and_output():
    model = _model([helper.make_node("Relu", ["x"], ["r"]),
                    helper.make_node("Softmax", ["r"], ["y"], axis=1.5)],
                   [_vi("x", F, [2, 3])], [_vi("y", F, None)])
    with pytest.raises(ValueError, match=r"Softmax node #1 \(output 'y'\): attribute 'axis'"):
        from_onnx(model)


@pytest.mark.parametrize("op,attrs,match", [
    ("Gather", {"axis": 7}, r"axis=7 is out of range for an input of rank 2 \(valid: -2..1\)"),
    ("Softmax", {"axis": -3}, r"axis=-3 is out of range for an input of rank 2"),
    ("Flatten", {"axis": 3}, r"axis=3 is out of range for an input of rank 2 \(valid: -2..2\)"),
])
def test_axis_out_of_range_when_shapes_are_given_at_import(op, attrs, match):
    """The model declares no input shapes (ONNX inference cannot check the axis): the importer
    does, from the shapes given to from_onnx, instead of taking the axis modulo the rank."""
    ins = [("x", F, None)] + ([("i", I64, [2])] if op == "Gather" else [])
    model = _one(op, ins, attrs)
    with pytest.raises(ValueError, match=rf"{op} node 'bad': attribute {match}"):
        from_onnx(model, {"x": (2, 3)})
    assert op != "Flatten" or from_onnx(_one(op, ins, {"axis": 2}), {"x": (2, 3)})


def test_valid_negative_axes_still_import():
    model = _one("Gather", [("x", F, [2, 3]), ("i", I64, [2])], {"axis": -1})
    mod, _ = from_onnx(model)
    assert "take" in str(mod["main"])


def test_model_without_a_default_opset_refused():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, [2])], [_vi("y", F, [2])])
    del model.opset_import[:]
    with pytest.raises(ValueError, match="imports no opset of the default domain"):
        from_onnx(model)


def test_recursive_model_local_functions_refused():
    ops = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    funcs = [helper.make_function("local", f"F{k}", ["x"], ["y"],
                                  [helper.make_node(f"F{(k + 1) % 2}", ["x"], ["y"],
                                                    domain="local")], ops) for k in range(2)]
    g = helper.make_graph([helper.make_node("F0", ["x"], ["y"], domain="local")], "g",
                          [_vi("x", F, [2])], [_vi("y", F, [2])])
    model = helper.make_model(g, opset_imports=ops, functions=funcs, ir_version=9)
    with pytest.raises(ValueError, match="invalid ONNX model: Cycle detected in model-local "
                                         "function references"):
        from_onnx(model)


@pytest.mark.parametrize("content", [b"", b"\x08\x07"])
def test_model_without_a_graph(content):
    model = onnx.ModelProto()
    model.ParseFromString(content)
    with pytest.raises(ValueError, match="not an ONNX model: it has no graph"):
        from_onnx(model)


# ---- deep graphs ---------------------------------------------------------------------------------
def test_long_elementwise_chain_compiles_and_runs():
    """600 Sigmoid nodes in a row: groups of up to 256 nodes (TVM's fusion depth), which FuseOps
    gives the recursion room lowering them needs (a group of 256 Sigmoids used to raise
    RecursionError)."""
    n = 600
    nodes = [helper.make_node("Sigmoid", [f"t{k}"], [f"t{k + 1}"]) for k in range(n)]
    model = _model(nodes, [_vi("t0", F, [2, 3])], [_vi(f"t{n}", F, [2, 3])])
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    got = TvmpyBackend.prepare(model, executor="graph", opt_level=3).run([x])[0]
    np.testing.assert_allclose(got, _ort(model, {"t0": x})[0], rtol=1e-5)


@pytest.mark.parametrize("op", ["gather", "gather_nd"])
def test_relay_gathers_never_read_out_of_bounds(op):
    """relay.gather / gather_nd called directly (no check_indices before them) clamp an index
    out of range instead of reading far outside the data (10**9 rows past a 4-row tensor)."""
    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    x = relay.var("x", shape=(4, 3))
    if op == "gather":
        i = relay.var("i", shape=(2, 3), dtype="int64")
        y = relay.gather(x, 0, i)
        idx = np.array([[10**9, 0, 1], [-(10**9), 3, 2]], np.int64)
        want_rows = np.clip(np.where(idx < 0, idx + 4, idx), 0, 3)
        want = lambda xv: np.take_along_axis(xv, want_rows, 0)  # noqa: E731
    else:
        i = relay.var("i", shape=(1, 2), dtype="int64")
        y = relay.gather_nd(x, i)
        idx = np.array([[10**9, 2]], np.int64)
        want = lambda xv: xv[[3, 2]]  # noqa: E731
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x, i], y)), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    xv = RNG.standard_normal((4, 3)).astype(np.float32)
    m.set_input("x", xv)
    m.set_input("i", idx)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), want(xv))


def test_check_indices_on_a_gpu_target_clamps():
    """A GPU kernel cannot fail a call: on OpenCL check_indices wraps and clamps (memory safe,
    no error); in range the results are exact."""
    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.op.index_check import check_indices

    assert tvm.opencl(0).exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    x = relay.var("x", shape=(4, 5, 3))
    i = relay.var("i", shape=(2, 2), dtype="int64")
    y = relay.gather_nd(x, relay.transpose(check_indices(i, x, [0, 1], "GatherND node 'g'"),
                                           [1, 0]))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x, i], y)), target="opencl")
    m = graph_executor.GraphModule(lib["default"](tvm.opencl(0)))
    xv = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    for iv in ([[3, -1], [-4, 4]], [[9, -1], [-9, 40]]):
        iv = np.array(iv, np.int64)
        m.set_input("x", xv)
        m.set_input("i", iv)
        m.run()
        c = np.clip(np.where(iv < 0, iv + [4, 5], iv), 0, [3, 4])
        np.testing.assert_array_equal(m.get_output(0).numpy(), xv[c[:, 0], c[:, 1]])
