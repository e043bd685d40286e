"""C vocabulary of the C backend: type names, literals, identifiers and helper functions.

Value conventions of the generated C (shared by every ``c_*`` module):

- every IR dtype has a *storage* type (what a buffer element or variable holds) and a *value* type
  (what a C expression of that dtype evaluates to). They differ only for float16: stored as
  ``_Float16``, computed as ``float``, and rounded back to half after every operation (as numpy
  and the LLVM backend's ``half`` operations do: each is IEEE-rounded once, never fused), so
  each float16 operation rounds exactly once to half. The rounding (``tvmpy_f16``) is integer
  arithmetic on the bits, never a ``_Float16`` conversion gcc could see through: on a CPU with
  AVX512-FP16 gcc would turn float operations on converted halves into native half ones and
  fuse a*b+c into a half FMA (one rounding instead of two), so the results would depend on the
  CPU (issue 24); this way they are the same on every CPU and equal to the LLVM backend's;
- integers narrower than ``int`` are promoted by C, so their arithmetic results are cast back to
  the IR type (wrap-around, like LLVM); for wider ones see :mod:`.c_expr` (index arithmetic is
  assumed not to overflow, data arithmetic wraps explicitly);
- helpers with C-only pitfalls (floor division, NaN-propagating min/max, sigmoid...) are ``static
  inline`` functions emitted once at the top of the source, only when used.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..ir import dtype as dt

__all__ = ["storage_type", "value_type", "int_literal", "float_literal", "c_string",
           "sanitize", "RESERVED", "HelperTable", "type_suffix", "is_narrow_int"]

_STORAGE = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "_Float16", "float32": "float", "float64": "double", "handle": "void*",
}


def storage_type(dtype: str) -> str:
    """The C type that stores one element of scalar ``dtype`` (vector dtypes: of one lane)."""
    elem = dt.element_of(dtype)
    try:
        return _STORAGE[elem]
    except KeyError:
        raise NotImplementedError(f"the C backend has no type for dtype {dtype}") from None


def value_type(dtype: str) -> str:
    """The C type of an expression of scalar ``dtype`` (float16 computes as float)."""
    elem = dt.element_of(dtype)
    return "float" if elem == "float16" else storage_type(elem)


def type_suffix(dtype: str) -> str:
    """Short name used in helper function names: i32, u8, f32, f16 (computes as f32) ..."""
    d = dt.parse(dtype)
    if d.kind == "float":
        return "f64" if d.bits == 64 else "f32"
    if d.kind == "bool":
        return "u8"
    return ("i" if d.kind == "int" else "u") + str(d.bits)


def is_narrow_int(dtype: str) -> bool:
    """int8/int16/uint8/uint16: C promotes them to int, results must be cast back."""
    d = dt.parse(dtype)
    return d.kind in ("int", "uint") and d.bits < 32


def int_literal(value: int, dtype: str) -> str:
    """A C literal of integer ``value`` with the type of ``dtype`` where C's default would differ."""
    d = dt.parse(dt.element_of(dtype))
    if d.kind == "bool":
        return "true" if value else "false"
    if d.kind == "int" and d.bits == 64:
        if value == -(2**63):
            return "(-9223372036854775807L - 1L)"
        return f"{value}L"
    if d.kind == "uint" and d.bits == 64:
        return f"{value}UL"
    if d.kind == "uint" and d.bits == 32:
        return f"{value}u"
    if value == -(2**31):
        return "(-2147483647 - 1)"
    return str(value)


def float_literal(value: float, dtype: str) -> str:
    """A C literal of ``value`` as the value type of float ``dtype`` (float16: the exact half)."""
    elem = dt.element_of(dtype)
    suffix = "" if elem == "float64" else "f"
    text = None
    if elem != "float64":
        # the constant is the double rounded once to the type; the shortest decimal that
        # round-trips that float is read back exactly by the C compiler
        with np.errstate(over="ignore"):
            narrow = np.float16(value) if elem == "float16" else np.float32(value)
        value = float(narrow)
        text = repr(float(np.float32(narrow))) if elem == "float16" else str(narrow)
    if math.isnan(value):
        return "NAN" if suffix else "(double)NAN"
    if math.isinf(value):
        inf = "INFINITY" if suffix else "(double)INFINITY"
        return inf if value > 0 else "-" + inf
    if text is None:
        text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return text + suffix


