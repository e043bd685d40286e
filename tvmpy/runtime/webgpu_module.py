"""The WebGPU device API (DLPack device type 15, ``tvm.webgpu(0)``) on wgpu-py.

Device 0 is wgpu-py's default adapter (on this project's CI: Mesa's lavapipe, "llvmpipe" over
Vulkan). The device is created with the adapter's own limits (storage buffers per stage,
binding sizes, workgroup sizes) and ``shader-f16`` when the adapter has it. A program is the
``{kernel: KERNEL}`` JSON of docs/WEB_ARTEFACT.md; each kernel's shader module and pipeline are
made once per device and cached. Launches (and device-to-device copies) are recorded, not
submitted: the next read, write or sync submits everything recorded in ONE command encoder
(consecutive dispatches share one compute pass; WebGPU orders their storage accesses). wgpu is
imported on first use only.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .gpu_module import register_device_api

__all__ = ["WebGPUAPI", "WEBGPU_API", "INT32_MAX"]

INT32_MAX = 2**31 - 1
_LIMITS = ("max-storage-buffers-per-shader-stage", "max-storage-buffer-binding-size",
           "max-buffer-size", "max-compute-workgroup-storage-size",
           "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
           "max-compute-workgroup-size-y", "max-compute-workgroup-size-z",
           "max-compute-workgroups-per-dimension", "max-bindings-per-bind-group")
# scalar arguments: 4-byte fields (int64 and the narrow ints are computed in 32 bits)
_PACK = {"int32": "<i", "uint32": "<I", "float32": "<f", "int64": "<i", "int8": "<i",
         "int16": "<i", "uint8": "<I", "uint16": "<I"}


def _wgpu() -> Any:
    try:
        import wgpu
    except ImportError:
        raise RuntimeError("the WebGPU runtime needs the wgpu package (pip install wgpu) and a "
                           "WebGPU-capable driver (e.g. Mesa's lavapipe: apt-get install "
                           "mesa-vulkan-drivers libvulkan1)") from None
    return wgpu


def _up4(n: int) -> int:
    return (int(n) + 3) // 4 * 4


def _check_int64(arr: np.ndarray, what: str) -> None:
    """WebGPU kernels compute int64 in 32 bits: refuse values they would truncate."""
    if arr.dtype == np.int64 and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -(2**31) or hi > INT32_MAX:
            raise ValueError(f"{what} holds {lo if lo < -(2**31) else hi}, outside the int32 "
                             "range: WebGPU has no 64-bit integers (tvmpy computes int64 in "
                             "32 bits on webgpu)")


class _Device:
    """One wgpu device: its limits, recorded work and cached pipelines."""

    def __init__(self, adapter: Any):
        wgpu = _wgpu()
        self.adapter = adapter
        feats = ["shader-f16"] if "shader-f16" in adapter.features else []
        have = dict(adapter.limits)
        self.limits = {k: have[k] for k in _LIMITS if k in have}
        self.device = adapter.request_device_sync(required_features=feats,
                                                  required_limits=self.limits)
        self.features = set(feats)
        self.queue = self.device.queue
        self.name = adapter.info.get("device", "webgpu adapter")
        self.pending: list[tuple] = []
        self.lock = threading.Lock()
        self.pipelines: dict[str, Any] = {}
        self.fence: Any = None
        self.usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | \
            wgpu.BufferUsage.COPY_DST

    def flush(self) -> None:
        """Submit the recorded dispatches and copies in one command encoder."""
        with self.lock:
            ops, self.pending = self.pending, []
        if not ops:
            return
        enc = self.device.create_command_encoder()
        cpass = None
        for op in ops:
            if op[0] == "dispatch":
                if cpass is None:
                    cpass = enc.begin_compute_pass()
                _, pipe, group, grid = op
                cpass.set_pipeline(pipe)
                cpass.set_bind_group(0, group)
                cpass.dispatch_workgroups(*grid)
            else:
                if cpass is not None:
                    cpass.end()
                    cpass = None
                _, dst, src, nbytes = op
                enc.copy_buffer_to_buffer(src, 0, dst, 0, nbytes)
        if cpass is not None:
            cpass.end()
        self.queue.submit([enc.finish()])


class WebGPUProgram:
    """The kernels of one device module on one device (pipelines made on first launch)."""

    def __init__(self, kernels: dict[str, dict], dev: _Device):
        self.kernels = kernels
        self.dev = dev

    def pipeline(self, name: str) -> Any:
        k = self.kernels.get(name)
        if k is None:
            raise RuntimeError(f"no WebGPU kernel {name!r} (kernels: {', '.join(self.kernels)})")
        key = hashlib.sha256(k["wgsl"].encode()).hexdigest()
        pipe = self.dev.pipelines.get(key)
        if pipe is None:
            d = self.dev.device
            try:
                module = d.create_shader_module(code=k["wgsl"])
                pipe = d.create_compute_pipeline(layout="auto", compute={
                    "module": module, "entry_point": k.get("entry_point", "main")})
            except Exception as err:  # wgpu raises GPUValidationError and others
                raise RuntimeError(f"WebGPU kernel {name}: the WGSL shader was rejected by "
                                   f"{self.dev.name}: {err}\n--- WGSL ---\n{k['wgsl']}") from None
            self.dev.pipelines[key] = pipe
        return pipe


class WebGPUAPI:
    """Driver calls for WebGPU devices (the device-API protocol of runtime/gpu_module.py)."""

    name = "webgpu"

    def __init__(self) -> None:
        self._devs: dict[int, _Device] = {}
        self._lock = threading.Lock()

    def context(self, dev_id: int) -> _Device:
        d = self._devs.get(dev_id)
        if d is None:
            with self._lock:
                d = self._devs.get(dev_id)
                if d is None:
                    if dev_id != 0:
                        raise ValueError(f"no WebGPU device webgpu({dev_id}): wgpu-py gives one "
                                         "adapter, webgpu(0)")
                    adapter = _wgpu().gpu.request_adapter_sync(power_preference="high-performance")
                    if adapter is None:
                        raise RuntimeError("no WebGPU adapter: install a Vulkan driver (e.g. "
                                           "Debian's mesa-vulkan-drivers for lavapipe)")
                    d = self._devs[dev_id] = _Device(adapter)
        return d

    def exist(self, dev_id: int) -> bool:
        try:
            self.context(dev_id)
        except (ValueError, RuntimeError):
            return False
        return True

    def limits(self, dev_id: int) -> dict[str, int]:
        return dict(self.context(dev_id).limits)

    # ---- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int, dev_id: int) -> Any:
        d = self.context(dev_id)
        size = max(_up4(nbytes), 16)
        if size > d.limits.get("max-buffer-size", size):
            raise MemoryError(f"cannot allocate {nbytes} bytes on webgpu({dev_id}): the "
                              f"adapter's max-buffer-size is {d.limits['max-buffer-size']}")
        return d.device.create_buffer(size=size, usage=d.usage)

    def to_host(self, mem: Any, out: np.ndarray, dev_id: int) -> None:
        d = self.context(dev_id)
        d.flush()
        data = d.queue.read_buffer(mem, 0, _up4(out.nbytes))
        out.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, np.uint8, out.nbytes)

    def from_host(self, mem: Any, arr: np.ndarray, dev_id: int) -> None:
        d = self.context(dev_id)
        d.flush()
        _check_int64(arr, "an int64 array copied to the device")
        raw = np.ascontiguousarray(arr).tobytes()
        d.queue.write_buffer(mem, 0, raw + b"\0" * (_up4(len(raw)) - len(raw)))

    def copy(self, dst: Any, src: Any, nbytes: int, dev_id: int) -> None:
        d = self.context(dev_id)
        with d.lock:
            d.pending.append(("copy", dst, src, _up4(nbytes)))

    def sync(self, dev_id: int) -> None:
        d = self.context(dev_id)
        d.flush()
        # reading a buffer waits for the submitted work (wgpu-py 0.32's
        # queue.on_submitted_work_done_sync fails on its own callback's signature)
        if d.fence is None:
            d.fence = d.device.create_buffer(size=16, usage=d.usage)
        d.queue.read_buffer(d.fence, 0, 4)

    # ---- code --------------------------------------------------------------------------------
    def load(self, source: str, dev_id: int) -> WebGPUProgram:
        d = self.context(dev_id)
        kernels = json.loads(source)
        limit = d.limits.get("max-storage-buffers-per-shader-stage", 8)
        for name, k in kernels.items():
            missing = [f for f in k.get("features", []) if f not in d.features]
            if missing:
                raise RuntimeError(f"WebGPU kernel {name} needs the feature(s) "
                                   f"{', '.join(missing)} (float16 needs shader-f16), which "
                                   f"{d.name} lacks; compute in float32")
            n = sum(1 for a in k["args"] if a["kind"] == "buffer")
            if n > limit:
                raise RuntimeError(f"WebGPU kernel {name} binds {n} storage buffers; {d.name} "
                                   f"allows {limit} per shader stage "
                                   "(max-storage-buffers-per-shader-stage): fuse fewer inputs "
                                   "into one kernel")
        return WebGPUProgram(kernels, d)

    def launch(self, program: WebGPUProgram, name: str, grid: list[int], block: list[int],
               shared_bytes: int, args: list[Any], dev_id: int) -> None:
        self.bind_launch(program, name, grid, block, shared_bytes, args, dev_id)()

    def bind_launch(self, program: WebGPUProgram, name: str, grid: list[int], block: list[int],
                    shared_bytes: int, args: list[Any], dev_id: int) -> Callable[[], None]:
        """Check one launch, make its bind group; return a function that records it."""
        d = program.dev
        k = program.kernels[name]
        if list(block) != list(k["workgroup_size"]):
            raise ValueError(f"kernel {name}: launched with block {tuple(block)}, but its WGSL "
                             f"@workgroup_size is {tuple(k['workgroup_size'])}")
        if shared_bytes:
            raise ValueError(f"kernel {name}: dynamic shared memory ({shared_bytes} bytes) is "
                             "not supported by WebGPU; use constant-size shared buffers")
        most = d.limits.get("max-compute-workgroups-per-dimension", 65535)
        if any(g > most for g in grid):
            raise ValueError(f"kernel {name}: grid {tuple(grid)} exceeds {d.name}'s "
                             f"max-compute-workgroups-per-dimension ({most}); use a schedule "
                             "with larger blocks or an outer loop")
        pipe = program.pipeline(name)
        entries = []
        uniform = bytearray((k.get("uniform") or {}).get("size", 0))
        max_bind = d.limits.get("max-storage-buffer-binding-size", 1 << 27)
        for a, spec in zip(args, k["args"]):
            if spec["kind"] == "buffer":
                elem = np.dtype(spec["dtype"]).itemsize
                if a.size // elem > INT32_MAX + 1 or a.size > max_bind:
                    raise ValueError(f"kernel {name}: a {a.size}-byte buffer exceeds 32-bit "
                                     f"indexing or {d.name}'s max-storage-buffer-binding-size "
                                     f"({max_bind})")
                entries.append({"binding": spec["binding"],
                                "resource": {"buffer": a, "offset": 0, "size": a.size}})
            else:
                if spec["dtype"] == "int64":
                    _check_int64(np.asarray(a), f"kernel {name}: the int64 scalar argument")
                struct.pack_into(_PACK[spec["dtype"]], uniform, spec["offset"], a.item())
        if uniform:
            wgpu = _wgpu()
            ubuf = d.device.create_buffer(size=len(uniform), usage=wgpu.BufferUsage.UNIFORM
                                          | wgpu.BufferUsage.COPY_DST)
            d.queue.write_buffer(ubuf, 0, bytes(uniform))
            entries.append({"binding": k["uniform"]["binding"],
                            "resource": {"buffer": ubuf, "offset": 0, "size": len(uniform)}})
        group = d.device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries)
        op = ("dispatch", pipe, group, tuple(int(g) for g in grid))

        def record() -> None:
            with d.lock:
                d.pending.append(op)

        return record


WEBGPU_API = WebGPUAPI()
register_device_api(15, WEBGPU_API)
