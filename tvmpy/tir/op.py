"""Operators and intrinsics that are functions rather than Python operators.

Intrinsics are ``Call(dtype, name, args)`` nodes. ``FLOAT_UNARY`` etc. list them by kind so the
interpreter, constant folder and code generators share one table.
"""

from __future__ import annotations

import enum
from typing import Any

from ..ir import dtype as dt
from ..ir import op as _irop
from .expr import (
    And,
    Call,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Not,
    Or,
    PrimExpr,
    Select,
    _binary,
    binary_match,
    cast,
    const,
    convert,
)

__all__ = [
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid",
    "erf", "pow", "power", "abs", "fabs", "floor", "ceil", "round", "trunc", "nearbyint", "fmod",
    "isnan", "isinf", "isfinite", "popcount", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos",
    "atan", "atan2", "min", "max", "floordiv", "floormod", "truncdiv", "truncmod", "div", "indexdiv",
    "indexmod", "if_then_else", "likely", "all", "any", "min_value", "max_value", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right", "call_extern",
    "call_pure_extern", "call_intrin", "call_llvm_intrin", "call_llvm_pure_intrin", "reinterpret", "cast", "const", "Select", "Not",
    "FLOAT_UNARY", "FLOAT_BINARY", "INT_UNARY", "INT_BINARY", "INTRINSICS", "CallEffectKind",
]

# name -> numpy function name; float math that works lane-wise on float dtypes
FLOAT_UNARY = {
    "exp": "exp", "exp2": "exp2", "exp10": None, "log": "log", "log2": "log2", "log10": "log10",
    "log1p": "log1p", "sqrt": "sqrt", "rsqrt": None, "tanh": "tanh", "sigmoid": None, "erf": None,
    "fabs": "abs", "floor": "floor", "ceil": "ceil", "round": "rint", "nearbyint": "rint",
    "trunc": "trunc", "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan",
}
FLOAT_BINARY = {"pow": "power", "fmod": "fmod", "atan2": "arctan2"}
# predicates on floats returning bool
FLOAT_PREDICATE = {"isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite"}
INT_UNARY = {"popcount": None, "bitwise_not": "invert"}
INT_BINARY = {"bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
              "shift_left": "left_shift", "shift_right": "right_shift"}
INTRINSICS = {**FLOAT_UNARY, **FLOAT_BINARY, **FLOAT_PREDICATE, **INT_UNARY, **INT_BINARY,
              "if_then_else": None, "likely": None, "call_extern": None, "call_pure_extern": None,
              "tvm_access_ptr": None, "type_annotation": None, "reinterpret": None, "address_of": None,
              "abs": None, "call_llvm_intrin": None, "call_llvm_pure_intrin": None,
              "prefetch": None,
              # tensor cores (TVM's wmma intrinsics; CUDA only, see topi/cuda/tensor_intrin.py)
              "tvm_fill_fragment": None, "tvm_load_matrix_sync": None, "tvm_mma_sync": None,
              "tvm_store_matrix_sync": None}


class CallEffectKind(enum.IntEnum):
    """TVM's ``tir.CallEffectKind`` (same values): the ``"TCallEffectKind"`` attribute of an
    operator, which says what a call of it may do besides computing its value."""

    ExprAnnotation = 0
    Pure = 1
    ReadState = 2
    UpdateState = 3
    Opaque = 4
    SpecialCallArg = 5
    Embedded = 6
    ControlJump = 7


# the built-in intrinsics are the known loop-IR operators (``tvm.ir.Op.get("tir.exp")``); the
# math ones are pure (registered at level 1: a user's level-10 registration replaces it)
_irop.declare_ops(INTRINSICS)
for _name in (*FLOAT_UNARY, *FLOAT_BINARY, *FLOAT_PREDICATE, *INT_UNARY, *INT_BINARY):
    _irop.register_op_attr("tir." + _name, "TCallEffectKind", CallEffectKind.Pure, level=1)


def _float_arg(x: Any, name: str) -> PrimExpr:
    x = convert(x)
    if not (dt.is_float(x.dtype) or dt.is_low_float(x.dtype)):  # bfloat16/float8: legalized
        if dt.is_integer(x.dtype):
            x = cast(x, dt.with_lanes("float32", dt.lanes_of(x.dtype)))
        else:
            raise TypeError(f"{name} needs a float argument, got {x.dtype}")
    return x


