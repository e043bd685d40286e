"""The layout hooks of operators for the AlterOpLayout pass, dispatched on the target (TVM's
``conv2d_alter_layout`` / ``dense_alter_layout`` generic functions behind the ops'
``FTVMAlterOpLayout``).

Per operator, two attributes:

* ``FTVMAlterOpLayout(call, inputs) -> (new_expr, out_layout) | None``: the target's rewrite of
  one typed call (see ``relay.transform.alter_op_layout`` for ``inputs``, the pass's layout
  services); None leaves the call as it is;
* ``FTVMLayoutDemand(call) -> [layout | None per argument] | None``: the layouts in which the
  target's rewrite of this call will read its arguments (None: the original layout), without
  rewriting anything; None when the call is not rewritten. The pass's demand analysis uses it
  to look ahead.

Both forward to a ``target.generic_func`` whose default does nothing; a target registers its
policy on the generic function under its key, in its own files (x86: ``x86_alter_op.py``,
registered for the key "cpu"). A target with no override leaves the graph unchanged.
"""

from __future__ import annotations

from typing import Any

from ....target import generic_func
from ..registry import register_alter_op_layout, register_op_attr

__all__ = ["conv2d_alter_layout", "conv2d_layout_demand", "dense_alter_layout"]


@generic_func
def conv2d_alter_layout(call: Any, inputs: Any) -> Any:
    """The rewrite of a typed ``nn.conv2d`` call for the current target (default: none)."""
    return None


@generic_func
def conv2d_layout_demand(call: Any) -> list[str | None] | None:
    """The argument layouts of the current target's rewrite of ``nn.conv2d`` (default: none)."""
    return None


@generic_func
def dense_alter_layout(call: Any, inputs: Any) -> Any:
    """The rewrite of a typed ``nn.dense`` call for the current target (default: none)."""
    return None


register_alter_op_layout("nn.conv2d", conv2d_alter_layout)
register_op_attr("nn.conv2d", "FTVMLayoutDemand", conv2d_layout_demand)
register_alter_op_layout("nn.dense", dense_alter_layout)
