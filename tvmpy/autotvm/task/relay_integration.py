"""Task extraction from relay programs (TVM's ``autotvm.task.relay_integration``): lower the
program inside a :class:`TaskExtractEnv`, which records the tunable topi computes the lowering
calls.

The lowering is relay's (``relay.build_module.lower_to_primitives``: the same graph passes and
strategy choices as ``relay.build``); relay, a layer above autotvm, registers it here with
:func:`register_program_lowering` when it is imported (a relay program to extract from
implies it is). As in TVM, the lowering runs at ``opt_level=3`` whatever the caller's
``PassContext`` (its other settings are kept), so the tasks are those of the optimized build.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..env import GLOBAL_SCOPE
from .task import Task, create, lookup_template
from .topi_integration import TaskExtractEnv, canonical_relay_op

__all__ = ["extract_from_program", "extract_from_multiple_program", "register_program_lowering"]

_LOG = logging.getLogger("autotvm")
_LOWERING: list[Callable[..., Any]] = []
_KNOWN_OPS: list[Callable[[str], bool]] = []

EXTRACT_OPT_LEVEL = 3

REWRITTEN_INTO = {"nn.conv2d_transpose": "nn.conv2d"}
"""Operators the opt_level-3 passes replace by others (``relay.transform.conv_transpose``):
their tasks are those of the replacement, which the warning for an empty ``ops=`` names."""


def register_program_lowering(lower: Callable[..., Any],
                              is_relay_op: Callable[[str], bool] | None = None
                              ) -> Callable[..., Any]:
    """Set ``lower(mod, target, params)``: the program lowering task extraction runs; it
    returns an object whose ``target`` is the Target it lowered for. ``is_relay_op(name)``:
    whether ``name`` is a registered relay operator (to check ``ops=``)."""
    _LOWERING[:] = [lower]
    if is_relay_op is not None:
        _KNOWN_OPS[:] = [is_relay_op]
    return lower


def _split_ops(ops: Any) -> tuple[list[str] | None, list[str] | None]:
    """``(task names, relay op names)`` of ``ops``: relay Op objects or their names (TVM's
    usage, e.g. ``relay.op.get("nn.conv2d")``), or template names (``"dense.x86"``)."""
    if ops is None:
        return None, None
    if isinstance(ops, str) or hasattr(ops, "name"):
        ops = [ops]
    task_names: list[str] = []
    relay_ops: list[str] = []
    for op in ops:
        name = getattr(op, "name", op)
        if not isinstance(name, str):
            raise TypeError(f"extract_from_program: ops must hold relay operators "
                            f"(relay.op.get(...)) or their names, got {op!r}")
        if not hasattr(op, "name") and lookup_template(name) is not None:
            task_names.append(name)
        elif not _KNOWN_OPS or _KNOWN_OPS[0](name):
            relay_ops.append(canonical_relay_op(name))
        else:
            raise ValueError(f"extract_from_program: {name!r} in ops is neither a relay operator "
                             "nor an autotvm template name")
    if task_names and relay_ops:
        raise ValueError("extract_from_program: give ops as relay operators or as template "
                         f"names, not both (got {task_names} and {relay_ops})")
    return (task_names or None), (relay_ops or None)


def _lower_at_opt3(mod: Any, target: Any, params: Any) -> Any:
    from ...transform import PassContext

    cur = PassContext.current()
    ctx = PassContext(opt_level=max(EXTRACT_OPT_LEVEL, cur.opt_level),
                      required_pass=cur.required_pass, disabled_pass=cur.disabled_pass,
                      config=cur.config)
    with ctx:
        return _LOWERING[0](mod, target, params)


def extract_from_program(mod: Any, params: Any = None, target: Any = "llvm",
                         target_host: Any = None, ops: Any = None) -> list[Task]:
    """The tuning tasks of a relay program (an IRModule or its ``mod["main"]``): the tunable
    topi computes its lowering calls, lowered at ``opt_level=3`` as TVM does.

    ``ops``: keep only the tasks of these relay operators (``relay.op.get("nn.conv2d")`` or
    ``"nn.conv2d"``; the forms the graph passes rewrite an operator into count as it), or of
    these template names (``"dense.x86"``). When ``ops`` selects nothing the lowering met, a
    warning on the ``autotvm`` logger names the operators it did meet. ``target_host`` is
    accepted for TVM's signature (the host is part of ``target`` here)."""
    del target_host
    if not _LOWERING:
        raise RuntimeError("extract_from_program: no program lowering is registered "
                           "(import tvmpy.relay)")
    task_names, relay_ops = _split_ops(ops)
    old_silent, GLOBAL_SCOPE.silent = GLOBAL_SCOPE.silent, True
    try:
        with TaskExtractEnv(task_names, relay_ops) as env:
            lowered = _lower_at_opt3(mod, target, params)
    finally:
        GLOBAL_SCOPE.silent = old_silent
    tasks = [create(name, args, lowered.target) for name, args in env.get_tasks()]
    if ops is not None and not tasks:
        met = sorted(env.seen_relay_ops)
        wanted = relay_ops or task_names
        hints = [f"; {o} is computed as {REWRITTEN_INTO[o]} at opt_level 3: ask for that"
                 for o in wanted or [] if o in REWRITTEN_INTO]
        _LOG.warning("autotvm: extract_from_program found no tunable task of %s on target %s; "
                     "the program's lowering met the operators %s (rewritten forms under their "
                     "source operator)%s", wanted, lowered.target, ", ".join(met) or "none",
                     "".join(hints))
    return tasks


def extract_from_multiple_program(mods: Sequence[Any], params: Sequence[Any], target: Any = "llvm",
                                  target_host: Any = None, ops: Any = None) -> list[Task]:
    """TVM's ``extract_from_multiple_program``: the tasks of several programs, each once."""
    if len(mods) != len(params):
        raise ValueError(f"extract_from_multiple_program: {len(mods)} programs but "
                         f"{len(params)} parameter dicts")
    out: list[Task] = []
    seen: set[tuple] = set()
    for mod, p in zip(mods, params):
        for t in extract_from_program(mod, p, target, target_host, ops):
            if t.workload not in seen:
                seen.add(t.workload)
                out.append(t)
    return out
