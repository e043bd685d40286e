"""Lowering fused primitive functions to loop IR (TVM's ``TECompiler`` / ``LowerToTE``).

``lower_primitive(func, target, name)`` turns one ``Primitive=1`` relay function (the output of
FuseOps, contract C1) into an un-lowered ``tir.PrimFunc`` named ``name``: one placeholder per
flattened input tensor, each operator call of the body computed on its arguments' tensors
(``lower_call``), and ONE schedule for the whole group, chosen by the anchor operator (the call
of the highest pattern kind, e.g. the conv2d of conv2d+add+relu). Groups without an anchor
(only elementwise/broadcast/injective ops) get the target's injective schedule. A call whose
outputs have no elements computes nothing: its operator's compute is not built (its index math
could divide by an empty axis), and a group with only empty outputs gets the injective schedule.
When the anchor's schedule raises, the group gets the target's fallback schedule with a warning
naming the operator, implementation, schedule and error -- or, with strict schedules
(``PassContext(config={"relay.backend.strict_schedules": True})`` or the environment variable
``TVMPY_STRICT_SCHEDULES=1``), a :class:`ScheduleError` chained to the error.

``TECompiler`` caches lowered functions by structural hash (and structural equality) of the
primitive function, so the groups that repeat in a network (ResNet's identical blocks) are
lowered and compiled once and share one symbol.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import te, tir
from ...ir.functor import post_order
from ...ir.node import structural_equal, structural_hash
from ...target import Target, as_target
from ...tir.function import PrimFunc
from ...transform import PassContext
from ..expr import Call, Constant, Function, RelayExpr, Tuple, TupleGetItem, Var
from ..op.registry import OpPattern
from ..op.strategy.generic import pattern_schedule, schedule_fallback
from ..size_checks import size_checks_of, substitute, unifier
from ..ty import TensorType, TupleType, is_static
from ..visitor import dataflow_children
from .lower_call import lower_call_impl

__all__ = ["lower_primitive", "primitive_shape_args", "TECompiler", "LoweredFunc", "primitive_name", "LoweringError",
           "ScheduleError", "strict_schedules", "has_compute"]


class LoweringError(ValueError):
    """A primitive function cannot be lowered (names the function and the offending node)."""


class ScheduleError(RuntimeError):
    """The anchor operator's schedule failed on a fused group while strict schedules are on
    (names the function, operator, implementation and schedule; the error is chained)."""


STRICT_KEY = "relay.backend.strict_schedules"
STRICT_ENV = "TVMPY_STRICT_SCHEDULES"


def strict_schedules() -> bool:
    """Whether a failing schedule is an error: the current PassContext's
    ``relay.backend.strict_schedules`` when set, else the environment variable
    ``TVMPY_STRICT_SCHEDULES`` (``1``/``true``; the test suite and bench/ scripts set it, and
    it reaches their worker processes), else False (warn and use the fallback schedule)."""
    value = PassContext.current().config.get(STRICT_KEY)
    if value is None:
        return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def callable_name(fn: Any) -> str:
    """``module.qualname`` of a schedule function (through ``functools.wraps`` wrappers)."""
    fn = getattr(fn, "__wrapped__", fn)
    if isinstance(fn, functools.partial):
        fn = fn.func
    qual = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    mod = getattr(fn, "__module__", None)
    return f"{mod}.{qual}" if mod else qual


def flat_tensor_types(t: Any, what: str = "value") -> list[TensorType]:
    """The tensor types of ``t`` with tuples flattened (left to right)."""
    if isinstance(t, TupleType):
        return [x for f in t.fields for x in flat_tensor_types(f, what)]
    if isinstance(t, TensorType):
        return [t]
    raise LoweringError(f"{what}: type {t} is neither a tensor nor a tuple of tensors")


def _static_shape(t: TensorType, what: str) -> tuple[int, ...]:
    shape = []
    for d in t.shape:
        d = getattr(d, "value", d)
        if not isinstance(d, (int, np.integer)):
            raise LoweringError(f"{what}: shape {t} is not static (dimension {d}); relay.build "
                                "needs concrete shapes (give the input shapes)")
        shape.append(int(d))
    return tuple(shape)


def primitive_shape_args(func: Function) -> list[Any]:
    """The size variables a primitive function's kernel takes as scalar arguments (after its
    buffers): those of its parameters' and outputs' symbolic dimensions that are no whole
    dimension of any of them (``B`` when the only shapes are ``(B * 4, S, 16)`` and
    ``(B * S, 64)``), so the kernel could not read them off an argument; sorted by name. Empty
    for static shapes. The graph executor passes their values (graph node attribute
    ``shape_args``)."""
    from ...tir.functor import collect_vars

    types = [t for p in func.params for t in flat_tensor_types(p.checked_type)]
    types += flat_tensor_types(func.body.checked_type)
    plain = {id(d) for t in types for d in t.shape if isinstance(d, tir.Var)}
    # an intermediate's size no argument carries (``sum(full(1, (B,)))``: a scalar result)
    types += [t for c in primitive_calls(func) if getattr(c, "_checked_type", None) is not None
              for t in flat_tensor_types(c._checked_type)]
    extra: dict[int, Any] = {}
    for t in types:
        for d in t.shape:
            if not isinstance(d, (int, np.integer)):
                for v in collect_vars(d):
                    if id(v) not in plain:
                        extra[id(v)] = v
    return sorted(extra.values(), key=lambda v: v.name)


def _is_empty(shape: Sequence[Any]) -> bool:
    """Whether ``shape`` (of a type or a tensor) has no elements: a constant zero dimension."""
    dims = (getattr(d, "value", d) for d in shape)
    return any(isinstance(d, (int, np.integer)) and d == 0 for d in dims)


def _empty(t: TensorType) -> te.Tensor:
    """A computed tensor of the empty type ``t``: its loops run no iteration, it reads nothing."""
    return te.compute(t.shape, lambda *i: tir.const(0, t.dtype), name="empty", tag="injective")


def _copy(t: te.Tensor, name: str) -> te.Tensor:
    return te.compute(t.shape, lambda *i: t(*i), name=name, tag="injective")


class _GroupLowering:
    """One walk of a primitive function's body: relay node -> list of te tensors."""

    def __init__(self, func: Function, target: Target, fname: str):
        self.target = target
        self.fname = fname
        self.memo: dict[int, list[te.Tensor]] = {}
        self.inputs: list[te.Tensor] = []
        # (pattern, call, impl, outputs) of every call, in post-order
        self.calls: list[tuple[int, Call, Any, list[te.Tensor]]] = []
        self.shape_args = primitive_shape_args(func)
        # sizes the operators need equal (relay/size_checks.py): one variable in the kernel
        sub = unifier(c for call in primitive_calls(func) for c in size_checks_of(call))
        for i, p in enumerate(func.params):
            ptype = p.checked_type
            tensors = []
            for k, t in enumerate(flat_tensor_types(ptype, f"{fname}: parameter %{p.name_hint}")):
                shape = substitute(tuple(getattr(d, "value", d) for d in t.shape), sub)
                suffix = f"_{k}" if isinstance(ptype, TupleType) else ""
                tensors.append(te.placeholder(shape, dtype=t.dtype, name=f"p{i}{suffix}"))
            self.memo[id(p)] = tensors
            self.inputs.extend(tensors)

    def visit(self, e: RelayExpr) -> list[te.Tensor]:
        for node in post_order(e, dataflow_children, self.memo):  # inputs first, any depth
            self.memo[id(node)] = self._lower(node)
        return self.memo[id(e)]

    def _lower(self, e: RelayExpr) -> list[te.Tensor]:
        if isinstance(e, Var):
            raise LoweringError(f"{self.fname}: free variable %{e.name_hint} in a primitive "
                                "function (only its parameters may be used)")
        if isinstance(e, Constant):
            return [self._constant(e)]
        if isinstance(e, Tuple):
            return [t for f in e.fields for t in self.memo[id(f)]]
        if isinstance(e, TupleGetItem):
            fields = e.tuple_value.checked_type.fields
            start = sum(len(flat_tensor_types(f)) for f in fields[: e.index])
            n = len(flat_tensor_types(fields[e.index]))
            return self.memo[id(e.tuple_value)][start:start + n]
        if isinstance(e, Call):
            if not hasattr(e.op, "get_attr"):
                raise LoweringError(f"{self.fname}: a primitive function may only call "
                                    f"operators, got a call of {type(e.op).__name__}")
            if not has_compute(e.op):
                raise LoweringError(f"{self.fname}: operator {e.op.name} has no compute/strategy "
                                    "for code generation")
            types = flat_tensor_types(e.checked_type)
            if all(_is_empty(t.shape) for t in types):
                # nothing to compute, and the op's index math may divide by an empty axis
                outs = [_empty(t) for t in types]
                self.calls.append((int(OpPattern.INJECTIVE), e, None, outs))
                return outs
            args = [t for a in e.args for t in self.memo[id(a)]]
            try:
                impl, outs = lower_call_impl(e, args, self.target)
            except ValueError as err:
                if not any(not isinstance(d, int) for t in types for d in t.shape):
                    raise
                # symbolic shapes (relay.Any) the operator's compute cannot handle: name it
                raise LoweringError(f"{self.fname}: {e.op.name} with symbolic shapes "
                                    f"{[str(a.checked_type) for a in e.args]}: {err}") from err
            self._check_outputs(e, impl, outs)
            self.calls.append((int(e.op.pattern), e, impl, outs))
            return outs
        raise LoweringError(f"{self.fname}: unsupported node {type(e).__name__} inside a "
                            "primitive function")

    def _check_outputs(self, call: Call, impl: Any, outs: list[te.Tensor]) -> None:
        """The compute must agree with type inference (else the graph's buffers would not
        match the kernel's: a wrong answer or a crash at run time)."""
        types = flat_tensor_types(call.checked_type)
        for k, (t, ty) in enumerate(zip(outs, types)):
            dims = [getattr(d, "value", d) for d in t.shape]
            if not all(isinstance(d, (int, np.integer)) for d in dims) or not is_static(ty.shape):
                continue  # a symbolic extent: the kernel's own check at run time applies
            got = tuple(int(d) for d in dims)
            want = _static_shape(ty, f"{self.fname}: {call.op.name}")
            if got != want or str(t.dtype) != str(ty.dtype):
                raise LoweringError(
                    f"{self.fname}: {call.op.name} (implementation {impl.name}) computes output "
                    f"{k} as {got} {t.dtype}, but type inference gives {want} {ty.dtype}: the "
                    "operator's compute and its type relation disagree")

    def _constant(self, c: Constant) -> te.Tensor:
        arr = c.data.numpy()
        if arr.ndim != 0:
            raise LoweringError(f"{self.fname}: non-scalar constant of shape {arr.shape} inside "
                                "a primitive function (FuseOps keeps those as arguments)")
        value = arr.item()
        dtype = str(arr.dtype)
        return te.compute((), lambda: tir.const(value, dtype), name="const", tag="elemwise")

    def outputs(self, body: RelayExpr) -> list[te.Tensor]:
        """The group's outputs; inputs and repeated tensors are copied so that every output
        is a distinct computed tensor (an output buffer of its own)."""
        outs, seen = [], set()
        inputs = {id(t) for t in self.inputs}
        for k, t in enumerate(self.visit(body)):
            if id(t) in inputs or id(t) in seen:
                t = _copy(t, f"out{k}_copy")
            seen.add(id(t))
            outs.append(t)
        return outs

    def schedule(self, outs: list[te.Tensor]) -> Any:
        anchor = None
        for pattern, call, impl, _outs in self.calls:
            # the last call of the highest pattern wins (TVM's ``>=``)
            if anchor is None or pattern >= anchor[0]:
                anchor = (pattern, call, impl)
        empty = all(_is_empty(t.shape) for t in outs)  # (a schedule may choke on no work)
        if anchor is None or anchor[0] <= OpPattern.INJECTIVE or empty:
            injective = pattern_schedule(OpPattern.INJECTIVE, self.target)
            return injective(None, list(outs), self.target)
        op, impl = anchor[1].op, anchor[2]
        try:
            return impl.schedule(anchor[1].attrs, list(outs), self.target)
        except Exception as err:  # noqa: BLE001 - strict: an error; else loud, slow and correct
            what = (f"{self.fname}: the schedule of operator {op.name} (implementation "
                    f"{impl.name}, schedule {callable_name(impl.schedule)}) failed on this "
                    f"fused group for target {self.target}: {type(err).__name__}: {err}")
            if strict_schedules():
                raise ScheduleError(what + f" [{STRICT_KEY} is on]") from err
            warnings.warn(what + "; using the default schedule (correct but slow). Set "
                          f"PassContext(config={{{STRICT_KEY!r}: True}}) to make this an error",
                          RuntimeWarning, stacklevel=2)
            return schedule_fallback.dispatch(self.target)(anchor[1].attrs, list(outs),
                                                           self.target)


