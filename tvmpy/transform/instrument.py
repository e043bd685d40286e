"""``PassTrace``: the one inspection helper of the pass pipelines (relay.build's graph passes,
the tir lowering pipeline), driven by :mod:`tvmpy.config`:

- ``DUMP_IR=<dir>``: the input as ``00_input.txt`` and the module after each pass that ran as
  ``NN_<pass>.txt`` (numbered in run order), in ``<dir>/<folder>``;
- ``DEBUG>=1``: one line per pass, ``[<label>] NN <pass> <ms> ms``, and a warning (logger
  ``tvmpy.transform``) for a pass slower than ``PASS_BUDGET_MS`` (:func:`check_budget`);
- ``DEBUG>=2``: the pipeline's invariant ``check(mod)`` after each pass (its error names the
  pass).

An exception raised by a pass gets a note naming the pipeline, the pass and its number.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import config

if TYPE_CHECKING:
    from ..ir.module import IRModule
    from .passes import Pass

__all__ = ["PassTrace", "dump_text", "check_budget"]

_LOG = logging.getLogger("tvmpy.transform")


def check_budget(what: str, seconds: float) -> None:
    """Under ``DEBUG>=1``: warn when ``what`` (a pass, one function's lowering) took longer than
    ``PASS_BUDGET_MS``: the way to find a walk that grows exponentially before it hangs."""
    if config.get("DEBUG") < 1:
        return
    budget = float(config.get("PASS_BUDGET_MS"))
    if 1e3 * seconds > budget:
        _LOG.warning("%s took %.0f ms, over the per-pass budget of %.0f ms (PASS_BUDGET_MS)",
                     what, 1e3 * seconds, budget)


def dump_text(directory: str, filename: str, text: str) -> None:
    """Write ``text`` (newline-terminated) to ``directory/filename``, creating the directory."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, filename), "w") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")


class PassTrace:
    """DUMP_IR / DEBUG / invariant checks for one run of a pipeline (a fresh one per run)."""

    def __init__(self, label: str, folder: str = "",
                 check: Callable[[IRModule], None] | None = None,
                 text: Callable[[IRModule], str] = str):
        root = config.get("DUMP_IR")
        self.dump_dir = os.path.join(root, folder) if root and folder else root
        self.debug = config.get("DEBUG")
        self.label, self.check, self.text = label, check, text
        self.index = 0

    def start(self, mod: IRModule) -> None:
        """Dump the pipeline's input (``00_input.txt``)."""
        self.index = 0
        if self.dump_dir:
            dump_text(self.dump_dir, "00_input.txt", self.text(mod))

    def run(self, p: Pass, mod: IRModule) -> IRModule:
        """Run ``p`` on ``mod``, numbered as the next pass of this pipeline."""
        self.index += 1
        t0 = time.perf_counter()
        try:
            mod = p(mod)
        except Exception as exc:
            if hasattr(exc, "add_note"):  # Python >= 3.11
                exc.add_note(f"in {self.label} pass {self.index:02d} {p.name}")
            raise
        if self.debug >= 2 and self.check is not None:
            try:
                self.check(mod)
            except ValueError as err:
                raise ValueError(f"after {self.label} pass {p.name}: {err}") from None
        if self.debug >= 1:
            secs = time.perf_counter() - t0
            print(f"[{self.label}] {self.index:02d} {p.name:<24s} {1e3 * secs:8.2f} ms")
            check_budget(f"pass {p.name} ({self.label} pass {self.index:02d})", secs)
        if self.dump_dir:
            dump_text(self.dump_dir, f"{self.index:02d}_{p.name}.txt", self.text(mod))
        return mod
