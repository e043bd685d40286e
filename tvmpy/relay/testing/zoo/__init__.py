"""A zoo of real architectures with random weights, for tests (``small``) and benchmarks
(``real``): CNNs, transformers, recurrent, generative, segmentation, detection and speech
models from torchvision, timm and transformers (or torch.nn where none defines them), built in
code: nothing is downloaded.

Importing this package stubs torchvision's C-operator registrations (see ``_shim``) so that
torchvision, and transformers / timm which import it, load beside the CPU build of torch.

    from tvmpy.relay.testing import zoo
    spec = zoo.MODELS["resnet50"]("small")        # Spec: module, inputs, symbolic dims
    onnx_model = zoo.to_onnx(spec, dynamic=True)  # batch as a dim_param
"""

from __future__ import annotations

from . import cnn, sequence, vision
from ._shim import torchvision
from .export import TOLERANCE, Compiled, assert_close, build, eager, from_onnx, from_torch, to_onnx
from .spec import SIZES, Input, Spec, ZooModel
from .vision import append_onnx_nms, greedy_nms, with_greedy_nms

torchvision()  # install the shim on import: transformers and timm import torchvision too

__all__ = ["MODELS", "KINDS", "ZooModel", "Spec", "Input", "SIZES", "to_onnx", "from_onnx",
           "from_torch", "eager", "build", "Compiled", "assert_close", "TOLERANCE",
           "append_onnx_nms", "greedy_nms", "with_greedy_nms", "torchvision"]

_TV, _TF, _TIMM, _NN = "torchvision", "transformers", "timm", "torch.nn"

_ENTRIES = [
    ZooModel("resnet50", "cnn", _TV, cnn.resnet50),
    ZooModel("resnet18", "cnn", _TV, cnn.resnet18),
    ZooModel("resnext_dilated", "cnn", _TV, cnn.resnext_dilated),
    ZooModel("mobilenet_v3_large", "cnn", _TV, cnn.mobilenet_v3_large),
    ZooModel("mobilenet_v3_small", "cnn", _TV, cnn.mobilenet_v3_small),
    ZooModel("efficientnet_b0", "cnn", _TV, cnn.efficientnet_b0),
    ZooModel("regnet_y_400mf", "cnn", _TV, cnn.regnet_y_400mf),
    ZooModel("shufflenet_v2", "cnn", _TV, cnn.shufflenet_v2),
    ZooModel("densenet121", "cnn", _TV, cnn.densenet121),
    ZooModel("googlenet", "cnn", _TV, cnn.googlenet),
    ZooModel("inception_v3", "cnn", _TV, cnn.inception_v3),
    ZooModel("convnext_tiny", "cnn", _TV, cnn.convnext_tiny),
    ZooModel("squeezenet1_1", "cnn", _TV, cnn.squeezenet1_1),
    ZooModel("mnasnet", "cnn", _TV, cnn.mnasnet),
    ZooModel("vgg11_bn", "cnn", _TV, cnn.vgg11_bn),
    ZooModel("convmixer", "cnn", _TIMM, cnn.convmixer),
    ZooModel("bert", "transformer", _TF, sequence.bert),
    ZooModel("distilbert", "transformer", _TF, sequence.distilbert),
    ZooModel("gpt2", "transformer", _TF, sequence.gpt2),
    ZooModel("t5_encoder", "transformer", _TF, sequence.t5_encoder),
    ZooModel("vit", "transformer", _TV, sequence.vit),
    ZooModel("swin", "transformer", _TV, sequence.swin),
    ZooModel("mlp_mixer", "transformer", _TIMM, sequence.mlp_mixer),
    ZooModel("lstm_lm", "recurrent", _NN, sequence.lstm_lm),
    ZooModel("gru_lm", "recurrent", _NN, sequence.gru_lm),
    ZooModel("bilstm_tagger", "recurrent", _NN, sequence.bilstm_tagger),
    ZooModel("whisper_encoder", "speech", _TF, sequence.whisper_encoder),
    ZooModel("dcgan", "generative", _NN, vision.dcgan),
    ZooModel("unet", "generative", _NN, vision.unet),
    ZooModel("deeplabv3", "segmentation", _TV, vision.deeplabv3),
    ZooModel("ssdlite", "detection", _NN, vision.ssdlite, vm=True),
]

MODELS: dict[str, ZooModel] = {m.name: m for m in _ENTRIES}
KINDS = sorted({m.kind for m in _ENTRIES})
