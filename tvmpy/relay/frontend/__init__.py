"""Model importers: ``relay.frontend.from_onnx(model, shape) -> (IRModule, params)``."""

from .common import OpNotImplemented  # noqa: F401
from .onnx import OnnxConvertError, from_onnx, supported_ops  # noqa: F401
