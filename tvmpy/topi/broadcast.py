"""Binary operators with numpy broadcasting (TVM's ``topi.add`` etc.).

Each operand is a ``te.Tensor`` or a Python/numpy scalar (or a scalar ``PrimExpr``); the output
shape follows numpy: shapes are right-aligned and a dimension of size 1 stretches to the other's.
Two tensor operands of different dtypes are promoted by TIR's rules. With two scalar operands the
result is the scalar expression itself.

``divide`` follows TVM: on integers it truncates toward zero (C's ``/``); ``floor_divide`` and
``floor_mod`` round toward minus infinity (Python's ``//`` and ``%``) on ints and floats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import te
from ..arith import can_prove
from ..ir import dtype as dt
from ..te.tensor import register_tensor_arith
from ..tir import op as tir_op
from ..tir.expr import IntImm, PrimExpr, binary_match, cast, const, convert
from . import tag

__all__ = [
    "broadcast_shape", "broadcast_to", "add", "subtract", "multiply", "divide", "power", "maximum",
    "minimum", "floor_divide", "floor_mod", "trunc_divide", "trunc_mod", "mod", "equal",
    "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
    "where",
]


def _is_one(e: Any) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def broadcast_shape(a: Sequence[Any], b: Sequence[Any], op: str = "broadcast") -> tuple:
    """The numpy broadcast of two shapes; a ValueError naming both shapes when they clash."""
    a = tuple(convert(s) for s in a)
    b = tuple(convert(s) for s in b)
    n = max(len(a), len(b))
    pa = (const(1),) * (n - len(a)) + a
    pb = (const(1),) * (n - len(b)) + b
    out = []
    for k, (x, y) in enumerate(zip(pa, pb)):
        if _is_one(x):
            out.append(y)
        elif _is_one(y):
            out.append(x)
        elif isinstance(x, IntImm) and isinstance(y, IntImm):
            if x.value != y.value:
                raise ValueError(f"topi.{op}: shapes {_fmt(a)} and {_fmt(b)} cannot be broadcast "
                                 f"together (dimension {k - n}: {x.value} vs {y.value})")
            out.append(x)
        elif can_prove(x == y):
            out.append(x)
        elif _run_time(x) or _run_time(y):
            # a relay.Any size: 1 or the other's, checked before the kernel runs
            # (relay/size_checks.py); the reads of a size-1 side go to index 0
            out.append(tir_op.max(x, y) if _run_time(x) and _run_time(y)
                       else y if _run_time(x) else x)
        else:
            raise ValueError(f"topi.{op}: cannot prove that dimension {k - n} of {_fmt(a)} and "
                             f"{_fmt(b)} agree ({x} vs {y}); make them equal or 1")
    return tuple(out)


def _fmt(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _run_time(d: Any) -> bool:
    """A size that may be 1 or the other side's at run time (``relay.Any``)."""
    return bool(getattr(d, "broadcast_at_run_time", False))


def _bcast_index(t: te.Tensor, out_ndim: int, idx: Sequence[Any],
                 out_shape: Sequence[Any] = ()) -> list:
    """Indices into ``t`` for output index ``idx``: right-aligned, 0 on size-1 dimensions (and,
    for a ``relay.Any`` size broadcast against another, 0 when it is 1 at run time)."""
    off = out_ndim - t.ndim
    res = []
    for k, s in enumerate(t.shape):
        i = idx[off + k]
        if _is_one(s):
            res.append(const(0, i.dtype))
        elif out_shape and _run_time(s) and out_shape[off + k] is not s:
            res.append(tir_op.if_then_else(s == 1, const(0, i.dtype), i))
        else:
            res.append(i)
    return res


def broadcast_to(data: te.Tensor, shape: Sequence[Any]) -> te.Tensor:
    """``data`` broadcast (numpy rules) to exactly ``shape``."""
    if not isinstance(data, te.Tensor):
        raise TypeError(f"topi.broadcast_to: expected a te.Tensor, got {type(data).__name__}")
    shape = tuple(convert(s) for s in (shape if isinstance(shape, (list, tuple)) else (shape,)))
    if len(shape) < data.ndim:
        raise ValueError(f"topi.broadcast_to: cannot broadcast shape {_fmt(data.shape)} to the "
                         f"lower-rank shape {_fmt(shape)}")
    out = broadcast_shape(data.shape, shape, "broadcast_to")
    for k, (o, s) in enumerate(zip(out, shape)):
        if not (isinstance(o, IntImm) and isinstance(s, IntImm) and o.value == s.value) \
                and not can_prove(o == s):
            raise ValueError(f"topi.broadcast_to: cannot broadcast {_fmt(data.shape)} to "
                             f"{_fmt(shape)} (dimension {k}: {o} vs {s})")
    n = len(shape)
    return te.compute(shape, lambda *i: data(*_bcast_index(data, n, i, out)), name="broadcast_to",
                      tag=tag.BROADCAST)


