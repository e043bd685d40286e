"""InjectPrefetch: software prefetches of the streamed vector loads of a loop marked by the
schedule with ``pragma(axis, "prefetch", distance)``.

What it does
    For a loop wrapped in ``AttrStmt(loop_var, "pragma_prefetch", distance)`` (``distance`` in
    bytes, > 0), every distinct contiguous vector load (``buf[ramp(base, 1, lanes)]``) of a
    buffer the function receives as an argument, found in the loop's body, gets a
    ``prefetch(address_of(buf[base + distance / elem_bytes]), 0, 3, 1)`` (a read into all cache
    levels: ``llvm.prefetch``; one per 64-byte line the load spans) at the top of the body; the
    pragma is dropped. Loops not marked are left alone, and so is a marked loop with no such
    load. A marked loop that LoopPartition split into a sequence of loops gets the prefetches in
    each of them.

When valid
    Always: a prefetch has no effect on values, and one past the end of a buffer does not fault
    (x86's ``prefetcht0``; LLVM drops it on targets without prefetch instructions; the LLVM
    backend computes its address without ``inbounds``). It exists
    for loops whose vector loads stream from memory faster than the core's out-of-order window
    can keep enough misses in flight (a register tile that uses each loaded weight vector for
    many FMAs: few loads per window).

Example
    before:  attr(ici, "pragma_prefetch", 1024): for ici in range(0, 16):
                 acc[ramp(0, 1, 16)] += broadcast(x[ici]) * w[ramp(k * 256 + ici * 16, 1, 16)]
    after:   for ici in range(0, 16):
                 prefetch(address_of(w[k * 256 + ici * 16 + 256]), 0, 3, 1)
                 acc[ramp(0, 1, 16)] += broadcast(x[ici]) * w[ramp(k * 256 + ici * 16, 1, 16)]
"""

from __future__ import annotations

from typing import Any

from ...ir import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, collect_vars, post_order_visit, substitute
from .function_pass import PrimFuncPass

__all__ = ["InjectPrefetch", "inject_prefetch_func", "PRAGMA"]

PRAGMA = "pragma_prefetch"
LINE_BYTES = 64
"""The cache line: a vector load wider than one gets a prefetch per line."""


MAX_COPIES = 8
"""Most prefetches one load gets for the iterations of the loops inside the marked one that
its index depends on (an unrolled tile of channel blocks: one stream per block)."""


def _stream_addresses(body: S.Stmt, params: set[int]) -> list[tuple[Any, E.PrimExpr, int]]:
    """``(buffer, base index, lanes)`` of the distinct contiguous vector loads of argument buffers in
    ``body``, the loop variables of loops inside ``body`` replaced by each of their values
    (loops of constant bounds, at most :data:`MAX_COPIES` combinations; a load depending on
    other inner variables is skipped)."""
    inner: dict[int, S.For] = {}
    lets: set[int] = set()

    def defs(n: object) -> None:
        if isinstance(n, S.For):
            inner[id(n.loop_var)] = n
        elif isinstance(n, S.LetStmt):
            lets.add(id(n.var))

    post_order_visit(body, defs)
    found: dict[tuple[int, str], tuple[Any, E.PrimExpr, int]] = {}

    def f(n: object) -> None:
        if not isinstance(n, E.BufferLoad) or id(n.buffer.data) not in params:
            return
        if len(n.indices) != 1 or not isinstance(n.indices[0], E.Ramp):
            return
        r = n.indices[0]
        if not isinstance(r.stride, E.IntImm) or r.stride.value != 1:
            return
        used = {id(v): v for v in collect_vars(r.base)}
        if any(k in lets for k in used):
            return
        loops = [inner[k] for k in used if k in inner]
        combos: list[dict] = [{}]
        for lp in loops:
            if not isinstance(lp.min, E.IntImm) or not isinstance(lp.extent, E.IntImm):
                return
            combos = [{**c, lp.loop_var: lp.min.value + i} for c in combos
                      for i in range(lp.extent.value)]
            if len(combos) > MAX_COPIES:
                return
        for c in combos:
            base = substitute(r.base, c) if c else r.base
            found.setdefault((id(n.buffer.data), str(base)), (n.buffer, base, r.lanes))

    post_order_visit(body, f)
    return list(found.values())


class _Injector(Mutator):
    def __init__(self, params: set[int]) -> None:
        self.params = params

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        body = self.visit(s.body)
        if s.attr_key != PRAGMA:
            return s if body is s.body else S.AttrStmt(s.node, s.attr_key, s.value, body)
        dist = int(getattr(s.value, "value", 0))
        return self._inject(body, dist) if dist > 0 else body

    def _inject(self, stmt: S.Stmt, dist: int) -> S.Stmt:
        """``stmt`` (the marked loop, or the pieces LoopPartition split it into) with the
        prefetches at the top of each loop's body."""
        if isinstance(stmt, S.SeqStmt):
            return S.seq(*(self._inject(x, dist) for x in stmt.seq))
        if not isinstance(stmt, S.For):
            return stmt
        pre: list[S.Stmt] = []
        for buf, base, lanes in _stream_addresses(stmt.body, self.params):
            nbytes = max(1, dt.bits_of(dt.element_of(buf.dtype)) // 8)
            per_line = max(1, LINE_BYTES // nbytes)
            for line in range(0, lanes, per_line):  # (a load spanning several lines: each)
                ahead = E.BufferLoad(buf, [base + (dist // nbytes + line)])
                addr = E.Call("handle", "address_of", [ahead])
                pre.append(S.Evaluate(E.Call("int32", "prefetch", [addr, 0, 3, 1])))
        if not pre:
            return stmt
        return S.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, S.seq(*pre, stmt.body),
                     stmt.thread_binding, stmt.annotations)


def inject_prefetch_func(func: PrimFunc) -> PrimFunc:
    """The function-level form of :func:`InjectPrefetch`."""
    params = {id(b.data) for b in func.buffer_map.values()}
    params |= {id(p) for p in func.params}
    body = _Injector(params).visit(func.body)
    return func if body is func.body else func.with_body(body)


def InjectPrefetch() -> PrimFuncPass:  # noqa: N802  (TVM's pass-factory naming)
    """Software prefetches for loops marked ``pragma_prefetch`` (see the module docstring)."""
    return PrimFuncPass.from_func(inject_prefetch_func, "InjectPrefetch")
