"""Dynamic operators (TVM's ``relay.op.dyn``): the shape-like arguments are tensors, known only
at run time. ``dyn.reshape(data, newshape)``, ``dyn.broadcast_to``, ``dyn.full``/``zeros``/
``ones``, ``dyn.arange``, ``dyn.tile``, ``dyn.strided_slice``, ``dyn.squeeze``,
``dyn.expand_dims``, ``dyn.split``, ``dyn.one_hot``, ``dyn.topk``, ``dyn.nn.pad``,
``dyn.image.resize``; and ``shape_of`` (a shape with run-time dimensions as a tensor).

Each is OPAQUE with a data-dependent shape function (it receives the input arrays): an executor
runs it on the op's inputs, allocates the outputs, then calls the kernel, whose output extents
are symbolic (bound by the output buffers' shapes).
"""

from . import image, nn  # noqa: F401
from .shape import shape_of  # noqa: F401
from .transform import (  # noqa: F401
    arange,
    broadcast_to,
    expand_dims,
    full,
    one_hot,
    ones,
    reshape,
    split,
    squeeze,
    strided_slice,
    tile,
    topk,
    zeros,
)
