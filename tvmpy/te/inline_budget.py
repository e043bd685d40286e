"""Which inlined stages lowering computes into a buffer instead, so inlining stays linear.

:class:`~tvmpy.te.inline.InlineScope` shares an inlined value read several times at the *same*
indices (one ``Let``). A value read at *different* indices cannot be shared: each index
pattern is a separate copy of the stage's expression. A chain whose every stage reads the stage
before at two index patterns (a channel split whose halves are both used, a concat, a channel
shuffle: ShuffleNet; bilinear resize reads four) holds ``2**n`` copies of its first stage
after ``n`` stages: lowering never finishes.

:func:`materialize_blowups` counts, consumers first, how many copies of each inlined stage the
lowered code would hold (the sum over its consumers of the consumer's copies times the number of
distinct index patterns it reads the stage at). A stage whose count exceeds
:data:`MAX_COPIES` and whose own expression reads another inlined stage (so that copying it
repeats a growing expression, not one load) is computed at the root instead: written once into
a buffer of its own inside the same function, its consumers read the buffer. That resets the
counts of everything it reads, so the code grows linearly in the number of stages. The result
is the same values (an injective stage is legal at the root); only schedules with no thread
bindings (CPU) are changed: a GPU schedule's extra stage would need a thread binding of its own;
and a stage that reads a ``compute_at`` stage (a cached tile) stays inlined.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..ir import dtype as dt
from ..ir.node import HashMemo, structural_equal, structural_hash
from ..tir import expr as E
from ..tir.functor import Visitor
from .schedule import INLINE, SCOPE
from .tensor import ComputeOp

__all__ = ["MAX_COPIES", "materialize_blowups"]

# copies of one inlined expression beyond which it is computed into a buffer. Each copy is a
# recomputation of the stage (and of what it inlines) per element, against one store and one
# load when it is in a buffer; and the lowering passes walk every copy. 16 let a chain that
# doubles per stage grow 2**4 before each reset: a 200-stage channel-shuffle chain built in
# 22 s (CPU), 9 s with 4, run time unchanged; of the zoo only SSDlite's box decoding (copies
# of 8) is computed into buffers by it, same outputs and run time (bench/RESULTS.md, z-build).
MAX_COPIES = 4

_LOG = logging.getLogger("tvmpy.te")


class _Loads(Visitor):
    """Every ProducerLoad of an expression (inside Let values, branches and reductions)."""

    def __init__(self) -> None:
        self.loads: list[E.ProducerLoad] = []

    def visit_ProducerLoad(self, node: E.ProducerLoad) -> None:
        self.loads.append(node)
        for i in node.indices:
            self.visit(i)


def _patterns(st: Any, stage_of: Callable[[Any], Any]) -> dict[int, tuple[Any, int]]:
    """id(producer stage) -> (stage, number of distinct index tuples ``st`` reads it at)."""
    c = _Loads()
    for body in st.op.body:
        c.visit(body)
    seen: dict[int, list[tuple[int, tuple]]] = {}
    out: dict[int, tuple[Any, int]] = {}
    hashes = HashMemo(map_free_vars=False)
    for ld in c.loads:
        p = stage_of(ld.producer)
        idx = (ld.producer.value_index, tuple(ld.indices))
        h = structural_hash(idx, map_free_vars=False, memo=hashes)
        known = seen.setdefault(id(p), [])
        if any(h == h2 and structural_equal(idx, i2) for h2, i2 in known):
            continue
        known.append((h, idx))
        out[id(p)] = (p, len(known))
    return out


def _reads_attached(st: Any, stage_of: Callable[[Any], Any]) -> bool:
    """Whether ``st`` reads (itself or through inlined stages) a stage computed at a loop of
    another (``compute_at``: a cache_read tile): computed at the root, ``st`` would be outside
    that loop."""
    stack, seen = [st], set()
    while stack:
        s = stack.pop()
        for t in s.op.input_tensors:
            p = stage_of(t)
            if id(p) in seen:
                continue
            seen.add(id(p))
            if p.attach_type == SCOPE:
                return True
            if p.attach_type == INLINE:
                stack.append(p)
    return False


def _vectorize_innermost(st: Any) -> None:
    """Give a stage newly computed at the root the loops of a CPU injective schedule: its outer
    axes fused, its innermost axis vectorized when that axis is a constant no longer than one
    64-byte vector (the widest x86 register; a narrower target's codegen splits it; booleans
    count as bytes).

    Left as plain serial loops, each such stage's short innermost loop went to LLVM's loop
    vectorizer, which is super-linear in the loops of a function: a 200-stage shuffle chain (15
    stages per kernel) spent 3.6 s of its 8 s build in LLVM's O3, 0.8 s with this."""
    axes = list(st.op.axis)
    if not axes:
        return
    ext = axes[-1].dom.extent
    bits = dt.parse(st.op.output(0).dtype).bits
    if not isinstance(ext, E.IntImm) or not 1 < ext.value <= min(64, 512 // max(bits, 8)):
        return
    if len(axes) > 2:
        st.fuse(*axes[:-1])
    st.vectorize(axes[-1])


def _thread_bound(sch: Any) -> bool:
    return any(a.bind_thread is not None for st in sch.stages
               for a in st.iter_var_attrs.values())


def materialize_blowups(sch: Any, order: Sequence[Any],
                        stage_of: Callable[[Any], Any]) -> list[Any]:
    """Compute at the root the inlined stages of ``sch`` whose copies would multiply (see the
    module docstring); ``order`` is topological (producers first). Returns those stages."""
    if _thread_bound(sch):
        return []
    copies: dict[int, int] = {}
    reads: dict[int, dict[int, tuple[Any, int]]] = {}
    changed: list[Any] = []
    for st in reversed(order):  # consumers before producers
        if not isinstance(st.op, ComputeOp):
            continue
        own = reads[id(st)] = _patterns(st, stage_of)
        factor = 1
        if st.attach_type == INLINE:
            factor = copies.get(id(st), 0)
            reads_inlined = any(p.attach_type == INLINE for p, _ in own.values())
            if factor > MAX_COPIES and reads_inlined and not st.is_output \
                    and not _reads_attached(st, stage_of):
                st.compute_root()
                _vectorize_innermost(st)
                changed.append(st)
                factor = 1
        for p, n in own.values():
            if p.attach_type == INLINE:
                copies[id(p)] = copies.get(id(p), 0) + factor * n
    if changed:
        _LOG.debug("inlining would copy %s more than %d times: computed into buffers instead",
                   ", ".join(s.op.name for s in changed), MAX_COPIES)
    return changed
