"""Typed knobs read from the environment, also settable with ``with config(NAME=value):``.

- ``DEBUG`` (int, 0-4): 1 prints pass names and times, 4 also prints generated source.
- ``PASS_BUDGET_MS`` (float): with ``DEBUG>=1``, a pass (relay, tir) or the lowering of one fused
  function that runs longer than this logs a warning naming it (finds passes that blow up).
- ``DUMP_IR`` (directory): each lowering pass's output is written there as numbered files.
- ``CC`` (str): the C compiler for the C target and for linking shared libraries.
- ``PARALLEL_RUNTIME`` (str): what the LLVM backend's parallel loops run on: ``"pool"`` (tvmpy's
  thread pool, the default) or ``"gomp"`` (libgomp); also ``TVMPY_PARALLEL_RUNTIME``.

``with config(...)`` overrides apply to the calling thread only: a thread started inside the
block reads the environment and the defaults.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["config", "get"]

_DEFAULTS: dict[str, Any] = {"DEBUG": 0, "DUMP_IR": "", "CC": "cc", "PARALLEL_RUNTIME": "",
                             "PASS_BUDGET_MS": 1000.0}


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
    raw = os.environ.get(name)
    if raw is None:
        return default
    return type(default)(raw) if not isinstance(default, str) else raw


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