def primitive_calls(func: Function) -> list[Call]:
    """The operator calls of a primitive function's body."""
    out: list[Call] = []
    stack: list[Any] = [func.body]
    seen: set[int] = set()
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Call):
            out.append(e)
            stack.extend(e.args)
        elif isinstance(e, Tuple):
            stack.extend(e.fields)
        elif isinstance(e, TupleGetItem):
            stack.append(e.tuple_value)
    return out


def has_compute(op: Any) -> bool:
    """Whether calls of ``op`` can be lowered: a strategy, or (TVM's fallback) a compute for
    an injective / reduction op, which then gets the target's injective / reduce schedule."""
    if op.get_attr("FTVMStrategy") is not None:
        return True
    return op.get_attr("FTVMCompute") is not None and op.pattern <= OpPattern.COMM_REDUCE


def lower_primitive(func: Function, target: Any, name: str) -> PrimFunc:
    """Contract C2: the un-lowered PrimFunc (symbol ``name``) of a primitive function; its
    parameters are the flattened inputs in ``func.params`` order, then the flattened outputs,
    then (symbolic shapes only) the size variables of ``primitive_shape_args``. Symbolic
    dimensions (``relay.Any``) are the placeholders' extents as they are: one kernel for every
    size."""
    if not isinstance(func, Function):
        raise TypeError(f"lower_primitive takes a relay Function, got {type(func).__name__}")
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise ValueError(f"lower_primitive: name must be a C identifier, got {name!r}")
    tgt = as_target(target)
    if getattr(func, "_checked_type", None) is None:
        from ..type_infer import infer_type

        func = infer_type(func)
    g = _GroupLowering(func, tgt, name)
    outs = g.outputs(func.body)
    sched = _auto_scheduled(func, g, outs, tgt) or g.schedule(outs)
    from ...te.schedule_ops import schedule_to_primfunc

    return schedule_to_primfunc(sched, [*g.inputs, *outs, *g.shape_args], name, {})


