"""Expressions of the loop IR (also the leaves of tensor expressions).

Every expression has a ``dtype`` string. Python operators build nodes:
``+ - *`` arithmetic, ``/`` true division (truncating for integers, as in C), ``//`` floordiv,
``%`` floormod, comparisons build EQ/NE/LT/..., ``&`` ``|`` ``~`` are logical on bools and bitwise
on integers. ``bool(expr)`` raises, because a symbolic value has no truth value: use
``tvm.tir.analysis.can_prove`` / the arith analyzer, or compare constants with ``.value``.
``a == b`` stays usable as a dict/list membership test: its truth value is identity (as in TVM).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..ir import dtype as dt
from ..ir.node import Node
from ..ir.op import Op
from ..ir.op import intern as _intern_op

if TYPE_CHECKING:
    from .buffer import Buffer

__all__ = [
    "PrimExpr", "Var", "SizeVar", "IntImm", "FloatImm", "StringImm", "Cast",
    "BinaryOp", "Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max",
    "CmpOp", "EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or", "Not", "Select",
    "Ramp", "Broadcast", "Let", "Call", "BufferLoad", "ProducerLoad", "Shuffle",
    "Range", "IterVar", "const", "convert", "binary_match", "is_const_int", "const_value",
]


class PrimExpr(Node):
    """A scalar or vector-valued expression."""

    __slots__ = ("dtype",)
    dtype: str

    # ---- truth value -------------------------------------------------------------------------
    def __bool__(self) -> bool:
        raise TypeError(
            f"cannot use the symbolic expression `{self}` as a Python bool (in `if`, `and`, `or`, "
            "`not`, or a chained comparison). Build the condition as an expression with "
            "tvm.tir.all/any/Not, te.if_then_else or tvm.tir.Select; to decide it at compile time use "
            "tvm.arith.Analyzer().can_prove(cond); for a constant read `.value`."
        )

    def __index__(self) -> int:
        raise TypeError(f"symbolic expression `{self}` cannot be used as a Python integer")

    # ---- arithmetic --------------------------------------------------------------------------
    def __add__(self, other):
        if getattr(other, "_defer_arith", False):  # expr <op> te.Tensor: the tensor's reflection
            return NotImplemented
        return _binary(Add, self, other)

    def __radd__(self, other):
        return _binary(Add, other, self)

    def __sub__(self, other):
        if getattr(other, "_defer_arith", False):  # expr <op> te.Tensor: the tensor's reflection
            return NotImplemented
        return _binary(Sub, self, other)

    def __rsub__(self, other):
        return _binary(Sub, other, self)

    def __mul__(self, other):
        if getattr(other, "_defer_arith", False):  # expr <op> te.Tensor: the tensor's reflection
            return NotImplemented
        return _binary(Mul, self, other)

    def __rmul__(self, other):
        return _binary(Mul, other, self)

    def __truediv__(self, other):
        if getattr(other, "_defer_arith", False):  # expr <op> te.Tensor: the tensor's reflection
            return NotImplemented
        return _binary(Div, self, other)

    def __rtruediv__(self, other):
        return _binary(Div, other, self)

    def __floordiv__(self, other):
        return _binary(FloorDiv, self, other)

    def __rfloordiv__(self, other):
        return _binary(FloorDiv, other, self)

    def __mod__(self, other):
        return _binary(FloorMod, self, other)

    def __rmod__(self, other):
        return _binary(FloorMod, other, self)

    def __neg__(self):
        if isinstance(self, IntImm):
            return IntImm(self.dtype, -self.value)
        if isinstance(self, FloatImm):
            return FloatImm(self.dtype, -self.value)
        return _binary(Sub, const(0, self.dtype), self)

    def __pos__(self):
        return self

    def __abs__(self):
        from .op import abs as _abs

        return _abs(self)

    # ---- comparisons -------------------------------------------------------------------------
    def __lt__(self, other):
        return _binary(LT, self, other)

    def __le__(self, other):
        return _binary(LE, self, other)

    def __gt__(self, other):
        return _binary(GT, self, other)

    def __ge__(self, other):
        return _binary(GE, self, other)

    def __eq__(self, other):
        if not _comparable(other):
            return NotImplemented  # `var in [tensor, ...]`, `expr == None`: plain Python identity
        return _binary(EQ, self, other)

    def __ne__(self, other):
        if not _comparable(other):
            return NotImplemented
        return _binary(NE, self, other)

    __hash__ = Node.__hash__

    # ---- logical / bitwise -------------------------------------------------------------------
    def __and__(self, other):
        a, b = binary_match(self, other)
        if dt.is_bool(a.dtype):
            return And(a, b)
        from .op import bitwise_and

        return bitwise_and(a, b)

    def __rand__(self, other):
        return convert(other).__and__(self)

    def __or__(self, other):
        a, b = binary_match(self, other)
        if dt.is_bool(a.dtype):
            return Or(a, b)
        from .op import bitwise_or

        return bitwise_or(a, b)

    def __ror__(self, other):
        return convert(other).__or__(self)

    def __xor__(self, other):
        from .op import bitwise_xor

        return bitwise_xor(*binary_match(self, other))

    def __invert__(self):
        if dt.is_bool(self.dtype):
            return Not(self)
        from .op import bitwise_not

        return bitwise_not(self)

    def __lshift__(self, other):
        from .op import shift_left

        return shift_left(*binary_match(self, other))

    def __rshift__(self, other):
        from .op import shift_right

        return shift_right(*binary_match(self, other))

    def astype(self, dtype: str) -> PrimExpr:
        return cast(self, dtype)

    def equal(self, other: Any) -> PrimExpr:
        """Explicit equality node (``==`` does the same)."""
        return _binary(EQ, self, other)


# ---------------------------------------------------------------------------------------------
# leaves
class Var(PrimExpr):
    """A variable: loop index, symbolic size, or a buffer's data pointer (dtype "handle")."""

    __slots__ = ("name",)
    name: str
    _struct_var = True

    def __init__(self, name: str = "v", dtype: str = "int32"):
        dt.parse(dtype)
        self._init(name=name, dtype=dtype)

    # variables compare by identity in dict/list membership (see EQ.__bool__)


