"""Tensor expressions: placeholders, computes, reductions and the operations that produce tensors.

A :class:`Tensor` is one output of an :class:`Operation`. ``te.compute`` records the per-element
expression of a stage; ``tensor[i, j]`` inside it builds a :class:`~tvmpy.tir.ProducerLoad`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir import dtype as dt
from ..ir.node import Node
from ..tir import expr as E
from ..tir.expr import IterVar, PrimExpr, Range, Var, const, convert

__all__ = [
    "Tensor", "Operation", "PlaceholderOp", "ComputeOp", "Reduce", "CommReducer",
    "placeholder", "compute", "reduce_axis", "thread_axis", "comm_reducer", "sum", "max", "min",
    "var", "size_var", "ExternOp", "extern",
]


class Tensor(Node):
    """Output ``value_index`` of ``op``. Index it to read an element: ``A[i, j]``."""

    __slots__ = ("op", "value_index", "shape", "dtype")
    op: Operation
    value_index: int
    shape: tuple[PrimExpr, ...]
    dtype: str

    def __init__(self, op: Operation, value_index: int, shape: Sequence[Any], dtype: str):
        self._init(op=op, value_index=value_index, shape=tuple(convert(s) for s in shape), dtype=dtype)

    @property
    def name(self) -> str:
        return self.op.name if self.op.num_outputs == 1 else f"{self.op.name}.v{self.value_index}"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: Any) -> E.ProducerLoad | TensorSlice:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if 0 < len(indices) < len(self.shape):
            return TensorSlice(self, indices)  # TVM's A[i][j]
        if len(indices) != len(self.shape):
            raise IndexError(f"tensor {self.name} has {len(self.shape)} dimensions, indexed with {len(indices)}")
        idx = []
        for i in indices:
            i = convert(i)
            if not isinstance(i, PrimExpr) or not dt.is_integer(i.dtype):
                raise TypeError(f"index of {self.name} must be an integer expression, got {i!r}")
            idx.append(i)
        return E.ProducerLoad(self, idx)

    def __call__(self, *indices: Any) -> E.ProducerLoad | TensorSlice:
        return self[tuple(indices)]

    def __str__(self) -> str:
        return f"Tensor(shape=({', '.join(str(s) for s in self.shape)}), op.name={self.op.name}, dtype={self.dtype})"

    __repr__ = __str__
    __hash__ = Node.__hash__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tensor):
            return NotImplemented
        return self.op is other.op and self.value_index == other.value_index

    def __bool__(self) -> bool:
        return True

    # ``A + B``, ``2 * A``, ``A / 2.0``: topi's broadcast operators (TVM binds them when topi
    # loads; see :func:`register_tensor_arith`). numpy scalars defer to these too.
    _defer_arith = True
    __array_ufunc__ = None

    def _arith(self, op: str, lhs: Any, rhs: Any) -> Any:
        fn = _TENSOR_ARITH.get(op)
        if fn is None:
            raise TypeError(f"te.Tensor arithmetic ({op}) builds topi's broadcast operators: "
                            "import tvmpy.topi first (from tvmpy import topi), or write a "
                            "te.compute")
        return fn(lhs, rhs)

    def __add__(self, other: Any) -> Any:
        return self._arith("add", self, other)

    def __radd__(self, other: Any) -> Any:
        return self._arith("add", other, self)

    def __sub__(self, other: Any) -> Any:
        return self._arith("subtract", self, other)

    def __rsub__(self, other: Any) -> Any:
        return self._arith("subtract", other, self)

    def __mul__(self, other: Any) -> Any:
        return self._arith("multiply", self, other)

    def __rmul__(self, other: Any) -> Any:
        return self._arith("multiply", other, self)

    def __truediv__(self, other: Any) -> Any:
        return self._arith("divide", self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return self._arith("divide", other, self)

    def __neg__(self) -> Any:
        return self._arith("subtract", 0, self)


# op name ("add", "subtract", "multiply", "divide") -> the broadcast operator (topi registers)
_TENSOR_ARITH: dict[str, Callable[[Any, Any], Any]] = {}


def register_tensor_arith(op: str, fn: Callable[[Any, Any], Any]) -> None:
    """Make ``te.Tensor``'s Python operator for ``op`` call ``fn(lhs, rhs)`` (topi's broadcast
    operators register themselves: TVM's ``generic_op_impl``)."""
    if op not in ("add", "subtract", "multiply", "divide"):
        raise ValueError(f"register_tensor_arith: unknown operator {op!r}")
    _TENSOR_ARITH[op] = fn


