"""Parameter dictionaries as bytes: ``runtime.save_param_dict`` / ``runtime.load_param_dict``
(also spelled ``relay.save_param_dict`` / ``relay.load_param_dict``, as in TVM).

The layout is TVM's NDArray-list format (little-endian), so blobs are exchangeable with TVM:

    u64 0xF7E58D4F05049CB7 (list magic), u64 reserved,
    u64 number of names, then per name: u64 length, utf-8 bytes,
    u64 number of arrays, then per array:
        u64 0xDD5E40F096B4A13F (array magic), u64 reserved,
        i32 device_type (1 = CPU), i32 device_id, i32 ndim,
        u8 type code (0 int, 1 uint, 2 float, 6 bool), u8 bits, u16 lanes,
        i64 shape[ndim], i64 data bytes, the data (compact row-major).

``bool`` is written as TVM writes it (uint, 1 bit, one byte per element); bfloat16 and the
float8 formats with DLPack's codes (4; 10-13, as ``runtime.dlpack``), their ml_dtypes bytes;
int4/uint4/int2/uint2 with code 0/1 and 4 or 2 bits and float4_e2m1fn with DLPack's 17 and 4
bits, but one element per byte as tvmpy stores them (TVM packs them). The executor factory embeds these bytes in exported libraries; this
module only needs numpy (and ml_dtypes for the low-precision types).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..ir import dtype as dt
from . import ndarray as nd
from .ndarray import NDArray

__all__ = ["save_param_dict", "load_param_dict", "ParamDictError"]

LIST_MAGIC = 0xF7E58D4F05049CB7
ARRAY_MAGIC = 0xDD5E40F096B4A13F
_KDL_CPU = 1

# numpy dtype name -> (code, bits)
_CODES = {
    "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
    "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
    "float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "bool": (1, 1),
}
_CODES.update({
    "bfloat16": (4, 16), "float8_e4m3fn": (10, 8), "float8_e4m3fnuz": (11, 8),
    "float8_e5m2": (12, 8), "float8_e5m2fnuz": (13, 8), "float8_e8m0fnu": (14, 8),
    "float4_e2m1fn": (17, 4),
    "int4": (0, 4), "uint4": (1, 4), "int2": (0, 2), "uint2": (1, 2),
})
_DTYPES = {v: k for k, v in _CODES.items()}
_DTYPES[(6, 8)] = "bool"  # DLPack >= 0.8 kDLBool


class ParamDictError(ValueError):
    """The bytes are not a valid parameter dictionary."""


def _as_numpy(name: str, value: Any) -> np.ndarray:
    arr = value._arr if isinstance(value, NDArray) else np.asarray(value)
    if arr.dtype.name not in _CODES:
        raise TypeError(f"save_param_dict: parameter {name!r} has dtype {arr.dtype}, which cannot "
                        f"be saved; supported: {', '.join(_CODES)}")
    # (not np.ascontiguousarray: it turns a 0-d array into shape (1,))
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def save_param_dict(params: Mapping[str, Any]) -> bytes:
    """Serialize ``{name: NDArray | numpy array}`` to bytes (TVM's format, see the docstring)."""
    if not isinstance(params, Mapping):
        raise TypeError(f"save_param_dict: expected a dict of name -> array, got "
                        f"{type(params).__name__}")
    names = list(params)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"save_param_dict: parameter names must be str, got {n!r}")
    chunks: list[bytes] = [struct.pack("<QQQ", LIST_MAGIC, 0, len(names))]
    for n in names:
        b = n.encode("utf-8")
        chunks.append(struct.pack("<Q", len(b)))
        chunks.append(b)
    chunks.append(struct.pack("<Q", len(names)))
    for n in names:
        arr = _as_numpy(n, params[n])
        code, bits = _CODES[arr.dtype.name]
        chunks.append(struct.pack("<QQiiiBBH", ARRAY_MAGIC, 0, _KDL_CPU, 0, arr.ndim, code, bits, 1))
        chunks.append(struct.pack(f"<{arr.ndim}q", *arr.shape))
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        chunks.append(struct.pack("<q", len(data)))
        chunks.append(data)
    return b"".join(chunks)


