"""UnifyThreadBinding: each thread tag bound once, at the top of each GPU kernel.

What it does
    A kernel is an outermost ``AttrStmt("thread_extent")`` subtree. Stages bound to the same
    tag (``threadIdx.x`` in a cooperative fetch and in the compute it is attached to) are the
    same hardware index: every thread_extent attribute of the kernel is removed, its variable
    replaced by one variable per tag, and the tags are bound once at the kernel's top with the
    launch extent (the largest constant extent, or the one symbolic extent). A stage whose
    extent is smaller than the launch extent runs under ``if likely(threadIdx.x < extent)``
    (pushed down to each statement when the stage uses shared memory, so that the barriers
    ThreadSync inserts between them are reached by every thread).
    Allocations with scope "shared" move to the kernel's top (one per block; OpenCL needs
    ``__local`` arrays at kernel scope); "local" ones stay where they are (one per thread).
    Code outside a stage's thread attributes is run by every thread (GPU semantics); there, a
    read-modify-write of non-local memory (a reduction stage attached at a block-level loop
    and not bound to threads) runs only on the threads with index 0 in the unbound tags.

When valid
    GPU targets only (the pipeline runs it for them: ``tir.pipeline.gpu_phases``), on a kernel
    whose stages bound to one tag agree on its extent or are guarded by it; before ThreadSync
    and LowerWarpMemory, which expect each tag bound once.

Example
    before:  attr [threadIdx.x] thread_extent = 64 { A_shared[tx] = A[tx] }
             attr [threadIdx.x] thread_extent = 32 { B[tx2] = A_shared[tx2 * 2] }
    after:   attr [threadIdx.x] thread_extent = 64 { A_shared[tx] = A[tx]
                 if likely(tx < 32) { B[tx] = A_shared[tx * 2] } }
"""

from __future__ import annotations

from typing import Any

from ...ir.node import structural_equal
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, post_order_visit, substitute
from ..op import likely
from .common import KernelMapper, is_thread_extent, thread_tag
from .function_pass import PrimFuncPass

__all__ = ["UnifyThreadBinding", "unify_thread_binding_func"]


class _Unifier(Mutator):
    def __init__(self, canon: dict[str, E.IterVar], launch: dict[str, E.PrimExpr]):
        self.canon = canon
        self.launch = launch
        self.shared: list[S.Allocate] = []
        self.bound: list[str] = []  # the thread tags bound around the statement being visited

    def visit_PrimExpr(self, e: Any) -> Any:
        return e

    def visit_BufferStore(self, s: S.BufferStore) -> Any:
        # a read-modify-write of memory shared by the threads (a reduction) in code that the
        # unbound threads would all run: one thread does it (the others would race)
        if s.buffer.scope == "local":
            return s
        free = [t for t in self.canon if t.startswith("threadIdx") and t not in self.bound
                and not _is_one(self.launch[t])]
        if not free:
            return s
        reads: list[int] = []
        post_order_visit(s.value, lambda n: reads.append(1) if isinstance(n, E.BufferLoad)
                         and n.buffer.data is s.buffer.data else None)
        if not reads and s.buffer.scope != "shared":
            return s  # the same value stored by every thread: redundant, not racy
        # (shared memory: one thread stores it too; PoCL 3.1 miscompiles a shared scalar that
        # every work-item stores, one then updates, and all read after a barrier)
        cond: E.PrimExpr = E.EQ(self.canon[free[0]].var, E.const(0, self.canon[free[0]].var.dtype))
        for t in free[1:]:
            v = self.canon[t].var
            cond = E.And(cond, E.EQ(v, E.const(0, v.dtype)))
        return S.IfThenElse(cond, s)

    def visit_AttrStmt(self, s: S.AttrStmt) -> Any:
        if not is_thread_extent(s):
            return self.generic_visit(s)
        tag = thread_tag(s)
        cv = self.canon[tag].var
        body = s.body if s.node.var is cv else substitute(s.body, {s.node.var: cv})
        self.bound.append(tag)
        try:
            body = self.visit(body)
        finally:
            self.bound.pop()
        ext = self.launch[tag]
        if not structural_equal(s.value, ext):
            body = _guard(body, likely(E.LT(cv, s.value)))
        return body

    def visit_Allocate(self, s: S.Allocate) -> Any:
        if s.buffer.scope == "shared":
            self.shared.append(s)
            return self.visit(s.body)
        return self.generic_visit(s)


