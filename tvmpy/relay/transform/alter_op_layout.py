"""AlterOpLayout: let each operator call take the layout its target implementation wants
(registered per op and per target as ``FTVMAlterOpLayout``), and keep the altered layouts
flowing through the operators that do not care about them, so that ``layout_transform`` appears
only where a producer and a consumer disagree (TVM's AlterOpLayout + layout inference, paper
section 3).

What it does
The split, on the dataflow graph of every relay Function (the target is the pass's, else
``Target.current()``, else "llvm"; the hooks run with it as the current target):

* **Target policy** (the ops' attributes, target-dispatched ``generic_func``s registered in the
  target's own files, see ``relay/op/strategy/alter_layout.py``): ``FTVMAlterOpLayout(call,
  inputs)`` returns ``(new_expr, out_layout)`` or None, where ``out_layout`` is None (the call's
  own layout) or a channel-blocked ``NCHW{c}c`` of the 4-D NCHW result; ``inputs`` gives the
  hook the call's arguments as rewritten so far: ``inputs.block(i)`` (the block ``c`` argument
  ``i`` is in, or None), ``inputs.plain(i)`` (argument ``i`` in its original layout) and
  ``inputs.get(i, layout, src="NCHW")`` (argument ``i``, whose original layout is ``src``, in
  ``layout``: a shared ``layout_transform``, or a transformed constant). ``FTVMLayoutDemand(call)``
  says, without rewriting, in which layouts the hook would read the arguments (the demand
  analysis, ``layout_demand.py``). With no hook for the target (e.g. the x86 NCHWc convolution,
  the Winograd choice and the packed dense of ``relay/op/strategy/x86_alter_op.py`` on a
  target without the key "cpu") the graph is unchanged.
* **Layout propagation** (target-independent, driven by the blocked layouts the hooks
  produced: the ops' layout rules of ``layout_rules.py``, the same ones ConvertLayout follows,
  applied by the rewriter both share, ``layout_rewrite.py``): layout-agnostic operators take the blocked layout of their
  input: the elementwise ops, the broadcast ops whose other operands are scalars, per-channel
  vectors (``(C,1,1)`` becomes ``(C/c,1,1,c)``; constants are transformed here) or whole
  tensors (transformed to the block when something after the op wants the blocked layout,
  ``layout_demand.py``; else the op runs in NCHW), ``nn.bias_add`` on the channel axis
  (becomes ``add`` with the reshaped bias), max/avg pooling and the global pools
  (``layout="NCHW{c}c"``; an adaptive average pool to 1x1 becomes the global one), ``nn.pad``
  and ``strided_slice`` of H and W, ``concatenate`` along the channels (inputs of different
  blocks meet in the gcd of their blocks), and ``nn.stride_interleave`` (the phases of a
  transposed convolution, ``conv_transpose.py``) in the gcd of its parts' blocks. Every other
  consumer (dense, reshape, softmax, the function's result, ...) gets its input back in NCHW through one ``layout_transform`` shared by all such
  consumers.

When valid
Any dataflow graph: each rewrite computes the same values in another memory order,
and every value leaves the blocked region in its original layout (the function's type is
unchanged). The result is re-typed; run FoldConstant after it (relay.build does) to fold the
transforms of bound weights.

Example
    before:  %0 = nn.conv2d(%x, %W, padding=[1, 1, 1, 1]); nn.relu(%0)           (x86, 8 lanes)
    after:   %0 = nn.contrib_conv2d_NCHWc(%x, %W8, data_layout="NCHW", out_layout="NCHW8c");
             layout_transform(nn.relu(%0), src_layout="NCHW8c", dst_layout="NCHW")
"""

from __future__ import annotations

from typing import Any

from ...target import Target, as_target, resolve_target
from ..expr import Call, RelayExpr
from .layout_demand import wanted_blocked
from .layout_rewrite import LayoutRewriter
from .layout_rules import Layout, block_of, blocked
from .pass_infra import FunctionPass

__all__ = ["AlterOpLayout", "AlterInputs"]


class AlterInputs:
    """The arguments of one call, as a ``FTVMAlterOpLayout`` hook sees them (see the module
    docstring): each is rewritten (and converted) only when the hook asks for it."""

    __slots__ = ("_alter", "_args")

    def __init__(self, alter: _Alter, call: Call) -> None:
        self._alter = alter
        self._args = call.args

    def __len__(self) -> int:
        return len(self._args)

    def block(self, i: int) -> int | None:
        """The block ``c`` when argument ``i`` is rewritten as NCHW{c}c, else None."""
        lay = self._alter.layout(self._args[i])
        return None if lay is None else lay.block

    def plain(self, i: int) -> RelayExpr:
        """Argument ``i``, rewritten, in its original layout."""
        return self._alter.plain(self._args[i])

    def get(self, i: int, layout: str, src: str = "NCHW") -> RelayExpr:
        """Argument ``i`` (original layout ``src``), rewritten, in ``layout``."""
        return self._alter.get(self._args[i], Layout(src, layout))

    def of_arg(self, i: int) -> AlterInputs:
        """The arguments of argument ``i`` (a call): for a hook that absorbs that call (e.g. a
        convolution taking over the ``nn.pad`` before it); the call itself is then rewritten
        only if something else reads it."""
        arg = self._args[i]
        if not isinstance(arg, Call):
            raise ValueError(f"AlterInputs.of_arg: argument {i} is not a call")
        return AlterInputs(self._alter, arg)


class _Alter(LayoutRewriter):
    """The target's hooks enter NCHW{c}c; the rest follows the layout rules, where a whole
    tensor is converted only for a result wanted blocked (``layout_demand``)."""

    def __init__(self, wanted: set[int] | None = None) -> None:
        super().__init__()
        self._wanted = wanted  # ids wanted blocked (layout_demand); None: all

    def wanted(self, call: Call) -> bool:
        return self._wanted is None or id(call) in self._wanted

    def convert(self, c: Call) -> tuple[RelayExpr, Layout | None] | None:
        """The target's rewrite of ``c`` (its op's ``FTVMAlterOpLayout``), or None."""
        alter = c.op.get_attr("FTVMAlterOpLayout")
        out = None if alter is None else alter(c, AlterInputs(self, c))
        if out is None:
            return None
        new, layout = out
        blk = block_of(layout)
        if layout is not None and blk is None:
            raise ValueError(f"FTVMAlterOpLayout of {c.op.name}: the result layout must be None "
                             f"or NCHW{{c}}c, got {layout!r}")
        return new, (None if blk is None else Layout("NCHW", blocked(blk)))


class AlterOpLayout(FunctionPass):
    """``relay.transform.AlterOpLayout()`` (opt_level 3, as in TVM): the ops' registered
    layout rewrites for the target, see the module docstring. ``target``: the target to alter
    for (default: the current ``with Target(...)``, else llvm)."""

    def __init__(self, target: Target | str | None = None) -> None:
        super().__init__(name="AlterOpLayout", opt_level=3)
        self.target = None if target is None else as_target(target)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        target = resolve_target(self.target)
        with target:  # the ops' hooks dispatch on the current target
            new, _ = _Alter(wanted_blocked(func.body)).visit(func)
        return new
