"""Compilation targets: ``Target`` (target.py) and the intrinsic lowering rules per target kind
(intrin.py)."""

from typing import Any

from .generic_func import GenericFunc, generic_func  # noqa: F401
from .intrin import register_intrin_rule  # noqa: F401
from .target import Target, arm_cpu, as_target, current_target, rasp, resolve_target  # noqa: F401


def cuda(model: str = "unknown", arch: str | None = None, options: Any = None) -> Target:
    """TVM's ``tvm.target.cuda()``: ``Target("cuda")`` (``-arch=sm_80`` when ``arch`` given)."""
    text = "cuda" + (f" -arch={arch}" if arch else "")
    if options:
        text += " " + (options if isinstance(options, str) else " ".join(options))
    return Target(text)


def opencl(model: str = "unknown", options: Any = None) -> Target:
    """TVM's ``tvm.target.opencl()``: ``Target("opencl")``."""
    text = "opencl"
    if options:
        text += " " + (options if isinstance(options, str) else " ".join(options))
    return Target(text)


def create(target: Any) -> Target:
    """TVM v0.6's ``tvm.target.create("llvm ...")``: the same as ``Target(...)``."""
    return Target(target)
