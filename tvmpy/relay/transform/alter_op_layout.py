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
* **Layout propagation** (here, target-independent, driven by the blocked layouts the hooks
  produced; ``layout_rules.py``): layout-agnostic operators take the blocked layout of their
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

import math
from typing import Any

from ...target import Target, as_target, resolve_target
from ..expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ..op import transform as _tr
from ..op.numpy_impl import layout_transform_np
from ..op.registry import Op, make_call
from ..visitor import ExprFunctor
from .layout_demand import wanted_blocked
from .layout_rules import (
    POOLS,
    SharedTransforms,
    block_of,
    blocked,
    is_agnostic_elementwise,
    is_spatial_slice,
    tensor_shape,
)
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
        return self._alter.visit(self._args[i])[1]

    def plain(self, i: int) -> RelayExpr:
        """Argument ``i``, rewritten, in its original layout."""
        return self._alter.plain(self._args[i])

    def get(self, i: int, layout: str, src: str = "NCHW") -> RelayExpr:
        """Argument ``i`` (original layout ``src``), rewritten, in ``layout``."""
        return self._alter.convert(self._args[i], layout, src)

    def of_arg(self, i: int) -> AlterInputs:
        """The arguments of argument ``i`` (a call): for a hook that absorbs that call (e.g. a
        convolution taking over the ``nn.pad`` before it); the call itself is then rewritten
        only if something else reads it."""
        arg = self._args[i]
        if not isinstance(arg, Call):
            raise ValueError(f"AlterInputs.of_arg: argument {i} is not a call")
        return AlterInputs(self._alter, arg)


