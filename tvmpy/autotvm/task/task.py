"""Tuning tasks and templates (TVM's ``autotvm.task.task``).

``@autotvm.template("name")`` registers a function that builds a schedule and reads knobs with
``autotvm.get_config()``. ``autotvm.task.create(name, args, target)`` runs it once in a
collecting context to fill ``task.config_space``; ``task.instantiate(config)`` runs it with one
configuration. A workload is ``(name, *args)`` with tensors serialized as
``("TENSOR", shape, dtype)``: hashable and JSON-able, it keys logs and dispatch.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..space import ConfigEntity, ConfigSpace
from .dispatcher import ApplyConfig, DispatchContext

__all__ = ["Task", "TASK_TABLE", "template", "get_config", "create", "args_to_workload",
           "serialize_args", "deserialize_args", "compute_flop", "FlopCalculationError",
           "TemplateNotFoundError"]

TASK_TABLE: dict[str, Callable[..., Any]] = {}
"""Registered templates by name (the raw function; call :func:`template`'s wrapper to dispatch)."""


class FlopCalculationError(RuntimeError):
    """The compute contains something the FLOP counter does not understand."""


class TemplateNotFoundError(LookupError):
    """No template with this name is registered in this process."""


# ---------------------------------------------------------------------------------------------
# workloads
def _serialize(x: Any) -> Any:
    from ...te.tensor import Tensor
    from ...tir import expr as E

    if isinstance(x, Tensor):
        return ("TENSOR", tuple(_serialize(d) for d in x.shape), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(_serialize(a) for a in x)
    if isinstance(x, (E.IntImm, E.FloatImm)):
        return x.value
    if isinstance(x, E.StringImm):
        return x.value
    if isinstance(x, np.generic):
        return x.item()
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"cannot serialize template argument of type {type(x).__name__}: {x!r} "
                    "(use tensors, numbers, strings, None and tuples of them)")


def serialize_args(args: Sequence[Any]) -> tuple:
    """Template arguments as a hashable, JSON-able tuple."""
    return tuple(_serialize(a) for a in args)


def _tuplize(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_tuplize(a) for a in x)
    return x


def deserialize_args(args: Sequence[Any]) -> list[Any]:
    """The inverse of :func:`serialize_args`: ``("TENSOR", shape, dtype)`` becomes a placeholder."""
    from ... import te

    ret = []
    for a in args:
        a = _tuplize(a)
        if isinstance(a, tuple) and len(a) == 3 and a[0] == "TENSOR":
            ret.append(te.placeholder(tuple(a[1]), dtype=a[2]))
        else:
            ret.append(a)
    return ret


def args_to_workload(args: Sequence[Any], task_name: str) -> tuple:
    """``(task_name, *serialized args)``."""
    return (task_name,) + serialize_args(args)


# ---------------------------------------------------------------------------------------------
# templates
TEMPLATE_LIBRARY = __name__.split(".")[0] + ".topi"
"""The operator library: its sub-package ``<family>`` registers the templates named
``<op>.<family>`` (TVM's naming: ``conv2d_NCHWc.x86`` is defined in ``topi.x86``)."""


def lookup_template(name: str) -> Callable[..., Any] | None:
    """The template registered as ``name``. Templates register where they are defined; a
    template of the operator library (``<op>.<family>``) not registered yet is looked for by
    importing ``TEMPLATE_LIBRARY.<family>`` once, so ``task.create("conv2d_NCHWc.x86", ...)``
    works after ``import tvmpy`` alone (the relay strategies import those packages anyway)."""
    f = TASK_TABLE.get(name)
    family = name.rpartition(".")[2]
    if f is None and family.isidentifier() and family != name:
        library = f"{TEMPLATE_LIBRARY}.{family}"
        try:
            importlib.import_module(library)
        except ModuleNotFoundError as e:
            if e.name != library:
                raise
            return None
        f = TASK_TABLE.get(name)
    return f


def template(task_name: str, func: Callable[..., Any] | None = None) -> Any:
    """Register a tuning template; usable as ``@autotvm.template("name")``.

    Calling the decorated function outside a task runs it with the config the current dispatch
    context gives for its workload (the tuned best under ``apply_history_best``, else the
    fallback)."""
    if not isinstance(task_name, str) or not task_name:
        raise ValueError(f"template name must be a non-empty string, got {task_name!r}")

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                raise TypeError(f"template {task_name!r} takes positional arguments only")
            from ...target import resolve_target

            workload = args_to_workload(args, task_name)
            tgt = resolve_target()
            cfg = DispatchContext.current.query(tgt, workload)
            with ApplyConfig(cfg):
                return f(*args)

        TASK_TABLE[task_name] = f
        wrapper.template_name = task_name  # type: ignore[attr-defined]
        return wrapper

    return register(func) if func is not None else register


def get_config() -> ConfigSpace:
    """The config of the template being run (call it inside a template)."""
    from ...target import Target

    ctx = DispatchContext.current
    if isinstance(ctx, ApplyConfig):
        return ctx._config
    return ctx.query(Target.current(), None)


# ---------------------------------------------------------------------------------------------
# tasks
class Task:
    """A template with concrete arguments and a target.

    ``config_space`` and ``flop`` are computed on first use by running the template (so records
    decoded from a log are cheap until they are needed)."""

    def __init__(self, name: str, args: Sequence[Any], target: Any = None):
        from ...target import as_target

        self.name = str(name)
        self.args = serialize_args(_tuplize(list(args)))
        self.target = as_target(target, default="llvm")
        self._config_space: ConfigSpace | None = None
        self._flop: float | None = None

    # -- lookups ----------------------------------------------------------------------------
    @property
    def func(self) -> Callable[..., Any]:
        f = lookup_template(self.name)
        if f is None:
            raise TemplateNotFoundError(f"autotvm template {self.name!r} is not registered in this "
                                        "process (import the module that defines it)")
        return f

    @property
    def workload(self) -> tuple:
        return (self.name,) + self.args

    @property
    def config_space(self) -> ConfigSpace:
        if self._config_space is None:
            self._collect()
        assert self._config_space is not None
        return self._config_space

    @config_space.setter
    def config_space(self, space: ConfigSpace) -> None:
        self._config_space = space

    @property
    def flop(self) -> float:
        if self._flop is None:
            self._collect()
        assert self._flop is not None
        return self._flop

    @flop.setter
    def flop(self, value: float) -> None:
        self._flop = float(value)

    def _collect(self) -> None:
        space = ConfigSpace()
        with ApplyConfig(space), self.target:
            out = self.func(*deserialize_args(self.args))
        sch = _schedule_of(out, self.name)
        self._config_space = space
        if self._flop is None:
            self._flop = float(space.flop) if space.flop else float(compute_flop(sch))

    def instantiate(self, config: ConfigEntity) -> tuple[Any, list[Any]]:
        """Run the template with ``config``: ``(schedule, arg tensors)``."""
        config.flop = 0
        with ApplyConfig(config), self.target:
            out = self.func(*deserialize_args(self.args))
        _schedule_of(out, self.name)
        return out[0], list(out[1])

    @staticmethod
    def from_workload(workload: Sequence[Any], target: Any = None) -> Task:
        """The task of a workload tuple ``(name, *args)``."""
        workload = _tuplize(list(workload))
        if not workload or not isinstance(workload[0], str):
            raise ValueError(f"a workload starts with the template name, got {workload!r}")
        return Task(workload[0], workload[1:], target)

    # -- pickling (worker processes look the template up by name) ---------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "args": self.args, "target": str(self.target),
                "config_space": self._config_space, "flop": self._flop}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from ...target import Target

        self.name, self.args = state["name"], state["args"]
        self.target = Target(state["target"])
        self._config_space, self._flop = state["config_space"], state["flop"]

    def __repr__(self) -> str:
        return f"Task(func_name={self.name}, args={self.args}, target={self.target})"


