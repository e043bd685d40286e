"""x86 schedule of injective operators (elementwise, broadcast, transforms).

All injective producers are inlined; the output's loops are fused into one, split by the
target's vector lanes (the tail is guarded), the inner part vectorized and, when the tensor is
big enough to pay for the threads, the outer part run in parallel. When the innermost dimension
is itself a multiple of the lanes only the outer dimensions are fused, so that loads stay
contiguous vector loads (a split of the fully fused loop leaves div/mod in the indices).
"""

from __future__ import annotations

from typing import Any

from ... import te
from ...target import Target
from ...tir.expr import IntImm
from ..generic import as_outs, inline_injective

__all__ = ["schedule_injective", "schedule_injective_from_existing", "schedule_elemwise",
           "schedule_broadcast", "schedule_concatenate", "vector_lanes"]

# below this many output elements a parallel region costs more than it saves
PARALLEL_MIN_ELEMENTS = 1 << 14
MAX_LANES = 32


def vector_lanes(dtype: str) -> int:
    """Vector lanes of ``dtype`` on the current target (host "llvm" when none is set)."""
    tgt = Target.current() or Target("llvm")
    bits_dtype = "int8" if dtype == "bool" else dtype
    return max(1, min(MAX_LANES, tgt.vector_lanes(bits_dtype)))


def _num_cores() -> int:
    tgt = Target.current() or Target("llvm")
    return tgt.num_cores


def _const_size(shape: Any) -> int | None:
    n = 1
    for s in shape:
        if not isinstance(s, IntImm):
            return None
        n *= int(s.value)
    return n


def schedule_injective_from_existing(sch: Any, out: te.Tensor) -> Any:
    """Fuse, vectorize and parallelize the loops of ``out``'s stage in ``sch``."""
    st = sch[out.op]
    axes = list(st.op.axis)
    if not axes:
        return sch
    lanes = vector_lanes(out.dtype)
    size = _const_size(out.shape)
    if size == 0:
        return sch
    big = (size is None or size >= PARALLEL_MIN_ELEMENTS) and _num_cores() > 1
    last = axes[-1].dom.extent
    if isinstance(last, IntImm) and last.value % lanes == 0 and lanes > 1:
        outer, inner = st.split(axes[-1], lanes)
        fused = st.fuse(*axes[:-1], outer) if len(axes) > 1 else outer
        st.vectorize(inner)
        if big:
            st.parallel(fused)
        return sch
    fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    if size is not None and size < lanes:
        return sch
    if lanes > 1:
        outer, inner = st.split(fused, lanes)
        st.vectorize(inner)
    else:
        outer = fused
    if big:
        st.parallel(outer)
    return sch


def schedule_injective(outs: Any) -> Any:
    """Schedule of injective outputs for x86 (see the module docstring)."""
    outs = as_outs(outs)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    for t in outs:
        if isinstance(t.op, te.ComputeOp):
            schedule_injective_from_existing(s, t)
    return s


schedule_elemwise = schedule_injective
schedule_broadcast = schedule_injective
schedule_concatenate = schedule_injective
