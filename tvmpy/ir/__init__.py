"""IR foundations shared by every layer: dtypes (``dtype``) and immutable nodes with structural
equality (``node``). Kept apart from ``tir`` so that dtype parsing imports nothing else."""

from typing import Any as _Any

from .expr import GlobalVar, RelayExpr  # noqa: E402,F401
from .function import BaseFunc  # noqa: E402,F401
from .module import IRModule  # noqa: E402,F401
from .node import assert_structural_equal, structural_equal, structural_hash  # noqa: E402,F401


def __getattr__(name: str) -> _Any:
    # ``tvm.ir.Range`` (defined with the expressions in tir/expr.py, loaded on first use)
    if name == "Range":
        from ..tir.expr import Range

        return Range
    raise AttributeError(f"module 'tvmpy.ir' has no attribute {name!r}")
