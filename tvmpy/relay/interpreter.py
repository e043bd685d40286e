"""The reference interpreter: runs a relay program on numpy, one operator at a time, with each
operator's ``FNumpy`` implementation (``relay/op/numpy_impl.py``).

It defines what a graph computes, independently of any compilation: graph-pass tests check that a
pass leaves the interpreter's result unchanged, and compiled modules are checked against it.

    f = relay.create_executor("debug", mod=mod).evaluate()
    out = f(x_np, **params)          # positional inputs, then parameters by name
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from .module import IRModule
from .op import numpy_impl
from .op.registry import Op
from .op.shape_func import concrete_type
from .size_checks import check_values, size_checks_of
from .ty import ListType, TensorType, TupleType, is_static, type_str
from .type_infer import infer_type
from .visitor import ExprFunctor

__all__ = ["evaluate", "create_executor", "Executor", "Closure", "ListValue"]

numpy_impl.register_all()


class Closure:
    """A function value: the Function and the variable values it captured."""

    def __init__(self, func: Function, env: dict[int, Any]):
        self.func = func
        self.env = env


class ListValue(list):
    """The value of a ``ListType`` expression (a run-time-length list of arrays; ONNX sequence)."""


class _Eval(ExprFunctor):
    def __init__(self, env: dict[int, Any], mod: IRModule | None,
                 shapes: dict[str, int] | None = None):
        super().__init__()
        self.env = env
        self.mod = mod
        self.shapes = shapes or {}  # symbolic dimensions' values, bound by function arguments

    def visit_var(self, v: Var) -> Any:
        try:
            return self.env[id(v)]
        except KeyError:
            raise ValueError(f"no value for variable %{v.name_hint}") from None

    def visit_global_var(self, g: GlobalVar) -> Any:
        if self.mod is None:
            raise ValueError(f"@{g.name_hint} needs a module")
        return Closure(self.mod[g], {})

    def visit_constant(self, c: Constant) -> Any:
        return c.data.strided()  # numpy semantics: a folded transpose is not copied here

    def visit_op(self, op: Op) -> Any:
        return op

    def visit_tuple(self, t: Tuple) -> Any:
        return tuple(self.visit(f) for f in t.fields)

    def visit_tuple_getitem(self, t: TupleGetItem) -> Any:
        return self.visit(t.tuple_value)[t.index]

    def visit_let(self, let: Let) -> Any:
        self.env[id(let.var)] = self.visit(let.value)
        return self.visit(let.body)

    def visit_if(self, i: If) -> Any:
        return self.branch(i).visit(i.true_branch if self.cond(i) else i.false_branch)

    def cond(self, i: If) -> bool:
        c = np.asarray(self.visit(i.cond))
        if c.size != 1:
            raise ValueError(f"if: the condition has {c.size} elements, not one")
        return bool(c.reshape(-1)[0])

    def branch(self, i: If) -> _Eval:
        """An evaluator for a branch: it sees what is computed so far (values computed in the
        branch stay there: the other branch must not see them)."""
        ev = _Eval(self.env, self.mod, self.shapes)
        ev.memo = dict(self.memo)
        ev._keep = self._keep
        return ev

    def visit_function(self, f: Function) -> Any:
        return Closure(f, dict(self.env))

    def visit_call(self, c: Call) -> Any:
        args = [self.visit(a) for a in c.args]
        if isinstance(c.op, Op):
            impl = c.op.get_attr("FNumpy")
            if impl is None:
                raise NotImplementedError(f"operator {c.op.name} has no numpy implementation")
            checks = size_checks_of(c)
            if checks:  # run-time sizes the operator needs equal (relay/size_checks.py)
                _check_sizes(c, checks, args)
            out_type = c.checked_type
            if not _is_static_type(out_type) and not c.op.get_attr("TValueShaped"):  # Any dimensions: the shapes of these arrays
                out_type = _concrete_out_type(c, args, self.shapes)
                out = impl(c.attrs, args, out_type)
                # a size first decided here (a dyn op's Any) is known from now on
                _bind_dims(c.checked_type, out, self.shapes)
                return out
            return impl(c.attrs, args, out_type)
        fn = self.visit(c.op)
        if not isinstance(fn, Closure):
            raise TypeError(f"calling a non-function value {fn!r}")
        return _call(fn, args, self.mod)


def _check_sizes(c: Call, checks: Any, args: list[Any]) -> None:
    from .printer import short_str

    types = [t for a in c.args for t in _flat_types(a.checked_type)]
    shapes = [x.shape for a in args for x in _flat_arrays(a)]
    if len(types) == len(shapes):
        check_values(c.op.name, f"`{short_str(c)}`", checks, types, shapes)


def _flat_arrays(v: Any) -> list[Any]:
    if isinstance(v, ListValue):
        return []
    if isinstance(v, (tuple, list)):
        return [x for f in v for x in _flat_arrays(f)]
    return [np.asarray(v)]


def _is_static_type(t: Any) -> bool:
    if isinstance(t, TupleType):
        return all(_is_static_type(f) for f in t.fields)
    return not isinstance(t, TensorType) or is_static(t.shape)


def _value_type(v: Any) -> Any:
    """The concrete type of a computed value (an array, or a tuple of them)."""
    if isinstance(v, ListValue):
        return TupleType([])  # a list: no dimension of its type is bound by its value
    if isinstance(v, (tuple, list)):
        return TupleType([_value_type(x) for x in v])
    arr = np.asarray(v)
    return TensorType(arr.shape, str(arr.dtype))


def _flat_types(t: Any) -> list[TensorType]:
    if isinstance(t, TupleType):
        return [x for f in t.fields for x in _flat_types(f)]
    return [t] if isinstance(t, TensorType) else []


def _bind_dims(t: Any, value: Any, env: dict[str, int]) -> None:
    """Bind the size variables that are whole dimensions of type ``t`` to ``value``'s shape."""
    from ..tir.expr import Var as TirVar

    if t is None:
        return
    for tt, vt in zip(_flat_types(t), _flat_types(_value_type(value))):
        for d, got in zip(tt.shape, vt.shape):
            if isinstance(d, TirVar):
                env[d.name] = int(got)


