"""The Vulkan device API (DLPack device type 7, ``tvm.vulkan(n)``) on the ``vulkan`` cffi binding.

The SPIR-V of ``codegen/vulkan.py`` runs as is (no translation): one compute pipeline per kernel,
its buffers at ``set 0, binding k`` in parameter order, its scalar parameters packed as push
constants (:func:`push_layout`). Device ``n`` is the n-th physical device with a compute queue (on
this project's CI: Mesa's lavapipe, "llvmpipe"). Memory is host-visible and coherent (lavapipe's
only kind; a discrete GPU gets its device-local host-visible type when it has one), so copies
to and from the host are memcpys after the queue is idle.

Each bound launch (``bind_launch``) records one command buffer (a compute->compute memory
barrier, pipeline, descriptor set, push constants, dispatch); calling it queues the buffer, and
the queued buffers go to the device in one ``vkQueueSubmit`` at the next ``sync`` / host copy
(or every 256 launches): lavapipe pays per submission. ``sync`` waits for the queue. 64-bit integers and floats are enabled when the
device reports ``shaderInt64`` / ``shaderFloat64``; a kernel that needs a missing one is refused
at load with the feature's name. The binding is imported on first use only.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .gpu_module import register_device_api

__all__ = ["VulkanAPI", "VULKAN_API", "push_layout", "kernel_features"]


_MAX_BATCH = 256  # queued launches submitted together at the latest


def push_layout(dtypes: list[str]) -> tuple[list[int], int]:
    """Offsets of scalar kernel parameters in the push-constant block (each aligned to its own
    size, in parameter order) and the block's size (a multiple of 4)."""
    offsets, pos = [], 0
    for d in dtypes:
        size = np.dtype(d).itemsize
        pos = -(-pos // size) * size
        offsets.append(pos)
        pos += size
    return offsets, -(-pos // 4) * 4


_COMPUTE_FEATURES = {"int64": "shaderInt64", "uint64": "shaderInt64", "float64": "shaderFloat64",
                     "int16": "shaderInt16", "uint16": "shaderInt16", "float16": "shaderFloat16",
                     "int8": "shaderInt8", "uint8": "shaderInt8"}
_STORAGE_FEATURES = {8: "storageBuffer8BitAccess", 16: "storageBuffer16BitAccess"}
_FEATURE_WHAT = {"shaderInt64": "64-bit integers", "shaderFloat64": "float64",
                 "shaderInt16": "16-bit integers", "shaderFloat16": "float16",
                 "shaderInt8": "8-bit integers", "storageBuffer8BitAccess": "8-bit storage",
                 "storageBuffer16BitAccess": "16-bit storage"}


def kernel_features(dtypes: Any, storage: Any = ()) -> list[str]:
    """The Vulkan device features a kernel computing with ``dtypes`` and keeping buffers of
    ``storage`` element types needs."""
    need = {_COMPUTE_FEATURES[d] for d in dtypes if d in _COMPUTE_FEATURES}
    for d in storage:
        bits = np.dtype(d).itemsize * 8
        if bits in _STORAGE_FEATURES:
            need.add(_STORAGE_FEATURES[bits])
    return sorted(need)


def _vk() -> Any:
    try:
        import vulkan
    except ImportError:
        raise RuntimeError("the Vulkan runtime needs the 'vulkan' package (pip install vulkan) "
                           "and a Vulkan driver (e.g. Debian's mesa-vulkan-drivers + "
                           "libvulkan1)") from None
    except OSError as err:  # the cffi binding found no libvulkan
        raise RuntimeError(f"the Vulkan loader (libvulkan.so.1) cannot be loaded: {err}; "
                           "install libvulkan1 and a driver (mesa-vulkan-drivers)") from None
    return vulkan


class _Mem:
    """A storage buffer with its memory, mapped for its whole life."""

    def __init__(self, ctx: _Context, nbytes: int):
        vk = _vk()
        self.ctx, self.nbytes = ctx, nbytes
        size = self.size = max(-(-int(nbytes) // 16) * 16, 16)
        usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        self.buffer = vk.vkCreateBuffer(ctx.device, vk.VkBufferCreateInfo(
            size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(ctx.device, self.buffer)
        try:
            self.memory = vk.vkAllocateMemory(ctx.device, vk.VkMemoryAllocateInfo(
                allocationSize=req.size, memoryTypeIndex=ctx.memory_type(req.memoryTypeBits)), None)
        except vk.VkError as err:
            vk.vkDestroyBuffer(ctx.device, self.buffer, None)
            raise MemoryError(f"cannot allocate {nbytes} bytes on vulkan({ctx.dev_id}): "
                              f"{type(err).__name__}") from None
        vk.vkBindBufferMemory(ctx.device, self.buffer, self.memory, 0)
        self.view = np.frombuffer(vk.vkMapMemory(ctx.device, self.memory, 0, size, 0), np.uint8)
        weakref.finalize(self, _Mem._free, ctx, self.buffer, self.memory)

    @staticmethod
    def _free(ctx: _Context, buffer: Any, memory: Any) -> None:
        vk = _vk()
        ctx.wait_idle()  # a queued launch may still use it
        vk.vkUnmapMemory(ctx.device, memory)
        vk.vkDestroyBuffer(ctx.device, buffer, None)
        vk.vkFreeMemory(ctx.device, memory, None)


class _Context:
    """One logical device with a compute queue, a command pool and descriptor pools."""

    def __init__(self, api: VulkanAPI, dev_id: int, physical: Any):
        vk = _vk()
        self.dev_id, self.physical = dev_id, physical
        self.props = vk.vkGetPhysicalDeviceProperties(physical)
        self.name = self.props.deviceName
        feats = vk.vkGetPhysicalDeviceFeatures(physical)
        self.features = {f: bool(getattr(feats, f)) for f in ("shaderInt64", "shaderFloat64",
                                                              "shaderInt16")}
        chain = None
        if self.props.apiVersion >= vk.VK_MAKE_VERSION(1, 2, 0):  # 8/16-bit types and storage
            f12 = vk.VkPhysicalDeviceVulkan12Features()
            f11 = vk.VkPhysicalDeviceVulkan11Features(pNext=f12)
            vk.vkGetPhysicalDeviceFeatures2(physical, vk.VkPhysicalDeviceFeatures2(pNext=f11))
            self.features.update(storageBuffer16BitAccess=bool(f11.storageBuffer16BitAccess),
                                 storageBuffer8BitAccess=bool(f12.storageBuffer8BitAccess),
                                 shaderInt8=bool(f12.shaderInt8),
                                 shaderFloat16=bool(f12.shaderFloat16))
            on12 = vk.VkPhysicalDeviceVulkan12Features(
                storageBuffer8BitAccess=f12.storageBuffer8BitAccess, shaderInt8=f12.shaderInt8,
                shaderFloat16=f12.shaderFloat16)
            chain = vk.VkPhysicalDeviceVulkan11Features(
                pNext=on12, storageBuffer16BitAccess=f11.storageBuffer16BitAccess)
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(physical)
        self.family = next(k for k, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
        enabled = vk.VkPhysicalDeviceFeatures(
            shaderInt64=feats.shaderInt64, shaderFloat64=feats.shaderFloat64,
            shaderInt16=feats.shaderInt16, robustBufferAccess=feats.robustBufferAccess)
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, queueCount=1,
                                                pQueuePriorities=[1.0])
        self.device = vk.vkCreateDevice(physical, vk.VkDeviceCreateInfo(
            pNext=chain, queueCreateInfoCount=1, pQueueCreateInfos=[queue_info], pEnabledFeatures=enabled), None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        self.pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
            queueFamilyIndex=self.family), None)
        mem = vk.vkGetPhysicalDeviceMemoryProperties(physical)
        self.mem_types = [mem.memoryTypes[k].propertyFlags for k in range(mem.memoryTypeCount)]
        self.desc_pools: list[Any] = []
        self.pending = False  # submitted work not yet waited for
        self.batch: list[Any] = []  # recorded launches not yet submitted
        # the queue is externally synchronized (vkQueueSubmit / vkQueueWaitIdle); reentrant:
        # a finalizer freeing memory may run inside a submit of the same thread
        self.lock = threading.RLock()

    def memory_type(self, bits: int) -> int:
        vk = _vk()
        host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        best = [host | vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, host]
        for want in best:
            for k, flags in enumerate(self.mem_types):
                if bits & (1 << k) and flags & want == want:
                    return k
        raise MemoryError(f"vulkan({self.dev_id}) {self.name}: no host-visible coherent memory")

    def descriptor_set(self, layout: Any) -> tuple[Any, Any]:
        """(descriptor set, its pool): a set from the first pool with room (pools of 256 sets
        are added as needed; a freed set's room is reused)."""
        vk = _vk()
        for pool in self.desc_pools:
            try:
                return vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
                    descriptorPool=pool, descriptorSetCount=1, pSetLayouts=[layout]))[0], pool
            except (vk.VkErrorOutOfPoolMemory, vk.VkErrorFragmentedPool):
                continue
        sizes = vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                        descriptorCount=256 * 16)
        pool = vk.vkCreateDescriptorPool(self.device, vk.VkDescriptorPoolCreateInfo(
            flags=vk.VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT, maxSets=256,
            poolSizeCount=1, pPoolSizes=[sizes]), None)
        self.desc_pools.insert(0, pool)
        return vk.vkAllocateDescriptorSets(self.device, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=pool, descriptorSetCount=1, pSetLayouts=[layout]))[0], pool

    def enqueue(self, cmd: Any) -> None:
        """Queue a recorded command buffer; submitted with the others at the next flush."""
        with self.lock:
            self.batch.append(cmd)
            if len(self.batch) >= _MAX_BATCH:
                self.flush()

    def flush(self) -> None:
        """Submit the queued command buffers in one vkQueueSubmit (lavapipe pays per submit)."""
        with self.lock:
            if self.batch:
                vk = _vk()
                vk.vkQueueSubmit(self.queue, 1, [vk.VkSubmitInfo(
                    commandBufferCount=len(self.batch), pCommandBuffers=self.batch)], None)
                self.batch = []
                self.pending = True

    def wait_idle(self) -> None:
        with self.lock:
            self.flush()
            if self.pending:
                _vk().vkQueueWaitIdle(self.queue)
                self.pending = False


class _Program:
    """The SPIR-V kernels of one module on one device; pipelines are made on first launch."""

    def __init__(self, ctx: _Context, binaries: dict[str, bytes]):
        self.ctx = ctx
        self.spirv = {k.removeprefix("spirv:"): v for k, v in binaries.items()
                      if k.startswith("spirv:")}
        self.pipelines: dict[str, tuple[Any, Any, Any]] = {}  # name -> (pipeline, layout, set layout)

    def pipeline(self, name: str, nbuf: int, push_size: int) -> tuple[Any, Any, Any]:
        hit = self.pipelines.get(name)
        if hit is not None:
            return hit
        vk = _vk()
        code = self.spirv.get(name)
        if code is None:
            raise RuntimeError(f"the Vulkan module has no kernel {name!r} "
                               f"(kernels: {', '.join(self.spirv) or 'none'})")
        dev = self.ctx.device
        shader = vk.vkCreateShaderModule(dev, vk.VkShaderModuleCreateInfo(
            codeSize=len(code), pCode=code), None)
        bindings = [vk.VkDescriptorSetLayoutBinding(
            binding=k, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=1,
            stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT) for k in range(nbuf)]
        set_layout = vk.vkCreateDescriptorSetLayout(dev, vk.VkDescriptorSetLayoutCreateInfo(
            bindingCount=nbuf, pBindings=bindings or None), None)
        ranges = [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0,
                                         size=push_size)] if push_size else []
        layout = vk.vkCreatePipelineLayout(dev, vk.VkPipelineLayoutCreateInfo(
            setLayoutCount=1, pSetLayouts=[set_layout], pushConstantRangeCount=len(ranges),
            pPushConstantRanges=ranges or None), None)
        stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                                                   module=shader, pName=name)
        pipe = vk.vkCreateComputePipelines(dev, None, 1, [vk.VkComputePipelineCreateInfo(
            stage=stage, layout=layout)], None)[0]
        made = self.pipelines[name] = (pipe, layout, set_layout)
        return made