class TensorSlice:
    """``A[i]`` of a tensor with more dimensions: index it further (``A[i][j]``, as in TVM)."""

    def __init__(self, tensor: Tensor, indices: tuple):
        self.tensor, self.indices = tensor, indices

    def __getitem__(self, indices: Any) -> E.ProducerLoad | TensorSlice:
        return self.tensor[self.indices + (indices if isinstance(indices, tuple) else (indices,))]

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def __repr__(self) -> str:
        idx = ", ".join(str(i) for i in self.indices)
        return f"{self.tensor.name}[{idx}]"

    def error(self) -> IndexError:
        """The error for using this slice as an element."""
        t = self.tensor
        return IndexError(f"tensor {t.name} has {len(t.shape)} dimensions, indexed with "
                          f"{len(self.indices)} ({self!r}): index all its dimensions to read an "
                          "element")

    def _no_arith(self, *_: Any) -> Any:
        raise self.error()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_arith
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __neg__ = _no_arith


class Operation(Node):
    """Base of tensor-producing operations."""

    __slots__ = ("name", "tag", "attrs")
    name: str
    tag: str
    attrs: dict[str, Any]
    _outputs: tuple[Tensor, ...]

    @property
    def num_outputs(self) -> int:
        return 1

    def output(self, i: int) -> Tensor:
        return self._outputs[i]

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.name})"

    __repr__ = __str__


class PlaceholderOp(Operation):
    __slots__ = ("shape", "dtype", "_outputs")
    shape: tuple[PrimExpr, ...]
    dtype: str

    def __init__(self, name: str, shape: Sequence[Any], dtype: str):
        dt.parse(dtype)
        self._init(name=name, tag="", attrs={}, shape=tuple(convert(s) for s in shape), dtype=dtype)
        self._init(_outputs=(Tensor(self, 0, self.shape, dtype),))


class ComputeOp(Operation):
    """``body[v]`` computes output ``v`` at index ``axis``; a reduction body is a :class:`Reduce`
    over ``reduce_axis`` (all outputs of a multi-output reduction share one Reduce)."""

    __slots__ = ("axis", "reduce_axis", "body", "_outputs", "_inputs")
    axis: tuple[IterVar, ...]
    reduce_axis: tuple[IterVar, ...]
    body: tuple[PrimExpr, ...]
    _inputs: tuple[Tensor, ...]  # input_tensors, found on first use

    def __init__(self, name: str, tag: str, attrs: dict, axis: Sequence[IterVar], body: Sequence[PrimExpr]):
        body = tuple(body)
        reduce_axis: tuple = ()
        if isinstance(body[0], Reduce):
            reduce_axis = tuple(body[0].axis)
            for b in body:
                if not isinstance(b, Reduce) or b.combiner is not body[0].combiner or b.source is not body[0].source:
                    raise ValueError(f"compute {name}: a reduction must be the whole body of every output "
                                     "(wrap a reduction in another compute to post-process it)")
        else:
            _check_no_nested_reduce(name, body)
        self._init(name=name, tag=tag, attrs=dict(attrs or {}), axis=tuple(axis), reduce_axis=reduce_axis, body=body)
        shape = tuple(iv.known_dom.extent for iv in axis)
        self._init(_outputs=tuple(Tensor(self, i, shape, b.dtype) for i, b in enumerate(body)))

    @property
    def num_outputs(self) -> int:
        return len(self.body)

    @property
    def input_tensors(self) -> list[Tensor]:
        # the body never changes: walked once (schedules and bound inference ask many times)
        try:
            return list(self._inputs)
        except AttributeError:
            pass
        seen: dict[tuple[int, int], Tensor] = {}

        def f(n: Any) -> None:
            if isinstance(n, E.ProducerLoad):
                t = n.producer
                seen.setdefault((id(t.op), t.value_index), t)

        from ..tir.functor import post_order_visit

        for b in self.body:
            post_order_visit(b, f)
        self._init(_inputs=tuple(seen.values()))
        return list(seen.values())