class SizeVar(Var):
    """A variable known to be >= 0 (a symbolic shape)."""

    __slots__ = ()


class IntImm(PrimExpr):
    __slots__ = ("value",)
    value: int

    def __init__(self, dtype: str, value: int):
        d = dt.parse(dtype)
        value = int(value)
        if d.kind == "bool":
            value = 1 if value else 0
        self._init(dtype=dtype, value=value)

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __float__(self) -> float:
        return float(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)


class FloatImm(PrimExpr):
    __slots__ = ("value",)
    value: float

    def __init__(self, dtype: str, value: float):
        if not (dt.is_float(dtype) or dt.is_low_float(dtype)):
            raise TypeError(f"FloatImm needs a float dtype, got {dtype}")
        self._init(dtype=dtype, value=float(value))

    def __float__(self) -> float:
        return self.value

    def __bool__(self) -> bool:
        return bool(self.value)


class StringImm(PrimExpr):
    __slots__ = ("value",)
    value: str

    def __init__(self, value: str):
        self._init(dtype="handle", value=str(value))

    def __bool__(self) -> bool:
        return True


class Cast(PrimExpr):
    __slots__ = ("value",)
    value: PrimExpr
    _fields = ("value",)

    def __init__(self, dtype: str, value: PrimExpr):
        dt.parse(dtype)
        self._init(dtype=dtype, value=value if isinstance(value, PrimExpr) else convert(value))


