"""Tune-loop callbacks: ``callback(tuner, inputs, results)`` after every measured batch.

``log_to_file`` appends one JSON line per measurement (``autotvm.record.encode``) and flushes
each line at once, so a run killed with ``kill -9`` loses at most the batch in flight and can
resume from its log (see :mod:`.tuner`). ``progress_bar`` draws a one-line updating bar.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ...contrib.utils import open_for_append
from .tuner import result_flops

Callback = Callable[[Any, Sequence[Any], Sequence[Any]], None]

_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


def log_to_file(file_out: str | os.PathLike | TextIO) -> Callback:
    """A callback that appends each measurement to ``file_out`` as one JSON line.

    Parameters
    ----------
    file_out : str, os.PathLike or file object
        A path (opened in append mode for each batch, created when missing) or an open text
        file object (written and flushed, never closed).
    """
    if isinstance(file_out, str | os.PathLike):
        path = os.fspath(file_out)
        if not path:
            raise ValueError("log_to_file needs a non-empty path")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"log_to_file: directory {parent!r} does not exist")

        def _callback(_tuner: Any, inputs: Sequence[Any], results: Sequence[Any]) -> None:
            with open_for_append(path) as f:  # after a cut last line: on a new line
                for inp, res in zip(inputs, results):
                    f.write(record.encode(inp, res) + "\n")
                    f.flush()

    elif hasattr(file_out, "write") and hasattr(file_out, "flush"):
        stream = file_out

        def _callback(_tuner: Any, inputs: Sequence[Any], results: Sequence[Any]) -> None:
            for inp, res in zip(inputs, results):
                stream.write(record.encode(inp, res) + "\n")
                stream.flush()

    else:
        raise TypeError(f"log_to_file needs a path or a text file object, got {file_out!r}")
    from .. import record

    return _callback


def progress_bar(
    total: int, prefix: str = "", si_prefix: str = "G", stream: TextIO | None = None
) -> Callback:
    """A callback drawing ``<prefix> Current/Best: x/y GFLOPS | Progress: (i/total) | t s``.

    The line is redrawn in place (carriage return) after every batch and ended with
    `` Done.`` and a newline when ``total`` trials are done or the tuner stops early.

    Parameters
    ----------
    total : int
        Trials expected (usually the ``n_trial`` given to ``tune``).
    prefix : str
        Text before the bar, e.g. the task's name.
    si_prefix : str
        Unit prefix of the throughput: "", "K", "M", "G", "T" or "P".
    stream : file object, optional
        Where to draw; ``sys.stdout`` by default.
    """
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ValueError(f"progress_bar total must be a non-negative int, got {total!r}")
    if si_prefix not in _SI:
        raise ValueError(f"unknown si_prefix {si_prefix!r}; one of {sorted(_SI)}")
    scale = _SI[si_prefix]
    state = {"ct": 0, "cur": 0.0, "start": None, "done": False}

    def _callback(tuner: Any, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        out = stream if stream is not None else sys.stdout
        if state["start"] is None:
            state["start"] = time.time()
        state["ct"] += len(inputs)
        for inp, res in zip(inputs, results):
            if res.error_no == 0:
                state["cur"] = result_flops(inp.task, res)
        best = float(getattr(tuner, "best_flops", 0.0) or 0.0)
        elapsed = time.time() - state["start"]
        out.write(
            f"\r{prefix} Current/Best: {state['cur'] / scale:7.2f}/{best / scale:7.2f} "
            f"{si_prefix}FLOPS | Progress: ({state['ct']}/{total}) | {elapsed:.2f} s"
        )
        ttl = getattr(tuner, "ttl", None)
        if not state["done"] and (state["ct"] >= total or (ttl is not None and ttl <= 0)):
            state["done"] = True
            out.write(" Done.\n")
        out.flush()

    return _callback
