"""The CUDA device API of runtime/gpu_module.py (``tvm.cuda(n)``, DLPack type 2): device memory,
PTX/cubin modules, kernel launches with packed ``kernelParams``, DLPack export/import, device
attributes. gpu_module's ``GPUHostModule`` evaluates the launch plans and calls it.

Driver binding: **ctypes on the driver's own ``libcuda.so.1``** (the CUDA driver API's C ABI), not
cuda-python or cupy. The issue asked to pick cuda-python or cupy; we picked neither, because:

- cuda-python here is 13.x (``cuda.bindings.driver``): it resolves every entry point with
  ``cuGetProcAddress(..., 13000)``, which a 12.x driver refuses (CUDA_ERROR_INVALID_VALUE), so
  it would tie tvmpy to the newest driver generation of a lent machine we cannot inspect
  beforehand; cupy would add a 100 MB wheel tied to one CUDA major version as well;
- the ~20 driver functions used here (``cuMemAlloc_v2``, ``cuModuleLoadData``,
  ``cuLaunchKernel``, events, ...) have had the same C ABI since CUDA 4, so ctypes works with
  every driver and needs no package at all (the runtime layer stays numpy + stdlib);
- cubins assembled by the wheel's ptxas (CUDA 12.9) load on any CUDA 12 driver that knows the
  ``sm_XX`` (minor-version compatibility), while PTX from NVRTC 12.9 (``.version 8.8``) needs a
  12.9+ driver to JIT: modules carry both, and the cubin for the device's arch is preferred.

Everything the runtime asks of the driver goes through one object with the methods of
:class:`CtypesDriver`; tests install a fake one (``set_driver``) to run the launch, argument
packing and copy paths on a machine without a GPU. Without a GPU, ``tvm.cuda(0).exist`` is False
and any use of the device raises ``CUDAError("no CUDA device: ...")``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .device import Device
from .gpu_module import register_device_api

__all__ = ["CUDAError", "CtypesDriver", "get_driver", "set_driver", "CUDAAPI", "CUDA_API",
           "DeviceMemory", "pack_params"]

kDLCUDA = 2
CU_DEVICE_ATTRIBUTE = {"max_threads_per_block": 1, "max_shared_memory_per_block": 8,
                       "warp_size": 10, "multiprocessor_count": 16,
                       "compute_capability_major": 75, "compute_capability_minor": 76,
                       "max_shared_memory_per_block_optin": 97}
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class CUDAError(RuntimeError):
    """A CUDA driver call failed, or there is no CUDA device."""


# ---- the driver --------------------------------------------------------------------------------
class CtypesDriver:
    """The CUDA driver API through ctypes (one primary context per device)."""

    def __init__(self, lib: ctypes.CDLL):
        self._lib = lib
        self._ctx: dict[int, ctypes.c_void_p] = {}
        self._lock = threading.Lock()
        self._check(lib.cuInit(0), "cuInit")

    @classmethod
    def load(cls) -> CtypesDriver:
        names = ["libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda")]
        errors = []
        for name in filter(None, names):
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError as err:
                errors.append(str(err))
        else:
            raise CUDAError("no CUDA device: the NVIDIA driver library libcuda.so.1 is not "
                            f"installed ({'; '.join(errors[:1])})")
        return cls(lib)

    def _error_name(self, rc: int) -> str:
        s = ctypes.c_char_p()
        if self._lib.cuGetErrorName(rc, ctypes.byref(s)) == 0 and s.value:
            return s.value.decode()
        return f"CUresult {rc}"

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = self._error_name(rc)
            if name in ("CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_NOT_INITIALIZED",
                        "CUDA_ERROR_INSUFFICIENT_DRIVER"):
                raise CUDAError(f"no CUDA device: {what} failed with {name}")
            raise CUDAError(f"CUDA {what} failed: {name}")

    def _use(self, dev: int) -> None:
        with self._lock:
            ctx = self._ctx.get(dev)
            if ctx is None:
                h = ctypes.c_int()
                self._check(self._lib.cuDeviceGet(ctypes.byref(h), dev), f"cuDeviceGet({dev})")
                ctx = ctypes.c_void_p()
                self._check(self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), h),
                            "cuDevicePrimaryCtxRetain")
                self._ctx[dev] = ctx
        self._check(self._lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def driver_version(self) -> int:
        v = ctypes.c_int()
        self._check(self._lib.cuDriverGetVersion(ctypes.byref(v)), "cuDriverGetVersion")
        return v.value

    def device_count(self) -> int:
        n = ctypes.c_int()
        self._check(self._lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
        return n.value

    def device_name(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self._check(self._lib.cuDeviceGetName(buf, 256, ctypes.c_int(dev)), "cuDeviceGetName")
        return buf.value.decode()

    def device_attribute(self, dev: int, attr: int) -> int:
        v = ctypes.c_int()
        self._check(self._lib.cuDeviceGetAttribute(ctypes.byref(v), attr, ctypes.c_int(dev)),
                    "cuDeviceGetAttribute")
        return v.value

    def mem_alloc(self, dev: int, nbytes: int) -> int:
        self._use(dev)
        p = ctypes.c_uint64()
        self._check(self._lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(max(nbytes, 1))),
                    f"cuMemAlloc({nbytes} bytes)")
        return int(p.value)

    def mem_free(self, dev: int, ptr: int) -> None:
        self._use(dev)
        self._lib.cuMemFree_v2(ctypes.c_uint64(ptr))

    def memcpy_htod(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._use(dev)
        self._check(self._lib.cuMemcpyHtoD_v2(ctypes.c_uint64(dst), ctypes.c_void_p(src),
                                              ctypes.c_size_t(nbytes)), "cuMemcpyHtoD")

    def memcpy_dtoh(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._use(dev)
        self._check(self._lib.cuMemcpyDtoH_v2(ctypes.c_void_p(dst), ctypes.c_uint64(src),
                                              ctypes.c_size_t(nbytes)), "cuMemcpyDtoH")

    def memcpy_dtod(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._use(dev)
        self._check(self._lib.cuMemcpyDtoD_v2(ctypes.c_uint64(dst), ctypes.c_uint64(src),
                                              ctypes.c_size_t(nbytes)), "cuMemcpyDtoD")

    def module_load(self, dev: int, image: bytes) -> Any:
        self._use(dev)
        mod = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(image + (b"" if image.endswith(b"\0") else b"\0"))
        self._check(self._lib.cuModuleLoadData(ctypes.byref(mod), buf), "cuModuleLoadData")
        return mod

    def module_function(self, dev: int, module: Any, name: str) -> Any:
        self._use(dev)
        f = ctypes.c_void_p()
        self._check(self._lib.cuModuleGetFunction(ctypes.byref(f), module, name.encode()),
                    f"cuModuleGetFunction({name})")
        return f

    def set_max_dynamic_shared(self, dev: int, func: Any, nbytes: int) -> None:
        self._use(dev)
        self._check(self._lib.cuFuncSetAttribute(
            func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, ctypes.c_int(nbytes)),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")

    def launch(self, dev: int, func: Any, grid: Sequence[int], block: Sequence[int],
               shared: int, params: Any, stream: Any = None) -> None:
        self._use(dev)
        u = ctypes.c_uint
        self._check(self._lib.cuLaunchKernel(func, u(grid[0]), u(grid[1]), u(grid[2]),
                                             u(block[0]), u(block[1]), u(block[2]), u(shared),
                                             stream, params, None), "cuLaunchKernel")

    def launcher(self, dev: int, func: Any, grid: Sequence[int], block: Sequence[int],
                 shared: int, params: Any, stream: Any = None) -> Callable[[], None]:
        """A function of no arguments that launches ``func`` with these fixed sizes and
        ``params`` (kept alive by it) on ``stream`` (None: the legacy default stream):
        :meth:`launch`'s conversions done once, for launches repeated with the same arguments
        (the graph executor's nodes)."""
        self._use(dev)
        ctx = self._ctx[dev]
        set_current, launch = self._lib.cuCtxSetCurrent, self._lib.cuLaunchKernel
        u = ctypes.c_uint
        sizes = (u(grid[0]), u(grid[1]), u(grid[2]), u(block[0]), u(block[1]), u(block[2]),
                 u(shared))

        def run() -> None:
            rc = set_current(ctx) or launch(func, *sizes, stream, params, None)
            if rc:
                self._check(rc, "cuLaunchKernel")

        return run

    # ---- streams and CUDA graphs (the graph executor's ``use_cuda_graph``) ----------------------
    def stream_create(self, dev: int) -> Any:
        """A blocking stream (``CU_STREAM_DEFAULT``): work on it is ordered with the legacy
        default stream's, so the synchronous copies of arrays (``numpy()``, ``copyfrom``) and
        events recorded on the legacy stream see everything queued on it before."""
        self._use(dev)
        s = ctypes.c_void_p()
        self._check(self._lib.cuStreamCreate(ctypes.byref(s), 0), "cuStreamCreate")
        return s

    def stream_destroy(self, dev: int, stream: Any) -> None:
        self._lib.cuStreamDestroy_v2(stream)

    def stream_synchronize(self, dev: int, stream: Any) -> None:
        self._use(dev)
        self._check(self._lib.cuStreamSynchronize(stream),
                    "cuStreamSynchronize (a kernel failed)")

    def memcpy_htod_async(self, dev: int, dst: int, src: int, nbytes: int, stream: Any) -> None:
        """Queued on ``stream``; from pageable host memory the driver stages ``src`` before
        returning, so the caller may reuse it at once."""
        self._use(dev)
        self._check(self._lib.cuMemcpyHtoDAsync_v2(ctypes.c_uint64(dst), ctypes.c_void_p(src),
                                                   ctypes.c_size_t(nbytes), stream),
                    "cuMemcpyHtoDAsync")

    def memcpy_dtoh_async(self, dev: int, dst: int, src: int, nbytes: int, stream: Any) -> None:
        self._use(dev)
        self._check(self._lib.cuMemcpyDtoHAsync_v2(ctypes.c_void_p(dst), ctypes.c_uint64(src),
                                                   ctypes.c_size_t(nbytes), stream),
                    "cuMemcpyDtoHAsync")

    def begin_capture(self, dev: int, stream: Any) -> None:
        """Start recording ``stream``'s work into a graph instead of running it
        (``CU_STREAM_CAPTURE_MODE_THREAD_LOCAL``: other threads' driver calls are not
        affected; this thread's unsafe ones fail)."""
        self._use(dev)
        self._check(self._lib.cuStreamBeginCapture_v2(stream, 1), "cuStreamBeginCapture")

    def end_capture(self, dev: int, stream: Any) -> Any:
        """The graph recorded since :meth:`begin_capture` (raises when the capture was
        invalidated by an operation that cannot be captured)."""
        self._use(dev)
        g = ctypes.c_void_p()
        self._check(self._lib.cuStreamEndCapture(stream, ctypes.byref(g)), "cuStreamEndCapture")
        return g

    def graph_num_nodes(self, dev: int, graph: Any) -> int:
        n = ctypes.c_size_t(0)
        self._check(self._lib.cuGraphGetNodes(graph, None, ctypes.byref(n)), "cuGraphGetNodes")
        return int(n.value)

    def graph_instantiate(self, dev: int, graph: Any) -> Any:
        self._use(dev)
        e = ctypes.c_void_p()
        self._check(self._lib.cuGraphInstantiateWithFlags(ctypes.byref(e), graph,
                                                          ctypes.c_ulonglong(0)),
                    "cuGraphInstantiateWithFlags")
        return e

    def graph_destroy(self, dev: int, graph: Any) -> None:
        self._lib.cuGraphDestroy(graph)

    def graph_exec_destroy(self, dev: int, graph_exec: Any) -> None:
        self._lib.cuGraphExecDestroy(graph_exec)

    def graph_launcher(self, dev: int, graph_exec: Any, stream: Any) -> Callable[[], None]:
        """A function of no arguments that launches the instantiated graph on ``stream``."""
        self._use(dev)
        ctx = self._ctx[dev]
        set_current, launch = self._lib.cuCtxSetCurrent, self._lib.cuGraphLaunch

        def run() -> None:
            rc = set_current(ctx) or launch(graph_exec, stream)
            if rc:
                self._check(rc, "cuGraphLaunch")

        return run

    def synchronize(self, dev: int) -> None:
        self._use(dev)
        self._check(self._lib.cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed)")

    def event_create(self, dev: int) -> Any:
        self._use(dev)
        ev = ctypes.c_void_p()
        self._check(self._lib.cuEventCreate(ctypes.byref(ev), 0), "cuEventCreate")
        return ev

    def event_record(self, dev: int, ev: Any) -> None:
        self._use(dev)
        self._check(self._lib.cuEventRecord(ev, None), "cuEventRecord")

    def event_elapsed_ms(self, dev: int, start: Any, end: Any) -> float:
        self._use(dev)
        self._check(self._lib.cuEventSynchronize(end), "cuEventSynchronize (a kernel failed)")
        ms = ctypes.c_float()
        self._check(self._lib.cuEventElapsedTime(ctypes.byref(ms), start, end),
                    "cuEventElapsedTime")
        return float(ms.value)

    def event_destroy(self, dev: int, ev: Any) -> None:
        self._lib.cuEventDestroy_v2(ev)


_DRIVER: Any = None
_DRIVER_ERROR: str | None = None
_DRIVER_LOCK = threading.Lock()


def get_driver() -> Any:
    """The process's driver object; raises CUDAError ("no CUDA device: ...") without one."""
    global _DRIVER, _DRIVER_ERROR
    with _DRIVER_LOCK:
        if _DRIVER is None and _DRIVER_ERROR is None:
            try:
                _DRIVER = CtypesDriver.load()
            except CUDAError as err:
                _DRIVER_ERROR = str(err)
        if _DRIVER is None:
            raise CUDAError(_DRIVER_ERROR or "no CUDA device")
        return _DRIVER


def set_driver(driver: Any) -> Any:
    """Install ``driver`` (an object with CtypesDriver's methods; None: load the real one again
    on next use); returns the previous one. For tests."""
    global _DRIVER, _DRIVER_ERROR
    with _DRIVER_LOCK:
        prev, _DRIVER, _DRIVER_ERROR = _DRIVER, driver, None
        CUDA_API._reset()
        return prev


# ---- kernel arguments ----------------------------------------------------------------------
_SCALAR_CTYPES: dict[str, Any] = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
    "float64": ctypes.c_double, "bool": ctypes.c_bool, "handle": ctypes.c_uint64,
}


