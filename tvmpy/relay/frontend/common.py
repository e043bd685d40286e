"""Frontend helpers shared by the importers."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr, const
from ..op import tensor, transform

__all__ = ["OpNotImplemented", "unsupported_error", "softplus", "reshape_to", "prod", "same_dims", "broadcast_dims", "floordiv_dim", "move_axis_last",
           "move_axis_back", "widen_float16_accumulation"]


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


# ops that sum many products: computed in float32 and rounded once when their inputs are
# float16, as torch's CPU kernels, numpy and onnxruntime do (a float16 accumulator drifts by
# percents over a few hundred terms; fuzzer seed 400477)
_ACCUMULATING_OPS = ("nn.dense", "nn.batch_matmul", "nn.matmul", "nn.conv1d", "nn.conv2d",
                     "nn.conv3d", "nn.conv2d_transpose", "nn.conv1d_transpose",
                     "nn.conv3d_transpose", "nn.softmax", "nn.log_softmax")


def widen_float16_accumulation(expr: RelayExpr) -> RelayExpr:
    """``expr`` (type-checked) with every accumulating op on float16 operands computed in
    float32: ``cast(op(cast(a, f32), cast(b, f32)), f16)``."""
    from ..expr import Call
    from ..visitor import ExprMutator

    class Widen(ExprMutator):
        def visit_call(self, c: Call) -> RelayExpr:
            new = super().visit_call(c)
            name = getattr(c.op, "name", "")
            if name not in _ACCUMULATING_OPS or str(c.checked_type.dtype) != "float16":
                return new
            attrs = dict(c.attrs.items()) if c.attrs is not None else {}
            if attrs.get("out_dtype") not in (None, "", "float16"):
                return new
            if "out_dtype" in attrs:
                attrs["out_dtype"] = ""
            args = [transform.cast(a, "float32") if str(o.checked_type.dtype) == "float16"
                    else a for a, o in zip(new.args, c.args)]
            return transform.cast(Call(new.op, args, attrs), "float16")

    return Widen().visit(expr)
