"""The loop-IR pass pipeline: IR form 1 (after schedule lowering) -> form 2 (for codegen).

``lower_pipeline(func, target)`` runs :data:`PASSES` in order (TVM 0.6's phases: flatten and
simplify; loop partition, vectorize, virtual threads, double buffer, storage rewrite, unroll;
final simplify and clean-up; target intrinsic lowering), checks the result against the lowered
form contract (:func:`tvmpy.tir.analysis.verify_lowered`) and marks it ``"tir.lowered": True``.

``DUMP_IR=<dir>`` writes the input as ``00_input.txt`` and each pass's output as
``NN_<pass>.txt``; ``DEBUG>=1`` prints each pass's name and time; ``DEBUG>=2`` also checks
after each pass that every variable is defined once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from .. import config
from .analysis import verify_lowered, verify_single_definition
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

__all__ = ["lower_pipeline", "PASSES", "PHASE_END"]

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


# the pass index after which each phase ends (TVM 0.6's add_lower_pass phases)
PHASE_END = {0: 0, 1: 2, 2: 9, 3: len(PASSES)}


def _with_custom(custom: list[tuple[int, Callable[[PrimFunc], PrimFunc]]]
                 ) -> list[tuple[str, Pass]]:
    for item in custom:
        if not (isinstance(item, tuple) and len(item) == 2 and item[0] in PHASE_END
                and callable(item[1])):
            raise ValueError(f"custom pass {item!r}: expected (phase, pass) with phase in 0..3 "
                             "and pass a callable PrimFunc -> PrimFunc")
    out: list[tuple[str, Pass]] = []
    for i in range(len(PASSES) + 1):
        for phase, fn in custom:
            if PHASE_END[phase] == i:
                name = getattr(fn, "__name__", "custom")
                out.append((f"{name}", lambda f, t, fn=fn: fn(f)))
        if i < len(PASSES):
            out.append(PASSES[i])
    return out


def lower_pipeline(func: PrimFunc, target: Any = None,
                   custom_passes: list[tuple[int, Callable[[PrimFunc], PrimFunc]]] | None = None
                   ) -> PrimFunc:
    """Run the pass pipeline on ``func`` (form 1) and return the lowered PrimFunc (form 2).

    ``custom_passes``: ``(phase, pass)`` pairs run at the end of a phase (TVM's add_lower_pass):
    0 before flattening, 1 after flatten + simplify, 2 after the loop transformations (before
    the final simplification), 3 at the very end.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"lower_pipeline expects a tir.PrimFunc, got {type(func).__name__}")
    if func.attrs.get("tir.lowered"):
        return func
    if isinstance(target, str):
        from ..target import Target

        target = Target(target)
    passes = _with_custom(list(custom_passes)) if custom_passes else PASSES
    dump_dir = config.get("DUMP_IR")
    debug = config.get("DEBUG")
    if dump_dir:
        _dump(dump_dir, 0, "input", func)
    for i, (name, fn) in enumerate(passes, start=1):
        t0 = time.perf_counter()
        try:
            func = fn(func, target)
        except Exception as exc:
            if hasattr(exc, "add_note"):  # Python >= 3.11
                exc.add_note(f"in tir pass {i:02d} {name} on function {func.name}")
            raise
        if not isinstance(func, PrimFunc):
            raise TypeError(f"tir pass {name} returned {type(func).__name__}, not a PrimFunc")
        if debug >= 2:  # the invariant every pass keeps: one definition per variable
            try:
                verify_single_definition(func)
            except ValueError as err:
                raise ValueError(f"after tir pass {name}: {err}") from None
        if debug >= 1:
            ms = 1e3 * (time.perf_counter() - t0)
            print(f"[tir] {func.name}: {i:02d} {name:<20s} {ms:8.2f} ms")
        if dump_dir:
            _dump(dump_dir, i, name, func)
    verify_lowered(func)
    return func.with_attr("tir.lowered", True)
