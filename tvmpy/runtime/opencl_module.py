"""The OpenCL device API (DLPack device type 4, ``tvm.opencl(n)``) on pyopencl.

Device ``n`` is the n-th device over all OpenCL platforms, in ``pyopencl.get_platforms()`` order
(on this project's CI: PoCL's CPU device). Each device gets one context and one in-order queue;
programs are built once per (device, source). pyopencl is imported on first use only.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .gpu_module import register_device_api

__all__ = ["OpenCLAPI", "OPENCL_API"]


def _cl() -> Any:
    try:
        import pyopencl
    except ImportError:
        raise RuntimeError("the OpenCL runtime needs the pyopencl package (pip install pyopencl, "
                           "plus an OpenCL driver, e.g. pocl-binary-distribution)") from None
    return pyopencl


class OpenCLAPI:
    """Driver calls for OpenCL devices (the device-API protocol of runtime/gpu_module.py)."""

    name = "opencl"

    def __init__(self) -> None:
        self._devices: list[Any] | None = None
        self._ctx: dict[int, tuple[Any, Any, Any]] = {}
        self._programs: dict[tuple[int, str], Any] = {}
        self._kernels: dict[tuple[int, str], Any] = {}
        self._lock = threading.Lock()  # a kernel object's arguments are shared state

    def devices(self) -> list[Any]:
        if self._devices is None:
            cl = _cl()
            try:
                platforms = cl.get_platforms()
            except cl.Error:  # no ICD / no platform
                platforms = []
            self._devices = [d for p in platforms for d in p.get_devices()]
        return self._devices

    def context(self, dev_id: int) -> tuple[Any, Any, Any]:
        """(context, queue, device) of device ``dev_id``."""
        hit = self._ctx.get(dev_id)
        if hit is None:
            devs = self.devices()
            if not 0 <= dev_id < len(devs):
                found = ", ".join(f"{k}: {d.name.strip()}" for k, d in enumerate(devs)) or "none"
                raise ValueError(f"no OpenCL device opencl({dev_id}); devices: {found}")
            cl = _cl()
            ctx = cl.Context([devs[dev_id]])
            hit = self._ctx[dev_id] = (ctx, cl.CommandQueue(ctx), devs[dev_id])
        return hit

    def exist(self, dev_id: int) -> bool:
        try:
            self.context(dev_id)
        except (ValueError, RuntimeError):
            return False
        return True

    # ---- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int, dev_id: int) -> Any:
        cl = _cl()
        ctx = self.context(dev_id)[0]
        try:
            return cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=max(int(nbytes), 64))
        except cl.Error as err:
            raise MemoryError(f"cannot allocate {nbytes} bytes on opencl({dev_id}): {err}") from None

    def to_host(self, mem: Any, out: np.ndarray, dev_id: int) -> None:
        _cl().enqueue_copy(self.context(dev_id)[1], out, mem, is_blocking=True)

    def from_host(self, mem: Any, arr: np.ndarray, dev_id: int) -> None:
        _cl().enqueue_copy(self.context(dev_id)[1], mem, np.ascontiguousarray(arr), is_blocking=True)

    def copy(self, dst: Any, src: Any, nbytes: int, dev_id: int) -> None:
        _cl().enqueue_copy(self.context(dev_id)[1], dst, src, byte_count=int(nbytes))

    def sync(self, dev_id: int) -> None:
        self.context(dev_id)[1].finish()

    # ---- code --------------------------------------------------------------------------------
    def load(self, source: str, dev_id: int) -> Any:
        """The program of ``source`` built for device ``dev_id`` (cached)."""
        key = (dev_id, hashlib.sha256(source.encode()).hexdigest())
        prog = self._programs.get(key)
        if prog is not None:
            return prog
        cl = _cl()
        ctx, _, dev = self.context(dev_id)
        for ext, what in (("cl_khr_fp16", "float16"), ("cl_khr_fp64", "float64")):
            if f"#pragma OPENCL EXTENSION {ext}" in source and ext not in dev.extensions:
                raise RuntimeError(f"the OpenCL program uses {what}, but {dev.name.strip()} lacks "
                                   f"the {ext} extension; compute in float32")
        try:
            prog = cl.Program(ctx, source).build()
        except cl.Error as err:
            hint = ""
            if "unknown target CPU" in str(err):
                hint = ("\n(this PoCL's LLVM does not know the host CPU: install a newer PoCL, e.g. "
                        "Debian's pocl-opencl-icd, or set POCL_LLVM_CPU_NAME where PoCL reads it)")
            raise RuntimeError(f"OpenCL program build failed on {dev.name.strip()}:\n{err}{hint}") \
                from None
        self._programs[key] = prog
        return prog

    def launch(self, program: Any, name: str, grid: list[int], block: list[int],
               shared_bytes: int, args: list[Any], dev_id: int) -> None:
        self.bind_launch(program, name, grid, block, shared_bytes, args, dev_id)()

    def bind_launch(self, program: Any, name: str, grid: list[int], block: list[int],
                    shared_bytes: int, args: list[Any], dev_id: int) -> Callable[[], None]:
        """Check one launch; return a function of no arguments that enqueues it (as often as
        called: the graph executor binds each node's launches once)."""
        cl = _cl()
        _, queue, dev = self.context(dev_id)
        key = (id(program), name)
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = getattr(program, name)
        threads = block[0] * block[1] * block[2]
        limits = dev.max_work_item_sizes
        if threads > dev.max_work_group_size or any(b > lim for b, lim in zip(block, limits)):
            raise ValueError(f"kernel {name}: block {tuple(block)} ({threads} threads) exceeds "
                             f"{dev.name.strip()}'s limits (max_work_group_size "
                             f"{dev.max_work_group_size}, max_work_item_sizes {tuple(limits)})")
        if shared_bytes:
            raise ValueError(f"kernel {name}: dynamic shared memory ({shared_bytes} bytes) is not "
                             "supported by the OpenCL runtime; use constant-size shared buffers")
        gsize, lsize = tuple(g * b for g, b in zip(grid, block)), tuple(block)
        args = tuple(args)

        def enqueue() -> None:
            with self._lock:  # the kernel object is shared by every launch of this kernel
                kernel.set_args(*args)
                cl.enqueue_nd_range_kernel(queue, kernel, gsize, lsize)

        return enqueue


OPENCL_API = OpenCLAPI()
register_device_api(4, OPENCL_API)
