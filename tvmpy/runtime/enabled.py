"""``tvm.runtime.enabled(target)``: whether this installation can compile for a target kind.

TVM answers from the features its C++ library was built with; tvmpy's equivalent is whether the
optional pieces a kind needs are installed: llvmlite (llvm, nvptx), a C compiler (c), NVRTC
(cuda), pyopencl (opencl); the interpreter (interp) and RPC (rpc) always. Whether a device to
run on exists is a separate question (``tvm.device(kind).exist``).
"""

from __future__ import annotations

import importlib.util
import shutil

__all__ = ["enabled"]


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _has_cc() -> bool:
    from .linker import compiler

    try:
        return shutil.which(compiler()[0]) is not None
    except (OSError, ValueError, RuntimeError):
        return False


def _has_nvrtc() -> bool:
    from ..contrib.nvcc import CompileError, find_nvrtc

    try:
        find_nvrtc()
    except CompileError:
        return False
    return True


def enabled(target: str) -> bool:
    """True when code for ``target`` (a kind or a full target string, e.g. "cuda -arch=sm_80")
    can be generated here. Kinds tvmpy has no code generator for (vulkan, metal, rocm, ...) are
    False."""
    if not isinstance(target, str) or not target.split():
        raise ValueError(f"enabled() takes a target string such as 'llvm', got {target!r}")
    kind = target.split()[0].lower()
    if kind in ("llvm", "cpu", "nvptx"):
        return _has_module("llvmlite")
    if kind == "c":
        return _has_cc()
    if kind in ("cuda", "gpu"):
        return _has_nvrtc()
    if kind in ("opencl", "cl"):
        return _has_module("pyopencl")
    if kind == "vulkan":
        return _has_module("vulkan")
    if kind == "webgpu":
        return _has_module("wgpu")
    # tvmpy's numpy interpreter and its RPC (tvmpy.rpc, pure Python) need nothing more
    return kind in ("interp", "rpc")
