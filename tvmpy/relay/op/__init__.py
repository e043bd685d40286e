"""Relay operators: the registry (``get``, ``register_op``, ``OpPattern``) and the constructors,
grouped as in TVM: ``tensor`` (elementwise/broadcast), ``transform`` (shape), ``reduce``, ``nn``, ``image``."""

import importlib as _importlib

from . import data_dependent, image, image_decode, nn, nn_int8, reduce, tensor, transform, vision  # noqa: F401
from .reduce import *  # noqa: F401,F403
from .registry import (  # noqa: F401
    Op,
    OpPattern,
    get,
    list_op_names,
    register_alter_op_layout,
    register_compute,
    register_op,
    register_op_attr,
    register_pattern,
    register_strategy,
)
from .tensor import *  # noqa: F401,F403
from .transform import *  # noqa: F401,F403

# computes and strategies per target attach to the registered ops (after all registrations)
_importlib.import_module(".strategy", __name__)
# shape functions (FShapeFunc) for every registered operator's fast path
_importlib.import_module(".shape_func", __name__)._register_defaults()
