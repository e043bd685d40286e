"""Shared helpers for benchmarks: strict schedules, a clean BLAS environment, timing, and result
lines."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable

_BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# Every bench script imports this module, so every bench builds with strict schedules: an
# operator schedule that fails is an error (relay.backend.strict_schedules), never a silently
# slow fallback that skews a figure. Inherited by worker processes; TVMPY_STRICT_SCHEDULES=0
# in the environment turns it off.
os.environ.setdefault("TVMPY_STRICT_SCHEDULES", "1")


def ensure_native_blas() -> None:
    """Re-run this script without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE.

    This machine sets them (older OpenBLAS builds misdetect the CPU); they pin numpy's OpenBLAS
    to its Haswell (AVX2) kernels, which would make numpy look ~2x slower than it is. Set
    BENCH_KEEP_BLAS_ENV=1 to measure numpy as the environment configures it instead.
    """
    if os.environ.get("BENCH_KEEP_BLAS_ENV") == "1":
        return
    if any(v in os.environ for v in _BLAS_VARS):
        env = {k: v for k, v in os.environ.items() if k not in _BLAS_VARS}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def blas_description() -> str:
    try:
        import numpy as np

        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        kern = os.environ.get("OPENBLAS_CORETYPE", "auto-detected kernel")
        return f"{blas.get('name')} {blas.get('version')} ({kern})"
    except Exception:  # pragma: no cover
        return "unknown BLAS"


def machine_description() -> str:
    import llvmlite.binding as llvm

    return f"{platform.machine()} {llvm.get_host_cpu_name()}, {os.cpu_count()} cores"


def best_time(fn: Callable[[], object], repeat: int = 10, number: int = 1) -> float:
    """Best-of-``repeat`` mean seconds of ``number`` calls (robust against a noisy machine)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return min(times)


