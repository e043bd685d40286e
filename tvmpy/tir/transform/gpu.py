"""GPU passes: UnifyThreadBinding, ThreadSync, LowerThreadAllreduce (run for GPU targets only).

UnifyThreadBinding
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

ThreadSync("shared")
    Inserts ``Evaluate(Call("int32", "tir.tvm_storage_sync", [StringImm("shared")]))`` before a
    statement that reads a shared buffer written since the last barrier, or writes one read
    since the last barrier, and at the end of a loop body when the next iteration's first
    accesses (before any barrier) conflict with the accesses after the body's last barrier.
    The expressions of a LetStmt / AttrStmt / AssertStmt / Allocate count as accesses made
    before its body (LowerThreadAllreduce binds a tuple combiner's values in LetStmts); with
    the body they form one step, as the loads and the store of one statement do.
    A barrier is never put inside a branch whose condition depends on a thread index: such a
    branch is one statement for the analysis (its barrier goes before it).

LowerThreadAllreduce
    A reduction ``B[i] = B[i] + e`` (any commutative combiner te emits) inside a thread_extent
    of threadIdx.* where ``i`` does not depend on that thread index (te's form of a reduce axis
    bound to a thread) becomes: each thread's partial value, a tree reduction over a shared
    buffer with barriers (and, on CUDA targets when the group fits a warp, ``tir.tvm_warp_shuffle``
    is left to later work), and thread 0 storing the result.
"""

from __future__ import annotations

from typing import Any

from ...ir.node import structural_equal
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, post_order_visit, substitute
from ..op import likely
from .function_pass import PrimFuncPass

__all__ = ["UnifyThreadBinding", "unify_thread_binding_func", "ThreadSync", "thread_sync_func",
           "LowerThreadAllreduce", "lower_thread_allreduce_func", "storage_sync",
           "is_storage_sync", "SYNC_OP"]

SYNC_OP = "tir.tvm_storage_sync"


def storage_sync(scope: str = "shared") -> S.Stmt:
    """The barrier statement for ``scope`` ("shared": all threads of a block)."""
    return S.Evaluate(E.Call("int32", SYNC_OP, [E.StringImm(scope)]))


def is_storage_sync(s: Any) -> bool:
    return isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.op == SYNC_OP


def _tag(node: S.AttrStmt) -> str:
    iv = node.node
    return iv.thread_tag if isinstance(iv, E.IterVar) else ""


def _is_thread(s: Any) -> bool:
    return isinstance(s, S.AttrStmt) and s.attr_key == "thread_extent" and isinstance(
        s.node, E.IterVar)


# ---------------------------------------------------------------------------------------------
# UnifyThreadBinding
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
        if not _is_thread(s):
            return self.generic_visit(s)
        tag = _tag(s)
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
    if isinstance(body, S.AttrStmt) and not _is_thread(body):
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
        if _is_thread(n):
            tag = _tag(n)
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


class _KernelFinder(Mutator):
    def __init__(self, fn: Any):
        self.fn = fn

    def visit_PrimExpr(self, e: Any) -> Any:
        return e

    def visit_AttrStmt(self, s: S.AttrStmt) -> Any:
        if _is_thread(s):
            return self.fn(s)
        return self.generic_visit(s)


def unify_thread_binding_func(func: PrimFunc) -> PrimFunc:
    """Each thread tag bound once at each kernel's top; shared allocations hoisted there."""
    body = _KernelFinder(lambda k: _unify_kernel(k, func.name)).visit(func.body)
    return func if body is func.body else func.with_body(body)


def UnifyThreadBinding() -> PrimFuncPass:  # noqa: N802 - TVM's name
    return PrimFuncPass.from_func(unify_thread_binding_func, "UnifyThreadBinding")


# ---------------------------------------------------------------------------------------------
# ThreadSync
def _accesses(s: Any, scope: str) -> tuple[set[int], set[int]]:
    """(read, written) data-var ids of buffers with ``scope`` in ``s``."""
    r: set[int] = set()
    w: set[int] = set()

    def f(n: Any) -> None:
        if isinstance(n, E.BufferLoad) and n.buffer.scope == scope:
            r.add(id(n.buffer.data))
        elif isinstance(n, S.BufferStore) and n.buffer.scope == scope:
            w.add(id(n.buffer.data))
        elif isinstance(n, E.Call) and n.op == "tvm_access_ptr" and len(n.args) >= 2:
            v = n.args[1]
            if isinstance(v, E.Var):
                r.add(id(v))
                w.add(id(v))

    post_order_visit(s, f)
    return r, w