def _auto_scheduled(func: Function, g: _GroupLowering, outs: list[te.Tensor], target: Target) -> Any:
    """With ``relay.backend.use_auto_scheduler``: the best record's schedule of this fused
    function in the current ``auto_scheduler.ApplyHistoryBest``, else None (default schedule)."""
    if not PassContext.current().config.get("relay.backend.use_auto_scheduler"):
        return None
    if g.shape_args or any(_is_empty(t.shape) for t in outs):
        return None  # symbolic or empty: no static task
    from ...auto_scheduler.relay_integration import schedule_fused
    from .auto_scheduler_tasks import fused_workload_key

    return schedule_fused([*g.inputs, *outs], fused_workload_key(func, g.inputs), target)


def primitive_name(func: Function) -> str:
    """A readable symbol for a primitive function: its "Name" attribute, or ``fused_`` + the
    operator names of its body (``fused_nn_conv2d_add_nn_relu``), as in TVM."""
    given = func.attrs.get("Name") if hasattr(func.attrs, "get") else None
    if given:
        base = str(given)
    else:
        ops = [str(getattr(c.op, "name", "op")).replace(".", "_")
               for c in reversed(primitive_calls(func))]
        base = "fused_" + "_".join(ops) if ops else "fused_identity"
    base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base)
    if not base or base[0].isdigit():
        base = "f_" + base
    return base[:80]


