"""The steps of TVM's tutorial "Compile PyTorch Models", in our own code, offline and small: a
torchvision ResNet-18 with random weights (batch-norm statistics from random batches, so the
logits are not degenerate), traced with ``torch.jit.trace``, a random "image" normalized with
the ImageNet mean / std, ``relay.frontend.from_pytorch(scripted_model, shape_list)``,
``relay.build`` at opt_level 3 for llvm, run on the graph executor, and the output and top-1
class compared with torch's."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning")

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402

SIZE = 64  # CI size (the tutorial's image is 224 x 224)


def _model():
    from tvmpy.relay.testing import zoo

    zoo.torchvision()  # the shim before torchvision loads
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    for m in model.modules():  # running statistics of random data
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.randn(4, 3, SIZE, SIZE))
    return model.eval()


def _image() -> np.ndarray:
    """A random RGB image in [0, 255], preprocessed as the tutorial's: scaled to [0, 1],
    normalized with the ImageNet mean / std, NCHW with a batch of one."""
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(SIZE, SIZE, 3)).astype("float32") / 255.0
    mean = np.array([0.485, 0.456, 0.406], dtype="float32")
    std = np.array([0.229, 0.224, 0.225], dtype="float32")
    img = (img - mean) / std
    return np.expand_dims(img.transpose(2, 0, 1), 0)


def test_compile_traced_resnet18():
    model = _model()
    img = _image()
    scripted_model = torch.jit.trace(model, torch.from_numpy(img)).eval()

    input_name = "input0"
    shape_list = [(input_name, img.shape)]
    mod, params = relay.frontend.from_pytorch(scripted_model, shape_list)

    target = tvm.target.Target("llvm", host="llvm")
    dev = tvm.cpu(0)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=target, params=params)

    m = graph_executor.GraphModule(lib["default"](dev))
    m.set_input(input_name, tvm.nd.array(img.astype("float32")))
    m.run()
    tvm_output = m.get_output(0)

    with torch.no_grad():
        torch_output = model(torch.from_numpy(img)).numpy()
    tvm.testing.assert_allclose(tvm_output.numpy(), torch_output, rtol=1e-4, atol=1e-4)
    top1_tvm = int(np.argmax(tvm_output.numpy()[0]))
    top1_torch = int(np.argmax(torch_output[0]))
    assert top1_tvm == top1_torch
