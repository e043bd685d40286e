"""Loop-IR passes (``tvm.tir.transform``), one per module.

Each pass is exposed TVM-style as a factory returning a :class:`PrimFuncPass` that runs on an
IRModule (``tvm.tir.transform.Simplify()(mod)``); its function-level form, PrimFunc ->
PrimFunc, is ``<name>_func`` (``simplify_func(func)``). :mod:`tvmpy.tir.pipeline` runs them in
TVM's order: LegalizeStorageDtypes, StorageFlatten, Simplify, LoopPartition, Simplify, VectorizeLoop,
InjectVirtualThread, InjectDoubleBuffer, StorageRewrite, UnrollLoop, Simplify, SkipPaddedTaps
(CPU targets), RemoveNoOp, LowerIntrin. For GPU targets (:func:`tvmpy.tir.pipeline.gpu_phases`) LowerThreadAllreduce,
UnifyThreadBinding, ThreadSync and LowerWarpMemory join them, and SplitHostDevice makes the host
function and the device kernels. Every pass module states what it does, when it is valid, and a
short before/after example; ``common.py`` holds the helpers they share and ``function_pass.py``
the pass kind.
"""

from ...transform import register_pass
from .function_pass import PrimFuncPass, prim_func_pass
from .inject_double_buffer import InjectDoubleBuffer, inject_double_buffer_func
from .inject_prefetch import InjectPrefetch, inject_prefetch_func
from .inject_virtual_thread import InjectVirtualThread, inject_virtual_thread_func
from .legalize_storage_dtypes import LegalizeStorageDtypes, legalize_storage_dtypes_func
from .loop_partition import LoopPartition, loop_partition_func
from .lower_intrin import LowerIntrin, lower_intrin_func, register_intrin_rule
from .lower_warp_memory import LowerWarpMemory, lower_warp_memory_func
from .remove_no_op import RemoveNoOp, remove_no_op_func
from .simplify import Simplify, simplify_func
from .skip_padded_taps import SkipPaddedTaps, skip_padded_taps_func
from .split_host_device import SplitHostDevice, split_host_device
from .storage_flatten import StorageFlatten, storage_flatten_func
from .storage_rewrite import StorageRewrite, storage_rewrite_func
from .thread_allreduce import LowerThreadAllreduce, lower_thread_allreduce_func
from .thread_sync import ThreadSync, thread_sync_func
from .unify_thread_binding import UnifyThreadBinding, unify_thread_binding_func
from .unroll_loop import UnrollLoop, unroll_loop_func
from .vectorize_loop import VectorizeLoop, vectorize_loop_func

__all__ = ["StorageFlatten", "Simplify", "LoopPartition", "VectorizeLoop", "InjectPrefetch",
           "inject_prefetch_func", "InjectVirtualThread",
           "InjectDoubleBuffer", "StorageRewrite", "UnrollLoop", "RemoveNoOp", "LowerIntrin",
           "register_intrin_rule", "prim_func_pass", "PrimFuncPass",
           "storage_flatten_func", "simplify_func", "loop_partition_func", "vectorize_loop_func",
           "inject_virtual_thread_func", "inject_double_buffer_func", "storage_rewrite_func",
           "unroll_loop_func", "remove_no_op_func", "lower_intrin_func",
           "UnifyThreadBinding", "ThreadSync", "LowerThreadAllreduce", "SplitHostDevice",
           "unify_thread_binding_func", "thread_sync_func", "lower_thread_allreduce_func",
           "split_host_device", "LegalizeStorageDtypes", "legalize_storage_dtypes_func",
           "LowerWarpMemory", "lower_warp_memory_func", "SkipPaddedTaps",
           "skip_padded_taps_func"]

for _factory in (StorageFlatten, Simplify, LoopPartition, VectorizeLoop, InjectVirtualThread,
                 InjectDoubleBuffer, StorageRewrite, UnrollLoop, RemoveNoOp, LowerIntrin,
                 UnifyThreadBinding, ThreadSync, LowerThreadAllreduce, SplitHostDevice,
                 LegalizeStorageDtypes, LowerWarpMemory, SkipPaddedTaps):
    register_pass(_factory.__name__, _factory)  # so that a pass may require them by name
