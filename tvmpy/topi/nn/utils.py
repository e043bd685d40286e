"""Helpers shared by the nn operators: argument normalization and shape checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...tir import expr as E
from ..utils import get_const_int, get_const_tuple

__all__ = ["batch_const_shape", "get_pad_tuple", "pair", "check_rank",
           "is_injective_tag", "traverse_inline", "infer_out_dtype"]


def batch_const_shape(shape: Sequence[Any], what: str = "shape") -> tuple[Any, ...]:
    """A shape whose first (batch) extent may be symbolic and the rest are constants."""
    first = shape[0]
    first = int(first.value) if isinstance(first, E.IntImm) else first
    return (first, *get_const_tuple(shape[1:], what, symbolic=False))


def pair(v: Any, what: str) -> tuple[int, int]:
    """An int or a 2-sequence of ints as ``(a, b)``, each >= 1."""
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            raise ValueError(f"{what} must be an int or a pair, got {v!r}")
        a, b = (get_const_int(x, what) for x in v)
    else:
        a = b = get_const_int(v, what)
    if a < 1 or b < 1:
        raise ValueError(f"{what} must be >= 1, got {v!r}")
    return a, b


def get_pad_tuple(padding: Any, kernel: tuple[int, int]) -> tuple[int, int, int, int]:
    """TVM's padding forms as ``(top, left, bottom, right)``.

    ``padding``: an int (all sides), a pair ``(h, w)``, a 4-tuple ``(top, left, bottom, right)``,
    or "VALID" / "SAME" (SAME for stride 1: total ``k - 1``, the extra pixel at the end).
    """
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return 0, 0, 0, 0
        if padding.upper() == "SAME":
            ph, pw = kernel[0] - 1, kernel[1] - 1
            return ph // 2, pw // 2, ph - ph // 2, pw - pw // 2
        raise ValueError(f"padding string must be 'VALID' or 'SAME', got {padding!r}")
    if isinstance(padding, (list, tuple)):
        vals = [get_const_int(p, "padding") for p in padding]
        if len(vals) == 2:
            t, l_, b, r = vals[0], vals[1], vals[0], vals[1]
        elif len(vals) == 4:
            t, l_, b, r = vals
        else:
            raise ValueError(f"padding must have 1, 2 or 4 values, got {padding!r}")
    else:
        t = l_ = b = r = get_const_int(padding, "padding")
    if min(t, l_, b, r) < 0:
        raise ValueError(f"padding must be >= 0, got {padding!r}")
    return t, l_, b, r


def check_rank(t: Any, rank: int, op: str, what: str, layout: str = "") -> None:
    """Raise a ValueError naming ``op`` when tensor ``t`` does not have ``rank`` dimensions."""
    if len(t.shape) != rank:
        lay = f" ({layout})" if layout else ""
        raise ValueError(f"{op}: {what} must be {rank}-D{lay}, got shape "
                         f"{tuple(str(s) for s in t.shape)}")


def infer_out_dtype(out_dtype: str | None, *tensors: Any) -> str:
    """``out_dtype`` or, when None, the first tensor's dtype."""
    return out_dtype if out_dtype else tensors[0].dtype


def is_injective_tag(tag: str) -> bool:
    """Tags of stages that a complex op's schedule inlines (TVM's tag convention)."""
    return tag.startswith(("elemwise", "broadcast", "injective"))


def traverse_inline(s: Any, final_op: Any, callback: Any) -> None:
    """Visit the ops reachable from ``final_op``: inline injective ones that are not outputs,
    and call ``callback(op)`` on every compute op (TVM's ``traverse_inline``)."""
    from ...te import ComputeOp

    outputs = {id(o) for o in s.outputs} if hasattr(s, "outputs") else set()
    visited: set[int] = set()

    def visit(op: Any) -> None:
        if id(op) in visited or not isinstance(op, ComputeOp):
            return
        visited.add(id(op))
        # padding stages are left to the complex op's schedule (compute_at, not inline)
        if (is_injective_tag(op.tag) and "pad" not in op.tag and id(op) not in outputs
                and not op.reduce_axis):
            s[op].compute_inline()
        for t in op.input_tensors:
            visit(t.op)
        callback(op)

    visit(final_op)
