"""TVM 0.6/0.7's ``tvm.contrib.graph_runtime`` (renamed ``graph_executor`` in 0.8): the same
``create(graph_json, lib, dev)`` and ``GraphModule``."""

from __future__ import annotations

from .graph_executor import GraphModule, create

__all__ = ["GraphModule", "create"]
