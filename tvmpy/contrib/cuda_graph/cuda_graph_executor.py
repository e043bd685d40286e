"""TVM's ``tvm.contrib.cuda_graph.cuda_graph_executor``: the graph executor with its launch
sequence captured as CUDA graphs once and replayed per run.

    from tvmpy.contrib.cuda_graph import cuda_graph_executor
    m = cuda_graph_executor.create(lib.get_graph_json(), lib.get_lib(), tvm.cuda(0))
    m.set_input(**params); m.set_input("data", x); m.run(); y = m.get_output(0).numpy()

Equivalently ``graph_executor.GraphModule(lib["default"](dev, use_cuda_graph=True))``. How the
capture works, what is captured and when it is redone: runtime/graph_executor/cuda_graph.py.
"""

from __future__ import annotations

from typing import Any

from ...runtime.device import Device
from ...runtime.graph_executor import GraphExecutor
from ...runtime.module import Module
from ..graph_executor import GraphModule

__all__ = ["create", "GraphModuleCudaGraph"]


def create(graph_json_str: str, libmod: Module, device: Device) -> GraphModuleCudaGraph:
    """A :class:`GraphModuleCudaGraph` for ``graph_json_str`` over ``libmod`` on the CUDA
    ``device`` (every input, parameters included, must then be set)."""
    return GraphModuleCudaGraph(GraphExecutor(graph_json_str, libmod, device,
                                              use_cuda_graph=True))


class GraphModuleCudaGraph(GraphModule):
    """A :class:`GraphModule` whose runs replay CUDA graphs: the first ``run()`` (or
    :meth:`capture_cuda_graph`) runs the nodes and captures them; later runs launch the
    graphs (``set_input`` writes the buffers they read)."""

    def __init__(self, module: Any):
        super().__init__(module)
        if not isinstance(self.module, GraphExecutor):
            raise TypeError("GraphModuleCudaGraph needs a local graph executor")
        self.module.set_use_cuda_graph(True)

    def capture_cuda_graph(self) -> None:
        """Run once, capturing the launches (a no-op once captured for these shapes)."""
        self.module.run()

    def run(self, **input_dict: Any) -> None:
        self.module.run(**input_dict)

    def cuda_graph_info(self) -> dict:
        """Graphs captured, their kernel-node counts, calls left out of them (and why)."""
        return self.module.cuda_graph_info()
