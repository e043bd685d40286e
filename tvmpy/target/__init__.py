"""Compilation targets."""

from typing import Any

from .target import Target, current_target  # noqa: F401


def create(target: Any) -> Target:
    """TVM v0.6's ``tvm.target.create("llvm ...")``: the same as ``Target(...)``."""
    return Target(target)
