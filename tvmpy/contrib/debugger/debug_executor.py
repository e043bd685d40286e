"""``from tvmpy.contrib.debugger import debug_executor``: TVM's debug graph executor.

``debug_executor.create(graph_json, lib, dev)`` (or ``GraphModuleDebug(factory["default"](dev))``)
behaves as ``graph_executor.GraphModule``, but ``run()`` times every node on its own and prints
the per-node table (slowest first; ``print_table=False`` to keep quiet); the last report is
``m.debug_report`` (a runtime ``ProfileReport``: ``rows``, ``sorted_rows()``, ``total``).
"""

from __future__ import annotations

import os
from typing import Any

from ...runtime.device import Device
from ...runtime.graph_executor import GraphExecutor, ProfileReport
from ...runtime.module import Module
from ..graph_executor import GraphModule

__all__ = ["create", "GraphModuleDebug"]


def create(graph_json_str: str, libmod: Module, device: Device | None = None,
           dump_root: str | None = None, print_table: bool = True) -> GraphModuleDebug:
    """A :class:`GraphModuleDebug` over ``libmod`` (``dump_root``: a folder where each run's
    table is also written, as ``profile.txt``)."""
    return GraphModuleDebug(GraphExecutor(graph_json_str, libmod, device), dump_root, print_table)


class GraphModuleDebug(GraphModule):
    """A GraphModule whose ``run`` reports per-node times."""

    def __init__(self, module: Any, dump_root: str | None = None, print_table: bool = True):
        super().__init__(module)
        self.dump_root = dump_root
        self.print_table = print_table
        self.debug_report: ProfileReport | None = None

    def run(self, **input_dict: Any) -> None:
        """Run once, timing each node (the outputs are those of a normal run)."""
        self.debug_report = self.module.profile(number=1, **input_dict)
        table = str(self.debug_report)
        if self.print_table:
            print(table)
        if self.dump_root:
            os.makedirs(self.dump_root, exist_ok=True)
            with open(os.path.join(self.dump_root, "profile.txt"), "w") as f:
                f.write(table + "\n")
