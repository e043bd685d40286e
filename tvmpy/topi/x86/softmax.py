"""x86 schedules for softmax / log_softmax: the passes over one row (max, exp-sum, normalize)
run inside one parallel task per row, so the row stays in cache between passes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...te import create_schedule
from ..generic import inline_injective
from .conv2d import _outputs
from .injective import vector_lanes

if TYPE_CHECKING:
    from ...te.schedule import Schedule

__all__ = ["schedule_softmax", "schedule_row_stages"]


def _const(x: Any) -> int | None:
    x = x.value if hasattr(x, "value") else x
    return x if isinstance(x, int) else None


def _vector_rfactor(s: Schedule, st: Any, lanes: int) -> Any:
    """Split a one-axis reduction stage by ``lanes`` and factor it (rfactor): the partial
    results of ``lanes`` independent accumulators form one vector, so the row is reduced at
    vector speed and only the final ``lanes`` values serially; a row that is not a multiple of
    ``lanes`` gets a shorter vector step for its tail (LoopPartition peels it). Returns the rf
    tensor (or None for a row shorter than two vectors)."""
    if len(s[st].op.reduce_axis) != 1:
        return None
    (k,) = s[st].op.reduce_axis
    ext = _const(k.dom.extent)
    if ext is not None and ext < 2 * lanes:
        return None  # (a symbolic extent is split with its tail guarded)
    _, ki = s[st].split(k, factor=lanes)
    rf = s.rfactor(st, ki, factor_axis=len(st.shape))
    s[rf].set_scope("local")
    *data, rv = s[rf].op.axis
    s[rf].reorder(*data, *s[rf].op.reduce_axis, rv)
    s[rf].vectorize(rv)
    return rf


def _rows_per_task(out: Any, axes: list[int]) -> int:
    """4 (or 2) rows per parallel task when the last kept axis divides by it and the rows are
    short enough for a few of them to stay in L1; else 1."""
    keep = [i for i in range(len(out.shape)) if i not in axes]
    if not keep:
        return 1
    ext = _const(out.shape[keep[-1]])
    row = 1
    for i in axes:
        e = _const(out.shape[i])
        if e is None:
            row = None
            break
        row *= e
    if ext is None:
        # a symbolic row count (a relay.Any sequence length): 4 rows per task, the last task's
        # missing rows guarded; the row length is unknown, so only when it is symbolic too
        # (attention scores: S x S) or short
        return 4 if row is None or row <= 1024 else 1
    if row is None or row > 1024:
        return 1
    # a count that 4 does not divide (ViT's 197 tokens, primes): 4 rows per task all the
    # same, the last task's missing rows guarded, as for a symbolic count
    return next((r for r in (4, 2) if ext % r == 0), 4 if ext >= 8 else 1)


def schedule_row_stages(s: Schedule, out: Any, axes: list[int], row_stages: list[Any],
                        ordered: list[Any] | tuple = ()) -> None:
    """Make the axes of ``out`` that are not in ``axes`` one fused parallel loop and compute
    ``row_stages`` (the per-row reductions and temporaries) inside it; the last reduced axis,
    when it is the innermost one, is vectorized, and so are one-axis row reductions (by
    rfactor; not those in ``ordered``, whose summation order is part of their result) and the
    element-wise row temporaries."""
    leaf = list(s[out].op.axis)
    lanes = vector_lanes(out.dtype)  # the target's vector width, not a fixed 16
    innermost = bool(axes) and axes[-1] == len(leaf) - 1
    rfs = []
    keep_order = {id(t.op) for t in ordered}
    if innermost:
        for st in row_stages:
            if s[st].op.reduce_axis and id(st.op) not in keep_order:
                rf = _vector_rfactor(s, st, lanes)
                if rf is not None:
                    rfs.append(rf)
    keep = [iv for i, iv in enumerate(leaf) if i not in axes]
    red = [leaf[i] for i in axes]
    s[out].reorder(*keep, *red)
    if not keep:
        return
    rows = _rows_per_task(out, axes) if innermost else 1
    if rows > 1:
        # several rows per task, their horizontal reductions interleaved (rows innermost):
        # the serial 16-step reductions of one row are latency-bound; four rows at a time hide
        # it (BERT softmax 4x128x128: 0.035 -> 0.014 ms, onnxruntime 0.012)
        ko, _ = s[out].split(keep[-1], factor=rows)
        keep = [*keep[:-1], ko]
    task = s[out].fuse(*keep) if len(keep) > 1 else keep[0]
    s[out].parallel(task)
    for st in [*rfs, *row_stages]:
        s[st].compute_at(s[out], task)
        s[st].set_scope("local")  # stack when small and constant, not a heap block per row
    if rows > 1:
        for st in row_stages:
            if s[st].op.reduce_axis:
                s[st].reorder(*s[st].op.reduce_axis, *s[st].op.axis)
        for rf in rfs:
            *ax, v = s[rf].op.axis
            s[rf].reorder(*s[rf].op.reduce_axis, *ax, v)
    for st in row_stages:
        if innermost and not s[st].op.reduce_axis and len(st.shape) == len(leaf):
            ext = _const(st.shape[-1])
            # a symbolic row (a relay.Any sequence length): split too; LoopPartition peels
            # the guarded tail, the main part is vectorized
            if ext is None or ext >= lanes:
                _, vi = s[st].split(s[st].op.axis[-1], factor=lanes)
                s[st].vectorize(vi)
    if innermost:
        ext = out.shape[-1]
        ext = int(ext.value) if hasattr(ext, "value") else ext
        if not isinstance(ext, int) or ext > lanes:
            _, vi = s[out].split(red[-1], factor=lanes)
            s[out].vectorize(vi)
        else:
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
    inline_injective(s, outs)  # a fused scale / mask add: read inside the row passes
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
