"""VTA's behavioural simulator: exact in what it computes, and a cycle model of the pipeline.

``vta.simulator.stats()`` gives the counters of every run since the last
``vta.simulator.clear_stats()`` (as TVM's simulator profiler): ``cycle_count``, per module
(fetch, load, compute, store) busy and stall cycles (``fetch_queue_stall_cycles``: fetch waiting
for room in a full command queue), ``gemm_utilization`` (multiplying GEMM
micro-op iterations per cycle), DRAM bytes (``dram_read_bytes``, ``dram_write_bytes`` and
TVM's ``inp_load_nbytes`` ... ``out_store_nbytes``) and instruction counts.
"""

from __future__ import annotations

import threading

from .device import (
    ALU_II,
    ALU_PIPELINE_DEPTH,
    CMD_QUEUE_DEPTH,
    GEMM_PIPELINE_DEPTH,
    DeadlockError,
    Device,
    DeviceTimeoutError,
    SimulatorError,
    Stats,
)
from .dram import Dram, DramAccessError, DramBuffer
from .functional import BufferOverflowError

__all__ = ["Device", "Dram", "DramBuffer", "Stats", "stats", "clear_stats", "SimulatorError",
           "DeadlockError", "DeviceTimeoutError", "DramAccessError", "BufferOverflowError",
           "GEMM_PIPELINE_DEPTH", "ALU_PIPELINE_DEPTH", "ALU_II", "CMD_QUEUE_DEPTH", "record"]

_lock = threading.Lock()
_total = Stats()


def record(run: Stats) -> None:
    """Add one run's counters to the process-wide profile (every Device made by the runtime)."""
    with _lock:
        _total.merge(run)


def stats() -> dict[str, float]:
    """The counters of every simulated run since the last :func:`clear_stats`."""
    with _lock:
        return _total.as_dict()


def clear_stats() -> None:
    """Reset the counters :func:`stats` reports."""
    global _total
    with _lock:
        _total = Stats()
