"""Relay operators: the registry (``get``, ``register_op``, ``OpPattern``) and the constructors,
grouped as in TVM: ``tensor`` (elementwise/broadcast), ``transform`` (shape), ``reduce``, ``nn``."""

from . import nn, reduce, tensor, transform  # noqa: F401
from .reduce import *  # noqa: F401,F403
from .registry import Op, OpPattern, get, list_op_names, register_op, register_op_attr  # noqa: F401
from .tensor import *  # noqa: F401,F403
from .transform import *  # noqa: F401,F403
