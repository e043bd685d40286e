"""ConvTransposeToConv: a transposed 2-D convolution as ``s_h * s_w`` ordinary convolutions of
the un-dilated input (one per output stride phase), interleaved by one injective step.

What it does
``nn.conv2d_transpose`` computed directly convolves the input dilated by the stride (zeros
between its elements) with the flipped kernel: ``s_h * s_w`` times the arithmetic, three
quarters of it on zeros at stride 2, and a kernel of its own with no tuned schedule (a
k4 s2 256 -> 128 layer ran at 3.3x onnxruntime's time). Output row ``o = s*q + r`` only meets
the kernel taps ``k`` with ``k*d = r + pad (mod s)`` (``d`` the dilation), each at a fixed input
offset: phase ``r`` is a plain correlation of the input with those taps (evenly spaced: a
smaller kernel, dilation ``d / gcd(d, s)``). So each phase becomes an ``nn.conv2d`` (groups kept)
that takes the x86 NCHWc path of AlterOpLayout like any convolution, and the phases are
interleaved and cropped to the output by ``nn.stride_interleave``, an injective operator that
fuses, with the bias, the folded BatchNorm and the activation that follow, into one kernel
(AlterOpLayout keeps it in the convolutions' NCHW{c}c layout: whole vectors of channels).
Each phase's window of the input is its convolution's own (asymmetric) padding, which the NCHWc
convolution computes inside its kernel (inlined bounds tests, or a padded copy in the kernel
where its weights stream from beyond L2): no ``nn.pad`` or ``strided_slice`` kernel copies the
input; a ``strided_slice`` crops it only where a phase reads a strict sub-range of it (padding
beyond the kernel's reach). The phases of one layer are then different workloads (k4 s2 p1:
paddings (1, 0) and (0, 1) per axis: four kernels to compile, four tuning tasks).
The PassContext option ``"relay.ConvTransposeToConv.shared_padding"`` (:data:`SHARED_PADDING_KEY`,
default False) selects the earlier form (the input padded once, each phase a same-size
window of it, one compiled convolution per layer), which paid a pad and ``s_h * s_w`` window
copies per layer: DCGAN's generator 38 kernels against 22, its data movement 0.34 ms against
0.09 at 1 thread on an Intel Xeon (bench/RESULTS.md, session 5). Stride 1 is a single
convolution with no interleave; a 1x1 input (a generator's first layer) is one ``nn.dense``.

When valid
Any weight (the weight rearrangement is ``reshape``/``transpose``/``take`` of it,
folded at compile time for a constant: here when it already is one, else by FoldConstant); needs
NCHW/IOHW and static channel and spatial extents (the batch may be symbolic); other calls are
left as they are. Runs at every opt_level (like SimplifyInference): it only removes arithmetic.

Example
    before:  nn.conv2d_transpose(%x, %W, strides=[2, 2], padding=[1, 1, 1, 1], kernel_size=[4, 4])
    after:   %0 = nn.conv2d(%x, %W00, padding=[1, 1, 0, 0], kernel_size=[2, 2]);  %1 = nn.conv2d(
             %x, %W01, padding=[1, 0, 0, 1], kernel_size=[2, 2]);  ... (4 phases);
             nn.stride_interleave((%0, %1, %2, %3), strides=[2, 2], out_size=[8, 8])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...transform import PassContext
from ..expr import Call, Constant, RelayExpr, const
from ..op import nn as _nn
from ..op import transform as _tr
from ..op.registry import Op
from ..ty import TensorType
from ..visitor import ExprMutator
from .pass_infra import FunctionPass

__all__ = ["ConvTransposeToConv", "phase_plan", "Phase"]

SHARED_PADDING_KEY = "relay.ConvTransposeToConv.shared_padding"
"""The PassContext config key (transform/context.py ``KNOWN_CONFIG``). True: where the phases
along an axis have equal tap counts (k4 s2: 2 each), pad the input once (``nn.pad``) and give
each phase a same-size window of it (``strided_slice``), so that a layer's phases are one
compiled convolution (one tuning task of weight ``s_h * s_w``), at the cost of a pad and a
window copy per phase at run time. False (the default): each phase's window is its
convolution's own padding (no copies; one workload per distinct padding)."""


@dataclass(frozen=True)
class Phase:
    """One output phase along one axis: the kernel taps (in correlation order), the dilation
    between them, the input crop ``[begin, end)`` and the zero padding (before, after)."""

    taps: tuple[int, ...]
    dilation: int
    begin: int
    end: int
    pad: tuple[int, int]


