"""Relay backend: lowering typed calls to tensor expressions (TVM's ``relay.backend``)."""

from .lower_call import lower_call, placeholders_for
from .te_compiler import lower_primitive

__all__ = ["lower_call", "placeholders_for", "lower_primitive"]
