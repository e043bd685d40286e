"""Checks on loop IR: the lowered-form contract (IR form 2) and single definition of variables.

``verify_lowered(func)`` raises a ValueError listing every place where ``func`` breaks the
contract that code generators rely on (see PREAMBLE / DESIGN): 1-D buffers of scalar element
type without strides, one index per access (scalar; for a store a ramp whose lanes match the
value; for a load any integer vector, a gather where it is not a ramp), no VECTORIZED loops
left. ``verify_single_definition`` checks the invariant that passes keep:
each variable is defined (loop, let, allocation) at most once.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..ir import dtype as dt
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .function import PrimFunc
from .functor import post_order_visit

__all__ = ["verify_lowered", "verify_single_definition", "lowered_errors", "verify_gpu_code",
           "gpu_code_errors", "check_gpu_limits",
           "target_gpu_limits", "written_data_vars"]


def _buffer_errors(b: Buffer, where: str) -> list[str]:
    errs = []
    if len(b.shape) != 1:
        errs.append(f"{where}: buffer {b.name} is {len(b.shape)}-d, expected 1-d")
    if b.strides:
        errs.append(f"{where}: buffer {b.name} has strides")
    if dt.lanes_of(b.dtype) != 1:
        errs.append(f"{where}: buffer {b.name} has vector dtype {b.dtype}")
    return errs


def lowered_errors(func: PrimFunc) -> list[str]:
    """Every violation of the lowered-form contract in ``func`` (empty when it conforms)."""
    errs: list[str] = []

    def access(node: Any, kind: str) -> None:
        errs.extend(_buffer_errors(node.buffer, kind))
        if len(node.indices) != 1:
            errs.append(f"{kind} of {node.buffer.name} has {len(node.indices)} indices")
            return
        idx = node.indices[0]
        lanes = dt.lanes_of(idx.dtype)
        if lanes != 1 and kind == "store" and not isinstance(idx, E.Ramp):
            errs.append(f"{kind} of {node.buffer.name}: vector index {idx} is not a ramp")
        if not dt.is_integer(dt.element_of(idx.dtype)):
            errs.append(f"{kind} of {node.buffer.name}: index {idx} is not an integer")
        if kind == "store" and dt.lanes_of(node.value.dtype) != lanes:
            errs.append(f"store to {node.buffer.name}: value {node.value.dtype} vs index lanes "
                        f"{lanes}")

    def f(n: Any) -> None:
        if isinstance(n, E.BufferLoad):
            access(n, "load")
        elif isinstance(n, S.BufferStore):
            access(n, "store")
        elif isinstance(n, S.Allocate):
            errs.extend(_buffer_errors(n.buffer, "allocate"))
        elif isinstance(n, S.For) and n.kind == S.ForKind.VECTORIZED:
            errs.append(f"vectorized loop {n.loop_var.name} left")

    post_order_visit(func.body, f)
    return errs


def verify_lowered(func: PrimFunc) -> None:
    errs = lowered_errors(func)
    if errs:
        shown = "\n  ".join(errs[:20])
        raise ValueError(f"{func.name}: not in lowered form ({len(errs)} problems):\n  {shown}")


def verify_single_definition(func: PrimFunc) -> None:
    """Raise ValueError naming a variable that is defined more than once."""
    seen: dict[int, str] = {id(p): p.name for p in func.params}

    def define(v: E.Var) -> None:
        if id(v) in seen:
            raise ValueError(f"variable {v.name} is defined more than once")
        seen[id(v)] = v.name

    def f(n: Any) -> None:
        if isinstance(n, S.For):
            define(n.loop_var)
        elif isinstance(n, (S.LetStmt, E.Let)):
            define(n.var)
        elif isinstance(n, S.Allocate):
            define(n.buffer.data)

    post_order_visit(func.body, f)


# ---------------------------------------------------------------------------------------------
# GPU kernels
_DTYPE_BYTES_CACHE: dict[str, int] = {}


def _launch_extents(body: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def f(n: Any) -> None:
        if isinstance(n, S.AttrStmt) and n.attr_key == "thread_extent" and isinstance(
                n.node, E.IterVar):
            tag = n.node.thread_tag
            v = n.value
            old = out.get(tag)
            if isinstance(v, E.IntImm) and (old is None or (isinstance(old, E.IntImm)
                                                            and v.value > old.value)):
                out[tag] = v
            elif old is None:
                out[tag] = v

    post_order_visit(body, f)
    return out


def _kernel_roots(body: Any) -> list[Any]:
    """The outermost ``thread_extent`` attributes of ``body``: one per kernel (a lowered
    function may hold several kernels, e.g. Winograd's transforms and product)."""
    roots: list[Any] = []

    def walk(n: Any) -> None:
        if isinstance(n, S.AttrStmt) and n.attr_key == "thread_extent":
            roots.append(n)
            return
        for child in _children(n):
            walk(child)

    walk(body)
    return roots


def _children(n: Any) -> list[Any]:
    if isinstance(n, S.SeqStmt):
        return list(n.seq)
    out = []
    for name in ("body", "then_case", "else_case"):
        c = getattr(n, name, None)
        if isinstance(c, S.Stmt):
            out.append(c)
    return out


def gpu_code_errors(func: PrimFunc, limits: dict[str, int]) -> list[str]:
    """Every way ``func``'s kernels exceed ``limits`` (TVM's verify_gpu_code keys:
    max_threads_per_block, max_shared_memory_per_block (bytes), max_local_memory_per_block,
    max_thread_x/y/z, max_vthread; and max_grid_x/y/z for the launch grid), each kernel (an
    outermost ``thread_extent`` scope) checked on its own."""
    roots = _kernel_roots(func.body) or [func.body]
    errs: list[str] = []
    for root in roots:
        for e in _kernel_errors(root, limits):
            if e not in errs:
                errs.append(e)
    return errs


def _kernel_errors(body: Any, limits: dict[str, int]) -> list[str]:
    errs: list[str] = []
    ext = _launch_extents(body)
    threads = 1
    symbolic = []
    for t in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        v = ext.get(t)
        if v is None:
            continue
        if not isinstance(v, E.IntImm):
            symbolic.append(t)
            continue
        threads *= v.value
        key = "max_thread_" + t[-1]
        if key in limits and v.value > limits[key]:
            errs.append(f"{t} extent {v.value} exceeds {key}={limits[key]}")
    for t in ("blockIdx.x", "blockIdx.y", "blockIdx.z"):
        v, key = ext.get(t), "max_grid_" + t[-1]
        if isinstance(v, E.IntImm) and key in limits and v.value > limits[key]:
            errs.append(f"{t} extent {v.value} exceeds {key}={limits[key]}")
    if "max_threads_per_block" in limits and threads > limits["max_threads_per_block"]:
        errs.append(f"{threads} threads per block exceed max_threads_per_block="
                    f"{limits['max_threads_per_block']}")
    shared = 0
    local = 0
    vthreads = 1

    def g(n: Any) -> None:
        nonlocal shared, local, vthreads
        if isinstance(n, S.Allocate):
            size = 1
            for x in n.buffer.shape:
                size = size * x.value if isinstance(x, E.IntImm) else -1 if size < 0 else -1
            nbytes = size * dt.bits_of(n.buffer.dtype) // 8 if size >= 0 else -1
            if n.buffer.scope == "shared":
                if nbytes < 0:
                    errs.append(f"shared buffer {n.buffer.name} has a symbolic size")
                else:
                    shared += nbytes
            elif n.buffer.scope == "local" and nbytes > 0:
                local += nbytes
        elif isinstance(n, S.AttrStmt) and n.attr_key == "virtual_thread" and isinstance(
                n.value, E.IntImm):
            vthreads *= n.value.value

    post_order_visit(body, g)
    if "max_shared_memory_per_block" in limits and shared > limits["max_shared_memory_per_block"]:
        errs.append(f"{shared} bytes of shared memory per block exceed "
                    f"max_shared_memory_per_block={limits['max_shared_memory_per_block']}")
    if "max_local_memory_per_block" in limits and local > limits["max_local_memory_per_block"]:
        errs.append(f"{local} bytes of local memory per thread exceed "
                    f"max_local_memory_per_block={limits['max_local_memory_per_block']}")
    if "max_vthread" in limits and vthreads > limits["max_vthread"]:
        errs.append(f"{vthreads} virtual threads exceed max_vthread={limits['max_vthread']}")
    return errs


def verify_gpu_code(func: PrimFunc, constraints: dict[str, int]) -> bool:
    """TVM's ``tvm.tir.analysis.verify_gpu_code``: True when ``func`` stays within
    ``constraints`` (:func:`gpu_code_errors` names the problems)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"verify_gpu_code expects a tir.PrimFunc, got {type(func).__name__}")
    return not gpu_code_errors(func, dict(constraints))


#: CUDA's limits per launch dimension (x, y, z), the same on every architecture since sm_20
CUDA_MAX_BLOCK_DIMS = (1024, 1024, 64)
CUDA_MAX_GRID_DIMS = (2 ** 31 - 1, 65535, 65535)


def target_gpu_limits(target: Any) -> dict[str, int]:
    """The :func:`gpu_code_errors` limits a GPU ``target`` implies: threads and shared memory
    per block, and on CUDA the per-dimension block and grid sizes (a launch beyond them fails
    with CUDA_ERROR_INVALID_VALUE). OpenCL's per-dimension sizes depend on the device and are
    left to the runtime."""
    limits = {"max_threads_per_block": int(target.max_num_threads),
              "max_shared_memory_per_block": int(target.max_shared_memory_per_block)}
    if target.kind in ("cuda", "nvptx"):
        for axis, b, g in zip("xyz", CUDA_MAX_BLOCK_DIMS, CUDA_MAX_GRID_DIMS):
            limits[f"max_thread_{axis}"] = b
            limits[f"max_grid_{axis}"] = g
    return limits


def check_gpu_limits(func: PrimFunc, target: Any) -> None:
    """Raise ValueError when a kernel of ``func`` exceeds ``target``'s limits
    (:func:`target_gpu_limits`)."""
    errs = gpu_code_errors(func, target_gpu_limits(target))
    if errs:
        raise ValueError(f"{func.name}: the schedule exceeds the limits of target {target}: "
                         + "; ".join(errs) + " (split the bound axes by smaller factors or use "
                         "smaller shared tiles)")


def written_data_vars(func: PrimFunc) -> set[int]:
    """ids of the data Vars ``func``'s body may write: stores, write-mode access pointers, and
    any data Var handed to an external call as is (conservatively an output). The ABI's
    ``written`` flag of a buffer parameter (codegen/abi.py), which the runtime's aliasing
    check reads, and the interpreter's. Remembered per function (a walk of the whole body;
    the code generator and the kernel builder both ask)."""
    known = _WRITTEN.get(func)
    if known is not None:
        return set(known)
    out: set[int] = set()

    def visit(n: Any) -> None:
        if isinstance(n, S.BufferStore):
            out.add(id(n.buffer.data))
        elif isinstance(n, E.Call):
            if n.op == "tvm_access_ptr":
                mask = n.args[4]
                if not isinstance(mask, E.IntImm) or mask.value & 2:
                    out.add(id(n.args[1]))
            elif n.op == "tvm_stack_make_array":  # a DLTensor handed to a packed function
                read_only = len(n.args) > 6 and isinstance(n.args[6], E.IntImm) and \
                    n.args[6].value == 1  # te.extern's inputs (tir.packed.mark_read_only)
                if isinstance(n.args[0], E.Var) and not read_only:
                    out.add(id(n.args[0]))
            elif n.op in ("call_extern", "call_pure_extern", "address_of"):
                for a in n.args:
                    if isinstance(a, E.Var) and a.dtype == "handle":
                        out.add(id(a))
                    elif isinstance(a, E.BufferLoad) and n.op == "address_of":
                        out.add(id(a.buffer.data))

    post_order_visit(func.body, visit)
    _WRITTEN[func] = frozenset(out)
    return out


_WRITTEN: weakref.WeakKeyDictionary[PrimFunc, frozenset[int]] = weakref.WeakKeyDictionary()