def _concrete_out_type(c: Any, args: list[Any], shapes: dict[str, int]) -> Any:
    """A call's type for the actual argument arrays: its symbolic dimensions evaluated with the
    variables bound by the enclosing function's arguments and by these arguments' shapes,
    else (a size no argument determines, e.g. a fresh Any) the operator's shape function."""
    from ..runtime.function import compile_dim_expr

    env = dict(shapes)
    for a, v in zip(c.args, args):
        _bind_dims(a.checked_type, v, env)

    def ev(t: Any) -> Any:
        if isinstance(t, TupleType):
            return TupleType([ev(f) for f in t.fields])
        dims = []
        for d in t.shape:
            if isinstance(d, int):
                dims.append(d)
            else:
                fn, _ = compile_dim_expr(str(d))
                dims.append(int(fn(env)))
        return TensorType(dims, t.dtype)

    try:
        return ev(c.checked_type)
    except (KeyError, ValueError):
        flat = [x for a in args for x in _flat_values(a)]
        return concrete_type(c.op, c.attrs, [_value_type(a) for a in args], flat)


def _flat_values(v: Any) -> list[Any]:
    if isinstance(v, (tuple, list)):
        return [x for f in v for x in _flat_values(f)]
    return [np.asarray(v)]


def _call(fn: Closure, args: Sequence[Any], mod: IRModule | None) -> Any:
    """Call a function value. A call in tail position (the body, through If branches and Let
    bodies, is a call of a function) becomes the next round of this loop, so a recursive
    function (an ONNX Loop) runs any number of iterations in constant stack depth."""
    while True:
        env = dict(fn.env)
        for p, a in zip(fn.func.params, args):
            env[id(p)] = a
        shapes: dict[str, int] = {}
        for p, a in zip(fn.func.params, args):
            _bind_dims(p.checked_type if getattr(p, "_checked_type", None) is not None
                       else p.type_annotation, a, shapes)
        ev = _Eval(env, mod, shapes)
        expr = fn.func.body
        while isinstance(expr, (If, Let)):
            if isinstance(expr, Let):
                env[id(expr.var)] = ev.visit(expr.value)
                expr = expr.body
            else:
                take = ev.cond(expr)
                ev = ev.branch(expr)
                expr = expr.true_branch if take else expr.false_branch
        if not (isinstance(expr, Call) and not isinstance(expr.op, Op)):
            return ev.visit(expr)
        callee = ev.visit(expr.op)
        if not isinstance(callee, Closure):
            raise TypeError(f"calling a non-function value {callee!r}")
        args = [ev.visit(a) for a in expr.args]
        fn = callee