def pack_params(values: Sequence[tuple[str, Any]]) -> tuple[list[Any], Any]:
    """``cuLaunchKernel``'s ``kernelParams``: a ``void*[n]`` whose entries point at each
    argument's value. ``values``: (dtype, value) pairs, "handle" for a device pointer.
    Returns (the ctypes values, which must stay alive during the launch, and the array)."""
    holders = []
    for dtype, v in values:
        if dtype == "float16":
            holders.append(ctypes.c_uint16(int(np.array(v, np.float16).view(np.uint16))))
            continue
        ct = _SCALAR_CTYPES.get(dtype)
        if ct is None:
            raise CUDAError(f"kernel argument of dtype {dtype!r} cannot be passed")
        holders.append(ct(v))
    arr = (ctypes.c_void_p * max(len(holders), 1))(*[ctypes.addressof(h) for h in holders])
    return holders, arr


# ---- the device API (runtime/gpu_module.py's protocol) -------------------------------------
class DeviceMemory:
    """One cuMemAlloc block; freed when the last reference goes (arrays hold it)."""

    __slots__ = ("ptr", "nbytes", "dev_id", "_free", "_owner", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, dev_id: int, free: Callable[..., None] | None,
                 owner: Any = None):
        self.ptr, self.nbytes, self.dev_id, self._owner = ptr, nbytes, dev_id, owner
        self._free = weakref.finalize(self, free, dev_id, ptr) if free is not None else None

    def __int__(self) -> int:
        return self.ptr

    def __repr__(self) -> str:
        return f"<cuda memory 0x{self.ptr:x}, {self.nbytes} bytes, cuda({self.dev_id})>"


