"""The fuzzer's random ONNX models as PyTorch modules, for the PyTorch frontend's oracle.

``to_torch(model)`` turns a generated ONNX graph into an ``nn.Module`` whose ``forward`` takes
the graph inputs (in graph-input order), computes every node with torch operations
(``torch.add``, ``F.conv2d``, ``torch.permute``, ``torch.topk`` ...) and returns the graph
outputs as a tuple. Initializers become registered buffers; index tensors the translation
derives from them (normalized gather indices, reflect-pad indices ...) are buffers too.

The translation is exact or absent: a node whose op type or attribute combination has no
faithful torch equivalent (``Resize`` in ``tf_crop_and_resize`` mode, ``ConvTranspose`` with
``output_shape``, float ``Mod`` with ``fmod=0`` ...) makes ``to_torch`` return None, and
``explain`` says which. Shapes are static: onnx's shape inference gives every tensor's shape,
so geometry (``SAME`` padding, ceil-mode pooling, resize coordinates) is resolved here.
Operands ONNX passes as tensors but torch takes as Python values (shapes, axes, pads, ``k``,
split sizes) must be initializers.

``EMITTERS`` lists the op types with a translation (``sorted(EMITTERS)``).
"""

from __future__ import annotations

from . import elementwise, indexing, nn, reduction, shape  # noqa: F401 - they register
from ._common import EMITTERS, Unsupported
from .module import FuzzModule, explain, to_torch

__all__ = ["to_torch", "explain", "EMITTERS", "FuzzModule", "Unsupported"]
