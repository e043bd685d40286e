"""x86 schedules for softmax / log_softmax: the passes over one row (max, exp-sum, normalize)
run inside one parallel task per row, so the row stays in cache between passes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...te import create_schedule
from .conv2d import _outputs

if TYPE_CHECKING:
    from ...te.schedule import Schedule

__all__ = ["schedule_softmax", "schedule_row_stages"]


def schedule_row_stages(s: Schedule, out: Any, axes: list[int], row_stages: list[Any]) -> None:
    """Make the axes of ``out`` that are not in ``axes`` one fused parallel loop and compute
    ``row_stages`` (the per-row reductions and temporaries) inside it; the last reduced axis,
    when it is the innermost one, is vectorized."""
    leaf = list(s[out].op.axis)
    keep = [iv for i, iv in enumerate(leaf) if i not in axes]
    red = [leaf[i] for i in axes]
    s[out].reorder(*keep, *red)
    if not keep:
        return
    task = s[out].fuse(*keep) if len(keep) > 1 else keep[0]
    s[out].parallel(task)
    for st in row_stages:
        s[st].compute_at(s[out], task)
    if axes and axes[-1] == len(leaf) - 1:
        ext = out.shape[-1]
        ext = int(ext.value) if hasattr(ext, "value") else ext
        if isinstance(ext, int) and ext > 16:
            _, vi = s[out].split(red[-1], factor=16)
            s[out].vectorize(vi)
        elif isinstance(ext, int):
            s[out].vectorize(red[-1])


def schedule_softmax(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.softmax`` / ``log_softmax``."""
    outs = _outputs(outs)
    s = create_schedule([o.op for o in outs])
    out = outs[0]
    if out.op.tag not in ("softmax_output", "log_softmax_output"):
        raise ValueError(f"schedule_softmax: expected a softmax or log_softmax output, got a "
                         f"{out.op.tag or out.op.name!r} stage")
    ax = int(out.op.attrs["axis"])
    stages: list[Any] = []
    seen: set[int] = set()

    def visit(t: Any) -> None:
        for u in t.op.input_tensors:
            if u.op.tag.startswith("softmax_") and id(u.op) not in seen:
                seen.add(id(u.op))
                visit(u)
                stages.append(u)

    visit(out)
    schedule_row_stages(s, out, [ax], stages)
    return s