class _Alter(ExprFunctor):
    """``visit(e) -> (new_e, block)``: ``block`` is None when ``new_e`` has ``e``'s layout, or
    ``c`` when ``new_e`` holds the 4-D NCHW value of ``e`` as NCHW{c}c."""

    def __init__(self, wanted: set[int] | None = None) -> None:
        super().__init__()
        self.wanted = wanted  # ids wanted blocked (layout_demand); None: all
        self._transform = SharedTransforms()  # (e, src, dst) -> e in dst, shared

    # -- layout conversions -------------------------------------------------------------------

    def plain(self, e: RelayExpr) -> RelayExpr:
        """The rewritten ``e`` in its original layout."""
        new, blk = self.visit(e)
        return new if blk is None else self._transform(new, blocked(blk), "NCHW")

    def to_block(self, e: RelayExpr, c: int) -> RelayExpr:
        """The rewritten 4-D NCHW ``e`` as NCHW{c}c."""
        return self.convert(e, blocked(c))

    def convert(self, e: RelayExpr, layout: str, src: str = "NCHW") -> RelayExpr:
        """The rewritten ``e``, whose original layout is ``src``, in ``layout``."""
        new, blk = self.visit(e)
        if blk is not None and src == "NCHW":
            cur = blocked(blk)
        else:
            new, cur = self.plain(e), src
        return new if cur == layout else self._transform(new, cur, layout)

    def _broadcast_operand(self, e: RelayExpr, c: int) -> RelayExpr | None:
        """Operand ``e`` of a broadcast op whose 4-D NCHW output becomes NCHW{c}c."""
        new, blk = self.visit(e)
        if blk is not None:
            return self.to_block(e, c)
        shape = tensor_shape(e)
        if shape is None or len(shape) > 4:
            return None
        if len(shape) == 0:
            return new
        full = (1,) * (4 - len(shape)) + shape
        if not all(isinstance(s, int) for s in full[1:]):
            return None
        if full[1] == 1:  # constant along the channels: a unit block axis
            dims = (*shape, 1)
            if isinstance(new, Constant):
                return Constant(new.data.numpy().reshape(dims))
            return _tr.reshape(new, dims, allowzero=True)
        if full[1] % c:
            return None
        # NCHW -> NCHW{c}c on the 4-D padded shape, then the leading unit axes dropped again so
        # that a (C,1,1) operand becomes (C/c,1,1,c), as TVM does
        lead = 4 - len(shape)
        if isinstance(new, Constant):
            arr = layout_transform_np(new.data.numpy().reshape(full), "NCHW", blocked(c))
            return Constant(arr.reshape(arr.shape[lead:]))
        four = new if lead == 0 else _tr.reshape(new, full, allowzero=True)
        out = self._transform(four, "NCHW", blocked(c))
        return out if lead == 0 else _tr.reshape(out, _shape_after(full, c)[lead:], allowzero=True)

    # -- nodes --------------------------------------------------------------------------------
    def visit_var(self, v: Var) -> tuple[RelayExpr, int | None]:
        return v, None

    def visit_global_var(self, v: Any) -> tuple[RelayExpr, int | None]:
        return v, None

    def visit_constant(self, c: Constant) -> tuple[RelayExpr, int | None]:
        return c, None

    def visit_op(self, op: Op) -> tuple[Op, None]:
        return op, None

    def visit_tuple(self, t: Tuple) -> tuple[RelayExpr, int | None]:
        fields = [self.plain(f) for f in t.fields]
        same = all(a is b for a, b in zip(fields, t.fields))
        return (t if same else Tuple(fields)), None

    def visit_tuple_getitem(self, t: TupleGetItem) -> tuple[RelayExpr, int | None]:
        v = self.plain(t.tuple_value)
        return (t if v is t.tuple_value else TupleGetItem(v, t.index)), None

    def visit_let(self, let: Let) -> tuple[RelayExpr, int | None]:
        return Let(let.var, self.plain(let.value), self.plain(let.body)), None

    def visit_if(self, i: If) -> tuple[RelayExpr, int | None]:
        return If(self.plain(i.cond), self.plain(i.true_branch), self.plain(i.false_branch)), None

    def visit_function(self, f: Function) -> tuple[RelayExpr, int | None]:
        if f.attrs.get("Primitive"):
            return f, None
        body = self.plain(f.body)
        return (f if body is f.body else Function(f.params, body, f.ret_type, attrs=f.attrs)), None

    def visit_call(self, c: Call) -> tuple[RelayExpr, int | None]:
        if isinstance(c.op, Op):
            alter = c.op.get_attr("FTVMAlterOpLayout")
            res = self._hook(alter, c) if alter is not None else None
            if res is None:
                res = self._propagate(c)
            if res is not None:
                return res
        op = c.op if isinstance(c.op, Op) else self.plain(c.op)
        args = [self.plain(a) for a in c.args]
        if op is c.op and all(a is b for a, b in zip(args, c.args)):
            return c, None
        return Call(op, args, c.attrs), None

    def _hook(self, alter: Any, c: Call) -> tuple[RelayExpr, int | None] | None:
        """The target's rewrite of ``c`` (its op's ``FTVMAlterOpLayout``), or None."""
        out = alter(c, AlterInputs(self, c))
        if out is None:
            return None
        new, layout = out
        blk = block_of(layout)
        if layout is not None and blk is None:
            raise ValueError(f"FTVMAlterOpLayout of {c.op.name}: the result layout must be None "
                             f"or NCHW{{c}}c, got {layout!r}")
        return new, blk

    def _propagate(self, c: Call) -> tuple[RelayExpr, int] | None:
        """``c`` in the blocked layout of its input when it is layout-agnostic, else None."""
        name = c.op.name
        if name == "nn.bias_add":
            return self._bias_add(c)
        if name in POOLS:
            return self._pool(c)
        if name == "nn.pad":
            return self._pad(c)
        if name == "strided_slice":
            return self._spatial_slice(c)
        if name == "concatenate":
            return self._concatenate(c)
        if name == "nn.stride_interleave":
            return self._stride_interleave(c)
        if is_agnostic_elementwise(c):
            return self._broadcast(c)
        return None

    # -- layout propagation (None: not applicable here, the generic rule applies) ------------
    def _bias_add(self, c: Call) -> tuple[RelayExpr, int] | None:
        data, blk = self.visit(c.args[0])
        shape = tensor_shape(c.args[0])
        if blk is None or shape is None or c.attrs.axis not in (1, -3):
            return None
        bias = self.plain(c.args[1])
        dims = (shape[1] // blk, 1, 1, blk)
        if isinstance(bias, Constant):
            bias = Constant(bias.data.numpy().reshape(dims))
        else:
            bias = _tr.reshape(bias, dims, allowzero=True)
        return make_call("add", [data, bias]), blk

    def _pool(self, c: Call) -> tuple[RelayExpr, int] | None:
        data, blk = self.visit(c.args[0])
        if blk is None or c.attrs.layout != "NCHW":
            return None
        if c.op.name == "nn.adaptive_avg_pool2d":  # only its global (1, 1) form is blocked
            if tuple(c.attrs.output_size) != (1, 1):
                return None
            return make_call("nn.global_avg_pool2d", [data], {"layout": blocked(blk)}), blk
        return Call(c.op, [data], {**c.attrs.values, "layout": blocked(blk)}), blk

    def _pad(self, c: Call) -> tuple[RelayExpr, int] | None:
        data, blk = self.visit(c.args[0])
        pw = tuple(tuple(p) for p in c.attrs.pad_width)
        if blk is None or len(pw) != 4 or pw[1] != (0, 0):
            return None  # padding the channels would change the blocks
        return Call(c.op, [data], {**c.attrs.values, "pad_width": (*pw, (0, 0))}), blk

    def _spatial_slice(self, c: Call) -> tuple[RelayExpr, int] | None:
        data, blk = self.visit(c.args[0])
        if blk is None or not is_spatial_slice(c):
            return None  # (H and W are axes 2 and 3 of NCHW{c}c too)
        return Call(c.op, [data], c.attrs), blk

    def _concatenate(self, c: Call) -> tuple[RelayExpr, int] | None:
        tup = c.args[0]
        out = tensor_shape(c)
        if not isinstance(tup, Tuple) or out is None or len(out) != 4:
            return None
        if c.attrs.axis not in (1, -3):
            return None
        blocks = [self.visit(f)[1] for f in tup.fields]
        if all(b is None for b in blocks):
            return None
        if None in blocks and self.wanted is not None and id(c) not in self.wanted:
            return None  # an NCHW field would be transformed in, the result back out
        shapes = [tensor_shape(f) for f in tup.fields]
        if any(s is None or len(s) != 4 or not isinstance(s[1], int) for s in shapes):
            return None
        g = 0  # one block for all: divides every block and every NCHW field's channels
        for b, sh in zip(blocks, shapes):
            g = math.gcd(g, b or sh[1])
        fields = [self.to_block(f, g) for f in tup.fields]
        return make_call("concatenate", [Tuple(fields)], {"axis": 1}), g

    def _stride_interleave(self, c: Call) -> tuple[RelayExpr, int] | None:
        tup = c.args[0]
        if not isinstance(tup, Tuple) or c.attrs.layout != "NCHW":
            return None
        blocks = [self.visit(f)[1] for f in tup.fields]
        known = [b for b in blocks if b is not None]
        if not known or (None in blocks and self.wanted is not None
                         and id(c) not in self.wanted):
            return None
        g = 0  # one block for all parts (of one shape): divides every block
        for b in known:
            g = math.gcd(g, b)
        fields = [self.to_block(f, g) for f in tup.fields]
        return make_call("nn.stride_interleave", [Tuple(fields)],
                         {**c.attrs.values, "layout": blocked(g)}), g

    def _broadcast(self, c: Call) -> tuple[RelayExpr, int] | None:
        out = tensor_shape(c)
        if out is None or len(out) != 4 or not isinstance(out[1], int):
            return None
        blocks = [self.visit(a)[1] for a in c.args]
        blk = next((b for b in blocks if b is not None), None)
        if blk is None or out[1] % blk:
            return None
        if self.wanted is not None and id(c) not in self.wanted and any(
                b is None and _is_whole_tensor(a) for a, b in zip(c.args, blocks)):
            return None  # one transform either way: back to NCHW saves the one at the end
        args = [self._broadcast_operand(a, blk) for a in c.args]
        if any(a is None for a in args):
            return None
        return Call(c.op, args, c.attrs), blk


def _is_whole_tensor(e: RelayExpr) -> bool:
    """A non-constant operand larger than a per-channel vector (its transform costs a copy)."""
    shape = tensor_shape(e)
    if isinstance(e, Constant) or shape is None:
        return False
    return any(not (isinstance(d, int) and d == 1) for i, d in enumerate(shape)
               if i != len(shape) - 3)


def _shape_after(full: tuple, c: int) -> tuple:
    """NCHW shape ``full`` as NCHW{c}c."""
    n, ch, h, w = full
    return (n, ch // c, h, w, c)


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
