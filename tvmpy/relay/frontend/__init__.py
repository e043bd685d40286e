"""Model importers: ``relay.frontend.from_onnx(model, shape) -> (IRModule, params)``,
``relay.frontend.from_pytorch(model, input_infos) -> (IRModule, params)``."""

from .common import OpNotImplemented  # noqa: F401
from .onnx import OnnxConvertError, from_onnx, supported_ops  # noqa: F401
from .pytorch import PyTorchConvertError, from_pytorch  # noqa: F401
