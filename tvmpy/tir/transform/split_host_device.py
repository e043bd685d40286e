"""SplitHostDevice: a lowered GPU function -> one host function launching device kernels.

What it does
    Each outermost ``AttrStmt("thread_extent")`` subtree of a function whose ``target`` attribute
    is a GPU target becomes a device PrimFunc (attrs ``calling_conv="device_kernel"``,
    ``target`` = the GPU target, ``global_symbol`` = ``<func>_kernel<i>``). Its params are the
    kernel's free variables in a stable order: buffer data handles first (the function's params
    in order, then host-allocated intermediates in allocation order), then scalars (scalar
    params, shape variables in the order of the buffers' shapes, host let variables in
    definition order); each handle param has a flat 1-D Buffer (dtype, scope "global") in the
    kernel's ``buffer_map``.
    The host function keeps the name, params and buffer_map, gets ``target`` = the GPU
    target's host, and its kernels are replaced by ``Evaluate(Call("int32", "tir.gpu_launch",
    [StringImm(name), grid_x, grid_y, grid_z, block_x, block_y, block_z, dyn_shared_bytes,
    *args]))``. Grid/block extents come from the kernel's thread_extent attributes (1 when a tag
    is absent; UnifyThreadBinding has made each tag appear once at the kernel's top).

    Host code may be only ``LetStmt``, ``AssertStmt``, sequences, ``Allocate`` of global
    intermediates (device memory between kernels), serial loops around kernels (a scan's time
    steps: the loop variable is a scalar argument of the kernels) and kernels. A loop-free statement outside
    every kernel (the store of a 0-d stage, which has no axis to bind; the init of a 0-d
    cross-thread reduction) becomes a kernel of one thread; a loop outside every kernel is
    computation that no thread would run: a ValueError naming it ("Did you forget to bind?").

When valid
    On the output of the GPU phases of :mod:`tvmpy.tir.pipeline` (flat buffers).

Example
    before:  def f(A, B): attr [blockIdx.x] thread_extent = 4 { attr [threadIdx.x] thread_extent = 64 {
                 B[bx * 64 + tx] = A[bx * 64 + tx] + 1f } }
    after:   def f(A, B): tir.gpu_launch("f_kernel0", 4, 1, 1, 64, 1, 1, 0, A, B)
             def f_kernel0(A, B):  (calling_conv=device_kernel) the body above
"""

from __future__ import annotations

from typing import Any

from ...ir.module import IRModule
from ...transform import PassContext
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import post_order_visit
from .function_pass import PrimFuncPass

__all__ = ["SplitHostDevice", "split_host_device", "LAUNCH_OP", "THREAD_TAGS", "kernel_launches"]

#: the host's launch intrinsic
LAUNCH_OP = "tir.gpu_launch"
#: launch dimensions in the order of the launch call's grid/block arguments
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z")


def _tag(node: S.AttrStmt) -> str:
    iv = node.node
    return iv.thread_tag if isinstance(iv, E.IterVar) else getattr(iv, "name", "")


def _describe(s: S.Stmt) -> str:
    text = str(s).strip().splitlines()
    return text[0] if text else type(s).__name__


def free_vars(stmt: S.Stmt) -> list[E.Var]:
    """Variables used in ``stmt`` (buffer data and shapes included) and not defined in it, in
    first-use order."""
    used: dict[int, E.Var] = {}
    defined: set[int] = set()

    def use(v: Any) -> None:
        if isinstance(v, E.Var) and id(v) not in used:
            used[id(v)] = v

    def buf(b: Buffer) -> None:
        use(b.data)
        for x in (*b.shape, *b.strides, b.elem_offset):
            post_order_visit(x, use) if not isinstance(x, int) else None

    def f(n: Any) -> None:
        if isinstance(n, E.Var):
            use(n)
        elif isinstance(n, (E.BufferLoad, S.BufferStore)):
            buf(n.buffer)
        elif isinstance(n, S.For):
            defined.add(id(n.loop_var))
        elif isinstance(n, (S.LetStmt, E.Let)):
            defined.add(id(n.var))
        elif isinstance(n, S.Allocate):
            defined.add(id(n.buffer.data))
            buf(n.buffer)
        elif isinstance(n, S.AttrStmt) and isinstance(n.node, E.IterVar):
            defined.add(id(n.node.var))

    post_order_visit(stmt, f)
    return [v for k, v in used.items() if k not in defined]


