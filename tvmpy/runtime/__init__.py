"""The runtime: what runs compiled code.

- device.py: ``Device``, ``cpu``, ``device``;
- ndarray.py (also ``tvm.nd``): aligned host arrays, DLPack both ways (dlpack.py);
- module.py: ``Module`` (build from objects, call, import, export_library) and ``load_module``;
- function.py: the checked ctypes call of one compiled function (codegen/abi.py convention);
- linker.py: system compiler/linker driving; evaluator.py: ``time_evaluator``.
"""

from __future__ import annotations

from . import ndarray
from .device import Device, cpu, device
from .evaluator import BenchmarkResult
from .function import Function
from .module import Module, load_module
from .ndarray import NDArray

__all__ = ["Device", "cpu", "device", "NDArray", "Module", "Function", "load_module", "ndarray",
           "BenchmarkResult"]