def _scalar(x: Any) -> bool:
    return not isinstance(x, te.Tensor)


def _check_operand(x: Any, op: str) -> None:
    if isinstance(x, te.Tensor):
        return
    if isinstance(x, (bool, int, float, np.generic)):
        return
    if isinstance(x, PrimExpr) and dt.lanes_of(x.dtype) == 1:
        return
    raise TypeError(f"topi.{op}: operands must be te.Tensors or scalars, got {type(x).__name__} {x!r}")


def make_broadcast(op: str, f: Callable[[PrimExpr, PrimExpr], PrimExpr],
                   check: Callable[[str, str], None] | None = None) -> Callable[[Any, Any], Any]:
    """The topi operator ``op(lhs, rhs)`` computing ``f(a, b)`` per element with broadcasting."""

    def fn(lhs: Any, rhs: Any) -> Any:
        _check_operand(lhs, op)
        _check_operand(rhs, op)
        if _scalar(lhs) and _scalar(rhs):
            a, b = binary_match(lhs, rhs)
            if check:
                check(a.dtype, op)
            return f(a, b)
        if _scalar(lhs) or _scalar(rhs):
            t = rhs if _scalar(lhs) else lhs
            s = lhs if _scalar(lhs) else rhs
            if isinstance(s, float) and not dt.is_float(t.dtype) and s.is_integer():
                s = int(s)
            probe_a, probe_b = binary_match(*((s, const(0, t.dtype)) if _scalar(lhs)
                                              else (const(0, t.dtype), s)))
            if check:
                check(probe_a.dtype, op)

            def body(*i: Any) -> PrimExpr:
                a, b = (s, t(*i)) if _scalar(lhs) else (t(*i), s)
                return f(*binary_match(a, b))

            return te.compute(t.shape, body, name=op, tag=tag.ELEMWISE)
        shape = broadcast_shape(lhs.shape, rhs.shape, op)
        n = len(shape)
        if check:
            check(binary_match(const(0, lhs.dtype), const(0, rhs.dtype))[0].dtype, op)

        def body2(*i: Any) -> PrimExpr:
            a = lhs(*_bcast_index(lhs, n, i, shape))
            b = rhs(*_bcast_index(rhs, n, i, shape))
            return f(*binary_match(a, b))

        same = len(lhs.shape) == len(rhs.shape) and all(
            isinstance(x, IntImm) and isinstance(y, IntImm) and x.value == y.value
            for x, y in zip(lhs.shape, rhs.shape))
        return te.compute(shape, body2, name=op, tag=tag.ELEMWISE if same else tag.BROADCAST)

    fn.__name__ = op
    fn.__doc__ = f"Elementwise ``{op}`` with numpy broadcasting; tensors or scalars."
    return fn


def _no_bool(d: str, op: str) -> None:
    if dt.is_bool(d):
        raise TypeError(f"topi.{op}: not defined on bool operands (cast them first)")


def _int_only(d: str, op: str) -> None:
    if not dt.is_integer(d):
        raise TypeError(f"topi.{op}: needs integer (or bool) operands, got {d}")


