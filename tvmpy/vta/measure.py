"""AutoTVM measurement for VTA (TVM measures VTA candidates through RPC on key "vta"):

* :class:`VTABuilder`: builds each candidate with ``vta.build`` under its configuration and saves
  it (``.o``, the VTA module format, loadable by any server that imported ``tvmpy.vta``).
* Runner: ``autotvm.RPCRunner("vta", host, port)`` against a tracker with
  ``tvmpy rpc server --device vta`` devices: the device's ``runtime.measure`` calls the VTA
  module's ``time_evaluator``, which reports the simulated time (cycles at the design's clock);
  or :class:`SimulatorRunner`, the same measurement in this process (TVM's LocalSession
  fallback), without a tracker.

Costs are seconds of the simulated design (``cycle_count / clock``); ``cycles(result)`` turns a
cost back into cycles.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..autotvm.measure.measure import (
    Builder,
    BuildResult,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
    Runner,
)
from .environment import get_env

__all__ = ["VTABuilder", "SimulatorRunner", "vta_measure_option", "cycles",
           "default_config_index"]


def _arg_info(args: Sequence[Any]) -> tuple:
    return tuple((tuple(int(d) for d in a.shape), str(a.dtype)) for a in args)


class VTABuilder(Builder):
    """Build candidates with ``vta.build`` in this process (one at a time: a VTA host driver
    builds in well under a second)."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = float(timeout)
        self.n_parallel = 1
        self._tmp: str | None = None
        self._task: Any = None

    def set_task(self, task: Any) -> None:
        self._task = task

    def build(self, measure_inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        from ..target import as_target
        from .build import build

        out = []
        for inp in measure_inputs:
            t0 = time.perf_counter()
            try:
                with as_target(inp.target):
                    s, args = inp.task.instantiate(inp.config)
            except Exception as e:  # noqa: BLE001 - a bad point of the space is a result
                out.append(BuildResult(None, (), int(MeasureErrorNo.INSTANTIATION_ERROR),
                                       f"{type(e).__name__}: {e}", time.perf_counter() - t0))
                continue
            try:
                mod = build(s, args, "ext_dev", get_env().target_host, name="default_function")
                if self._tmp is None or not os.path.isdir(self._tmp):
                    self._tmp = tempfile.mkdtemp(prefix="vta_autotvm_")
                fd, path = tempfile.mkstemp(suffix=".o", dir=self._tmp)
                os.close(fd)
                mod.save(path)
            except Exception as e:  # noqa: BLE001 - lowering failures (buffer overflow, ...)
                out.append(BuildResult(None, (), int(MeasureErrorNo.COMPILE_HOST),
                                       f"{type(e).__name__}: {e}", time.perf_counter() - t0))
                continue
            out.append(BuildResult(path, _arg_info(args), 0, None, time.perf_counter() - t0))
        return out

    def close(self) -> None:
        import shutil

        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


class SimulatorRunner(Runner):
    """Measure built candidates through ``rpc.LocalSession()`` (TVM's fallback without a
    board): upload, then the session's ``runtime.measure`` (random inputs, the VTA module's
    ``time_evaluator``: simulated seconds), exactly what a ``--device vta`` fleet device runs."""

    def __init__(self, number: int = 1, repeat: int = 1, seed: int = 0, timeout: float = 60.0):
        self.number, self.repeat, self.seed = int(number), int(repeat), int(seed)
        self.timeout = float(timeout)

    def run(self, measure_inputs: Sequence[MeasureInput],
            build_results: Sequence[BuildResult]) -> list[MeasureResult]:
        from ..rpc import LocalSession

        out = []
        with LocalSession() as sess:
            fmeasure = sess.get_function("runtime.measure")
            for i, bres in enumerate(build_results):
                t0 = time.perf_counter()
                if bres.error_no != 0 or bres.filename is None:
                    out.append(MeasureResult((bres.error,), bres.error_no, bres.time_cost,
                                             time.time()))
                    continue
                name = f"cand{i}.o"
                try:
                    sess.upload(bres.filename, target=name)
                    res = fmeasure(name, "default_function",
                                   [[list(s), str(d)] for s, d in bres.arg_info], self.number,
                                   self.repeat, 0.0, 0.0, "", self.seed)
                    out.append(MeasureResult(tuple(float(c) for c in res["costs"]), 0,
                                             bres.time_cost + time.perf_counter() - t0,
                                             time.time()))
                except Exception as e:  # noqa: BLE001 - a failed run is a result
                    out.append(MeasureResult((f"{type(e).__name__}: {e}",),
                                             int(MeasureErrorNo.RUNTIME_DEVICE),
                                             bres.time_cost + time.perf_counter() - t0,
                                             time.time()))
                finally:
                    try:
                        os.remove(bres.filename)
                    except OSError:
                        pass
        return out


def vta_measure_option(tracker: tuple[str, int] | None = None, key: str = "vta",
                       **runner_kw: Any) -> dict:
    """``measure_option`` for VTA: the VTA builder with the fleet's ``key`` devices through the
    tracker at ``tracker=(host, port)``, or the in-process simulator when ``tracker`` is None."""
    from ..autotvm.measure.measure import measure_option

    if tracker is None:
        return measure_option(builder=VTABuilder(), runner=SimulatorRunner(**runner_kw))
    from ..autotvm.measure.rpc_runner import RPCRunner

    host, port = tracker
    return measure_option(builder=VTABuilder(),
                          runner=RPCRunner(key, host=host, port=port, number=1, repeat=1,
                                           **runner_kw))


def cycles(result: MeasureResult) -> int:
    """The simulated cycles of a successful measurement."""
    hz = float(getattr(get_env().hw_config, "clock_mhz", 100.0)) * 1e6
    return round(float(np.mean(result.costs)) * hz)


def default_config_index(task: Any) -> int:
    """The index in ``task.config_space`` of the template's untuned (fallback) configuration,
    so a tuner can be seeded with it (measure it first: the best found is then never worse
    than the default). Raises ValueError when a fallback knob value is not in the space."""
    from ..autotvm.space import FallbackConfigEntity

    fb = FallbackConfigEntity()
    task.instantiate(fb)
    space = task.config_space
    knob = []
    for name, sub in space.space_map.items():
        want = str(fb[name])
        names = [str(e) for e in sub.entities]
        if want not in names:
            raise ValueError(f"the default {name}={want} is not in the tuning space "
                             f"({names})")
        knob.append(names.index(want))
    return space.knob2point(knob)
