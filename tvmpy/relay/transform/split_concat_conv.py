"""SplitConcatConv: a convolution over a channel concatenation as the sum of convolutions over
its parts.

What it does
A ``nn.conv2d`` (NCHW / OIHW, one group, constant weight) whose input is a ``concatenate``
along the channels, used by nothing else, is linear in each part: ``conv(concat(a, b), W) =
conv(a, W[:, :Ca]) + conv(b, W[:, Ca:])``. The concatenation's copy (every channel of every
part written and read once more) is gone; the parts' convolutions add into one output (the
second one's epilogue, after fusion). It pays when the output is much smaller than the
concatenation: SqueezeNet's fire modules (concat of the two expand convs, then a squeeze conv
to 1/8 of the channels), so only convolutions with at most 1/``MIN_SHRINK`` of the
concatenation's channels are rewritten.

When valid
Exact in real arithmetic for any window, stride, padding and dilation (each part sees the
same windows); the sum's order of additions differs. Skipped: grouped convolutions, other
layouts, a concatenation with another user, a non-constant weight.

Example
    before:  %c = concatenate((%a, %b), axis=1);  nn.conv2d(%c, %W)      (a, b: 64 channels, W: 16)
    after:   add(nn.conv2d(%a, strided_slice(%W, [0, 0], [16, 64])),
                 nn.conv2d(%b, strided_slice(%W, [0, 64], [16, 128])))
"""

from __future__ import annotations

from typing import Any

from ..expr import Call, Constant, RelayExpr, Tuple
from ..op import tensor as _tensor
from ..op import transform as _tf
from ..op.registry import Op, make_call
from ..visitor import ExprMutator, post_order_visit
from .pass_infra import FunctionPass

__all__ = ["SplitConcatConv"]

MIN_SHRINK = 4
"""Rewrite only convolutions with at most 1/MIN_SHRINK of the concatenation's channels (the
partial outputs are written and read once more; the concatenation's copy is saved)."""


def _is(e: Any, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


def _ints(shape: Any) -> list[int] | None:
    out = []
    for d in shape:
        d = getattr(d, "value", d)
        if not isinstance(d, int):
            return None
        out.append(d)
    return out


class _Split(ExprMutator):
    def __init__(self, uses: dict[int, int]) -> None:
        super().__init__()
        self.uses = uses

    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if _is(c, "nn.conv2d") and isinstance(new, Call):
            out = self._split(c, new)
            if out is not None:
                return out
        return new

    def _split(self, orig: Call, conv: Call) -> RelayExpr | None:
        a = conv.attrs
        cat, weight = orig.args[0], conv.args[1]
        if not (_is(cat, "concatenate") and isinstance(weight, Constant)
                and int(a.groups) == 1 and a.data_layout == "NCHW"
                and (a.kernel_layout or "OIHW") == "OIHW" and self.uses.get(id(cat), 0) == 1
                and isinstance(cat.args[0], Tuple)):
            return None
        axis = int(cat.attrs.axis)
        if axis not in (1, -3):
            return None
        shapes = [_ints(f.checked_type.shape) for f in cat.args[0].fields]
        if any(s is None or len(s) != 4 for s in shapes):
            return None
        wshape = [int(d) for d in weight.data.shape]
        if wshape[0] * MIN_SHRINK > wshape[1]:
            return None
        new_cat = conv.args[0]
        parts = list(new_cat.args[0].fields) if _is(new_cat, "concatenate") and isinstance(
            new_cat.args[0], Tuple) else None
        if parts is None or len(parts) != len(shapes):
            return None
        total, off = None, 0
        attrs = dict(a.items())
        for part, shp in zip(parts, shapes):
            ch = shp[1]  # type: ignore[index]
            w = _tf.strided_slice(weight, [0, off, 0, 0], [wshape[0], off + ch, *wshape[2:]])
            off += ch
            term = make_call("nn.conv2d", [part, w], attrs)
            total = term if total is None else _tensor.add(total, term)
        return total


class SplitConcatConv(FunctionPass):
    """``SplitConcatConv()`` (opt_level 2: FoldConstant folds the weight slices)."""

    def __init__(self) -> None:
        super().__init__(name="SplitConcatConv", opt_level=2)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        uses: dict[int, int] = {}

        def count(e: Any) -> None:
            args = e.args if isinstance(e, Call) else e.fields if isinstance(e, Tuple) else ()
            for x in args:
                uses[id(x)] = uses.get(id(x), 0) + 1
            body = getattr(e, "body", None)
            if body is not None:
                uses[id(body)] = uses.get(id(body), 0) + 1

        post_order_visit(func, count)
        return _Split(uses).visit(func)