# ---------------------------------------------------------------------------------------------
# binary arithmetic
class BinaryOp(PrimExpr):
    __slots__ = ("a", "b")
    a: PrimExpr
    b: PrimExpr
    _fields = ("a", "b")
    symbol = "?"

    def __init__(self, a: PrimExpr, b: PrimExpr):
        if not isinstance(a, PrimExpr):  # TVM's constructors take Python numbers (int32/float32)
            a = convert(a)
        if not isinstance(b, PrimExpr):
            b = convert(b)
        if a.dtype != b.dtype:
            raise TypeError(f"{type(self).__name__} operands differ in dtype: {a.dtype} vs {b.dtype}")
        self._init(dtype=self._result_dtype(a.dtype), a=a, b=b)

    @staticmethod
    def _result_dtype(operand_dtype: str) -> str:
        return operand_dtype


class Add(BinaryOp):
    __slots__ = ()
    symbol = "+"


class Sub(BinaryOp):
    __slots__ = ()
    symbol = "-"


class Mul(BinaryOp):
    __slots__ = ()
    symbol = "*"


class Div(BinaryOp):
    """Division: IEEE for floats, truncation toward zero for integers (C semantics, truncdiv)."""

    __slots__ = ()
    symbol = "/"


class Mod(BinaryOp):
    """Remainder of truncated division (C ``%``, truncmod); sign follows the dividend."""

    __slots__ = ()
    symbol = "%"


class FloorDiv(BinaryOp):
    __slots__ = ()
    symbol = "//"


class FloorMod(BinaryOp):
    __slots__ = ()
    symbol = "%"


class Min(BinaryOp):
    __slots__ = ()


class Max(BinaryOp):
    __slots__ = ()


class CmpOp(BinaryOp):
    __slots__ = ()

    @staticmethod
    def _result_dtype(operand_dtype: str) -> str:
        return dt.with_lanes("bool", dt.lanes_of(operand_dtype))


class EQ(CmpOp):
    __slots__ = ()
    symbol = "=="

    def __bool__(self) -> bool:
        # lets `var in list` and dict lookups work: identity of the operands (as TVM)
        if isinstance(self.a, (IntImm, FloatImm)) and isinstance(self.b, (IntImm, FloatImm)):
            return self.a.value == self.b.value
        return self.a is self.b


class NE(CmpOp):
    __slots__ = ()
    symbol = "!="

    def __bool__(self) -> bool:
        if isinstance(self.a, (IntImm, FloatImm)) and isinstance(self.b, (IntImm, FloatImm)):
            return self.a.value != self.b.value
        return self.a is not self.b


class LT(CmpOp):
    __slots__ = ()
    symbol = "<"


class LE(CmpOp):
    __slots__ = ()
    symbol = "<="


class GT(CmpOp):
    __slots__ = ()
    symbol = ">"


class GE(CmpOp):
    __slots__ = ()
    symbol = ">="


class And(BinaryOp):
    __slots__ = ()
    symbol = "and"

    def __init__(self, a: PrimExpr, b: PrimExpr):
        a, b = _as_bool(a), _as_bool(b)
        super().__init__(a, b)


class Or(BinaryOp):
    __slots__ = ()
    symbol = "or"

    def __init__(self, a: PrimExpr, b: PrimExpr):
        a, b = _as_bool(a), _as_bool(b)
        super().__init__(a, b)


class Not(PrimExpr):
    __slots__ = ("a",)
    a: PrimExpr
    _fields = ("a",)

    def __init__(self, a: PrimExpr):
        a = _as_bool(a)
        self._init(dtype=a.dtype, a=a)


def _as_bool(e: Any) -> PrimExpr:
    e = convert(e)
    if dt.parse(e.dtype).kind != "bool":
        raise TypeError(f"logical operation needs bool operands, got {e.dtype}: {e}")
    return e