def _check_input(p: Var, value: Any, t: Any = None) -> Any:
    t = p.type_annotation if t is None else t
    if isinstance(t, ListType):  # a list-typed parameter takes a list of arrays
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"input %{p.name_hint}: expected a list ({type_str(t)}), got "
                            f"{type(value).__name__}")
        return ListValue(_check_input(p, v, t.elem) for v in value)
    if isinstance(t, TupleType):  # a tuple-typed parameter takes a tuple of values
        if not isinstance(value, (tuple, list)) or len(value) != len(t.fields):
            raise TypeError(f"input %{p.name_hint}: expected a tuple of {len(t.fields)} values "
                            f"({type_str(t)}), got {type(value).__name__}")
        return tuple(_check_input(p, v, ft) for v, ft in zip(value, t.fields))
    arr = np.asarray(value)
    if isinstance(t, TensorType):
        if arr.dtype != np.dtype(t.dtype):
            raise TypeError(f"input %{p.name_hint}: expected dtype {t.dtype}, got {arr.dtype}")
        ok = len(arr.shape) == len(t.shape) and all(
            not isinstance(d, int) or d == s for d, s in zip(t.shape, arr.shape)
        )
        if not ok:
            raise ValueError(f"input %{p.name_hint}: expected shape {type_str(t)}, got {arr.shape}")
    return arr


def evaluate(expr: RelayExpr | IRModule, *args: Any, mod: IRModule | None = None,
             **kwargs: Any) -> Any:
    """Run ``expr`` (a Function, an IRModule's main, or a closed expression) on numpy inputs."""
    if isinstance(expr, IRModule):
        mod, expr = expr, expr["main"]
    if mod is not None:
        from .transform import InferType

        InferType()(mod)
    infer_type(expr, mod)
    if not isinstance(expr, Function):
        if args or kwargs:
            raise TypeError("inputs are given to a Function (or a module's main)")
        return _Eval({}, mod).visit(expr)
    params = list(expr.params)
    if len(args) > len(params):
        raise TypeError(f"{len(args)} positional inputs for {len(params)} parameters")
    values: dict[str, Any] = {p.name_hint: a for p, a in zip(params, args)}
    names = {p.name_hint for p in params}
    unknown = sorted(set(kwargs) - names)
    if unknown:
        raise TypeError(f"unknown inputs {unknown} (parameters: {[p.name_hint for p in params]})")
    values.update(kwargs)
    missing = [p.name_hint for p in params if p.name_hint not in values]
    if missing:
        raise TypeError(f"missing inputs {missing}")
    bound = [_check_input(p, values[p.name_hint]) for p in params]
    return _call(Closure(expr, {}), bound, mod)


class Executor:
    """``relay.create_executor("debug", mod).evaluate()`` -> a callable on numpy inputs."""

    def __init__(self, mod: IRModule | None):
        self.mod = mod

    def evaluate(self, expr: RelayExpr | None = None):
        target = expr if expr is not None else self.mod["main"] if self.mod is not None else None
        if target is None:
            raise ValueError("nothing to evaluate: give an expression or a module")

        def run(*args: Any, **kwargs: Any) -> Any:
            return _as_result(evaluate(target, *args, mod=self.mod, **kwargs))

        return run


class InterpResult(np.ndarray):
    """A numpy array the interpreter returns that also reads like TVM's NDArray result
    (``.numpy()``, ``.asnumpy()``), so TVM code written for ``create_executor`` runs as is."""

    def numpy(self) -> np.ndarray:
        return self.view(np.ndarray)

    asnumpy = numpy


def _as_result(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.view(InterpResult)
    if isinstance(value, (tuple, list)):
        return type(value)(_as_result(v) for v in value)
    return value


def create_executor(kind: str = "debug", mod: IRModule | None = None, device: Any = None,
                    target: Any = "llvm", params: Mapping[str, Any] | None = None) -> Any:
    """TVM's ``relay.create_executor``: ``"debug"`` (this numpy reference interpreter),
    ``"graph"`` (relay.build + the graph executor), ``"vm"`` (the virtual machine); see
    ``relay.build_module.create_executor``."""
    from .build_module import create_executor as create

    return create(kind, mod, device, target, params)
