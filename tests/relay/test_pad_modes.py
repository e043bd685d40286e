"""relay nn.pad in edge / reflect / wrap modes: the interpreter and relay.build (llvm at opt 0
and 3, and the C target) against numpy.pad; fused with neighbours and in front of a blocked
convolution; the type relation refuses the pads a mode cannot fill; torch's replicate / reflect
pads (fuzzer reproducers) import and build."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.op._rel import RelayTypeError
from tvmpy.relay.type_infer import infer_type

MODES = ["edge", "reflect", "wrap"]
RNG = np.random.default_rng(3)


def _module(out):
    return tvm.IRModule.from_expr(relay.Function(free_vars(out), out))


def _run(lib, feeds):
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(**feeds)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def _build_run(out, feeds, opt, target="llvm", params=None):
    with tvm.transform.PassContext(opt_level=opt):
        lib = relay.build(_module(out), target=target, params=params)
    return _run(lib, feeds)[0]


def _interpret(out, values):
    mod = _module(out)
    return np.asarray(relay.create_executor("debug", mod).evaluate()(
        *[values[p.name_hint] for p in mod["main"].params]))


@pytest.mark.parametrize("opt", [0, 3])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pw", [
    ((4,), [(3, 1)]),
    ((2, 3, 4), [(0, 0), (1, 2), (3, 0)]),
    ((1, 2, 3, 4, 5), [(0, 0), (1, 0), (2, 2), (0, 3), (4, 1)]),
    ((3, 1), [(2, 2), (0, 0)]),
])
def test_build_matches_numpy(mode, shape, pw, opt):
    x = relay.var("x", shape=shape)
    xv = RNG.standard_normal(shape).astype("float32")
    got = _build_run(relay.nn.pad(x, pw, pad_mode=mode), {"x": xv}, opt)
    np.testing.assert_array_equal(got, np.pad(xv, pw, mode=mode))


@pytest.mark.parametrize("mode", MODES)
def test_c_target_and_int_data(mode):
    x = relay.var("x", shape=(3, 4), dtype="int32")
    xv = RNG.integers(-9, 9, size=(3, 4)).astype("int32")
    pw = [(2, 1), (1, 3)]
    got = _build_run(relay.nn.pad(x, pw, pad_mode=mode), {"x": xv}, 3, target="c")
    np.testing.assert_array_equal(got, np.pad(xv, pw, mode=mode))


@pytest.mark.parametrize("mode,pw", [("edge", [(0, 0), (9, 2)]), ("wrap", [(5, 0), (7, 8)])])
def test_pads_beyond_the_axis(mode, pw):
    """edge and wrap (numpy's semantics) accept pads larger than the axis."""
    x = relay.var("x", shape=(2, 3))
    xv = RNG.standard_normal((2, 3)).astype("float32")
    for opt in (0, 3):
        got = _build_run(relay.nn.pad(x, pw, pad_mode=mode), {"x": xv}, opt)
        np.testing.assert_array_equal(got, np.pad(xv, pw, mode=mode))


@pytest.mark.parametrize("opt", [0, 3])
@pytest.mark.parametrize("mode", MODES)
def test_fused_with_neighbours_and_a_convolution(mode, opt):
    """exp -> pad -> conv2d -> relu: at opt 3 the pad of H and W runs in the blocked layout."""
    x = relay.var("x", shape=(1, 8, 5, 6))
    w = relay.var("w", shape=(8, 8, 3, 3))
    p = relay.nn.pad(relay.exp(x), [(0, 0), (0, 0), (1, 2), (2, 1)], pad_mode=mode)
    out = relay.nn.relu(relay.nn.conv2d(p, w))
    values = {"x": RNG.standard_normal((1, 8, 5, 6)).astype("float32"),
              "w": RNG.standard_normal((8, 8, 3, 3)).astype("float32")}
    got = _build_run(out, {"x": values["x"]}, opt, params={"w": values["w"]})
    np.testing.assert_allclose(got, _interpret(out, values), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_interpreter_matches_numpy(mode):
    x = relay.var("x", shape=(2, 5))
    xv = RNG.standard_normal((2, 5)).astype("float32")
    pw = [(1, 1), (4, 3)]
    got = _interpret(relay.nn.pad(x, pw, pad_mode=mode), {"x": xv})
    np.testing.assert_array_equal(got, np.pad(xv, pw, mode=mode))


@pytest.mark.parametrize("shape,pw,match", [
    ((2, 1), [(0, 0), (1, 0)], r"reflect pads \(1, 0\) of axis 1 must be smaller than its size 1"),
    ((3,), [(0, 3)], r"reflect pads \(0, 3\) of axis 0 must be smaller than its size 3"),
])
def test_reflect_pads_too_large_refused(shape, pw, match):
    x = relay.var("x", shape=shape)
    with pytest.raises(RelayTypeError, match=match):
        infer_type(relay.nn.pad(x, pw, pad_mode="reflect"))


@pytest.mark.parametrize("mode", MODES)
def test_mode_pad_of_empty_axis_refused(mode):
    x = relay.var("x", shape=(0, 2))
    with pytest.raises(RelayTypeError, match=f"cannot pad the empty axis 0 .* in {mode} mode"):
        infer_type(relay.nn.pad(x, [(1, 0), (0, 0)], pad_mode=mode))


def test_empty_tensor_padded_elsewhere():
    x = relay.var("x", shape=(0, 2))
    for mode in MODES:
        for opt in (0, 3):
            got = _build_run(relay.nn.pad(x, [(0, 0), (1, 1)], pad_mode=mode),
                             {"x": np.zeros((0, 2), "float32")}, opt)
            assert got.shape == (0, 4)


def test_unknown_mode_refused():
    with pytest.raises(ValueError, match="pad_mode must be one of constant, edge, reflect, wrap"):
        relay.nn.pad(relay.var("x", shape=(3,)), [(1, 1)], pad_mode="symmetric")


@pytest.mark.parametrize("opt", [0, 3])
def test_torch_replication_and_reflection_pads(opt):
    """Fuzzer reproducers: nn.pad 'edge' / 'reflect' had no compute (relay.build failed)."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from tvmpy.relay.frontend import from_pytorch

    for module, shape in [(nn.ReplicationPad1d((1, 2)), (2, 3, 4)),
                          (nn.ReflectionPad2d((1, 2, 2, 0)), (1, 2, 3, 4)),
                          (nn.ReplicationPad3d((1, 0, 0, 2, 1, 1)), (1, 1, 2, 3, 2)),
                          (nn.CircularPad2d((1, 2, 2, 1)), (2, 3, 4, 5))]:
        xv = RNG.standard_normal(shape).astype("float32")
        want = module.eval()(torch.from_numpy(xv)).numpy()
        mod, params = from_pytorch(module.eval(), [("x", shape)])
        with tvm.transform.PassContext(opt_level=opt):
            lib = relay.build(mod, target="llvm", params=params)
        np.testing.assert_array_equal(_run(lib, {"x": xv})[0], want)


def _onnx_pad_model(mode, shape, pads, axes=None):
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array(pads, np.int64), "p")]
    names = ["x", "p"]
    if axes is not None:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "a"))
        names += ["", "a"]
    g = helper.make_graph([helper.make_node("Pad", names, ["y"], mode=mode)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    return m


@pytest.mark.parametrize("mode,shape,pads,axes", [
    ("edge", (2, 3, 4), [0, 2, 1, 1, 0, 3], None),
    ("reflect", (2, 3, 4), [1, 2, 3, 1, 0, 3], None),
    ("wrap", (2, 3), [3, 7, 5, 2], None),             # wrap pads beyond the axis
    ("edge", (1, 3, 4), [5, 2], [-1]),                # only the last axis (the axes input)
])
def test_onnx_pad_is_nn_pad(mode, shape, pads, axes):
    """ONNX Pad converts to one nn.pad in every mode, and agrees with onnxruntime built."""
    ort = pytest.importorskip("onnxruntime")
    from tvmpy.relay.frontend import from_onnx

    m = _onnx_pad_model(mode, shape, pads, axes)
    xv = RNG.standard_normal(shape).astype("float32")
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": xv})[0]
    mod, params = from_onnx(m, {"x": shape})
    body = mod["main"].body
    assert body.op.name == "nn.pad" and body.attrs.pad_mode == mode
    for opt in (0, 3):
        with tvm.transform.PassContext(opt_level=opt):
            lib = relay.build(mod, target="llvm", params=params)
        np.testing.assert_array_equal(_run(lib, {"x": xv})[0], want)


@pytest.mark.parametrize("mode,shape,pads", [
    ("reflect", (3, 1), [0, 1, 0, 0]),
    ("reflect", (3, 4), [3, 0, 0, 0]),
    ("edge", (0, 4), [1, 0, 0, 0]),
])
def test_onnx_pad_refused_where_onnxruntime_refuses(mode, shape, pads):
    pytest.importorskip("onnx")
    from tvmpy.relay.frontend import from_onnx
    from tvmpy.relay.frontend.onnx import OnnxConvertError

    with pytest.raises(OnnxConvertError, match=f"Pad node .*{mode} pads .* do not fit axis"):
        from_onnx(_onnx_pad_model(mode, shape, pads), {"x": shape})