def _has_sync(s: Any) -> bool:
    found = []
    post_order_visit(s, lambda n: found.append(1) if isinstance(n, E.Call) and n.op == SYNC_OP
                     else None)
    return bool(found)


class _State:
    __slots__ = ("r", "w")

    def __init__(self, r: set[int] | None = None, w: set[int] | None = None):
        self.r = set(r or ())
        self.w = set(w or ())

    def copy(self) -> _State:
        return _State(self.r, self.w)

    def conflicts(self, r: set[int], w: set[int]) -> bool:
        # read after write, write after read (write after write without a read between:
        # no thread depends on the order)
        return bool(r & self.w) or bool(w & self.r)


class _Syncer:
    def __init__(self, scope: str, thread_vars: set[int]):
        self.scope = scope
        self.tvars = thread_vars

    def _divergent(self, cond: Any) -> bool:
        hit = []
        post_order_visit(cond, lambda n: hit.append(1) if isinstance(n, E.Var)
                         and id(n) in self.tvars else None)
        return bool(hit)

    def _check_divergent(self, s: S.Stmt, parts: list[Any]) -> None:
        """Thread-dependent control flow whose inside would need a barrier cannot be
        synchronized (not every thread reaches the barrier): a clear error."""
        for p in parts:
            if p is None:
                continue
            probe = S.seq(*self.stmt(p, _State()))
            if isinstance(s, S.For):
                probe = S.seq(*self.loop(S.For(s.loop_var, 0, 2, s.kind, p), _State()))
            if _has_sync(probe):
                head = str(s).strip().splitlines()[0]
                raise ValueError(f"shared memory written and read across threads inside "
                                 f"thread-dependent control flow `{head}`: a barrier there "
                                 "would not be reached by every thread of the block; make the "
                                 "loop bounds / conditions independent of threadIdx")

    def leaf(self, s: S.Stmt, st: _State) -> list[S.Stmt]:
        r, w = _accesses(s, self.scope)
        out: list[S.Stmt] = []
        if st.conflicts(r, w):
            out.append(storage_sync(self.scope))
            st.r.clear()
            st.w.clear()
        st.r |= r
        st.w |= w
        return out + [s]

    def seq(self, items: list[S.Stmt], st: _State) -> list[S.Stmt]:
        out: list[S.Stmt] = []
        for s in items:
            out += self.stmt(s, st)
        return out

    def stmt(self, s: S.Stmt, st: _State) -> list[S.Stmt]:
        if is_storage_sync(s):
            st.r.clear()
            st.w.clear()
            return [s]
        r, w = _accesses(s, self.scope)
        if not r and not w:
            return [s]
        if isinstance(s, S.SeqStmt):
            return self.seq(list(s.seq), st)
        if isinstance(s, S.IfThenElse):
            if self._divergent(s.condition):
                self._check_divergent(s, [s.then_case, s.else_case])
                return self.leaf(s, st)
            a = st.copy()
            then = self.body(s.then_case, a)
            b = st.copy()
            other = self.body(s.else_case, b) if s.else_case is not None else None
            st.r, st.w = a.r | b.r, a.w | b.w
            return [S.IfThenElse(s.condition, then, other)]
        if isinstance(s, S.For):
            if self._divergent(s.extent) or self._divergent(s.min):
                self._check_divergent(s, [s.body])
                return self.leaf(s, st)
            return self.loop(s, st)
        if isinstance(s, (S.LetStmt, S.AttrStmt, S.Allocate, S.AssertStmt)):
            pre, hr, hw = self._header(s, st)
            body = self.body(s.body, st)
            if not _has_sync(body):  # the header and the body up to its end: one statement
                st.r |= hr
                st.w |= hw
            if isinstance(s, S.LetStmt):
                return pre + [S.LetStmt(s.var, s.value, body)]
            if isinstance(s, S.AttrStmt):
                return pre + [S.AttrStmt(s.node, s.attr_key, s.value, body)]
            if isinstance(s, S.AssertStmt):
                return pre + [S.AssertStmt(s.condition, s.message, body)]
            return pre + [S.Allocate(s.buffer, body, s.condition)]
        return self.leaf(s, st)

    def _header(self, s: Any, st: _State) -> tuple[list[S.Stmt], set[int], set[int]]:
        """The accesses of a scoping statement's own expressions (a LetStmt's value, e.g. the
        tuple combiner LowerThreadAllreduce binds, reading shared memory), which run before its
        body: a barrier before the statement when they conflict with the earlier accesses.
        Returns (that barrier or nothing, reads, writes). Like the reads and the write of one
        store (``S[t] = S[t] + S[t + k]`` in a tree step), the header is not checked against
        its own body: the caller adds its accesses to the state after the body."""
        if isinstance(s, S.LetStmt):
            exprs = [s.value]
        elif isinstance(s, S.AttrStmt):
            exprs = [s.value]
        elif isinstance(s, S.AssertStmt):
            exprs = [s.condition, s.message]
        else:
            exprs = [*s.buffer.shape, s.condition]
        r: set[int] = set()
        w: set[int] = set()
        for e in exprs:
            if e is not None and not isinstance(e, (int, float, str)):
                er, ew = _accesses(e, self.scope)
                r |= er
                w |= ew
        pre: list[S.Stmt] = []
        if st.conflicts(r, w):
            pre.append(storage_sync(self.scope))
            st.r.clear()
            st.w.clear()
        return pre, r, w

    def body(self, s: S.Stmt, st: _State) -> S.Stmt:
        return S.seq(*self.stmt(s, st))

    def loop(self, s: S.For, st: _State) -> list[S.Stmt]:
        r, w = _accesses(s, self.scope)
        pre: list[S.Stmt] = []
        if st.conflicts(r, w):  # the loop as a whole after the earlier accesses
            pre.append(storage_sync(self.scope))
            st.r.clear()
            st.w.clear()
        inner = _State()
        body = self.body(s.body, inner)
        # the next iteration's accesses before its first barrier against the end state
        first = _State()
        self._first_accesses(body, first)
        if inner.conflicts(first.r, first.w):
            body = S.seq(body, storage_sync(self.scope))
            inner = _State()
        if _has_sync(body):  # what precedes the loop is behind a barrier
            st.r, st.w = inner.r, inner.w
        else:
            st.r |= inner.r
            st.w |= inner.w
        new = S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_binding, s.annotations)
        return pre + [new]

    def _first_accesses(self, s: S.Stmt, acc: _State) -> bool:
        """Accumulate accesses up to the first barrier; True when a barrier was reached."""
        if is_storage_sync(s):
            return True
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                if self._first_accesses(x, acc):
                    return True
            return False
        r, w = _accesses(s, self.scope)
        acc.r |= r
        acc.w |= w
        return False


