"""VTA's JIT runtime: the command queue that turns runtime calls into instruction streams."""

from __future__ import annotations

from .command_queue import CommandQueue, RuntimeAPIError, UopKernel, get_command_queue

__all__ = ["CommandQueue", "RuntimeAPIError", "UopKernel", "get_command_queue"]
