"""relay.testing.onnx_torch (the eager-PyTorch column of `tvmpy bench`) computes what
onnxruntime does on the built-in models, and refuses graphs it cannot map, listing them."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("torch")
from onnx import TensorProto, helper  # noqa: E402

from tvmpy.relay.testing import compare, onnx_models  # noqa: E402
from tvmpy.relay.testing.onnx_torch import TorchUnsupported, torch_runner  # noqa: E402


@pytest.mark.parametrize("model", [
    lambda: onnx_models.resnet18(image=64),
    lambda: onnx_models.mobilenet_v2(image=64),
    lambda: onnx_models.bert_encoder(layers=2, seq=16),
    lambda: onnx_models.bert_encoder(layers=1, seq=9, embeddings=False,
                                     decomposed_layer_norm=True),
], ids=["resnet18", "mobilenet_v2", "bert", "bert_decomposed"])
def test_matches_onnxruntime(model):
    m = model()
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)[0]
    got = torch_runner(m)(feeds)[0]
    assert got.shape == want.shape
    err, _ = compare.errors(got, want)
    assert err <= 1e-4 * np.abs(want).max() + 1e-5


def test_unsupported_listed_before_running():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Hardmax", ["a"], ["b"], name="hm1"),
             helper.make_node("Hardmax", ["b"], ["c"], name="hm2"),
             helper.make_node("Conv", ["c", "c"], ["y"], name="cv", kernel_shape=[1, 1],
                              pads=[0, 1, 1, 0])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1, 1, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(TorchUnsupported, match=r"asymmetric pads.*; Hardmax \(hm1, hm2\)"):
        torch_runner(helper.make_model(g))