def _unary(name: str):
    def f(x: Any) -> PrimExpr:
        x = _float_arg(x, name)
        return Call(x.dtype, name, [x])

    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}`` of a float expression."
    return f


exp = _unary("exp")
exp2 = _unary("exp2")
exp10 = _unary("exp10")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
fabs = _unary("fabs")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001 - TVM's name; rounds half to even
nearbyint = _unary("nearbyint")
trunc = _unary("trunc")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
sinh = _unary("sinh")
cosh = _unary("cosh")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")


def _fbinary(name: str):
    def f(x: Any, y: Any) -> PrimExpr:
        x, y = binary_match(x, y)
        x, y = _float_arg(x, name), _float_arg(y, name)
        x, y = binary_match(x, y)
        return Call(x.dtype, name, [x, y])

    f.__name__ = name
    return f


pow = _fbinary("pow")  # noqa: A001
power = pow
fmod = _fbinary("fmod")
atan2 = _fbinary("atan2")


def _fpred(name: str):
    def f(x: Any) -> PrimExpr:
        x = convert(x)
        out = dt.with_lanes("bool", dt.lanes_of(x.dtype))
        if not dt.is_float(x.dtype):
            return const(name == "isfinite", out)
        return Call(out, name, [x])

    f.__name__ = name
    return f


isnan = _fpred("isnan")
isinf = _fpred("isinf")
isfinite = _fpred("isfinite")


def abs(x: Any) -> PrimExpr:  # noqa: A001
    x = convert(x)
    if dt.is_float(x.dtype):
        return Call(x.dtype, "fabs", [x])
    if dt.is_uint(x.dtype) or dt.is_bool(x.dtype):
        return x
    if isinstance(x, IntImm):
        return const(-x.value if x.value < 0 else x.value, x.dtype)
    return Select(x >= 0, x, -x)


def popcount(x: Any) -> PrimExpr:
    x = convert(x)
    if not dt.is_integer(x.dtype):
        raise TypeError(f"popcount needs an integer argument, got {x.dtype}")
    return Call(x.dtype, "popcount", [x])


def _ibinary(name: str):
    def f(x: Any, y: Any) -> PrimExpr:
        x, y = binary_match(x, y)
        if not dt.is_integer(x.dtype):
            raise TypeError(f"{name} needs integer operands, got {x.dtype}")
        return Call(x.dtype, name, [x, y])

    f.__name__ = name
    return f


bitwise_and = _ibinary("bitwise_and")
bitwise_or = _ibinary("bitwise_or")
bitwise_xor = _ibinary("bitwise_xor")
shift_left = _ibinary("shift_left")
shift_right = _ibinary("shift_right")


def bitwise_not(x: Any) -> PrimExpr:
    x = convert(x)
    if not dt.is_integer(x.dtype):
        raise TypeError(f"bitwise_not needs an integer operand, got {x.dtype}")
    return Call(x.dtype, "bitwise_not", [x])


def min(a: Any, b: Any, *rest: Any) -> PrimExpr:  # noqa: A001
    out = _binary(Min, a, b)
    for r in rest:
        out = _binary(Min, out, r)
    return out


def max(a: Any, b: Any, *rest: Any) -> PrimExpr:  # noqa: A001
    out = _binary(Max, a, b)
    for r in rest:
        out = _binary(Max, out, r)
    return out


def floordiv(a: Any, b: Any) -> PrimExpr:
    return _binary(FloorDiv, a, b)


def floormod(a: Any, b: Any) -> PrimExpr:
    return _binary(FloorMod, a, b)


def truncdiv(a: Any, b: Any) -> PrimExpr:
    a, b = binary_match(a, b)
    if not dt.is_integer(a.dtype):
        raise TypeError("truncdiv needs integer operands")
    return _binary(Div, a, b)


def truncmod(a: Any, b: Any) -> PrimExpr:
    return _binary(Mod, a, b)


def div(a: Any, b: Any) -> PrimExpr:
    return _binary(Div, a, b)


indexdiv = floordiv
indexmod = floormod


def if_then_else(cond: Any, t: Any, f: Any) -> PrimExpr:
    """Conditional that evaluates only the chosen branch (safe for guarded loads)."""
    cond = convert(cond)
    if isinstance(cond, IntImm):
        return convert(t) if cond.value else convert(f)
    t, f = binary_match(t, f)
    if not dt.is_bool(cond.dtype):
        raise TypeError(f"if_then_else condition must be bool, got {cond.dtype}")
    return Call(t.dtype, "if_then_else", [cond, t, f])


