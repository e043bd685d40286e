"""Fuzzer operator specs: elementwise operators: unary (with their domains), binary with broadcasting, comparisons, logic, casts."""

from __future__ import annotations

import numpy as np

from ._common import (
    ANY,
    F32,
    FLOAT,
    INT,
    NUM,
    Builder,
    Plan,
    _apart,
    _away,
    _domain_operand,
    _nonzero,
    _not_near_half,
    _not_near_int,
    _positive,
    spec,
)

_UNARY_ANY = ["Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Sin", "Cos", "Atan", "Asinh",
              "Sinh", "Cosh", "Erf", "Softplus", "Softsign", "Elu", "Selu", "Celu",
              "LeakyRelu", "HardSigmoid", "HardSwish", "Identity", "Mish"]
_UNARY_F16 = {"Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Identity", "LeakyRelu",
              "Softplus", "Elu", "HardSigmoid"}


@spec(*_UNARY_ANY)
def unary(b: Builder, op: str) -> Plan | None:
    dts = FLOAT if op in _UNARY_F16 else F32
    if op in ("Abs", "Neg", "Relu", "Identity"):
        dts = ("float32", "float16", "int32", "int64") if op != "Relu" else FLOAT
    x = b.pick(dts)
    if x is None:
        return None
    attrs = {}
    if op in ("Elu", "Celu", "LeakyRelu") and b.chance(0.6):
        attrs["alpha"] = float(b.choose((0.01, 0.1, 0.5, 1.3)))
    if op == "Selu" and b.chance(0.5):
        attrs.update(alpha=1.5, gamma=1.1)
    if op == "HardSigmoid" and b.chance(0.6):
        attrs.update(alpha=float(b.choose((0.1, 0.3))), beta=float(b.choose((0.3, 0.6))))
    return Plan(op, [x], attrs)


@spec("ThresholdedRelu", "Shrink")
def kinked(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32)
    if x is None:
        return None
    if op == "ThresholdedRelu":
        alpha = float(b.choose((0.0, 0.5, 1.0)))
        return Plan(op, [x], {"alpha": alpha},
                    check=lambda i, o: _away(i[0], lambda v: np.full_like(v, alpha)))
    lambd, bias = float(b.choose((0.5, 1.0))), float(b.choose((0.0, 0.3)))
    return Plan(op, [x], {"lambd": lambd, "bias": bias},
                check=lambda i, o: _away(i[0], lambda v: np.where(v > 0, lambd, -lambd)))


@spec("Floor", "Ceil", "Round", "Sign")
def rounding(b: Builder, op: str) -> Plan | None:
    x = b.pick(FLOAT)
    if x is None:
        return None
    chk = {"Floor": _not_near_int, "Ceil": _not_near_int, "Round": _not_near_half,
           "Sign": lambda v: _away(v, np.zeros_like)}[op]
    return Plan(op, [x], check=lambda i, o: chk(i[0]))


_DOMAIN = {  # op: (predicate on the input, low, high of a fresh operand, check)
    "Log": (_positive, 0.1, 4.0),
    "Sqrt": (_positive, 0.1, 4.0),
    "Reciprocal": (_nonzero, 0.2, 3.0),
    "Acos": (lambda v: v.size > 0 and float(np.abs(v).max()) < 0.95, -0.9, 0.9),
    "Asin": (lambda v: v.size > 0 and float(np.abs(v).max()) < 0.95, -0.9, 0.9),
    "Atanh": (lambda v: v.size > 0 and float(np.abs(v).max()) < 0.9, -0.85, 0.85),
    "Acosh": (lambda v: v.size > 0 and float(v.min()) > 1.05, 1.1, 4.0),
    "Tan": (lambda v: v.size > 0 and float(np.abs(np.cos(v.astype(np.float64))).min()) > 0.1,
            -1.2, 1.2),
}


@spec(*_DOMAIN)
def domain_unary(b: Builder, op: str) -> Plan | None:
    pred, low, high = _DOMAIN[op]
    dts = FLOAT if op in ("Log", "Sqrt", "Reciprocal") else F32
    x = _domain_operand(b, dts, pred, low, high)
    if x is None:
        return None
    return Plan(op, [x], check=lambda i, o: bool(pred(np.asarray(i[0]))))


@spec("Add", "Sub", "Mul", "Max", "Min")
def binary(b: Builder, op: str) -> Plan | None:
    a = b.pick(NUM)
    if a is None:
        return None
    low, high = (-3.0, 3.0) if b.dtype(a).kind == "f" else (-20, 20)
    other = b.broadcast_partner(a, low, high)
    ins = [a, other] if b.chance(0.5) else [other, a]
    return Plan(op, ins)


@spec("Div")
def div(b: Builder, op: str) -> Plan | None:
    a = b.pick(NUM)
    if a is None:
        return None
    if b.dtype(a).kind == "f":
        d = b.broadcast_partner(a, 0.3, 3.0, pred=_nonzero)
        if b.chance(0.5):  # negative denominators too
            d = b.leaf(b.shape(d), b.dtype(a), -3.0, -0.3)
        return Plan(op, [a, d], check=lambda i, o: _nonzero(np.asarray(i[1])))
    d = b.broadcast_partner(a, 1, 9, pred=lambda v: bool((v != 0).all()))
    return Plan(op, [a, d], check=lambda i, o: bool((np.asarray(i[1]) != 0).all()))