def thread_sync_func(func: PrimFunc, scope: str = "shared") -> PrimFunc:
    """Barriers for ``scope`` in every kernel of ``func`` (see the module docstring)."""

    def kernel(k: S.AttrStmt) -> S.Stmt:
        tvars: set[int] = set()
        post_order_visit(k, lambda n: tvars.add(id(n.node.var)) if _is_thread(n) and
                         _tag(n).startswith("threadIdx") else None)
        node: Any = k
        heads = []
        while _is_thread(node) or isinstance(node, S.Allocate):
            heads.append(node)
            node = node.body
        body = _Syncer(scope, tvars).body(node, _State())
        for h in reversed(heads):
            if isinstance(h, S.Allocate):
                body = S.Allocate(h.buffer, body, h.condition)
            else:
                body = S.AttrStmt(h.node, h.attr_key, h.value, body)
        return body

    body = _KernelFinder(kernel).visit(func.body)
    return func if body is func.body else func.with_body(body)


def ThreadSync(storage_scope: str = "shared") -> PrimFuncPass:  # noqa: N802 - TVM's name
    if storage_scope != "shared":
        raise ValueError(f"ThreadSync: only the 'shared' scope is supported, got {storage_scope!r}")
    return PrimFuncPass.from_func(lambda f: thread_sync_func(f, storage_scope), "ThreadSync")


# ---------------------------------------------------------------------------------------------
# LowerThreadAllreduce
def lower_thread_allreduce_func(func: PrimFunc, target: Any = None) -> PrimFunc:
    from .thread_allreduce import lower_allreduce

    return lower_allreduce(func, target)


def LowerThreadAllreduce(target: Any = None) -> PrimFuncPass:  # noqa: N802 - TVM's name
    return PrimFuncPass.from_func(lambda f: lower_thread_allreduce_func(f, target),
                                  "LowerThreadAllreduce")
