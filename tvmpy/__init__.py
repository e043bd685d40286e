"""tvmpy: an end-to-end optimizing compiler for deep learning, in the design of TVM.

``import tvmpy as tvm`` reads like a TVM (paper era) tutorial: ``tvm.te``, ``tvm.tir``,
``tvm.lower``, ``tvm.build``, ``tvm.nd.array``, ``tvm.cpu(0)``, ``tvm.runtime.load_module``.
Sub-packages load on first use, so ``import tvmpy`` stays cheap and ``import tvmpy.runtime``
loads the runtime alone (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import importlib
import time as _time
from typing import Any

#: when this process loaded tvmpy's code: a source file changed after it means the running code
#: is not the code on disk (codegen/kernel_cache.py then stores and serves no kernels)
_IMPORTED_NS = _time.time_ns()

__version__ = "0.1.0"

_LAZY_MODULES = {"ir", "target", "te", "tir", "arith", "runtime", "nd", "codegen", "contrib",
                 "transform", "config", "testing", "topi", "relay", "autotvm", "driver", "rpc",
                 "module"}  # module: TVM 0.6's tvm.module.load
_LAZY_MODULES.add("auto_scheduler")  # tvm.auto_scheduler
_LAZY_ATTRS = {
    "Target": ("target", "Target"),
    "lower": ("driver", "lower"),
    "build": ("driver", "build"),
    "cpu": ("runtime", "cpu"),
    "cuda": ("runtime", "cuda"),
    "gpu": ("runtime", "gpu"),
    "opencl": ("runtime", "opencl"),
    "cl": ("runtime", "cl"),
    "vulkan": ("runtime", "vulkan"),
    "webgpu": ("runtime", "webgpu"),
    "device": ("runtime", "device"),
    "Device": ("runtime", "Device"),
    "context": ("runtime", "device"),  # v0.6/0.7 name of tvm.device
    "IRModule": ("ir.module", "IRModule"),
    "register_func": ("runtime.packed_func", "register_func"),
    "get_global_func": ("runtime.packed_func", "get_global_func"),
    "list_global_func_names": ("runtime.packed_func", "list_global_func_names"),
    "instrument": ("ir", "instrument"),  # TVM's ``tvm.instrument`` (= tvm.ir.instrument)
}
# v0.6 tutorials spell the tensor-expression API at top level (tvm.placeholder, tvm.compute, ...)
_LAZY_ATTRS.update({n: ("te", n) for n in (
    "placeholder", "compute", "create_schedule", "var", "size_var", "reduce_axis", "sum",
    "thread_axis", "comm_reducer", "decl_tensor_intrin", "max_value", "min_value")})
_LAZY_ATTRS["scan"] = ("te", "scan")  # v0.6's tvm.scan
_LAZY_ATTRS.update({n: ("tir", n) for n in (
    "const", "decl_buffer", "call_extern", "call_pure_extern", "exp", "log", "sqrt", "tanh",
    "sigmoid", "if_then_else", "indexdiv", "indexmod", "floordiv", "floormod", "truncdiv",
    "truncmod", "all", "any", "ir_builder")})


_LAZY_ATTRS["call_packed"] = ("tir", "call_packed")  # v0.6: tvm.call_packed
_LAZY_ATTRS["_ffi"] = ("runtime", "packed_func")  # tvm._ffi.register_func / get_global_func


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        if name == "nd":
            return importlib.import_module(".runtime.ndarray", __name__)
        return importlib.import_module("." + name, __name__)
    if name in _LAZY_ATTRS:
        mod, attr = _LAZY_ATTRS[name]
        return getattr(importlib.import_module("." + mod, __name__), attr)
    raise AttributeError(f"module 'tvmpy' has no attribute {name!r}")