def _floordiv(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if dt.is_float(a.dtype):
        return tir_op.floor(a / b)
    return tir_op.floordiv(a, b)


def _floormod(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if dt.is_float(a.dtype):
        return a - tir_op.floor(a / b) * b
    return tir_op.floormod(a, b)


def _truncmod(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if dt.is_float(a.dtype):
        return tir_op.fmod(a, b)
    return tir_op.truncmod(a, b)


def _scalar_constant(b: PrimExpr) -> Any:
    """The number ``b`` stands for: an immediate, or a read of a 0-d stage that computes one
    (how a relay scalar Constant reaches a fused kernel); None otherwise."""
    op = getattr(getattr(b, "producer", None), "op", None)
    if op is not None and not getattr(op, "axis", True) and len(getattr(op, "body", ())) == 1:
        b = op.body[0]
    v = getattr(b, "value", None)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _power(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``pow(a, b)``; a constant exponent of 1, 2, 3 or -1 as multiplies or a division (T5's
    RMSNorm and decomposed LayerNorms square, GPT-2's GELU cubes): vector arithmetic instead
    of a ``pow`` call per element (~6x exp's time), on every target. ``x * x`` and ``1 / x``
    are ``pow(x, 2)`` and ``pow(x, -1)`` exactly (one rounding, inf/nan/-0 alike); ``x * x * x``
    may differ from a correctly rounded ``pow(x, 3)`` in the last bit, as onnxruntime's Pow,
    which computes it the same way."""
    e = _scalar_constant(b)
    if e in (1, 2, 3, -1) and dt.is_float(a.dtype) and a.dtype == b.dtype:
        if e == -1:
            return tir_op.const(1, a.dtype) / a
        return a if e == 1 else a * a if e == 2 else a * a * a
    return tir_op.power(a, b)


def _power_check(d: str, op: str) -> None:
    if not dt.is_float(d):
        raise TypeError(f"topi.power: needs float operands, got {d} (cast them first)")


def _bool(f: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> Callable[[PrimExpr, PrimExpr], PrimExpr]:
    def g(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if not dt.is_bool(a.dtype):
            a = a != const(0, a.dtype)
        if not dt.is_bool(b.dtype):
            b = b != const(0, b.dtype)
        return f(a, b)

    return g


add = make_broadcast("add", lambda a, b: a + b)
subtract = make_broadcast("subtract", lambda a, b: a - b)
multiply = make_broadcast("multiply", lambda a, b: a * b)
divide = make_broadcast("divide", lambda a, b: tir_op.div(a, b), _no_bool)
trunc_divide = make_broadcast("trunc_divide",
                              lambda a, b: tir_op.truncdiv(a, b) if not dt.is_float(a.dtype)
                              else tir_op.trunc(a / b), _no_bool)
floor_divide = make_broadcast("floor_divide", _floordiv, _no_bool)
floor_mod = make_broadcast("floor_mod", _floormod, _no_bool)
trunc_mod = make_broadcast("trunc_mod", _truncmod, _no_bool)
mod = trunc_mod
power = make_broadcast("power", _power, _power_check)
maximum = make_broadcast("maximum", tir_op.max)
minimum = make_broadcast("minimum", tir_op.min)
equal = make_broadcast("equal", lambda a, b: a == b)
not_equal = make_broadcast("not_equal", lambda a, b: a != b)
less = make_broadcast("less", lambda a, b: a < b)
less_equal = make_broadcast("less_equal", lambda a, b: a <= b)
greater = make_broadcast("greater", lambda a, b: a > b)
greater_equal = make_broadcast("greater_equal", lambda a, b: a >= b)
logical_and = make_broadcast("logical_and", _bool(lambda a, b: tir_op.all(a, b)))
logical_or = make_broadcast("logical_or", _bool(lambda a, b: tir_op.any(a, b)))
logical_xor = make_broadcast("logical_xor", _bool(lambda a, b: a != b))
bitwise_and = make_broadcast("bitwise_and", lambda a, b: a & b, _int_only)
bitwise_or = make_broadcast("bitwise_or", lambda a, b: a | b, _int_only)
bitwise_xor = make_broadcast("bitwise_xor", lambda a, b: a ^ b, _int_only)
left_shift = make_broadcast("left_shift", tir_op.shift_left, _int_only)
right_shift = make_broadcast("right_shift", tir_op.shift_right, _int_only)


def where(condition: Any, x: Any, y: Any) -> te.Tensor:
    """``x`` where ``condition`` is nonzero, else ``y``; all three broadcast together."""
    for v in (condition, x, y):
        _check_operand(v, "where")
    tensors = [v for v in (condition, x, y) if isinstance(v, te.Tensor)]
    if not tensors:
        raise TypeError("topi.where: at least one operand must be a te.Tensor")
    shape: tuple = ()
    for t in tensors:
        shape = broadcast_shape(shape, t.shape, "where")
    n = len(shape)
    xd = x.dtype if isinstance(x, te.Tensor) else None
    yd = y.dtype if isinstance(y, te.Tensor) else None
    if xd and yd and xd != yd:
        raise TypeError(f"topi.where: x and y must have one dtype, got {xd} and {yd}")
    out_d = xd or yd or binary_match(x, y)[0].dtype

    def read(v: Any, i: Sequence[Any]) -> PrimExpr:
        if isinstance(v, te.Tensor):
            return v(*_bcast_index(v, n, i, shape))
        return convert(v)

    def body(*i: Any) -> PrimExpr:
        c = read(condition, i)
        if not dt.is_bool(c.dtype):
            c = c != const(0, c.dtype)
        return tir_op.Select(c, cast(read(x, i), out_d), cast(read(y, i), out_d))

    return te.compute(shape, body, name="where", tag=tag.BROADCAST)

# ``A + B``, ``2.0 * A``, ``A / B`` on te.Tensors build these (TVM's generic_op_impl)
for _name, _fn in (("add", add), ("subtract", subtract), ("multiply", multiply),
                   ("divide", divide)):
    register_tensor_arith(_name, _fn)
