"""x86 schedules for batch_norm (elementwise: parallel outer loop, vectorized inner) and
layer_norm (mean and variance computed per row inside the row's parallel task)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...te import create_schedule
from .conv2d import _outputs
from .softmax import schedule_row_stages

if TYPE_CHECKING:
    from ...te.schedule import Schedule

__all__ = ["schedule_batch_norm", "schedule_layer_norm", "schedule_instance_norm",
           "schedule_group_norm", "schedule_elemwise_simple", "schedule_lrn"]


def schedule_elemwise_simple(s: Schedule, out: Any) -> None:
    """Fuse all but the innermost axis into one parallel loop; vectorize the innermost."""
    axes = list(s[out].op.axis)
    if len(axes) > 1:
        outer = s[out].fuse(*axes[:-1])
        s[out].parallel(outer)
    ext = out.shape[-1]
    ext = int(ext.value) if hasattr(ext, "value") else ext
    if isinstance(ext, int) and ext > 16:
        _, vi = s[out].split(axes[-1], factor=16)
        s[out].vectorize(vi)
    elif isinstance(ext, int):
        s[out].vectorize(axes[-1])


def schedule_batch_norm(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.batch_norm``'s output (pass ``[out]`` or its full list)."""
    outs = _outputs(outs)
    out = outs[0]
    s = create_schedule([out.op])
    schedule_elemwise_simple(s, out)
    return s


def schedule_layer_norm(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.layer_norm`` (also instance_norm, group_norm): one parallel
    task per normalized row when the normalized axes are the trailing ones (else the
    statistics are separate parallel stages)."""
    outs = _outputs(outs)
    out = outs[0]
    kind = out.op.tag
    if kind not in ("layer_norm", "instance_norm", "group_norm"):
        raise ValueError(f"schedule_layer_norm: expected a layer_norm/instance_norm/group_norm "
                         f"output, got {out.op.tag or out.op.name!r}")
    s = create_schedule([out.op])
    mean = next(t for t in out.op.input_tensors if t.op.tag == f"{kind}_mean")
    var = next(t for t in out.op.input_tensors if t.op.tag == f"{kind}_var")
    nd = len(out.shape)
    axes = sorted(int(a) for a in out.op.attrs["axes"])
    if axes and axes == list(range(nd - len(axes), nd)):
        schedule_row_stages(s, out, axes, [mean, var])
    else:
        for st in (mean, var):
            if st.shape:
                ax = s[st].op.axis
                s[st].parallel(s[st].fuse(*ax) if len(ax) > 1 else ax[0])
        schedule_elemwise_simple(s, out)
    return s


schedule_instance_norm = schedule_layer_norm
schedule_group_norm = schedule_layer_norm


def schedule_lrn(outs: Any) -> Schedule:
    """x86 schedule of ``topi.nn.lrn``: the squared-window sums are computed per row of the
    output's parallel loop (padding inlined)."""
    outs = _outputs(outs)
    out = outs[0]
    if out.op.tag != "lrn":
        raise ValueError(f"schedule_lrn: expected an lrn output, got {out.op.tag or out.op.name!r}")
    s = create_schedule([out.op])
    sq = next(t for t in out.op.input_tensors if t.op.tag == "lrn_sqr_sum")
    s[sq.op.input_tensors[0]].compute_inline()
    axes = list(s[out].op.axis)
    if len(axes) > 1:
        outer = s[out].fuse(*axes[:-1])
        s[out].parallel(outer)
        s[sq].compute_at(s[out], outer)
    return s
