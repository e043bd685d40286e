"""``tvm.nd``: n-dimensional arrays in device memory (host memory, 64-byte aligned, for now).

An :class:`NDArray` wraps a numpy array ``_arr`` that views its memory: either an aligned block
it allocated (``nd.empty``/``nd.array``), or memory shared with a DLPack producer
(``nd.from_dlpack``; such a view may be strided or unaligned, and calls then copy it, see
runtime/function.py). ``numpy()`` always returns a copy.
"""

from __future__ import annotations

import ctypes
import math
import mmap
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir import dtype as dt
from . import dlpack as _dlpack
from .device import Device, cpu, device, kDLCPU

__all__ = ["NDArray", "array", "empty", "from_dlpack", "cpu", "device", "Device", "ALIGNMENT",
           "aligned_empty", "fresh_ndarray", "prefix_view"]

#: the byte alignment of every host buffer the runtime allocates (NDArray, kernel scratch, the
#: graph executor's arena, the VM's outputs) and the one compiled kernels may assume
ALIGNMENT = 64


def _check_device(dev: Any) -> Device:
    if dev is None:
        return cpu(0)
    if isinstance(dev, str):
        dev = device(dev)
    if not isinstance(dev, Device):
        raise TypeError(f"device must be a tvm Device (e.g. tvm.cpu(0)), got {type(dev).__name__}")
    if dev.device_type != kDLCPU:
        raise ValueError(f"no memory allocator for {dev}: this runtime has CPU memory only")
    return dev


def _accelerator(dev: Any) -> Device | None:
    """``dev`` when it names a non-CPU device (memory from runtime/gpu_module.py), else None."""
    if isinstance(dev, str):
        dev = device(dev)
    if isinstance(dev, Device) and dev.device_type != kDLCPU:
        return dev
    return None


def _np_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        return np.dtype(dt.from_numpy(dtype))
    d = dt.parse(str(dtype))
    if d.lanes != 1 or d.kind == "handle":
        raise ValueError(f"NDArray dtype must be a scalar data type, got {dtype!r}")
    return dt.to_numpy(str(d))


#: the size and alignment of a transparent huge page (x86-64 and AArch64 Linux with 4 KiB pages)
HUGE_PAGE_BYTES = 2 << 20


