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
convolution computes inside its kernel (inlined bounds tests for windows up to 3x3): no ``nn.pad``
or ``strided_slice`` kernel copies the input; a ``strided_slice`` crops it only where a phase
reads a strict sub-range of it (padding beyond the kernel's reach). The phases of one layer
are then different workloads (k4 s2 p1: paddings (1, 0) and (0, 1) per axis, four kernels to
compile); the earlier form (the input padded once, each phase a same-size window of it, one
compiled convolution) built DCGAN's generator ~2x faster but paid a pad and four window copies
per layer, serial kernels that cost 0.55 ms of 5.6 at 2 threads (bench/RESULTS.md, 2026-11-30).
Stride 1 is a single convolution with no interleave; a 1x1 input (a generator's first layer)
is one ``nn.dense``.

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

from ..expr import Call, Constant, RelayExpr, const
from ..op import nn as _nn
from ..op import transform as _tr
from ..op.registry import Op
from ..ty import TensorType
from ..visitor import ExprMutator
from .pass_infra import FunctionPass

__all__ = ["ConvTransposeToConv", "phase_plan", "Phase"]


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
    parts = []
    for rh in range(sh):
        for rw in range(sw):
            fh, fw = ph[rh], pw[rw]
            if fh is None or fw is None:  # no tap reaches this phase: zeros
                if d_shape[0] is None:
                    return None
                parts.append(_tr.broadcast_to(const(0, out_dtype), [d_shape[0], oc, qh, qw]))
                continue
            # the phase's window of the input is the convolution's own (asymmetric) padding,
            # which the NCHWc convolution computes inside its kernel; only a window that starts
            # or ends inside the input (padding larger than the kernel reach) is a crop
            x = data
            if (fh.begin, fh.end, fw.begin, fw.end) != (0, h, 0, w):
                x = _tr.strided_slice(x, [fh.begin, fw.begin], [fh.end, fw.end], axes=[2, 3])
            parts.append(_nn.conv2d(
                x, _taps(wc, fh.taps, fw.taps), padding=(fh.pad[0], fw.pad[0], fh.pad[1], fw.pad[1]),
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