def _loop_free(s: S.Stmt) -> bool:
    """Whether ``s`` has no loop and no kernel inside (a few scalar statements)."""
    found: list[Any] = []
    post_order_visit(s, lambda n: found.append(n) if isinstance(n, S.For)
                     or (isinstance(n, S.AttrStmt) and n.attr_key == "thread_extent") else None)
    return not found


def _has_kernel(s: S.Stmt) -> bool:
    found: list[Any] = []
    post_order_visit(s, lambda n: found.append(n) if isinstance(n, S.AttrStmt)
                     and n.attr_key == "thread_extent" else None)
    return bool(found)


class _Splitter:
    def __init__(self, func: PrimFunc, device_target: Any, host_target: Any):
        self.func = func
        self.name = func.name
        self.device_target = device_target
        self.kernels: list[PrimFunc] = []
        # definition order of host-visible variables: handles first, then scalars
        self.order: dict[int, int] = {}
        self.handle_bufs: dict[int, Buffer] = {}
        handles: list[E.Var] = []
        scalars: list[E.Var] = []
        for p in func.params:
            b = func.buffer_map.get(p)
            if b is not None:
                handles.append(b.data)
                self.handle_bufs[id(b.data)] = b
            else:
                scalars.append(p)
        for p in func.params:
            b = func.buffer_map.get(p)
            if b is not None:
                for x in (*b.shape, *b.strides, b.elem_offset):
                    if not isinstance(x, int):
                        post_order_visit(x, lambda v: scalars.append(v)
                                         if isinstance(v, E.Var) else None)
        self.handles = handles
        self.scalars = scalars
        self._renumber()

    def _renumber(self) -> None:
        self.order = {}
        for v in self.handles + self.scalars:
            self.order.setdefault(id(v), len(self.order))

    def host(self, s: S.Stmt) -> S.Stmt:
        if isinstance(s, S.AttrStmt) and s.attr_key == "thread_extent":
            return self.kernel(s)
        if isinstance(s, S.SeqStmt):
            return S.seq(*[self.host(x) for x in s.seq])
        if isinstance(s, S.LetStmt):
            self.scalars.append(s.var)
            self._renumber()
            return S.LetStmt(s.var, s.value, self.host(s.body))
        if isinstance(s, S.AssertStmt):
            return S.AssertStmt(s.condition, s.message, self.host(s.body))
        if isinstance(s, S.Allocate) and s.buffer.scope in ("global", ""):
            self.handles.append(s.buffer.data)
            self.handle_bufs[id(s.buffer.data)] = s.buffer
            self._renumber()
            return S.Allocate(s.buffer, self.host(s.body), s.condition)
        if isinstance(s, S.AttrStmt) and s.attr_key not in ("virtual_thread",):
            return S.AttrStmt(s.node, s.attr_key, s.value, self.host(s.body))
        if isinstance(s, S.Evaluate) and isinstance(s.value, (E.IntImm, E.FloatImm)):
            return s
        if isinstance(s, S.For) and s.kind in (S.ForKind.SERIAL, S.ForKind.UNROLLED) \
                and _has_kernel(s.body):
            # a host loop launching kernels (a scan's time steps): its variable is a scalar
            # argument of the kernels inside
            self.scalars.append(s.loop_var)
            self._renumber()
            return S.For(s.loop_var, s.min, s.extent, S.ForKind.SERIAL, self.host(s.body))
        if isinstance(s, S.Allocate):
            raise ValueError(
                f"{self.name}: buffer {s.buffer.name} of scope {s.buffer.scope!r} is allocated "
                "outside every GPU kernel; compute_at its stage inside a blockIdx-bound loop "
                "(shared: one per block) or a threadIdx-bound one (local: one per thread)")
        if _loop_free(s):  # a 0-d stage (a scalar store, a reduction's init): one thread
            iv = E.IterVar(E.Range(0, 1), "threadIdx.x", E.IterVar.ThreadIndex, "threadIdx.x")
            return self.kernel(S.AttrStmt(iv, "thread_extent", E.const(1), s))
        raise ValueError(
            f"{self.name}: code outside every GPU kernel for target {self.device_target}: "
            f"`{_describe(s)}`. Did you forget to bind? Every loop nest must be bound to "
            "blockIdx/threadIdx (s[C].bind(axis, te.thread_axis('blockIdx.x')) ...) so that "
            "it runs on the device")

    def kernel(self, s: S.AttrStmt) -> S.Stmt:
        extents: dict[str, Any] = {}
        node: S.Stmt = s
        while isinstance(node, S.AttrStmt) and node.attr_key == "thread_extent":
            tag = _tag(node)
            if tag not in THREAD_TAGS:
                raise ValueError(f"{self.name}: unknown thread tag {tag!r}; expected one of "
                                 f"{', '.join(THREAD_TAGS)}")
            if tag in extents:
                raise ValueError(f"{self.name}: thread tag {tag} bound twice at a kernel's top "
                                 "(run UnifyThreadBinding first)")
            extents[tag] = node.value
            node = node.body
        inner_global: list[S.Allocate] = []
        post_order_visit(s, lambda n: inner_global.append(n) if isinstance(n, S.Allocate)
                         and n.buffer.scope in ("global", "") else None)
        if inner_global:
            b = inner_global[0].buffer
            raise ValueError(
                f"{self.name}: buffer {b.name} of scope 'global' is allocated inside a GPU "
                "kernel (a kernel cannot allocate device memory); give its stage scope "
                "'shared' or 'local' (set_scope), or leave it at the root as its own kernel")
        free = free_vars(s)
        for v in free:
            if id(v) not in self.order:
                raise ValueError(f"{self.name}: kernel uses {v.name}, defined in host code "
                                 "that is not a let/param/allocation")
        free.sort(key=lambda v: self.order[id(v)])
        handles = [v for v in free if id(v) in self.handle_bufs]
        scalars = [v for v in free if id(v) not in self.handle_bufs]
        params = handles + scalars
        bmap = {}
        from ..buffer import decl_buffer
        from .common import flat_size

        for v in handles:
            b = self.handle_bufs[id(v)]
            bmap[v] = decl_buffer((flat_size(b),), b.dtype, b.name, data=v)
        kname = f"{self.name}_kernel{len(self.kernels)}"
        attrs = {"calling_conv": "device_kernel", "target": self.device_target,
                 "global_symbol": kname, "tir.noalias": True, "tir.lowered": True}
        self.kernels.append(PrimFunc(params, s, bmap, attrs))
        one = E.const(1)
        dims = [extents.get(t, one) for t in THREAD_TAGS]
        args = [E.StringImm(kname), *dims, E.const(0), *params]
        return S.Evaluate(E.Call("int32", LAUNCH_OP, args))


