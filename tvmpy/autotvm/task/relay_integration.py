"""Task extraction from relay programs (TVM's ``autotvm.task.relay_integration``): lower the
program inside a :class:`TaskExtractEnv`, which records the tunable topi computes the lowering
calls.

The lowering is relay's (``relay.build_module.lower_to_primitives``: the same graph passes and
strategy choices as ``relay.build``); relay, a layer above autotvm, registers it here with
:func:`register_program_lowering` when it is imported (a relay program to extract from
implies it is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..env import GLOBAL_SCOPE
from .task import Task, create
from .topi_integration import TaskExtractEnv

__all__ = ["extract_from_program", "register_program_lowering"]

_LOWERING: list[Callable[..., Any]] = []


def register_program_lowering(lower: Callable[..., Any]) -> Callable[..., Any]:
    """Set ``lower(mod, target, params)``: the program lowering task extraction runs; it
    returns an object whose ``target`` is the Target it lowered for."""
    _LOWERING[:] = [lower]
    return lower


def extract_from_program(mod: Any, params: Any = None, target: Any = "llvm",
                         ops: Sequence[str] | None = None) -> list[Task]:
    """The tuning tasks of a relay program: the tunable topi computes its lowering calls
    (``ops``: only these task names). Untuned configs are used silently meanwhile."""
    if not _LOWERING:
        raise RuntimeError("extract_from_program: no program lowering is registered "
                           "(import tvmpy.relay)")
    old_silent, GLOBAL_SCOPE.silent = GLOBAL_SCOPE.silent, True
    try:
        with TaskExtractEnv(ops) as env:
            lowered = _LOWERING[0](mod, target, params)
    finally:
        GLOBAL_SCOPE.silent = old_silent
    return [create(name, args, lowered.target) for name, args in env.get_tasks()]
