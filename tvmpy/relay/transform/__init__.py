"""Graph passes over IRModules (``relay.transform``). Each pass is a callable ``mod -> mod``.

For now: ``InferType``. The optimization passes (FoldConstant, FuseOps, ...) come one per file.
"""

from __future__ import annotations

from ..expr import RelayExpr
from ..module import IRModule
from ..type_infer import TypeInferencer, infer_type

__all__ = ["InferType", "infer_type"]


class InferType:
    """``relay.transform.InferType()(mod)``: types every function; returns the (typed) module."""

    name = "InferType"

    def __call__(self, mod: IRModule) -> IRModule:
        if isinstance(mod, RelayExpr):
            raise TypeError("InferType runs on an IRModule; use relay.transform.infer_type(expr)")
        inf = TypeInferencer(mod)
        for f in mod.functions.values():
            inf.visit(f)
        return mod