class ExternOp(Operation):
    """A stage whose body is a TIR statement written by hand (``te.extern``): it reads the
    ``input_placeholders`` buffers (bound to ``inputs`` when lowered) and writes the
    ``output_placeholders`` (bound to its outputs' buffers). It has no loops to schedule; its
    inputs are read whole, so bound inference gives every producer its full shape."""

    __slots__ = ("inputs", "input_placeholders", "output_placeholders", "body", "_outputs")
    inputs: tuple[Tensor, ...]
    input_placeholders: tuple[Any, ...]
    output_placeholders: tuple[Any, ...]
    body: Any

    def __init__(self, name: str, tag: str, attrs: dict, inputs: Sequence[Tensor],
                 input_placeholders: Sequence[Any], output_placeholders: Sequence[Any], body: Any):
        self._init(name=name, tag=tag, attrs=dict(attrs or {}), inputs=tuple(inputs),
                   input_placeholders=tuple(input_placeholders),
                   output_placeholders=tuple(output_placeholders), body=body)
        self._init(_outputs=tuple(Tensor(self, i, b.shape, b.dtype)
                                  for i, b in enumerate(self.output_placeholders)))

    @property
    def num_outputs(self) -> int:
        return len(self.output_placeholders)

    @property
    def input_tensors(self) -> list[Tensor]:
        seen: dict[tuple[int, int], Tensor] = {}
        for t in self.inputs:
            seen.setdefault((id(t.op), t.value_index), t)
        return list(seen.values())


def extern(shape: Any, inputs: Sequence[Tensor], fcompute: Callable[..., Any], name: str = "extern",
           dtype: Any = None, in_buffers: Sequence[Any] | None = None,
           out_buffers: Sequence[Any] | None = None, tag: str = "",
           attrs: dict | None = None) -> Tensor | list[Tensor]:
    """Tensors computed by a hand-written statement (TVM's ``te.extern``).

    ``shape``: one output shape or a list of them (dimensions may be symbolic: a size only the
    caller knows, e.g. a count computed at run time, is a ``te.var`` bound from the output
    array's shape when the function is called). ``fcompute(ins, outs)`` gets one ``tir.Buffer``
    per input and per output and returns the statement (``tir.ir_builder``'s ``ib.get()``) or
    an expression (evaluated, e.g. ``call_extern``). ``dtype``: one for all outputs or a list
    (default: the first input's dtype). Returns the tensor (also for a list of one shape, as
    TVM does), or a list for several outputs.
    """
    from ..tir import stmt as S
    from ..tir.buffer import Buffer, decl_buffer

    _check_name("extern", name)
    if not callable(fcompute):
        raise TypeError(f"extern {name}: fcompute must be a function (ins, outs) -> statement, got "
                        f"{type(fcompute).__name__}")
    if isinstance(inputs, Tensor):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(t, Tensor) for t in inputs):
        raise TypeError(f"extern {name}: inputs must be a list of te.Tensors, got {inputs!r}")
    multi = isinstance(shape, (list, tuple)) and len(shape) > 0 and all(
        isinstance(s, (list, tuple)) for s in shape)
    shapes = [_shape_tuple(s) for s in (shape if multi else [shape])]
    if dtype is None:
        if not inputs:
            raise ValueError(f"extern {name}: give dtype= (there is no input to take it from)")
        dtype = inputs[0].dtype
    dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * len(shapes)
    if len(dtypes) != len(shapes):
        raise ValueError(f"extern {name}: {len(shapes)} output shapes but {len(dtypes)} dtypes")
    for d in dtypes:
        dt.parse(d)

    def bufs(given: Sequence[Any] | None, what: str, specs: list[tuple[tuple, str]],
             names: list[str]) -> list[Buffer]:
        if given is None:
            return [decl_buffer(s, d, n) for (s, d), n in zip(specs, names)]
        given = list(given)
        if len(given) != len(specs) or not all(isinstance(b, Buffer) for b in given):
            raise ValueError(f"extern {name}: {what} must be {len(specs)} tir.Buffers")
        for b, (s, d) in zip(given, specs):
            if b.dtype != d or len(b.shape) != len(s):
                raise ValueError(f"extern {name}: {what} buffer {b.name} ({b.dtype}, {len(b.shape)} "
                                 f"dims) does not match its tensor ({d}, {len(s)} dims)")
        return given

    in_specs = [(t.shape, t.dtype) for t in inputs]
    ins = bufs(in_buffers, "in_buffers", in_specs, [f"{t.op.name}_buf" for t in inputs])
    outs = bufs(out_buffers, "out_buffers", list(zip(shapes, dtypes)),
                [name if len(shapes) == 1 else f"{name}_v{k}" for k in range(len(shapes))])
    body = fcompute(ins, outs)
    if body is not None:
        from ..tir.packed import mark_read_only

        body = mark_read_only(body, ins)  # call_packed reads the inputs' DLTensors only
    if body is None:
        raise TypeError(f"extern {name}: fcompute returned None; return the statement (ib.get())")
    if isinstance(body, PrimExpr):
        body = S.Evaluate(body)
    if not isinstance(body, S.Stmt):
        raise TypeError(f"extern {name}: fcompute must return a tir statement or expression, got "
                        f"{type(body).__name__}")
    op = ExternOp(name, tag, attrs or {}, inputs, ins, outs, body)
    res = [op.output(k) for k in range(op.num_outputs)]
    return res if len(res) > 1 else res[0]  # TVM's: one output is the tensor itself


