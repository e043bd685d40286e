"""DLPack with ctypes: export an NDArray as a capsule, import any DLPack producer's tensor.

Export (:func:`to_capsule`): a ``DLManagedTensor`` (or ``DLManagedTensorVersioned`` when the
consumer asks for ``max_version >= (1, 0)``) allocated as a ctypes struct and kept, together with
the owning array, in ``_LIVE`` until the consumer calls the deleter. A capsule that is never
consumed runs the deleter from its destructor. Both callbacks are ctypes C callbacks, which take
the GIL themselves, so a consumer may free the tensor from any thread.

Import (:func:`from_dlpack`): calls ``obj.__dlpack__`` (or takes a capsule), renames the capsule
``used_dltensor`` as the protocol requires, and wraps the memory in a numpy view (with the
producer's strides and byte offset) whose base owns the managed tensor: the producer's deleter
runs when the last view is gone.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["DLDevice", "DLDataType", "DLTensor", "DLManagedTensor", "DLManagedTensorVersioned",
           "to_capsule", "from_dlpack", "dtype_to_dl", "dtype_from_dl"]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool = 0, 1, 2, 4, 6
# DLPack 1.1's float8 codes (dlpack.h DLDataTypeCode), for ml_dtypes' types of the same names
_DL_LOW_FLOAT = {"bfloat16": (kDLBfloat, 16), "float8_e4m3fn": (10, 8),
                 "float8_e4m3fnuz": (11, 8), "float8_e5m2": (12, 8), "float8_e5m2fnuz": (13, 8),
                 "float8_e8m0fnu": (14, 8)}
_DL_LOW_FLOAT_BY_CODE = {v: k for k, v in _DL_LOW_FLOAT.items()}

# capsule names must outlive every capsule: module-level bytes
_NAME = b"dltensor"
_USED = b"used_dltensor"
_NAME_V = b"dltensor_versioned"
_USED_V = b"used_dltensor_versioned"

_api = ctypes.PyDLL(None)  # own function objects: argtypes here don't affect ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# the destructor gets a capsule whose refcount is 0: use raw pointers, never py_object
_raw_is_valid = ctypes.PyDLL(None).PyCapsule_IsValid
_raw_is_valid.restype = ctypes.c_int
_raw_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_raw_get_pointer = ctypes.PyDLL(None).PyCapsule_GetPointer
_raw_get_pointer.restype = ctypes.c_void_p
_raw_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# address of an exported managed tensor -> (struct, shape/strides arrays, owner)
_LIVE: dict[int, tuple] = {}


# ---- dtypes ------------------------------------------------------------------------------------
def dtype_to_dl(dtype: np.dtype) -> tuple[int, int]:
    if dtype.name in _DL_LOW_FLOAT:
        return _DL_LOW_FLOAT[dtype.name]
    if dtype.name in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn"):
        raise BufferError(f"dtype {dtype.name} is stored one element per byte in tvmpy; DLPack's "
                          "sub-byte types are packed: cast to int8/uint8 to exchange it")
    kind = dtype.kind
    if kind == "b":
        return kDLBool, 8
    code = {"i": kDLInt, "u": kDLUInt, "f": kDLFloat}.get(kind)
    if code is None:
        raise BufferError(f"dtype {dtype} has no DLPack code in tvmpy")
    return code, dtype.itemsize * 8


def dtype_from_dl(code: int, bits: int, lanes: int) -> np.dtype:
    if lanes != 1:
        raise BufferError(f"DLPack tensors with {lanes} lanes are not supported")
    if code == kDLBool or (code == kDLUInt and bits == 1):
        if bits not in (1, 8):
            raise BufferError(f"DLPack bool with {bits} bits is not supported")
        return np.dtype(bool)
    low = _DL_LOW_FLOAT_BY_CODE.get((code, bits))
    if low is not None:
        from ..ir.dtype import to_numpy

        return to_numpy(low)
    kind = {kDLInt: "int", kDLUInt: "uint", kDLFloat: "float"}.get(code)
    if kind is None or bits not in (8, 16, 32, 64) or (kind == "float" and bits == 8):
        raise BufferError(f"DLPack dtype (code={code}, bits={bits}) is not supported by tvmpy "
                          "(complex, packed sub-byte and other float8 formats have no storage "
                          "type here)")
    return np.dtype(f"{kind}{bits}")


# ---- export ------------------------------------------------------------------------------------
def _deleter(addr: int) -> None:
    try:
        _LIVE.pop(addr, None)
    except Exception:  # interpreter shutdown: nothing left to free
        pass


_DELETER_FN = _DELETER(_deleter)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(cap: int) -> None:
    try:
        for name in (_NAME, _NAME_V):
            if _raw_is_valid(cap, name):  # not consumed: we still own the tensor
                _deleter(_raw_get_pointer(cap, name))
                return
    except Exception:
        pass


def to_capsule(arr: np.ndarray, owner: Any, device: tuple[int, int] = (1, 0),
               versioned: bool = False, read_only: bool = False, copied: bool = False) -> Any:
    """A DLPack capsule viewing ``arr`` (kept alive with ``owner`` until the consumer is done)."""
    code, bits = dtype_to_dl(arr.dtype)
    ndim = arr.ndim
    shape = (ctypes.c_int64 * max(ndim, 1))(*arr.shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*(s // arr.itemsize for s in arr.strides))
    if any(s % arr.itemsize for s in arr.strides):
        raise BufferError("cannot export an array whose strides are not multiples of its itemsize")
    mt = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = mt.dl_tensor
    t.data = arr.ctypes.data if arr.size else (arr.ctypes.data or None)
    t.device = DLDevice(*device)
    t.ndim = ndim
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    mt.deleter = _DELETER_FN
    if versioned:
        mt.version = DLPackVersion(1, 0)
        mt.flags = (FLAG_READ_ONLY if read_only else 0) | (FLAG_IS_COPIED if copied else 0)
    addr = ctypes.addressof(mt)
    mt.manager_ctx = addr
    _LIVE[addr] = (mt, shape, strides, arr, owner)
    name = _NAME_V if versioned else _NAME
    try:
        return _api.PyCapsule_New(addr, name, ctypes.cast(_capsule_destructor, ctypes.c_void_p))
    except BaseException:
        _LIVE.pop(addr, None)
        raise


def device_capsule(ptr: int, shape: tuple[int, ...], dtype: np.dtype, owner: Any,
                   device: tuple[int, int], versioned: bool = False) -> Any:
    """A DLPack capsule of compact row-major memory at ``ptr`` on ``device`` (e.g. CUDA memory,
    which numpy cannot view), kept alive with ``owner`` until the consumer is done."""
    code, bits = dtype_to_dl(np.dtype(dtype))
    ndim = len(shape)
    shp = (ctypes.c_int64 * max(ndim, 1))(*shape)
    mt = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = mt.dl_tensor
    t.data = ptr
    t.device = DLDevice(*device)
    t.ndim = ndim
    t.dtype = DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    t.strides = None  # compact row-major
    t.byte_offset = 0
    mt.deleter = _DELETER_FN
    if versioned:
        mt.version = DLPackVersion(1, 0)
        mt.flags = 0
    addr = ctypes.addressof(mt)
    mt.manager_ctx = addr
    _LIVE[addr] = (mt, shp, None, None, owner)
    try:
        return _api.PyCapsule_New(addr, _NAME_V if versioned else _NAME,
                                  ctypes.cast(_capsule_destructor, ctypes.c_void_p))
    except BaseException:
        _LIVE.pop(addr, None)
        raise


# ---- import ------------------------------------------------------------------------------------
class _ImportedTensor:
    """Owns a consumed managed tensor: calls the producer's deleter once, when collected."""

    __slots__ = ("addr", "deleter", "__weakref__")

    def __init__(self, addr: int, deleter: Any):
        self.addr = addr
        self.deleter = deleter

    def __del__(self) -> None:
        d, self.deleter = self.deleter, None
        if d:
            d(self.addr)


