"""``relay.Module`` / ``relay.IRModule``: the IRModule of :mod:`tvmpy.ir.module` (one class for
relay Functions and tir PrimFuncs)."""

from ..ir.module import IRModule

__all__ = ["IRModule"]
