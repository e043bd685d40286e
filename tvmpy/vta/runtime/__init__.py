"""VTA's JIT runtime: the command queue that turns runtime calls into instruction streams."""

from __future__ import annotations

from .command_queue import (
    DEBUG_DUMP_INSN,
    DEBUG_DUMP_UOP,
    DEBUG_FORCE_SERIAL,
    DEBUG_SKIP_READ_BARRIER,
    DEBUG_SKIP_WRITE_BARRIER,
    CommandQueue,
    RuntimeAPIError,
    UopKernel,
    get_command_queue,
)

__all__ = ["DEBUG_DUMP_INSN", "DEBUG_DUMP_UOP", "DEBUG_FORCE_SERIAL", "DEBUG_SKIP_READ_BARRIER",
           "DEBUG_SKIP_WRITE_BARRIER", "CommandQueue", "RuntimeAPIError", "UopKernel", "get_command_queue"]
