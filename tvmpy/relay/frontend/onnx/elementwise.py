"""Elementwise ONNX operators: math, comparisons, logic and bitwise ops, casts, Clip, Where and
the identities at inference (Identity, Dropout)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from .context import ImportContext, dtype_of, np_dtype, scalar_like, shape_of
from .dyn_args import runtime_input
from .low_precision import cast_to
from .registry import Attrs, Converter, Inputs, Names, Output, converter, register


def _unary(fn: Callable[[RelayExpr], RelayExpr]) -> Converter:
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        return fn(inputs[0])
    return convert


def _binary(fn: Callable[[RelayExpr, RelayExpr], RelayExpr]) -> Converter:
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        return fn(inputs[0], inputs[1])
    return convert


for _op_type, _fn in [
        ("Sqrt", tensor.sqrt), ("Exp", tensor.exp), ("Log", tensor.log), ("Neg", tensor.negative),
        ("Abs", tensor.abs), ("Erf", tensor.erf), ("Tanh", tensor.tanh),
        ("Sigmoid", tensor.sigmoid), ("Relu", nn.relu), ("Floor", tensor.floor),
        ("Ceil", tensor.ceil), ("Sin", tensor.sin), ("Cos", tensor.cos),
        ("Not", tensor.logical_not), ("Sign", tensor.sign), ("Identity", lambda x: x),
        ("Tan", tensor.tan), ("Asin", tensor.asin), ("Acos", tensor.acos), ("Atan", tensor.atan),
        ("Sinh", tensor.sinh), ("Cosh", tensor.cosh), ("Asinh", tensor.asinh),
        ("Acosh", tensor.acosh), ("Atanh", tensor.atanh), ("IsNaN", tensor.isnan),
        ("BitwiseNot", tensor.bitwise_not)]:
    register(_op_type, _unary(_fn))

for _op_type, _fn2 in [
        ("Add", tensor.add), ("Sub", tensor.subtract), ("Mul", tensor.multiply),
        ("Equal", tensor.equal), ("Less", tensor.less), ("Greater", tensor.greater),
        ("LessOrEqual", tensor.less_equal), ("GreaterOrEqual", tensor.greater_equal),
        ("And", tensor.logical_and), ("Or", tensor.logical_or), ("Xor", tensor.logical_xor),
        ("BitwiseAnd", tensor.bitwise_and), ("BitwiseOr", tensor.bitwise_or),
        ("BitwiseXor", tensor.bitwise_xor)]:
    register(_op_type, _binary(_fn2))


@converter("Div")
def _div(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return tensor.divide(inputs[0], inputs[1])  # integer Div truncates toward zero (ONNX, relay)


@converter("Pow")
def _pow(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    dt = dtype_of(inputs[0])
    if not dt.startswith("float"):  # integer base: in float64 (exact for exact results)
        p = tensor.power(transform.cast(inputs[0], "float64"), transform.cast(inputs[1], "float64"))
        return transform.cast(p, dt)
    b = inputs[1] if dtype_of(inputs[1]) == dt else transform.cast(inputs[1], dt)
    return tensor.power(inputs[0], b)


def round_half_even(x: RelayExpr) -> RelayExpr:
    """Round to nearest, ties to even (ONNX's rounding): relay's ``round`` (one use of ``x``; a
    floor/compare/select form used ``x`` five times, and chains of such roundings inlined into
    one fused kernel grew exponentially)."""
    return tensor.round(x)


@converter("Round")
def _round(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return round_half_even(inputs[0])


@converter("Reciprocal")
def _recip(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return tensor.divide(scalar_like(1.0, inputs[0]), inputs[0])


def _variadic(fn: Callable[[RelayExpr, RelayExpr], RelayExpr]) -> Converter:
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        out = inputs[0]
        for x in inputs[1:]:
            out = fn(out, x)
        return out
    return convert


register("Max", _variadic(tensor.maximum))
register("Min", _variadic(tensor.minimum))
register("Sum", _variadic(tensor.add))


@converter("Mean")
def _mean(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return tensor.divide(
        _variadic(tensor.add)(ctx, inputs, attrs, names), scalar_like(len(inputs), inputs[0])
    )


@converter("Clip")
def _clip(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    if ctx.opset < 11:
        return tensor.clip(x, attrs.get("min", -np.inf), attrs.get("max", np.inf))
    out = x
    for idx, fn in ((1, tensor.maximum), (2, tensor.minimum)):
        if len(inputs) > idx and inputs[idx] is not None:
            if names[idx] in ctx.values:
                lo = float(ctx.values[names[idx]].reshape(-1)[0])
                out = fn(out, scalar_like(lo, x))
            else:
                out = fn(out, inputs[idx])
    return out


@converter("Where")
def _where(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return tensor.where(inputs[0], inputs[1], inputs[2])


@converter("Cast")
def _cast(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return cast_to(inputs[0], np_dtype(attrs["to"]), bool(attrs.get("saturate", 1)),
                   attrs.get("round_mode", "up"))


@converter("CastLike")
def _cast_like(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    return cast_to(inputs[0], dtype_of(inputs[1]), bool(attrs.get("saturate", 1)),
                   attrs.get("round_mode", "up"))


@converter("Mod")
def _mod(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x, y = inputs
    if attrs.get("fmod", 0):
        return tensor.mod(x, y)
    if not dtype_of(x).startswith("float"):
        return tensor.floor_mod(x, y)
    # floats: the sign of the divisor, from the truncated remainder (as numpy and onnxruntime;
    # x - floor(x / y) * y would give nan for an infinite y)
    r = tensor.mod(x, y)
    zero = scalar_like(0, x)
    fix = tensor.logical_and(tensor.not_equal(r, zero),
                             tensor.not_equal(tensor.less(r, zero), tensor.less(y, zero)))
    return tensor.where(fix, tensor.add(r, y), r)


@converter("IsInf")
def _isinf(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    if pos and neg:
        return tensor.isinf(x)
    if not pos and not neg:
        return tensor.logical_and(tensor.isinf(x), tensor.logical_not(tensor.isinf(x)))
    return tensor.equal(x, scalar_like(np.inf if pos else -np.inf, x))


@converter("BitShift")
def _bitshift(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    fn = tensor.right_shift if attrs["direction"] == "RIGHT" else tensor.left_shift
    return fn(inputs[0], inputs[1])


@converter("Dropout")
def _dropout(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    training = len(inputs) > 2 and inputs[2] is not None
    # ratio / training_mode known at run time
    if training and (runtime_input(ctx, names, 1) or runtime_input(ctx, names, 2)):
        from ...op.dyn import dropout as _dyn

        dt = dtype_of(inputs[0])
        ratio = inputs[1] if len(inputs) > 1 and inputs[1] is not None else \
            const(np.asarray(0.5, dtype=dt if dt.startswith("float") else "float32"))
        out, mask = _dyn.dropout(inputs[0], ratio, inputs[2], int(attrs.get("seed", 0)),
                                 node=ctx.where())
        return [out, mask] if len(ctx.node.output) > 1 and ctx.node.output[1] else out
    if training and bool(ctx.value(names[2], "training_mode").reshape(-1)[0]):
        ratio = ctx.value(names[1], "ratio") if len(names) > 1 and names[1] else np.asarray(0.5)
        if float(ratio.reshape(-1)[0]) != 0.0:  # ratio 0 drops nothing: the identity
            raise ctx.fail("training_mode=True is not supported (inference only, or ratio 0)")
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        return [inputs[0], const(np.ones(shape_of(inputs[0]), dtype=bool))]
    return inputs[0]


@converter("BitCast")
def _bitcast(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    """Between integer (or bool) types of one width the bits are the two's-complement value
    modulo 2**bits: a cast; any other pair of one width is ``relay.reinterpret``."""
    from onnx import helper

    src = np.dtype(dtype_of(inputs[0]))
    dst = np.dtype(helper.tensor_dtype_to_np_dtype(int(attrs["to"])))
    if src.itemsize != dst.itemsize:
        raise ctx.fail(f"BitCast from {src} to {dst}: the element sizes differ ({src.itemsize} "
                       f"vs {dst.itemsize} bytes)")
    if all(d.kind in "iub" for d in (src, dst)):
        return transform.cast(inputs[0], str(dst))
    if "b" in (src.kind, dst.kind):
        raise ctx.fail(f"BitCast from {src} to {dst} is not supported (bool only to and from "
                       "integers)")
    return transform.reinterpret(inputs[0], str(dst))