class Select(PrimExpr):
    """``condition ? true_value : false_value``; both sides may be evaluated."""

    __slots__ = ("condition", "true_value", "false_value")
    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    _fields = ("condition", "true_value", "false_value")

    def __init__(self, condition: PrimExpr, true_value: PrimExpr, false_value: PrimExpr):
        condition = _as_bool(condition)
        true_value, false_value = binary_match(true_value, false_value)
        self._init(dtype=true_value.dtype, condition=condition, true_value=true_value, false_value=false_value)


# ---------------------------------------------------------------------------------------------
# vectors
class Ramp(PrimExpr):
    """The vector ``[base, base+stride, ..., base+(lanes-1)*stride]``."""

    __slots__ = ("base", "stride", "lanes")
    base: PrimExpr
    stride: PrimExpr
    lanes: int
    _fields = ("base", "stride")

    def __init__(self, base: PrimExpr | int, stride: PrimExpr | int, lanes: int):
        b: PrimExpr = convert(base)
        if dt.lanes_of(b.dtype) != 1:
            raise TypeError("Ramp base must be scalar")
        b, s = binary_match(b, convert(stride))
        self._init(dtype=dt.with_lanes(b.dtype, int(lanes)), base=b, stride=s, lanes=int(lanes))


class Broadcast(PrimExpr):
    __slots__ = ("value", "lanes")
    value: PrimExpr
    lanes: int
    _fields = ("value",)

    def __init__(self, value: PrimExpr | float, lanes: int):
        v: PrimExpr = convert(value)
        if dt.lanes_of(v.dtype) != 1:
            raise TypeError("Broadcast value must be scalar")
        self._init(dtype=dt.with_lanes(v.dtype, int(lanes)), value=v, lanes=int(lanes))


class Shuffle(PrimExpr):
    """Concatenate ``vectors`` and pick lanes by ``indices``."""

    __slots__ = ("vectors", "indices")
    vectors: tuple[PrimExpr, ...]
    indices: tuple[PrimExpr, ...]
    _fields = ("vectors", "indices")

    def __init__(self, vectors: Sequence[PrimExpr], indices: Sequence[PrimExpr]):
        vectors = tuple(convert(v) for v in vectors)
        indices = tuple(convert(i) for i in indices)
        self._init(dtype=dt.with_lanes(dt.element_of(vectors[0].dtype), len(indices)), vectors=vectors, indices=indices)


class Let(PrimExpr):
    __slots__ = ("var", "value", "body")
    var: Var
    value: PrimExpr
    body: PrimExpr
    _fields = ("var", "value", "body")
    _def_fields = ("var",)

    def __init__(self, var: Var, value: PrimExpr, body: PrimExpr):
        body = convert(body)
        self._init(dtype=body.dtype, var=var, value=convert(value), body=body)


class Call(PrimExpr):
    """A call of an intrinsic (``"exp"``, ``"if_then_else"``, ``"popcount"`` ...), or of an
    external function: ``op == "call_extern"`` with the function's name as ``args[0]`` (a StringImm).
    ``op`` is an :class:`tvmpy.ir.op.Op`: it equals its short name string (``call.op == "exp"``)
    and has TVM's full name as ``call.op.name`` ("tir.exp"). The intrinsic table with semantics
    lives in :mod:`tvmpy.tir.op`."""

    __slots__ = ("op", "args")
    op: Op
    args: tuple[PrimExpr, ...]
    _fields = ("args",)

    def __init__(self, dtype: str, op: str, args: Sequence[Any]):
        dt.parse(dtype)
        if not isinstance(op, str):
            raise TypeError(f"tir.Call: op must be an operator name or tvm.ir.Op, got {op!r}")
        self._init(dtype=dtype, op=_intern_op(op), args=tuple(convert(a) for a in args))


