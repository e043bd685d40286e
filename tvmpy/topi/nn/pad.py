"""Constant padding (``topi.nn.pad``): the stage convolutions and pooling read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...te import Tensor, compute
from ...tir import all as tir_all
from ...tir.expr import const
from ...tir.op import if_then_else

__all__ = ["pad"]


def pad(data: Tensor, pad_before: Sequence[Any], pad_after: Sequence[Any] | None = None,
        pad_value: Any = 0.0, name: str = "PadInput") -> Tensor:
    """Pad ``data`` with ``pad_value``: ``pad_before[i]`` elements before axis ``i``,
    ``pad_after[i]`` (default: ``pad_before``) after it. Tag ``"injective,pad"``."""
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
    value = pad_value if hasattr(pad_value, "dtype") else const(pad_value, data.dtype)

    def fcompute(*idx: Any) -> Any:
        conds, src = [], []
        for i, x in enumerate(idx):
            b, a = pad_before[i], pad_after[i]
            if isinstance(b, int) and isinstance(a, int) and b == 0 and a == 0:
                src.append(x)
                continue
            if not (isinstance(b, int) and b == 0):
                conds.append(x >= b)
            if not (isinstance(a, int) and a == 0):
                conds.append(x < shape[i] + b)
            src.append(x - b)
        if not conds:
            return data[tuple(src)]
        return if_then_else(tir_all(*conds), data[tuple(src)], value)

    return compute(out_shape, fcompute, name=name, tag="injective,pad")
