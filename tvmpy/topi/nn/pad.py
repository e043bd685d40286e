"""Padding (``topi.nn.pad``): the stage convolutions and pooling read (constant padding), and
numpy's ``edge`` / ``reflect`` / ``wrap`` modes (torch's replicate / reflect / circular pads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...te import Tensor, compute
from ...tir import all as tir_all
from ...tir.expr import PrimExpr, Select, const
from ...tir.op import floormod, if_then_else, likely
from ...tir.op import max as tmax
from ...tir.op import min as tmin
from ..utils import compute_unless_empty

__all__ = ["pad", "PAD_MODES"]

PAD_MODES = ("constant", "edge", "reflect", "wrap")


def pad(data: Tensor, pad_before: Sequence[Any], pad_after: Sequence[Any] | None = None,
        pad_value: Any = 0.0, name: str = "PadInput", pad_mode: str = "constant",
        likely_before: Sequence[int] = (), likely_after: Sequence[int] = ()) -> Tensor:
    """Pad ``data``: ``pad_before[i]`` elements before axis ``i``, ``pad_after[i]`` (default:
    ``pad_before``) after it, as numpy's ``pad`` in ``pad_mode``: "constant" (``pad_value``),
    "edge" (the border element), "reflect" (mirrored about the border element, which is not
    repeated; each pad must be smaller than its axis) or "wrap" (periodic). Tag
    ``"injective,pad"``. In constant mode the lower-bound (``x >= before``) tests of the axes in
    ``likely_before`` and the upper-bound tests of those in ``likely_after`` are wrapped in
    ``likely`` (TVM's hint that the condition usually holds), so that LoopPartition splits the
    loops of a consumer that inlines the padding into a guard-free main part and its padded
    edge (see :data:`topi.nn.conv2d.PAD_LIKELY_W`)."""
    if pad_mode not in PAD_MODES:
        raise ValueError(f"pad: pad_mode must be one of {', '.join(PAD_MODES)}, got {pad_mode!r}")
    n = len(data.shape)
    pad_after = list(pad_after) if pad_after is not None else list(pad_before)
    pad_before = list(pad_before)
    if len(pad_before) != n or len(pad_after) != n:
        raise ValueError(f"pad: data is {n}-D but pad_before has {len(pad_before)} and pad_after "
                         f"{len(pad_after)} values")
    for v in (*pad_before, *pad_after):
        if isinstance(v, int) and v < 0:
            raise ValueError(f"pad: padding must be >= 0, got {pad_before} / {pad_after}")
    shape = [int(d.value) if hasattr(d, "value") else d for d in data.shape]
    out_shape = tuple(shape[i] + pad_before[i] + pad_after[i] for i in range(n))
    for what, axes in (("likely_before", likely_before), ("likely_after", likely_after)):
        bad = [i for i in axes if not (isinstance(i, int) and 0 <= i < n)]
        if bad:
            raise ValueError(f"pad: {what} {tuple(axes)} names axes {bad} that a {n}-D tensor "
                             "does not have")
    if pad_mode != "constant":
        _check_mode_pads(pad_mode, shape, pad_before, pad_after)
        return compute_unless_empty(out_shape, lambda *idx: data[tuple(
            _source(pad_mode, x, shape[i], pad_before[i], pad_after[i]) for i, x in enumerate(idx))],
            data.dtype, name, "injective,pad")
    value = pad_value if hasattr(pad_value, "dtype") else const(pad_value, data.dtype)

    def fcompute(*idx: Any) -> Any:
        conds, src = [], []
        for i, x in enumerate(idx):
            b, a = pad_before[i], pad_after[i]
            if isinstance(b, int) and isinstance(a, int) and b == 0 and a == 0:
                src.append(x)
                continue
            if not (isinstance(b, int) and b == 0):
                conds.append(likely(x >= b) if i in likely_before else x >= b)
            if not (isinstance(a, int) and a == 0):
                conds.append(likely(x < shape[i] + b) if i in likely_after else x < shape[i] + b)
            src.append(x - b)
        if not conds:
            return data[tuple(src)]
        return if_then_else(tir_all(*conds), data[tuple(src)], value)

    return compute(out_shape, fcompute, name=name, tag="injective,pad")


def _check_mode_pads(mode: str, shape: list[Any], before: list[Any], after: list[Any]) -> None:
    """The pads ``mode`` can fill (numpy's / ONNX's rules): constant ints, no padding of an
    empty axis, and reflect pads smaller than the axis (the border element is not repeated)."""
    for i, (d, b, a) in enumerate(zip(shape, before, after)):
        if not (isinstance(b, int) and isinstance(a, int)):
            raise ValueError(f"pad: {mode} padding needs constant pads, got {b} / {a} on axis {i}")
        if not isinstance(d, int) or not (b or a):
            continue
        if d == 0:
            raise ValueError(f"pad: cannot pad the empty axis {i} in {mode} mode (pads {b}, {a}); "
                             "only constant padding extends an empty axis")
        if mode == "reflect" and (b >= d or a >= d):
            raise ValueError(f"pad: reflect pads ({b}, {a}) of axis {i} must be smaller than its "
                             f"size {d}")


def _source(mode: str, x: PrimExpr, d: Any, b: int, a: int) -> PrimExpr:
    """The index along one axis of size ``d`` (padded by ``b`` before, ``a`` after) that output
    index ``x`` reads in ``mode``."""
    if not (b or a):
        return x
    j = x - b if b else x
    if mode == "edge":
        j = tmax(j, const(0, j.dtype)) if b else j
        return tmin(j, d - 1) if a else j
    if mode == "reflect":  # -k -> k, d - 1 + k -> d - 1 - k (pads < d)
        if b:
            j = Select(j < 0, -j, j)
        return Select(j >= d, 2 * (d - 1) - j, j) if a else j
    # wrap: a single shift when the pads are at most one period, else a modulo
    if isinstance(d, int) and b <= d and a <= d:
        if b:
            j = Select(j < 0, j + d, j)
        return Select(j >= d, j - d, j) if a else j
    return floormod(j, d)