class BufferLoad(PrimExpr):
    """``buffer[indices]``. After flattening ``indices`` has one entry; a Ramp index loads a vector."""

    __slots__ = ("buffer", "indices", "predicate")
    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    predicate: PrimExpr | None
    _fields = ("indices", "predicate")

    def __init__(self, buffer: Buffer, indices: Sequence[Any], predicate: PrimExpr | None = None):
        indices = tuple(convert(i) for i in indices)
        lanes = max((dt.lanes_of(i.dtype) for i in indices), default=1)
        elem = buffer.dtype
        dtype = dt.with_lanes(dt.element_of(elem), dt.lanes_of(elem) * lanes)
        self._init(dtype=dtype, buffer=buffer, indices=indices, predicate=predicate)


class ProducerLoad(PrimExpr):
    """``tensor[indices]`` on a te.Tensor: a read of another stage, before lowering."""

    __slots__ = ("producer", "indices")
    producer: Any  # a te.Tensor (te sits above tir: no import here)
    indices: tuple[PrimExpr, ...]
    _fields = ("indices",)

    def __init__(self, producer: Any, indices: Sequence[Any]):  # a te.Tensor
        self._init(dtype=producer.dtype, producer=producer, indices=tuple(convert(i) for i in indices))


# ---------------------------------------------------------------------------------------------
class Range(Node):
    """The half-open interval ``[min, min + extent)``."""

    __slots__ = ("min", "extent")
    min: PrimExpr
    extent: PrimExpr
    _fields = ("min", "extent")

    def __init__(self, begin: Any, end: Any = None):
        """``Range(extent)`` or ``Range(begin, end)`` (TVM convention: end, not extent)."""
        if end is None:
            begin, end = 0, begin
        begin, end = convert(begin), convert(end)
        begin, end = binary_match(begin, end)
        if _is_zero(begin):
            extent = end
        elif isinstance(begin, IntImm) and isinstance(end, IntImm):
            extent = IntImm(end.dtype, end.value - begin.value)
        else:
            extent = _binary(Sub, end, begin)
        self._init(min=begin, extent=extent)

    @staticmethod
    def from_min_extent(min_value: Any, extent: Any) -> Range:
        r = object.__new__(Range)
        min_value, extent = binary_match(convert(min_value), convert(extent))
        r._init(min=min_value, extent=extent)
        return r


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


class IterVar(Node):
    """A loop variable with its domain, kind, and an optional thread tag.

    iter_type: DataPar (spatial), CommReduce (reduction), ThreadIndex (bound to a thread axis),
    Ordered, Opaque, and the annotation kinds used by schedules.
    """

    __slots__ = ("dom", "var", "iter_type", "thread_tag")
    dom: Range | None
    var: Var
    iter_type: int
    thread_tag: str
    _fields = ("dom", "var")
    _def_fields = ("var",)

    DataPar = 0
    ThreadIndex = 1
    CommReduce = 2
    Ordered = 3
    Opaque = 4
    Unrolled = 5
    Vectorized = 6
    Parallelized = 7
    Tensorized = 8

    _TYPE_NAMES = {0: "DataPar", 1: "ThreadIndex", 2: "CommReduce", 3: "Ordered", 4: "Opaque",
                   5: "Unrolled", 6: "Vectorized", 7: "Parallelized", 8: "Tensorized"}

    def __init__(self, dom: Range | None, var: Var | str, iter_type: int, thread_tag: str = ""):
        if isinstance(var, str):
            var = Var(var, dom.extent.dtype if dom is not None else "int32")
        self._init(dom=dom, var=var, iter_type=int(iter_type), thread_tag=thread_tag)

    # IterVar is usable where an expression is expected (te lambdas get IterVars' vars; users
    # also write arithmetic on axes directly, e.g. ``A[k.var]`` or ``A[k]``)
    def _as_expr(self) -> Var:
        return self.var

    @property
    def dtype(self) -> str:
        return self.var.dtype

    @property
    def known_dom(self) -> Range:
        """``dom``, which every axis of a compute has (split and fuse leaves and unbounded
        thread axes have none: bound inference gives them their ranges)."""
        if self.dom is None:
            raise ValueError(f"iteration variable {self.var.name} has no domain")
        return self.dom

    def __add__(self, o):
        return self.var + o

    def __radd__(self, o):
        return o + self.var

    def __sub__(self, o):
        return self.var - o

    def __rsub__(self, o):
        return o - self.var

    def __mul__(self, o):
        return self.var * o

    def __rmul__(self, o):
        return o * self.var

    def __floordiv__(self, o):
        return self.var // o

    def __mod__(self, o):
        return self.var % o

    def __truediv__(self, o):
        return self.var / o

    def __neg__(self):
        return -self.var

    def __lt__(self, o):
        return self.var < o

    def __le__(self, o):
        return self.var <= o

    def __gt__(self, o):
        return self.var > o

    def __ge__(self, o):
        return self.var >= o

    __hash__ = Node.__hash__


