"""InjectDoubleBuffer: ``double_buffer_scope`` buffers get two halves that alternate per iteration.

What it does (TVM's double buffer transform)
    A schedule's ``double_buffer`` marks the producer of a buffer ``B`` that is (re)filled in
    every iteration of the innermost enclosing loop ``for x in [m, m+e)``::

        for x:                                  allocate B[2*S]
            allocate B[S]                       with attr(B, "double_buffer_write"):
            with attr(B, "double_buffer_scope"):    P(m)               -> writes half 0
                P(x)      # fills B             for x:
            C(x)          # reads B                 if x + 1 < m + e:
                                                        P(x + 1)       -> writes half (x+1-m)%2
                                                    C(x)               -> reads half (x-m)%2

    The producer of the next iteration writes the other half while the consumer reads the
    current one (on hardware with asynchronous copies this overlaps memory and compute; on a
    CPU it is the same computation in another order). The allocation is hoisted out of the
    loop with twice its size.

    A buffer may have several producers in the loop: InjectVirtualThread (which runs first)
    replicates the scope of a tile with a virtual-thread dimension into one scope per virtual
    thread (TVM's 2x2 vthread GEMM tiles), each filling its part. They are taken together:
    each one fills its part of half 0 before the loop and its part of the next half in place.

When valid
    Checked; when a check fails, the attribute is dropped and the code left single-buffered:
    the scope must be directly in the loop's body (only SeqStmt / Allocate / attributes
    between them, no ``if`` or inner loop); the loop must be serial; the producer must use no
    variable defined inside the loop other than the loop variable, and read no buffer written
    elsewhere in the loop; the buffer is used only inside the loop; its size does not depend
    on the loop. With several scopes of one buffer, all of them must pass the checks in the
    same loop, or all stay single-buffered (double buffering only some of the writes would
    be a needless extra barrier per iteration at best). Runs on flattened IR.

Example
    before:  for k in range(0, 8): { A_sh = allocate((32,))
                 attr [A_sh] double_buffer_scope { A_sh[tx] = A[k * 32 + tx] }; C[tx] += A_sh[tx] }
    after:   A_sh = allocate((64,)); A_sh[tx] = A[tx]; for k in range(0, 8): {
                 if k + 1 < 8 { A_sh[(k + 1) % 2 * 32 + tx] = A[(k + 1) * 32 + tx] }
                 C[tx] += A_sh[k % 2 * 32 + tx] }
"""

from __future__ import annotations

import math
from typing import Any

from ...ir import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, Visitor, post_order_visit
from .common import VarCollector, add_offset, fold_mul, fresh_copy, substitute_buffers
from .function_pass import PrimFuncPass

__all__ = ["InjectDoubleBuffer", "inject_double_buffer_func"]


class _Finder(Visitor):
    """Each double_buffer_scope attribute with the statements enclosing it (outermost first)."""

    def __init__(self) -> None:
        self.path: list[S.Stmt] = []
        self.found: list[tuple[list[S.Stmt], S.AttrStmt]] = []

    def visit(self, node: Any) -> Any:
        if isinstance(node, S.Stmt):
            self.path.append(node)
            if isinstance(node, S.AttrStmt) and node.attr_key == "double_buffer_scope":
                self.found.append((self.path[:-1], node))
            super().visit(node)
            self.path.pop()
            return None
        return super().visit(node)


def _defined_vars(stmts: list[S.Stmt]) -> set[int]:
    out: set[int] = set()
    for s in stmts:
        if isinstance(s, S.For):
            out.add(id(s.loop_var))
        elif isinstance(s, S.LetStmt):
            out.add(id(s.var))
        elif isinstance(s, S.Allocate):
            out.add(id(s.buffer.data))
    return out


def _all_defined(stmt: S.Stmt) -> set[int]:
    out: set[int] = set()

    def f(n: Any) -> None:
        if isinstance(n, S.For):
            out.add(id(n.loop_var))
        elif isinstance(n, S.LetStmt):
            out.add(id(n.var))
        elif isinstance(n, S.Allocate):
            out.add(id(n.buffer.data))

    post_order_visit(stmt, f)
    return out


