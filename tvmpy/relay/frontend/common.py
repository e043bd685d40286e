"""Frontend helpers shared by the importers."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr, const
from ..op import tensor, transform

__all__ = ["OpNotImplemented", "unsupported_error", "softplus", "reshape_to", "prod", "same_dims", "broadcast_dims", "floordiv_dim", "move_axis_last",
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
    axis, never relay's "copy the input's dim"). Symbolic dimensions of ``shape`` (a
    ``relay.Any`` batch) become relay's 0 where they copy the input's dimension in place, and
    at most one other becomes -1 (inferred); with more, the symbolic sizes are the newshape."""
    shape = list(shape)
    sym = [k for k, d in enumerate(shape) if not isinstance(d, (int, np.integer))]
    if not sym:
        return transform.reshape(x, shape, allowzero=True)
    from ..ty import dim_equal
    from ..type_infer import infer_type

    in_shape = infer_type(x).checked_type.shape
    new = [0 if k in sym and k < len(in_shape) and dim_equal(in_shape[k], shape[k]) else d
           for k, d in enumerate(shape)]
    rest = [k for k in sym if new[k] != 0]
    if 0 in [d for k, d in enumerate(shape) if k not in sym] or len(rest) > 1 or (
            rest and -1 in shape):
        # the symbolic sizes themselves (relay's reshape types them; the kernel reads them)
        return transform.reshape(x, shape, allowzero=True)
    for k in rest:
        new[k] = -1
    return transform.reshape(x, new)


def same_dims(a: Any, b: Any) -> bool:
    """Whether two shapes (ints or symbolic dimensions) are provably the same."""
    from ..ty import dim_equal

    return len(a) == len(b) and all(dim_equal(x, y) for x, y in zip(a, b))


def broadcast_dims(a: Any, b: Any) -> list[Any]:
    """numpy broadcasting of two shapes whose dimensions may be symbolic (``relay.Any``)."""
    from ..op._rel import broadcast_shape

    return list(broadcast_shape(list(a), list(b)))


def floordiv_dim(a: Any, b: Any) -> Any:
    """``a // b`` of dimensions (ints or symbolic), simplified (``N * 24 // 24`` is ``N``)."""
    from ...tir import expr as _e
    from ..ty import as_dim

    return as_dim(_e.convert(a) // _e.convert(b))


def prod(dims: Any) -> Any:
    """The product of dimensions: an int, or a symbolic expression when one is symbolic."""
    from ..ty import as_dim

    out: Any = 1
    for d in dims:
        out = out * (int(d) if isinstance(d, (int, np.integer)) else d)
    return as_dim(out)


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
