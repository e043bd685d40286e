"""ONNX's low-precision element types: bfloat16, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz),
float4 (e2m1), float8 e8m0 (power-of-two scales), int4/uint4 and int2/uint2, as tvmpy's
storage-only dtypes (:mod:`tvmpy.ir.dtype`).

Tensors of these types are imported as they are (initializers through ``onnx.numpy_helper``,
which unpacks the 4- and 2-bit types to one ``ml_dtypes`` element per byte). Cast, CastLike,
QuantizeLinear and DequantizeLinear convert to and from them (``cast_to``: Cast's ``saturate``
for float8). Every other operator computes as ONNX specifies, in float32 / int32:
:func:`in_compute_types` casts its low-precision inputs up, converts the node, and casts the
outputs of the widened type back (one rounding per node, as onnxruntime does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....ir import dtype as dt
from ...expr import RelayExpr, const
from ...op import tensor, transform
from .context import ImportContext, dtype_of
from .registry import Attrs, Converter, Inputs, Names, Output

__all__ = ["FLOAT8", "LOW_FLOATS", "NATIVE_OPS", "cast_to", "saturate_float8", "cast_to_e8m0",
           "in_compute_types", "model_uses_low_precision"]

FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
LOW_FLOATS = FLOAT8 + ("float4_e2m1fn",)  # QuantizeLinear's float outputs (no integer rounding)
# operators whose converters handle low-precision operands themselves
NATIVE_OPS = frozenset({"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "Identity",
                        "Constant"})


def saturate_float8(x: RelayExpr, to: str) -> RelayExpr:
    """``x`` clamped to +-max finite of the float8 type ``to``, NaN kept (ONNX Cast's
    saturate=1: out-of-range values and +-inf become +-max). Other than float16/32/64 sources
    (integers, bool, bfloat16, float8) are clamped as float32 (exact where it matters: a value
    that float32 rounds is beyond every float8's range)."""
    from ....tir.low_precision import max_finite

    if dtype_of(x) not in ("float16", "float32", "float64"):
        x = transform.cast(x, "float32")
    m = max_finite(to)
    return tensor.where(tensor.isnan(x), x, tensor.clip(x, -m, m))


def cast_to_e8m0(x: RelayExpr, saturate: bool = True, round_mode: str = "up") -> RelayExpr:
    """ONNX Cast to FLOAT8E8M0 (``onnx.numpy_helper.to_float8e8m0``): the power of two of
    ``|x|`` (as float32; the sign is ignored) by ``round_mode`` -- "up" when any mantissa bit
    is set, "down", or "nearest" (up from a mantissa of 1.5; below 2**-126 the exponent field
    is 0: 2**-127, or 2**-126 when rounding up); NaN and inf give NaN; beyond 2**127 clamps
    with ``saturate``, else NaN. Computed in float64 (exact for float32 inputs), then the
    power of two is stored exactly."""
    if round_mode not in ("up", "down", "nearest"):
        raise ValueError(f"Cast to FLOAT8E8M0: round_mode {round_mode!r} is not one of "
                         "'up', 'down', 'nearest'")
    x32 = x if dtype_of(x) == "float32" else transform.cast(x, "float32")
    a = tensor.abs(transform.cast(x32, "float64"))

    def c(v: float) -> RelayExpr:
        return const(np.asarray(v, dtype=np.float64))

    e = tensor.floor(tensor.log2(a))  # -inf at 0: only used where a >= 2**-126
    m = tensor.divide(a, tensor.power(c(2.0), e))  # the mantissa, in [1, 2)
    if round_mode == "up":
        e_norm = tensor.add(e, transform.cast(tensor.greater(m, c(1.0)), "float64"))
        e_den = tensor.where(tensor.greater(a, c(0.0)), c(-126.0), c(-127.0))
    elif round_mode == "down":
        e_norm, e_den = e, c(-127.0)
    else:
        e_norm = tensor.add(e, transform.cast(tensor.greater_equal(m, c(1.5)), "float64"))
        e_den = tensor.where(tensor.greater(a, c(2.0**-127)), c(-126.0), c(-127.0))
    ex = tensor.where(tensor.less(a, c(2.0**-126)), e_den, e_norm)
    if saturate:
        ex = tensor.minimum(ex, c(127.0))  # (unsaturated: 2**128 is inf in float32 -> NaN)
    y = tensor.where(tensor.logical_or(tensor.isnan(a), tensor.isinf(a)), c(np.nan),
                     tensor.power(c(2.0), ex))
    return transform.cast(transform.cast(y, "float32"), "float8_e8m0fnu")


def cast_to(x: RelayExpr, to: str, saturate: bool = True, round_mode: str = "up") -> RelayExpr:
    """ONNX Cast of ``x`` to the dtype ``to``: round to nearest even; for a float8 ``to`` and
    ``saturate``, clamp to its finite range first; to float8_e8m0fnu by ``round_mode``."""
    if to == "float8_e8m0fnu":
        return cast_to_e8m0(x, saturate, round_mode)
    if to in FLOAT8 and saturate:
        x = saturate_float8(x, to)
    return transform.cast(x, to)


def in_compute_types(conv: Converter) -> Converter:
    """``conv`` with low-precision inputs cast to float32 / int32 and the outputs of that type
    cast back to the (first) low-precision input type."""
    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        low = [dtype_of(x) if x is not None else None for x in inputs]
        first = next((d for d in low if d is not None and dt.is_storage_only(d)), None)
        if first is None:
            return conv(ctx, inputs, attrs, names)
        up: Inputs = [transform.cast(x, dt.compute_of(d)) if x is not None and d is not None
                      and dt.is_storage_only(d) else x for x, d in zip(inputs, low)]
        out = conv(ctx, up, attrs, names)
        outs = out if isinstance(out, list) else [out]
        wide = dt.compute_of(first)
        back = [transform.cast(o, first) if o is not None and dtype_of(o) == wide else o
                for o in outs]
        return back if isinstance(out, list) else back[0]
    return convert


def model_uses_low_precision(graph: Any) -> bool:
    """Whether a GraphProto has a tensor, a Cast target or a Constant of a low-precision type
    (the importer wraps converters with :func:`in_compute_types` only then)."""
    from onnx import AttributeProto, TensorProto

    low = {getattr(TensorProto, n) for n in ("BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                              "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT4E2M1",
                                              "FLOAT8E8M0", "INT4", "UINT4", "INT2", "UINT2") if hasattr(TensorProto, n)}
    types = {t.data_type for t in graph.initializer}
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.type.HasField("tensor_type"):
            types.add(vi.type.tensor_type.elem_type)
    for node in graph.node:
        for at in node.attribute:
            if at.type == AttributeProto.TENSOR:
                types.add(at.t.data_type)
            elif at.name == "to" and at.type == AttributeProto.INT:
                types.add(at.i)
            elif at.name == "output_dtype" and at.type == AttributeProto.INT:
                types.add(at.i)
    return bool(types & low)
