"""The graph executor's storage plan: where each entry lives (``StoragePlan``: the storages'
sizes for given entry shapes, one arena holding them, 64-byte aligned and zero-filled,
``_zeroed_arena``), on a GPU one device buffer per storage (``_device_entries``), and the
per-shape plans of a graph with symbolic shapes (``_Plan``, ``PLAN_CACHE_SIZE``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..device import Device
from ..graph_json import entry_nbytes
from ..ndarray import ALIGNMENT, NDArray, aligned_empty

if TYPE_CHECKING:
    from .parse import _Node



def _device_entries(dev: Device, ssize: list[int], sids: list[int],
                    host: list[NDArray]) -> list[NDArray]:
    """One device buffer per storage of the memory plan; each entry a device array on its
    storage's buffer (entries that share a storage share the buffer). Kernels then read and
    write device memory only; set_input / get_output(...).numpy() copy."""
    from ..gpu_module import DeviceNDArray, device_api

    api = device_api(dev)
    mems = [api.alloc(max(ALIGNMENT, size), dev.device_id) for size in ssize]
    out: list[NDArray] = []
    for eid, h in enumerate(host):
        out.append(DeviceNDArray.wrap(mems[sids[eid]], h.shape, h._arr.dtype, dev, api))
    return out


def device_views(storage: StoragePlan, shapes: Mapping[int, tuple[int, ...]]
                 ) -> tuple[Any, dict[int, NDArray], int]:
    """On a GPU: one device buffer per storage of the entries in ``shapes`` (sized for those
    shapes) and each entry a device array on its storage's buffer: (buffers, views, bytes)."""
    from ..gpu_module import DeviceNDArray, device_api

    dev = storage.device
    api = device_api(dev)
    ssize = storage.sizes(shapes)
    mems = {sid: api.alloc(max(ALIGNMENT, ssize[sid]), dev.device_id)
            for sid in sorted({storage.sids[e] for e in shapes})}
    views: dict[int, NDArray] = {e: DeviceNDArray.wrap(mems[storage.sids[e]], tuple(sh), storage.np_dtypes[e], dev,
                                   api) for e, sh in shapes.items()}
    return list(mems.values()), views, sum(max(ALIGNMENT, ssize[s]) for s in mems)


def _zeroed_arena(nbytes: int) -> np.ndarray:
    try:
        return aligned_empty((nbytes,), np.uint8, zero=True)
    except (MemoryError, ValueError):  # ValueError: more than numpy can index
        raise MemoryError(f"graph executor: cannot allocate the {nbytes / 2**30:.1f} GiB "
                          f"({nbytes} bytes) the graph's tensors need") from None


PLAN_CACHE_SIZE = 8  # symbolic shapes: the storage plans kept (one per input shapes, LRU)


class _Plan:
    """The entries (views into storage) and prepared calls for one set of concrete shapes."""

    __slots__ = ("entries", "calls", "call_nodes", "call_funcs", "keepalive", "arena", "nbytes",
                 "env", "cuda_graph", "runs", "native", "sites", "offsets", "patched")

    def __init__(self, entries: list[NDArray]):
        self.entries = entries
        self.env: dict[str, int] | None = None  # symbolic shapes: the values it was made for
        self.calls: list[tuple[Callable[..., int], tuple]] = []
        self.call_nodes: list[_Node] = []
        self.call_funcs: list[Any] = []
        self.keepalive: list[Any] = []
        self.arena: Any = None  # (a GPU: the device buffers)
        self.nbytes = 0
        self.cuda_graph: Any = None  # its captured CUDA graphs (cuda_graph.py), made on first run
        self.runs = 0  # runs by the Python loop (the native runner is built after a few)
        self.native: Any = None  # its calls as one native function (native_run.py); False: none
        # inputs bound without a copy (``GraphExecutor._bind``): per input entry the
        # (call, argument) positions of its pointer; each call's first word in the native table;
        # per entry the address now patched in (absent: its own storage's)
        self.sites: dict[int, list[tuple[int, int]]] = {}
        self.offsets: list[int] = []
        self.patched: dict[int, int] = {}


class StoragePlan:
    """Where the entries live: entry ``e`` in storage ``sids[e]`` (the compile-time memory plan,
    relay/backend/graph_plan_memory.py); the storages sized for given entry shapes and laid out
    in one arena."""

    __slots__ = ("sids", "np_dtypes", "dltypes", "device")

    def __init__(self, sids: list[int], np_dtypes: list[np.dtype], dltypes: list[str],
                 device: Device):
        self.sids, self.np_dtypes, self.dltypes, self.device = sids, np_dtypes, dltypes, device

    def sizes(self, shapes: Mapping[int, tuple[int, ...]]) -> list[int]:
        """Bytes of each storage: the largest entry (of ``shapes``) it holds."""
        ssize = [0] * (max(self.sids) + 1 if self.sids else 0)
        for e, sh in shapes.items():
            d = self.dltypes[e]
            nb = entry_nbytes(sh, "bool" if d == "bool" else str(self.np_dtypes[e]))
            ssize[self.sids[e]] = max(ssize[self.sids[e]], nb)
        return ssize

    def allocate(self, shapes: Mapping[int, tuple[int, ...]],
                 alloc: Callable[[int], np.ndarray]
                 ) -> tuple[np.ndarray, dict[int, NDArray], int]:
        """One arena for the storages of the entries in ``shapes`` (each storage 64-byte aligned,
        at least 64 bytes) and each entry a view into it: (arena, views, bytes)."""
        ssize = self.sizes(shapes)
        used = sorted({self.sids[e] for e in shapes})
        offsets, total = {}, 0
        for sid in used:
            offsets[sid] = total
            total += max(ALIGNMENT, -(-ssize[sid] // ALIGNMENT) * ALIGNMENT)
        arena = alloc(total)
        views = {e: NDArray(np.ndarray(sh, self.np_dtypes[e], buffer=arena,
                                       offset=offsets[self.sids[e]]), self.device)
                 for e, sh in shapes.items()}
        return arena, views, total
