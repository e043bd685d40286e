"""One device PrimFunc (``tir.transform.SplitHostDevice``'s GPU kernel) -> a SPIR-V compute shader.

The kernel's interface, shared with ``runtime/vulkan_module.py``:

- buffer parameter k (in parameter order, scalars skipped) is a storage buffer at
  ``DescriptorSet 0, Binding k``: ``struct { T data[]; }`` decorated ``Block``;
- scalar parameters are the members of one push-constant block, in parameter order, each at the
  offset :func:`~tvmpy.runtime.vulkan_module.push_layout` gives (aligned to its own size);
- ``blockIdx`` / ``threadIdx`` are the ``WorkgroupId`` / ``LocalInvocationId`` built-ins; the
  workgroup size (``LocalSize``) is the constant ``threadIdx`` extents (a symbolic one is refused);
- ``shared`` allocations are ``Workgroup`` arrays, ``local`` ones ``Function`` arrays (constant
  sizes); ``tvm_storage_sync`` is ``OpControlBarrier(Workgroup, Workgroup, AcquireRelease |
  WorkgroupMemory [| UniformMemory for "global"])``.

Control flow is structured (``OpSelectionMerge`` / ``OpLoopMerge``); a loop variable lives in a
``Function`` variable (no phis), read once per iteration in the loop header.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir import dtype as dt
from ..runtime.vulkan_module import kernel_features, push_layout
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.function import PrimFunc
from ..tir.functor import post_order_visit
from .gpu_source import _buffer_dtypes, _sync_scope, warp_refusal
from .spirv_builder import SC, Builder, Dec, Op, Value
from .spirv_expr import ExprEmitter

__all__ = ["KernelInfo", "emit_kernel", "MAX_PRIVATE_BYTES"]

MAX_PRIVATE_BYTES = 16 * 1024
_AXES = {"x": 0, "y": 1, "z": 2}
_SEM = {"shared": 0x8 | 0x100, "warp": 0x8 | 0x100, "global": 0x8 | 0x100 | 0x40}
_BUILTIN = {"blockIdx": 26, "threadIdx": 27}  # WorkgroupId, LocalInvocationId


class KernelInfo:
    """A compiled kernel: its SPIR-V and what the runtime needs to launch it."""

    def __init__(self, name: str, spirv: bytes, local_size: tuple[int, int, int], dtypes: set[str],
                 storage: set[str]):
        self.name = name
        self.spirv = spirv
        self.local_size = local_size
        self.dtypes = dtypes  # element types the kernel computes with
        self.storage = storage  # element types of its storage buffers
        self.features = kernel_features(dtypes, storage)  # the Vulkan device features it needs


class _Kernel(ExprEmitter):
    def __init__(self, func: PrimFunc):
        self.func = func
        self.name = func.name
        self.b = Builder()
        self.vals: dict[int, Any] = {}
        self.ptrs: dict[int, tuple[int, int, str]] = {}  # data var -> (variable, storage, elem)
        self.interface: list[int] = []
        self.dtypes: set[str] = set()
        self.storage: set[str] = set()
        self.logical: dict[int, str] = {}  # data var -> element type when memory differs (bool)

    # ---- the kernel --------------------------------------------------------------------------
    def build(self) -> KernelInfo:
        f, b = self.func, self.b
        elems = _buffer_dtypes(f)
        binding = 0
        scalars: list[E.Var] = []
        for v in f.params:
            buf = f.buffer_map.get(v)
            if not dt.is_handle(v.dtype):
                scalars.append(v)
                continue
            elem = dt.element_of(buf.dtype) if buf is not None else elems.get(id(v))
            if elem is None:
                raise self.error(f"handle parameter {v.name}, which is never read or written "
                                 "(its element type is unknown)")
            mem = self._storage_type(elem)
            block = b.t_buffer_block(mem, dt.bytes_of(mem))
            var = b.global_var(b.t_pointer(SC.StorageBuffer, block), SC.StorageBuffer)
            b.decorate(var, Dec.DescriptorSet, 0)
            b.decorate(var, Dec.Binding, binding)
            b.name(var, buf.name if buf is not None else v.name)
            binding += 1
            for key in [v] + ([buf.data] if buf is not None else []):
                self.ptrs[id(key)] = (var, SC.StorageBuffer, mem)
                self.logical[id(key)] = elem
        self._push_constants(scalars)
        local = self._bind_threads()
        self.stmt(f.body)
        b.emit(Op.Return)
        spirv = b.finish(f.name, self.interface, local)
        return KernelInfo(f.name, spirv, local, self.dtypes | self._used_dtypes(), self.storage)

    def _used_dtypes(self) -> set[str]:
        out: set[str] = set()

        def visit(n: Any) -> None:
            d = getattr(n, "dtype", None)
            if isinstance(d, str) and d not in ("handle", ""):
                out.add(dt.element_of(d))

        post_order_visit(self.func.body, visit)
        return out

    def _storage_type(self, elem: str) -> str:
        """The element type of a storage buffer of ``elem`` (bool as one byte), with the
        capability and extension 8/16-bit storage needs."""
        mem = "uint8" if elem == "bool" else elem
        bits = dt.bits_of(mem)
        if bits < 32:
            cap = "StorageBuffer8BitAccess" if bits == 8 else "StorageBuffer16BitAccess"
            self.b.capabilities.add(cap)
            self.b.extensions.add(f"SPV_KHR_{bits}bit_storage")
        self.storage.add(mem)
        self.dtypes.add(mem)
        return mem

    def _push_constants(self, scalars: list[E.Var]) -> None:
        if not scalars:
            return
        b = self.b
        types = []
        for v in scalars:
            if v.dtype == "bool" or dt.bits_of(v.dtype) < 32:
                raise self.error(f"the {v.dtype} scalar parameter {v.name} (push constants "
                                 "of 8/16-bit types and bool are not used): pass an int32")
            self.dtypes.add(v.dtype)
            types.append(v.dtype)
        offsets, size = push_layout(types)
        if size > 128:
            raise self.error(f"{len(scalars)} scalar parameters ({size} bytes of push constants; "
                             "Vulkan guarantees 128)")
        members = [b.t_scalar(t) for t in types]
        block = b.t_struct(members, offsets, ("push", tuple(types)))
        var = b.global_var(b.t_pointer(SC.PushConstant, block), SC.PushConstant)
        b.name(var, "scalars")
        for k, (v, t) in enumerate(zip(scalars, types)):
            ptr = b.op(Op.AccessChain, b.t_pointer(SC.PushConstant, b.t_scalar(t)), var,
                       b.const("int32", k))
            self.vals[id(v)] = Value(b.op(Op.Load, b.t_scalar(t), ptr), t)

    def _bind_threads(self) -> tuple[int, int, int]:
        """Bind every thread-axis variable at kernel entry; return the workgroup size."""
        attrs: list[S.AttrStmt] = []
        post_order_visit(self.func.body, lambda n: attrs.append(n) if isinstance(n, S.AttrStmt)
                         and n.attr_key == "thread_extent" else None)
        local = [1, 1, 1]
        seen: dict[str, int] = {}
        loaded: dict[str, int] = {}
        b = self.b
        for a in reversed(attrs):  # post order: outermost last
            iv = a.node
            var, tag = getattr(iv, "var", None), getattr(iv, "thread_tag", "")
            kind, _, axis = tag.partition(".")
            if var is None or kind not in _BUILTIN or axis not in _AXES:
                raise self.error(f"the thread axis {tag or iv!r} (expected blockIdx.x/y/z or "
                                 "threadIdx.x/y/z; vthread must be lowered first)")
            if kind == "threadIdx":
                if not E.is_const_int(a.value):
                    raise self.error(f"the symbolic extent {a.value} of {tag}: a Vulkan "
                                     "workgroup size is a constant of the shader; split the "
                                     "axis by a constant factor")
                n = int(E.const_value(a.value))  # type: ignore[arg-type]
                if seen.setdefault(tag, n) != n:
                    raise self.error(f"two extents of {tag} ({seen[tag]} and {n})")
                local[_AXES[axis]] = n
            if id(var) in self.vals:
                continue
            if kind not in loaded:
                v3 = b.t_vec3_uint()
                gvar = b.global_var(b.t_pointer(SC.Input, v3), SC.Input)
                b.decorate(gvar, Dec.BuiltIn, _BUILTIN[kind])
                self.interface.append(gvar)
                loaded[kind] = b.op(Op.Load, v3, gvar)
            u = Value(b.op(Op.CompositeExtract, b.t_scalar("uint32"), loaded[kind], _AXES[axis]),
                      "uint32")
            self.vals[id(var)] = self.convert(u, var.dtype)
        return local[0], local[1], local[2]

    # ---- memory ------------------------------------------------------------------------------
    def _element_ptr(self, data: E.Var, dtype: str, index: Value) -> tuple[int, str]:
        entry = self.ptrs.get(id(data))
        if entry is None:
            raise self.error(f"an access to {data.name}, which is neither a kernel parameter "
                             "nor allocated (Allocate) around its use")
        var, storage, elem = entry
        logical = self.logical.get(id(data), elem)
        if dt.element_of(dtype) != logical:
            raise self.error(f"an access to {data.name} ({logical}) as {dt.element_of(dtype)}")
        b = self.b
        ptr_t = b.t_pointer(storage, b.t_scalar(elem))
        if storage == SC.StorageBuffer:
            return b.op(Op.AccessChain, ptr_t, var, b.const("int32", 0), index.id), elem
        return b.op(Op.AccessChain, ptr_t, var, index.id), elem

    def load(self, e: E.BufferLoad, index: Value) -> Value:
        ptr, elem = self._element_ptr(e.buffer.data, e.buffer.dtype, index)
        v = Value(self.b.op(Op.Load, self.b.t_scalar(elem), ptr), elem)
        return self.convert(v, e.buffer.dtype)  # bool: stored as uint8

    def _s_BufferStore(self, s: S.BufferStore) -> None:
        if len(s.indices) != 1:
            raise self.error(f"the store to {s.buffer.name} with {len(s.indices)} indices")
        if dt.lanes_of(s.buffer.dtype) != 1:
            raise self.error(f"the vector-typed buffer {s.buffer.name} ({s.buffer.dtype})")
        lanes = max(dt.lanes_of(s.value.dtype), dt.lanes_of(s.indices[0].dtype))
        # every lane's value and index first: a vector store reads all lanes before writing
        # (the source may overlap the destination)
        values = [self.expr(s.value, k) for k in range(lanes)]
        indices = [self.expr(s.indices[0], k) for k in range(lanes)]
        preds = [self.expr(s.predicate, k) for k in range(lanes)] if s.predicate is not None \
            else [None] * lanes
        for value, index, pred in zip(values, indices, preds):
            def store(value: Value = value, index: Value = index) -> None:
                ptr, elem = self._element_ptr(s.buffer.data, s.buffer.dtype, index)
                self.b.emit(Op.Store, ptr, self.convert(value, elem).id)

            if pred is None:
                store()
            else:
                self.branch(pred, store, None)

    def _s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        scope = buf.scope or "global"
        if len(buf.shape) != 1 or not E.is_const_int(buf.shape[0]):
            raise self.error(f"the {scope} allocation {buf.name} of shape {list(buf.shape)} "
                             "(kernels need constant 1-D sizes)")
        elem = dt.element_of(buf.dtype)
        count = max(int(E.const_value(buf.shape[0])) * dt.lanes_of(buf.dtype), 1)  # type: ignore[arg-type]
        b = self.b
        if scope == "warp":
            raise self.error(warp_refusal(self.name, buf.name))
        if scope.startswith("shared"):
            storage = SC.Workgroup
        elif scope in ("local", "global"):
            storage = SC.Function
            if count * dt.bytes_of(elem) > MAX_PRIVATE_BYTES:
                raise self.error(f"the {scope} allocation {buf.name} of {count * dt.bytes_of(elem)} "
                                 f"bytes per thread (at most {MAX_PRIVATE_BYTES})")
        else:
            raise self.error(f"the storage scope {scope!r} of {buf.name}")
        self.dtypes.add(elem)
        ptr_t = b.t_pointer(storage, b.t_array(b.t_scalar(elem), count))
        var = b.global_var(ptr_t, storage) if storage == SC.Workgroup else b.function_var(ptr_t)
        b.name(var, buf.name)
        self.ptrs[id(buf.data)] = (var, storage, elem)
        self.stmt(s.body)

    # ---- statements --------------------------------------------------------------------------
    def stmt(self, s: S.Stmt) -> None:
        fn = getattr(self, "_s_" + type(s).__name__, None)
        if fn is None:
            raise self.error(f"the statement {type(s).__name__}")
        fn(s)

    def _s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def _s_Evaluate(self, s: S.Evaluate) -> None:
        v = s.value
        if isinstance(v, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        scope = _sync_scope(v)
        if scope is not None:
            sem = _SEM.get(scope)
            if sem is None:
                raise self.error(f"a barrier of storage scope {scope!r}")
            b = self.b
            b.emit(Op.ControlBarrier, b.const("uint32", 2), b.const("uint32", 2),
                   b.const("uint32", sem))
            return
        raise self.error(f"the statement {v} (kernels evaluate only barriers)")

    def _s_LetStmt(self, s: S.LetStmt) -> None:
        lanes = dt.lanes_of(s.var.dtype)
        if dt.is_handle(s.var.dtype):
            raise self.error(f"the pointer let {s.var.name}")
        self.vals[id(s.var)] = ([self.expr(s.value, k) for k in range(lanes)] if lanes > 1
                                else self.expr(s.value))
        self.stmt(s.body)

    def _s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key == "virtual_thread":
            raise self.error("a virtual_thread attribute (tir.transform.InjectVirtualThread "
                             "must run first: tvm.lower)")
        self.stmt(s.body)  # thread_extent: bound at entry (_bind_threads)

    def _s_AssertStmt(self, s: S.AssertStmt) -> None:
        raise self.error("an assertion inside the kernel (a kernel cannot report failures; "
                         "check the condition on the host)")

    def _s_Prefetch(self, s: S.Prefetch) -> None:
        pass

    def _s_IfThenElse(self, s: S.IfThenElse) -> None:
        other = s.else_case
        else_fn = None
        if other is not None and not S.is_no_op(other):
            def else_fn() -> None:
                assert other is not None
                self.stmt(other)
        self.branch(self.expr(s.condition), lambda: self.stmt(s.then_case), else_fn)

    def _s_For(self, s: S.For) -> None:
        if s.kind in (S.ForKind.THREAD_BINDING, S.ForKind.PARALLEL):
            raise self.error(f"the {s.kind.name} loop {s.loop_var.name} (bind it to a thread "
                             "axis or make it serial)")
        b = self.b
        vt = s.loop_var.dtype
        lo = self.convert(self.expr(s.min), vt)
        end = self.convert(self.expr(E.Add(s.min, s.extent) if not E.is_const_int(s.min, 0)
                                     else s.extent), vt)
        ptr = b.function_var(b.t_pointer(SC.Function, self.t(vt)))
        b.emit(Op.Store, ptr, lo.id)
        head, body, cont, merge = (b.new_id() for _ in range(4))
        b.emit(Op.Branch, head)
        b.label(head)
        i = Value(b.op(Op.Load, self.t(vt), ptr), vt)
        cond = self.op(Op.ULessThan if dt.is_uint(vt) else Op.SLessThan, "bool", i, end)
        b.emit(Op.LoopMerge, merge, cont, 1 if s.kind == S.ForKind.UNROLLED else 0)
        b.emit(Op.BranchConditional, cond.id, body, merge)
        b.label(body)
        self.vals[id(s.loop_var)] = i
        self.stmt(s.body)
        b.emit(Op.Branch, cont)
        b.label(cont)
        b.emit(Op.Store, ptr, self.op(Op.IAdd, vt, i, self.const(vt, 1)).id)
        b.emit(Op.Branch, head)
        b.label(merge)

    # ---- structured branches -----------------------------------------------------------------
    def branch(self, cond: Value, then: Callable[[], None], other: Callable[[], None] | None) -> None:
        b = self.b
        then_l, merge = b.new_id(), b.new_id()
        else_l = b.new_id() if other is not None else merge
        b.emit(Op.SelectionMerge, merge, 0)
        b.emit(Op.BranchConditional, cond.id, then_l, else_l)
        b.label(then_l)
        then()
        b.emit(Op.Branch, merge)
        if other is not None:
            b.label(else_l)
            other()
            b.emit(Op.Branch, merge)
        b.label(merge)

    def branch_value(self, cond: Value, then: Any, other: Any, dtype: str) -> Value:
        b = self.b
        elem = dt.element_of(dtype)
        ptr = b.function_var(b.t_pointer(SC.Function, self.t(elem)))
        self.branch(cond, lambda: b.emit(Op.Store, ptr, self.convert(then(), elem).id),
                    lambda: b.emit(Op.Store, ptr, self.convert(other(), elem).id))
        return Value(b.op(Op.Load, self.t(elem), ptr), elem)


def emit_kernel(func: PrimFunc) -> KernelInfo:
    """The SPIR-V compute shader of one device PrimFunc (entry point: the kernel's name)."""
    return _Kernel(func).build()
