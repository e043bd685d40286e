"""Shape functions: an operator's output shapes from its input shapes, at run time (TVM's
``FShapeFunc`` / ``register_shape_func``).

Type inference gives every tensor a shape in which an ``Any`` dimension stands for a size known
only when the model runs. A *shape function* computes the concrete output shapes once the input
shapes are known: ``shape_func(op, attrs, input_shapes) -> [output shape, ...]``.

- ``register_shape_func(op_name, fn, data_dependent=False)`` registers ``fn(attrs, input_shapes)
  -> list of output shapes`` (input shapes: tuples of ints, tuple arguments flattened). An
  operator whose output shape depends on its input *values* (``data_dependent``: NonZero, a
  reshape whose shape is a tensor) gets the input arrays instead (``relay.op.dyn``).
- Every operator without a registered function gets the *relation shape function*: its type
  relation evaluated on the concrete input types. For a data-independent operator that is exact
  (the relation is what defines the output shape) and keeps one definition per operator; the
  registered ones are the fast paths for the operators every model is made of.

Users: the reference interpreter (``create_executor("debug")``) types each call on the actual
arrays with them, and :func:`infer_shapes` evaluates a whole function for concrete input shapes
(the oracle the graph executor's symbolic shapes are tested against).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..ty import TensorType, TupleType, Type
from .registry import Op, get, register_op_attr

__all__ = ["register_shape_func", "shape_func", "is_data_dependent", "concrete_type",
           "infer_shapes", "ShapeFuncError"]

Shape = tuple[int, ...]
ShapeFunc = Callable[[Any, list[Shape]], list[Shape]]


class ShapeFuncError(ValueError):
    """An operator's output shape cannot be computed from these input shapes (names it)."""


def register_shape_func(op_name: str, fn: ShapeFunc | None = None,
                        data_dependent: bool = False) -> Any:
    """Register ``fn(attrs, input_shapes) -> output_shapes`` as ``op_name``'s shape function
    (usable as a decorator). ``data_dependent``: the output shape depends on input values."""

    def reg(f: ShapeFunc) -> ShapeFunc:
        register_op_attr(op_name, "FShapeFunc", f)
        register_op_attr(op_name, "TShapeDataDependent", bool(data_dependent))
        return f

    return reg if fn is None else reg(fn)


def is_data_dependent(op: Op | str) -> bool:
    op = get(op) if isinstance(op, str) else op
    return bool(op.get_attr("TShapeDataDependent"))


def _flat(t: Type) -> list[TensorType]:
    if isinstance(t, TupleType):
        return [x for f in t.fields for x in _flat(f)]
    assert isinstance(t, TensorType)
    return [t]


def _rebuild(t: Type, shapes: list[Shape], dtypes: list[str]) -> Type:
    """``t``'s structure (tuples) over the flat concrete ``shapes``."""
    if isinstance(t, TupleType):
        fields = []
        for f in t.fields:
            k = len(_flat(f))
            fields.append(_rebuild(f, shapes[:k], dtypes[:k]))
            shapes, dtypes = shapes[k:], dtypes[k:]
        return TupleType(fields)
    return TensorType(shapes[0], dtypes[0])


def concrete_type(op: Op, attrs: Any, arg_types: Sequence[Type],
                  values: Sequence[Any] | None = None) -> Type:
    """The output type of ``op`` for concrete argument types: its shape function's shapes, the
    relation's dtypes (and tuple structure). A data-dependent operator's shape function gets
    the (flat) argument arrays ``values``."""
    flat_in = [x for t in arg_types for x in _flat(t)]
    fn = op.get_attr("FShapeFunc")
    try:
        rel = op.type_rel(list(arg_types), attrs)
        if fn is None:
            return rel
        if is_data_dependent(op):
            if values is None:
                raise ValueError("its output shape depends on input values, none were given")
            shapes = [tuple(int(d) for d in s) for s in fn(attrs, list(values))]
        else:
            shapes = [tuple(int(d) for d in s)
                      for s in fn(attrs, [tuple(t.shape) for t in flat_in])]
    except (ValueError, TypeError, IndexError) as e:
        shown = ", ".join(str(tuple(t.shape)) for t in flat_in)
        raise ShapeFuncError(f"{op.name}: no output shape for input shapes {shown}: {e}") from e
    outs = _flat(rel)
    if len(shapes) != len(outs):
        raise ShapeFuncError(f"{op.name}: the shape function gives {len(shapes)} outputs, the "
                             f"type relation {len(outs)}")
    return _rebuild(rel, shapes, [t.dtype for t in outs])


