"""Workload registry (TVM's ``auto_scheduler.register_workload``).

A workload key is ``json.dumps([func_name, *args])``: the name a compute function was
registered under and the arguments that build its tensors. A record in a log names its task by
this key, so a log can be replayed in another process that registered the same function.
Workloads that tvmpy's own higher layers register when imported (``WORKLOAD_MODULES``: the rnn
cell of ``tvmpy.topi.rnn``) are looked up by importing that module on a miss
(:func:`lookup_workload`), so reading a log needs no import of it first.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["register_workload", "make_workload_key", "workload_key_to_tensors",
           "decode_workload_key", "WORKLOAD_FUNC_REGISTRY", "deployed_program", "deployed_runs",
           "lookup_workload", "WORKLOAD_MODULES"]

WORKLOAD_FUNC_REGISTRY: dict[str, Callable[..., Any]] = {}

#: name of a workload registered by a module of a higher layer -> that module, imported by
#: :func:`lookup_workload` when the name is not registered yet (a module name, not an import:
#: auto_scheduler sits below topi and relay; tests/test_layering.py lists the computed import)
WORKLOAD_MODULES: dict[str, str] = {"topi.rnn_cell": "tvmpy.topi.rnn"}


def lookup_workload(name: str) -> Callable[..., Any] | None:
    """The function registered under ``name``, importing the module that registers it
    (``WORKLOAD_MODULES``) on a miss; None if there is none."""
    func = WORKLOAD_FUNC_REGISTRY.get(name)
    if func is None and name in WORKLOAD_MODULES:
        importlib.import_module(WORKLOAD_MODULES[name])
        func = WORKLOAD_FUNC_REGISTRY.get(name)
    return func


def register_workload(func_name: Any = None, f: Callable[..., Any] | None = None,
                      override: bool = False) -> Any:
    """Register a function returning the list of input and output tensors of a compute.

    Usable as ``@register_workload`` or ``@register_workload("name")``."""
    if callable(func_name):
        return register_workload(func_name.__name__, func_name, override)
    if not isinstance(func_name, str):
        raise TypeError(f"register_workload: expected a function or a name, got {func_name!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        old = WORKLOAD_FUNC_REGISTRY.get(func_name)
        if old is not None and old is not fn and not override \
                and getattr(old, "__qualname__", None) != getattr(fn, "__qualname__", None):
            raise ValueError(f"register_workload: {func_name!r} is already registered "
                             f"(pass override=True to replace it)")
        WORKLOAD_FUNC_REGISTRY[func_name] = fn
        return fn

    return register(f) if f is not None else register


def _serialize_arg(a: Any) -> Any:
    if isinstance(a, (list, tuple)):
        return [_serialize_arg(x) for x in a]
    if isinstance(a, (bool, int, float, str)) or a is None:
        return a
    if hasattr(a, "value") and isinstance(a.value, (int, float)):  # IntImm / FloatImm
        return a.value
    raise TypeError(f"workload argument {a!r} ({type(a).__name__}) is not serializable: use "
                    "numbers, strings and lists of them")


def make_workload_key(func: Any, args: Sequence[Any]) -> str:
    """The key of ``func(*args)``; ``func`` must be registered (or its name)."""
    name = func if isinstance(func, str) else getattr(func, "__name__", None)
    if name not in WORKLOAD_FUNC_REGISTRY:
        raise ValueError(f"make_workload_key: {name!r} is not registered: decorate it with "
                         "@auto_scheduler.register_workload")
    return json.dumps([name, *[_serialize_arg(a) for a in args]])


def decode_workload_key(key: str) -> tuple[str, list[Any]]:
    try:
        v = json.loads(key)
    except (TypeError, ValueError) as e:
        raise ValueError(f"not a workload key: {key!r} ({e})") from None
    if not isinstance(v, list) or not v or not isinstance(v[0], str):
        raise ValueError(f"not a workload key (expected [name, args...]): {key!r}")
    return v[0], v[1:]


def workload_key_to_tensors(key: str) -> list[Any]:
    """Call the registered function of ``key`` with its arguments: its list of tensors."""
    name, args = decode_workload_key(key)
    func = lookup_workload(name)
    if func is None:
        raise ValueError(f"workload {name!r} of key {key} is not registered in this process "
                         "(import the module that defines it)")
    out = func(*args)
    return list(out) if isinstance(out, (list, tuple)) else [out]


# ---- how a workload's schedule is deployed, for measurement ------------------------------------
# A registered workload function may carry ``deployed_program(sch, tensors, *key args) ->
# (schedule, args)``: the program a schedule of its compute runs in once deployed (e.g. the
# recurrence kernel around one step's schedule, topi.rnn.rnn_cell), and ``deployed_runs`` (int,
# default 1): how many runs of the task that program holds. Candidates, the default-schedule line
# and the re-timing after the search are then all timed as that program, and their cost is
# divided by ``deployed_runs`` so that a record's cost stays the cost of one run (the task's
# weight counts runs). Its ``default_schedule(*key args)`` must give the default in the same form.


def _hooked(key: str) -> tuple[Any, list[Any]] | None:
    try:
        name, args = decode_workload_key(key)
    except (ValueError, TypeError):
        return None
    return lookup_workload(name), args


def deployed_runs(key: str) -> int:
    """Runs of the task in one call of its deployed program (1 for a plain workload)."""
    got = _hooked(key)
    runs = getattr(got[0], "deployed_runs", 1) if got else 1
    if not isinstance(runs, int) or runs < 1:
        raise ValueError(f"workload of {key}: deployed_runs must be a positive int, got {runs!r}")
    return runs


def deployed_program(key: str, sch: Any, tensors: list[Any]) -> tuple[Any, list[Any]]:
    """``(schedule, args)`` that a schedule of ``key``'s compute is measured as: the workload
    function's ``deployed_program`` hook, else the schedule itself."""
    got = _hooked(key)
    hook = getattr(got[0], "deployed_program", None) if got else None
    if hook is None:
        return sch, tensors
    assert got is not None
    return hook(sch, tensors, *got[1])
