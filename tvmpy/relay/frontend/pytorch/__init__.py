"""PyTorch importer: ``relay.frontend.from_pytorch(model, input_infos) -> (IRModule, params)``.

``importer`` exports the model with ``torch.export``, checks that every op is supported and walks
the graph; ``common`` holds the conversion context, the converter signature and registry and the
helpers the converters share; the converters live in one module per operator family:
``elementwise``, ``nn`` (convolution, matmul, normalization, softmax, pooling, upsampling),
``reduction``, ``tensor`` (views and data movement) and ``index`` (sorting, scatters, advanced
indexing) and ``rnn`` (LSTM, GRU). ``quantized`` converts torch.ao quantized models (``convert_fx`` output or eager-mode
``convert``ed modules; ``from_pytorch`` sends them there) from their FX graph into the QNN dialect,
its float nodes through the same ATen converters. ``torchscript`` lowers a TorchScript module
or function (TVM's input: ``torch.jit.trace`` / ``torch.jit.script``) to an fx graph of the same
ATen calls, which then takes one of those two paths.
"""

# importing the family modules registers their converters
from . import elementwise, index, nn, reduction, rnn, tensor  # noqa: F401
from .common import PyTorchConvertError
from .importer import from_pytorch, supported_ops

__all__ = ["from_pytorch", "supported_ops", "PyTorchConvertError"]
