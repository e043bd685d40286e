"""``BaseFunc``: what an IRModule holds, a relay ``Function`` or a tir ``PrimFunc`` (TVM's
``tvm.ir.BaseFunc``). Each kind prints itself as a module-level definition."""

from __future__ import annotations

from .node import Node

__all__ = ["BaseFunc"]


class BaseFunc(Node):
    """Base class of module-level functions (no fields of its own)."""

    __slots__ = ()

    def astext_global(self, name: str, show_types: bool = True) -> str:
        """The text of this function defined as ``@name`` in a module."""
        raise NotImplementedError(f"{type(self).__name__}.astext_global")
