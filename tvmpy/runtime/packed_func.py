"""The PackedFunc registry: TVM's global function table (``tvm.register_func``,
``tvm.get_global_func``), reachable from Python, from generated code and over RPC.

A :class:`PackedFunc` is a callable with TVM's C calling convention underneath
(``TVMBackendPackedCFunc``)::

    int32_t f(TVMValue* args, int32_t* type_codes, int32_t num_args,
              TVMValue* ret, int32_t* ret_type_code, void* resource_handle)

It wraps either a Python callable or the address of such a C function (the BLAS functions of
runtime/blas.py). Calling it from Python calls the Python function directly, or marshals the
arguments (NDArray / numpy arrays as ``DLTensor*``, numbers, strings, None) for the C one.

Generated code (``tir.call_packed("name", ...)``, codegen/llvm_packed.py and c_packed.py) reaches the registry
through one function pointer that every loaded library carries, ``__tvmpy_packed_lookup``
(``void* lookup(const char* name)``, set by :func:`bind_library` when the runtime loads the
library; the linker defines it weak and NULL). The lookup runs once per name per library and
returns a *slot*: a stable cell holding the address of ``{fn, resource}``; the library caches the
slot, so every later call is one load and one indirect C call. Re-registering a name
(``override=True``) swaps the slot's record, so libraries loaded earlier call the new function.

A Python function called from generated code runs through a ctypes callback: one Python call
per ``call_packed`` executed (the whole buffer is passed at once, never one call per element),
with the GIL taken for that call. Its exceptions do not cross C: the callback stores them, returns
-1, the kernel returns -1, and the runtime raises them (:func:`take_error`) with the kernel's
message. C functions report errors through ``__tvmpy_packed_set_error(const char*)``.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .abi import LOOKUP_SYMBOL
from .dlpack import DLTensor, dtype_from_dl, dtype_to_dl
from .ndarray import NDArray

__all__ = ["PackedFunc", "register_func", "get_global_func", "list_global_func_names",
           "remove_global_func", "convert", "convert_to_tvm_func",
           "bind_library", "take_error", "TVMValue", "PACKED_CFUNC", "LOOKUP_SYMBOL",
           "SET_ERROR_SYMBOL", "ArgTypeCode"]

SET_ERROR_SYMBOL = "__tvmpy_packed_set_error"


class ArgTypeCode:
    """TVM's type codes of packed arguments (the subset tvmpy passes)."""
    INT = 0
    UINT = 1
    FLOAT = 2
    HANDLE = 3
    NULL = 4
    DLTENSOR_HANDLE = 7
    STR = 11


class TVMValue(ctypes.Union):
    _fields_ = [("v_int64", ctypes.c_int64), ("v_float64", ctypes.c_double),
                ("v_handle", ctypes.c_void_p), ("v_str", ctypes.c_char_p)]


PACKED_CFUNC = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(TVMValue),
                                ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                ctypes.POINTER(TVMValue), ctypes.POINTER(ctypes.c_int32),
                                ctypes.c_void_p)


class _Record(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("resource", ctypes.c_void_p)]


# ---- errors raised inside packed calls --------------------------------------------------------
_err_lock = threading.Lock()
_pending: list[tuple[str, BaseException | None]] = []


def _set_pending(msg: str, exc: BaseException | None = None) -> None:
    with _err_lock:
        _pending.append((msg, exc))
        del _pending[:-8]  # keep the last few only


def take_error() -> tuple[str, BaseException | None] | None:
    """The error a packed function reported since the last call (message, Python exception or
    None), consumed; None when there is none."""
    with _err_lock:
        if not _pending:
            return None
        out = _pending[-1]
        _pending.clear()
        return out


def _c_set_error(msg: bytes | None) -> None:
    _set_pending(msg.decode("utf-8", "replace") if msg else "unknown error")


_SET_ERROR_CB = ctypes.CFUNCTYPE(None, ctypes.c_char_p)(_c_set_error)


