"""Typed knobs read from the environment, also settable with ``with config(NAME=value):``.

- ``DEBUG`` (int, 0-4): 1 prints pass names and times, 4 also prints generated source.
- ``PASS_BUDGET_MS`` (float): with ``DEBUG>=1``, a pass (relay, tir) or the lowering of one fused
  function that runs longer than this logs a warning naming it (finds passes that blow up).
- ``DUMP_IR`` (directory): each lowering pass's output is written there as numbered files.
- ``CC`` (str): the C compiler for the C target and for linking shared libraries.
- ``PARALLEL_RUNTIME`` (str): what the LLVM backend's parallel loops run on: ``"pool"`` (tvmpy's
  thread pool, the default) or ``"gomp"`` (libgomp); also ``TVMPY_PARALLEL_RUNTIME``.
- ``CACHE`` (int, env ``TVMPY_CACHE``): 1 (default) keeps compiled kernels in a persistent cache
  so that rebuilding a model skips lowering and LLVM; 0 disables it.
- ``CACHE_DIR`` (str, env ``TVMPY_CACHE_DIR``): the cache's folder; default
  ``$XDG_CACHE_HOME/tvmpy/kernels`` (``~/.cache/tvmpy/kernels``).
- ``CACHE_MAX_BYTES`` (int, env ``TVMPY_CACHE_MAX_BYTES``): the cache's size cap (1 GiB); the
  least recently used entries are removed past it.
- ``BUILD_WORKERS`` (int, env ``TVMPY_BUILD_WORKERS``): worker processes ``relay.build``
  compiles kernels in; 0 (default): as many as this process may run on CPUs, 1: in-process.
- ``BUILD_START_METHOD`` (str, env ``TVMPY_BUILD_START_METHOD``): how those workers start:
  ``fork`` (default on Linux), ``spawn`` or ``forkserver``.
- ``HUGE_PAGES`` (int, env ``TVMPY_HUGE_PAGES``): 1 (default) places host buffers of at least
  2 MiB (weights, the graph executor's arena) on transparent huge pages where the OS offers
  them (Linux ``madvise``); 0 allocates them as any other buffer.

``with config(...)`` overrides apply to the calling thread only: a thread started inside the
block reads the environment and the defaults.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["config", "get", "overrides"]

_DEFAULTS: dict[str, Any] = {"DEBUG": 0, "DUMP_IR": "", "CC": "cc", "PARALLEL_RUNTIME": "",
                             "PASS_BUDGET_MS": 1000.0, "CACHE": 1, "CACHE_DIR": "", "CACHE_MAX_BYTES": 1 << 30,
                             "BUILD_WORKERS": 0, "BUILD_START_METHOD": "", "HUGE_PAGES": 1}
# the environment variable of a knob, where it is not the knob's own name
_ENV_NAMES = {k: "TVMPY_" + k for k in ("CACHE", "CACHE_DIR", "CACHE_MAX_BYTES", "BUILD_WORKERS",
                                        "BUILD_START_METHOD", "HUGE_PAGES")}


class _Overrides(threading.local):
    """The ``with config(...)`` layers active in one thread, innermost last."""

    def __init__(self) -> None:
        self.layers: list[dict[str, Any]] = []


_OVERRIDES = _Overrides()


def get(name: str) -> Any:
    if name not in _DEFAULTS:
        raise KeyError(f"unknown config {name!r}; known: {', '.join(_DEFAULTS)}")
    for layer in reversed(_OVERRIDES.layers):
        if name in layer:
            return layer[name]
    default = _DEFAULTS[name]
    env = _ENV_NAMES.get(name, name)
    raw = os.environ.get(env)
    if raw is None:
        return default
    if isinstance(default, str):
        return raw
    try:
        return type(default)(raw)
    except ValueError:
        raise ValueError(f"environment variable {env}={raw!r}: expected "
                         f"{type(default).__name__}") from None


@contextlib.contextmanager
def config(**values: Any) -> Iterator[None]:
    for k in values:
        if k not in _DEFAULTS:
            raise KeyError(f"unknown config {k!r}; known: {', '.join(_DEFAULTS)}")
    layers = _OVERRIDES.layers
    layers.append(values)
    try:
        yield
    finally:
        layers.pop()


def overrides() -> dict[str, Any]:
    """The calling thread's ``with config(...)`` values, innermost winning (what a worker
    process re-enters to see the same knobs)."""
    out: dict[str, Any] = {}
    for layer in _OVERRIDES.layers:
        out.update(layer)
    return out