@spec("Mod")
def mod(b: Builder, op: str) -> Plan | None:
    a = b.pick(NUM)
    if a is None:
        return None
    if b.dtype(a).kind == "f":
        d = b.broadcast_partner(a, 0.7, 2.5, pred=_nonzero)

        def chk(i, o):
            q = np.asarray(i[0], np.float64) / np.asarray(i[1], np.float64)
            return _not_near_int(q.astype(np.asarray(i[0]).dtype)) and _nonzero(np.asarray(i[1]))
        return Plan(op, [a, d], {"fmod": 1}, check=chk)
    d = b.broadcast_partner(a, 1, 7, pred=lambda v: bool((v != 0).all()))
    return Plan(op, [a, d], {"fmod": int(b.chance(0.5))},
                check=lambda i, o: bool((np.asarray(i[1]) != 0).all()))


@spec("Pow")
def power(b: Builder, op: str) -> Plan | None:
    base = _domain_operand(b, F32, _positive, 0.2, 3.0)
    if base is None:
        return None
    if b.chance(0.5):
        e = b.const(np.asarray(b.choose((2.0, 3.0, 0.5, -1.0, 1.5)), np.float32))
    else:
        e = b.broadcast_partner(base, -2.0, 2.0)
        if b.dtype(e) != b.dtype(base):
            return None
    return Plan(op, [base, e], check=lambda i, o: _positive(np.asarray(i[0])))


@spec("PRelu")
def prelu(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    slope_shape = (shape[1],) + (1,) * (len(shape) - 2) if len(shape) >= 2 and b.chance(0.6) \
        else shape[-1:]
    slope = b.leaf(slope_shape, "float32", -0.5, 0.5, feed=False)
    return Plan(op, [x, slope])


@spec("Sum", "Mean")
def variadic(b: Builder, op: str) -> Plan | None:
    a = b.pick(FLOAT)
    if a is None:
        return None
    others = [b.broadcast_partner(a) for _ in range(int(b.rng.integers(0, 3)))]
    return Plan(op, [a, *others])


@spec("Clip")
def clip(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM)
    if x is None:
        return None
    dt = b.dtype(x)
    lo = b.const(np.asarray(b.choose((-1, 0, -2)), dt)) if b.chance(0.8) else ""
    hi = b.const(np.asarray(b.choose((1, 2, 6)), dt)) if b.chance(0.8) else ""
    ins = [x, lo, hi]
    while ins[-1] == "":
        ins.pop()
    return Plan(op, ins)


@spec("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
def compare(b: Builder, op: str) -> Plan | None:
    a = b.pick(NUM if op != "Equal" else ("int32", "int64", "bool"))
    if a is None:
        return None
    low, high = (-3.0, 3.0) if b.dtype(a).kind == "f" else (-3, 4)
    other = b.broadcast_partner(a, low, high)
    return Plan(op, [a, other], check=lambda i, o: _apart(i[0], i[1]))


@spec("And", "Or", "Xor")
def logical(b: Builder, op: str) -> Plan | None:
    a = b.pick(("bool",))
    if a is None:
        return None
    return Plan(op, [a, b.broadcast_partner(a)])


@spec("Not")
def logical_not(b: Builder, op: str) -> Plan | None:
    a = b.pick(("bool",))
    return None if a is None else Plan(op, [a])


@spec("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")
def bitwise(b: Builder, op: str) -> Plan | None:
    a = b.pick(INT)
    if a is None:
        return None
    if op == "BitwiseNot":
        return Plan(op, [a])
    return Plan(op, [a, b.broadcast_partner(a, -50, 50)])


@spec("Where")
def where(b: Builder, op: str) -> Plan | None:
    c = b.pick(("bool",))
    x = b.pick(NUM)
    if x is None:
        return None
    if c is None:
        c = b.leaf([d if b.chance(0.7) else 1 for d in b.shape(x)], "bool")
    y = b.broadcast_partner(x)
    try:
        np.broadcast_shapes(b.shape(c), b.shape(x), b.shape(y))
    except ValueError:
        return None
    return Plan(op, [c, x, y])


@spec("IsNaN", "IsInf")
def is_special(b: Builder, op: str) -> Plan | None:
    x = b.pick(FLOAT)
    return None if x is None else Plan(op, [x])


@spec("Cast", "CastLike")
def cast(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY)
    if x is None:
        return None
    src = b.dtype(x)
    to = np.dtype(b.choose(("float32", "float16", "int32", "int64", "bool")))
    if to == src:
        to = np.dtype("float32") if src != np.float32 else np.dtype("int64")

    def chk(i, o):
        v = np.asarray(i[0])
        if v.dtype.kind == "f" and to.kind in "iu":
            return _not_near_int(v)
        if v.dtype.kind == "f" and to == np.bool_:
            return _away(v, np.zeros_like)
        if v.dtype.kind in "iu" and to == np.float16:
            return bool(np.abs(v).max(initial=0) <= 2048)
        return True
    if op == "Cast":
        from onnx import helper

        return Plan(op, [x], {"to": helper.np_dtype_to_tensor_dtype(to)}, check=chk)
    like = b.const(np.zeros((1,), to))
    return Plan(op, [x, like], check=chk)