def c_string(text: str) -> str:
    """A C string literal for ``text`` (escaped; non-ASCII as octal escapes of its UTF-8)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif 32 <= byte < 127 and ch != "?":  # '?' avoids trigraphs
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


# names a generated identifier must not take: C keywords, names from the headers we include
# that appear as macros or that the generated code calls, and our own helpers' prefixes
_KEYWORDS = """auto break case char const continue default do double else enum extern float for goto
if inline int long register restrict return short signed sizeof static struct switch typedef union
unsigned void volatile while _Bool _Complex _Imaginary _Float16 _Alignas _Alignof _Atomic _Generic
_Noreturn _Static_assert _Thread_local asm typeof bool true false NULL NAN INFINITY HUGE_VAL
HUGE_VALF errno main size_t ptrdiff_t free malloc aligned_alloc memcpy memset abs labs
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t
isnan isinf isfinite signbit fpclassify omp_get_num_threads omp_get_thread_num lane""".split()
_MATH = """exp exp2 exp10 log log2 log10 log1p sqrt tanh erf fabs floor ceil round nearbyint rint trunc
sin cos tan sinh cosh asin acos atan atan2 pow fmod fmin fmax hypot cbrt expm1 y0 y1 yn j0 j1 jn
gamma lgamma tgamma""".split()
RESERVED = frozenset(_KEYWORDS + _MATH + [m + "f" for m in _MATH] + [m + "l" for m in _MATH])
_RESERVED_PREFIX = re.compile(r"^(__|tvmpy_|_[A-Z]|M_|FP_|INT\d|UINT\d|E[A-Z0-9])")


def sanitize(name: str) -> str:
    """A valid C identifier close to ``name`` ("i.outer" -> "i_outer", "0a" -> "v_0a")."""
    s = re.sub(r"[^0-9A-Za-z_]", "_", name) or "v"
    if s[0].isdigit():
        s = "v_" + s
    if s in RESERVED or _RESERVED_PREFIX.match(s):
        s = s.lstrip("_") + "_"
        if not s[0].isalpha():
            s = "v" + s
    return s


# ---------------------------------------------------------------------------------------------
# helper functions, emitted on first use
def _floor_helpers(suffix: str, ctype: str) -> dict[str, str]:
    return {
        f"tvmpy_floordiv_{suffix}": (
            f"static inline {ctype} tvmpy_floordiv_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  {ctype} q = a / b;\n"
            f"  {ctype} r = a % b;\n"
            f"  return r != 0 && (r < 0) != (b < 0) ? q - 1 : q;\n"
            "}"),
        f"tvmpy_floormod_{suffix}": (
            f"static inline {ctype} tvmpy_floormod_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  {ctype} r = a % b;\n"
            f"  return r != 0 && (r < 0) != (b < 0) ? r + b : r;\n"
            "}"),
    }


def _float_helpers(suffix: str, ctype: str) -> dict[str, str]:
    f = "f" if ctype == "float" else ""
    one = "1.0f" if f else "1.0"
    return {
        # NaN propagates (numpy.minimum / llvm.minimum semantics)
        f"tvmpy_min_{suffix}": (
            f"static inline {ctype} tvmpy_min_{suffix}({ctype} a, {ctype} b) {{\n"
            "  return a != a || a < b ? a : b;\n"
            "}"),
        f"tvmpy_max_{suffix}": (
            f"static inline {ctype} tvmpy_max_{suffix}({ctype} a, {ctype} b) {{\n"
            "  return a != a || a > b ? a : b;\n"
            "}"),
        f"tvmpy_floordiv_{suffix}": (
            f"static inline {ctype} tvmpy_floordiv_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  return floor{f}(a / b);\n"
            "}"),
        f"tvmpy_floormod_{suffix}": (
            f"static inline {ctype} tvmpy_floormod_{suffix}({ctype} a, {ctype} b) {{\n"
            f"  return a - floor{f}(a / b) * b;\n"
            "}"),
        f"tvmpy_sigmoid_{suffix}": (
            f"static inline {ctype} tvmpy_sigmoid_{suffix}({ctype} x) {{\n"
            f"  return {one} / ({one} + exp{f}(-x));\n"
            "}"),
        f"tvmpy_rsqrt_{suffix}": (
            f"static inline {ctype} tvmpy_rsqrt_{suffix}({ctype} x) {{\n"
            f"  return {one} / sqrt{f}(x);\n"
            "}"),
    }


def _int_minmax(suffix: str, ctype: str) -> dict[str, str]:
    return {
        f"tvmpy_min_{suffix}": (
            f"static inline {ctype} tvmpy_min_{suffix}({ctype} a, {ctype} b) {{\n"
            "  return a < b ? a : b;\n"
            "}"),
        f"tvmpy_max_{suffix}": (
            f"static inline {ctype} tvmpy_max_{suffix}({ctype} a, {ctype} b) {{\n"
            "  return a > b ? a : b;\n"
            "}"),
    }


def _all_helpers() -> dict[str, str]:
    table: dict[str, str] = {
        "tvmpy_f16": (
            "/* round a float to the nearest float16, ties to even (one float16 operation's\n"
            "   result), in integer arithmetic on its bits: from a (_Float16) conversion gcc\n"
            "   makes native half arithmetic on CPUs with AVX512-FP16 and fuses a*b+c into one\n"
            "   half FMA (one rounding instead of two), so results would depend on the CPU */\n"
            "static inline float tvmpy_f16(float x) {\n"
            "  uint32_t u;\n"
            "  memcpy(&u, &x, sizeof u);\n"
            "  uint32_t sign = u & 0x80000000u, a = u ^ sign;\n"
            "  if (a > 0x7f800000u) {\n"
            "    a = (a | 0x00400000u) & 0xffffe000u; /* NaN: quiet, 10 payload bits */\n"
            "  } else if (a >= 0x477ff000u) {\n"
            "    a = 0x7f800000u; /* 65520 and above: infinity */\n"
            "  } else if (a >= 0x38800000u) { /* a normal half: 10 fraction bits */\n"
            "    a = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;\n"
            "  } else if (a > 0x33000000u) { /* a subnormal half: a multiple of 2^-24 */\n"
            "    uint32_t m = (a & 0x7fffffu) | 0x800000u, s = 126u - (a >> 23);\n"
            "    float f = (float)((m + (1u << (s - 1u)) - 1u + ((m >> s) & 1u)) >> s) * 0x1p-24f;\n"
            "    memcpy(&a, &f, sizeof a);\n"
            "  } else {\n"
            "    a = 0; /* at most 2^-25: zero */\n"
            "  }\n"
            "  u = sign | a;\n"
            "  memcpy(&x, &u, sizeof x);\n"
            "  return x;\n"
            "}"),
        "tvmpy_f16_f64": (
            "/* round a double straight to the nearest float16 (a cast float64 -> float16;\n"
            "   never through float, which would round twice), as a float; see tvmpy_f16 */\n"
            "static inline float tvmpy_f16_f64(double x) {\n"
            "  uint64_t u;\n"
            "  memcpy(&u, &x, sizeof u);\n"
            "  uint64_t a = u & 0x7fffffffffffffffull;\n"
            "  float sign = (u >> 63) ? -1.0f : 1.0f;\n"
            "  if (a > 0x7ff0000000000000ull) {\n"
            "    uint32_t b = (uint32_t)(u >> 32 & 0x80000000u) | 0x7fc00000u\n"
            "                 | (uint32_t)(a >> 29 & 0x3fe000u); /* NaN: quiet, 10 payload bits */\n"
            "    float f;\n"
            "    memcpy(&f, &b, sizeof f);\n"
            "    return f;\n"
            "  }\n"
            "  if (a >= 0x40effe0000000000ull) {\n"
            "    return sign * INFINITY; /* 65520 and above */\n"
            "  }\n"
            "  if (a >= 0x3f10000000000000ull) { /* a normal half: 10 fraction bits */\n"
            "    a = (a + 0x1ffffffffffull + ((a >> 42) & 1u)) & ~0x3ffffffffffull;\n"
            "    double d;\n"
            "    memcpy(&d, &a, sizeof d);\n"
            "    return sign * (float)d; /* exact */\n"
            "  }\n"
            "  if (a > 0x3e60000000000000ull) { /* a subnormal half: a multiple of 2^-24 */\n"
            "    uint64_t m = (a & 0xfffffffffffffull) | 0x10000000000000ull;\n"
            "    uint64_t s = 1051u - (a >> 52);\n"
            "    uint64_t r = (m + (1ull << (s - 1u)) - 1u + ((m >> s) & 1u)) >> s;\n"
            "    return sign * ((float)r * 0x1p-24f);\n"
            "  }\n"
            "  return sign * 0.0f; /* at most 2^-25: zero */\n"
            "}"),
        "tvmpy_alloc": (
            "/* 64-byte aligned heap memory; aligned_alloc wants a size that is a nonzero\n"
            "   multiple of the alignment */\n"
            "static inline void* tvmpy_alloc(size_t nbytes) {\n"
            "  if (nbytes > SIZE_MAX / 2) {\n"
            "    return NULL; /* a negative size */\n"
            "  }\n"
            "  return aligned_alloc(64, nbytes == 0 ? 64 : (nbytes + 63) & ~(size_t)63);\n"
            "}"),
    }
    for bits in (8, 16, 32, 64):
        table.update(_floor_helpers(f"i{bits}", f"int{bits}_t"))
        table.update(_int_minmax(f"i{bits}", f"int{bits}_t"))
        table.update(_int_minmax(f"u{bits}", f"uint{bits}_t"))
    table.update({
        # float16: every operation rounds to half, as the IR's per-operation semantics
        "tvmpy_floordiv_f16": (
            "static inline float tvmpy_floordiv_f16(float a, float b) {\n"
            "  return floorf(tvmpy_f16(a / b));\n"
            "}"),
        "tvmpy_floormod_f16": (
            "static inline float tvmpy_floormod_f16(float a, float b) {\n"
            "  return tvmpy_f16(a - tvmpy_f16(floorf(tvmpy_f16(a / b)) * b));\n"
            "}"),
    })
    table.update(_float_helpers("f32", "float"))
    table.update(_float_helpers("f64", "double"))
    return table


class HelperTable:
    """The helpers one source uses, in first-use order."""

    _ALL = _all_helpers()

    def __init__(self) -> None:
        self.used: dict[str, str] = {}

    def use(self, name: str) -> str:
        if name not in self.used:
            try:
                self.used[name] = self._ALL[name]
            except KeyError:
                raise NotImplementedError(f"C backend: no helper {name}") from None
        return name

    def source(self) -> str:
        return "\n\n".join(self.used.values())
