"""The steps of TVM's tutorial "Deploy a Framework-prequantized Model with TVM" (the PyTorch
part), in our own code, offline and small: a MobileNetV2 from torchvision's quantizable models
(random weights, fewer inverted-residual stages, a 64 x 64 random image), quantized in torch's
eager mode (``fuse_model``, ``get_default_qconfig("fbgemm")``, ``prepare``, calibration,
``convert``), traced with ``torch.jit.trace``, imported with
``relay.frontend.from_pytorch(script_module, [(input_name, shape)])`` into QNN ops, built with
``relay.build`` at opt_level 3 for llvm and run on the graph executor; the result is compared
with torch's quantized output (the tutorial reports the mean / max absolute difference and the
labels).

Tolerance: torch's fbgemm adds the float bias after scaling the int32 accumulator; tvmpy, as
TVM, quantizes the bias to int32 at scale ``s_x * s_w`` first (qnnpack's arithmetic), so values
on a rounding tie can move by one quantization step, which later layers carry on (up to 4
steps of the classifier's output scale here). With fbgemm (the tutorial's engine) the output
must agree to 5 steps, 2 on average; with qnnpack exactly; the top-1 class in both."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning")
warnings.filterwarnings("ignore", module="torch.ao")

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402

SIZE = 64
# (expansion t, channels c, repeats n, stride s): the first stages of MobileNetV2
STAGES = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2]]


def _imagenet_input() -> np.ndarray:
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, size=(SIZE, SIZE, 3)).astype("float32") / 255.0
    mean = np.array([0.485, 0.456, 0.406], dtype="float32")
    std = np.array([0.229, 0.224, 0.225], dtype="float32")
    return np.expand_dims(((img - mean) / std).transpose(2, 0, 1), 0).astype("float32")


def _float_mobilenet():
    from tvmpy.relay.testing import zoo

    zoo.torchvision()
    from torchvision.models.quantization import mobilenet_v2

    torch.manual_seed(0)
    model = mobilenet_v2(quantize=False, width_mult=0.5, inverted_residual_setting=STAGES,
                         num_classes=20)
    # random weights: batch-norm statistics from random images so activations keep their scale
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.randn(4, 3, SIZE, SIZE))
    return model.eval()


def _quantize_model(model, inp, engine):
    tq = torch.ao.quantization
    model.fuse_model()
    model.qconfig = tq.get_default_qconfig(engine)
    tq.prepare(model, inplace=True)
    with torch.no_grad():  # calibration
        model(inp)
        model(torch.randn(3, 3, SIZE, SIZE))
    tq.convert(model, inplace=True)


def _run_tvm_model(mod, params, input_name, inp, target="llvm"):
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=target, params=params)
    runtime = graph_executor.GraphModule(lib["default"](tvm.device(target, 0)))
    runtime.set_input(input_name, inp)
    runtime.run()
    return runtime.get_output(0).numpy()


@pytest.mark.parametrize("engine", ["fbgemm", "qnnpack"])
def test_deploy_prequantized_mobilenet(engine):
    """fbgemm: the tutorial's configuration; qnnpack: the arithmetic tvmpy follows, exact."""
    saved = torch.backends.quantized.engine
    if engine not in torch.backends.quantized.supported_engines:
        pytest.skip(f"torch built without {engine}")
    torch.backends.quantized.engine = engine
    try:
        inp = _imagenet_input()
        qmodel = _float_mobilenet()
        pt_inp = torch.from_numpy(inp)
        _quantize_model(qmodel, pt_inp, engine)
        script_module = torch.jit.trace(qmodel, pt_inp).eval()
        with torch.no_grad():
            pt_result = script_module(pt_inp).numpy()

        input_name = "input"
        input_shapes = [(input_name, (1, 3, SIZE, SIZE))]
        mod, params = relay.frontend.from_pytorch(script_module, input_shapes)
        text = mod.astext()
        assert "qnn.conv2d" in text and "qnn.dense" in text and "qnn.add" in text
        tvm_result = _run_tvm_model(mod, params, input_name, inp, target="llvm")
    finally:
        torch.backends.quantized.engine = saved

    step = float(qmodel.classifier[1].scale)
    assert np.abs(pt_result).max() > 20 * step  # a real spread of logits, not all zeros
    diff = np.abs(tvm_result - pt_result)
    print(f"max abs diff {diff.max():.4f}, mean abs diff {diff.mean():.5f}, step {step:.4f}, "
          f"{np.sum(diff < step / 2)} of {diff.size} equal")
    if engine == "qnnpack":
        tvm.testing.assert_allclose(tvm_result, pt_result, rtol=0, atol=0.01 * step)
    else:
        tvm.testing.assert_allclose(tvm_result, pt_result, rtol=0, atol=5.01 * step)
        assert diff.mean() <= 2 * step
    assert int(np.argmax(tvm_result)) == int(np.argmax(pt_result))
