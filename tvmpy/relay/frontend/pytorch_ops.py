"""The PyTorch frontend's converter table: importing this module registers every converter
(elementwise, nn, tensor, index modules) in ``CONVERTERS``."""

# imported to register their converters
from . import pytorch_elemwise, pytorch_index, pytorch_nn, pytorch_tensor  # noqa: F401
from .pytorch_common import CONVERTERS, IDENTITY_OPS, PyTorchConvertError, np_dtype

__all__ = ["CONVERTERS", "IDENTITY_OPS", "PyTorchConvertError", "np_dtype"]
