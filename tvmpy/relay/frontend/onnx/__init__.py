"""ONNX importer: ``relay.frontend.from_onnx(model, shape) -> (IRModule, params)``, as in TVM.

``importer`` walks the graph (model checks, unsupported-operator reporting, import-time values,
ONNX function bodies through ``functions``); ``registry`` holds the converter signature and the
table it dispatches on; the converters live in one module per operator family: ``elementwise``,
``activation``, ``linalg``, ``conv``, ``pooling``, ``normalization``, ``reduction``, ``tensor``
(shapes and data movement), ``indexing`` (gathers, scatters, TopK), ``resize``, ``qlinear`` (quantized ops into relay.qnn; ``quant``: their float fallbacks),
``rnn``, ``signal`` (DFT, STFT, GridSample), ``text``, ``ml`` (ai.onnx.ml), ``control`` (If, Loop, Scan) and ``sequence`` (sequences, optionals).
"""

# importing the family modules registers their converters
from . import (  # noqa: F401
    activation,
    control,
    conv,
    data_dependent,
    elementwise,
    indexing,
    linalg,
    mel,
    ml,
    normalization,
    pooling,
    qlinear,
    quant,
    reduction,
    resize,
    rnn,
    sequence,
    signal,
    tensor,
    text,
)
from .context import OnnxConstantInputError, OnnxConvertError
from .importer import from_onnx, supported_ops

__all__ = ["from_onnx", "supported_ops", "OnnxConvertError", "OnnxConstantInputError"]