# ---- argument conversion ----------------------------------------------------------------------
def _dltensor_of(arr: np.ndarray, keep: list) -> int:
    """A ``DLTensor`` (CPU) describing ``arr``'s memory; its address. ``keep`` holds the structs
    alive for the call."""
    code, bits = dtype_to_dl(arr.dtype)
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    t = DLTensor()
    t.data = arr.ctypes.data
    t.device.device_type, t.device.device_id = 1, 0
    t.ndim = arr.ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    if not arr.flags.c_contiguous:
        if any(s % arr.itemsize for s in arr.strides):
            raise ValueError("an array whose strides are not whole elements cannot be passed")
        strides = (ctypes.c_int64 * arr.ndim)(*(s // arr.itemsize for s in arr.strides))
        t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        keep.append(strides)
    t.byte_offset = 0
    keep.extend((shape, t, arr))
    return ctypes.addressof(t)


def _pack_args(name: str, args: tuple, keep: list) -> tuple[Any, Any]:
    n = len(args)
    vals = (TVMValue * max(n, 1))()
    codes = (ctypes.c_int32 * max(n, 1))()
    for i, a in enumerate(args):
        if isinstance(a, NDArray):
            if a._on_device:
                raise TypeError(f"{name}: argument {i} is an array in device memory; C packed "
                                "functions take host (CPU) arrays")
            a = a._arr
        if isinstance(a, np.ndarray):
            vals[i].v_handle = _dltensor_of(a, keep)
            codes[i] = ArgTypeCode.DLTENSOR_HANDLE
        elif isinstance(a, (bool, np.bool_, int, np.integer)):
            v = int(a)
            if not -(1 << 63) <= v < (1 << 63):
                raise OverflowError(f"{name}: argument {i} = {v} does not fit in int64")
            vals[i].v_int64 = v
            codes[i] = ArgTypeCode.INT
        elif isinstance(a, (float, np.floating)):
            vals[i].v_float64 = float(a)
            codes[i] = ArgTypeCode.FLOAT
        elif isinstance(a, str):
            b = a.encode("utf-8")
            keep.append(b)
            vals[i].v_str = b
            codes[i] = ArgTypeCode.STR
        elif a is None:
            vals[i].v_handle = None
            codes[i] = ArgTypeCode.NULL
        elif isinstance(a, ctypes.c_void_p):
            vals[i].v_handle = a.value
            codes[i] = ArgTypeCode.HANDLE
        else:
            raise TypeError(f"{name}: argument {i} of type {type(a).__name__} cannot be passed to "
                            "a C packed function (pass NDArrays or numpy arrays, numbers, strings, "
                            "None or ctypes.c_void_p)")
    return vals, codes


_DTYPES: dict[tuple[int, int, int], np.dtype] = {}


class _Memory:
    """Raw memory described by ``__array_interface__`` (numpy views it without copying)."""

    __slots__ = ("__array_interface__",)

    def __init__(self, iface: dict):
        self.__array_interface__ = iface


def _array_view(addr: int | None) -> NDArray:
    """An NDArray sharing the memory of the CPU ``DLTensor`` at ``addr`` (no copy: writes go to
    the caller's buffer, as TVM's callbacks receive their arguments)."""
    if not addr:
        raise ValueError("NULL DLTensor handle")
    t = DLTensor.from_address(addr)
    if t.device.device_type != 1:
        raise ValueError(f"DLTensor on device type {t.device.device_type}: only CPU arrays can be "
                         "passed to a Python function")
    key = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
    dtype = _DTYPES.get(key)
    if dtype is None:
        dtype = _DTYPES[key] = dtype_from_dl(*key)
    ndim = t.ndim
    shape = tuple(t.shape[:ndim]) if ndim else ()
    if min(shape, default=1) <= 0:
        if min(shape) < 0:
            raise ValueError(f"DLTensor with a negative extent {shape}")
        return NDArray(np.empty(shape, dtype))
    if not t.data:
        raise ValueError("DLTensor with a NULL data pointer")
    strides = None
    if t.strides:
        estrides = t.strides[:ndim]
        if min(estrides, default=0) < 0:
            raise ValueError(f"DLTensor with negative strides {estrides}")
        strides = tuple(st * dtype.itemsize for st in estrides)
    iface = {"data": (t.data + t.byte_offset, False), "shape": shape, "strides": strides,
             "typestr": dtype.str, "version": 3}
    return NDArray(np.asarray(_Memory(iface)))


def _unpack(v: TVMValue, code: int) -> Any:
    if code in (ArgTypeCode.INT, ArgTypeCode.UINT):
        return int(v.v_int64)
    if code == ArgTypeCode.FLOAT:
        return float(v.v_float64)
    if code == ArgTypeCode.NULL:
        return None
    if code == ArgTypeCode.DLTENSOR_HANDLE:
        return _array_view(v.v_handle)
    if code == ArgTypeCode.STR:
        return v.v_str.decode("utf-8", "replace") if v.v_str else ""
    if code == ArgTypeCode.HANDLE:
        return ctypes.c_void_p(v.v_handle)
    raise TypeError(f"unsupported packed argument type code {code}")


def _pack_return(name: str, r: Any, ret: Any, ret_code: Any) -> None:
    if r is None or isinstance(r, NDArray):  # e.g. ``lambda x, y: y.copyfrom(...)``: no value
        ret[0].v_int64 = 0
        ret_code[0] = ArgTypeCode.NULL
    elif isinstance(r, (bool, np.bool_, int, np.integer)):
        ret[0].v_int64 = int(r)
        ret_code[0] = ArgTypeCode.INT
    elif isinstance(r, (float, np.floating)):
        ret[0].v_float64 = float(r)
        ret_code[0] = ArgTypeCode.FLOAT
    else:
        raise TypeError(f"{name} returned {type(r).__name__}; a function called from generated "
                        "code may return a number or None (write arrays into an output argument)")


def _unpack_return(ret: TVMValue, code: int) -> Any:
    if code == ArgTypeCode.NULL:
        return None
    return _unpack(ret, code)


# ---- PackedFunc -------------------------------------------------------------------------------
class PackedFunc:
    """A function of the registry (TVM's ``tvm.runtime.PackedFunc``): call it with ``f(*args)``.

    ``PackedFunc(python_callable)`` wraps a Python function; ``PackedFunc.from_address(addr)``
    wraps a C function with TVM's packed signature."""

    __slots__ = ("_py", "_caddr", "_resource", "_keep", "_cfunc", "name", "__weakref__")

    def __init__(self, f: Callable[..., Any] | None = None, name: str = ""):
        if f is not None and not callable(f):
            raise TypeError(f"PackedFunc wraps a callable, got {type(f).__name__}")
        self._py = f
        self._caddr: int | None = None
        self._resource: int | None = None
        self._keep: Any = None
        self._cfunc: Any = None
        self.name = name or getattr(f, "__name__", "") or "PackedFunc"

    @classmethod
    def from_address(cls, addr: int, name: str, resource: int | None = None,
                     keepalive: Any = None) -> PackedFunc:
        """The C function at ``addr`` (TVM's ``TVMBackendPackedCFunc`` signature)."""
        if not addr:
            raise ValueError(f"PackedFunc {name}: NULL function address")
        pf = cls(None, name)
        pf._caddr = int(addr)
        pf._resource = resource
        pf._keep = keepalive
        return pf

    @property
    def is_c(self) -> bool:
        return self._py is None

    def __call__(self, *args: Any) -> Any:
        if self._py is not None:
            return self._py(*args)
        keep: list = []
        vals, codes = _pack_args(self.name, args, keep)
        ret = TVMValue()
        ret_code = ctypes.c_int32(ArgTypeCode.NULL)
        if self._cfunc is None:
            assert self._caddr is not None
            self._cfunc = PACKED_CFUNC(self._caddr)
        take_error()  # a stale message must not be reported for this call
        rc = self._cfunc(vals, codes, len(args), ctypes.byref(ret), ctypes.byref(ret_code),
                         self._resource)
        if rc != 0:
            err = take_error()
            raise RuntimeError(f"{self.name} failed" + (f": {err[0]}" if err else
                                                        f" (returned {rc})"))
        return _unpack_return(ret, ret_code.value)

    def c_record(self) -> tuple[int, int | None]:
        """(C function address, resource handle) for generated code: a Python function gets a
        ctypes trampoline (made once, kept alive by this object)."""
        if self._caddr is not None:
            return self._caddr, self._resource
        if self._cfunc is None:
            assert self._py is not None
            self._cfunc = PACKED_CFUNC(_trampoline(self._py, self.name))
        return ctypes.cast(self._cfunc, ctypes.c_void_p).value or 0, None

    def __repr__(self) -> str:
        kind = "C" if self.is_c else "Python"
        return f"<PackedFunc {self.name} ({kind})>"


def _trampoline(f: Callable[..., Any], name: str) -> Callable[..., int]:
    def call(args: Any, codes: Any, n: int, ret: Any, ret_code: Any, resource: Any) -> int:
        try:
            r = f(*[_unpack(args[i], codes[i]) for i in range(n)])
            _pack_return(name, r, ret, ret_code)
            return 0
        except BaseException as e:  # noqa: BLE001 - nothing may unwind through C
            _set_pending(f"{name}: {type(e).__name__}: {e}", e)
            return -1
    return call


def convert_to_tvm_func(f: Callable[..., Any]) -> PackedFunc:
    """``f`` as a :class:`PackedFunc` (TVM's name)."""
    return f if isinstance(f, PackedFunc) else PackedFunc(f)


# ---- the registry -----------------------------------------------------------------------------
_lock = threading.RLock()
_REGISTRY: dict[str, PackedFunc] = {}
_SLOTS: dict[str, ctypes.c_void_p] = {}  # name -> cell holding the address of its _Record
_RECORDS: list[_Record] = []  # every record ever handed out (a running kernel may hold one)
# names provided by runtime modules that register on first lookup: prefix -> loader
_BUILTINS: dict[str, Callable[[], None]] = {}
_builtin_errors: dict[str, str] = {}


def _load_blas() -> None:
    from . import blas

    blas.register()


_BUILTINS["tvm.contrib.cblas."] = _load_blas


def _publish(name: str) -> None:
    """Point ``name``'s slot (if generated code holds one) at its current function."""
    slot = _SLOTS.get(name)
    if slot is None:
        return
    f = _REGISTRY.get(name)
    if f is None:
        slot.value = None
        return
    fn, res = f.c_record()
    rec = _Record(fn, res)
    _RECORDS.append(rec)
    slot.value = ctypes.addressof(rec)


def register_func(func_name: str | Callable[..., Any], f: Callable[..., Any] | None = None,
                  override: bool = False) -> Any:
    """Register ``f`` as the global function ``func_name`` (TVM's ``tvm.register_func``).

    Decorator forms: ``@register_func`` (the function's own name), ``@register_func("name")``,
    ``@register_func("name", override=True)``. Returns the :class:`PackedFunc`.

    Called from generated code (``tir.call_packed``), a Python function costs a ctypes callback
    and the GIL per executed call (microseconds): pass whole buffers, not elements; a function
    on a hot path belongs in C (``PackedFunc.from_address``)."""
    if callable(func_name) and not isinstance(func_name, str):
        f, func_name = func_name, func_name.__name__
    if not isinstance(func_name, str) or not func_name:
        raise ValueError(f"register_func: expected a function name (str), got {func_name!r}")
    name = func_name

    def register(myf: Callable[..., Any]) -> PackedFunc:
        if not callable(myf):
            raise TypeError(f"register_func({name!r}): expected a callable, got "
                            f"{type(myf).__name__}")
        if isinstance(myf, PackedFunc):
            pf = myf
        else:
            pf = PackedFunc(myf, name)
        with _lock:
            if name in _REGISTRY and not override:
                raise ValueError(f"global function {name!r} is already registered; pass "
                                 "override=True to replace it")
            _REGISTRY[name] = pf
            _publish(name)
        return pf

    return register(f) if f is not None else register


def _find(name: str) -> PackedFunc | None:
    with _lock:
        f = _REGISTRY.get(name)
        if f is not None:
            return f
        for prefix, load in _BUILTINS.items():
            if name.startswith(prefix) and prefix not in _builtin_errors:
                try:
                    load()
                except Exception as e:  # noqa: BLE001 - reported on lookup
                    _builtin_errors[prefix] = f"{type(e).__name__}: {e}"
                return _REGISTRY.get(name)
        return None


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The global function ``name`` (TVM's ``tvm.get_global_func``); None when missing and
    ``allow_missing``, else ValueError."""
    if not isinstance(name, str):
        raise TypeError(f"get_global_func: expected a name (str), got {type(name).__name__}")
    f = _find(name)
    if f is not None or allow_missing:
        return f
    why = next((e for p, e in _builtin_errors.items() if name.startswith(p)), None)
    raise ValueError(f"Cannot find global function {name!r}" + (
        f": its provider failed to load ({why})" if why else
        "; register it with tvm.register_func(name, f)"))


def list_global_func_names() -> list[str]:
    with _lock:
        return sorted(_REGISTRY)


def remove_global_func(name: str) -> None:
    """Unregister ``name`` (generated code calling it afterwards gets an error)."""
    with _lock:
        if name not in _REGISTRY:
            raise ValueError(f"Cannot find global function {name!r}")
        del _REGISTRY[name]
        _publish(name)


# ---- generated code's entry -------------------------------------------------------------------
def _lookup(name_b: bytes | None) -> int | None:
    name = name_b.decode("utf-8", "replace") if name_b else ""
    try:
        f = _find(name)
    except BaseException as e:  # noqa: BLE001
        _set_pending(f"looking up {name!r}: {type(e).__name__}: {e}", e)
        return None
    if f is None:
        why = next((e for p, e in _builtin_errors.items() if name.startswith(p)), None)
        _set_pending(f"no global function {name!r} is registered" + (
            f" (its provider failed to load: {why})" if why else
            " (register it with tvm.register_func before calling the kernel)"))
        return None
    with _lock:
        slot = _SLOTS.get(name)
        if slot is None:
            slot = _SLOTS[name] = ctypes.c_void_p(None)
            _publish(name)
        return ctypes.addressof(slot)


_LOOKUP_CB = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(_lookup)


def bind_library(lib: ctypes.CDLL) -> None:
    """Give a loaded library the registry: set its ``__tvmpy_packed_lookup`` and
    ``__tvmpy_packed_set_error`` pointers (when it has them)."""
    for sym, cb in ((LOOKUP_SYMBOL, _LOOKUP_CB), (SET_ERROR_SYMBOL, _SET_ERROR_CB)):
        try:
            cell = ctypes.c_void_p.in_dll(lib, sym)
        except ValueError:
            continue
        cell.value = ctypes.cast(cb, ctypes.c_void_p).value


# ---- tvm.runtime.convert ----------------------------------------------------------------------
def convert(value: Any) -> Any:
    """TVM's ``tvm.runtime.convert``: a Python value as a TVM object: numbers become
    ``tir.IntImm``/``FloatImm`` (int32 / float32 as TVM, int64 past int32), lists and tuples
    lists of converted values, dicts dicts, callables :class:`PackedFunc`; IR nodes, arrays,
    packed functions, strings and None pass unchanged.

    The IR is imported on first use (the runtime alone has none; TVM's convert gives IR
    constants)."""
    if isinstance(value, (PackedFunc, NDArray)) or value is None or isinstance(value, str):
        return value
    from ..ir.node import Node

    if isinstance(value, Node):
        return value
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        from ..tir.expr import const

        if isinstance(value, (np.number, np.bool_)):  # numpy scalars keep their dtype, as TVM's
            return const(value.item(), str(value.dtype))
        return const(value)
    if isinstance(value, (list, tuple)):
        return [convert(v) for v in value]
    if isinstance(value, dict):
        return {k: convert(v) for k, v in value.items()}
    if callable(value):
        return PackedFunc(value)
    raise TypeError(f"convert: do not know how to make a TVM object of {type(value).__name__} "
                    f"{value!r}")
