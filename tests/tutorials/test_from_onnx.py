"""The steps of TVM's tutorial "Compile ONNX Models", in our own code and offline: a small
super-resolution network (convolutions, then a pixel shuffle written as Reshape/Transpose) built
with ``onnx.helper`` with random weights stands in for the downloaded model, a random image for
the cat picture; both are fetched through ``download_testdata`` from its local cache (offline,
a missing file is a clear error saying where to put it). The model is imported with
``relay.frontend.from_onnx``, run by ``create_executor("graph")`` (also in the v0.6 form with
``relay.build_config`` and the parameters as inputs) and compared to onnxruntime; the output
becomes an image again as in the tutorial."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib.download import OfflineError, download_testdata

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
Image = pytest.importorskip("PIL.Image")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SIDE, UP = 28, 3  # input image side, upscale factor
MODEL_URL = "https://example.invalid/super_resolution_0.2.onnx"
IMAGE_URL = "https://example.invalid/cat.png"


def _super_resolution_model(seed: int = 0):
    rng = np.random.default_rng(seed)
    chans = [(1, 16, 5), (16, 8, 3), (8, UP * UP, 3)]
    nodes, inits, x = [], [], "1"
    for k, (cin, cout, ks) in enumerate(chans):
        w = (rng.standard_normal((cout, cin, ks, ks)) / np.sqrt(cin * ks * ks)).astype("float32")
        b = rng.uniform(-0.1, 0.1, cout).astype("float32")
        inits += [numpy_helper.from_array(w, f"w{k}"), numpy_helper.from_array(b, f"b{k}")]
        nodes.append(helper.make_node("Conv", [x, f"w{k}", f"b{k}"], [f"c{k}"],
                                      pads=[ks // 2] * 4, kernel_shape=[ks, ks]))
        x = f"c{k}"
        if k < len(chans) - 1:
            nodes.append(helper.make_node("Relu", [x], [f"r{k}"]))
            x = f"r{k}"
    s1 = np.array([1, 1, UP, UP, SIDE, SIDE], "int64")
    s2 = np.array([1, 1, SIDE * UP, SIDE * UP], "int64")
    inits += [numpy_helper.from_array(s1, "s1"), numpy_helper.from_array(s2, "s2")]
    nodes += [helper.make_node("Reshape", [x, "s1"], ["p1"]),
              helper.make_node("Transpose", ["p1"], ["p2"], perm=[0, 1, 4, 2, 5, 3]),
              helper.make_node("Reshape", ["p2", "s2"], ["out"])]
    graph = helper.make_graph(
        nodes, "super_resolution",
        [helper.make_tensor_value_info("1", TensorProto.FLOAT, [1, 1, SIDE, SIDE])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, SIDE * UP, SIDE * UP])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty test-data cache, and no network."""
    monkeypatch.setenv("TVM_TEST_DATA", str(tmp_path / "tvm_test_data"))
    monkeypatch.setenv("TVMPY_OFFLINE", "1")
    return tmp_path / "tvm_test_data"


@pytest.fixture
def model_and_image(cache):
    with pytest.raises(OfflineError, match=r"put the file at .*onnx/super_resolution\.onnx"):
        download_testdata(MODEL_URL, "super_resolution.onnx", module="onnx")
    (cache / "onnx").mkdir(parents=True)
    onnx.save(_super_resolution_model(), str(cache / "onnx" / "super_resolution.onnx"))
    (cache / "data").mkdir()
    pixels = np.random.default_rng(3).integers(0, 256, (40, 50, 3), dtype=np.uint8)
    Image.fromarray(pixels, "RGB").save(cache / "data" / "cat.png")
    model_path = download_testdata(MODEL_URL, "super_resolution.onnx", module="onnx")
    img_path = download_testdata(IMAGE_URL, "cat.png", module="data")
    return onnx.load(model_path), img_path


def _y_channel(img_path):
    img = Image.open(img_path).resize((SIDE, SIDE))
    img_y, img_cb, img_cr = img.convert("YCbCr").split()
    x = np.array(img_y)[np.newaxis, np.newaxis, :, :]
    return x, img_cb, img_cr


def _onnxruntime(model, x):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"1": x})[0]


def test_compile_run_and_compare_with_onnxruntime(model_and_image):
    model, img_path = model_and_image
    x, img_cb, img_cr = _y_channel(img_path)
    shape_dict = {"1": x.shape}
    mod, params = relay.frontend.from_onnx(model, shape_dict)
    with tvm.transform.PassContext(opt_level=1):
        executor = relay.build_module.create_executor("graph", mod, tvm.cpu(0), "llvm",
                                                      params).evaluate()
    out = executor(tvm.nd.array(x.astype("float32"))).numpy()
    want = _onnxruntime(model, x.astype("float32"))
    assert out.shape == (1, 1, SIDE * UP, SIDE * UP)
    tvm.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
    # back to a picture, as the tutorial shows it
    out_y = Image.fromarray(np.uint8(out[0, 0].clip(0, 255)), mode="L")
    out_cb = img_cb.resize(out_y.size, Image.BICUBIC)
    out_cr = img_cr.resize(out_y.size, Image.BICUBIC)
    result = Image.merge("YCbCr", [out_y, out_cb, out_cr]).convert("RGB")
    assert result.size == (SIDE * UP, SIDE * UP)


def test_legacy_form_with_params_as_inputs(model_and_image):
    """v0.6: ``relay.build_config(opt_level=1)``, ``create_executor('graph', mod, ctx,
    target)``, the parameters given with the input, ``.asnumpy()``."""
    model, img_path = model_and_image
    x = _y_channel(img_path)[0].astype("float32")
    mod, params = relay.frontend.from_onnx(model, {"1": x.shape}, freeze_params=False)
    assert params  # the weights stay parameters of main
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with relay.build_config(opt_level=1):
            intrp = relay.build_module.create_executor("graph", mod, tvm.cpu(0), "llvm")
            out = intrp.evaluate()(tvm.nd.array(x), **params).asnumpy()
    tvm.testing.assert_allclose(out, _onnxruntime(model, x), rtol=1e-4, atol=1e-3)


def test_bad_input_is_named(model_and_image):
    model, _ = model_and_image
    mod, params = relay.frontend.from_onnx(model, {"1": (1, 1, SIDE, SIDE)})
    f = relay.create_executor("graph", mod, tvm.cpu(0), "llvm", params).evaluate()
    with pytest.raises(ValueError, match=r"expected shape \(1, 1, 28, 28\), got \(1, 1, 28, 27\)"):
        f(np.zeros((1, 1, SIDE, SIDE - 1), "float32"))
