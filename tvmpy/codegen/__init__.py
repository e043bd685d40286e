"""Code generators: llvm (llvmlite), c (C source + system compiler), and the GPU ones (CUDA /
NVPTX, OpenCL, Vulkan SPIR-V, WebGPU WGSL) behind :func:`gpu_build`."""

from __future__ import annotations

from typing import Any

#: the code generator of each GPU target kind: a module of this package whose
#: ``build(mod: IRModule, target) -> Module`` takes ``driver.lower_gpu``'s output
GPU_CODEGENS: dict[str, str] = {"opencl": "opencl", "cuda": "cuda", "nvptx": "cuda",
                                "vulkan": "vulkan", "webgpu": "webgpu"}


def gpu_build(kind: str) -> Any:
    """``build`` of target kind ``kind``'s GPU code generator (imported on first use)."""
    import importlib

    if kind not in GPU_CODEGENS:
        raise ValueError(f"no GPU code generator for target kind {kind!r} "
                         f"(known: {', '.join(sorted(GPU_CODEGENS))})")
    return importlib.import_module(f"{__name__}.{GPU_CODEGENS[kind]}").build
