"""Small helpers shared by operator definitions: constant shapes, axis normalization, computes
of possibly empty outputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import te
from ..tir.expr import IntImm, PrimExpr, const, convert

__all__ = ["get_const_int", "get_const_tuple", "normalize_axis", "normalize_axes", "prod",
           "is_empty_shape", "compute_unless_empty"]


def get_const_int(x: Any, what: str = "value") -> int:
    """The Python int of a constant expression; a clear error when it is symbolic."""
    if isinstance(x, bool):
        raise TypeError(f"{what} must be an integer, got bool {x!r}")
    if isinstance(x, int):
        return x
    x = convert(x)
    if isinstance(x, IntImm):
        return int(x.value)
    raise ValueError(f"{what} must be a constant integer, got the symbolic expression {x}")


def get_const_tuple(shape: Sequence[Any], what: str = "shape", *, symbolic: bool = True) -> tuple:
    """Shape entries as Python ints where constant. ``symbolic=True`` (TVM's contract): a
    symbolic entry is kept as its expression; ``symbolic=False``: a symbolic entry is refused
    with a ValueError naming ``what`` (for computes that need every extent known)."""
    if not symbolic:
        return tuple(get_const_int(s, what) for s in shape)
    out = []
    for s in shape:
        s = convert(s)
        out.append(int(s.value) if isinstance(s, IntImm) else s)
    return tuple(out)


def normalize_axis(axis: Any, ndim: int, op: str, allow_end: bool = False) -> int:
    """``axis`` in ``[-ndim, ndim)`` (``[-ndim-1, ndim]`` with ``allow_end``) to ``[0, ndim)``."""
    if isinstance(axis, bool) or not isinstance(axis, (int, IntImm)):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__} {axis!r}")
    a = int(axis.value) if isinstance(axis, IntImm) else axis
    n = ndim + 1 if allow_end else ndim
    if not -n <= a < n:
        raise ValueError(f"{op}: axis {a} is out of range for a tensor of rank {ndim} "
                         f"(expected {-n} <= axis < {n})")
    return a + n if a < 0 else a


def normalize_axes(axis: Any, ndim: int, op: str) -> list[int]:
    """``None`` (all axes), an int or a sequence of ints to a sorted list of distinct axes."""
    if axis is None:
        return list(range(ndim))
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    out = [normalize_axis(a, ndim, op) for a in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r} (rank {ndim})")
    return sorted(out)


def prod(values: Sequence[Any]) -> Any:
    """Product of shape entries (an int when all are constant, else an expression)."""
    out: Any = 1
    for v in values:
        out = out * v
    if isinstance(out, PrimExpr):
        from ..arith import simplify

        out = simplify(out)
        if isinstance(out, IntImm):
            return int(out.value)
    return out


def is_empty_shape(shape: Sequence[Any]) -> bool:
    """Whether ``shape`` has a constant zero extent (a tensor without elements)."""
    return any(getattr(s, "value", s) == 0 for s in shape if isinstance(s, (int, IntImm)))


def compute_unless_empty(shape: Sequence[Any], fcompute: Callable[..., Any], dtype: str,
                         name: str, tag: str = "", attrs: dict | None = None) -> Any:
    """``te.compute(shape, fcompute)``, except that an output without elements reads nothing:
    index math over an empty input (``i % 0``, ``i // 0``) is not even built."""
    if is_empty_shape(shape):
        return te.compute(shape, lambda *i: const(0, dtype), name=name, tag=tag, attrs=attrs)
    return te.compute(shape, fcompute, name=name, tag=tag, attrs=attrs)
