"""Relay backend: lowering typed calls to tensor expressions (TVM's ``relay.backend``)."""

from .lower_call import lower_call, placeholders_for

__all__ = ["lower_call", "placeholders_for"]
