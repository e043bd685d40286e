"""TVM v0.7's name of :mod:`tvmpy.contrib.debugger.debug_executor`
(``from tvm.contrib.debugger import debug_runtime``)."""

from .debug_executor import GraphModuleDebug, create  # noqa: F401

__all__ = ["create", "GraphModuleDebug"]
