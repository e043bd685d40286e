"""Data types as strings, TVM style: ``"float32"``, ``"int8"``, ``"bool"``, ``"handle"``,
and vector types with a lane suffix: ``"float32x16"``.

Strings keep IR printing and user code readable; the helpers here parse them once and cache.

Storage-only types (ONNX's low-precision element types): ``"bfloat16"``, the float8 formats
``"float8_e4m3fn"``, ``"float8_e4m3fnuz"``, ``"float8_e5m2"``, ``"float8_e5m2fnuz"``, the
4-bit float ``"float4_e2m1fn"``, the power-of-two scale type ``"float8_e8m0fnu"``, and the
sub-byte integers ``"int4"``, ``"uint4"``, ``"int2"``, ``"uint2"``. They name how elements are
stored, not how they are computed: TIR's ``LegalizeStorageDtypes`` pass stores them as the
unsigned/signed integer of :func:`storage_of` (bits, one element per byte for the 4/2-bit types,
as ``ml_dtypes`` lays them out in numpy) and computes in :func:`compute_of` (float32 / int32).
No code generator sees them. On the numpy side they are ``ml_dtypes``' types of the same names.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DType",
    "parse",
    "with_lanes",
    "element_of",
    "lanes_of",
    "is_float",
    "is_int",
    "is_uint",
    "is_bool",
    "is_handle",
    "is_integer",
    "bits_of",
    "bytes_of",
    "to_numpy",
    "from_numpy",
    "SUPPORTED",
    "STORAGE_ONLY",
    "is_storage_only",
    "is_low_float",
    "storage_of",
    "compute_of",
]


class DType(NamedTuple):
    """A parsed dtype: kind is one of 'int', 'uint', 'float', 'bool', 'handle', or for a
    storage-only float type its full name ('bfloat16', 'float8_e4m3fn', ...)."""

    kind: str
    bits: int
    lanes: int

    def __str__(self) -> str:
        if self.kind == "bool":
            base = "bool"
        elif self.kind == "handle" or self.kind in _LOW_FLOATS:
            base = self.kind
        else:
            base = f"{self.kind}{self.bits}"
        return base if self.lanes == 1 else f"{base}x{self.lanes}"


SUPPORTED = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "handle",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float4_e2m1fn",
    "float8_e8m0fnu",
    "int4",
    "uint4",
    "int2",
    "uint2",
)

# storage-only type -> (storage dtype, compute dtype)
STORAGE_ONLY: dict[str, tuple[str, str]] = {
    "bfloat16": ("uint16", "float32"),
    "float8_e4m3fn": ("uint8", "float32"),
    "float8_e4m3fnuz": ("uint8", "float32"),
    "float8_e5m2": ("uint8", "float32"),
    "float8_e5m2fnuz": ("uint8", "float32"),
    "float4_e2m1fn": ("uint8", "float32"),
    "float8_e8m0fnu": ("uint8", "float32"),
    "int4": ("int8", "int32"),
    "uint4": ("uint8", "int32"),
    "int2": ("int8", "int32"),
    "uint2": ("uint8", "int32"),
}
_LOW_FLOATS = {"bfloat16": 16, "float8_e4m3fn": 8, "float8_e4m3fnuz": 8, "float8_e5m2": 8,
               "float8_e5m2fnuz": 8, "float4_e2m1fn": 4, "float8_e8m0fnu": 8}


@cache
def parse(dtype: str) -> DType:
    """Parse a dtype string; raise ValueError with the list of valid names otherwise."""
    if not isinstance(dtype, str):
        dtype = str(dtype)
    base, lanes = dtype, 1
    if "x" in dtype:
        base, _, lane_str = dtype.partition("x")
        if not lane_str.isdigit() or int(lane_str) < 1:
            raise ValueError(f"invalid dtype {dtype!r}: lanes must be a positive integer")
        lanes = int(lane_str)
    if base == "bool":
        return DType("bool", 1, lanes)
    if base == "handle":
        return DType("handle", 64, lanes)
    if base in _LOW_FLOATS:
        return DType(base, _LOW_FLOATS[base], lanes)
    for kind in ("uint", "int", "float"):
        if base.startswith(kind) and base[len(kind) :].isdigit():
            bits = int(base[len(kind) :])
            if f"{kind}{bits}" in SUPPORTED:
                return DType(kind, bits, lanes)
    raise ValueError(f"unsupported dtype {dtype!r}; supported: {', '.join(SUPPORTED)} (+ 'xN' lanes)")


def with_lanes(dtype: str, lanes: int) -> str:
    d = parse(dtype)
    return str(DType(d.kind, d.bits, lanes))


def element_of(dtype: str) -> str:
    return with_lanes(dtype, 1)


def lanes_of(dtype: str) -> int:
    return parse(dtype).lanes


def bits_of(dtype: str) -> int:
    return parse(dtype).bits


def bytes_of(dtype: str) -> int:
    """Bytes of one element (bool counts as 1 byte, as stored)."""
    d = parse(dtype)
    return max(1, d.bits // 8) * d.lanes


def is_float(dtype: str) -> bool:
    return parse(dtype).kind == "float"


def is_int(dtype: str) -> bool:
    return parse(dtype).kind == "int"


def is_uint(dtype: str) -> bool:
    return parse(dtype).kind == "uint"


def is_bool(dtype: str) -> bool:
    return parse(dtype).kind == "bool"


def is_handle(dtype: str) -> bool:
    return parse(dtype).kind == "handle"


def is_integer(dtype: str) -> bool:
    """int, uint or bool: the types index arithmetic works on."""
    return parse(dtype).kind in ("int", "uint", "bool")


def is_storage_only(dtype: str) -> bool:
    """bfloat16, float8_*, int4/uint4/int2/uint2 (any lanes): stored, never computed on."""
    return element_of(dtype) in STORAGE_ONLY


def is_low_float(dtype: str) -> bool:
    """bfloat16 or a float8 format (any lanes)."""
    return parse(dtype).kind in _LOW_FLOATS


def storage_of(dtype: str) -> str:
    """The integer dtype holding the bits of a storage-only ``dtype`` (same lanes); others as is."""
    d = parse(dtype)
    e = element_of(dtype)
    return with_lanes(STORAGE_ONLY[e][0], d.lanes) if e in STORAGE_ONLY else dtype


def compute_of(dtype: str) -> str:
    """float32 (low floats) or int32 (sub-byte ints), same lanes; other dtypes as is."""
    d = parse(dtype)
    e = element_of(dtype)
    return with_lanes(STORAGE_ONLY[e][1], d.lanes) if e in STORAGE_ONLY else dtype


def to_numpy(dtype: str) -> np.dtype:
    """The numpy dtype that stores one element of ``dtype`` (``ml_dtypes``' types for the
    storage-only ones)."""
    import numpy as np

    d = parse(dtype)
    if d.kind == "handle":
        raise ValueError("handle has no numpy dtype")
    e = element_of(dtype)
    if e in STORAGE_ONLY:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, e))
    return np.dtype("bool" if d.kind == "bool" else f"{d.kind}{d.bits}")


def from_numpy(np_dtype: Any) -> str:
    import numpy as np

    name = np.dtype(np_dtype).name
    parse(name)
    return name