def _is_one(e: Any) -> bool:
    return isinstance(e, E.IntImm) and e.value == 1


def _uses_shared(s: Any) -> bool:
    hit: list[int] = []

    def f(n: Any) -> None:
        if isinstance(n, (E.BufferLoad, S.BufferStore)) and n.buffer.scope == "shared":
            hit.append(1)
        elif isinstance(n, S.Allocate) and n.buffer.scope == "shared":
            hit.append(1)

    post_order_visit(s, f)
    return bool(hit)


def _has_load(e: Any) -> bool:
    hit: list[int] = []
    post_order_visit(e, lambda n: hit.append(1) if isinstance(n, E.BufferLoad) else None)
    return bool(hit)


def _guard(body: S.Stmt, cond: E.PrimExpr) -> S.Stmt:
    """``if cond: body``, with the condition pushed down to the statements when ``body`` uses
    shared memory, so that barriers (inserted later, between those statements) stay in code
    that every thread of the block runs."""
    if not _uses_shared(body):
        return S.IfThenElse(cond, body)
    if isinstance(body, S.SeqStmt):
        return S.seq(*[_guard(x, cond) for x in body.seq])
    if isinstance(body, S.Allocate):
        return S.Allocate(body.buffer, _guard(body.body, cond), body.condition)
    if isinstance(body, S.AttrStmt) and not is_thread_extent(body):
        return S.AttrStmt(body.node, body.attr_key, body.value, _guard(body.body, cond))
    if isinstance(body, S.LetStmt) and not _has_load(body.value):
        return S.LetStmt(body.var, body.value, _guard(body.body, cond))
    if isinstance(body, S.For):
        return S.For(body.loop_var, body.min, body.extent, body.kind, _guard(body.body, cond),
                     body.thread_binding, body.annotations)
    if isinstance(body, S.IfThenElse) and not _has_load(body.condition):
        other = _guard(body.else_case, cond) if body.else_case is not None else None
        return S.IfThenElse(body.condition, _guard(body.then_case, cond), other)
    return S.IfThenElse(cond, body)


def _unify_kernel(kernel: S.AttrStmt, fname: str) -> S.Stmt:
    order: list[str] = []
    canon: dict[str, E.IterVar] = {}
    extents: dict[str, list[E.PrimExpr]] = {}

    def f(n: Any) -> None:
        if is_thread_extent(n):
            tag = thread_tag(n)
            if tag not in canon:
                order.append(tag)
                canon[tag] = n.node
            seen = extents.setdefault(tag, [])
            if not any(structural_equal(x, n.value) for x in seen):
                seen.append(n.value)

    # pre-order for the canonical (outermost) IterVar: walk manually
    def walk(s: Any) -> None:
        f(s)
        for child in _children(s):
            walk(child)

    walk(kernel)
    launch: dict[str, E.PrimExpr] = {}
    for tag, exts in extents.items():
        if len(exts) == 1:
            launch[tag] = exts[0]
        elif all(isinstance(x, E.IntImm) for x in exts):
            launch[tag] = max(exts, key=lambda x: int(getattr(x, "value", 0)))
        else:
            raise ValueError(f"{fname}: thread tag {tag} is bound with different symbolic extents "
                             f"({', '.join(str(x) for x in exts)}) in one kernel; bind it with "
                             "constant extents (split by a constant factor)")
    u = _Unifier(canon, launch)
    body = u.visit(kernel)
    for a in reversed(u.shared):
        body = S.Allocate(a.buffer, body, a.condition)
    for tag in reversed(order):
        iv = canon[tag]
        body = S.AttrStmt(iv, "thread_extent", launch[tag], body)
    return body


def _children(s: Any) -> list[Any]:
    if isinstance(s, S.SeqStmt):
        return list(s.seq)
    if isinstance(s, S.IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    if isinstance(s, (S.For, S.AttrStmt, S.Allocate, S.LetStmt, S.AssertStmt)):
        return [s.body]
    return []


def unify_thread_binding_func(func: PrimFunc) -> PrimFunc:
    """Each thread tag bound once at each kernel's top; shared allocations hoisted there."""
    body = KernelMapper(lambda k: _unify_kernel(k, func.name)).visit(func.body)
    return func if body is func.body else func.with_body(body)


def UnifyThreadBinding() -> PrimFuncPass:  # noqa: N802 - TVM's name
    return PrimFuncPass.from_func(unify_thread_binding_func, "UnifyThreadBinding")