def _huge_page_empty(nbytes: int) -> np.ndarray | None:
    """``nbytes`` of zeroed memory starting on a :data:`HUGE_PAGE_BYTES` boundary, its whole
    huge pages marked ``MADV_HUGEPAGE`` (the tail stays on small pages, so no memory is
    wasted), or None where the OS has no such advice or the config turns it off.

    Why: the large tensors of a model (a 1024 -> 2048 1x1 convolution's 8 MiB of weights, its
    6 MiB input) span thousands of 4 KiB pages, more than the second-level TLB maps, and
    kernels that stream them take a page walk every few cache lines. On 2 MiB pages the same
    kernel (resnext's 28x28 1x1s, Xeon with AMX, 1 thread) ran 4-9% faster (bench/RESULTS.md,
    session 14). Linux hands out huge pages for such a region only when asked when THP is in
    ``madvise`` mode (common); ``always`` mode still needs the 2 MiB alignment."""
    if nbytes < HUGE_PAGE_BYTES or not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    from .. import config

    if not config.get("HUGE_PAGES"):
        return None
    try:
        m = mmap.mmap(-1, nbytes + HUGE_PAGE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError):
        return None
    raw = np.frombuffer(m, np.uint8)  # keeps the mapping alive; unmapped when freed
    off = -raw.__array_interface__["data"][0] % HUGE_PAGE_BYTES
    try:
        m.madvise(mmap.MADV_HUGEPAGE, off, nbytes // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES)
    except OSError:
        pass  # THP off or unsupported: plain pages, still aligned
    return raw[off:off + nbytes]


def aligned_empty(shape: tuple[int, ...], dtype: Any, zero: bool = False) -> np.ndarray:
    """A fresh compact numpy array whose data pointer is a multiple of :data:`ALIGNMENT`
    (zero-filled when ``zero``): the one place the runtime allocates aligned host memory.
    Arrays of at least :data:`HUGE_PAGE_BYTES` start on a huge page (:func:`_huge_page_empty`)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    huge = _huge_page_empty(nbytes)
    if huge is not None:
        return np.ndarray(shape, dtype, buffer=huge)
    raw = (np.zeros if zero else np.empty)(nbytes + ALIGNMENT, dtype=np.uint8)
    off = -raw.__array_interface__["data"][0] % ALIGNMENT
    # the constructor places the data pointer exactly (a slice of 0 bytes would not move it)
    return np.ndarray(shape, dtype, buffer=raw, offset=off)


def _shape_tuple(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if shape is None or isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise TypeError(f"shape must be a tuple of ints, got {type(shape).__name__} {shape!r}")
    out = []
    for s in shape:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"shape entries must be ints, got {s!r} ({type(s).__name__}); symbolic "
                            "sizes must be given concrete values to allocate")
        if s < 0:
            raise ValueError(f"shape entries must be >= 0, got {tuple(shape)}")
        out.append(int(s))
    return tuple(out)


class NDArray:
    """An array on a device (``tvm.nd.array(np_array)``, ``tvm.nd.empty(shape, dtype)``)."""

    __slots__ = ("_arr", "_device", "_ptr", "_compact_aligned", "__weakref__")
    _on_device = False  # runtime/gpu_module.py's DeviceNDArray: data in device memory

    def __init__(self, arr: np.ndarray, dev: Device | None = None):
        self._arr = arr
        self._device = dev or cpu(0)
        # cached for the call path (the view's layout never changes)
        self._ptr = arr.ctypes.data
        self._compact_aligned = bool(arr.flags.c_contiguous and self._ptr % ALIGNMENT == 0
                                     and arr.size > 0 and arr.flags.writeable)

    # ---- properties ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._arr.shape

    @property
    def dtype(self) -> str:
        return self._arr.dtype.name

    @property
    def device(self) -> Device:
        return self._device

    ctx = device  # old TVM name

    @property
    def ndim(self) -> int:
        return self._arr.ndim

    @property
    def size(self) -> int:
        return self._arr.size

    @property
    def strides(self) -> tuple[int, ...] | None:
        """Element strides, or None when compact row-major (as DLPack/TVM report them)."""
        a = self._arr
        if a.flags.c_contiguous:
            return None
        return tuple(s // a.itemsize for s in a.strides)

    @property
    def is_contiguous(self) -> bool:
        return bool(self._arr.flags.c_contiguous)

    @property
    def data_ptr(self) -> int:
        """Address of element 0 (what compiled functions receive)."""
        return self._ptr

    @property
    def handle(self) -> Any:
        """The data pointer as a ``ctypes.c_void_p``."""
        return ctypes.c_void_p(self.data_ptr)

    # ---- copies -------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A numpy copy of the contents."""
        return np.array(self._arr, copy=True, order="C")

    asnumpy = numpy

    def alias(self) -> NDArray:
        """A new NDArray object over the same memory (no copy): a distinct object that a
        weak reference can tell apart from ``self`` (the graph executor's get_output)."""
        v = self.__class__.__new__(self.__class__)
        v._arr, v._device, v._ptr = self._arr, self._device, self._ptr
        v._compact_aligned = self._compact_aligned
        return v

    def copyfrom(self, source: Any) -> NDArray:
        """Copy ``source`` (NDArray, numpy array, nested lists) in; the shape must match."""
        if isinstance(source, NDArray):
            src = source.numpy() if source._on_device else source._arr
        else:
            src = np.asarray(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape mismatch: array has shape {self.shape}, "
                             f"source has {src.shape}")
        if not self._arr.flags.writeable:
            raise ValueError("copyfrom: this array is read-only (imported read-only via DLPack)")
        np.copyto(self._arr, src, casting="unsafe")
        return self

    def copyto(self, target: Any) -> NDArray:
        """Copy into the NDArray ``target``, or into a new array on the Device ``target``."""
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        if isinstance(target, (Device, str)):
            out = empty(self.shape, self.dtype, target)
            return out.copyfrom(self)
        raise TypeError(f"copyto expects an NDArray or a Device, got {type(target).__name__}")

    def __setitem__(self, key: Any, value: Any) -> None:
        if not self._arr.flags.writeable:
            raise ValueError("this array is read-only (imported read-only via DLPack)")
        if isinstance(value, NDArray):
            value = value._arr
        self._arr[key] = value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self._arr if dtype is None else self._arr.astype(dtype)
        return np.array(a, copy=True) if copy else a

    # ---- DLPack -------------------------------------------------------------------------------
    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device.device_type, self._device.device_id)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule sharing this array's memory (``np.from_dlpack(nd)``,
        ``torch.from_dlpack(nd)``)."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: cannot export {self._device} memory to {dl_device}")
        arr, copied = self._arr, False
        if copy:
            arr, copied = aligned_empty(arr.shape, arr.dtype), True
            np.copyto(arr, self._arr)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        if not arr.flags.writeable and not versioned and not copy:
            raise BufferError("__dlpack__: cannot export a read-only array as a legacy DLPack "
                              "capsule (the consumer could write to it); ask for max_version=(1, 0)")
        return _dlpack.to_capsule(arr, self, self.__dlpack_device__(), versioned,
                                  read_only=not arr.flags.writeable, copied=copied)

    def to_dlpack(self) -> Any:
        """A legacy ``dltensor`` capsule (TVM's ``NDArray.to_dlpack``)."""
        return self.__dlpack__()

    # ---- misc ---------------------------------------------------------------------------------
    def same_as(self, other: Any) -> bool:
        return isinstance(other, NDArray) and other._arr is self._arr

    def __repr__(self) -> str:
        return f"<tvm.nd.NDArray shape={self.shape}, {self._device}>\n{self._arr!r}"

    def __str__(self) -> str:
        return str(self._arr)

    def __len__(self) -> int:
        return len(self._arr)


