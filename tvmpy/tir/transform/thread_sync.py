"""ThreadSync("shared"): barriers between the accesses of threads to shared memory.

What it does
    Inserts ``Evaluate(Call("int32", "tir.tvm_storage_sync", [StringImm("shared")]))`` before a
    statement that reads a shared buffer written since the last barrier, or writes one read
    since the last barrier, and at the end of a loop body when the next iteration's first
    accesses (before any barrier) conflict with the accesses after the body's last barrier.
    The expressions of a LetStmt / AttrStmt / AssertStmt / Allocate count as accesses made
    before its body (LowerThreadAllreduce binds a tuple combiner's values in LetStmts); with
    the body they form one step, as the loads and the store of one statement do.
    A barrier is never put inside a branch whose condition depends on a thread index: such a
    branch is one statement for the analysis (its barrier goes before it).
    A pointer taken by ``tvm_access_ptr`` (tensor-core loads and stores) is a read and/or a
    write by its access mask, and only counts for buffers of the scope allocated in the kernel.
    A double buffer's copy of the next half (InjectDoubleBuffer's ``double_buffer_write``
    inside the loop, using its variable) does not conflict with the reads of the current half
    in the same iteration; it does with the next iteration's reads (barrier at the loop end).

When valid
    GPU kernels after UnifyThreadBinding (each thread tag bound once at the kernel's top, so
    every thread reaches every barrier); only the "shared" scope is supported. It adds
    barriers and removes none: a kernel that needs none is unchanged. A kernel whose block
    is one thread (every threadIdx extent 1, or none bound) gets none: nothing to order, and
    PoCL 3.1's work-group compiler aborted the process on such a kernel with barriers in a
    loop (an assertion in ParallelRegion, depending on the heap layout).

Example
    before:  A_shared[tx] = A[bx * 64 + tx]
             B[bx * 64 + tx] = A_shared[63 - tx]
    after:   A_shared[tx] = A[bx * 64 + tx]; tir.tvm_storage_sync("shared")
             B[bx * 64 + tx] = A_shared[63 - tx]
"""

from __future__ import annotations

from typing import Any

from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import post_order_visit, uses_var
from .common import KernelMapper, is_thread_extent, thread_tag
from .function_pass import PrimFuncPass

__all__ = ["ThreadSync", "thread_sync_func", "storage_sync", "is_storage_sync", "SYNC_OP"]

SYNC_OP = "tir.tvm_storage_sync"


def storage_sync(scope: str = "shared") -> S.Stmt:
    """The barrier statement for ``scope`` ("shared": all threads of a block)."""
    return S.Evaluate(E.Call("int32", SYNC_OP, [E.StringImm(scope)]))


def is_storage_sync(s: Any) -> bool:
    return isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.op == SYNC_OP


def _accesses(s: Any, scope: str, scoped: set[int] | None = None) -> tuple[set[int], set[int]]:
    """(read, written) data-var ids of buffers with ``scope`` in ``s`` (pointers taken by
    ``tvm_access_ptr`` count by their access mask, when ``scoped`` is given only for the
    data vars it holds: the buffers of ``scope`` allocated in the kernel)."""
    r: set[int] = set()
    w: set[int] = set()

    def f(n: Any) -> None:
        if isinstance(n, E.BufferLoad) and n.buffer.scope == scope:
            r.add(id(n.buffer.data))
        elif isinstance(n, S.BufferStore) and n.buffer.scope == scope:
            w.add(id(n.buffer.data))
        elif isinstance(n, E.Call) and n.op == "tvm_access_ptr" and len(n.args) >= 2:
            v = n.args[1]
            if isinstance(v, E.Var) and (scoped is None or id(v) in scoped):
                # the access mask (1 read, 2 write; unknown: both)
                mask = E.const_value(n.args[4]) if len(n.args) >= 5 else None
                mask = mask if isinstance(mask, int) and mask in (1, 2, 3) else 3
                if mask & 1:
                    r.add(id(v))
                if mask & 2:
                    w.add(id(v))

    post_order_visit(s, f)
    return r, w


def _has_sync(s: Any) -> bool:
    found = []
    post_order_visit(s, lambda n: found.append(1) if isinstance(n, E.Call) and n.op == SYNC_OP
                     else None)
    return bool(found)


class _State:
    """Accesses since the last barrier: reads ``r``, writes ``w``, and ``dw``: the writes of a
    double buffer's next half (``double_buffer_write`` of the loop being analysed), which
    the reads of the current half in the same iteration do not conflict with."""

    __slots__ = ("r", "w", "dw")

    def __init__(self, r: set[int] | None = None, w: set[int] | None = None,
                 dw: set[int] | None = None):
        self.r = set(r or ())
        self.w = set(w or ())
        self.dw = set(dw or ())

    def copy(self) -> _State:
        return _State(self.r, self.w, self.dw)

    def clear(self) -> None:
        self.r.clear()
        self.w.clear()
        self.dw.clear()

    def conflicts(self, r: set[int], w: set[int]) -> bool:
        # read after write, write after read (write after write without a read between:
        # no thread depends on the order)
        return bool(r & self.w) or bool(w & self.r)


