"""``time_evaluator``: TVM-style timing of a compiled function.

The arguments are checked (and converted) once by a first, checked call that also warms caches;
the timed loop then calls the ctypes function directly with the prepared arguments, so the
overhead per call is one ctypes call (about a microsecond). ``min_repeat_ms`` follows TVM: when a
repeat of ``number`` calls lasts less, ``number`` grows (and stays grown for later repeats) and the
repeat is measured again.
"""

from __future__ import annotations

import statistics
import time
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .device import Device

__all__ = ["BenchmarkResult", "ProfileResult", "time_evaluator", "time_calls"]


class BenchmarkResult:
    """Seconds per call for each repeat (``results``) and their mean/median/std/min/max."""

    def __init__(self, results: Sequence[float]):
        self.results = tuple(float(r) for r in results)
        self.mean = statistics.fmean(self.results)
        self.median = statistics.median(self.results)
        self.std = statistics.pstdev(self.results) if len(self.results) > 1 else 0.0
        self.min = min(self.results)
        self.max = max(self.results)

    def __repr__(self) -> str:
        """TVM's repr: the statistics in seconds, then every repeat's result."""
        return (f"BenchmarkResult(min={self.min}, mean={self.mean}, median={self.median}, "
                f"max={self.max}, std={self.std}, results={self.results})")

    def __str__(self) -> str:
        """TVM's ``print(result)``: a table of the statistics in milliseconds (its columns are
        12 characters wide, centred, its line ends with TVM's 15 spaces)."""
        head = ["mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)"]
        vals = [self.mean, self.median, self.max, self.min, self.std]
        return ("Execution time summary:\n" + " ".join(f"{h:^12}" for h in head) + "\n"
                + " ".join(f"{v * 1000:^12.4f}" for v in vals) + " " * 15)


#: TVM 0.6/0.7's ``time_evaluator`` result (``tvm.runtime.module.ProfileResult``): the mean
#: seconds per call and each repeat's; :class:`BenchmarkResult` has both attributes too.
ProfileResult = namedtuple("ProfileResult", ["mean", "results"])


_FLUSH_BYTES = 64 << 20  # more than any last-level cache of this class of machine
PREPROCS = ("", "cache_flush_cpu_non_first_arg")


def _flush_caches(buf: list) -> None:
    if not buf:
        buf.append(np.zeros(_FLUSH_BYTES // 8, dtype=np.int64))
    buf[0] += 1  # streams the whole buffer through the caches, evicting the arguments


def time_evaluator(func: Any, dev: Device, number: int = 10, repeat: int = 1,
                   min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
                   f_preproc: str = "") -> Callable[..., BenchmarkResult]:
    """Return ``evaluate(*args) -> BenchmarkResult`` for the runtime Function ``func`` (or any
    function with its protocol: ``name``, ``device``, ``prepare(args) -> (raw, writeback)``,
    ``_cfunc(*raw) -> return code``, ``_raise_error(rc)``; e.g. the loop-IR interpreter's).

    ``f_preproc="cache_flush_cpu_non_first_arg"`` (TVM's name) evicts the caches before each
    repeat, to time cold-cache behaviour."""
    if f_preproc not in PREPROCS:
        raise ValueError(f"time_evaluator: unknown f_preproc {f_preproc!r}; known: {PREPROCS}")
    if not isinstance(dev, Device):
        raise TypeError(f"time_evaluator: dev must be a tvm Device, got {type(dev).__name__}")
    if dev != func.device:
        raise ValueError(f"time_evaluator: {func.name} runs on {func.device}, not on {dev}")
    for name, v in (("number", number), ("repeat", repeat)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"time_evaluator: {name} must be a positive int, got {v!r}")
    if min_repeat_ms < 0 or cooldown_interval_ms < 0:
        raise ValueError("time_evaluator: min_repeat_ms and cooldown_interval_ms must be >= 0")

    def evaluate(*args: Any) -> BenchmarkResult:
        raw, writeback = func.prepare(args)
        cfunc = func._cfunc
        rc = cfunc(*raw)  # checked warm-up call
        if rc != 0:
            func._raise_error(rc)
        n = int(number)
        clock = time.perf_counter
        results = []
        flush_buf: list = []
        for r in range(int(repeat)):
            if r and cooldown_interval_ms:
                time.sleep(cooldown_interval_ms / 1e3)
            if f_preproc:
                _flush_caches(flush_buf)
            while True:
                loop = range(n)
                t0 = clock()
                for _ in loop:
                    rc = cfunc(*raw)
                elapsed = clock() - t0
                if rc != 0:
                    func._raise_error(rc)
                if min_repeat_ms <= 0 or elapsed * 1e3 >= min_repeat_ms:
                    break
                per_call_ms = max(elapsed * 1e3 / n, 1e-6)
                n = max(int(min_repeat_ms / per_call_ms) + 1, int(n * 1.618))
            results.append(elapsed / n)
        for dst, src in writeback:
            if dst is not None:
                np.copyto(dst, src)
        return BenchmarkResult(results)

    return evaluate


def check_counts(what: str, number: Any, repeat: Any, min_repeat_ms: float = 0,
                 cooldown_interval_ms: float = 0, f_preproc: str = "") -> None:
    """The checks every timer makes of TVM's timing options (``what`` names the timer)."""
    for name, v in (("number", number), ("repeat", repeat)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{what}: {name} must be a positive int, got {v!r}")
    if (min_repeat_ms or 0) < 0 or cooldown_interval_ms < 0:
        raise ValueError(f"{what}: min_repeat_ms and cooldown_interval_ms must be >= 0")
    if f_preproc not in PREPROCS:
        raise ValueError(f"{what}: unknown f_preproc {f_preproc!r}; known: {PREPROCS}")


def time_calls(call: Callable[[], Any], dev: Device, number: int = 10, repeat: int = 1,
               min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
               repeats_to_cooldown: int = 1, f_preproc: str = "") -> BenchmarkResult:
    """Seconds per ``call()`` (a Python callable: a graph executor's ``run``), with the options
    of :func:`time_evaluator`; each repeat ends with ``dev.sync()`` (queued GPU work counted).
    The caller makes the warm-up call (with its checks)."""
    check_counts("time_calls", number, repeat, min_repeat_ms, cooldown_interval_ms, f_preproc)
    clock, n, results = time.perf_counter, int(number), []
    flush_buf: list = []
    min_ms = float(min_repeat_ms or 0)
    for r in range(int(repeat)):
        if r and cooldown_interval_ms and r % max(1, int(repeats_to_cooldown)) == 0:
            time.sleep(cooldown_interval_ms / 1e3)
        if f_preproc:
            _flush_caches(flush_buf)
        while True:
            t0 = clock()
            for _ in range(n):
                call()
            dev.sync()
            elapsed = clock() - t0
            if elapsed * 1e3 >= min_ms:
                break
            per_ms = max(elapsed * 1e3 / n, 1e-6)
            n = max(int(min_ms / per_ms) + 1, int(n * 1.618))
        results.append(elapsed / n)
    return BenchmarkResult(results)
