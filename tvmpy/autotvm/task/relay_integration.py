"""Task extraction from relay programs (TVM's ``autotvm.task.relay_integration``): lower the
program with ``relay.build_module.lower_to_primitives`` (the same graph passes and strategy
choices as ``relay.build``) inside a :class:`TaskExtractEnv`, which records the tunable topi
computes the lowering calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..env import GLOBAL_SCOPE
from .task import Task, create
from .topi_integration import TaskExtractEnv

__all__ = ["extract_from_program"]


def extract_from_program(mod: Any, params: Any = None, target: Any = "llvm",
                         ops: Sequence[str] | None = None) -> list[Task]:
    """The tuning tasks of a relay program: the tunable topi computes its lowering calls
    (``ops``: only these task names). Untuned configs are used silently meanwhile."""
    from ...relay.build_module import build_target, lower_to_primitives

    tgt = build_target(target)
    old_silent, GLOBAL_SCOPE.silent = GLOBAL_SCOPE.silent, True
    try:
        with TaskExtractEnv(ops) as env, tgt:
            lower_to_primitives(mod, tgt, params)
    finally:
        GLOBAL_SCOPE.silent = old_silent
    return [create(name, args, tgt) for name, args in env.get_tasks()]