def shape_func(op: Op | str, attrs: Any, input_shapes: Sequence[Sequence[int]],
               input_dtypes: Sequence[str] | None = None) -> list[Shape]:
    """The output shapes of ``op`` for concrete (flat) input shapes (dtypes default to
    float32; they matter only to operators whose relation checks them)."""
    op = get(op) if isinstance(op, str) else op
    if is_data_dependent(op):
        raise ShapeFuncError(f"{op.name}: the output shape depends on the input values, not "
                             "only their shapes (call its FShapeFunc with the input arrays)")
    dtypes = list(input_dtypes) if input_dtypes is not None else ["float32"] * len(input_shapes)
    fn = op.get_attr("FShapeFunc")
    if fn is not None:
        return [tuple(int(d) for d in s) for s in fn(attrs, [tuple(s) for s in input_shapes])]
    types = [TensorType(s, d) for s, d in zip(input_shapes, dtypes)]
    if op.num_inputs == 1 and len(types) > 1:  # one tuple argument (concatenate, ...)
        args: list[Type] = [TupleType(types)]
    else:
        args = list(types)
    return [tuple(t.shape) for t in _flat(concrete_type(op, attrs, args))]


def infer_shapes(func: Any, input_shapes: Sequence[Sequence[int]]) -> Type:
    """The result type of relay function ``func`` (its parameters' ``Any`` dimensions replaced by
    the given concrete shapes), computed call by call with the shape functions."""
    from ..expr import Function
    from ..type_infer import infer_type
    from ..visitor import ExprMutator

    if not isinstance(func, Function):
        raise TypeError(f"infer_shapes takes a relay Function, got {type(func).__name__}")
    if len(input_shapes) != len(func.params):
        raise ValueError(f"infer_shapes: {len(func.params)} parameters, {len(input_shapes)} "
                         "shapes")
    from ..expr import Var

    subst = {}
    for p, s in zip(func.params, input_shapes):
        t = p.type_annotation
        if not isinstance(t, TensorType) or len(t.shape) != len(s):
            raise ValueError(f"infer_shapes: parameter %{p.name_hint} has type {t}, given shape "
                             f"{tuple(s)}")
        subst[p] = Var(p.name_hint, TensorType(tuple(int(d) for d in s), t.dtype))

    class _Sub(ExprMutator):
        def visit_var(self, v: Any) -> Any:
            return subst.get(v, v)

    body = _Sub().visit(func.body)
    return infer_type(Function(list(subst.values()), body)).body.checked_type


# ---- the registered fast paths ------------------------------------------------------------------
def _same(attrs: Any, shapes: list[Shape]) -> list[Shape]:
    return [shapes[0]]


def _broadcast(attrs: Any, shapes: list[Shape]) -> list[Shape]:
    a, b = shapes[0], shapes[1]
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for k, (x, y) in enumerate(zip(pa, pb)):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"shapes {a} and {b} do not broadcast (dimension {k - n}: {x} vs "
                             f"{y})")
        out.append(y if x == 1 else x)
    return [tuple(out)]


def _dense(attrs: Any, shapes: list[Shape]) -> list[Shape]:
    data, weight = shapes[0], shapes[1]
    if data[-1] != weight[-1]:
        raise ValueError(f"dense: data {data} and weight {weight} disagree on the reduced "
                         "dimension")
    return [data[:-1] + (weight[0],)]


def _register_defaults() -> None:
    """The fast paths for the operators whose relation is the identity, numpy broadcasting or
    dense (called once the operators are registered)."""
    from ._rel import broadcast_bool_rel, broadcast_rel, identity_rel
    from .registry import list_op_names

    for name in list_op_names():
        op = get(name)
        if op.get_attr("FShapeFunc") is not None:
            continue
        if op.type_rel is identity_rel:
            register_shape_func(name, _same)
        elif op.type_rel in (broadcast_rel, broadcast_bool_rel):
            register_shape_func(name, _broadcast)
    register_shape_func("nn.dense", _dense)
