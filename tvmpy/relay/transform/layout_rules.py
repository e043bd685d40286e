"""The target-independent layout rules of AlterOpLayout: the channel-blocked layout family
``NCHW{c}c`` of a 4-D NCHW value, and which operators compute the same in it (elementwise and
broadcast ops with no positional attributes, the 2-D pools). Shared by the rewrite
(``alter_op_layout.py``) and the demand analysis (``layout_demand.py``); which calls enter the
blocked layout in the first place is the target's choice (the ops' ``FTVMAlterOpLayout``)."""

from __future__ import annotations

from typing import Any

from ...tir.data_layout import block_of, blocked
from ..expr import Call, Constant, RelayExpr
from ..op import transform as _tr
from ..op.numpy_impl import layout_transform_np
from ..op.registry import Op, OpPattern
from ..ty import TensorType

__all__ = ["is_agnostic_elementwise", "is_spatial_slice", "blocked", "block_of", "tensor_shape",
           "POOLS", "SharedTransforms", "is_permutation"]

# elementwise/broadcast ops are layout-agnostic when their attributes are only these (no axis,
# shape, repeats ...: those name positions of the original layout)
AGNOSTIC_ATTRS = frozenset({"a_min", "a_max", "alpha", "approximate", "dtype"})
POOLS = frozenset({"nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d",
                   "nn.global_max_pool2d", "nn.adaptive_avg_pool2d"})


def tensor_shape(e: RelayExpr) -> tuple | None:
    """The inferred shape of ``e`` (None when it is not a tensor or not typed)."""
    t = getattr(e, "checked_type", None)
    return tuple(t.shape) if isinstance(t, TensorType) else None


def is_agnostic_elementwise(call: Call) -> bool:
    """An elementwise/broadcast operator call that computes the same in any layout."""
    return (isinstance(call.op, Op) and call.op.pattern <= OpPattern.BROADCAST
            and set(call.attrs.values) <= AGNOSTIC_ATTRS)


def is_spatial_slice(call: Call) -> bool:
    """A ``strided_slice`` of a 4-D NCHW value along H and W only (``axes`` given, within 2-3):
    the same call slices NCHW{c}c."""
    shape = tensor_shape(call)
    axes = call.attrs.values.get("axes") if isinstance(call.op, Op) else None
    return (call.op.name == "strided_slice" and shape is not None and len(shape) == 4
            and axes is not None and len(axes) > 0 and all(a in (2, 3, -1, -2) for a in axes))


def is_permutation(src: str, dst: str) -> bool:
    """``dst`` reorders the axes of ``src`` (plain letters, no blocking): "NCHW" / "NHWC"."""
    return (src.isalpha() and src.isupper() and len(src) == len(dst)
            and sorted(src) == sorted(dst) and len(set(src)) == len(src))


class SharedTransforms:
    """The layout conversions a layout pass adds: ``convert(e, src, dst)`` is one
    ``layout_transform`` node per (value, target layout), shared by every consumer; a constant
    is transformed at compile time; the inverse of a permuting ``layout_transform`` is its
    input (no transform pair)."""

    def __init__(self) -> None:
        self._made: dict[tuple[int, str], RelayExpr] = {}
        self._keep_alive: list[Any] = []  # ids in the keys stay valid

    def __call__(self, e: RelayExpr, src: str, dst: str) -> RelayExpr:
        if src == dst:
            return e
        key = (id(e), dst)
        if key not in self._made:
            self._keep_alive.append(e)
            if isinstance(e, Constant):
                self._made[key] = Constant(layout_transform_np(e.data.numpy(), src, dst))
            elif (isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "layout_transform"
                  and e.attrs.src_layout == dst and e.attrs.dst_layout == src
                  and is_permutation(src, dst)):
                self._made[key] = e.args[0]
            else:
                self._made[key] = _tr.layout_transform(e, src, dst)
        return self._made[key]