def phase_plan(size: int, kernel: int, stride: int, dilation: int, pad_before: int,
               out_size: int) -> tuple[int, list[Phase | None]]:
    """``(q, phases)`` along one axis of a transposed convolution of an input of ``size``:
    output element ``o = stride * j + r`` (``j < q = ceil(out_size / stride)``) is element ``j``
    of the correlation ``phases[r]`` (None: no tap reaches phase ``r``, it is zero)."""
    q = -(-out_size // stride)
    phases: list[Phase | None] = []
    for r in range(stride):
        # out[s*j + r] = sum_k x[j + e_k] w[k] over the taps with k*d = r + pad (mod s)
        taps = [k for k in range(kernel) if (r + pad_before - k * dilation) % stride == 0]
        offs = {k: (r + pad_before - k * dilation) // stride for k in taps}
        taps.sort(key=lambda k: offs[k])
        if not taps:
            phases.append(None)
            continue
        e_min, e_max = offs[taps[0]], offs[taps[-1]]
        begin, end = max(0, e_min), min(size, q - 1 + e_max + 1)
        if end <= begin:  # every tap reads outside the input
            phases.append(None)
            continue
        step = dilation // math.gcd(dilation, stride)
        lo, hi = -e_min, q - size + e_max  # padding of the whole input (negative: a crop)
        phases.append(Phase(tuple(taps), step, begin, end, (max(0, lo), max(0, hi))))
    return q, phases


def _static_dims(t: Any) -> list[int | None] | None:
    if not isinstance(t, TensorType):
        return None
    return [d if isinstance(d, int) else getattr(d, "value", None) for d in t.shape]


def _group_weight(w: RelayExpr, w_shape: list[int], groups: int) -> RelayExpr:
    """IOHW transposed weight ``(IC, OC/g, KH, KW)`` -> OIHW ``(OC, IC/g, KH, KW)``."""
    ic, ocg, kh, kw = w_shape
    icg = ic // groups
    if isinstance(w, Constant):
        a = w.data.numpy().reshape(groups, icg, ocg, kh, kw).transpose(0, 2, 1, 3, 4)
        return Constant(np.ascontiguousarray(a.reshape(groups * ocg, icg, kh, kw)))
    w = _tr.reshape(w, (groups, icg, ocg, kh, kw))
    return _tr.reshape(_tr.transpose(w, (0, 2, 1, 3, 4)), (groups * ocg, icg, kh, kw))


def _taps(w: RelayExpr, taps_h: tuple[int, ...], taps_w: tuple[int, ...]) -> RelayExpr:
    if isinstance(w, Constant):
        a = w.data.numpy()[:, :, list(taps_h)][:, :, :, list(taps_w)]
        return Constant(np.ascontiguousarray(a))
    w = _tr.take(w, const(np.array(taps_h, dtype="int32")), axis=2)
    return _tr.take(w, const(np.array(taps_w, dtype="int32")), axis=3)


def _shared_padding(phases: list[Phase | None], q: int, size: int
                    ) -> tuple[tuple[int, int], list[tuple[int, int, tuple[int, int]]]] | None:
    """When the phases along an axis (more than one) all have taps, and the same number of
    them: ``((before, after), [(begin, end, (0, 0)) per phase])``, the padding of the whole
    input and each phase's window of the padded input (same length: no padding of its own).
    None otherwise (each phase keeps its own crop and padding)."""
    if len(phases) < 2 or any(p is None for p in phases):
        return None
    shapes = {(len(p.taps), p.dilation) for p in phases if p is not None}
    if len(shapes) != 1:
        return None
    ((ntaps, dil),) = shapes
    length = q + dil * (ntaps - 1)  # the window each correlation reads
    starts = [p.begin - p.pad[0] for p in phases if p is not None]  # offsets in the input
    before = max(0, -min(starts))
    after = max(0, max(starts) + length - size)
    return (before, after), [(s0 + before, s0 + before + length, (0, 0)) for s0 in starts]


def _pixel_dense(data: RelayExpr, weight: RelayExpr, ic: int, oc: int, offset: tuple[int, int],
                 out: tuple[int, int], out_dtype: str) -> RelayExpr:
    """A transposed convolution of a 1x1 input (a generator's first layer, noise -> 4x4) is a
    matrix product: ``out[n, o, y, x] = sum_i x[n, i] w[i, o, y + pt, x + pl]`` (as a padded
    convolution most of its products would be with zeros)."""
    (pt, pl), (oh, ow) = offset, out
    if isinstance(weight, Constant):
        wt = weight.data.numpy()[:, :, pt:pt + oh, pl:pl + ow].reshape(ic, -1).T
        wd: RelayExpr = Constant(np.ascontiguousarray(wt))
    else:
        wd = _tr.strided_slice(weight, [pt, pl], [pt + oh, pl + ow], axes=[2, 3])
        wd = _tr.transpose(_tr.reshape(wd, (ic, oc * oh * ow)), (1, 0))
    y = _nn.dense(_tr.reshape(data, (0, ic)), wd, units=oc * oh * ow, out_dtype=out_dtype)
    return _tr.reshape(y, (0, oc, oh, ow))


def rewrite_conv2d_transpose(call: Call, data: RelayExpr, weight: RelayExpr) -> RelayExpr | None:
    """The convolutions + interleave equal to ``call`` (a typed ``nn.conv2d_transpose``) with
    its arguments replaced by ``data`` and ``weight``; None when it does not apply."""
    a = call.attrs
    if a.data_layout != "NCHW" or a.kernel_layout != "IOHW" or a.out_layout not in ("", "NCHW"):
        return None
    d_shape = _static_dims(call.args[0].checked_type)
    w_shape = _static_dims(call.args[1].checked_type)
    o_shape = _static_dims(call.checked_type)
    if d_shape is None or w_shape is None or o_shape is None:
        return None
    if None in d_shape[1:] or None in w_shape or None in o_shape[1:]:
        return None
    _, ic, h, w = d_shape
    _, oc, oh, ow = o_shape
    kh, kw = w_shape[2:]
    (sh, sw), (dh, dw) = a.strides, a.dilation
    pt, pl = a.padding[0], a.padding[1]
    if (h, w, a.groups, dh, dw) == (1, 1, 1, 1, 1) and oh + pt <= kh and ow + pl <= kw:
        return _pixel_dense(data, weight, ic, oc, (pt, pl), (oh, ow), a.out_dtype)
    qh, ph = phase_plan(h, kh, sh, dh, pt, oh)
    qw, pw = phase_plan(w, kw, sw, dw, pl, ow)
    wc = _group_weight(weight, w_shape, a.groups)  # type: ignore[arg-type]
    out_dtype = a.out_dtype or call.checked_type.dtype
    # SHARED_PADDING_KEY, along an axis whose phases all have the same taps count: the input padded
    # once and each phase a window of it (one compiled convolution); else each phase's window
    # is its convolution's own padding (only a window inside the input is a strided_slice)
    shared = PassContext.current().config.get(SHARED_PADDING_KEY, False)
    gh = _shared_padding(ph, qh, h) if shared else None
    gw = _shared_padding(pw, qw, w) if shared else None
    if gh is not None or gw is not None:
        (lh, rh_), (lw, rw_) = gh[0] if gh else (0, 0), gw[0] if gw else (0, 0)
        if lh or rh_ or lw or rw_:
            data = _nn.pad(data, ((0, 0), (0, 0), (lh, rh_), (lw, rw_)))
    parts = []
    for rh in range(sh):
        for rw in range(sw):
            fh, fw = ph[rh], pw[rw]
            if fh is None or fw is None:  # no tap reaches this phase: zeros
                if d_shape[0] is None:
                    return None
                parts.append(_tr.broadcast_to(const(0, out_dtype), [d_shape[0], oc, qh, qw]))
                continue
            (bh, eh, pad_h) = gh[1][rh] if gh else (fh.begin, fh.end, fh.pad)
            (bw, ew, pad_w) = gw[1][rw] if gw else (fw.begin, fw.end, fw.pad)
            x = data
            full_h, full_w = h + sum(gh[0]) if gh else h, w + sum(gw[0]) if gw else w
            if (bh, eh, bw, ew) != (0, full_h, 0, full_w):
                x = _tr.strided_slice(x, [bh, bw], [eh, ew], axes=[2, 3])
            parts.append(_nn.conv2d(
                x, _taps(wc, fh.taps, fw.taps), padding=(pad_h[0], pad_w[0], pad_h[1], pad_w[1]),
                dilation=(fh.dilation, fw.dilation), groups=a.groups, channels=oc,
                kernel_size=(len(fh.taps), len(fw.taps)), out_dtype=a.out_dtype))
    if len(parts) == 1:
        return parts[0]
    return _nn.stride_interleave(parts, (sh, sw), (int(oh), int(ow)))


def _is_conv_t(e: Any) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "nn.conv2d_transpose"


class _Rewrite(ExprMutator):
    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if not _is_conv_t(c) or not isinstance(new, Call):
            return new
        out = rewrite_conv2d_transpose(c, new.args[0], new.args[1])
        return new if out is None else out


class ConvTransposeToConv(FunctionPass):
    """``ConvTransposeToConv()`` (opt_level 0): see the module docstring."""

    def __init__(self) -> None:
        super().__init__(name="ConvTransposeToConv", opt_level=0)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return _Rewrite().visit(func)
