"""AlterOpLayout: rewrite x86 NCHW convolutions into the blocked ``NCHW{c}c`` layout
(``nn.contrib_conv2d_NCHWc``) and keep the blocked layout flowing through the operators that
do not care about it, so that ``layout_transform`` appears only where a producer and a consumer
disagree (TVM's AlterOpLayout + layout inference, paper section 3).

What it does, on the dataflow graph of every relay Function (the target is
``Target.current()``, "llvm" when none is set; other than llvm/c targets: nothing changes):

* ``nn.conv2d`` (NCHW data, OIHW kernel, groups 1 or depthwise, static shape; see
  ``conv_blocks``) becomes ``nn.contrib_conv2d_NCHWc`` with data ``NCHW{ic_bn}c``, kernel
  ``OIHW{ic_bn}i{oc_bn}o`` and output ``NCHW{oc_bn}c`` (depthwise: kernel ``OIHW1i{c}o``, data
  and output ``NCHW{c}c``); the block sizes are the largest divisors of the channel counts
  that fit one vector register of the target (16 fp32 lanes with AVX-512, 8 with AVX2; at
  most 16), as TVM's x86 default config (``topi.nn.conv2d_infer_layout``).
  A constant kernel is transformed here, in numpy (no layout_transform is left for it); a
  kernel that is a Var gets a ``layout_transform`` call (FoldConstant folds it once bound).
  A 3x3 stride-1 one may become ``nn.contrib_conv2d_winograd_nchwc`` instead (same layouts,
  the weight Winograd-transformed here): ``conv_algorithm.py`` says when.
* Layout-agnostic operators take the blocked layout of their input: the elementwise ops, the
  broadcast ops whose other operands are scalars, per-channel vectors (``(C,1,1)`` becomes
  ``(C/c,1,1,c)``; constants are transformed here) or whole tensors (transformed to the block
  when something after the op wants the blocked layout, ``layout_demand.py``; else the op
  runs in NCHW),
  ``nn.bias_add`` on the channel axis (becomes ``add`` with the reshaped bias), max/avg
  pooling and the global pools (``layout="NCHW{c}c"``; an adaptive average pool to 1x1
  becomes the global one), ``nn.pad`` of H and W, and ``concatenate`` along the channels
  (inputs of different blocks meet in the gcd of their blocks).
* Every other consumer (dense, reshape, softmax, a grouped conv, the function's result, ...)
  gets its input back in NCHW through one ``layout_transform`` shared by all such consumers.

Valid for any dataflow graph: each rewrite computes the same values in another memory order,
and every value leaves the blocked region in its original layout (the function's type is
unchanged). The result is re-typed; run FoldConstant after it (relay.build does) to fold the
transforms of bound weights.
"""

from __future__ import annotations

import math
from typing import Any

from ...target import Target
from ..expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ..op import transform as _tr
from ..op.numpy_impl import layout_transform_np
from ..op.registry import Op, make_call
from ..visitor import ExprFunctor
from .conv_algorithm import winograd_tile
from .layout_demand import wanted_blocked
from .layout_rules import (
    MAX_BLOCK,
    POOLS,
    blocked,
    conv_blocks,
    is_agnostic_elementwise,
    tensor_shape,
)
from .pass_infra import FunctionPass

__all__ = ["AlterOpLayout", "conv_blocks", "MAX_BLOCK"]

def _is_x86(target: Any) -> bool:
    kind = str(getattr(target, "kind", target) or "llvm").split()[0]
    return kind in ("llvm", "c")


