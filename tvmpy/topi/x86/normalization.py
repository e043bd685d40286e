"""x86 schedules for batch_norm (elementwise: parallel outer loop, vectorized inner) and
layer_norm (mean and variance computed per row inside the row's parallel task), and the x86
layer_norm compute, which rounds as onnxruntime's CPU kernel does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...te import Tensor, compute, create_schedule, reduce_axis
from ...te import sum as te_sum
from ...tir.expr import const
from ...tir.op import sqrt
from ..nn import normalization as nn_norm
from .conv2d import _outputs
from .softmax import _const, schedule_row_stages

if TYPE_CHECKING:
    from ...te.schedule import Schedule

__all__ = ["layer_norm", "ORT_LANES", "schedule_batch_norm", "schedule_layer_norm",
           "schedule_instance_norm", "schedule_group_norm", "schedule_elemwise_simple",
           "schedule_lrn"]


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


# onnxruntime's x86 LayerNormalization sums the squared deviations in this many interleaved
# float32 partial sums (one AVX2 register), added pairwise at the end
ORT_LANES = 8


def layer_norm(data: Tensor, gamma: Tensor, beta: Tensor | None, axis: Any,
               epsilon: float = 1e-5) -> Tensor:
    """``topi.nn.layer_norm`` computed as onnxruntime's CPU kernel computes float32 rows over
    the last axis (its results bit for bit, so that a quantized model's ``DequantizeLinear ->
    LayerNormalization -> QuantizeLinear`` rounds to the same integers): the mean as the
    float64 sum of the row over its length, rounded to float32; the variance from the float32
    deviations ``d = x - mean``, their squares accumulated with FMA into ``ORT_LANES``
    interleaved partial sums (element ``i`` into sum ``i mod 8``) that are then added
    pairwise, divided by the length; ``inv = 1 / sqrt(var + eps)``; ``y = d * inv * gamma +
    beta`` (the last multiply-add fused). Other axes, dtypes and lengths that are not a
    multiple of ``ORT_LANES``: the generic compute."""
    nd = len(data.shape)
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    n = _const(data.shape[-1]) if nd else None
    if (data.dtype != "float32" or len(axes) != 1 or not isinstance(axes[0], int)
            or axes[0] % max(nd, 1) != nd - 1 or n is None or n % ORT_LANES or n < ORT_LANES
            or len(gamma.shape) != 1 or _const(gamma.shape[0]) != n
            or (beta is not None and (len(beta.shape) != 1 or _const(beta.shape[0]) != n))):
        return nn_norm.layer_norm(data, gamma, beta, axis, epsilon)
    rows = list(data.shape[:-1])
    k = reduce_axis((0, n), name="k")
    total = compute(rows, lambda *i: te_sum(data[(*i, k)].astype("float64"), axis=k),
                    name="T_layer_norm_sum", tag="layer_norm_sum")
    mean = compute(rows, lambda *i: (total[i] / const(float(n), "float64")).astype("float32"),
                   name="T_layer_norm_mean", tag="layer_norm_mean")
    j = reduce_axis((0, n // ORT_LANES), name="j")

    def fpart(*i: Any) -> Any:
        # acc = fma(d, d, acc) in float32 through LLVM's contraction of acc + d * d. The sum
        # starts from x - x (+0 for finite x) rather than a literal 0: LLVM folds 0 + d0 * d0 to
        # d0 * d0 and may then fuse the first two squares the other way round (d0 * d0 + round
        # (d1 * d1)); x - x cannot be folded (NaN), so each step has one multiply to fuse.
        x0 = data[(*i[:-1], i[-1])]
        d = data[(*i[:-1], j * ORT_LANES + i[-1])] - mean[i[:-1]]
        return te_sum(d * d, axis=j, init=x0 - x0)

    part = compute([*rows, ORT_LANES], fpart, name="T_layer_norm_lanes", tag="layer_norm_lanes")

    def finv(*i: Any) -> Any:
        p = [part[(*i, lane)] for lane in range(ORT_LANES)]
        while len(p) > 1:  # lanes l and l + half, as a vector register is folded in halves
            half = len(p) // 2
            p = [p[lane] + p[lane + half] for lane in range(half)]
        var = p[0] / const(float(n), "float32")
        return const(1.0, "float32") / sqrt(var + const(epsilon, "float32"))

    inv = compute(rows, finv, name="T_layer_norm_var", tag="layer_norm_var")

    def fout(*i: Any) -> Any:
        y = (data[i] - mean[i[:-1]]) * inv[i[:-1]] * gamma[i[-1]]
        return y + beta[i[-1]] if beta is not None else y

    return compute(data.shape, fout, name="T_layer_norm", tag="layer_norm",
                   attrs={"axes": (nd - 1,)})


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
    lanes = _stage(out, "layer_norm_lanes")
    if lanes is not None:  # the x86 (onnxruntime-exact) compute
        stages = [_stage(out, t) for t in ("layer_norm_sum", "layer_norm_mean")]
        schedule_row_stages(s, out, [len(out.shape) - 1],
                            [*stages, lanes, _stage(out, "layer_norm_var")], ordered=[lanes])
        lane = s[lanes].op.axis[-1]
        s[lanes].reorder(*s[lanes].op.reduce_axis, lane)  # the lanes one vector, summed in order
        s[lanes].vectorize(lane)
        return s
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


def _stage(out: Any, tag: str) -> Any:
    """The stage tagged ``tag`` among the producers of ``out`` (None when there is none)."""
    stack, seen = [out], set()
    while stack:
        t = stack.pop()
        if id(t.op) in seen:
            continue
        seen.add(id(t.op))
        if t.op.tag == tag:
            return t
        stack.extend(t.op.input_tensors)
    return None


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
