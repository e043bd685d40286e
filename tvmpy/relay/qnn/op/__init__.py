"""``relay.qnn.op``: the quantized operators (TVM's names and signatures)."""

from . import qnn as _qnn
from .qnn import *  # noqa: F401,F403
from .reference import register_all as _register_reference

_register_reference()
__all__ = list(_qnn.__all__)
