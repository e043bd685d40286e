"""``topi.nn.dilate``: insert ``stride - 1`` values between elements along each axis (the
input side of a transposed convolution)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...te import Tensor, compute
from ...tir import all as tir_all
from ...tir.expr import const
from ...tir.op import if_then_else

__all__ = ["dilate"]


def _const(d: Any) -> Any:
    """A constant extent as an int (symbolic ones kept)."""
    return int(d.value) if hasattr(d, "value") else d


def dilate(data: Tensor, strides: Sequence[int], dilation_value: float = 0.0,
           name: str = "DilatedInput") -> Tensor:
    """``out[i * s] = data[i]``, other positions ``dilation_value``; extent ``(n-1)*s + 1``."""
    n = len(data.shape)
    if len(strides) != n:
        raise ValueError(f"dilate: data is {n}-D but strides has {len(strides)} values")
    if any(not isinstance(s, int) or s < 1 for s in strides):
        raise ValueError(f"dilate: strides must be ints >= 1, got {tuple(strides)}")
    shape = [_const(d) for d in data.shape]
    out_shape = tuple((shape[i] - 1) * strides[i] + 1 for i in range(n))
    value = const(dilation_value, data.dtype)

    def f(*idx: Any) -> Any:
        conds = [idx[i] % s == 0 for i, s in enumerate(strides) if s > 1]
        src = tuple(idx[i] // s if s > 1 else idx[i] for i, s in enumerate(strides))
        if not conds:
            return data[src]
        return if_then_else(tir_all(*conds), data[src], value)

    return compute(out_shape, f, name=name, tag="injective,dilate")