class _Syncer:
    def __init__(self, scope: str, thread_vars: set[int], scoped: set[int] | None = None):
        self.scope = scope
        self.tvars = thread_vars
        self.scoped = scoped
        self.loops: list[E.Var] = []  # the loops being analysed, innermost last

    def acc(self, s: Any) -> tuple[set[int], set[int]]:
        return _accesses(s, self.scope, self.scoped)

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
        r, w = self.acc(s)
        out: list[S.Stmt] = []
        if st.conflicts(r, w):
            out.append(storage_sync(self.scope))
            st.clear()
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
            st.clear()
            return [s]
        r, w = self.acc(s)
        if not r and not w:
            return [s]
        if isinstance(s, S.SeqStmt):
            return self.seq(list(s.seq), st)
        if (isinstance(s, S.AttrStmt) and s.attr_key == "double_buffer_write" and self.loops
                and uses_var(s.body, self.loops[-1])):
            # the next iteration's half of a double buffer (InjectDoubleBuffer's producer):
            # the current half's reads in this iteration do not conflict with it
            out: list[S.Stmt] = []
            if w & st.r:
                out.append(storage_sync(self.scope))
                st.clear()
            st.r |= r
            st.dw |= w
            return out + [s]
        if isinstance(s, S.IfThenElse):
            if self._divergent(s.condition):
                self._check_divergent(s, [s.then_case, s.else_case])
                return self.leaf(s, st)
            a = st.copy()
            then = self.body(s.then_case, a)
            b = st.copy()
            other = self.body(s.else_case, b) if s.else_case is not None else None
            st.r, st.w, st.dw = a.r | b.r, a.w | b.w, a.dw | b.dw
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
                er, ew = self.acc(e)
                r |= er
                w |= ew
        pre: list[S.Stmt] = []
        if st.conflicts(r, w):
            pre.append(storage_sync(self.scope))
            st.clear()
        return pre, r, w

    def body(self, s: S.Stmt, st: _State) -> S.Stmt:
        return S.seq(*self.stmt(s, st))

    def loop(self, s: S.For, st: _State) -> list[S.Stmt]:
        r, w = self.acc(s)
        pre: list[S.Stmt] = []
        if st.conflicts(r, w):  # the loop as a whole after the earlier accesses
            pre.append(storage_sync(self.scope))
            st.clear()
        inner = _State()
        self.loops.append(s.loop_var)
        try:
            body = self.body(s.body, inner)
        finally:
            self.loops.pop()
        # the next iteration's accesses before its first barrier against the end state (the
        # next half of a double buffer, written in this iteration, is read in the next)
        first = _State()
        self._first_accesses(body, first)
        if inner.conflicts(first.r, first.w) or first.r & inner.dw:
            body = S.seq(body, storage_sync(self.scope))
            inner = _State()
        if _has_sync(body):  # what precedes the loop is behind a barrier
            st.r, st.w = inner.r, inner.w | inner.dw
        else:
            st.r |= inner.r
            st.w |= inner.w | inner.dw
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
        r, w = self.acc(s)
        acc.r |= r
        acc.w |= w
        return False


def thread_sync_func(func: PrimFunc, scope: str = "shared") -> PrimFunc:
    """Barriers for ``scope`` in every kernel of ``func`` (see the module docstring)."""

    def kernel(k: S.AttrStmt) -> S.Stmt:
        tvars: set[int] = set()
        extents: list[Any] = []

        def thread_var(n: Any) -> None:
            if is_thread_extent(n) and thread_tag(n).startswith("threadIdx"):
                tvars.add(id(n.node.var))
                extents.append(E.const_value(n.value))

        post_order_visit(k, thread_var)
        if all(e == 1 for e in extents):  # one thread per block: no barrier orders anything
            return k
        node: Any = k
        heads = []
        while is_thread_extent(node) or isinstance(node, S.Allocate):
            heads.append(node)
            node = node.body
        scoped: set[int] = set()
        post_order_visit(k, lambda n: scoped.add(id(n.buffer.data)) if isinstance(n, S.Allocate)
                         and n.buffer.scope == scope else None)
        body = _Syncer(scope, tvars, scoped).body(node, _State())
        for h in reversed(heads):
            if isinstance(h, S.Allocate):
                body = S.Allocate(h.buffer, body, h.condition)
            else:
                body = S.AttrStmt(h.node, h.attr_key, h.value, body)
        return body

    body = KernelMapper(kernel).visit(func.body)
    return func if body is func.body else func.with_body(body)


def ThreadSync(storage_scope: str = "shared") -> PrimFuncPass:  # noqa: N802 - TVM's name
    if storage_scope != "shared":
        raise ValueError(f"ThreadSync: only the 'shared' scope is supported, got {storage_scope!r}")
    return PrimFuncPass.from_func(lambda f: thread_sync_func(f, storage_scope), "ThreadSync")