def split_host_device(func: PrimFunc, target: Any = None) -> list[PrimFunc]:
    """``[host, kernel0, kernel1, ...]`` for a lowered GPU function (``target``: its GPU
    target, default the function's ``target`` attribute); a non-GPU function comes back alone."""
    from ...target import as_target

    tgt = target if target is not None else func.attrs.get("target")
    if tgt is not None:
        tgt = as_target(tgt)
    if tgt is None or not getattr(tgt, "is_gpu", False):
        return [func]
    sp = _Splitter(func, tgt, tgt.host)
    body = sp.host(func.body)
    host = PrimFunc(func.params, body, func.buffer_map, dict(func.attrs)).with_attr(
        "target", tgt.host)
    return [host, *sp.kernels]


def SplitHostDevice() -> PrimFuncPass:  # noqa: N802 - TVM's name
    """The module pass: every GPU PrimFunc replaced by its host function and its kernels."""

    class _P(PrimFuncPass):
        def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
            out = IRModule()
            for gv, func in mod.items():
                if isinstance(func, PrimFunc):
                    for f in split_host_device(func):
                        out[f.name] = f
                else:
                    out[gv] = func
            return out

    return _P(lambda f, m, c: f, 0, "SplitHostDevice")


def kernel_launches(host: PrimFunc) -> list[E.Call]:
    """The ``tir.gpu_launch`` calls of a host function, in order."""
    out: list[E.Call] = []
    post_order_visit(host.body, lambda n: out.append(n)
                     if isinstance(n, E.Call) and n.op == LAUNCH_OP else None)
    return out
