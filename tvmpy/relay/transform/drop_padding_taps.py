"""DropPaddingTaps: remove the kernel taps of a ``nn.conv2d`` that read only zero padding.

What it does
With a dilation as large as the map (DeepLabV3's ASPP branches: 3x3, dilation 24 or 36,
padding = dilation, on a 16x16 map) the outer taps of every output position fall in the
padding, so the convolution multiplies zeros: 8 of its 9 taps there. Along one spatial axis
(input ``n``, kernel ``k``, stride ``s``, dilation ``d``, padding ``pb``/``pe``, output ``o``)
tap ``t`` reads input rows ``t*d - pb + s*[0, o)``; it reads only padding when that range
misses ``[0, n)``. Those taps form a prefix and a suffix of ``0..k-1`` (the range moves right
with ``t``), so the taps kept are ``t0..t1`` and the convolution becomes the same convolution
with the weight sliced to them and the padding ``pb - t0*d`` / ``pe - (k-1-t1)*d`` — the same
output size and the same sums, minus terms that were exactly zero. A padding that becomes
negative crops the input instead (rows no kept tap reads).

A window whose outer taps read data only near the borders (dilation 12 on a 16x16 map) is
split into unpadded pieces, computed one of two ways, whichever moves fewer bytes
(``_tap_sum_pays``): output bands with the same live taps, concatenated (each band reads the
weights of all its taps: the corner bands of a 3x3 window read four), or one single-tap
convolution per tap over the output rectangle where it reads data, zero-padded and summed
(each tap's weight read once; wide-channel layers such as DeepLabV3's 960 -> 256 ASPP).

When valid
Exact for any stride, dilation,
group count and layout whose spatial axes are named H and W. A convolution none of whose taps
reads data is left alone, as is one whose weight is not a constant (the slice is folded into
the weight by FoldConstant, which runs after this pass).

Example
    before:  nn.conv2d(%x, %W, padding=[24, 24, 24, 24], dilation=[24, 24])      (x: 16x16, W: 3x3)
    after:   nn.conv2d(%x, strided_slice(%W, begin=[0, 0, 1, 1], end=[8, 8, 2, 2]))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Constant, RelayExpr
from ..op import nn as _nn
from ..op import tensor as _tensor
from ..op import transform as _tf
from ..op.registry import Op, make_call
from ..visitor import ExprMutator
from .pass_infra import FunctionPass

__all__ = ["DropPaddingTaps", "kept_taps", "tap_spans"]


MAX_PIECES = 9
"""Most convolutions one conv2d is split into by output bands (3 x 3: a dilated 3x3 window
whose outer taps reach data only near the borders)."""

MAX_LIVE_FRACTION = 0.5
"""Split into bands only when the taps that read data are at most this fraction of the
convolution's multiply-adds (the smaller pieces run at a lower rate; dilation 12 on a 16x16
map: 1/4)."""


TAP_SUM_ADD_COST = 1
"""Weight bytes one zero-padded output of the per-tap sum is reckoned to cost per output byte.
Fitted on 3x3 dilated convolutions, bands / per-tap sum, 1 thread, CPU time, Intel Xeon (KVM,
loaded), 2026-11-30, ms: 960 -> 256 14x14 d12 4.02 / 2.36, 16x16 d12 5.50 / 2.73, 512 -> 256
28x28 d18 7.74 / 5.49-5.64, 256 -> 64 14x14 d12 0.206 / 0.159, 128 -> 64 0.094 / 0.087 (the
sum chosen for all of these), 64 -> 128 0.091 / 0.100, 64 -> 64 0.050 / 0.055 (the bands).
(4 chose the bands for 512 -> 256 and 256 -> 64 as well.)"""


def live_taps(o: int, n: int, k: int, stride: int, dilation: int,
              pad_begin: int) -> tuple[int, int] | None:
    """``(t0, t1)``: the first and last kernel taps whose input row for output position ``o``
    lies in ``[0, n)`` (contiguous: the row moves right with the tap), or None."""
    live = [t for t in range(k) if 0 <= o * stride - pad_begin + t * dilation < n]
    return (live[0], live[-1]) if live else None


def kept_taps(n: int, k: int, stride: int, dilation: int, pad_begin: int,
              pad_end: int) -> tuple[int, int] | None:
    """``(t0, t1)``, the first and last kernel taps along one axis that read at least one
    input element for some output position (``None`` when every tap reads only padding)."""
    out = (n + pad_begin + pad_end - (k - 1) * dilation - 1) // stride + 1
    if out <= 0:
        return None
    live = [t for t in range(k)
            if t * dilation - pad_begin <= n - 1
            and (out - 1) * stride - pad_begin + t * dilation >= 0]
    return (live[0], live[-1]) if live else None


def bands(n: int, k: int, stride: int, dilation: int, pad_begin: int,
          pad_end: int) -> list[tuple[int, int, int, int]] | None:
    """The output positions along one axis grouped into runs with the same live taps:
    ``[(o_begin, o_end, t0, t1)]``; None when some position has no live tap."""
    out = (n + pad_begin + pad_end - (k - 1) * dilation - 1) // stride + 1
    runs: list[tuple[int, int, int, int]] = []
    for o in range(max(out, 0)):
        live = live_taps(o, n, k, stride, dilation, pad_begin)
        if live is None:
            return None
        if runs and runs[-1][1] == o and runs[-1][2:] == live:
            runs[-1] = (runs[-1][0], o + 1, *live)
        else:
            runs.append((o, o + 1, *live))
    return runs or None


def _out_size(n: int, k: int, stride: int, dilation: int, pad_begin: int, pad_end: int) -> int:
    return (n + pad_begin + pad_end - (k - 1) * dilation - 1) // stride + 1


def tap_spans(n: int, k: int, stride: int, dilation: int, pad_begin: int,
              pad_end: int) -> list[tuple[int, tuple[int, int]]]:
    """Each kernel tap along one axis that reads data for some output position, with the
    output positions ``[o_begin, o_end)`` where it does (contiguous: the input row moves right
    with the output)."""
    out = _out_size(n, k, stride, dilation, pad_begin, pad_end)
    spans = []
    for t in range(k):
        live = [o for o in range(max(out, 0)) if 0 <= o * stride - pad_begin + t * dilation < n]
        if live:
            spans.append((t, (live[0], live[-1] + 1)))
    return spans


def _tap_sum_pays(weight: Constant, kl: str, geo: list[tuple[int, ...]],
                  split: list[list[tuple[int, int, int, int]]]) -> bool:
    """Whether the per-tap sum (:meth:`_Drop._tap_sum`) moves fewer bytes than the output
    bands: each band convolution reads the weight of every tap live in it, so a tap's weight
    is read once per band it is live in (DeepLabV3's dilation-12 ASPP branch, 960 -> 256: 25
    tap weights of 0.98 MB against 9), while the sum adds one zero-padded output per
    further tap."""
    wshape = [int(d) for d in weight.data.shape]
    k_size = [wshape[kl.index(ax)] for ax in "HW"]
    itemsize = np.dtype(str(weight.data.dtype)).itemsize
    tap_bytes = int(np.prod(wshape)) // (k_size[0] * k_size[1]) * itemsize
    band_reads = 1
    for runs in split:
        band_reads *= sum(t1 - t0 + 1 for _oa, _ob, t0, t1 in runs)
    taps = len(tap_spans(*geo[0])) * len(tap_spans(*geo[1]))
    oc = int(weight.data.shape[kl.index("O")])
    out_bytes = oc * _out_size(*geo[0]) * _out_size(*geo[1]) * itemsize
    return tap_bytes * (band_reads - taps) > out_bytes * (taps - 1) * TAP_SUM_ADD_COST


def _const_int(d: Any) -> int | None:
    d = getattr(d, "value", d)
    return d if isinstance(d, int) else None


class _Drop(ExprMutator):
    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if isinstance(new, Call) and isinstance(new.op, Op) and new.op.name == "nn.conv2d":
            dropped = self._drop(new, c)
            return new if dropped is None else dropped
        return new

    def _drop(self, conv: Call, orig: Call) -> RelayExpr | None:
        data, weight = conv.args
        a = conv.attrs
        if not isinstance(weight, Constant) or tuple(a.dilation) == (1, 1):
            return None
        dl, kl = a.data_layout, a.kernel_layout or ("HWIO" if a.data_layout == "NHWC" else "OIHW")
        if len(dl) != 4 or len(kl) != 4 or any(
                ax not in dl or ax not in kl for ax in "HW") or not dl.isupper():
            return None  # a blocked layout (NCHW16c): spatial axes known only by name
        dshape = [_const_int(d) for d in orig.args[0].checked_type.shape]
        if any(d is None for d in dshape):
            return None
        geo = []
        for i, ax in enumerate("HW"):
            geo.append((int(dshape[dl.index(ax)]), int(weight.data.shape[kl.index(ax)]),
                        int(a.strides[i]), int(a.dilation[i]), int(a.padding[i]),
                        int(a.padding[i + 2])))
        split = [bands(*g) for g in geo]
        if split[0] is not None and split[1] is not None:
            pieces = len(split[0]) * len(split[1])
            live = 1.0
            for runs, (_, k, *_rest) in zip(split, geo):
                live *= sum((ob - oa) * (t1 - t0 + 1) for oa, ob, t0, t1 in runs) / (
                    runs[-1][1] * k)
            if pieces == 1 and live < 1.0 or 1 < pieces <= MAX_PIECES and \
                    live <= MAX_LIVE_FRACTION:
                if pieces > 1 and _tap_sum_pays(weight, kl, geo, split):
                    return self._tap_sum(data, weight, a, dl, kl,  # type: ignore[arg-type]
                                         geo, dshape)
                return self._split(data, weight, a, dl, kl, geo, split,  # type: ignore[arg-type]
                                   dshape)
        return self._union(data, weight, a, dl, kl, geo, dshape)  # type: ignore[arg-type]

    def _conv(self, data: RelayExpr, weight: Constant, a: Any, dl: str, kl: str,
              taps: list[tuple[int, int]], pads: list[int], dils: list[int]) -> RelayExpr:
        """conv2d of ``data`` with the weight sliced to ``taps`` ((t0, t1) per spatial axis)."""
        wbegin, wend = [0] * 4, list(weight.data.shape)
        for ax, (t0, t1) in zip("HW", taps):
            wbegin[kl.index(ax)], wend[kl.index(ax)] = t0, t1 + 1
        sizes = [t1 - t0 + 1 for t0, t1 in taps]
        attrs = dict(a.items())
        attrs["padding"] = tuple(pads)
        if attrs.get("kernel_size") is not None:
            attrs["kernel_size"] = tuple(sizes)
        # one tap along an axis: its dilation no longer means anything (1 keeps the
        # convolution on the plain schedules)
        attrs["dilation"] = tuple(1 if sz == 1 else d for sz, d in zip(sizes, dils))
        w = _tf.strided_slice(weight, wbegin, wend)
        return make_call("nn.conv2d", [data, w], attrs)

    def _crop(self, data: RelayExpr, dl: str, dshape: list, spans: dict[str, tuple[int, int]]
              ) -> RelayExpr:
        begin, end = [0] * 4, [int(d) for d in dshape]
        for ax, (b, e) in spans.items():
            begin[dl.index(ax)], end[dl.index(ax)] = b, e
        if begin == [0] * 4 and end == [int(d) for d in dshape]:
            return data
        return _tf.strided_slice(data, begin, end)

    def _split(self, data: RelayExpr, weight: Constant, a: Any, dl: str, kl: str,
               geo: list[tuple[int, ...]], split: list[list[tuple[int, int, int, int]]],
               dshape: list) -> RelayExpr:
        """One unpadded convolution per (row band, column band), each over the input rows and
        columns its live taps read, the pieces concatenated back."""
        rows = []
        for oa, ob, t0, t1 in split[0]:
            cols = []
            for pa, pb_, u0, u1 in split[1]:
                spans = {}
                for ax, (o0, o1, s0, s1), (_n, _k, st, d, pad, _pe) in zip(
                        "HW", ((oa, ob, t0, t1), (pa, pb_, u0, u1)), geo):
                    start = o0 * st - pad + s0 * d
                    spans[ax] = (start, start + (o1 - o0 - 1) * st + (s1 - s0) * d + 1)
                piece = self._crop(data, dl, dshape, spans)
                cols.append(self._conv(piece, weight, a, dl, kl, [(t0, t1), (u0, u1)],
                                       [0, 0, 0, 0], [int(a.dilation[0]), int(a.dilation[1])]))
            rows.append(cols[0] if len(cols) == 1 else _tf.concatenate(cols, dl.index("W")))
        return rows[0] if len(rows) == 1 else _tf.concatenate(rows, dl.index("H"))

    def _tap_sum(self, data: RelayExpr, weight: Constant, a: Any, dl: str, kl: str,
                 geo: list[tuple[int, ...]], dshape: list) -> RelayExpr:
        """One unpadded single-tap convolution per live tap over the output rectangle where
        that tap reads data (each tap's weight read once), padded with zeros to the whole
        output and summed; the tap covering the most outputs first (no padding when it
        covers all)."""
        per_axis = [tap_spans(*g) for g in geo]
        out = [_out_size(*g) for g in geo]
        pieces = []
        for th, (oh0, oh1) in per_axis[0]:
            for tw, (ow0, ow1) in per_axis[1]:
                spans = {}
                for ax, (o0, o1), t, (_n, _k, st, d, pad, _pe) in zip(
                        "HW", ((oh0, oh1), (ow0, ow1)), (th, tw), geo):
                    start = o0 * st - pad + t * d
                    spans[ax] = (start, start + (o1 - o0 - 1) * st + 1)
                piece = self._crop(data, dl, dshape, spans)
                conv = self._conv(piece, weight, a, dl, kl, [(th, th), (tw, tw)],
                                  [0, 0, 0, 0], [1, 1])
                pw = [(0, 0)] * 4
                pw[dl.index("H")] = (oh0, out[0] - oh1)
                pw[dl.index("W")] = (ow0, out[1] - ow1)
                pieces.append(((oh1 - oh0) * (ow1 - ow0), conv, pw))
        pieces.sort(key=lambda p: -p[0])
        total = None
        for _size, conv, pw in pieces:
            term = conv if all(p == (0, 0) for p in pw) else _nn.pad(conv, pw)
            total = term if total is None else _tensor.add(total, term)
        return total  # type: ignore[return-value]

    def _union(self, data: RelayExpr, weight: Constant, a: Any, dl: str, kl: str,
               geo: list[tuple[int, ...]], dshape: list) -> RelayExpr | None:
        """The taps that read data for no output position dropped (a prefix and a suffix of
        each axis' taps), the padding reduced to match; a negative one crops the input."""
        taps, pads = [], [0] * 4
        spans = {}
        changed = False
        for i, (ax, (n, k, _s, d, pb, pe)) in enumerate(zip("HW", geo)):
            live = kept_taps(n, k, _s, d, pb, pe)
            if live is None:
                return None
            t0, t1 = live
            taps.append(live)
            changed |= (t0, t1) != (0, k - 1)
            nb, ne = pb - t0 * d, pe - (k - 1 - t1) * d
            # a negative padding: the input rows before / after it are read by no kept tap
            spans[ax] = (max(0, -nb), n + min(0, ne))
            pads[i], pads[i + 2] = max(0, nb), max(0, ne)
        if not changed:
            return None
        data = self._crop(data, dl, dshape, spans)
        return self._conv(data, weight, a, dl, kl, taps, pads,
                          [int(a.dilation[0]), int(a.dilation[1])])


class DropPaddingTaps(FunctionPass):
    """``DropPaddingTaps()`` (opt_level 2: FoldConstant folds the weight slices)."""

    def __init__(self) -> None:
        super().__init__(name="DropPaddingTaps", opt_level=2)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        return _Drop().visit(func)
