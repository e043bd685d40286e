"""Relay backend: lowering typed calls to tensor expressions (TVM's ``relay.backend``)."""

from . import auto_scheduler_tasks  # noqa: F401,E402 - registers extract_tasks' program walk
from .lower_call import lower_call, placeholders_for
from .te_compiler import lower_primitive

__all__ = ["lower_call", "placeholders_for", "lower_primitive"]
