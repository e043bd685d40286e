"""Tunable topi operators (TVM's ``autotvm.register_topi_compute`` / ``register_topi_schedule``)
and task extraction.

A topi template is a compute ``f(cfg, *args) -> Tensor`` and a schedule ``g(cfg, outs) ->
Schedule`` registered under one task name. The compute wrapper asks the dispatch context for the
config of its workload ``(task_name, *args)`` and records that workload in the output op's
``attrs["workload"]``; the schedule wrapper finds it there and asks again, so both halves see the
same config (the tuned best under ``apply_history_best``, else the fallback). Registering both
halves also registers a task template under the name, so ``autotvm.task.create(task_name, args,
target)`` tunes the operator alone: its arguments are the compute's (tensors as placeholders).

While a :class:`TaskExtractEnv` is active, each compute call also records its ``(task_name,
args)``; ``relay_integration.extract_from_program`` lowers a relay program in one to list its
tunable tasks.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .dispatcher import ApplyConfig, DispatchContext
from .task import TASK_TABLE, args_to_workload

__all__ = ["register_topi_compute", "register_topi_schedule", "get_workload", "TaskExtractEnv",
           "TopiTemplate", "RELAY_OP_ALIASES", "canonical_relay_op"]


class TopiTemplate:
    """The task template of a topi operator: compute, then schedule the output."""

    def __init__(self, name: str):
        self.name = name
        self.fcompute: Callable[..., Any] | None = None
        self.fschedule: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> tuple[Any, list[Any]]:
        from ...te.tensor import Tensor

        if self.fcompute is None or self.fschedule is None:
            raise RuntimeError(f"topi template {self.name!r} needs both register_topi_compute and "
                               "register_topi_schedule")
        out = self.fcompute(*args)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        s = self.fschedule(outs)
        tensors = [a for a in args if isinstance(a, Tensor)]
        return s, tensors + outs


def _template(task_name: str) -> TopiTemplate:
    tmpl = TASK_TABLE.get(task_name)
    if not isinstance(tmpl, TopiTemplate):
        tmpl = TopiTemplate(task_name)
        TASK_TABLE[task_name] = tmpl
    return tmpl


class _Current(threading.local):
    env: TaskExtractEnv | None = None


_CURRENT = _Current()


class _CurrentMeta(type):
    """``TaskExtractEnv.current``: the calling thread's active env (None in a new thread)."""

    @property
    def current(cls) -> TaskExtractEnv | None:
        return _CURRENT.env

    @current.setter
    def current(cls, env: TaskExtractEnv | None) -> None:
        _CURRENT.env = env

    @current.deleter
    def current(cls) -> None:
        _CURRENT.env = None


class TaskExtractEnv(metaclass=_CurrentMeta):
    """``with TaskExtractEnv() as env:`` collects the ``(task_name, args)`` of every tunable
    topi compute called inside this thread (``env.get_tasks()``, first-seen order, no
    duplicates); other threads' builds are not recorded.

    ``task_names``: keep only these templates; ``relay_ops``: keep only the computes called
    while lowering a call of one of these relay operators (TVM's ``wanted_relay_ops``). The
    lowering names the operator it lowers in :attr:`relay_op` (the rewritten forms of an
    operator, e.g. ``nn.contrib_conv2d_NCHWc``, under the operator they came from:
    :data:`RELAY_OP_ALIASES`); every operator named so is kept in :attr:`seen_relay_ops`."""

    def __init__(self, task_names: Sequence[str] | None = None,
                 relay_ops: Sequence[str] | None = None):
        self.task_names = None if task_names is None else set(task_names)
        self.relay_ops = None if relay_ops is None else {canonical_relay_op(o) for o in relay_ops}
        self.relay_op: str | None = None
        self.seen_relay_ops: dict[str, None] = {}
        self.tasks: list[tuple[str, tuple]] = []
        self._seen: set[tuple] = set()
        self._old: TaskExtractEnv | None = None

    def lowering(self, relay_op: str | None) -> _Lowering:
        """``with env.lowering(op_name):`` around the compute of one relay call."""
        return _Lowering(self, relay_op)

    def add(self, task_name: str, args: tuple) -> None:
        if self.task_names is not None and task_name not in self.task_names:
            return
        if self.relay_ops is not None and (self.relay_op is None
                                           or self.relay_op not in self.relay_ops):
            return
        key = (task_name, args)
        if key not in self._seen:
            self._seen.add(key)
            self.tasks.append(key)

    def get_tasks(self) -> list[tuple[str, tuple]]:
        return list(self.tasks)

    def __enter__(self) -> TaskExtractEnv:
        self._old, TaskExtractEnv.current = TaskExtractEnv.current, self
        return self

    def __exit__(self, *exc: Any) -> None:
        TaskExtractEnv.current = self._old


