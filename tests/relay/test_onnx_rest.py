"""The last ONNX node-test operators (BitCast between float and integer types, MelWeightMatrix,
ai.onnx.ml ArrayFeatureExtractor / Binarizer / TreeEnsemble): random inputs through the
interpreter, the graph executor at opt_level 3 and the VM, against onnx's reference evaluator."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tvmpy.contrib.onnx_backend import TvmpyBackend  # noqa: E402

rng = np.random.default_rng(23)
F, I64 = TensorProto.FLOAT, TensorProto.INT64
EXECUTORS = [("debug", None), ("graph", 3), ("vm", 3)]


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, opset=21, ml=None):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    ops = [helper.make_opsetid("", opset)]
    if ml is not None:
        ops.append(helper.make_opsetid("ai.onnx.ml", ml))
    return helper.make_model(g, opset_imports=ops, ir_version=10)


def _check(model, feeds, executors=EXECUTORS, rtol=1e-6, atol=1e-6):
    want = ReferenceEvaluator(model).run(None, feeds)
    for executor, opt in executors:
        rep = TvmpyBackend.prepare(model, executor=executor, opt_level=opt)
        got = rep.run([feeds[vi.name] for vi in model.graph.input])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (executor, g.dtype, g.shape)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=executor)


@pytest.mark.parametrize("src,dst,shape", [
    ("float32", "int32", (3, 7)), ("int32", "float32", (5,)), ("float64", "int64", (2, 1, 3)),
    ("int64", "float64", ()), ("float16", "int16", (11,)), ("uint32", "float32", (1, 13)),
    ("float32", "uint32", (4, 3))])
def test_bitcast_float_int(src, dst, shape):
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dst))
    t_src = helper.np_dtype_to_tensor_dtype(np.dtype(src))
    model = _model([helper.make_node("BitCast", ["x"], ["y"], to=to)],
                   [_vi("x", t_src, list(shape))], [_vi("y", to, list(shape))], opset=26)
    if np.dtype(src).kind == "f":
        x = rng.normal(0, 100, size=shape).astype(src)
        x.reshape(-1)[:1] = -0.0 if x.size else x.reshape(-1)[:1]
    else:
        # integers whose bits are finite floats (no NaN payload: NaN != NaN in the comparison)
        x = rng.normal(0, 100, size=shape).astype(dst).view(src)
    _check(model, {"x": x}, rtol=0, atol=0)


def test_reinterpret_relay_op_rejects_width_change():
    from tvmpy import relay
    from tvmpy.relay.type_infer import infer_type

    x = relay.var("x", shape=(3,), dtype="float32")
    with pytest.raises(Exception, match="one bit width"):
        infer_type(relay.Function([x], relay.reinterpret(x, "int64")))
