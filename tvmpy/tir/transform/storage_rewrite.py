"""StorageRewrite: intermediate buffers whose lifetimes do not overlap share one allocation.

What it does
    1. Linearize the body: every statement gets a position in execution order (a loop's body
       once). The *lifetime* of an allocated buffer is the interval of positions of its uses
       (loads, stores, and any other use of its data Var such as access pointers). A use inside
       a loop (or a thread / vthread scope: its iterations run at once) that does not also
       enclose the buffer's ``Allocate`` extends the lifetime over the whole loop, since the
       loop repeats (a buffer allocated inside a loop starts afresh each
       iteration, so its lifetime stays inside one iteration).
    2. Plan: buffers that can be planned (constant size, not inside a parallel loop or a
       thread/vthread scope) are assigned, in order of their first use, to *slots*: a buffer
       reuses a slot of the same scope and dtype whose current users' lifetimes all end before
       it starts (best fit by size); the slot's size is the largest of its users.
    3. Rewrite: each slot with two or more users becomes one ``Allocate`` at the top of the
       function; the users' allocations are removed and their accesses renamed to the slot.
       Slots with one user are left where they were. ``DEBUG>=1`` prints the bytes saved.

When valid
    On flattened IR (1-D buffers). Lifetimes that overlap are never merged (two buffers in one
    slot have disjoint closed intervals). A value read in an iteration before being written in
    it would be undefined in the original too (fresh allocations are uninitialized).

Example
    before:  T1 = allocate((64,)); T1[i] = A[i] * 2f; B[i] = T1[i] + 1f
             T2 = allocate((64,)); T2[i] = B[i] * 3f; C[i] = T2[i] - 1f
    after:   T1 = allocate((64,)) at the top; T2's uses renamed to T1, its allocation removed
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import Mutator, Visitor
from .common import substitute_buffers
from .function_pass import PrimFuncPass

__all__ = ["StorageRewrite", "storage_rewrite_func", "plan_memory", "Lifetime"]


@dataclass
class Lifetime:
    buffer: Buffer
    alloc: S.Allocate
    loops: frozenset  # ids of the loops enclosing the allocation
    plannable: bool
    start: int = -1
    end: int = -1
    uses: list = field(default_factory=list)  # (position, loop-id path)

    @property
    def size(self) -> int:
        extent = self.buffer.shape[0]
        assert isinstance(extent, E.IntImm), "only plannable (constant 1-D) buffers have a size"
        return extent.value


class _Linearizer(Visitor):
    def __init__(self) -> None:
        self.pos = 0
        self.loop_path: list[int] = []  # ids of enclosing loops, outermost first
        self.loop_span: dict[int, list[int]] = {}
        self.unsafe_depth = 0  # inside parallel loops / thread scopes
        self.life: dict[int, Lifetime] = {}

    def _tick(self) -> None:
        self.pos += 1

    def visit_Var(self, v: E.Var) -> None:
        lt = self.life.get(id(v))
        if lt is not None:
            lt.uses.append((self.pos, tuple(self.loop_path)))

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        self.visit_Var(e.buffer.data)
        self.generic_visit(e)

    def visit_BufferStore(self, s: S.BufferStore) -> None:
        self._tick()
        self.visit_Var(s.buffer.data)
        self.generic_visit(s)

    def visit_Stmt(self, s: S.Stmt) -> None:
        self._tick()
        self.generic_visit(s)

    def visit_For(self, f: S.For) -> None:
        self._tick()
        self.visit(f.min)
        self.visit(f.extent)
        key = id(f)
        self.loop_span[key] = [self.pos, self.pos]
        self.loop_path.append(key)
        unsafe = f.kind == S.ForKind.PARALLEL or f.kind == S.ForKind.THREAD_BINDING
        self.unsafe_depth += unsafe
        self.visit(f.body)
        self.unsafe_depth -= unsafe
        self.loop_path.pop()
        self._tick()
        self.loop_span[key][1] = self.pos

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        self._tick()
        if isinstance(s.node, E.Var):
            self.visit_Var(s.node)
        unsafe = s.attr_key in ("thread_extent", "virtual_thread")
        self.unsafe_depth += unsafe
        self.visit(s.value)
        if unsafe:
            # a thread scope is a loop whose iterations run at once: a buffer allocated outside
            # it and used inside lives over all of it (a kernel reading V and writing M may not
            # put M in V's storage: other threads still read V)
            key = id(s)
            self.loop_span[key] = [self.pos, self.pos]
            self.loop_path.append(key)
            self.visit(s.body)
            self.loop_path.pop()
            self._tick()
            self.loop_span[key][1] = self.pos
        else:
            self.visit(s.body)
        self.unsafe_depth -= unsafe

    def visit_Allocate(self, s: S.Allocate) -> None:
        self._tick()
        b = s.buffer
        # tensor-core fragments (scope wmma.*) are register tiles addressed by fragment
        # index, never merged or renamed
        plannable = (self.unsafe_depth == 0 and len(b.shape) == 1
                     and isinstance(b.shape[0], E.IntImm)
                     and not (b.scope or "").startswith("wmma."))
        lt = Lifetime(b, s, frozenset(self.loop_path), plannable)
        self.life[id(b.data)] = lt
        self.visit(s.body)
        if not lt.uses:  # never used: it still exists, at its allocation
            lt.uses.append((self.pos, tuple(self.loop_path)))

    def finish(self) -> list[Lifetime]:
        out = []
        for lt in self.life.values():
            spans: list[tuple[int, int]] = []
            for pos, path in lt.uses:  # never empty: an unused allocation is used where it is
                outer = [k for k in path if k not in lt.loops]
                a, b = self.loop_span[outer[0]] if outer else (pos, pos)
                spans.append((a, b))
            lt.start = min(a for a, _ in spans)
            lt.end = max(b for _, b in spans)
            out.append(lt)
        return out


def plan_memory(body: S.Stmt) -> list[list[Lifetime]]:
    """The slots: groups of buffers (with lifetimes) that share one allocation."""
    lin = _Linearizer()
    lin.visit(body)
    lives = sorted((lt for lt in lin.finish() if lt.plannable), key=lambda lt: (lt.start, lt.end))
    slots: list[list[Lifetime]] = []
    for lt in lives:
        best = None
        for slot in slots:
            head = slot[0].buffer
            if head.scope != lt.buffer.scope or head.dtype != lt.buffer.dtype:
                continue
            if max(u.end for u in slot) >= lt.start:
                continue
            size = max(u.size for u in slot)
            key = (size < lt.size, abs(size - lt.size))
            if best is None or key < best[0]:
                best = (key, slot)
        if best is None:
            slots.append([lt])
        else:
            best[1].append(lt)
    return slots


class _RemoveAllocs(Mutator):
    def __init__(self, ids: set[int]):
        self.ids = ids

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        body = self.visit(s.body)
        if id(s.buffer.data) in self.ids:
            return body
        return s if body is s.body else S.Allocate(s.buffer, body, s.condition)


def storage_rewrite_func(func: PrimFunc) -> PrimFunc:
    """Share allocations between buffers with disjoint lifetimes (see the module docstring)."""
    from ... import config

    slots = [s for s in plan_memory(func.body) if len(s) > 1]
    if not slots:
        return func
    data_map: dict[int, Buffer] = {}
    new_allocs: list[Buffer] = []
    saved = 0
    for slot in slots:
        head = slot[0].buffer
        size = max(u.size for u in slot)
        nb = Buffer(E.Var(head.name, "handle"), head.dtype, (E.const(size, "int32"),), (), 0,
                    head.name, head.scope, head.data_alignment, 1)
        new_allocs.append(nb)
        for u in slot:
            data_map[id(u.buffer.data)] = nb
        saved += (sum(u.size for u in slot) - size) * dt.bytes_of(head.dtype)
    body = _RemoveAllocs(set(data_map)).visit(func.body)
    body = substitute_buffers(body, data_map)
    for nb in reversed(new_allocs):
        body = S.Allocate(nb, body)
    if config.get("DEBUG") >= 1:
        names = "; ".join(", ".join(u.buffer.name for u in s) for s in slots)
        print(f"[StorageRewrite] {func.name}: shared slots [{names}], saved {saved} bytes")
    return func.with_body(body)


def StorageRewrite() -> PrimFuncPass:
    """``tvm.tir.transform.StorageRewrite()``: share one allocation among buffers whose lifetimes do not overlap, as a pass
    (the pass form of :func:`storage_rewrite_func`)."""
    return PrimFuncPass.from_func(storage_rewrite_func, "StorageRewrite")
