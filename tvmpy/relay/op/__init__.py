"""Relay operators: the registry (``get``, ``register_op``, ``OpPattern``) and the constructors,
grouped as in TVM: ``tensor`` (elementwise/broadcast), ``transform`` (shape), ``reduce``, ``nn``, ``image``."""

import importlib as _importlib

from . import dyn, image, nn, nn_int8, reduce, sequence, tensor, transform  # noqa: F401
from .reduce import *  # noqa: F401,F403
from .registry import (  # noqa: F401
    Op,
    OpPattern,
    get,
    list_op_names,
    register_alter_op_layout,
    register_compute,
    register_mixed_precision_conversion,
    register_op,
    register_op_attr,
    register_pattern,
    register_strategy,
)
from .tensor import *  # noqa: F401,F403
from .transform import *  # noqa: F401,F403

# the operators whose output size depends on the data (and image.decode, a host operator;
# check_indices, the run-time bounds check of gather/scatter indices)
for _m in ("data_dependent", "image_decode", "vision", "index_check", "rnn"):
    _importlib.import_module("." + _m, __name__)
del _m

# computes and strategies per target attach to the registered ops (after all registrations)
_importlib.import_module(".strategy", __name__)
_importlib.import_module(".strategy.data_dependent", __name__)
_importlib.import_module(".strategy.index_check", __name__)
_importlib.import_module(".strategy.rnn", __name__)  # nn.rnn_scan (LSTM/GRU recurrence)
# nn.attention (scaled dot-product attention as one operator) and its strategy
_importlib.import_module(".nn_attention", __name__)
_importlib.import_module(".strategy.attention", __name__)
# ops whose axes / scalar parameters are run-time tensors (issue 11; they register strategies)
_importlib.import_module(".dyn.reduce", __name__)
_importlib.import_module(".dyn.scalar_args", __name__)
_importlib.import_module(".dyn.window", __name__)
_importlib.import_module(".dyn.dropout", __name__)
_importlib.import_module(".dyn.spatial", __name__)
_importlib.import_module(".dyn.signal", __name__)
# shape functions (FShapeFunc) for every registered operator's fast path
_importlib.import_module(".shape_func", __name__)._register_defaults()
