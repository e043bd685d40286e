"""The runtime: what runs compiled code.

- device.py: ``Device``, ``cpu``, ``device``;
- ndarray.py (also ``tvm.nd``): aligned host arrays, DLPack both ways (dlpack.py);
- module.py: ``Module`` (build from objects, call, import, export_library) and ``load_module``;
- abi.py: the calling convention and the module metadata every code generator follows;
- function.py: the checked ctypes call of one compiled function;
- graph_json.py, graph_executor/: the graph format and its executor (plus the factory module
  ``relay.build`` returns); param_dict.py: ``save_param_dict`` / ``load_param_dict``;
- concurrency.py: executors used from several threads (``ConcurrentUseError``);
- linker.py: system compiler/linker driving; evaluator.py: ``time_evaluator``;
- packed_func.py: the PackedFunc registry (``register_func``, ``get_global_func``,
  ``convert``), which generated code reaches through ``tir.call_packed``; blas.py: the C BLAS
  functions it provides (``tvm.contrib.cblas.*``).

The runtime imports nothing of the compiler (only ``ir.dtype`` and ``config``): an exported
library loads and runs with ``tvmpy.runtime`` and numpy alone.
"""

from __future__ import annotations

from . import ndarray
from .concurrency import ConcurrentUseError
from .device import Device, cl, cpu, cuda, device, gpu, opencl, vulkan, webgpu
from .enabled import enabled as enabled  # TVM's tvm.runtime.enabled(target)
from .evaluator import BenchmarkResult
from .function import Function
from .module import Module, load_module
from .ndarray import NDArray
from .packed_func import (
    PackedFunc,
    convert,
    convert_to_tvm_func,
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from .param_dict import load_param_dict, save_param_dict

__all__ = ["Device", "cpu", "cuda", "gpu", "opencl", "cl", "vulkan", "webgpu", "device", "NDArray", "Module", "Function", "load_module", "ndarray",
           "BenchmarkResult", "save_param_dict", "load_param_dict", "ConcurrentUseError",
           "PackedFunc", "convert", "convert_to_tvm_func", "get_global_func", "register_func",
           "list_global_func_names", "remove_global_func"]
