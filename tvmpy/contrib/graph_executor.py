"""``from tvmpy.contrib import graph_executor``: TVM's user-facing graph executor API.

    lib = relay.build(mod, target="llvm", params=params)           # or runtime.load_module(path)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("data", x); m.run(); y = m.get_output(0).numpy()

:class:`GraphModule` wraps the executor that a factory creates (runtime/graph_executor/executor.py holds
the implementation and its design notes); :func:`create` builds one from graph JSON and a library.

Threads: ``y, = m.infer(data=x)`` sets the inputs, runs and returns copies of the outputs in one
atomic call, safe from any number of threads at once (as onnxruntime's
``InferenceSession.run``). The stateful ``set_input``/``run``/``get_output`` sequence is for one
thread at a time: each call is atomic, and a thread whose inputs or outputs another thread's
calls replaced gets ``ConcurrentUseError`` instead of that thread's result
(runtime/concurrency.py).
"""

from __future__ import annotations

from typing import Any

from ..runtime.device import Device
from ..runtime.evaluator import BenchmarkResult
from ..runtime.graph_executor import (
    ConcurrentUseError,
    GraphExecutor,
    GraphJSONError,
    ProfileReport,
)
from ..runtime.module import Module
from ..runtime.ndarray import NDArray

__all__ = ["GraphModule", "create", "GraphExecutor", "GraphJSONError", "ProfileReport",
           "ConcurrentUseError"]


def create(graph_json_str: str, libmod: Module, device: Device | list | None = None,
           use_cuda_graph: bool | None = None) -> GraphModule:
    """A :class:`GraphModule` for ``graph_json_str`` over the compiled library ``libmod``; every
    input, parameters included, must then be set (``set_input(**params)``/``load_params``).
    ``use_cuda_graph`` (a CUDA device): capture the launch sequence once and replay it per run
    (runtime/graph_executor/cuda_graph.py; None: the environment variable
    ``TVMPY_USE_CUDA_GRAPH``, off when unset). TVM's spelling,
    ``tvm.contrib.cuda_graph.cuda_graph_executor.create``, works too."""
    return GraphModule(GraphExecutor(graph_json_str, libmod, device,
                                     use_cuda_graph=use_cuda_graph))


class GraphModule:
    """The graph executor as TVM users call it.

    ``set_input(key, value)`` / ``set_input(**inputs)`` copy in (checked: a wrong name lists the
    valid ones; a wrong shape or dtype names expected and got); ``run(**inputs)``;
    ``get_output(i, out=None)`` (a view of the output storage, overwritten by the next run, or a
    copy into ``out``; a copy once several threads use the module); ``infer(**inputs)`` (the
    thread-safe call: inputs in, numpy copies of the outputs out); ``get_input``,
    ``get_num_inputs``, ``get_num_outputs``, ``get_input_info``, ``load_params(bytes)``,
    ``benchmark(dev, ...)``, ``profile()``. Running before every input is set raises
    RuntimeError naming the missing ones."""

    def __init__(self, module: GraphExecutor | GraphModule):
        if isinstance(module, GraphModule):
            module = module.module
        # a remote executor (tvmpy.rpc: rlib["default"](remote_dev)) offers the same methods
        if not isinstance(module, GraphExecutor) and not getattr(module, "_is_graph_executor",
                                                                 False):
            raise TypeError("GraphModule wraps the executor a factory creates "
                            "(GraphModule(lib['default'](dev))), got "
                            f"{type(module).__name__}")
        self.module = module
        self._run = module.run

    def set_input(self, key: Any = None, value: Any = None, **params: Any) -> None:
        self.module.set_input(key, value, **params)

    def set_input_zero_copy(self, key: Any, value: Any) -> None:
        """Input ``key`` reads ``value``'s memory without a copy (GraphExecutor's)."""
        self.module.set_input_zero_copy(key, value)

    def run(self, **input_dict: Any) -> None:
        if not input_dict:
            self._run()
        elif isinstance(self.module, GraphExecutor):
            self._run(**input_dict)  # set and run atomically
        else:
            self.module.set_input(**input_dict)
            self._run()

    def infer(self, **inputs: Any) -> list[Any]:
        """Set ``inputs``, run, and return a numpy copy of every output: one atomic call,
        safe from several threads at once (onnxruntime's ``InferenceSession.run``)."""
        if isinstance(self.module, GraphExecutor):
            return self.module.infer(inputs)
        raise TypeError(f"infer() needs a local graph executor, not "
                        f"{type(self.module).__name__}; use set_input/run/get_output")

    def get_output(self, index: int, out: Any = None) -> NDArray:
        return self.module.get_output(index, out)

    def get_num_outputs(self) -> int:
        return self.module.get_num_outputs()

    def get_input(self, index: Any, out: NDArray | None = None) -> NDArray:
        return self.module.get_input(index, out)

    def get_num_inputs(self) -> int:
        return self.module.get_num_inputs()

    def get_input_index(self, name: str) -> int:
        return self.module.get_input_index(name)

    def get_input_info(self) -> tuple[dict, dict]:
        return self.module.get_input_info()

    def get_input_names(self, include_params: bool = False) -> list[str]:
        return self.module.get_input_names(include_params)

    def load_params(self, params_bytes: bytes) -> None:
        self.module.load_params(params_bytes)

    def benchmark(self, device: Device | None = None, func_name: str = "run", repeat: int = 5,
                  number: int = 5, min_repeat_ms: float | None = None,
                  limit_zero_time_iterations: int = 100, end_to_end: bool = False,
                  cooldown_interval_ms: float = 0, repeats_to_cooldown: int = 1,
                  **kwargs: Any) -> BenchmarkResult:
        """Seconds per run (TVM's signature): ``.mean``, ``.median``, ``.std``, ``.min``,
        ``.max``, ``.results``; ``kwargs`` are inputs to set first."""
        return self.module.benchmark(device, func_name, repeat, number, min_repeat_ms,
                                     limit_zero_time_iterations, end_to_end,
                                     cooldown_interval_ms, repeats_to_cooldown, **kwargs)

    def profile(self, number: int = 10, **inputs: Any) -> ProfileReport:
        """Per-node times; ``print()`` the result for a table, slowest node first."""
        return self.module.profile(number, **inputs)

    def __getitem__(self, key: str) -> Any:
        return self.module[key]

    def __repr__(self) -> str:
        return f"GraphModule({self.module!r})"
