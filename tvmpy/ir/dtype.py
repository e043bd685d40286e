"""Data types as strings, TVM style: ``"float32"``, ``"int8"``, ``"bool"``, ``"handle"``,
and vector types with a lane suffix: ``"float32x16"``.

Strings keep IR printing and user code readable; the helpers here parse them once and cache.
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
]


class DType(NamedTuple):
    """A parsed dtype: kind is one of 'int', 'uint', 'float', 'bool', 'handle'."""

    kind: str
    bits: int
    lanes: int

    def __str__(self) -> str:
        if self.kind == "bool":
            base = "bool"
        elif self.kind == "handle":
            base = "handle"
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
)


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


def to_numpy(dtype: str) -> np.dtype:
    """The numpy dtype that stores one element of ``dtype``."""
    import numpy as np

    d = parse(dtype)
    if d.kind == "handle":
        raise ValueError("handle has no numpy dtype")
    return np.dtype("bool" if d.kind == "bool" else f"{d.kind}{d.bits}")


def from_numpy(np_dtype: Any) -> str:
    import numpy as np

    name = np.dtype(np_dtype).name
    parse(name)
    return name