class _Reader:
    def __init__(self, buf: memoryview):
        self.buf = buf
        self.pos = 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ParamDictError(f"load_param_dict: data truncated while reading {what} at byte "
                                 f"{self.pos} (need {n} bytes, {len(self.buf) - self.pos} left)")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


def load_param_dict(data: bytes | bytearray | memoryview, copy: bool = True) -> dict:
    """Parse bytes written by :func:`save_param_dict` into ``{name: NDArray}``.

    ``copy=False`` returns read-only numpy views into ``data`` instead (no copy; the caller keeps
    ``data`` alive and copies where it needs aligned, writable memory)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_param_dict: expected bytes, got {type(data).__name__}")
    r = _Reader(memoryview(data).cast("B"))
    magic, _ = r.unpack("<QQ", "the header")
    if magic != LIST_MAGIC:
        raise ParamDictError(f"load_param_dict: not a parameter dictionary (magic {magic:#x}, "
                             f"expected {LIST_MAGIC:#x})")
    (count,) = r.unpack("<Q", "the number of names")
    if count > len(r.buf):
        raise ParamDictError(f"load_param_dict: corrupt header ({count} names in "
                             f"{len(r.buf)} bytes)")
    names = []
    for i in range(count):
        (n,) = r.unpack("<Q", f"the length of name {i}")
        try:
            names.append(bytes(r.take(n, f"name {i}")).decode("utf-8"))
        except UnicodeDecodeError:
            raise ParamDictError(f"load_param_dict: name {i} is not valid utf-8") from None
    (narr,) = r.unpack("<Q", "the number of arrays")
    if narr != count:
        raise ParamDictError(f"load_param_dict: {count} names but {narr} arrays")
    out: dict = {}
    for name in names:
        amagic, _, dev_type, _, ndim, code, bits, lanes = r.unpack(
            "<QQiiiBBH", f"the header of array {name!r}")
        if amagic != ARRAY_MAGIC:
            raise ParamDictError(f"load_param_dict: array {name!r}: bad magic {amagic:#x}")
        if dev_type != _KDL_CPU:
            raise ParamDictError(f"load_param_dict: array {name!r} is on device type {dev_type}; "
                                 "only CPU arrays (1) can be loaded")
        dtype = _DTYPES.get((code, bits))
        if dtype is None or lanes != 1:
            raise ParamDictError(f"load_param_dict: array {name!r} has unsupported data type "
                                 f"(code={code}, bits={bits}, lanes={lanes})")
        if not 0 <= ndim <= 64:
            raise ParamDictError(f"load_param_dict: array {name!r} has ndim {ndim}")
        shape = r.unpack(f"<{ndim}q", f"the shape of {name!r}")
        if any(s < 0 for s in shape):
            raise ParamDictError(f"load_param_dict: array {name!r} has negative shape {shape}")
        (nbytes,) = r.unpack("<q", f"the size of {name!r}")
        npd = dt.to_numpy(dtype).newbyteorder("<")
        want = int(np.prod(shape, dtype=np.int64)) * npd.itemsize
        if nbytes != want:
            raise ParamDictError(f"load_param_dict: array {name!r} of shape {shape} {dtype} "
                                 f"needs {want} bytes, header says {nbytes}")
        arr = np.frombuffer(r.take(nbytes, f"the data of {name!r}"), dtype=npd).reshape(shape)
        if copy:
            out[name] = nd.array(arr.astype(dt.to_numpy(dtype), copy=False))
        else:
            arr.flags.writeable = False  # may view read-only mapped memory (a library's data)
            out[name] = arr
    if r.pos != len(r.buf):
        raise ParamDictError(f"load_param_dict: {len(r.buf) - r.pos} unexpected trailing bytes")
    return out