class _Alter(ExprFunctor):
    """``visit(e) -> (new_e, block)``: ``block`` is None when ``new_e`` has ``e``'s layout, or
    ``c`` when ``new_e`` holds the 4-D NCHW value of ``e`` as NCHW{c}c."""

    def __init__(self, target: Target | None = None, wanted: set[int] | None = None) -> None:
        super().__init__()
        self.target = target
        self.wanted = wanted  # ids wanted blocked (layout_demand); None: all
        self._conv: dict[tuple[int, str], RelayExpr] = {}  # shared layout transforms
        self._keep_alive: list[Any] = []

    # -- layout conversions -------------------------------------------------------------------
    def _transform(self, e: RelayExpr, src: str, dst: str) -> RelayExpr:
        key = (id(e), dst)
        if key not in self._conv:
            self._keep_alive.append(e)
            if isinstance(e, Constant):
                self._conv[key] = Constant(layout_transform_np(e.data.numpy(), src, dst))
            else:
                self._conv[key] = _tr.layout_transform(e, src, dst)
        return self._conv[key]

    def plain(self, e: RelayExpr) -> RelayExpr:
        """The rewritten ``e`` in its original layout."""
        new, blk = self.visit(e)
        return new if blk is None else self._transform(new, blocked(blk), "NCHW")

    def to_block(self, e: RelayExpr, c: int) -> RelayExpr:
        """The rewritten 4-D NCHW ``e`` as NCHW{c}c."""
        new, blk = self.visit(e)
        if blk == c:
            return new
        return self._transform(new, "NCHW" if blk is None else blocked(blk), blocked(c))

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
            name = c.op.name
            res = None
            if name == "nn.conv2d":
                res = self._conv2d(c)
            elif name == "nn.bias_add":
                res = self._bias_add(c)
            elif name in POOLS:
                res = self._pool(c)
            elif name == "nn.pad":
                res = self._pad(c)
            elif name == "concatenate":
                res = self._concatenate(c)
            elif is_agnostic_elementwise(c):
                res = self._broadcast(c)
            if res is not None:
                return res
        op = c.op if isinstance(c.op, Op) else self.plain(c.op)
        args = [self.plain(a) for a in c.args]
        alter = c.op.get_attr("FTVMAlterOpLayout") if isinstance(c.op, Op) else None
        if alter is not None:  # an op's own x86 rewrite (nn.dense -> contrib_dense_pack)
            new = alter(c, args)
            if new is not None:
                return new, None
        if op is c.op and all(a is b for a, b in zip(args, c.args)):
            return c, None
        return Call(op, args, c.attrs), None

    # -- rewrites (None: not applicable here, the generic rule applies) ----------------------
    def _conv2d(self, c: Call) -> tuple[RelayExpr, int] | None:
        blocks = conv_blocks(c, self.target)
        if blocks is None:
            return None
        ic_bn, oc_bn = blocks
        groups = c.attrs.groups
        if groups != 1:  # depthwise: one block in and out; keep the input's block if it fits
            blk = self.visit(c.args[0])[1]
            if blk is not None and groups % blk == 0:
                ic_bn = oc_bn = blk
            kl = f"OIHW1i{oc_bn}o"
        else:
            kl = f"OIHW{ic_bn}i{oc_bn}o"
        data = self.to_block(c.args[0], ic_bn)
        a = c.attrs
        tile = winograd_tile(c, ic_bn, oc_bn, self.target) if groups == 1 else None
        if tile is not None:
            return make_call("nn.contrib_conv2d_winograd_nchwc", [
                data, self._winograd_weight(self.plain(c.args[1]), tile, oc_bn)], {
                "tile_size": tile, "padding": a.padding, "channels": a.channels,
                "kernel_size": (3, 3), "data_layout": blocked(ic_bn),
                "out_layout": blocked(oc_bn), "out_dtype": a.out_dtype}), oc_bn  # fmt: skip
        kernel = self._transform(self.plain(c.args[1]), "OIHW", kl)
        out = make_call("nn.contrib_conv2d_NCHWc", [data, kernel], {
            "strides": a.strides, "padding": a.padding, "dilation": a.dilation, "groups": groups,
            "channels": a.channels, "kernel_size": a.kernel_size,
            "data_layout": blocked(ic_bn), "kernel_layout": kl, "out_layout": blocked(oc_bn),
            "out_dtype": a.out_dtype})  # fmt: skip
        return out, oc_bn

    def _winograd_weight(self, w: RelayExpr, tile: int, oc_bn: int) -> RelayExpr:
        """The Winograd transform of a 3x3 OIHW weight: computed here for a constant, else a
        transform call (folded by FoldConstant once the weight is bound)."""
        if isinstance(w, Constant):
            from ...topi.nn.winograd import winograd_weight_transform_np

            return Constant(winograd_weight_transform_np(w.data.numpy(), tile, oc_bn))
        return make_call("nn.contrib_conv2d_winograd_weight_transform", [w],
                         {"tile_size": tile, "oc_bn": oc_bn})

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
    """``relay.transform.AlterOpLayout()`` (opt_level 3, as in TVM): x86 conv2d to NCHW{c}c,
    see the module docstring. ``target``: the target to alter for (default: the current
    ``with Target(...)``, else llvm)."""

    def __init__(self, target: Target | str | None = None) -> None:
        super().__init__(name="AlterOpLayout", opt_level=3)
        self.target = None if target is None else Target(target)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        target = self.target or Target.current() or Target("llvm")
        if not _is_x86(target):
            return func
        new, _ = _Alter(target, wanted_blocked(func.body, target)).visit(func)
        return new
