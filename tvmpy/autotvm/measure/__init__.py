"""Measurement of candidate configurations: build in parallel workers, time in a runner process.

See measure.py for the API (``MeasureInput``, ``MeasureResult``, ``MeasureErrorNo``,
``measure_option``, ``create_measure_batch``), local_builder.py and local_runner.py for the
local implementations, rpc_runner.py for measuring on the device fleet (tvmpy.rpc), workers.py
for the worker processes.
"""

from .local_builder import LocalBuilder
from .local_runner import LocalRunner
from .measure import (
    Builder,
    BuildResult,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    Runner,
    create_measure_batch,
    measure_option,
)
from .rpc_runner import RPCRunner

__all__ = ["MeasureInput", "MeasureResult", "MeasureErrorNo", "BuildResult", "Builder", "Runner",
           "LocalBuilder", "LocalRunner", "RPCRunner", "measure_option", "create_measure_batch"]
