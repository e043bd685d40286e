"""Software prefetch of a loop's streamed operands (``pragma_prefetch_stream``), LLVM only.

A schedule marks a serial loop with ``s[stage].pragma(axis, "prefetch_stream", nbytes)``. The
LLVM code generator then starts each iteration of that loop with ``llvm.prefetch`` (read, high
locality, data) of the addresses ``nbytes`` ahead of every contiguous vector load in the loop
body whose index advances with the loop (one prefetch per 64-byte line the load spans). Loads
that do not move with the loop (accumulators, a reused row) and scalar loads are left alone.
Other code generators ignore the pragma.

Why: a register tile that streams a large packed weight from memory (few rows, so few FMAs per
weight byte) waits on each line: the cores' stream prefetchers stop at every 4 KiB page, and
the out-of-order window holds only a few hundred bytes of the stream ahead. A dense of 32 rows
by a 20 MB weight (512 -> 10000) ran 0.70-0.75x the time with prefetches 4 KiB ahead (Intel
Xeon, Emerald Rapids class, one thread, 2026-11-30; bench/RESULTS.md).
"""

from __future__ import annotations

from typing import Any

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.functor import post_order_visit
from ..tir.transform.common import linear_form

__all__ = ["PRAGMA", "LINE_BYTES", "with_prefetches"]

PRAGMA = "pragma_prefetch_stream"
LINE_BYTES = 64


def _streamed_loads(body: S.Stmt, var: E.Var) -> list[E.BufferLoad]:
    """Contiguous vector loads in ``body`` whose first element moves forward with ``var``."""
    found: list[E.BufferLoad] = []

    def visit(n: Any) -> None:
        if not isinstance(n, E.BufferLoad) or len(n.indices) != 1:
            return
        idx = n.indices[0]
        if not isinstance(idx, E.Ramp) or not (isinstance(idx.stride, E.IntImm) and idx.stride.value == 1):
            return
        lin = linear_form(idx.base, var)
        if lin is not None and lin[0] > 0:
            found.append(n)

    post_order_visit(body, visit)
    return found


def with_prefetches(loop: S.For, nbytes: int) -> S.For:
    """``loop`` with prefetches ``nbytes`` ahead of its streamed loads at the top of its body
    (unchanged when it has none)."""
    loads = _streamed_loads(loop.body, loop.loop_var)
    calls: list[S.Stmt] = []
    seen: set[tuple[int, str]] = set()
    for ld in loads:
        idx = ld.indices[0]
        assert isinstance(idx, E.Ramp)
        esize = max(1, dt.bytes_of(ld.buffer.dtype))
        per_line = max(1, LINE_BYTES // esize)
        ahead = max(1, nbytes // esize)
        for j in range(0, idx.lanes, per_line):
            key = (id(ld.buffer.data), str(idx.base + (ahead + j)))
            if key in seen:
                continue
            seen.add(key)
            addr = E.Call("handle", "address_of", [E.BufferLoad(ld.buffer, [idx.base + (ahead + j)])])
            calls.append(S.Evaluate(E.Call("int32", "call_llvm_intrin", [
                E.StringImm("llvm.prefetch.p0"), addr, E.IntImm("int32", 0), E.IntImm("int32", 3),
                E.IntImm("int32", 1)])))
    if not calls:
        return loop
    return S.For(loop.loop_var, loop.min, loop.extent, loop.kind, S.seq(*calls, loop.body),
                 loop.thread_binding, loop.annotations)
