"""Which values of a graph would rather be in the blocked layout (AlterOpLayout's demand
analysis): a value is *wanted blocked* when a call reads it in a blocked layout once the
target has rewritten that call (its op's ``FTVMLayoutDemand`` for the current target, e.g. the
data of an x86 NCHWc convolution), or when a layout-agnostic consumer (elementwise/broadcast
op, pool, pad, bias_add, channel concat) of it is itself wanted blocked.

AlterOpLayout uses it where following the blocked operand is not free: a broadcast op or a
concatenate that meets a blocked operand and a whole NCHW tensor must transform one of them;
it goes blocked only when its own result is wanted blocked (else the blocked operand goes
back to NCHW, and nothing has to be transformed back later).
"""

from __future__ import annotations

from typing import Any

from ..expr import Call, RelayExpr, Tuple
from ..op.registry import Op
from ..visitor import post_order_visit
from .layout_rules import POOLS, block_of, is_agnostic_elementwise, is_spatial_slice, tensor_shape

__all__ = ["wanted_blocked"]


def _passes_layout(user: Any, index: int) -> bool:
    """``user`` keeps argument ``index`` in the blocked layout (its result blocked too)."""
    if isinstance(user, Tuple):  # a concatenate's fields (checked at the concatenate)
        return True
    if not isinstance(user, Call) or not isinstance(user.op, Op):
        return False
    name = user.op.name
    shape = tensor_shape(user)
    if shape is None or len(shape) != 4:
        return False
    if name in POOLS:
        return user.attrs.layout == "NCHW" and (
            name != "nn.adaptive_avg_pool2d" or tuple(user.attrs.output_size) == (1, 1))
    if name == "nn.pad":
        return tuple(user.attrs.pad_width[1]) == (0, 0)
    if name == "nn.bias_add":
        return index == 0 and user.attrs.axis in (1, -3)
    if name == "concatenate":
        return user.attrs.axis in (1, -3)
    if name == "strided_slice":
        return is_spatial_slice(user)
    if name == "nn.stride_interleave":
        return user.attrs.layout == "NCHW"
    return is_agnostic_elementwise(user)


def _demand(user: Any) -> list[str | None] | None:
    """The argument layouts of the target's rewrite of ``user`` (None: not rewritten)."""
    if not isinstance(user, Call) or not isinstance(user.op, Op):
        return None
    fdemand = user.op.get_attr("FTVMLayoutDemand")
    return None if fdemand is None else fdemand(user)


def wanted_blocked(body: RelayExpr) -> set[int]:
    """The ids of the nodes under ``body`` whose value is wanted in the blocked layout (the
    hooks see the current target)."""
    order: list[Any] = []
    post_order_visit(body, order.append)
    users: dict[int, list[tuple[Any, int]]] = {}
    for node in order:
        kids = node.args if isinstance(node, Call) else (
            node.fields if isinstance(node, Tuple) else ())
        for i, k in enumerate(kids):
            users.setdefault(id(k), []).append((node, i))
    demands: dict[int, list[str | None] | None] = {}
    wanted: set[int] = set()
    for node in reversed(order):  # every user before what it uses
        for user, i in users.get(id(node), ()):
            if id(user) not in demands:
                demands[id(user)] = _demand(user)
            demand = demands[id(user)]
            if (demand is not None and block_of(demand[i]) is not None) or (
                    demand is None and id(user) in wanted and _passes_layout(user, i)):
                wanted.add(id(node))
                break
    return wanted