# ---------------------------------------------------------------------------------------------
# construction helpers
def const(value: Any, dtype: str | None = None) -> PrimExpr:
    """A constant of ``dtype`` (default: int32 / float32 / bool from the Python type)."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            import numpy as np

            if isinstance(value, np.generic):
                return const(value.item(), str(value.dtype))
            raise TypeError(f"cannot make a constant from {value!r}")
    d = dt.parse(dtype)
    if d.lanes > 1:
        return Broadcast(const(value, dt.element_of(dtype)), d.lanes)
    if d.kind == "float" or dt.is_low_float(dtype):
        return FloatImm(dtype, float(value))
    if d.kind in ("int", "uint", "bool"):
        if isinstance(value, float) and not value.is_integer():
            raise TypeError(f"cannot make a {dtype} constant from non-integer {value!r}")
        return IntImm(dtype, int(value))
    raise TypeError(f"cannot make a constant of dtype {dtype}")


def convert(value: Any) -> Any:
    """Turn Python numbers (and IterVars) into expressions; leave expressions and others alone."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, (bool, int, float)):
        return const(value)
    if isinstance(value, str):
        return StringImm(value)
    t = type(value).__module__
    if t == "numpy":
        return const(value)
    as_expr = getattr(value, "_as_expr", None)
    if as_expr is not None:
        return as_expr()
    return value


def cast(value: Any, dtype: str) -> PrimExpr:
    value = convert(value)
    if value.dtype == dtype:
        return value
    lanes = dt.lanes_of(value.dtype)
    if lanes > 1 and dt.lanes_of(dtype) == 1:
        dtype = dt.with_lanes(dtype, lanes)
    if isinstance(value, (IntImm, FloatImm)) and dt.lanes_of(dtype) == 1:
        d = dt.parse(dtype)
        if d.kind == "float":
            return FloatImm(dtype, float(value.value))
        if d.kind == "bool":
            return IntImm(dtype, bool(value.value))
        if d.kind in ("int", "uint"):
            v = int(value.value)  # truncates toward zero
            bits = d.bits
            v &= (1 << bits) - 1
            if d.kind == "int" and v >= 1 << (bits - 1):
                v -= 1 << bits
            return IntImm(dtype, v)
    return Cast(dtype, value)


def _promote(da: str, db: str) -> str:
    """Common dtype of two scalar dtypes (TVM's rules: widen ints, int->float, float widen)."""
    a, b = dt.parse(da), dt.parse(db)
    if a.kind == b.kind:
        return da if a.bits >= b.bits else db
    if a.kind == "float":
        return da
    if b.kind == "float":
        return db
    if a.kind == "bool":
        return db
    if b.kind == "bool":
        return da
    # int vs uint: the wider; on a tie, signed
    if a.bits != b.bits:
        return da if a.bits > b.bits else db
    return da if a.kind == "int" else db