RELAY_OP_ALIASES = {
    "nn.contrib_conv2d_NCHWc": "nn.conv2d",
    "nn.contrib_depthwise_conv2d_NCHWc": "nn.conv2d",
    "nn.contrib_conv2d_winograd_nchwc": "nn.conv2d",
    "nn.contrib_conv2d_winograd_without_weight_transform": "nn.conv2d",
    "nn.contrib_conv2d_NCHWc_int8": "nn.conv2d",
    "nn.contrib_depthwise_conv2d_NCHWc_int8": "nn.conv2d",
    "nn.contrib_dense_pack": "nn.dense",
    "nn.contrib_dense_pack_int8": "nn.dense",
}
"""The operators the graph passes (AlterOpLayout) rewrite a relay operator into, by the
operator they came from: ``ops=(relay.op.get("nn.conv2d"),)`` keeps their tasks too."""


def canonical_relay_op(op: Any) -> str:
    """The relay operator name of ``op`` (an Op or a name), rewritten forms under their source."""
    name = getattr(op, "name", op)
    if not isinstance(name, str):
        raise TypeError(f"expected a relay operator or its name, got {op!r}")
    return RELAY_OP_ALIASES.get(name, name)


class _Lowering:
    def __init__(self, env: TaskExtractEnv, relay_op: str | None):
        self.env, self.op = env, None if relay_op is None else canonical_relay_op(relay_op)
        self._old: str | None = None

    def __enter__(self) -> None:
        self._old, self.env.relay_op = self.env.relay_op, self.op
        if self.op is not None:
            self.env.seen_relay_ops[self.op] = None

    def __exit__(self, *exc: Any) -> None:
        self.env.relay_op = self._old


def _with_workload(t: Any, workload: tuple) -> Any:
    """The outputs of ``t``'s op rebuilt with ``attrs["workload"]``."""
    from ...te.tensor import ComputeOp

    op = t.op
    if not isinstance(op, ComputeOp):
        raise TypeError(f"a topi compute must return the output of a te.compute, got {op}")
    attrs = dict(op.attrs)
    attrs["workload"] = workload
    return ComputeOp(op.name, op.tag, attrs, op.axis, op.body)


def register_topi_compute(task_name: str, func: Callable[..., Any] | None = None) -> Any:
    """Decorate ``compute(cfg, *args)``; the wrapper is called as ``compute(*args)``."""

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                raise TypeError(f"topi template {task_name!r} takes positional arguments only")
            from ...target import Target

            workload = args_to_workload(args, task_name)
            if TaskExtractEnv.current is not None:
                TaskExtractEnv.current.add(task_name, workload[1:])
            cfg = DispatchContext.current.query(Target.current(), workload)
            with ApplyConfig(cfg):
                out = f(cfg, *args)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            op = _with_workload(outs[0], workload)
            if any(o.op is not outs[0].op for o in outs):
                raise ValueError(f"topi template {task_name!r}: all outputs must come from one op")
            new = [op.output(o.value_index) for o in outs]
            return new if isinstance(out, (list, tuple)) else new[0]

        tmpl = _template(task_name)
        tmpl.fcompute = wrapper
        # the module a spawned measurement worker imports to register this template
        tmpl.__module__ = f.__module__
        return wrapper

    return register(func) if func is not None else register


def get_workload(outs: Any, task_name: str | None = None) -> tuple | None:
    """The workload recorded by a topi compute in the ops feeding ``outs`` (the one of
    ``task_name`` when given), or None."""
    from ...te.tensor import ComputeOp

    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    stack, seen = [t.op for t in outs], set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if isinstance(op, ComputeOp):
            wkl = op.attrs.get("workload")
            if wkl is not None and (task_name is None or wkl[0] == task_name):
                return wkl
            stack.extend(t.op for t in op.input_tensors)
    return None


def register_topi_schedule(task_name: str, func: Callable[..., Any] | None = None) -> Any:
    """Decorate ``schedule(cfg, outs)``; the wrapper is called as ``schedule(outs)``."""

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(outs: Any, *args: Any, **kwargs: Any) -> Any:
            from ...target import Target

            workload = get_workload(outs, task_name)
            if workload is None:
                raise RuntimeError(f"no workload of {task_name!r} in the outputs: compute them "
                                   "with the matching register_topi_compute function")
            cfg = DispatchContext.current.query(Target.current(), workload)
            with ApplyConfig(cfg):
                return f(cfg, outs, *args, **kwargs)

        _template(task_name).fschedule = wrapper
        return wrapper

    return register(func) if func is not None else register
