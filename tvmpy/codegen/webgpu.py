"""Target "webgpu": device PrimFuncs -> WGSL compute shaders (:mod:`.wgsl`), host PrimFuncs ->
launch plans (:func:`.gpu_source.launch_plan`), both in a runtime GPU module
(``runtime/gpu_module.py``) run on wgpu-py (``runtime/webgpu_module.py``).

The device module's source is the JSON ``{kernel name: KERNEL}`` of docs/WEB_ARTEFACT.md
(WGSL text, bindings, workgroup size), the same object the exported web artefact carries.
"""

from __future__ import annotations

import json
from typing import Any

from .gpu_source import launch_plan
from .opencl import split_functions
from .wgsl import emit_wgsl

__all__ = ["build", "webgpu_kernels"]


def webgpu_kernels(kernels: list[Any]) -> dict[str, dict]:
    """``{kernel name: KERNEL JSON}`` (docs/WEB_ARTEFACT.md) of device PrimFuncs."""
    return {name: k.to_json() for name, k in emit_wgsl(kernels).items()}


def build(funcs: Any, target: Any = None, entry: str | None = None) -> Any:
    """A runtime module for host + device PrimFuncs (GPU_API form) of target webgpu."""
    from ..runtime.gpu_module import GPUHostModule

    hosts, kernels = split_functions(funcs)
    source = json.dumps(webgpu_kernels(kernels), indent=1, sort_keys=True)
    plan = launch_plan(hosts, kernels)
    return GPUHostModule.create("webgpu", source, plan, entry or hosts[0].name)