class CUDAStream:
    """One ``cuStreamCreate`` stream; destroyed when the last reference goes."""

    __slots__ = ("driver", "dev_id", "handle", "_free", "__weakref__")

    def __init__(self, driver: Any, dev_id: int, handle: Any):
        self.driver, self.dev_id, self.handle = driver, dev_id, handle
        self._free = weakref.finalize(self, driver.stream_destroy, dev_id, handle)

    def synchronize(self) -> None:
        self.driver.stream_synchronize(self.dev_id, self.handle)


class CUDAGraph:
    """An instantiated CUDA graph (``cuGraphInstantiateWithFlags``) of ``num_nodes`` nodes:
    ``launch()`` replays it on the stream it was captured on; destroyed with the object."""

    __slots__ = ("stream", "num_nodes", "launch", "_free", "__weakref__")

    def __init__(self, driver: Any, stream: CUDAStream, graph_exec: Any, num_nodes: int):
        self.stream, self.num_nodes = stream, num_nodes
        self.launch = driver.graph_launcher(stream.dev_id, graph_exec, stream.handle)
        self._free = weakref.finalize(self, driver.graph_exec_destroy, stream.dev_id, graph_exec)


class CUDAProgram:
    """A module loaded on one device, and its kernels by name."""

    def __init__(self, handle: Any, dev_id: int, arch: str):
        self.handle, self.dev_id, self.arch = handle, dev_id, arch
        self.kernels: dict[str, Any] = {}
        self.dyn_shared: dict[str, int] = {}


