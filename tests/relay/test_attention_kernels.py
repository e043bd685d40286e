"""Transformer kernels end to end (ONNX -> relay.build at opt_level 3 -> graph executor) against
onnxruntime on awkward shapes: scaled + masked softmax fused into one kernel (prime row
lengths, size-1 axes, -1e4 / dtype-minimum masks), log_softmax, Q K^T and P V batch_matmuls
with a broadcast batch, a whole attention block, T5's RMSNorm and GPT-2's tanh GELU chains,
DeepLabV3's segmentation head upsample."""

from __future__ import annotations

import json

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.relay.testing import compare  # noqa: E402

RNG = np.random.default_rng(25)


def _model(nodes: list, feeds: dict, out_shape: tuple, inits: dict) -> onnx.ModelProto:
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
                     for k, v in feeds.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _node(op: str, ins: list, out: str, **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, ins, [out], **attrs)


def _check(model: onnx.ModelProto, feeds: dict, rtol: float = 1e-5, atol: float = 1e-5
           ) -> list[str]:
    """Both sides' outputs equal; returns tvmpy's kernel names."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    mod, params = compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3)
    m = graph_executor.GraphModule(lib["default"](tvm.runtime.cpu(0)))
    m.set_input(**feeds)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=rtol, atol=atol)
    g = json.loads(lib.get_graph_json())
    return [n["attrs"]["func_name"] for n in g["nodes"] if n["op"] == "tvm_op"
            and n["attrs"]["func_name"] != "__nop"]


@pytest.mark.parametrize("shape", [(1, 2, 13, 97), (2, 1, 1, 31), (1, 3, 5, 1), (1, 1, 7, 1500)])
@pytest.mark.parametrize("fill", [-1e4, float(np.finfo(np.float32).min)])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_scaled_masked_softmax_is_one_kernel(shape, fill, op):
    b, _, _, s = shape
    x = RNG.uniform(-4, 4, shape).astype("float32")
    mask = np.where(RNG.uniform(size=(b, 1, 1, s)) < 0.3, fill, 0).astype("float32")
    mask[..., 0] = 0  # every row keeps a score
    nodes = [_node("Mul", ["x", "sc"], "m"), _node("Add", ["m", "mask"], "a"),
             _node(op, ["a"], "y", axis=-1)]
    feeds = {"x": x, "mask": mask}
    kernels = _check(_model(nodes, feeds, shape, {"sc": np.array(0.125, np.float32)}), feeds,
                     atol=1e-5 if op == "Softmax" else 1e-3)
    assert len(kernels) == 1, kernels  # scale and mask read inside the softmax's row passes


@pytest.mark.parametrize("b,m,k,n,bcast", [(6, 37, 64, 53, False), (3, 1, 7, 97, False),
                                           (5, 97, 61, 89, True), (1, 13, 1, 17, False)])
def test_batch_matmul_forms(b, m, k, n, bcast):
    a = RNG.uniform(-1, 1, (b, m, k)).astype("float32")
    kt = RNG.uniform(-1, 1, (1 if bcast else b, n, k)).astype("float32")
    v = RNG.uniform(-1, 1, (1 if bcast else b, k, n)).astype("float32")
    qk = [_node("Transpose", ["bb"], "t", perm=[0, 2, 1]), _node("MatMul", ["a", "t"], "y")]
    _check(_model(qk, {"a": a, "bb": kt}, (b, m, n), {}), {"a": a, "bb": kt}, atol=1e-4)
    pv = [_node("MatMul", ["a", "bb"], "y")]
    _check(_model(pv, {"a": a, "bb": v}, (b, m, n), {}), {"a": a, "bb": v}, atol=1e-4)


@pytest.mark.parametrize("h,s,d", [(2, 37, 16), (1, 1, 8), (3, 101, 64)])
def test_attention_block(h, s, d):
    q, k, v = (RNG.uniform(-1, 1, (1, h, s, d)).astype("float32") for _ in range(3))
    nodes = [_node("Transpose", ["k"], "kt", perm=[0, 1, 3, 2]),
             _node("MatMul", ["q", "kt"], "s"), _node("Mul", ["s", "sc"], "ss"),
             _node("Softmax", ["ss"], "p", axis=-1), _node("MatMul", ["p", "v"], "y")]
    feeds = {"q": q, "k": k, "v": v}
    kernels = _check(_model(nodes, feeds, q.shape, {"sc": np.array(d ** -0.5, np.float32)}),
                     feeds, atol=1e-5)
    assert not any(kn.startswith("fused_reshape_multiply") for kn in kernels), kernels


@pytest.mark.parametrize("m,n", [(7, 512), (1, 13), (5, 97)])
def test_t5_rms_norm_and_gpt2_gelu_chains(m, n):
    x = RNG.uniform(-3, 3, (1, m, n)).astype("float32")
    w = RNG.uniform(-1, 1, n).astype("float32")
    rms = [_node("Pow", ["x", "two"], "p"), _node("ReduceMean", ["p"], "mu", axes=[-1]),
           _node("Add", ["mu", "eps"], "a"), _node("Sqrt", ["a"], "r"),
           _node("Div", ["x", "r"], "d"), _node("Mul", ["w", "d"], "y")]
    inits = {"two": np.array(2, np.float32), "eps": np.array(1e-6, np.float32), "w": w}
    _check(_model(rms, {"x": x}, x.shape, inits), {"x": x})
    gelu = [_node("Pow", ["x", "three"], "x3"), _node("Mul", ["x3", "c"], "cx3"),
            _node("Add", ["x", "cx3"], "in"), _node("Mul", ["in", "k"], "kin"),
            _node("Tanh", ["kin"], "t"), _node("Add", ["t", "one"], "t1"),
            _node("Mul", ["x", "half"], "hx"), _node("Mul", ["hx", "t1"], "y")]
    inits = {"three": np.array(3, np.float32), "c": np.array(0.044715, np.float32),
             "k": np.array(np.sqrt(2 / np.pi), np.float32), "one": np.array(1, np.float32),
             "half": np.array(0.5, np.float32)}
    _check(_model(gelu, {"x": x}, x.shape, inits), {"x": x}, atol=1e-5)


@pytest.mark.parametrize("mode,align", [("half_pixel", False), ("align_corners", True)])
def test_segmentation_head_upsample_matches_torch(mode, align):
    """DeepLabV3's head: 3x3 conv to 256 channels, 1x1 conv to 21 classes + bias (x86: NCHWc,
    channels padded to whole blocks; the layout_transform back to NCHW, the channel crop and
    the bias fused into the resize), bilinear upsample 16x16 -> 256x256 (x86: the separable
    resize, its width pass scheduled as a stage of its own)."""
    import torch

    from tvmpy import relay

    x = RNG.uniform(-1, 1, (1, 40, 16, 16)).astype("float32")
    w1 = RNG.uniform(-0.2, 0.2, (256, 40, 3, 3)).astype("float32")
    w = RNG.uniform(-0.1, 0.1, (21, 256, 1, 1)).astype("float32")
    b = RNG.uniform(-1, 1, 21).astype("float32")
    xv = relay.var("x", shape=x.shape)
    y = relay.nn.relu(relay.nn.conv2d(xv, relay.const(w1), kernel_size=(3, 3), channels=256,
                                      padding=(1, 1)))
    y = relay.nn.bias_add(relay.nn.conv2d(y, relay.const(w), kernel_size=(1, 1), channels=21),
                          relay.const(b))
    y = relay.image.resize2d(y, size=(256, 256), method="linear",
                             coordinate_transformation_mode=mode)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([xv], y)), "llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.runtime.cpu(0)))
    m.set_input("x", x)
    m.run()
    hid = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w1), padding=1))
    conv = torch.nn.functional.conv2d(hid, torch.tensor(w), torch.tensor(b))
    want = torch.nn.functional.interpolate(conv, size=(256, 256), mode="bilinear",
                                           align_corners=align).numpy()
    # (sums of 360 products, then align_corners' float32 source coordinates: 1e-4)
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)
