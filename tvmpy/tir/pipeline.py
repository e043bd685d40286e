"""The loop-IR pass pipeline: IR form 1 (after schedule lowering) -> form 2 (for codegen).

``lower_pipeline(func, target)`` runs :data:`PASSES` in order (TVM 0.6's phases: flatten and
simplify; loop partition, vectorize, virtual threads, double buffer, storage rewrite, unroll;
final simplify and clean-up; target intrinsic lowering), checks the result against the lowered
form contract (:func:`tvmpy.tir.analysis.verify_lowered`) and marks it ``"tir.lowered": True``.

``DUMP_IR=<dir>`` writes the input as ``00_input.txt`` and each pass's output as
``NN_<pass>.txt``; ``DEBUG>=1`` prints each pass's name and time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from .. import config
from .analysis import verify_lowered
from .function import PrimFunc
from .transform import (
    InjectDoubleBuffer,
    InjectVirtualThread,
    LoopPartition,
    LowerIntrin,
    RemoveNoOp,
    Simplify,
    StorageFlatten,
    StorageRewrite,
    UnrollLoop,
    VectorizeLoop,
)

__all__ = ["lower_pipeline", "PASSES"]

Pass = Callable[[PrimFunc, Any], PrimFunc]

PASSES: list[tuple[str, Pass]] = [
    ("StorageFlatten", lambda f, t: StorageFlatten(f)),
    ("Simplify", lambda f, t: Simplify(f)),
    ("LoopPartition", lambda f, t: LoopPartition(f)),
    ("Simplify", lambda f, t: Simplify(f)),
    ("VectorizeLoop", lambda f, t: VectorizeLoop(f)),
    ("InjectVirtualThread", lambda f, t: InjectVirtualThread(f)),
    ("InjectDoubleBuffer", lambda f, t: InjectDoubleBuffer(f)),
    ("StorageRewrite", lambda f, t: StorageRewrite(f)),
    ("UnrollLoop", lambda f, t: UnrollLoop(f)),
    ("Simplify", lambda f, t: Simplify(f)),
    ("RemoveNoOp", lambda f, t: RemoveNoOp(f)),
    ("LowerIntrin", lambda f, t: LowerIntrin(f, t)),
]


def _dump(directory: str, index: int, name: str, func: PrimFunc) -> None:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{index:02d}_{name}.txt")
    with open(path, "w") as fh:
        fh.write(str(func) + "\n")


def lower_pipeline(func: PrimFunc, target: Any = None) -> PrimFunc:
    """Run the pass pipeline on ``func`` (form 1) and return the lowered PrimFunc (form 2)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"lower_pipeline expects a tir.PrimFunc, got {type(func).__name__}")
    if func.attrs.get("tir.lowered"):
        return func
    dump_dir = config.get("DUMP_IR")
    debug = config.get("DEBUG")
    if dump_dir:
        _dump(dump_dir, 0, "input", func)
    for i, (name, fn) in enumerate(PASSES, start=1):
        t0 = time.perf_counter()
        try:
            func = fn(func, target)
        except Exception as exc:
            exc.add_note(f"in tir pass {i:02d} {name} on function {func.name}")
            raise
        if debug >= 1:
            print(f"[tir] {func.name}: {i:02d} {name:<20s} {1e3 * (time.perf_counter() - t0):8.2f} ms")
        if dump_dir:
            _dump(dump_dir, i, name, func)
    verify_lowered(func)
    return func.with_attr("tir.lowered", True)
