"""GPU runtime pieces shared by OpenCL and CUDA: arrays in device memory, the device-API registry,
and the host module that evaluates a launch plan (``codegen/gpu_source.py``'s JSON).

- :class:`DeviceNDArray`: an ``NDArray`` whose data lives in device memory (``tvm.nd.array(x,
  tvm.opencl(0))``, ``tvm.nd.empty(shape, dtype, dev)``); ``numpy()``/``copyfrom``/``copyto`` copy
  both ways. ``nd.array``/``nd.empty`` reach it through :func:`device_api` for non-CPU devices.
- a *device API* (``opencl_module.OpenCLAPI``; CUDA's ``cuda_module``) does the driver calls:
  ``exist, alloc, to_host, from_host, copy, sync, load(source, dev_id), launch(program, name,
  grid, block, shared_bytes, args, dev_id)``. Its module is imported on first use of its device
  type, so the runtime imports no driver binding until a GPU is used.
- :class:`GPUHostModule`: what ``tvm.build(..., target="opencl")`` returns; calling a function
  checks the arguments (dtype, shape, device, like a CPU function), binds the shape vars, then
  runs the plan's steps (lets, asserts, kernel launches with grid/block evaluated from the shape
  vars). Host numpy arrays are accepted: copied in, and written ones copied back.
  ``imported_modules[0]`` is the device module (``get_source()``: the kernel source);
  ``export_library`` writes the plan and the source into the library's metadata and
  ``load_module`` restores the module (no compiler needed). TVM's split save works too:
  ``save("x.o")`` is the host part only, ``imported_modules[0].save("x.cl" / "x.ptx" / "x.cu")``
  the device code (+ ``x.tvm_meta.json``, its kernel list); ``load_module`` of each, then
  ``host.import_module(dev)`` (kernel names and argument types checked) joins them again.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .device import DEVICE_TYPES, Device, kDLCPU
from .evaluator import BenchmarkResult
from .function import _INT_RANGE, _Param
from .module import Module
from .ndarray import NDArray, _np_dtype, _shape_tuple

__all__ = ["DeviceNDArray", "device_api", "register_device_api", "GPUHostModule", "GPUFunction",
           "GPUDeviceModule", "load_device_file"]

_APIS: dict[int, Any] = {}
#: DLPack device type -> the runtime module (in this package) that registers its device API
DEVICE_MODULES: dict[int, str] = {
    4: "opencl_module",
    2: "cuda_module",
    7: "vulkan_module",
    15: "webgpu_module",
}


def register_device_api(device_type: int, api: Any) -> None:
    """Make ``api`` the driver of devices of DLPack type ``device_type``."""
    _APIS[device_type] = api


def device_api(dev: Device) -> Any:
    """The device API of ``dev`` (its runtime module is imported on first use)."""
    api = _APIS.get(dev.device_type)
    if api is None:
        module = DEVICE_MODULES.get(dev.device_type)
        if module is not None:
            importlib.import_module(f"{__package__}.{module}")  # registers itself
        api = _APIS.get(dev.device_type)
    if api is None:
        raise ValueError(f"no memory allocator for {dev}: this tvmpy has no runtime for it "
                         "(GPUs: tvm.opencl(0), tvm.cuda(0), tvm.vulkan(0), tvm.webgpu(0))")
    return api


class DeviceNDArray(NDArray):
    """An array in device memory. ``_arr`` is a zero-stride placeholder carrying shape and dtype."""

    __slots__ = ("_mem", "_api", "_nbytes")
    _on_device = True

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, dev: Device, api: Any):
        holder = np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape),
                                                 writeable=False)
        super().__init__(holder, dev)
        self._ptr = 0
        self._compact_aligned = False
        self._api = api
        self._nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        self._mem = api.alloc(self._nbytes, dev.device_id)

    @property
    def data_ptr(self) -> int:
        raise ValueError(f"an array on {self._device} has no host address; use numpy()")

    @property
    def strides(self) -> None:
        return None

    @property
    def is_contiguous(self) -> bool:
        return True

    def numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self._arr.dtype)
        if self._nbytes:
            self._api.to_host(self._mem, out, self._device.device_id)
        return out

    asnumpy = numpy

    def copyfrom(self, source: Any) -> DeviceNDArray:
        if isinstance(source, DeviceNDArray) and source._device == self._device:
            if source.shape != self.shape or source.dtype != self.dtype:
                raise ValueError(f"copyfrom: array is {self.shape} {self.dtype}, source is "
                                 f"{source.shape} {source.dtype}")
            if self._nbytes:
                self._api.copy(self._mem, source._mem, self._nbytes, self._device.device_id)
            return self
        src = source.numpy() if isinstance(source, NDArray) else np.asarray(source)
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: shape mismatch: array has shape {self.shape}, "
                             f"source has {src.shape}")
        host = np.ascontiguousarray(src, dtype=self._arr.dtype) if src.dtype == self._arr.dtype \
            else np.ascontiguousarray(src.astype(self._arr.dtype))
        if self._nbytes:
            self._api.from_host(self._mem, host, self._device.device_id)
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        host = self.numpy()
        host[key] = value.numpy() if isinstance(value, NDArray) else value
        self.copyfrom(host)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    @classmethod
    def wrap(cls, mem: Any, shape: tuple[int, ...], dtype: np.dtype, dev: Device,
             api: Any) -> DeviceNDArray:
        """An array over existing device memory ``mem`` (e.g. imported through DLPack)."""
        out = cls.__new__(cls)
        holder = np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape),
                                                 writeable=False)
        NDArray.__init__(out, holder, dev)
        out._ptr, out._compact_aligned, out._api = 0, False, api
        out._nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        out._mem = mem
        return out

    def alias(self) -> DeviceNDArray:
        """A new array object over the same device memory (no copy)."""
        return DeviceNDArray.wrap(self._mem, self.shape, self._arr.dtype, self._device, self._api)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        export = getattr(self._api, "dlpack", None)
        if export is None:
            raise BufferError(f"DLPack export of {self._device} memory is not supported; use "
                              "numpy()")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"__dlpack__: cannot export {self._device} memory to {dl_device}")
        return export(self, max_version is not None and tuple(max_version)[0] >= 1)

    def same_as(self, other: Any) -> bool:
        return isinstance(other, DeviceNDArray) and other._mem is self._mem

    def __repr__(self) -> str:
        return f"<tvm.nd.NDArray shape={self.shape}, {self._device}>\n{self.numpy()!r}"

    def __str__(self) -> str:
        return str(self.numpy())


def device_empty(shape: Any, dtype: Any, dev: Device) -> DeviceNDArray:
    return DeviceNDArray(_shape_tuple(shape), _np_dtype(dtype), dev, device_api(dev))


def device_array(src: np.ndarray, dev: Device) -> DeviceNDArray:
    out = device_empty(src.shape, src.dtype, dev)
    return out.copyfrom(src)


# ---- the launch plan ---------------------------------------------------------------------------
def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_OPS: dict[str, Callable[..., Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b,
    "truncdiv": _truncdiv, "truncmod": lambda a, b: a - b * _truncdiv(a, b),
    "min": min, "max": max, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "and": lambda a, b: bool(a and b), "or": lambda a, b: bool(a or b),
}


def eval_expr(e: Any, env: dict[str, Any]) -> Any:
    """Evaluate a plan expression (ints, names, {"float": x}, [op, operands...])."""
    if isinstance(e, (int, float)):
        return e
    if isinstance(e, str):
        return env[e]
    if isinstance(e, dict):
        return e["float"]
    op = e[0]
    if op == "select":
        return eval_expr(e[2], env) if eval_expr(e[1], env) else eval_expr(e[3], env)
    if op == "not":
        return not eval_expr(e[1], env)
    if op == "cast":
        v = eval_expr(e[2], env)
        return float(v) if e[1].startswith("float") else int(v)
    return _OPS[op](eval_expr(e[1], env), eval_expr(e[2], env))


class GPUFunction:
    """One host function of a GPU module: checks arguments, then runs its launch plan."""

    def __init__(self, entry: dict, module: GPUHostModule):
        sig = entry["signature"]
        self.name: str = entry["name"]
        self.module = module
        self.steps: list[dict] = entry["steps"]
        self.params = [_Param(i, p) for i, p in enumerate(sig["params"])]
        self.shape_vars = [(s["name"], s["dtype"]) for s in sig["shape_vars"]]
        self._names = ", ".join(p.name for p in self.params)
        self._scratch: dict[tuple[str, int], tuple[int, Any]] = {}
        # per stream of a caller (graph executors): their launches may run at the same time on
        # the device, so each stream has intermediate buffers of its own
        self._stream_scratch: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # the intermediate buffers (_scratch) are this function's: threads calling it at once
        # queue their launch sequences one after the other (the device's queue is in order)
        self._lock = threading.Lock()

    @property
    def device(self) -> Device:
        return Device(self.module.device_type, 0)

    def __repr__(self) -> str:
        return f"<tvmpy.runtime.GPUFunction {self.name}({self._names}) on {self.module.api_name}>"

    def __call__(self, *args: Any) -> None:
        state = self.state(args)
        self.run(state)
        self.finish(state)

    # the prepared-call protocol of runtime/function.py (graph executor, time_evaluator):
    # ``prepare`` checks once, ``_cfunc(*raw)`` runs (host arrays copied in and out each time)
    def prepare(self, args: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        return [self.state(args)], []

    def _cfunc(self, state: dict) -> int:
        # the executor's path: launches stay queued (one in-order queue per device, so the next
        # node's kernels run after these); whoever reads a result (a copy to the host) or
        # times (time_evaluator) waits for the device. A direct call waits (``__call__``), so
        # a failing kernel is reported at the call that launched it.
        self.run(state)
        self.finish(state, wait=False)
        return 0

    def _raise_error(self, rc: int) -> None:
        raise RuntimeError(f"{self.name} failed (returned {rc})")

    # ---- arguments ---------------------------------------------------------------------------
    def state(self, args: Sequence[Any]) -> dict:
        """Check ``args``; return the call state (env, device buffers, host arrays to copy)."""
        if self.module.device_module is None:
            raise RuntimeError(
                f"{self.name}: the {self.module.api_name} kernels it launches were never "
                "imported: this host module was loaded without its device code; load that "
                "(e.g. dev = tvm.runtime.load_module('x.cl' or 'x.ptx')) and call "
                "import_module(dev) on this module first")
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}() takes {len(self.params)} argument(s) ({self._names}), "
                            f"got {len(args)}")
        dtype = self.module.device_type
        dev: Device | None = None
        for p, a in zip(self.params, args):
            if isinstance(a, NDArray) and a._device.device_type != kDLCPU:
                if a._device.device_type != dtype or (dev is not None and a._device != dev):
                    where = dev or Device(dtype, 0)
                    raise ValueError(f"{self.name}: argument {p.name} is on {a._device}, but "
                                     f"{self.name} runs on {where}")
                dev = a._device
        dev = dev or Device(dtype, 0)
        env: dict[str, Any] = {}
        bound: dict[str, str] = {}
        bufs: dict[str, Any] = {}
        host_args: list[tuple[np.ndarray, DeviceNDArray, bool]] = []  # (host, device copy, written)
        # written device arrays that are also another argument: (array, its private copy)
        private: list[tuple[DeviceNDArray, DeviceNDArray]] = []
        for p, a in zip(self.params, args):
            if p.kind == "scalar":
                env[p.name] = self._scalar(p, a)
                continue
            if isinstance(a, NDArray) or isinstance(a, np.ndarray):
                dt_name = a.dtype if isinstance(a, NDArray) else a.dtype.name
            else:
                raise TypeError(f"{self.name}: argument {p.name} must be a tvm.nd.NDArray or "
                                f"numpy.ndarray of {p.dtype}, got {type(a).__name__}")
            if dt_name != p.dtype:
                raise ValueError(f"{self.name}: argument {p.name} must have dtype {p.dtype}, "
                                 f"got {dt_name}")
            self._bind_shape(p, tuple(a.shape), env, bound)
            if isinstance(a, DeviceNDArray):
                bufs[p.name] = a._mem
                if p.written and self._aliased(p, a, args):  # (as runtime/function.py does)
                    tmp = device_empty(a.shape, a._arr.dtype, dev)
                    bufs[p.name] = tmp._mem
                    private.append((a, tmp))
            else:  # host memory: a device copy, filled by each run
                host = a._arr if isinstance(a, NDArray) else a
                tmp = device_empty(host.shape, host.dtype, dev)
                bufs[p.name] = tmp._mem
                if p.written and not host.flags.writeable:
                    raise ValueError(f"{self.name}: argument {p.name} is written by the "
                                     "kernel but the array passed is read-only")
                host_args.append((host, tmp, p.written))
        for p, a in zip(self.params, args):  # composite dims, once every var is bound
            if p.kind == "buffer" and p.has_expr:
                for d, (dim, got) in enumerate(zip(p.dims, a.shape)):
                    if dim.expr is not None:
                        try:
                            want = int(dim.expr(env))
                        except (KeyError, ZeroDivisionError) as err:
                            raise ValueError(f"{self.name}: cannot evaluate dim {dim.text} of "
                                             f"{p.name}: {err!r}") from None
                        if want != got:
                            raise ValueError(f"{self.name}: argument {p.name} dim {d} must be "
                                             f"{dim.text} = {want}, got {got}")
        for name, dtype_name in self.shape_vars:
            rng = _INT_RANGE.get(dtype_name)
            if rng is not None and not rng[0] <= env[name] <= rng[1]:
                raise ValueError(f"{self.name}: shape var {name}={env[name]} does not fit {dtype_name}")
        return {"env": env, "bufs": bufs, "host": host_args, "dev": dev, "private": private}

    def _aliased(self, p: _Param, a: DeviceNDArray, args: Sequence[Any]) -> bool:
        """Whether the device array ``a`` of the written parameter ``p`` is also passed for
        another parameter: the kernel then writes a copy of its own, copied back after it (its
        threads would otherwise read what others already wrote: a transpose into its own
        input). ValueError when the other parameter is written too."""
        shared = False
        for q, b in zip(self.params, args):
            if q is p or not isinstance(b, DeviceNDArray) or b._mem is not a._mem:
                continue
            if q.written:
                first, second = (p, q) if p.index < q.index else (q, p)
                raise ValueError(f"{self.name}: arguments {first.name} and {second.name} are "
                                 f"the same device memory, and {self.name} writes both (the "
                                 "result would depend on the order of its stores); pass "
                                 "separate arrays")
            shared = True
        return shared

    def _bind_shape(self, p: _Param, shape: tuple[int, ...], env: dict, bound: dict) -> None:
        if shape == p.const_shape:
            return
        text = "(" + ", ".join(d.text for d in p.dims) + ")"
        if len(shape) != len(p.dims):
            raise ValueError(f"{self.name}: argument {p.name} must have {len(p.dims)} "
                             f"dimension(s) {text}, got shape {shape}")
        for d, (dim, got) in enumerate(zip(p.dims, shape)):
            if dim.var is not None:
                have = env.get(dim.var)
                if have is None:
                    env[dim.var] = got
                    bound[dim.var] = f"argument {p.name} dim {d}"
                elif have != got:
                    raise ValueError(f"{self.name}: argument {p.name} dim {d} is {got}, but "
                                     f"{dim.var}={have} from {bound.get(dim.var, 'a scalar')}")
            elif dim.const is not None and got != dim.const:
                raise ValueError(f"{self.name}: argument {p.name} must have shape {text}, "
                                 f"got {shape} (dim {d})")

    def _scalar(self, p: _Param, v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v[()]
        if p.range is not None:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{self.name}: argument {p.name} must be an integer ({p.dtype}), "
                                f"got {type(v).__name__} {v!r}")
            if not p.range[0] <= int(v) <= p.range[1]:
                raise ValueError(f"{self.name}: argument {p.name}={v} does not fit {p.dtype}")
            return int(v)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{self.name}: argument {p.name} must be a number ({p.dtype}), "
                            f"got {type(v).__name__} {v!r}")
        return float(v)

    # ---- running -----------------------------------------------------------------------------
    def run(self, state: dict) -> None:
        """Run the plan (kernel launches are queued, not waited for). The first run of a call
        state evaluates its steps once — launch sizes, scalar arguments, intermediate buffers
        and asserts are all fixed by the state's arguments — and binds each launch; later runs
        of the same state (the graph executor's nodes, time_evaluator) replay the bound
        launches with no per-launch Python work beyond one driver call."""
        with self._lock:
            bound = state.get("bound")
            if bound is None:
                bound = state["bound"] = self._bind(state)
            for host, tmp, _ in state["host"]:
                tmp.copyfrom(host)
            for arr, tmp in state["private"]:
                tmp.copyfrom(arr)  # device to device, queued before the launches
            for launch in bound:
                launch()

    def _bind(self, state: dict) -> list[Callable[[], None]]:
        env = dict(state["env"])
        bufs, dev = dict(state["bufs"]), state["dev"]
        dm = self.module.device_module
        assert dm is not None  # state() checked
        program = dm.program(dev)
        bound: list[Callable[[], None]] = []
        # a stream of the caller's (the graph executor's, CUDA): every launch is queued on it
        stream = state.get("stream")
        self._bind_steps(self.steps, env, bufs, dev, program, bound,
                         {} if stream is None else {"stream": stream})
        return bound

    def _bind_steps(self, steps: list[dict], env: dict, bufs: dict, dev: Device, program: Any,
                    bound: list[Callable[[], None]], launch_kw: dict | None = None) -> None:
        api = self.module.api
        launch_kw = launch_kw or {}
        for step in steps:
            if "loop" in step:  # the body's launches once per value (a scan's time steps)
                lo = int(eval_expr(step["min"], env))
                for v in range(lo, lo + int(eval_expr(step["extent"], env))):
                    env[step["loop"]] = v
                    self._bind_steps(step["body"], env, bufs, dev, program, bound, launch_kw)
            elif "launch" in step:
                grid = [int(eval_expr(x, env)) for x in step["grid"]]
                block = [int(eval_expr(x, env)) for x in step["block"]]
                if min(grid + block) < 0:
                    raise ValueError(f"{self.name}: kernel {step['launch']} has a negative launch "
                                     f"size (grid {grid}, block {block}) for {env}")
                if min(grid + block) == 0:
                    continue  # empty iteration space
                args = []
                for a in step["args"]:
                    if "buf" in a:
                        args.append(bufs[a["buf"]])
                    else:
                        args.append(np.dtype(a["dtype"]).type(eval_expr(a["scalar"], env)))
                bound.append(api.bind_launch(program, step["launch"], grid, block,
                                             int(eval_expr(step["shared"], env)), args,
                                             dev.device_id, **launch_kw))
            elif "alloc" in step:  # an intermediate buffer, reused by later calls
                count = int(eval_expr(step["size"], env)) * int(step.get("lanes", 1))
                if count < 0:
                    raise ValueError(f"{self.name}: buffer {step['alloc']} has negative size {count}")
                nbytes = count * np.dtype(step["dtype"]).itemsize
                key = (step["alloc"], dev.device_id)
                stream = launch_kw.get("stream")
                store = (self._scratch if stream is None else
                         self._stream_scratch.setdefault(stream, {}))
                held = store.get(key)
                if held is None or held[0] < nbytes:  # grown as needed (bound launches keep
                    held = store[key] = (nbytes, api.alloc(nbytes, dev.device_id))
                bufs[step["alloc"]] = held[1]  # the memory they were bound to alive)
            elif "let" in step:
                env[step["let"]] = eval_expr(step["value"], env)
            elif "assert" in step:
                if not eval_expr(step["assert"], env):
                    raise RuntimeError(f"{self.name} failed: {step['message']}")

    def finish(self, state: dict, wait: bool = True) -> None:
        """Copy host arguments the kernels wrote back (this waits for the kernels); without
        any, wait for the device only when ``wait``."""
        for arr, tmp in state["private"]:
            arr.copyfrom(tmp)
        written = [(host, tmp) for host, tmp, w in state["host"] if w]
        for host, tmp in written:
            np.copyto(host, tmp.numpy())
        if not written and wait:
            self.module.api.sync(state["dev"].device_id)


# the files a device module saves as (TVM's ``save("x.cl")`` / ``save("x.ptx")``), per API:
# extension -> what is written ("source": the kernel source; else the binary of that name)
_DEVICE_FILES = {"opencl": {"cl": "source"}, "cuda": {"cu": "source", "ptx": "ptx"}}


def meta_file_path(file_name: str) -> str:
    """TVM's file beside saved device code that lists its kernels: ``x.cl`` -> ``x.tvm_meta.json``."""
    stem, ext = os.path.splitext(file_name)
    return (stem if ext else file_name) + ".tvm_meta.json"


class GPUDeviceModule(Module):
    """The device code of a GPU module: kernel source, compiled per device on first use.

    ``save("x.cl")`` (OpenCL) / ``save("x.ptx")``, ``save("x.cu")`` (CUDA) writes the code and,
    as TVM does, ``x.tvm_meta.json`` with the kernels' argument types; :func:`load_device_file`
    (``tvm.runtime.load_module("x.cl")``) reads both back. The kernels run only through a host
    module that imports this one (``host.import_module(dev)``)."""

    _device_code = True

    def __init__(self, api_name: str, source: str, kernels: dict, lib_path: str | None = None,
                 binaries: dict[str, bytes] | None = None):
        import base64

        self.binaries = dict(binaries or {})  # compiled images (CUDA: "ptx", "sm_90" cubin...)
        meta = {"version": 1, "entry": "", "functions": [], "source": source, "kernels": kernels,
                "binaries": {k: base64.b64encode(v).decode() for k, v in self.binaries.items()}}
        sources: dict[str, Any] = {"cl" if api_name == "opencl" else api_name: source} \
            if source else {}
        if "ptx" in self.binaries:
            sources["ptx"] = self.binaries["ptx"].decode()
        if api_name == "webgpu" and source:  # get_source("wgsl"): every shader, one after another
            sources["wgsl"] = lambda: "\n".join(k["wgsl"] for k in json.loads(source).values())
        super().__init__(None, meta, api_name, sources=sources, lib_path=lib_path)
        self.api_name = api_name
        self.source = source
        self.kernel_params = kernels
        self._programs: dict[int, Any] = {}

    def save(self, file_name: str, fmt: str = "") -> None:
        """Write the device code as ``.cl`` (OpenCL), ``.ptx`` / ``.cu`` (CUDA), and the kernel
        list beside it (``x.tvm_meta.json``, as TVM does)."""
        file_name = os.fspath(file_name)
        ext = (fmt or os.path.splitext(file_name)[1]).lstrip(".")
        kinds = _DEVICE_FILES.get(self.api_name, {})
        what = kinds.get(ext)
        if not kinds:  # vulkan: one SPIR-V module per kernel, kept in the library's metadata
            raise ValueError(f"save: a {self.api_name} device module is not saved on its own "
                             f"({file_name!r}); export_library writes host and device code "
                             "into one library")
        if what is None:
            raise ValueError(f"save: a {self.api_name} device module is saved as "
                             + " or ".join(f".{e}" for e in kinds) + f", not {file_name!r} "
                             "(export_library writes host and device code into one library)")
        if what == "source":
            if not self.source:
                raise ValueError(f"save: this {self.api_name} device module was loaded without "
                                 f"its source; save it as .ptx")
            data = self.source.encode()
        elif what in self.binaries:
            data = self.binaries[what]
        else:
            raise ValueError(f"save: this {self.api_name} device module has no {what} code "
                             f"(has: {', '.join(sorted(self.binaries)) or 'source only'})")
        with open(file_name, "wb") as f:
            f.write(data)
        info = {k: {"name": k, "arg_types": list(v)} for k, v in self.kernel_params.items()}
        with open(meta_file_path(file_name), "w") as f:
            json.dump({"tvm_version": "tvmpy", "gpu_api": self.api_name, "func_info": info}, f,
                      indent=1)

    def _not_host(self, what: str) -> RuntimeError:
        return RuntimeError(
            f"{what}: this {self.api_name} device module holds kernels "
            f"({', '.join(self.kernel_params) or 'none'}), which run only through the host "
            "module that launches them: load the host code (tvm.runtime.load_module of the "
            "library made from its saved .o) and call host.import_module(this module)")

    def get_function(self, name: str, query_imports: bool = True) -> Any:
        raise self._not_host(f"get_function({name!r})")

    def __call__(self, *args: Any) -> None:
        raise self._not_host("call")

    def program(self, dev: Device) -> Any:
        prog = self._programs.get(dev.device_id)
        if prog is None:
            api = device_api(dev)
            prog = (api.load_binaries(self.binaries, dev.device_id) if self.binaries
                    else api.load(self.source, dev.device_id))
            self._programs[dev.device_id] = prog
        return prog

    def _all_names(self) -> list[str]:
        return list(self.kernel_params)


class GPUHostModule(Module):
    """Host functions of a GPU build: launch plans, with the device module imported.

    ``save("x.o")`` writes the host part only (TVM's split: the device code is saved from
    ``imported_modules[0]``); the module loaded from it has no device module until
    :meth:`import_module` gives it one whose kernels match its plan."""

    def __init__(self, api_name: str, plan: dict, entry: str,
                 device_module: GPUDeviceModule | None, lib_path: str | None = None):
        meta = {"version": 1, "entry": entry, "functions": [], "gpu_api": api_name, "plan": plan}
        super().__init__(None, meta, "gpu_host", sources={"json": json.dumps(plan, indent=1)},
                         lib_path=lib_path)
        self.api_name = api_name
        self.device_type = DEVICE_TYPES[api_name]
        self.device = Device(self.device_type, 0)
        self.plan = plan
        self.device_module: GPUDeviceModule | None = None
        if device_module is not None:
            self.import_module(device_module)
        self._gpu_funcs = {e["name"]: e for e in plan["functions"]}

    @classmethod
    def create(cls, api_name: str, source: str, plan: dict, entry: str,
               binaries: dict[str, bytes] | None = None) -> GPUHostModule:
        return cls(api_name, plan, entry, GPUDeviceModule(api_name, source, plan["kernels"],
                                                          binaries=binaries))

    @classmethod
    def _from_meta(cls, meta: dict, path: str) -> GPUHostModule:
        dev_meta = next((m for m in meta.get("imports", []) if "source" in m), None)
        api = meta["gpu_api"]
        devmod = None
        if dev_meta is not None:  # exported; a saved .o holds the host part only
            import base64

            binaries = {k: base64.b64decode(v) for k, v in dev_meta.get("binaries", {}).items()}
            devmod = GPUDeviceModule(api, dev_meta["source"], dev_meta.get("kernels", {}), path,
                                     binaries)
        return cls(api, meta["plan"], meta.get("entry", ""), devmod, path)

    def import_module(self, mod: Module) -> None:
        """Give this host module its device code (TVM's ``host.import_module(load_module(
        "x.cl"))``): a device module of the same API holding every kernel the plans launch,
        with the same argument types. Other modules are imported as by ``Module``."""
        if not isinstance(mod, GPUDeviceModule):
            super().import_module(mod)
            return
        if mod.api_name != self.api_name:
            raise ValueError(f"import_module: this host module launches {self.api_name} "
                             f"kernels; the device module holds {mod.api_name} code")
        if self.device_module is not None:
            raise ValueError("import_module: this host module already has its device module "
                             "(imported_modules[0]); load the host code again to use another")
        want: dict = self.plan["kernels"]
        missing = [k for k in want if k not in mod.kernel_params]
        if missing:
            raise ValueError(
                f"import_module: the device module has no kernel {', '.join(missing)} that "
                f"this host module launches (it has: {', '.join(mod.kernel_params) or 'none'}); "
                "import the device code saved from the same build")
        for k, types in want.items():
            if list(mod.kernel_params[k]) != list(types):
                raise ValueError(f"import_module: kernel {k} takes ({', '.join(types)}) in this "
                                 f"host module's plan, ({', '.join(mod.kernel_params[k])}) in "
                                 "the device module; import the device code of the same build")
        self.device_module = mod
        self.imported_modules.insert(0, mod)

    @property
    def api(self) -> Any:
        return device_api(self.device)

    def export_library(self, file_name: str, fcompile: Any = None, addons: Any = None,
                       workspace_dir: str | None = None, **kwargs: Any) -> None:
        """As :meth:`Module.export_library`; a webgpu module is written as the web artefact
        (one ``.wasm``, docs/WEB_ARTEFACT.md; ``fallback=``: a wasm32 build of the same code)."""
        if self.api_name == "webgpu":
            from .webgpu_artefact import export_kernels

            export_kernels(self, file_name, kwargs.pop("fallback", None))
            return
        super().export_library(file_name, fcompile, addons, workspace_dir, **kwargs)

    def _find(self, name: str) -> Any:  # a GPUFunction (duck-typed as a Function)
        entry = self._gpu_funcs.get(name)
        if entry is None:
            return None
        f = self._funcs.get(name)
        if f is None:
            f = self._funcs[name] = GPUFunction(entry, self)  # type: ignore[assignment]
        return f

    def function_names(self) -> list[str]:
        return list(self._gpu_funcs)

    def _all_names(self) -> list[str]:
        return list(self._gpu_funcs)

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
                       f_preproc: str = "") -> Callable[..., BenchmarkResult]:
        """Seconds per call of ``func_name`` on ``dev``: each repeat queues ``number`` runs and
        waits for the device before reading the clock."""
        self.get_function(func_name)  # AttributeError naming the known functions
        f = self._find(func_name)
        assert isinstance(f, GPUFunction)
        if not isinstance(dev, Device) or dev.device_type != self.device_type:
            raise ValueError(f"time_evaluator: {func_name} runs on {self.api_name} devices, "
                             f"not on {dev}")
        if f_preproc:
            raise ValueError("time_evaluator: f_preproc is for CPU caches; not on a GPU")
        for label, v in (("number", number), ("repeat", repeat)):
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"time_evaluator: {label} must be a positive int, got {v!r}")

        def evaluate(*args: Any) -> BenchmarkResult:
            state = f.state(args)
            f.run(state)  # warm-up (builds the program)
            api = self.api
            api.sync(state["dev"].device_id)
            n, results = int(number), []
            for r in range(int(repeat)):
                if r and cooldown_interval_ms:
                    time.sleep(cooldown_interval_ms / 1e3)
                while True:
                    t0 = time.perf_counter()
                    for _ in range(n):
                        f.run(state)
                    api.sync(state["dev"].device_id)
                    elapsed = time.perf_counter() - t0
                    if min_repeat_ms <= 0 or elapsed * 1e3 >= min_repeat_ms:
                        break
                    n = max(int(min_repeat_ms / max(elapsed * 1e3 / n, 1e-6)) + 1, int(n * 1.618))
                results.append(elapsed / n)
            f.finish(state)
            return BenchmarkResult(results)

        return evaluate


def load_device_file(path: str, fmt: str) -> GPUDeviceModule:
    """TVM's ``load_module("x.cl")`` / ``("x.ptx")`` / ``("x.cu")``: device code saved by
    :meth:`GPUDeviceModule.save`, with its kernel list (``x.tvm_meta.json``) beside it."""
    api = next((a for a, kinds in _DEVICE_FILES.items() if fmt in kinds), None)
    if api is None:
        raise ValueError(f"load_module: cannot load device code of format {fmt!r} "
                         "(saved device code loads from .cl, .ptx or .cu)")
    meta_path = meta_file_path(path)
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        info = meta["func_info"]
        kernels = {k: list(v["arg_types"]) for k, v in info.items()}
    except FileNotFoundError:
        raise ValueError(f"load_module: {path} needs its kernel list {meta_path}, which "
                         "save() writes beside it; copy both files") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"load_module: {meta_path} is not a kernel list written by save() "
                         f"({err!r})") from None
    with open(path, "rb") as f:
        data = f.read()
    if _DEVICE_FILES[api][fmt] == "source":
        return GPUDeviceModule(api, data.decode(), kernels)
    return GPUDeviceModule(api, "", kernels, binaries={_DEVICE_FILES[api][fmt]: data})
