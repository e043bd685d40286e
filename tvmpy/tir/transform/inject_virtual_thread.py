"""InjectVirtualThread: ``virtual_thread`` attributes become interleaved copies of statements.

What it does (the paper's virtual-thread lowering, as TVM's VTInjector)
    ``with attr(vt, "virtual_thread", n): body`` means ``body`` runs once for each ``vt`` in
    ``[0, n)``, the runs being independent (a data-parallel axis). On a CPU we lower it to
    explicit serial code, interleaving the virtual threads as deep in the body as possible:

    - a buffer allocated inside the body whose content depends on ``vt`` (or that accumulates
      into itself) gets a virtual-thread dimension: its size ``S`` becomes ``n * S`` and each
      access ``B[i]`` becomes ``B[i + vt * S]``; the others (e.g. a shared-memory tile that every
      virtual thread would fetch identically) stay one copy, written once;
    - a statement that does not depend on ``vt`` (nor on those buffers, nor on lets that do) is
      kept once, when it is idempotent (it stores nothing that it also reads, calls nothing);
    - loops, ifs, lets and attributes whose own bounds/conditions do not depend on ``vt`` are
      kept and the injection goes inside them;
    - any other statement is replicated: ``n`` copies with ``vt`` substituted by ``0 .. n-1``
      (when ``n <= 16``), or a serial loop over ``vt`` (larger ``n``).

When valid
    On flattened IR (1-D buffers). Interleaving reorders statements of different virtual
    threads, which is what the ``vthread`` binding declares legal (the iterations are
    independent). ``n`` must be a constant.

Example
    before:  attr [vt] virtual_thread = 2 { for i in range(0, 4): C[vt * 4 + i] = A[vt * 4 + i] }
    after:   for i in range(0, 4):
                 C[i] = A[i]; C[i + 4] = A[i + 4]
"""

from __future__ import annotations

from typing import Any

from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, Visitor, post_order_visit, uses_var
from .common import add_offset, fold_mul, fresh_copy, substitute_buffers
from .function_pass import PrimFuncPass

__all__ = ["InjectVirtualThread", "inject_virtual_thread_func", "MAX_UNROLLED_VTHREADS"]

MAX_UNROLLED_VTHREADS = 16


def _allocations(stmt: S.Stmt) -> list[S.Allocate]:
    out: list[S.Allocate] = []
    post_order_visit(stmt, lambda n: out.append(n) if isinstance(n, S.Allocate) else None)
    return out


class _LetTaint(Visitor):
    """Grow the set of touched vars with let variables whose values use touched vars."""

    def __init__(self, touched: set[int]):
        self.touched = touched

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        if uses_var(s.value, lambda v: id(v) in self.touched):
            self.touched.add(id(s.var))
        self.generic_visit(s)


def _idempotent(s: S.Stmt) -> bool:
    """True when running ``s`` twice has the effect of running it once."""
    stored: set[int] = set()
    loaded: set[int] = set()
    calls = False

    def f(n: Any) -> None:
        nonlocal calls
        if isinstance(n, S.BufferStore):
            stored.add(id(n.buffer.data))
        elif isinstance(n, E.BufferLoad):
            loaded.add(id(n.buffer.data))
        elif isinstance(n, E.Call) and n.op in ("call_extern", "call_pure_extern",
                                                 "tvm_access_ptr", "address_of",
                                                 "tvm_call_packed"):
            calls = True

    post_order_visit(s, f)
    return not calls and not (stored & loaded)


class _Injector:
    def __init__(self, var: E.Var, n: int, touched: set[int]):
        self.var = var
        self.n = n
        self.touched = touched

    def touches(self, node: Any) -> bool:
        if uses_var(node, lambda v: id(v) in self.touched):
            return True
        found = False

        def f(x: Any) -> None:
            nonlocal found
            if isinstance(x, (E.BufferLoad, S.BufferStore)) and id(x.buffer.data) in self.touched:
                found = True

        post_order_visit(node, f)
        return found

    def replicate(self, s: S.Stmt) -> S.Stmt:
        if self.n <= MAX_UNROLLED_VTHREADS:
            return S.seq(*[fresh_copy(s, {self.var: E.const(i, self.var.dtype)})
                           for i in range(self.n)])
        nv = E.Var(self.var.name, self.var.dtype)
        return S.For(nv, 0, self.n, S.ForKind.SERIAL, fresh_copy(s, {self.var: nv}))

    def inject(self, s: S.Stmt) -> S.Stmt:
        if not self.touches(s) and _idempotent(s):
            return s
        if isinstance(s, S.SeqStmt):
            return S.seq(*[self.inject(x) for x in s.seq])
        if isinstance(s, S.For):
            if self.touches(s.min) or self.touches(s.extent):
                return self.replicate(s)
            return s.replace(body=self.inject(s.body))
        if isinstance(s, S.IfThenElse):
            if self.touches(s.condition):
                return self.replicate(s)
            els = self.inject(s.else_case) if s.else_case is not None else None
            return S.IfThenElse(s.condition, self.inject(s.then_case), els)
        if isinstance(s, S.LetStmt):
            if self.touches(s.value):
                return self.replicate(s)
            return S.LetStmt(s.var, s.value, self.inject(s.body))
        if isinstance(s, S.Allocate):
            return S.Allocate(s.buffer, self.inject(s.body), s.condition)
        if isinstance(s, S.AttrStmt):
            if self.touches(s.value) or (isinstance(s.node, E.Var) and self.touches(s.node)):
                return self.replicate(s)
            return S.AttrStmt(s.node, s.attr_key, s.value, self.inject(s.body))
        if isinstance(s, S.AssertStmt):
            if self.touches(s.condition):
                return self.replicate(s)
            return S.AssertStmt(s.condition, s.message, self.inject(s.body))
        return self.replicate(s)