def likely(cond: Any) -> PrimExpr:
    cond = convert(cond)
    return Call(cond.dtype, "likely", [cond])


def all(*conds: Any) -> PrimExpr:  # noqa: A001
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    if not conds:
        return const(True)
    out = convert(conds[0])
    for c in conds[1:]:
        out = And(out, convert(c))
    return out


def any(*conds: Any) -> PrimExpr:  # noqa: A001
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    if not conds:
        return const(False)
    out = convert(conds[0])
    for c in conds[1:]:
        out = Or(out, convert(c))
    return out


def _low_float_limit(dtype: str) -> float:
    """inf where the storage-only float has one (bfloat16, float8_e5m2), else its largest."""
    from .low_precision import max_finite

    return float("inf") if dt.element_of(dtype) in ("bfloat16", "float8_e5m2") else \
        max_finite(dtype)


def min_value(dtype: str) -> PrimExpr:
    d = dt.parse(dtype)
    if d.kind == "float":
        return FloatImm(dtype, float("-inf"))
    if dt.is_low_float(dtype):
        return FloatImm(dtype, -_low_float_limit(dtype))
    if d.kind == "int":
        return IntImm(dtype, -(1 << (d.bits - 1)))
    return IntImm(dtype, 0)


def max_value(dtype: str) -> PrimExpr:
    d = dt.parse(dtype)
    if d.kind == "float":
        return FloatImm(dtype, float("inf"))
    if dt.is_low_float(dtype):
        return FloatImm(dtype, _low_float_limit(dtype))
    if d.kind == "int":
        return IntImm(dtype, (1 << (d.bits - 1)) - 1)
    if d.kind == "bool":
        return IntImm(dtype, 1)
    return IntImm(dtype, (1 << d.bits) - 1)


def call_extern(dtype: str, func_name: str, *args: Any) -> PrimExpr:
    """Call an external C function by symbol name (linked into the module or the process)."""
    return Call(dtype, "call_extern", [func_name, *args])


def call_pure_extern(dtype: str, func_name: str, *args: Any) -> PrimExpr:
    return Call(dtype, "call_pure_extern", [func_name, *args])


def call_intrin(dtype: str, name: Any, *args: Any) -> PrimExpr:
    """Call intrinsic ``name`` ("exp", TVM's op name "tir.exp", a ``tvm.ir.Op``, or a custom
    intrinsic declared with ``tvm.ir.register_op_attr("tir.<name>", ...)``; a custom one needs a
    lowering rule, ``tvm.ir.register_intrin_lowering``, for each target it is built for)."""
    if not isinstance(name, str):
        raise TypeError(f"call_intrin: the intrinsic must be a name or tvm.ir.Op, got {name!r}")
    key = _irop.op_key(name)
    if key not in INTRINSICS and not _irop.is_registered(key):
        raise ValueError(f"unknown intrinsic {name!r}; declare a custom one with "
                         f"tvm.ir.register_op_attr({name!r}, 'TCallEffectKind', "
                         f"tvm.tir.CallEffectKind.Pure); known: {', '.join(sorted(INTRINSICS))}")
    return Call(dtype, key, list(args))


def call_llvm_intrin(dtype: str, name: str, *args: Any) -> PrimExpr:
    """Call the LLVM intrinsic ``name`` (e.g. ``"llvm.x86.avx512.vpdpbusd.512"``) with ``args``
    as they are (vectors included; LLVM codegen only). TVM's ``tir.call_llvm_intrin`` without the
    signature-count argument: the intrinsic is declared from the argument and result types."""
    if not isinstance(name, str) or not name.startswith("llvm."):
        raise ValueError(f"call_llvm_intrin: {name!r} is not an LLVM intrinsic name (llvm.*)")
    return Call(dtype, "call_llvm_intrin", [name, *args])


def call_llvm_pure_intrin(dtype: str, name: str, *args: Any) -> PrimExpr:
    """:func:`call_llvm_intrin` of an intrinsic without side effects."""
    if not isinstance(name, str) or not name.startswith("llvm."):
        raise ValueError(f"call_llvm_pure_intrin: {name!r} is not an LLVM intrinsic name (llvm.*)")
    return Call(dtype, "call_llvm_pure_intrin", [name, *args])


def reinterpret(dtype: str, value: Any) -> PrimExpr:
    value = convert(value)
    return Call(dtype, "reinterpret", [value])
