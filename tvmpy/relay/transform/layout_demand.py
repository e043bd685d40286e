"""Which values of a graph would rather be in the blocked layout (AlterOpLayout's demand
analysis): a value is *wanted blocked* when a call reads it in a blocked layout once the
target has rewritten that call (its op's ``FTVMLayoutDemand`` for the current target, e.g. the
data of an x86 NCHWc convolution), or when a layout-agnostic consumer (elementwise/broadcast
op, pool, pad, bias_add, channel concat) of it is itself wanted blocked. Whether a consumer
carries the blocked layout is its layout rule's answer (``layout_rules.py``, asked without
rewriting), the same rule AlterOpLayout then applies.

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
from .layout_rules import Layout, block_of, blocked, layout_rule, tensor_shape

__all__ = ["wanted_blocked", "passes_blocked_layout"]

#: the layout an argument is asked about in: blocked (the block does not matter here)
_PROBE = Layout("NCHW", blocked(1))


class _Probe:
    """The ``LayoutContext`` of a question to a layout rule: argument ``index`` of ``user``
    (each field, for a tuple) arrives blocked, the others in NCHW, the result is wanted."""

    def __init__(self, user: Call, index: int) -> None:
        arg = user.args[index]
        self._blocked = {id(arg)} | ({id(f) for f in arg.fields} if isinstance(arg, Tuple)
                                     else set())

    def layout(self, e: RelayExpr) -> Layout | None:
        return _PROBE if id(e) in self._blocked else None

    def wanted(self, call: Call) -> bool:
        return True

    def get(self, e: RelayExpr, layout: Layout) -> RelayExpr:
        raise AssertionError("layout_demand asks the rules; it builds nothing")

    def plain(self, e: RelayExpr) -> RelayExpr:
        raise AssertionError("layout_demand asks the rules; it builds nothing")

    def transform(self, e: RelayExpr, src: str, dst: str) -> RelayExpr:
        raise AssertionError("layout_demand asks the rules; it builds nothing")


def passes_blocked_layout(user: Any, index: int) -> bool:
    """``user`` keeps argument ``index`` in the blocked layout (its result blocked too): its
    layout rule says so."""
    if isinstance(user, Tuple):  # a concatenate's fields (checked at the concatenate)
        return True
    if not isinstance(user, Call) or not isinstance(user.op, Op):
        return False
    shape = tensor_shape(user)
    rule = layout_rule(user)
    if shape is None or len(shape) != 4 or rule is None:
        return False
    prop = rule(user, _Probe(user, index))
    return prop is not None and prop.out is not None and prop.out.block is not None


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
                    demand is None and id(user) in wanted and passes_blocked_layout(user, i)):
                wanted.add(id(node))
                break
    return wanted
