"""The layout rules of AlterOpLayout (x86 NCHW{c}c): which convolutions are blocked and with
which block sizes, and which operators are layout-agnostic. Shared by the rewrite
(``alter_op_layout.py``) and the demand analysis (``layout_demand.py``)."""

from __future__ import annotations

from ...target import Target
from ..expr import Call, RelayExpr
from ..op.registry import Op, OpPattern
from ..ty import TensorType

__all__ = ["MAX_BLOCK", "conv_blocks", "is_agnostic_elementwise", "blocked", "tensor_shape",
           "POOLS", "is_depthwise"]

MAX_BLOCK = 16
"""Largest channel block: 16 fp32 lanes (one AVX-512 register)."""

# elementwise/broadcast ops are layout-agnostic when their attributes are only these (no axis,
# shape, repeats ...: those name positions of the original layout)
AGNOSTIC_ATTRS = frozenset({"a_min", "a_max", "alpha", "approximate", "dtype"})
POOLS = frozenset({"nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d",
                   "nn.global_max_pool2d", "nn.adaptive_avg_pool2d"})


def is_depthwise(call: Call) -> bool:
    """A typed NCHW/OIHW ``nn.conv2d`` with one filter per input channel (multiplier 1)."""
    d, w = (x.checked_type for x in call.args)
    c = d.shape[1]
    return call.attrs.groups == c and w.shape[0] == c and w.shape[1] == 1 and c != 1


def conv_blocks(call: Call, target: Target | None = None) -> tuple[int, int] | None:
    """``(ic_bn, oc_bn)`` when this typed ``nn.conv2d`` call is rewritten to NCHW{c}c, else None.
    The blocks: the largest divisors of the channel counts that fit the target's vector of
    that dtype (at most ``MAX_BLOCK``), as TVM's x86 default config.

    The rule: a plain (groups 1) or depthwise (multiplier 1) NCHW/OIHW convolution with
    static shapes (the batch may be symbolic) and a float dtype. Measured (single op, same
    run, see the docstring of tests/relay/test_pass_alter_op_layout.py): the blocked schedule
    was never slower than the NCHW one: 1.1-3x on ResNet-18's and MobileNetV2's plain layers,
    1.9-2.6x on MobileNetV2's depthwise ones; the blocked layout then flows on to the next
    convolution without a transform. Other grouped convolutions keep NCHW (the NCHWc compute
    here has no general groups).
    """
    a = call.attrs
    if a.data_layout != "NCHW" or a.kernel_layout != "OIHW" or a.out_layout not in ("", "NCHW"):
        return None
    d, w = (x.checked_type for x in call.args)
    if not (isinstance(d, TensorType) and isinstance(w, TensorType)):
        return None
    if len(d.shape) != 4 or not all(isinstance(s, int) for s in (*d.shape[1:], *w.shape)):
        return None  # the batch may be symbolic
    if not d.dtype.startswith("float") or d.dtype != w.dtype:
        return None
    if any(isinstance(s, int) and s == 0 for s in (*d.shape, *w.shape)):
        return None  # an empty convolution: its lowering computes nothing, in any layout
    if a.groups != 1 and not is_depthwise(call):
        return None
    from ...topi.nn.conv2d import conv2d_infer_layout

    lanes = min(MAX_BLOCK, target.vector_lanes(d.dtype)) if target is not None else MAX_BLOCK
    return conv2d_infer_layout(int(d.shape[1]), int(w.shape[0]), lanes)


def blocked(c: int) -> str:
    """The blocked layout name of block ``c``: "NCHW16c"."""
    return f"NCHW{c}c"


def tensor_shape(e: RelayExpr) -> tuple | None:
    """The inferred shape of ``e`` (None when it is not a tensor or not typed)."""
    t = getattr(e, "checked_type", None)
    return tuple(t.shape) if isinstance(t, TensorType) else None


def is_agnostic_elementwise(call: Call) -> bool:
    """An elementwise/broadcast operator call that computes the same in any layout."""
    return (isinstance(call.op, Op) and call.op.pattern <= OpPattern.BROADCAST
            and set(call.attrs.values) <= AGNOSTIC_ATTRS)