def _private_buffers(body: S.Stmt, var: E.Var, allocs: list[S.Allocate]) -> set[int]:
    """Data vars of the buffers allocated in ``body`` that need one copy per virtual thread:
    those written with values or at indices that depend on ``var`` (through lets and other
    such buffers), and those whose stores read themselves, directly or through other buffers
    (an accumulator: shared between the virtual threads it would be updated ``n`` times).
    The others (a shared-memory tile fetched the same way by every virtual thread) hold the
    same data for all of them: one copy, written once (TVM's VTInjector shares them too)."""
    stores: list[tuple[int, set[int], list[Any]]] = []  # (buffer, buffers loaded, exprs)
    lets: list[tuple[int, Any]] = []

    def loads_of(node: Any) -> set[int]:
        out: set[int] = set()
        post_order_visit(node, lambda x: out.add(id(x.buffer.data))
                         if isinstance(x, E.BufferLoad) else None)
        return out

    def collect(node: Any) -> None:
        if isinstance(node, S.BufferStore):
            exprs = [node.value, *node.indices]
            stores.append((id(node.buffer.data), set().union(*[loads_of(e) for e in exprs]),
                           exprs))
        elif isinstance(node, S.LetStmt):
            lets.append((id(node.var), node.value))

    post_order_visit(body, collect)
    tainted: set[int] = {id(var)}

    def uses_tainted(e: Any) -> bool:
        return uses_var(e, lambda x: id(x) in tainted)

    changed = True
    while changed:  # vars and buffers that depend on the virtual thread, to a fixed point
        changed = False
        for v, value in lets:
            if v not in tainted and (uses_tainted(value) or loads_of(value) & tainted):
                tainted.add(v)
                changed = True
        for buf, deps, exprs in stores:
            if buf not in tainted and (deps & tainted or any(uses_tainted(e) for e in exprs)):
                tainted.add(buf)
                changed = True
    graph: dict[int, set[int]] = {}
    for buf, deps, _ in stores:
        graph.setdefault(buf, set()).update(deps)
    private: set[int] = set()
    for a in allocs:
        b = id(a.buffer.data)
        if b in tainted:
            private.add(b)
            continue
        seen, stack = set(), list(graph.get(b, ()))
        while stack:  # does b's content feed back into b?
            x = stack.pop()
            if x == b:
                private.add(b)
                break
            if x not in seen:
                seen.add(x)
                stack.extend(graph.get(x, ()))
    return private


def inject_vthread(body: S.Stmt, var: E.Var, n: int) -> S.Stmt:
    """Lower one virtual thread ``var`` of extent ``n`` over ``body``."""
    touched: set[int] = {id(var)}
    data_map = {}
    sizes: dict[int, E.PrimExpr] = {}
    allocs = _allocations(body)
    private = _private_buffers(body, var, allocs)
    for a in allocs:
        buf = a.buffer
        if id(buf.data) not in private:
            continue
        if len(buf.shape) != 1:
            raise ValueError(f"InjectVirtualThread needs flattened buffers; {buf.name} has shape "
                             f"{buf.shape} (run StorageFlatten first)")
        size = buf.shape[0]
        sizes[id(buf.data)] = size
        data_map[id(buf.data)] = buf.replace(shape=(fold_mul(size, E.const(n, size.dtype)),))
        touched.add(id(buf.data))

    def index_fn(old: Any, index: E.PrimExpr) -> E.PrimExpr:
        size = sizes[id(old.data)]
        return add_offset(index, fold_mul(E.cast(var, size.dtype), size))

    if data_map:
        body = substitute_buffers(body, data_map, index_fn)
    _LetTaint(touched).visit(body)
    return _Injector(var, n, touched).inject(body)


class _VThreadLowering(Mutator):
    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        if s.attr_key != "virtual_thread":
            return s if body is s.body else S.AttrStmt(s.node, s.attr_key, s.value, body)
        var = s.node.var if isinstance(s.node, E.IterVar) else s.node
        if not isinstance(var, E.Var):
            raise TypeError(f"virtual_thread attribute on {s.node!r}: expected an IterVar")
        if not isinstance(s.value, E.IntImm):
            raise ValueError(f"virtual thread {var.name} needs a constant extent, got {s.value}")
        return inject_vthread(body, var, s.value.value)


def inject_virtual_thread_func(func: PrimFunc) -> PrimFunc:
    """Lower every ``virtual_thread`` attribute of ``func`` (innermost first)."""
    body = _VThreadLowering().visit(func.body)
    return func if body is func.body else func.with_body(body)


def InjectVirtualThread() -> PrimFuncPass:
    """``tvm.tir.transform.InjectVirtualThread()``: interleave ``virtual_thread`` copies of statements, as a pass
    (the pass form of :func:`inject_virtual_thread_func`)."""
    return PrimFuncPass.from_func(inject_virtual_thread_func, "InjectVirtualThread")
