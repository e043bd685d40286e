"""Target-independent default schedules (TVM's ``topi.generic``): correct for every target,
with no loop transformation beyond inlining injective producers. Targets override them
(``topi.x86``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...te.schedule import producer_ops
from .. import tag

__all__ = ["schedule_injective", "schedule_elemwise", "schedule_broadcast", "schedule_reduce",
           "inline_injective", "as_outs"]


def as_outs(outs: Any) -> list[te.Tensor]:
    """A tensor or a sequence of tensors as a list, checked."""
    lst = [outs] if isinstance(outs, te.Tensor) else list(outs)
    for t in lst:
        if not isinstance(t, te.Tensor):
            raise TypeError(f"schedule: outs must be te.Tensors, got {type(t).__name__} {t!r}")
    return lst


def inline_injective(s: Any, outs: Sequence[te.Tensor]) -> None:
    """Inline every injective (elementwise/broadcast/injective-tagged) stage that is not an
    output into its consumers, as TVM's ``AutoInlineInjective``."""
    out_ops = {id(t.op) for t in outs}
    for op in producer_ops(outs):
        if isinstance(op, te.ComputeOp) and id(op) not in out_ops and tag.is_injective(op.tag) \
                and not op.reduce_axis:
            s[op].compute_inline()


def schedule_injective(outs: Any) -> Any:
    """Default schedule of injective outputs: producers inlined, loops left as they are."""
    outs = as_outs(outs)
    s = te.create_schedule([t.op for t in outs])
    inline_injective(s, outs)
    return s


schedule_elemwise = schedule_injective
schedule_broadcast = schedule_injective


def schedule_reduce(outs: Any) -> Any:
    """Default schedule of a reduction: injective producers inlined."""
    return schedule_injective(outs)
