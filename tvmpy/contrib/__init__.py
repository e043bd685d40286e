"""Optional add-ons around the compiler: hand-written kernels, toolchains, emulators and the glue
that links them. Submodules load on first attribute access (``tvm.contrib.cc``), as in TVM."""

import importlib
from typing import Any

_SUBMODULES = ("cc", "nvcc", "qemu", "graph_executor", "debugger", "microkernel", "onnx_backend", "util",
               "utils",
               "graph_runtime", "download", "tar")
_SUBMODULES += ("cblas", "clang")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