def _check_no_nested_reduce(name: str, body: Sequence[PrimExpr]) -> None:
    from ..tir.functor import post_order_visit

    def f(n: Any) -> None:
        if isinstance(n, Reduce):
            raise ValueError(f"compute {name}: te.sum/max/min (a reduction) must be the top-level "
                             "expression of the compute; compute it in its own stage")

    for b in body:
        post_order_visit(b, f)


class CommReducer(Node):
    """A commutative reducer: ``result = combine(lhs, rhs)`` element-wise over tuples, with
    ``identity_element``. Tuple reducers (e.g. argmax over (index, value)) have several lhs/rhs."""

    __slots__ = ("lhs", "rhs", "result", "identity_element", "name")
    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple[PrimExpr, ...]
    identity_element: tuple[PrimExpr, ...]
    name: str

    def __init__(self, lhs: Sequence[Var], rhs: Sequence[Var], result: Sequence[PrimExpr],
                 identity_element: Sequence[PrimExpr], name: str = "reduce"):
        self._init(lhs=tuple(lhs), rhs=tuple(rhs), result=tuple(result),
                   identity_element=tuple(identity_element), name=name)

    def combine(self, lhs: Sequence[PrimExpr], rhs: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        from ..tir.functor import substitute

        vmap = {**dict(zip(self.lhs, lhs)), **dict(zip(self.rhs, rhs))}
        return tuple(substitute(r, vmap) for r in self.result)

    def __str__(self) -> str:
        return f"comm_reducer({self.name})"

    __repr__ = __str__


class Reduce(PrimExpr):
    """Reduction of ``source`` over ``axis`` with ``combiner``; this node is output
    ``value_index`` of the (tuple) reduction. ``condition`` masks elements; ``init`` optional."""

    __slots__ = ("combiner", "source", "axis", "condition", "value_index", "init")
    combiner: CommReducer
    source: tuple[PrimExpr, ...]
    axis: tuple[IterVar, ...]
    condition: PrimExpr
    value_index: int
    init: tuple[PrimExpr, ...]
    _fields = ("source", "condition", "init")

    def __init__(self, combiner: CommReducer, source: Sequence[PrimExpr], axis: Sequence[IterVar],
                 condition: PrimExpr, value_index: int, init: Sequence[PrimExpr] = ()):
        source = tuple(source)
        self._init(dtype=source[value_index].dtype, combiner=combiner, source=source, axis=tuple(axis),
                   condition=condition, value_index=value_index, init=tuple(init))

    def _print(self, p) -> str:
        src = ", ".join(p.expr(s) for s in self.source)
        axes = ", ".join(p.expr(a.var) for a in self.axis)
        cond = "" if isinstance(self.condition, E.IntImm) and self.condition.value else f", where={p.expr(self.condition)}"
        vi = f"[{self.value_index}]" if len(self.source) > 1 else ""
        return f"{self.combiner.name}({src}, axis=[{axes}]{cond}){vi}"


# ---------------------------------------------------------------------------------------------
def var(name: str = "tindex", dtype: str = "int32") -> Var:
    _check_name("var", name)
    return Var(name, dtype)


def size_var(name: str = "size", dtype: str = "int32") -> E.SizeVar:
    _check_name("size_var", name)
    return E.SizeVar(name, dtype)


def _shape_tuple(shape: Any) -> tuple:
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    out = []
    for s in shape:
        if isinstance(s, float) and s.is_integer():
            s = int(s)  # `N / bn` in TVM's tutorials: a whole Python float is accepted as a size
        s = convert(s) if not isinstance(s, (bool, np.bool_)) else s
        if not isinstance(s, PrimExpr) or not dt.is_integer(s.dtype) or dt.is_bool(s.dtype):
            raise TypeError(f"shape entries must be integers or integer expressions, got {s!r}")
        if isinstance(s, E.IntImm) and s.value < 0:
            raise ValueError(f"negative dimension {s.value} in shape {shape}")
        out.append(s)
    return tuple(out)


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the computation."""
    _check_name("placeholder", name)
    return PlaceholderOp(name, _shape_tuple(shape), dtype).output(0)


def _range(dom: Any) -> Range:
    if isinstance(dom, Range):
        return dom
    if isinstance(dom, (list, tuple)):
        if len(dom) != 2:
            raise ValueError(f"a domain is (begin, end), got {dom}")
        return Range(dom[0], dom[1])
    return Range(0, dom)


def reduce_axis(dom: Any, name: str = "rv", thread_tag: str = "", dtype: str | None = None) -> IterVar:
    """A reduction axis over ``dom`` = (begin, end) or a Range."""
    _check_name("reduce_axis", name)
    if dom is None:
        raise TypeError("reduce_axis: needs a domain (begin, end) or an extent, got None")
    raw = [dom.min, dom.extent] if isinstance(dom, Range) else list(dom) if isinstance(dom, (list, tuple)) else [dom]
    for v in raw:
        e = convert(v) if not isinstance(v, (bool, str, np.bool_)) else None
        if not isinstance(e, PrimExpr) or not dt.is_integer(e.dtype) or dt.is_bool(e.dtype):
            raise TypeError(f"reduce_axis: the domain bounds must be integers or integer expressions, "
                            f"got {v!r} in {dom!r}")
    r = _range(dom)
    if isinstance(r.extent, E.IntImm) and r.extent.value < 0:
        raise ValueError(f"reduce_axis: the domain {dom!r} is empty backwards: end < begin")
    return IterVar(r, Var(name, dtype or r.extent.dtype), IterVar.CommReduce, thread_tag)


def thread_axis(dom: Any = None, tag: str = "", name: str = "", span: Any = None) -> IterVar:
    """A thread axis (``blockIdx.x``, ``threadIdx.y``, ``vthread``...) to bind loops to."""
    if isinstance(dom, str):
        tag, dom = dom, None
    if not tag:
        raise ValueError("thread_axis needs a tag such as 'blockIdx.x', 'threadIdx.x' or 'vthread'")
    r = _range(dom) if dom is not None else None
    return IterVar(r, Var(name or tag, "int32"), IterVar.ThreadIndex, tag)


def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "",
            attrs: dict | None = None) -> Tensor | list[Tensor]:
    """A tensor whose element at index ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    ``fcompute`` may return a list/tuple for several outputs of the same shape; a reduction
    (``te.sum`` etc.) must be its top-level expression.
    """
    _check_name("compute", name)
    if not callable(fcompute):
        raise TypeError(f"compute {name}: fcompute must be a function of the indices (e.g. "
                        f"lambda i, j: ...), got {type(fcompute).__name__} {fcompute!r}")
    shape = _shape_tuple(shape)
    try:
        params = [p for p in inspect.signature(fcompute).parameters.values()
                  if p.kind not in (p.VAR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        params = []
    if params and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        names = [f"i{k}" for k in range(len(shape))]
    else:
        names = [p.name for p in params]
        if len(names) != len(shape):
            raise ValueError(f"compute {name}: fcompute takes {len(names)} arguments but the shape has "
                             f"{len(shape)} dimensions")
    axis = tuple(IterVar(Range(0, s), Var(n, s.dtype), IterVar.DataPar) for n, s in zip(names, shape))
    body = fcompute(*[a.var for a in axis])
    multi = isinstance(body, (list, tuple))
    if multi and not body:
        raise ValueError(f"compute {name}: fcompute returned an empty {type(body).__name__}; "
                         "expected an expression or a list of them")
    body = [_body_expr(name, b) for b in (body if multi else [body])]
    op = ComputeOp(name, tag, attrs or {}, axis, body)
    outs = [op.output(i) for i in range(op.num_outputs)]
    return outs if multi else outs[0]


def _check_name(what: str, name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what}: name must be a non-empty string, got {type(name).__name__} {name!r}")


def _body_expr(name: str, b: Any) -> PrimExpr:
    """A compute body value as an expression; strings, None, tensors, arrays are refused."""
    if isinstance(b, TensorSlice):
        raise b.error()
    if isinstance(b, (Tensor, str, np.ndarray)) or b is None or not isinstance(b, (PrimExpr, IterVar, int, float, np.generic)):
        what = f"Tensor {b.name} (index it: {b.name}[i, ...])" if isinstance(b, Tensor) else type(b).__name__
        raise TypeError(f"compute {name}: fcompute must return an expression (or a list of them), got {what}")
    e = convert(b)
    if not isinstance(e, PrimExpr) or e.dtype == "handle":
        raise TypeError(f"compute {name}: fcompute must return a numeric expression, got {b!r}")
    return e


def comm_reducer(fcombine: Callable[..., Any], fidentity: Callable[..., Any],
                 name: str = "comm_reduce") -> Callable[..., Any]:
    """Make a reducer from ``fcombine(x, y)`` and ``fidentity(dtype)`` (tuples for tuple reducers).

    The result is called as ``reducer(expr, axis, where=None, init=None)``; for a tuple reducer
    ``expr`` is a tuple and the call returns a tuple of Reduce nodes.
    """

    for what, fn in (("fcombine", fcombine), ("fidentity", fidentity)):
        if not callable(fn):
            raise TypeError(f"comm_reducer: {what} must be a function, got {type(fn).__name__} {fn!r}")

    def reducer(expr: Any, *args: Any, **kwargs: Any):
        axis, where, init, args = _reducer_args(*args, **kwargs)
        if axis is _NO_AXIS:
            raise TypeError(f"{name}: needs axis=, the te.reduce_axis IterVar(s) to reduce over")
        if isinstance(axis, (list, tuple)) and not axis:
            raise ValueError(f"{name}: axis= is an empty list; give the te.reduce_axis IterVar(s) to "
                             "reduce over")
        if not isinstance(axis, (IterVar, list, tuple)) and not isinstance(expr, (list, tuple)):
            if axis is None or "axis" in kwargs:
                raise TypeError(f"{name}: axis must be te.reduce_axis IterVars, got "
                                f"{type(axis).__name__} {axis!r}")
            # elementwise use, as TVM: te.max(a, b), te.min(a, b, c) fold fcombine over the values
            vals = [v for v in (expr, axis, where, init, *args) if v is not None]
            out = vals[0]
            for v in vals[1:]:
                out = fcombine(out, v)
            return convert(out)
        exprs = tuple(convert(e) for e in expr) if isinstance(expr, (list, tuple)) else (convert(expr),)
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        for a in axes:
            if not isinstance(a, IterVar) or a.iter_type != IterVar.CommReduce:
                raise TypeError(f"{name}: axis must be te.reduce_axis IterVars, got {a!r}")
        if len({id(a) for a in axes}) != len(axes):
            raise ValueError(f"{name}: an axis appears twice in {[a.var.name for a in axes]}")
        for e in (expr if isinstance(expr, (list, tuple)) else (expr,)):
            if not isinstance(e, (PrimExpr, IterVar, int, float, np.generic)) or isinstance(e, (bool, str)):
                raise TypeError(f"{name}: the reduced value must be a numeric expression, got "
                                f"{type(e).__name__} {e!r}")
        if where is not None:
            w = convert(where) if not isinstance(where, str) else None
            if not isinstance(w, PrimExpr) or not dt.is_bool(w.dtype):
                raise TypeError(f"{name}: where= must be a boolean expression, got {type(where).__name__} "
                                f"{where!r}")
        dtypes = [e.dtype for e in exprs]
        lhs = tuple(Var(f"x{k}" if len(exprs) > 1 else "x", d) for k, d in enumerate(dtypes))
        rhs = tuple(Var(f"y{k}" if len(exprs) > 1 else "y", d) for k, d in enumerate(dtypes))
        if len(exprs) == 1:
            res = fcombine(lhs[0], rhs[0])
        elif _positional_arity(fcombine) == 2:
            res = fcombine(lhs, rhs)  # TVM's convention: fcombine(x, y) with x, y tuples
        else:
            res = fcombine(*lhs, *rhs)
        res = tuple(convert(r) for r in res) if isinstance(res, (list, tuple)) else (convert(res),)
        ident = fidentity(*dtypes) if len(exprs) > 1 else fidentity(dtypes[0])
        ident = tuple(convert(r) for r in ident) if isinstance(ident, (list, tuple)) else (convert(ident),)
        if len(res) != len(exprs) or len(ident) != len(exprs):
            raise ValueError(f"{name}: fcombine/fidentity must return {len(exprs)} values")
        res = tuple(E.cast(r, d) for r, d in zip(res, dtypes))
        ident = tuple(E.cast(r, d) for r, d in zip(ident, dtypes))
        combiner = CommReducer(lhs, rhs, res, ident, name)
        cond = convert(where) if where is not None else const(True)
        inits = ()
        if init is not None:
            inits = tuple(convert(i) for i in init) if isinstance(init, (list, tuple)) else (convert(init),)
        outs = tuple(Reduce(combiner, exprs, axes, cond, i, inits) for i in range(len(exprs)))
        return outs if len(exprs) > 1 else outs[0]

    reducer.__name__ = name
    return reducer


_NO_AXIS = object()


def _reducer_args(axis: Any = _NO_AXIS, where: Any = None, init: Any = None,
                  *rest: Any) -> tuple[Any, Any, Any, tuple]:
    return axis, where, init, rest


def _positional_arity(fn: Callable[..., Any]) -> int | None:
    """How many positional parameters ``fn`` takes (None for ``*args`` or no signature)."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return None
    return len([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])


def _sum_identity(dtype: str) -> PrimExpr:
    return const(0, dtype)


def _min_value(dtype: str) -> PrimExpr:
    from ..tir.op import min_value

    return min_value(dtype)


def _max_value(dtype: str) -> PrimExpr:
    from ..tir.op import max_value

    return max_value(dtype)


def _max(x, y):
    from ..tir.op import max as _m

    return _m(x, y)


def _min(x, y):
    from ..tir.op import min as _m

    return _m(x, y)


sum = comm_reducer(lambda x, y: x + y, _sum_identity, name="sum")  # noqa: A001
max = comm_reducer(_max, _min_value, name="max")  # noqa: A001
min = comm_reducer(_min, _max_value, name="min")  # noqa: A001
