"""Loop-IR passes, one per module; each takes and returns a PrimFunc.

The order in which :func:`tvmpy.tir.pipeline.lower_pipeline` runs them:
StorageFlatten, Simplify, LoopPartition, Simplify, VectorizeLoop, InjectVirtualThread,
InjectDoubleBuffer, StorageRewrite, UnrollLoop, Simplify, RemoveNoOp, LowerIntrin.
"""

from .function_pass import PrimFuncPass, prim_func_pass
from .inject_double_buffer import InjectDoubleBuffer
from .inject_virtual_thread import InjectVirtualThread
from .loop_partition import LoopPartition
from .lower_intrin import LowerIntrin, register_intrin_rule
from .remove_no_op import RemoveNoOp
from .simplify import Simplify
from .storage_flatten import StorageFlatten
from .storage_rewrite import StorageRewrite
from .unroll_loop import UnrollLoop
from .vectorize_loop import VectorizeLoop

__all__ = ["StorageFlatten", "Simplify", "LoopPartition", "VectorizeLoop", "InjectVirtualThread",
           "InjectDoubleBuffer", "StorageRewrite", "UnrollLoop", "RemoveNoOp", "LowerIntrin",
           "register_intrin_rule", "prim_func_pass", "PrimFuncPass"]