class LoweredFunc:
    """A distinct primitive function and its lowered PrimFunc (shared by equal groups)."""

    __slots__ = ("func", "name", "prim_func", "uses")

    def __init__(self, func: Function, name: str, prim_func: PrimFunc | None):
        self.func = func
        self.name = name
        self.prim_func = prim_func
        self.uses = 1


class TECompiler:
    """Lowers primitive functions once per structurally distinct function (and target)."""

    def __init__(self, target: Any, prefix: str = ""):
        self.target = as_target(target)
        self.prefix = prefix
        self._cache: dict[int, list[LoweredFunc]] = {}
        # by identity: relay.build looks each call's function up twice (lowering, then the
        # graph codegen), and structural hashing + equality of every call was ~40% of a
        # warm BERT-base rebuild; the function is kept so that its id is not reused
        self._seen: dict[int, tuple[Function, LoweredFunc]] = {}
        self._names: set[str] = set()
        self.funcs: list[LoweredFunc] = []

    def lookup(self, func: Function) -> LoweredFunc | None:
        seen = self._seen.get(id(func))
        if seen is not None and seen[0] is func:
            return seen[1]
        for cand in self._cache.get(self._key(func), ()):
            if cand.func is func or structural_equal(cand.func, func, map_free_vars=True):
                self._seen[id(func)] = (func, cand)
                return cand
        return None

    def _key(self, func: Function) -> int:
        return structural_hash(func)

    def lower(self, func: Function, eager: bool = True) -> LoweredFunc:
        """The lowered function of ``func`` (from the cache when an equal one was lowered).
        ``eager=False`` only names it (``prim_func`` None): the caller compiles it later
        (``relay.build`` through ``kernel_build``, which may take it from the kernel cache)."""
        hit = self.lookup(func)
        if hit is not None:
            hit.uses += 1
            return hit
        name = self._unique(self.prefix + primitive_name(func))
        prim = lower_primitive(func, self.target, name) if eager else None
        lowered = LoweredFunc(func, name, prim)
        self._cache.setdefault(self._key(func), []).append(lowered)
        self._seen[id(func)] = (func, lowered)
        self.funcs.append(lowered)
        return lowered

    def _unique(self, base: str) -> str:
        name, k = base, 0
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name
