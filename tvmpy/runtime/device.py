"""Devices: ``tvm.cpu(0)``, ``tvm.device("cpu", 0)``; DLPack device type codes.

A :class:`Device` is a value (type code + index) with equality and hashing. Only the CPU has
memory and a runtime now; the other names exist so that later targets (cuda, opencl, vulkan, ...)
and DLPack imports can name their devices.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Device", "cpu", "cuda", "gpu", "opencl", "cl", "vulkan", "webgpu", "device", "DEVICE_TYPES", "kDLCPU",
           "kDLCUDA", "kDLOpenCL"]

kDLCPU = 1
kDLCUDA = 2
kDLOpenCL = 4
kDLVulkan = 7
kDLWebGPU = 15

# DLPack device type codes (dlpack.h) and the names TVM accepts for them
DEVICE_TYPES: dict[str, int] = {
    "cpu": 1, "llvm": 1, "c": 1, "stackvm": 1,
    "cuda": 2, "gpu": 2, "nvptx": 2,
    "cuda_host": 3,
    "opencl": 4, "cl": 4,
    "vulkan": 7,
    "metal": 8,
    "vpi": 9,
    "rocm": 10,
    "ext_dev": 12,
    "webgpu": 15,
}
_NAME_OF = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
            10: "rocm", 12: "ext_dev", 15: "webgpu"}


class Device:
    """A device: ``device_type`` (DLPack code, kDLCPU = 1) and ``device_id``."""

    __slots__ = ("device_type", "device_id")

    def __init__(self, device_type: int, device_id: int = 0):
        if not isinstance(device_type, int) or device_type not in _NAME_OF:
            raise ValueError(f"unknown device type code {device_type!r}; known: "
                             + ", ".join(f"{c} ({n})" for c, n in _NAME_OF.items()))
        if not isinstance(device_id, int) or device_id < 0:
            raise ValueError(f"device id must be a non-negative int, got {device_id!r}")
        self.device_type = device_type
        self.device_id = device_id

    @property
    def name(self) -> str:
        return _NAME_OF[self.device_type]

    @property
    def exist(self) -> bool:
        """True when this process can allocate memory and run code on the device."""
        if self.device_type == kDLCPU:
            return self.device_id == 0
        from .gpu_module import device_api

        try:
            return bool(device_api(self).exist(self.device_id))
        except (ValueError, RuntimeError):
            return False

    def sync(self) -> None:
        """Wait for queued work: a no-op on the CPU, where every call is synchronous."""
        if self.device_type != kDLCPU:
            from .gpu_module import device_api

            device_api(self).sync(self.device_id)

    # ---- TVM's device attributes (GPUs; asked from the device's runtime) -------------------
    def _attribute(self, name: str) -> Any:
        if self.device_type == kDLCPU:
            raise AttributeError(f"{self}: {name} is a GPU device attribute")
        from .gpu_module import device_api

        get = getattr(device_api(self), "attribute", None)
        if get is None:
            raise AttributeError(f"{self}: the runtime does not report {name}")
        return get(self.device_id, name)

    @property
    def device_name(self) -> str:
        return str(self._attribute("device_name"))

    @property
    def compute_version(self) -> str:
        """'9.0' for an sm_90 GPU."""
        return str(self._attribute("compute_version"))

    @property
    def max_threads_per_block(self) -> int:
        return int(self._attribute("max_threads_per_block"))

    @property
    def warp_size(self) -> int:
        return int(self._attribute("warp_size"))

    @property
    def max_shared_memory_per_block(self) -> int:
        return int(self._attribute("max_shared_memory_per_block"))

    @property
    def multi_processor_count(self) -> int:
        return int(self._attribute("multi_processor_count"))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Device) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __str__(self) -> str:
        return f"{self.name}({self.device_id})"

    def __repr__(self) -> str:
        return f"Device({self.name}, {self.device_id})"

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, self.device_id)


def cpu(dev_id: int = 0) -> Device:
    """The host CPU (all cores: one device)."""
    return Device(kDLCPU, dev_id)


def cuda(dev_id: int = 0) -> Device:
    """An NVIDIA GPU (DLPack kDLCUDA = 2); the runtime backing is the CUDA runtime module's."""
    return Device(kDLCUDA, dev_id)


gpu = cuda  # TVM 0.7's name


def opencl(dev_id: int = 0) -> Device:
    """An OpenCL device (DLPack kDLOpenCL = 4); the runtime backing is the OpenCL module's."""
    return Device(kDLOpenCL, dev_id)


cl = opencl


def vulkan(dev_id: int = 0) -> Device:
    """A Vulkan device (DLPack kDLVulkan = 7); the runtime backing is the Vulkan runtime module's."""
    return Device(kDLVulkan, dev_id)


def webgpu(dev_id: int = 0) -> Device:
    """A WebGPU adapter (DLPack kDLWebGPU = 15); from Python the runtime is wgpu-py's."""
    return Device(kDLWebGPU, dev_id)


def device(dev_type: str | int | Device, dev_id: int = 0) -> Device:
    """``device("cpu", 0)``, ``device("llvm")``, ``device("cuda", 1)``, ``device("cpu:0")`` or a
    DLPack type code. Unknown names raise ValueError listing the known ones."""
    if isinstance(dev_type, Device):
        return dev_type
    if isinstance(dev_type, int) and not isinstance(dev_type, bool):
        return Device(dev_type, dev_id)
    if not isinstance(dev_type, str):
        raise TypeError(f"device type must be a str or int, got {type(dev_type).__name__}")
    name = dev_type.strip()
    if ":" in name:
        name, _, idx = name.partition(":")
        if not idx.isdigit():
            raise ValueError(f"invalid device string {dev_type!r}: expected e.g. 'cpu:0'")
        dev_id = int(idx)
    name = name.split()[0].lower() if name.split() else name
    code = DEVICE_TYPES.get(name)
    if code is None:
        raise ValueError(f"unknown device {dev_type!r}; known: {', '.join(sorted(DEVICE_TYPES))}")
    return Device(code, dev_id)
