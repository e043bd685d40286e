"""Helpers shared by the GPU AutoTVM templates: fallback tile sizes, cooperative fetching of
shared-memory tiles, the unroll knobs, and the stages of a fused operator group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...autotvm.space import OtherOptionEntity, SplitEntity
from ...te import thread_axis

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["const_int", "max_threads", "largest_divisor", "fallback_tile", "cooperative_fetch", "unroll_knobs",
           "apply_unroll", "output_stages"]

DEFAULT_MAX_THREADS = 256


def const_int(d: Any, what: str = "extent") -> int:
    """``d`` as a Python int; a clear error for symbolic extents (the templates tile constants)."""
    v = getattr(d, "value", d)
    if not isinstance(v, int):
        raise ValueError(f"GPU template: {what} {d} is not a constant (symbolic shapes are not "
                         "tunable; use the generic GPU schedule)")
    return int(v)


def max_threads() -> int:
    """Threads per block of the current target (``with Target(...)``), 256 without one."""
    from ...target import Target

    tgt = Target.current()
    n = getattr(tgt, "max_num_threads", None) if tgt is not None else None
    return int(n) if n else DEFAULT_MAX_THREADS


def largest_divisor(n: int, limit: int) -> int:
    """The largest divisor of ``n`` not above ``limit`` (at least 1)."""
    limit = max(1, min(n, limit))
    return max(d for d in range(1, limit + 1) if n % d == 0)


_largest_divisor = largest_divisor  # the name the templates import


def fallback_tile(extent: int, threads: int, inner: int, parts: int = 4) -> SplitEntity:
    """A split of ``extent`` into ``[blocks, (vthread,) threads, inner]`` for untuned workloads:
    ``inner`` (per-thread elements) the largest divisor of ``extent`` up to the bound, then the
    largest divisor of the rest up to ``threads``. Divisors only, so that every shape (primes
    included) gets exact tiles without guards."""
    i = _largest_divisor(extent, inner)
    t = _largest_divisor(extent // i, threads)
    return SplitEntity([-1, 1, t, i] if parts == 4 else [-1, t, i])


def cooperative_fetch(s: Schedule, stage_tensor: Tensor, threads: list[tuple[str, int]]) -> None:
    """Spread the copy into a shared tile over the block's threads: the tile's axes are fused
    and split by the thread extents (outermost tag first), each part bound to its thread axis
    (non-dividing extents leave guarded tails)."""
    st = s[stage_tensor]
    fused = st.fuse(*st.op.axis)
    for tag, n in threads:
        if n <= 1:
            continue
        t, fused = st.split(fused, nparts=n)
        st.bind(t, thread_axis(tag))


def unroll_knobs(cfg: Any, steps: tuple[int, ...] = (0, 512, 1500)) -> None:
    """TVM's ``auto_unroll_max_step`` and ``unroll_explicit`` knobs (fallback: 512, explicit)."""
    cfg.define_knob("auto_unroll_max_step", list(steps))
    cfg.define_knob("unroll_explicit", [0, 1])
    if cfg.is_fallback:
        cfg["auto_unroll_max_step"] = OtherOptionEntity(512 if 512 in steps else steps[-1])
        cfg["unroll_explicit"] = OtherOptionEntity(1)


def apply_unroll(cfg: Any, stage: Any, axis: Any) -> None:
    stage.pragma(axis, "auto_unroll_max_step", int(cfg["auto_unroll_max_step"].val))
    stage.pragma(axis, "unroll_explicit", int(cfg["unroll_explicit"].val))


def output_stages(s: Schedule, anchor: Tensor) -> tuple[Tensor, Tensor]:
    """``(output, local)`` for an anchor op (conv, dense...) possibly followed by fused
    elementwise stages: when the anchor is the output, a local cache_write of it; else the
    anchor itself becomes the local stage and the group's output is tiled."""
    if any(op is anchor.op for op in s.outputs):
        return anchor, s.cache_write(anchor, "local")
    s[anchor].set_scope("local")
    return s.outputs[0].output(0), anchor
