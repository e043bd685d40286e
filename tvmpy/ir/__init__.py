"""IR foundations shared by every layer: dtypes (``dtype``) and immutable nodes with structural
equality (``node``). Nothing loads eagerly: the runtime imports ``ir.dtype`` alone."""

from typing import Any as _Any

_LAZY = {
    "Node": "node", "structural_equal": "node", "structural_hash": "node",
    "assert_structural_equal": "node",
    "RelayExpr": "expr", "GlobalVar": "expr", "BaseFunc": "function", "IRModule": "module",
    "Op": "op", "register_op_attr": "op",
}


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module("." + _LAZY[name], __name__), name)
    if name == "instrument":  # ``tvm.ir.instrument``: pass instruments (own module)
        import importlib

        return importlib.import_module(".instrument", __name__)
    if name == "Range":  # ``tvm.ir.Range``: defined with the loop-IR expressions (allow-listed)
        from ..tir.expr import Range

        return Range
    if name == "register_intrin_lowering":  # TVM's spelling; the rule table lives with the targets
        from ..target.intrin import register_intrin_lowering

        return register_intrin_lowering
    if name in ("op", "node", "expr", "function", "module", "digest", "dtype", "functor"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'tvmpy.ir' has no attribute {name!r}")
