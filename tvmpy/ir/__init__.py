"""IR foundations shared by every layer: dtypes (``dtype``) and immutable nodes with structural
equality (``node``). Nothing loads eagerly: the runtime imports ``ir.dtype`` alone."""

from typing import Any as _Any

_NODE_NAMES = ("Node", "structural_equal", "structural_hash", "assert_structural_equal")


def __getattr__(name: str) -> _Any:
    if name in _NODE_NAMES:
        from . import node

        return getattr(node, name)
    if name == "Range":  # ``tvm.ir.Range``: defined with the loop-IR expressions (allow-listed)
        from ..tir.expr import Range

        return Range
    raise AttributeError(f"module 'tvmpy.ir' has no attribute {name!r}")
