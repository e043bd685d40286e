"""What ``relay.build`` returns: the graph JSON, one compiled library and the parameters.

``GraphExecutorFactoryModule(graph_json, lib, params, mod_name="default")`` is a runtime Module
(runtime/graph_executor/factory.py ``GraphExecutorFactory``): ``f["default"](dev)`` creates an executor
(wrap it in ``contrib.graph_executor.GraphModule``), ``f.export_library(path)`` writes one shared
library that ``tvm.runtime.load_module`` turns back into a factory in any process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...runtime.graph_executor import GraphExecutorFactory
from ...runtime.module import Module

__all__ = ["GraphExecutorFactoryModule"]


class GraphExecutorFactoryModule(GraphExecutorFactory):
    """TVM's ``relay.backend.executor_factory.GraphExecutorFactoryModule``."""

    def __init__(self, graph_json: str, lib: Module, params: Mapping[str, Any] | None = None,
                 mod_name: str = "default", **attrs: Any):
        super().__init__(graph_json, lib, params, mod_name)
        self.attrs = dict(attrs)  # build information (target, memory plan, ...)

    @property
    def module(self) -> GraphExecutorFactoryModule:
        """TVM code reads ``factory.module``; here the factory is the runtime module itself."""
        return self

    @property
    def graph(self) -> str:
        return self.graph_json