def _stored(stmt: Any) -> set[int]:
    out: set[int] = set()
    post_order_visit(stmt, lambda n: out.add(id(n.buffer.data))
                     if isinstance(n, S.BufferStore) else None)
    return out


def _loaded(stmt: Any) -> set[int]:
    out: set[int] = set()
    post_order_visit(stmt, lambda n: out.add(id(n.buffer.data))
                     if isinstance(n, E.BufferLoad) else None)
    return out


def _uses_data(stmt: Any, data: E.Var) -> bool:
    vc = VarCollector()
    vc.visit(stmt)
    return id(data) in vc.vars


class _Replace(Mutator):
    """Replace given statement objects (by identity)."""

    def __init__(self, table: dict[int, Any]):
        self.table = table

    def visit(self, node: Any) -> Any:
        if id(node) in self.table:
            r = self.table[id(node)]
            return r(node) if callable(r) else r
        return super().visit(node)


def _plan(root: S.Stmt, path: list[S.Stmt], attr: S.AttrStmt
          ) -> tuple[S.For, S.AttrStmt, S.Allocate, bool] | None:
    """(loop, attr, alloc, hoist) when double buffering the scope ``attr`` (enclosed by the
    statements ``path``, outermost first) is valid, else None."""
    data = attr.node
    if not isinstance(data, E.Var):
        return None
    loop_idx = max((i for i, s in enumerate(path) if isinstance(s, S.For)), default=-1)
    if loop_idx < 0:
        return None
    loop = path[loop_idx]
    assert isinstance(loop, S.For)  # loop_idx was chosen as a For's index
    if loop.kind not in (S.ForKind.SERIAL, S.ForKind.UNROLLED):
        return None
    between = path[loop_idx + 1:]
    if not all(isinstance(s, (S.SeqStmt, S.Allocate, S.AttrStmt)) for s in between):
        return None
    alloc = next((s for s in path if isinstance(s, S.Allocate) and s.buffer.data is data), None)
    if alloc is None or len(alloc.buffer.shape) != 1:
        return None
    hoist = path.index(alloc) > loop_idx
    size = alloc.buffer.shape[0]
    inner_defs = _all_defined(loop.body) | {id(loop.loop_var)}
    if hoist:
        inner_defs.discard(id(data))
        vc = VarCollector()
        vc.visit(size)
        if set(vc.vars) & inner_defs:
            return None
    # the producer may use the loop var and what is defined outside the loop
    producer = attr.body
    vc = VarCollector()
    vc.visit(producer)
    own = _all_defined(producer) | {id(loop.loop_var), id(data)}
    if (set(vc.vars) - own) & (inner_defs | _defined_vars(between)):
        return None
    # it must read nothing that the rest of the loop body writes
    others = _stored(_Replace({id(attr): S.no_op()}).visit(loop.body))
    if _loaded(producer) & (others - {id(data)}):
        return None
    # the buffer lives only inside the loop
    outside = _Replace({id(loop): S.no_op()}).visit(root)
    if _uses_data(outside, data):
        return None
    return loop, attr, alloc, hoist


def _plan_all(root: S.Stmt, found: list[tuple[list[S.Stmt], S.AttrStmt]]
              ) -> tuple[S.For, list[S.AttrStmt], S.Allocate, bool] | None:
    """The plan for all the ``double_buffer_scope`` attributes of one buffer (``found``: each
    with its enclosing statements): InjectVirtualThread replicates a copy whose buffer has a
    virtual-thread dimension into one attribute per virtual thread (as in TVM). Either every
    one of them is valid in the same loop (then all are double-buffered together) or none is
    (then all stay single-buffered): double buffering only some of the writes of a buffer
    would leave the others writing the half being read in the same iteration (a race)."""
    plans = []
    for path, attr in found:
        plan = _plan(root, path, attr)
        if plan is None:
            return None
        plans.append(plan)
    loop, _, alloc, hoist = plans[0]
    if any(p[0] is not loop or p[2] is not alloc for p in plans):
        return None
    return loop, [p[1] for p in plans], alloc, hoist


