"""Model importers: ``relay.frontend.from_onnx(model, shape) -> (IRModule, params)``."""

from .common import OpNotImplemented  # noqa: F401
from .onnx import from_onnx  # noqa: F401
