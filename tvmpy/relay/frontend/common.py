"""Frontend helpers shared by the importers."""

from __future__ import annotations

from typing import Any

from ..expr import RelayExpr, const
from ..op import tensor, transform

__all__ = ["OpNotImplemented", "unsupported_error", "softplus", "reshape_to", "move_axis_last",
           "move_axis_back"]


class OpNotImplemented(NotImplementedError):
    """Raised once per import, listing every unsupported operator type and its node names."""


def unsupported_error(frontend: str, missing: dict[str, list[str]]) -> OpNotImplemented:
    lines = [f"  {op}: {', '.join(names)}" for op, names in sorted(missing.items())]
    return OpNotImplemented(
        f"{frontend}: {len(missing)} operator type(s) are not supported:\n" + "\n".join(lines))


def softplus(x: RelayExpr, dtype: str = "float32") -> RelayExpr:
    """``log(1 + exp(x))`` without overflow for large ``x``: ``max(x, 0) + log1p(exp(-|x|))``."""
    return tensor.add(tensor.maximum(x, const(0.0, dtype)),
                      tensor.log1p(tensor.exp(tensor.negative(tensor.abs(x)))))


def reshape_to(x: RelayExpr, shape: Any) -> RelayExpr:
    """Reshape to exactly ``shape`` (importers compute literal shapes: a 0 there is an empty
    axis, never relay's "copy the input's dim")."""
    return transform.reshape(x, shape, allowzero=True)


def move_axis_last(x: RelayExpr, axis: int, rank: int) -> RelayExpr:
    """``x`` with ``axis`` moved to the end (the others keep their order)."""
    if axis == rank - 1:
        return x
    return transform.transpose(x, [k for k in range(rank) if k != axis] + [axis])


def move_axis_back(x: RelayExpr, axis: int, rank: int) -> RelayExpr:
    """The inverse of :func:`move_axis_last`."""
    if axis == rank - 1:
        return x
    perm = [k for k in range(rank) if k != axis] + [axis]
    return transform.transpose(x, sorted(range(rank), key=perm.__getitem__))