def empty(shape: Sequence[int] | int, dtype: Any = "float32", device: Any = None, *,
          ctx: Any = None) -> NDArray:
    """An uninitialized, 64-byte-aligned array (``ctx``: TVM v0.6's name of ``device``)."""
    remote = getattr(device if ctx is None else ctx, "_rpc_sess", None)
    if remote is not None:  # a device of an RPC session (tvmpy.rpc): allocated on its server
        return remote._nd_empty(shape, dtype, device if ctx is None else ctx)
    accel = _accelerator(device if ctx is None else ctx)
    if accel is not None:
        from .gpu_module import device_empty

        return device_empty(shape, dtype, accel)
    dev = _check_device(device if ctx is None else ctx)
    return NDArray(aligned_empty(_shape_tuple(shape), _np_dtype(dtype)), dev)


def fresh_ndarray(shape: tuple[int, ...], dtype: Any, dev: Device) -> NDArray:
    """A new uninitialized aligned host NDArray of a known-good ``shape`` and numpy ``dtype``,
    built without :func:`empty`'s argument checks (the VM's per-output allocation)."""
    arr = aligned_empty(shape, dtype)
    a = NDArray.__new__(NDArray)
    a._arr = arr
    a._device = dev
    a._ptr = arr.__array_interface__["data"][0]
    a._compact_aligned = arr.size > 0
    return a


def prefix_view(a: NDArray, shape: tuple[int, ...]) -> NDArray:
    """The first ``prod(shape)`` elements of the compact host array ``a`` as an array of
    ``shape`` on ``a``'s device: a view at the same start address (so as aligned as ``a``), or
    ``a`` itself when ``shape`` is its shape (the VM's exact outputs of an upper-bound kernel)."""
    arr = a._arr
    if arr.shape == shape:
        return a
    n = math.prod(shape)
    if not arr.flags.c_contiguous or n > arr.size:
        raise ValueError(f"prefix_view: shape {shape} is not a prefix of the compact array "
                         f"of shape {arr.shape}")
    v = NDArray.__new__(NDArray)
    v._arr = arr.reshape(-1)[:n].reshape(shape)
    v._device = a._device
    v._ptr = a._ptr
    v._compact_aligned = n > 0 and a._compact_aligned
    return v


def array(arr: Any, device: Any = None, dtype: Any = None, *, ctx: Any = None) -> NDArray:
    """A new aligned array holding a copy of ``arr`` (numpy array, NDArray, nested lists, DLPack
    tensor), converted to ``dtype`` when given (``ctx``: TVM v0.6's name of ``device``).
    On a device of an RPC session the array is created on its server."""
    remote = getattr(device if ctx is None else ctx, "_rpc_sess", None)
    if remote is not None:  # a device of an RPC session (tvmpy.rpc): copied to its server
        return remote._nd_array(arr, device if ctx is None else ctx, dtype)
    accel = _accelerator(device if ctx is None else ctx)
    dev = accel or _check_device(device if ctx is None else ctx)
    if isinstance(arr, NDArray):
        src = arr.numpy() if arr._on_device else arr._arr
    elif isinstance(arr, np.ndarray):
        src = arr
    elif hasattr(arr, "__dlpack__") and not isinstance(arr, (list, tuple)):
        src = from_dlpack(arr)._arr
    else:
        if arr is None or isinstance(arr, (str, bytes, dict, set)):
            raise TypeError(f"nd.array: expected a numpy array, NDArray, DLPack tensor or nested lists "
                            f"of numbers, got {type(arr).__name__}")
        try:
            src = np.asarray(arr, dtype=None if dtype is None else _np_dtype(dtype))
        except ValueError as err:
            raise ValueError(f"nd.array: cannot make an array from {type(arr).__name__}: {err}") from None
    target = _np_dtype(dtype) if dtype is not None else _np_dtype(src.dtype)
    if accel is not None:
        from .gpu_module import device_array

        return device_array(np.asarray(src, dtype=target), accel)
    out = NDArray(aligned_empty(src.shape, target), dev)
    np.copyto(out._arr, src, casting="unsafe")
    return out


def from_dlpack(obj: Any) -> NDArray:
    """An NDArray sharing memory with a DLPack producer (numpy array, torch tensor, NDArray) or
    capsule. Non-contiguous and unaligned views are kept as they are (functions copy them)."""
    if not _dlpack._is_capsule(obj) and hasattr(obj, "__dlpack_device__"):
        accel = Device(int(obj.__dlpack_device__()[0]), int(obj.__dlpack_device__()[1])) \
            if int(obj.__dlpack_device__()[0]) not in (1, 3) else None
        if accel is not None:  # device memory (e.g. a CUDA tensor): its runtime makes a view
            from .gpu_module import device_api

            api = device_api(accel)
            if not hasattr(api, "from_dlpack"):
                raise BufferError(f"from_dlpack: {accel} memory cannot be imported")
            return api.from_dlpack(obj)
    arr, (dev_type, dev_id) = _dlpack.from_dlpack(obj)
    return NDArray(arr, Device(kDLCPU if dev_type == 3 else dev_type, dev_id))