class VulkanAPI:
    """Driver calls for Vulkan devices (the device-API protocol of runtime/gpu_module.py)."""

    name = "vulkan"

    def __init__(self) -> None:
        self._instance: Any = None
        self._physical: list[Any] | None = None
        self._ctx: dict[int, _Context] = {}
        self._lock = threading.Lock()

    def devices(self) -> list[Any]:
        if self._physical is None:
            vk = _vk()
            app = vk.VkApplicationInfo(pApplicationName="tvmpy", apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
            try:
                self._instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app),
                                                     None)
                phys = vk.vkEnumeratePhysicalDevices(self._instance)
            except vk.VkError:  # no driver (VK_ERROR_INCOMPATIBLE_DRIVER)
                phys = []
            self._physical = [
                p for p in phys if any(f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT
                                       for f in vk.vkGetPhysicalDeviceQueueFamilyProperties(p))]
        return self._physical

    def context(self, dev_id: int) -> _Context:
        ctx = self._ctx.get(dev_id)
        if ctx is None:
            with self._lock:
                devs = self.devices()
                if not 0 <= dev_id < len(devs):
                    vk = _vk()
                    found = ", ".join(f"{k}: {vk.vkGetPhysicalDeviceProperties(d).deviceName}"
                                      for k, d in enumerate(devs)) or "none"
                    raise ValueError(f"no Vulkan device vulkan({dev_id}); devices: {found}")
                ctx = self._ctx[dev_id] = _Context(self, dev_id, devs[dev_id])
        return ctx

    def exist(self, dev_id: int) -> bool:
        try:
            self.context(dev_id)
        except (ValueError, RuntimeError):
            return False
        return True

    def device_name(self, dev_id: int) -> str:
        return str(self.context(dev_id).name)

    # ---- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int, dev_id: int) -> _Mem:
        return _Mem(self.context(dev_id), int(nbytes))

    def to_host(self, mem: _Mem, out: np.ndarray, dev_id: int) -> None:
        mem.ctx.wait_idle()
        out.reshape(-1).view(np.uint8)[:] = mem.view[:out.nbytes]

    def from_host(self, mem: _Mem, arr: np.ndarray, dev_id: int) -> None:
        mem.ctx.wait_idle()  # queued launches may still read the old contents
        src = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        mem.view[:src.nbytes] = src

    def copy(self, dst: _Mem, src: _Mem, nbytes: int, dev_id: int) -> None:
        dst.ctx.wait_idle()
        dst.view[:nbytes] = src.view[:nbytes]

    def sync(self, dev_id: int) -> None:
        self.context(dev_id).wait_idle()

    # ---- code --------------------------------------------------------------------------------
    def load(self, source: str, dev_id: int) -> Any:
        raise RuntimeError("a Vulkan module runs SPIR-V binaries, not source; build it with "
                           "tvm.build(..., target='vulkan')")

    def load_binaries(self, binaries: dict[str, bytes], dev_id: int) -> _Program:
        """The kernels of ``binaries`` ("spirv:<kernel>" -> SPIR-V, "features:<kernel>" -> the
        device features it needs, comma-separated) for device ``dev_id``."""
        ctx = self.context(dev_id)
        for key, value in binaries.items():
            if not key.startswith("features:"):
                continue
            for feat in filter(None, value.decode().split(",")):
                if not ctx.features.get(feat, False):
                    what = _FEATURE_WHAT.get(feat, feat)
                    raise RuntimeError(f"kernel {key[9:]} uses {what}, but vulkan({dev_id}) "
                                       f"{ctx.name} lacks the {feat} feature; compute in 32 bits")
        return _Program(ctx, binaries)

    def launch(self, program: _Program, name: str, grid: list[int], block: list[int],
               shared_bytes: int, args: list[Any], dev_id: int) -> None:
        self.bind_launch(program, name, grid, block, shared_bytes, args, dev_id)()

    def bind_launch(self, program: _Program, name: str, grid: list[int], block: list[int],
                    shared_bytes: int, args: list[Any], dev_id: int) -> Callable[[], None]:
        """Record one launch into a command buffer; return a function that submits it."""
        vk = _vk()
        ctx = program.ctx
        if shared_bytes:
            raise ValueError(f"kernel {name}: dynamic shared memory ({shared_bytes} bytes) is not "
                             "supported by the Vulkan runtime; use constant-size shared buffers")
        limits = ctx.props.limits
        counts = list(limits.maxComputeWorkGroupCount)
        if any(g > c for g, c in zip(grid, counts)):
            raise ValueError(f"kernel {name}: grid {tuple(grid)} exceeds vulkan({dev_id}) "
                             f"{ctx.name}'s maxComputeWorkGroupCount {tuple(counts)}; split the "
                             "outer axis further")
        threads = block[0] * block[1] * block[2]
        if threads > limits.maxComputeWorkGroupInvocations:
            raise ValueError(f"kernel {name}: block {tuple(block)} ({threads} threads) exceeds "
                             f"{ctx.name}'s maxComputeWorkGroupInvocations "
                             f"{limits.maxComputeWorkGroupInvocations}")
        bufs = [a for a in args if isinstance(a, _Mem)]
        scalars = [a for a in args if not isinstance(a, _Mem)]
        offsets, push_size = push_layout([np.asarray(s).dtype.name for s in scalars])
        pipe, layout, set_layout = program.pipeline(name, len(bufs), push_size)
        dset, pool = ctx.descriptor_set(set_layout)
        if bufs:
            infos = [vk.VkDescriptorBufferInfo(buffer=m.buffer, offset=0, range=m.size)
                     for m in bufs]
            writes = [vk.VkWriteDescriptorSet(
                dstSet=dset, dstBinding=k, descriptorCount=1,
                descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, pBufferInfo=[info])
                for k, info in enumerate(infos)]
            vk.vkUpdateDescriptorSets(ctx.device, len(writes), writes, 0, None)
        cmd = vk.vkAllocateCommandBuffers(ctx.device, vk.VkCommandBufferAllocateInfo(
            commandPool=ctx.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        # simultaneous use: the same launch may be queued again before the last one ran
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT))
        barrier = vk.VkMemoryBarrier(
            srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_HOST_WRITE_BIT,
            dstAccessMask=vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
        vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
                                | vk.VK_PIPELINE_STAGE_HOST_BIT,
                                vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, [barrier], 0, None,
                                0, None)
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset],
                                   0, None)
        if push_size:
            data = bytearray(push_size)
            for off, s in zip(offsets, scalars):
                raw = np.asarray(s).tobytes()
                data[off:off + len(raw)] = raw
            vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size,
                                  vk.ffi.from_buffer(data))
        vk.vkCmdDispatch(cmd, *grid)
        after = vk.VkMemoryBarrier(srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT,
                                   dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
        vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                vk.VK_PIPELINE_STAGE_HOST_BIT, 0, 1, [after], 0, None, 0, None)
        vk.vkEndCommandBuffer(cmd)
        keep = (bufs, dset)  # the buffers live as long as the launch

        def enqueue() -> None:
            assert keep
            ctx.enqueue(cmd)

        weakref.finalize(enqueue, VulkanAPI._release, ctx, cmd, dset, pool)
        return enqueue

    @staticmethod
    def _release(ctx: _Context, cmd: Any, dset: Any, pool: Any) -> None:
        """Free a bound launch's command buffer and descriptor set (when it is collected)."""
        vk = _vk()
        with ctx.lock:
            ctx.wait_idle()
            vk.vkFreeCommandBuffers(ctx.device, ctx.pool, 1, [cmd])
            vk.vkFreeDescriptorSets(ctx.device, pool, 1, [dset])


VULKAN_API = VulkanAPI()
register_device_api(7, VULKAN_API)