def _schedule_of(out: Any, name: str) -> Any:
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"template {name!r} must return (schedule, [tensors]), got {type(out).__name__}")
    return out[0]


def create(task_name: Any, args: Sequence[Any], target: Any = "llvm") -> Task:
    """Create a tuning task: runs the template once to collect its configuration space.
    ``task_name``: a registered name, or the function ``@autotvm.template`` returned."""
    task_name = getattr(task_name, "template_name", task_name)
    if not isinstance(task_name, str):
        raise TypeError(f"task.create needs a template name or a template function, got "
                        f"{type(task_name).__name__}")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"task.create: args must be a tuple, got {type(args).__name__}")
    if lookup_template(task_name) is None:
        raise TemplateNotFoundError(f"no autotvm template named {task_name!r}; registered: "
                                    f"{sorted(TASK_TABLE)}")
    tsk = Task(task_name, args, target)
    tsk._collect()
    return tsk


# ---------------------------------------------------------------------------------------------
# FLOP counting
def _const_extent(iv: Any) -> int:
    ext = getattr(iv.dom.extent, "value", None)
    if ext is None:
        raise FlopCalculationError(f"axis {iv.var} has a non-constant extent")
    return int(ext)


def _prod_length(axes: Sequence[Any]) -> int:
    n = 1
    for iv in axes:
        n *= _const_extent(iv)
    return n


def _count_flop(e: Any) -> int:
    from ...te.tensor import Reduce
    from ...tir import expr as E

    if isinstance(e, Reduce):
        if len(e.combiner.result) != 1 or len(e.source) != 1:
            raise FlopCalculationError("tuple reductions are not counted; use cfg.add_flop")
        return _prod_length(e.axis) * (_count_flop(e.combiner.result[0]) + _count_flop(e.source[0]))
    if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm, E.Var, E.ProducerLoad)):
        return 0  # index arithmetic inside loads is not counted
    if isinstance(e, E.Cast):
        return _count_flop(e.value)
    if isinstance(e, E.Not):
        return 1 + _count_flop(e.a)
    if isinstance(e, E.BinaryOp):
        return 1 + _count_flop(e.a) + _count_flop(e.b)
    if isinstance(e, E.Select):
        return (_count_flop(e.condition)
                + max(_count_flop(e.true_value), _count_flop(e.false_value)))
    if isinstance(e, E.Call):
        if e.op == "if_then_else" and len(e.args) == 3:
            return _count_flop(e.args[0]) + max(_count_flop(e.args[1]), _count_flop(e.args[2]))
        return 1 + sum(_count_flop(a) for a in e.args)
    if isinstance(e, E.Let):
        return _count_flop(e.value) + _count_flop(e.body)
    raise FlopCalculationError(f"cannot count the FLOPs of {type(e).__name__}; use cfg.add_flop")


def compute_flop(sch: Any) -> int:
    """Floating point (and integer arithmetic) operations of the computes of a schedule:
    a multiply-add in a reduction counts 2; each elementwise operation counts 1."""
    from ...te.tensor import ComputeOp, PlaceholderOp, Reduce

    seen: set[int] = set()
    total = 0
    stack = list(sch.outputs)
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if isinstance(op, ComputeOp):
            bodies = op.body[:1] if isinstance(op.body[0], Reduce) else op.body
            total += _prod_length(op.axis) * sum(_count_flop(b) for b in bodies)
            stack.extend(t.op for t in op.input_tensors)
        elif not isinstance(op, PlaceholderOp):
            raise FlopCalculationError(f"cannot count the FLOPs of {type(op).__name__} {op.name}")
    return total
