"""The PyTorch frontend's converter table: importing this module registers every converter
(elementwise, nn, tensor modules) in ``CONVERTERS``."""

from . import pytorch_elemwise, pytorch_nn, pytorch_tensor  # noqa: F401  (register converters)
from .pytorch_common import CONVERTERS, IDENTITY_OPS, PyTorchConvertError, np_dtype

__all__ = ["CONVERTERS", "IDENTITY_OPS", "PyTorchConvertError", "np_dtype"]
