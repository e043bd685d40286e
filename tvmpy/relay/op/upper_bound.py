"""Upper-bound outputs: how an executor runs an operator whose output size only its own work
decides (NonZero, Unique, NonMaxSuppression, Compress) without doing that work twice.

A data-dependent shape function (``register_shape_func(..., data_dependent=True)``) must know
the exact output size *before* the kernel runs; for these operators that means running the
operator's whole algorithm on the host first (for NMS, the entire greedy suppression). TVM's
answer, taken here: the kernel writes its outputs into buffers of an **upper-bound** shape
(known from the input shapes, no pass over the data) and reports the actual size(s) in a small
extra output; the executor then exposes the exact-size result.

``register_upper_bound(op_name, bound, compute, num_counts=1, check=None)`` sets the operator's
``FUpperBound`` attribute (an :class:`UpperBound`):

- ``bound(attrs, inputs) -> [shape, ...]``, one shape per (flat) output, where a dimension
  decided by the data is a :class:`Bounded` ``(limit, slot)``: at most ``limit``, its actual size
  is entry ``slot`` of the kernel's count output. ``inputs`` are the input arrays, of which the
  function may read the *shapes* and single scalar parameters (NMS's max_output_boxes_per_class);
  never a pass over the data.
- ``compute(attrs, inputs: list[te.Tensor]) -> [te.Tensor, ...]``: the op's outputs (extents:
  fresh size variables, bound from the buffers the executor allocates) followed by the
  ``(num_counts,)`` int64 count tensor. **Layout contract**: every output is written in its
  exact row-major layout at the *start* of its buffer (a dimension of size ``count`` has stride
  ``count``, not ``limit``), so the exact result is a prefix of the buffer: a zero-copy view.
- ``check(attrs, counts, input_shapes)``: optional, raises ``ValueError`` when the counts report
  an input error the kernel found (Compress's condition selecting past the end of the axis).

The VM (``runtime/vm.py``) uses this path for every operator that has it; the interpreter keeps
``FNumpy`` (and the data-dependent shape function).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .registry import register_op_attr

__all__ = ["Bounded", "UpperBound", "register_upper_bound", "exact_shape"]


class Bounded(NamedTuple):
    """A dimension decided by the data: at most ``limit``; its actual size is entry ``slot`` of
    the kernel's count output."""

    limit: int
    slot: int = 0

    def __repr__(self) -> str:
        return f"<={self.limit}[count {self.slot}]"


BoundShape = Sequence["int | Bounded"]


class UpperBound:
    """An operator's ``FUpperBound`` attribute (see the module docstring)."""

    __slots__ = ("bound", "compute", "num_counts", "check")

    def __init__(self, bound: Callable[[Any, list[Any]], list[BoundShape]],
                 compute: Callable[[Any, list[Any]], list[Any]], num_counts: int = 1,
                 check: Callable[[Any, list[int], list[tuple[int, ...]]], None] | None = None):
        self.bound, self.compute = bound, compute
        self.num_counts, self.check = int(num_counts), check


def register_upper_bound(op_name: str, bound: Callable[[Any, list[Any]], list[BoundShape]],
                         compute: Callable[[Any, list[Any]], list[Any]], num_counts: int = 1,
                         check: Callable[[Any, list[int], list[tuple[int, ...]]], None] | None = None
                         ) -> UpperBound:
    """Give ``op_name`` an upper-bound output path (see the module docstring)."""
    ub = UpperBound(bound, compute, num_counts, check)
    register_op_attr(op_name, "FUpperBound", ub)
    return ub


def exact_shape(dims: BoundShape, counts: Sequence[int]) -> tuple[int, ...]:
    """The exact shape of an output whose bound is ``dims``, given the kernel's counts."""
    return tuple(counts[d.slot] if isinstance(d, Bounded) else int(d) for d in dims)