def binary_match(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    """Bring two operands to one dtype: Python scalars take the other side's dtype; expressions
    are promoted by TVM's rules; a scalar meets a vector by broadcasting."""
    a_py = not isinstance(a, (PrimExpr, IterVar))
    b_py = not isinstance(b, (PrimExpr, IterVar))
    if a_py and b_py:
        return convert(a), convert(b)
    if a_py:
        b = convert(b)
        a = _const_like(a, b.dtype)
    elif b_py:
        a = convert(a)
        b = _const_like(b, a.dtype)
    else:
        a, b = convert(a), convert(b)
    if a.dtype == b.dtype:
        return a, b
    la, lb = dt.lanes_of(a.dtype), dt.lanes_of(b.dtype)
    ea, eb = dt.element_of(a.dtype), dt.element_of(b.dtype)
    if ea != eb:
        target = _promote(ea, eb)
        a = cast(a, dt.with_lanes(target, la))
        b = cast(b, dt.with_lanes(target, lb))
    if la != lb:
        if la == 1:
            a = Broadcast(a, lb)
        elif lb == 1:
            b = Broadcast(b, la)
        else:
            raise TypeError(f"vector lanes differ: {a.dtype} vs {b.dtype}")
    return a, b


def _comparable(value: Any) -> bool:
    """Whether ``expr == value`` builds an EQ node (numbers and expressions) rather than
    comparing identities (tensors, None, strings and other Python objects)."""
    return isinstance(value, (PrimExpr, IterVar, bool, int, float)) or type(value).__module__ == "numpy"


def _const_like(value: Any, dtype: str) -> PrimExpr:
    if isinstance(value, str):
        raise TypeError(f"cannot use string {value!r} in arithmetic")
    elem = dt.element_of(dtype)
    d = dt.parse(elem)
    if isinstance(value, float) and d.kind != "float":
        if value.is_integer():
            c = const(value, elem)
        else:
            c = const(value)  # float32; promotion will cast the integer side
            return c if dt.lanes_of(dtype) == 1 else Broadcast(c, dt.lanes_of(dtype))
    elif isinstance(value, bool) and d.kind != "bool":
        c = const(int(value), elem)
    else:
        try:
            c = const(value, elem) if not isinstance(value, bool) or d.kind == "bool" else const(value)
        except TypeError:
            c = convert(value)
    if not isinstance(c, PrimExpr):
        hint = " (index a tensor to read an element: A[i])" if hasattr(value, "op") else ""
        raise TypeError(f"cannot use {type(value).__name__} {value!r} in arithmetic: expected a number "
                        f"or an expression{hint}")
    if dt.lanes_of(dtype) > 1:
        return Broadcast(c, dt.lanes_of(dtype))
    return c


def _binary(cls, a: Any, b: Any) -> PrimExpr:
    a, b = binary_match(a, b)
    if cls in (And, Or):
        return cls(a, b)
    if dt.is_bool(a.dtype) and cls in (Add, Sub, Mul, Div, FloorDiv, FloorMod, Mod, Min, Max):
        a, b = cast(a, "int32"), cast(b, "int32")
    if cls is Div and dt.is_integer(a.dtype) and isinstance(b, IntImm) and b.value == 0:
        raise ZeroDivisionError(f"division by constant zero: {a} / 0")
    if cls in (FloorDiv, FloorMod, Mod) and isinstance(b, IntImm) and b.value == 0:
        raise ZeroDivisionError(f"division by constant zero: {a} {cls.symbol} 0")
    return cls(a, b)


def is_const_int(e: Any, value: int | None = None) -> bool:
    if isinstance(e, int) and not isinstance(e, bool):
        return value is None or e == value
    if isinstance(e, IntImm):
        return value is None or e.value == value
    return False


def const_value(e: Any) -> int | float | bool | None:
    """The Python value of a constant expression, else None."""
    if isinstance(e, (int, float)):
        return e
    if isinstance(e, (IntImm, FloatImm)):
        return e.value
    if isinstance(e, Broadcast):
        return const_value(e.value)
    return None