def _is_capsule(obj: Any) -> bool:
    return type(obj).__name__ == "PyCapsule"


def from_dlpack(obj: Any) -> tuple[np.ndarray, tuple[int, int]]:
    """Consume a DLPack producer (``__dlpack__``) or capsule; return a numpy view of its memory
    (owning the producer's tensor) and the (device_type, device_id) it lives on."""
    return _from_dlpack(obj, (1, 3))


def from_dlpack_device(obj: Any, device_types: tuple[int, ...]) -> tuple[
        int, tuple[int, ...], tuple[int, ...] | None, np.dtype, tuple[int, int], Any]:
    """Consume a DLPack producer of device memory (e.g. a CUDA tensor, ``device_types=(2,)``):
    (data address, shape, element strides or None, dtype, device, owner of the tensor)."""
    return _from_dlpack(obj, device_types, raw=True)


def _from_dlpack(obj: Any, allowed: tuple[int, ...], raw: bool = False) -> tuple:
    kinds = "CPU" if allowed == (1, 3) else "device types " + ", ".join(map(str, allowed))
    if _is_capsule(obj):
        capsule = obj
    elif hasattr(obj, "__dlpack__"):
        if hasattr(obj, "__dlpack_device__"):
            dev = tuple(int(x) for x in obj.__dlpack_device__())
            if dev[0] not in allowed:
                raise BufferError(f"from_dlpack: the tensor lives on device {dev}; only "
                                  f"{kinds} memory can be imported here")
        try:
            capsule = obj.__dlpack__(max_version=(1, 0))
        except TypeError:  # producer predating DLPack 1.0
            capsule = obj.__dlpack__()
    else:
        raise TypeError(f"from_dlpack expects an object with __dlpack__ (numpy array, torch "
                        f"tensor, NDArray) or a DLPack capsule, got {type(obj).__name__}")
    if _api.PyCapsule_IsValid(capsule, _NAME_V):
        addr = _api.PyCapsule_GetPointer(capsule, _NAME_V)
        mt: Any = DLManagedTensorVersioned.from_address(addr)
        if mt.version.major > 1:
            raise BufferError(f"DLPack version {mt.version.major}.{mt.version.minor} is newer than "
                              "1.x, which tvmpy reads")
        read_only = bool(mt.flags & FLAG_READ_ONLY)
        used = _USED_V
    elif _api.PyCapsule_IsValid(capsule, _NAME):
        addr = _api.PyCapsule_GetPointer(capsule, _NAME)
        mt = DLManagedTensor.from_address(addr)
        read_only = False
        used = _USED
    else:
        raise BufferError("from_dlpack: the capsule is not an unconsumed 'dltensor' "
                          "(a capsule can be consumed only once)")
    t = mt.dl_tensor
    device = (t.device.device_type, t.device.device_id)
    fptr = ctypes.cast(mt.deleter, ctypes.c_void_p).value  # copy: don't view the struct later
    deleter = _DELETER(fptr) if fptr else None
    # from here on we own the tensor: rename first, so the capsule never frees it as well
    if _api.PyCapsule_SetName(capsule, used) != 0:
        raise BufferError("from_dlpack: cannot mark the capsule as consumed")
    owner = _ImportedTensor(addr, deleter)
    if device[0] not in allowed:
        del owner  # runs the deleter
        raise BufferError(f"from_dlpack: the tensor lives on device {device}; only {kinds} "
                          "memory can be imported here")
    dtype = dtype_from_dl(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    ndim = t.ndim
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    if raw:
        st = tuple(int(t.strides[i]) for i in range(ndim)) if t.strides else None
        return (t.data or 0) + t.byte_offset, shape, st, dtype, device, owner
    if t.strides:
        strides = tuple(int(t.strides[i]) for i in range(ndim))
    else:
        compact, acc = [], 1
        for n in reversed(shape):
            compact.append(acc)
            acc *= max(n, 1)
        strides = tuple(reversed(compact))
    item = dtype.itemsize
    size = int(np.prod(shape, dtype=np.int64)) if ndim else 1
    if size == 0 or not t.data:
        arr = np.empty(shape, dtype)
        arr.flags.writeable = not read_only
        return arr, device
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
    start = t.data + t.byte_offset + lo * item
    holder = (ctypes.c_char * ((hi - lo + 1) * item)).from_address(start)
    holder._tvmpy_owner = owner  # type: ignore[attr-defined]  # the view's base keeps it alive
    arr = np.ndarray(shape, dtype, buffer=holder,  # type: ignore[arg-type]
                     offset=-lo * item,
                     strides=tuple(s * item for s in strides))
    if read_only:
        arr.flags.writeable = False
    return arr, device
