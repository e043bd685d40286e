"""Conversions between the storage-only dtypes and their compute types, as integer TIR.

The storage-only dtypes (:data:`tvmpy.ir.dtype.STORAGE_ONLY`) are held in memory as their bits
(``storage_of``: uint16 for bfloat16, uint8 for the float8 formats, int8/uint8 for the sub-byte
integers, one element per byte) and computed on as float32 / int32 (``compute_of``). The
functions here build the two directions from integer and bit-cast operations only (shifts,
masks, compares, ``reinterpret``), so every code generator (llvm, c, cuda, opencl) and the
loop-IR interpreter run them without special support:

- :func:`decode`: storage bits -> compute value (exact: every code has a float32 / int32 value).
- :func:`encode`: compute value -> storage bits. Floats round to nearest, ties to even (the
  rounding of ``ml_dtypes`` and of ONNX's Cast). ``saturate=False`` (ml_dtypes' ``astype``):
  beyond the largest finite value gives inf where the format has one (e5m2), NaN otherwise;
  ``saturate=True`` (ONNX Cast's default for float8): beyond, and +-inf, clamp to +-max finite;
  NaN stays NaN either way. The fnuz formats have no negative zero (-0 encodes as +0) and one
  NaN (0x80). Integers wrap to the width (two's complement), as a C cast to a narrower type;
  a sub-byte value sits in the low bits of its byte with the high bits zero (ml_dtypes' layout:
  int4 -1 is 0x0F), and decoding ignores the high bits.

The float8 formats (bits ``S EEEE MMM`` / ``S EEEEE MM``):

=================  ======  ====  =========================  ================
name               E, M    bias  specials                   max finite
=================  ======  ====  =========================  ================
float8_e4m3fn      4, 3    7     NaN = S.1111.111, no inf   448
float8_e4m3fnuz    4, 3    8     NaN = 0x80, no inf, no -0  240
float8_e5m2        5, 2    15    IEEE: inf and NaNs          57344
float8_e5m2fnuz    5, 2    16    NaN = 0x80, no inf, no -0  57344
float4_e2m1fn      2, 1    1     none: clamps; NaN -> 0      6
=================  ======  ====  =========================  ================

(float4_e2m1fn: bits ``S EE M`` in the low half of its byte; it has no inf and no NaN, so
beyond 6 always clamps and NaN encodes as a zero of the opposite sign, as ml_dtypes does.)

float8_e8m0fnu (OCP MX scales) is an exponent alone: code c is 2**(c - 127), 255 is NaN; no
sign, no zero. Its :func:`encode` is ml_dtypes' conversion: the nearest power of two with a
mantissa of 1.5 rounding up (below 2**-126 too: 1.5 * 2**-127 and above give 2**-126, anything
smaller the smallest code, 2**-127; ml_dtypes >= 0.7 does the same), and zero, negative, inf,
NaN or beyond 2**127 giving NaN. (ONNX Cast's own rounding modes for it are built from
float operations by the ONNX importer.)
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir import dtype as dt
from . import expr as E
from .op import min as _min
from .op import reinterpret

__all__ = ["FLOAT8_FORMATS", "SMALL_FLOATS", "decode", "encode", "round_to", "max_finite"]

# name -> (exponent bits, mantissa bits, bias, kind); kind: "fn" (no inf; NaN = all ones),
# "ieee" (inf and NaNs as IEEE 754), "fnuz" (no inf, no negative zero; NaN = 0x80)
FLOAT8_FORMATS: dict[str, tuple[int, int, int, str]] = {
    "float8_e4m3fn": (4, 3, 7, "fn"),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz"),
    "float8_e5m2": (5, 2, 15, "ieee"),
    "float8_e5m2fnuz": (5, 2, 16, "fnuz"),
}
# every sign/exponent/mantissa format below 16 bits; "sat": no inf, no NaN (clamps)
SMALL_FLOATS: dict[str, tuple[int, int, int, str]] = {
    **FLOAT8_FORMATS, "float4_e2m1fn": (2, 1, 1, "sat")}
_MAX_CODE = {"fn": 0x7E, "fnuz": 0x7F, "ieee": 0x7B, "sat": 0x7}
_F32_INF = 0x7F800000
_F32_QNAN = 0x7FC00000


def max_finite(dtype: str) -> float:
    """The largest finite value of a storage-only float dtype (bfloat16 or float8)."""
    name = dt.element_of(dtype)
    if name == "bfloat16":
        return float.fromhex("0x1.fep127")
    if name == "float8_e8m0fnu":
        return 2.0**127
    e, m, bias, kind = SMALL_FLOATS[name]
    code = _MAX_CODE[kind]
    exp = (code >> m) - bias
    return (1 + (code & ((1 << m) - 1)) / (1 << m)) * 2.0**exp


def _u32(lanes: int) -> str:
    return dt.with_lanes("uint32", lanes)


def _c(v: int, like: E.PrimExpr) -> E.PrimExpr:
    return E.const(v, like.dtype)


def _bind(value: E.PrimExpr, name: str, body: Callable[[E.PrimExpr], E.PrimExpr]) -> E.PrimExpr:
    """``body(v)`` with ``value`` bound once to a fresh Let variable ``v`` (the conversions use
    their input several times; a Let keeps nested conversions linear in size)."""
    if isinstance(value, (E.Var, E.IntImm, E.FloatImm)):
        return body(value)
    v = E.Var(name, value.dtype)
    return E.Let(v, value, body(v))


def decode(bits: E.PrimExpr, dtype: str) -> E.PrimExpr:
    """The compute value (float32 / int32, lanes as ``bits``) of storage ``bits`` of ``dtype``."""
    name = dt.element_of(dtype)
    lanes = dt.lanes_of(bits.dtype)
    if name in ("int4", "int2", "uint4", "uint2"):
        bits_n = dt.bits_of(name)
        v = E.cast(bits, dt.with_lanes("int32", lanes))
        if name.startswith("u"):
            return v & _c((1 << bits_n) - 1, v)
        return (v << _c(32 - bits_n, v)) >> _c(32 - bits_n, v)
    f32 = dt.with_lanes("float32", lanes)
    u = E.cast(bits, _u32(lanes))
    if name == "bfloat16":
        return reinterpret(f32, u << _c(16, u))
    if name == "float8_e8m0fnu":
        return _bind(u, "e8", lambda u: reinterpret(f32, E.Select(
            u == _c(255, u), _c(_F32_QNAN, u),
            E.Select(u == _c(0, u), _c(0x00400000, u), u << _c(23, u)))))  # 0: 2**-127
    return _bind(u, "f8", lambda u: _decode_float8(u, name, f32))


def _decode_float8(u: E.PrimExpr, name: str, f32: str) -> E.PrimExpr:
    lanes = dt.lanes_of(u.dtype)
    e_bits, m_bits, bias, kind = SMALL_FLOATS[name]
    top = e_bits + m_bits  # the sign bit
    if kind == "sat":
        u = u & _c((2 << top) - 1, u)  # (the byte's high bits are not part of the value)
    sign = (u & _c(1 << top, u)) << _c(31 - top, u)
    e = (u >> _c(m_bits, u)) & _c((1 << e_bits) - 1, u)
    m = u & _c((1 << m_bits) - 1, u)
    normal = ((e + _c(127 - bias, u)) << _c(23, u)) | (m << _c(23 - m_bits, u))
    # subnormal: m * 2**(1 - bias - m_bits), exact in float32
    sub = E.cast(m, f32) * E.const(2.0 ** (1 - bias - m_bits), f32)
    mag = E.Select(e == _c(0, u), reinterpret(_u32(lanes), sub), normal)
    out = mag | sign
    nan = _c(_F32_QNAN, u) | sign
    if kind == "fn":
        out = E.Select((u & _c(0x7F, u)) == _c(0x7F, u), nan, out)
    elif kind == "ieee":
        e_max = _c((1 << e_bits) - 1, u)
        out = E.Select(e == e_max, E.Select(m == _c(0, u), _c(_F32_INF, u) | sign, nan), out)
    elif kind == "fnuz":
        out = E.Select(u == _c(0x80, u), _c(_F32_QNAN, u), out)
    return reinterpret(f32, out)


def _round_shift(x: E.PrimExpr, sh: E.PrimExpr | int) -> E.PrimExpr:
    """``x >> sh`` rounded to nearest, ties to even (uint32, 1 <= sh <= 31, no overflow)."""
    s = sh if isinstance(sh, E.PrimExpr) else _c(sh, x)
    one = _c(1, x)
    return (x + ((one << (s - one)) - one) + ((x >> s) & one)) >> s


def encode(value: E.PrimExpr, dtype: str, saturate: bool = False) -> E.PrimExpr:
    """The storage bits (``storage_of(dtype)``) of a compute ``value`` (float32 for the float
    dtypes, int32 for the integer ones; other types are cast to those first)."""
    name = dt.element_of(dtype)
    lanes = dt.lanes_of(value.dtype)
    store = dt.with_lanes(dt.STORAGE_ONLY[name][0], lanes)
    if name in ("int4", "int2", "uint4", "uint2"):
        v = E.cast(value, dt.with_lanes("int32", lanes))
        bits_n = dt.bits_of(name)
        # the low bits of the byte, the rest zero (ml_dtypes' layout: -1 is 0x0F as int4)
        return E.cast(v & _c((1 << bits_n) - 1, v), store)
    x = E.cast(value, dt.with_lanes("float32", lanes))
    out = _bind(reinterpret(_u32(lanes), x), "f32bits",
                lambda u: _encode_float(u, name, saturate))
    return E.cast(out, store)


def _encode_e8m0(u: E.PrimExpr) -> E.PrimExpr:
    ue = u >> _c(23, u)  # the sign too: negative values give >= 256, hence NaN below
    frac = u & _c(0x7FFFFF, u)
    # a subnormal float32 is frac * 2**-149: 2**-127 is frac 0x400000, 1.5 * 2**-127 is 0x600000
    up = E.Select(ue == _c(0, u), frac >= _c(0x600000, u), frac >= _c(0x400000, u))
    code = E.Select(ue == _c(0, u), _c(0, u), ue) + E.cast(up, u.dtype)
    bad = (u == _c(0, u)) | (code >= _c(255, u))  # +0, -0 (ue 256), negative, inf/NaN, overflow
    return E.Select(bad, _c(255, u), code)


def _encode_float(u: E.PrimExpr, name: str, saturate: bool) -> E.PrimExpr:
    """uint32 result: the code of the float32 with bits ``u`` in the format ``name``."""
    if name == "float8_e8m0fnu":
        return _encode_e8m0(u)
    a = u & _c(0x7FFFFFFF, u)
    is_nan = a > _c(_F32_INF, u)
    if name == "bfloat16":
        rounded = _round_shift(u, 16)
        quiet = ((u >> _c(16, u)) & _c(0x8000, u)) | _c(0x7FC0, u)  # ml_dtypes' NaN
        return E.Select(is_nan, quiet, rounded)
    e_bits, m_bits, bias, kind = SMALL_FLOATS[name]
    top = e_bits + m_bits  # the sign bit
    sign = (u >> _c(31 - top, u)) & _c(1 << top, u)
    shift = 23 - m_bits
    normal = _round_shift(a, shift) - _c((127 - bias) << m_bits, u)
    # below the smallest normal: the mantissa (implicit bit set) in units of the subnormal step
    ue = a >> _c(23, u)
    mant = (a & _c(0x7FFFFF, u)) | _c(0x800000, u)
    sh = _min(_c(151 - bias - m_bits, u) - _min(ue, _c(151 - bias - m_bits - 1, u)), _c(31, u))
    sub = _round_shift(mant, sh)
    is_sub = a < _c((128 - bias) << 23, u)
    mag = E.Select(is_sub, sub, normal)
    max_code = _MAX_CODE[kind]
    if kind == "sat":  # no inf or NaN to give: clamp; NaN is a zero of the other sign (ml_dtypes)
        out = E.Select(is_nan, sign ^ _c(1 << top, u), _min(mag, _c(max_code, u)) | sign)
    elif kind == "ieee":
        limit = max_code if saturate else max_code + 1  # 0x7C: inf
        out = _min(mag, _c(limit, u)) | sign
        out = E.Select(is_nan, sign | _c(0x7E, u), out)
    elif kind == "fn":
        fixed = _min(mag, _c(max_code, u)) if saturate else E.Select(
            mag > _c(max_code, u), _c(0x7F, u), mag)
        out = E.Select(is_nan, _c(0x7F, u), fixed) | sign
    else:  # fnuz: one NaN (0x80), zero has no sign
        over = mag > _c(max_code, u)
        mag2 = _min(mag, _c(max_code, u)) if saturate else mag
        out = E.Select(mag2 == _c(0, u), _c(0, u), mag2 | sign)
        bad = is_nan if saturate else (is_nan | over)
        out = E.Select(bad, _c(0x80, u), out)
    return out


def round_to(value: E.PrimExpr, dtype: str, saturate: bool = False) -> E.PrimExpr:
    """``value`` rounded to ``dtype``'s values, in the compute type: decode(encode(value))."""
    return decode(encode(value, dtype, saturate), dtype)