class CUDAAPI:
    """Driver calls for CUDA devices (the device-API protocol of runtime/gpu_module.py)."""

    name = "cuda"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._programs: dict[tuple[int, str], CUDAProgram] = {}
        self._arch: dict[int, str] = {}

    def _drv(self, dev_id: int) -> Any:
        drv = get_driver()
        n = drv.device_count()
        if not 0 <= dev_id < n:
            raise CUDAError(f"no CUDA device: cuda({dev_id}) does not exist ({n} CUDA device(s) "
                            "found)")
        return drv

    def exist(self, dev_id: int) -> bool:
        try:
            self._drv(dev_id)
        except CUDAError:
            return False
        return True

    def arch(self, dev_id: int) -> str:
        """'sm_90' for an H100: the device's compute capability."""
        a = self._arch.get(dev_id)
        if a is None:
            drv = self._drv(dev_id)
            at = CU_DEVICE_ATTRIBUTE
            a = (f"sm_{drv.device_attribute(dev_id, at['compute_capability_major'])}"
                 f"{drv.device_attribute(dev_id, at['compute_capability_minor'])}")
            self._arch[dev_id] = a
        return a

    def device_name(self, dev_id: int) -> str:
        return str(self._drv(dev_id).device_name(dev_id))

    def attribute(self, dev_id: int, name: str) -> Any:
        """TVM's device attributes: device_name, compute_version ('9.0'), max_threads_per_block,
        warp_size, max_shared_memory_per_block, multi_processor_count."""
        if name == "device_name":
            return self.device_name(dev_id)
        if name == "compute_version":
            n = self.arch(dev_id).removeprefix("sm_")
            return f"{n[:-1]}.{n[-1]}"
        code = {"max_threads_per_block": "max_threads_per_block", "warp_size": "warp_size",
                "max_shared_memory_per_block": "max_shared_memory_per_block",
                "multi_processor_count": "multiprocessor_count"}.get(name)
        if code is None:
            raise AttributeError(f"unknown CUDA device attribute {name!r}")
        return self._drv(dev_id).device_attribute(dev_id, CU_DEVICE_ATTRIBUTE[code])

    # ---- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int, dev_id: int) -> DeviceMemory:
        drv = self._drv(dev_id)
        return DeviceMemory(drv.mem_alloc(dev_id, int(nbytes)), int(nbytes), dev_id, drv.mem_free)

    def to_host(self, mem: DeviceMemory, out: np.ndarray, dev_id: int,
                stream: CUDAStream | None = None) -> None:
        """Copy to ``out``; with ``stream``, queued after its work and waited for."""
        assert out.flags.c_contiguous
        drv = get_driver()
        if stream is None:
            drv.memcpy_dtoh(dev_id, out.ctypes.data, mem.ptr, out.nbytes)
        else:
            drv.memcpy_dtoh_async(dev_id, out.ctypes.data, mem.ptr, out.nbytes, stream.handle)
            drv.stream_synchronize(dev_id, stream.handle)

    def from_host(self, mem: DeviceMemory, arr: np.ndarray, dev_id: int,
                  stream: CUDAStream | None = None) -> None:
        """Copy ``arr`` in; with ``stream``, queued after its work without waiting (the driver
        stages pageable memory before returning: ``arr`` may change at once)."""
        host = np.ascontiguousarray(arr)
        drv = get_driver()
        if stream is None:
            drv.memcpy_htod(dev_id, mem.ptr, host.ctypes.data, host.nbytes)
        else:
            drv.memcpy_htod_async(dev_id, mem.ptr, host.ctypes.data, host.nbytes, stream.handle)

    # ---- streams and graphs ----------------------------------------------------------------
    def create_stream(self, dev_id: int) -> CUDAStream | None:
        """A stream of its own (blocking: ordered with the legacy default stream), or None
        when the driver object has no streams (a test driver)."""
        drv = self._drv(dev_id)
        if not hasattr(drv, "stream_create"):
            return None
        return CUDAStream(drv, dev_id, drv.stream_create(dev_id))

    def capture_graph(self, stream: CUDAStream, record: Callable[[], None]) -> CUDAGraph:
        """Run ``record()`` with ``stream`` capturing (its launches are recorded, not run);
        the instantiated graph. On any error the capture is ended (the stream usable again)
        and the error raised."""
        drv, dev_id = stream.driver, stream.dev_id
        if not hasattr(drv, "begin_capture"):
            raise CUDAError("the CUDA driver object has no stream-capture API")
        try:
            drv.begin_capture(dev_id, stream.handle)
        except AttributeError as e:  # a libcuda without the symbol (ctypes' lookup)
            raise CUDAError(f"the driver library has no stream capture: {e}") from None
        try:
            record()
        except BaseException:
            try:
                drv.graph_destroy(dev_id, drv.end_capture(dev_id, stream.handle))
            except CUDAError:
                pass  # invalidated: ending it is all that was needed
            raise
        try:
            graph = drv.end_capture(dev_id, stream.handle)
            try:
                try:
                    nodes = drv.graph_num_nodes(dev_id, graph)
                except (CUDAError, AttributeError):
                    nodes = -1  # (only reported)
                exe = drv.graph_instantiate(dev_id, graph)
            finally:
                drv.graph_destroy(dev_id, graph)
            launcher = CUDAGraph(drv, stream, exe, nodes)
        except AttributeError as e:
            raise CUDAError(f"the driver library lacks a CUDA graph function: {e}") from None
        return launcher

    def copy(self, dst: DeviceMemory, src: DeviceMemory, nbytes: int, dev_id: int) -> None:
        get_driver().memcpy_dtod(dev_id, dst.ptr, src.ptr, int(nbytes))

    def sync(self, dev_id: int) -> None:
        self._drv(dev_id).synchronize(dev_id)

    # ---- code --------------------------------------------------------------------------------
    def load(self, source: str, dev_id: int) -> CUDAProgram:
        """CUDA C ``source`` compiled here with NVRTC for the device's arch (modules built by
        tvm.build carry PTX/cubin and go through :meth:`load_binaries` instead)."""
        from ..contrib import nvcc  # noqa: PLC0415  (a runtime-layer module: NVRTC via ctypes)

        arch = self.arch(dev_id)
        return self.load_binaries({arch: nvcc.compile_cuda(source, "cubin", arch)}, dev_id)

    def load_binaries(self, binaries: Mapping[str, bytes], dev_id: int) -> CUDAProgram:
        """Load the cubin for the device's arch when there is one, else the PTX (JIT-compiled
        by the driver, which must be as new as the NVRTC that wrote it)."""
        arch = self.arch(dev_id)
        if arch in binaries:
            image, kind = binaries[arch], arch
        elif "ptx" in binaries:
            image, kind = binaries["ptx"], "ptx"
        else:
            raise CUDAError(f"the module has cubins for {', '.join(sorted(binaries)) or 'nothing'} "
                            f"and no PTX; cuda({dev_id}) is {arch}: build with target "
                            f"'cuda -arch={arch}'")
        image = image.encode() if isinstance(image, str) else bytes(image)
        import hashlib

        key = (dev_id, hashlib.sha256(image).hexdigest())
        with self._lock:
            prog = self._programs.get(key)
            if prog is None:
                try:
                    handle = self._drv(dev_id).module_load(dev_id, image)
                except CUDAError as err:
                    hint = (" (PTX needs a driver at least as new as NVRTC "
                            f"{'.'.join(map(str, _ptx_isa(image)))})" if kind == "ptx" else "")
                    raise CUDAError(f"{err}: loading the {kind} image on cuda({dev_id}){hint}"
                                    ) from None
                prog = self._programs[key] = CUDAProgram(handle, dev_id, kind)
        return prog

    def launch(self, program: CUDAProgram, name: str, grid: Sequence[int], block: Sequence[int],
               shared_bytes: int, args: Sequence[Any], dev_id: int) -> None:
        self.bind_launch(program, name, grid, block, shared_bytes, args, dev_id)()

    def bind_launch(self, program: CUDAProgram, name: str, grid: Sequence[int],
                    block: Sequence[int], shared_bytes: int, args: Sequence[Any],
                    dev_id: int, stream: CUDAStream | None = None) -> Callable[[], None]:
        """Check and pack one launch; return a function of no arguments that performs it (as
        often as called: the graph executor binds each node's launches once), on ``stream``
        (None: the legacy default stream)."""
        drv = get_driver()
        func = program.kernels.get(name)
        if func is None:
            func = program.kernels[name] = drv.module_function(dev_id, program.handle, name)
        if shared_bytes > 48 * 1024 and program.dyn_shared.get(name, 0) < shared_bytes:
            drv.set_max_dynamic_shared(dev_id, func, shared_bytes)
            program.dyn_shared[name] = shared_bytes
        threads = int(block[0]) * int(block[1]) * int(block[2])
        if threads > 1024:
            raise ValueError(f"kernel {name}: block {tuple(block)} has {threads} threads; CUDA "
                             "allows at most 1024 per block")
        vals: list[tuple[str, Any]] = []
        for a in args:
            if isinstance(a, DeviceMemory):
                vals.append(("handle", a.ptr))
            elif isinstance(a, np.generic):
                vals.append((a.dtype.name, a.item()))
            else:
                raise CUDAError(f"kernel {name}: cannot pass argument {a!r} "
                                f"({type(a).__name__}); expected device memory or a numpy scalar")
        holders, params = pack_params(vals)
        grid_, block_ = tuple(int(g) for g in grid), tuple(int(b) for b in block)
        s = None if stream is None else stream.handle
        make = getattr(drv, "launcher", None)  # test drivers may have launch() only
        if make is not None:
            run = make(dev_id, func, grid_, block_, int(shared_bytes), params, s)
        else:
            extra = () if s is None else (s,)  # (older test drivers take no stream)

            def run() -> None:
                drv.launch(dev_id, func, grid_, block_, int(shared_bytes), params, *extra)

        def launch_bound(_keep: tuple = (holders, tuple(args))) -> None:
            # _keep: the parameter values and the device memory they point to stay alive
            run()

        return launch_bound

    # ---- DLPack ------------------------------------------------------------------------------
    def dlpack(self, arr: Any, versioned: bool) -> Any:
        """A DLPack capsule of a CUDA array's memory (torch/cupy.from_dlpack)."""
        from . import dlpack

        return dlpack.device_capsule(arr._mem.ptr, tuple(arr.shape), np.dtype(arr.dtype), arr,
                                     (kDLCUDA, arr.device.device_id), versioned)

    def from_dlpack(self, obj: Any) -> Any:
        """An array sharing the CUDA memory of a DLPack producer (a torch/cupy CUDA tensor),
        which must be compact row-major (``.contiguous()`` first otherwise)."""
        from . import dlpack
        from .gpu_module import DeviceNDArray

        if hasattr(obj, "__dlpack__") and not dlpack._is_capsule(obj):
            try:
                obj = obj.__dlpack__(max_version=(1, 0))
            except TypeError:  # producer predating DLPack 1.0
                obj = obj.__dlpack__()
        ptr, shape, strides, dtype, (_, dev_id), owner = dlpack.from_dlpack_device(obj, (kDLCUDA,))
        if strides is not None:
            acc, expect = 1, []
            for n in reversed(shape):
                expect.append(acc)
                acc *= max(n, 1)
            if any(n > 1 and s != e for n, s, e in zip(shape, strides, reversed(expect))):
                raise BufferError(f"from_dlpack: the CUDA tensor has strides {strides}; make it "
                                  "contiguous first")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        mem = DeviceMemory(ptr, nbytes, dev_id, None, owner)
        return DeviceNDArray.wrap(mem, shape, dtype, Device(kDLCUDA, dev_id), self)


def _ptx_isa(image: bytes) -> tuple[int, int]:
    import re

    m = re.search(rb"\.version\s+(\d+)\.(\d+)", image)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


CUDA_API = CUDAAPI()
register_device_api(kDLCUDA, CUDA_API)