def _apply(root: S.Stmt, loop: S.For, attrs: list[S.AttrStmt], alloc: S.Allocate, hoist: bool
           ) -> S.Stmt:
    old = alloc.buffer
    data = old.data
    size = old.shape[0]
    nbytes = dt.bytes_of(old.dtype)
    if (isinstance(size, E.IntImm) and (size.value * nbytes) % _HALF_ALIGN
            and (old.scope or "").startswith("shared")):
        # the second half of a shared array starts as aligned as the first (vector copies,
        # wmma loads: 32 bytes)
        per = _HALF_ALIGN // math.gcd(_HALF_ALIGN, nbytes)
        size = E.const(-(-size.value // per) * per, size.dtype)
    nb = old.replace(shape=(fold_mul(size, E.const(2, size.dtype)),))
    x, m, e = loop.loop_var, loop.min, loop.extent
    two = E.const(2, x.dtype)
    one = E.const(1, x.dtype)

    def half(it: E.PrimExpr) -> E.PrimExpr:
        return fold_mul(E.cast((it - m) % two, size.dtype), size)

    def offset(stmt: S.Stmt, it: E.PrimExpr | None) -> S.Stmt:
        off = half(it) if it is not None else E.const(0, size.dtype)
        return substitute_buffers(stmt, {id(data): nb}, lambda _b, i: add_offset(i, off))

    nxt = x + one

    def producer_next(attr: S.AttrStmt) -> S.Stmt:
        p = offset(fresh_copy(attr.body, {x: nxt}), nxt)
        return S.IfThenElse(nxt < m + e, S.AttrStmt(data, "double_buffer_write", 1, p))

    # every copy of the buffer (one per virtual thread after InjectVirtualThread) fills its
    # part of half 0 before the loop and its part of the next half in place in the loop
    prologue = S.seq(*[offset(fresh_copy(a.body, {x: m}), None) for a in attrs])
    prologue = S.AttrStmt(data, "double_buffer_write", 1, prologue)
    markers = [S.Evaluate(E.StringImm(f"double_buffer_producer{i}")) for i in range(len(attrs))]
    table: dict[int, Any] = {id(a): mk for a, mk in zip(attrs, markers)}
    if hoist:
        table[id(alloc)] = lambda a: _Replace(table).visit(a.body)
    body = _Replace(table).visit(loop.body)
    body = offset(body, x)
    body = _Replace({id(mk): producer_next(a) for a, mk in zip(attrs, markers)}).visit(body)
    new_loop = loop.replace(body=body)
    if hoist:
        repl = S.Allocate(nb, S.seq(prologue, new_loop))
        return _Replace({id(loop): repl}).visit(root)
    table2: dict[int, Any] = {id(loop): S.seq(prologue, new_loop),
                              id(alloc): lambda a: S.Allocate(nb, _Replace(table2).visit(a.body))}
    return _Replace(table2).visit(root)


_HALF_ALIGN = 32  # bytes: where the second half of a double buffer starts


class _DropScopes(Mutator):
    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        if s.attr_key == "double_buffer_scope":
            return body
        return s if body is s.body else S.AttrStmt(s.node, s.attr_key, s.value, body)


def inject_double_buffer_func(func: PrimFunc) -> PrimFunc:
    """Double-buffer every valid ``double_buffer_scope`` (see the module docstring)."""
    body = func.body
    done: set[int] = set()
    while True:
        finder = _Finder()
        finder.visit(body)
        todo = [(p, a) for p, a in finder.found if id(a.node) not in done]
        if not todo:
            break
        node = todo[0][1].node
        done.add(id(node))
        same = [(p, a) for p, a in todo if a.node is node]
        plan = _plan_all(body, same)
        if plan is None:
            body = _Replace({id(a): a.body for _, a in same}).visit(body)
            continue
        body = _apply(body, *plan)
    body = _DropScopes().visit(body)
    return func if body is func.body else func.with_body(body)


def InjectDoubleBuffer() -> PrimFuncPass:
    """``tvm.tir.transform.InjectDoubleBuffer()``: double-buffer ``double_buffer_scope`` buffers, as a pass
    (the pass form of :func:`inject_double_buffer_func`)."""
    return PrimFuncPass.from_func(inject_double_buffer_func, "InjectDoubleBuffer")
