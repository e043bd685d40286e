"""SinkReshape: move per-element epilogues above a ``reshape``, so that they fuse with the
operator that computes the reshaped tensor and the reshape is left alone.

What it does
``f(reshape(x))`` becomes ``reshape(f(x))`` for

* a one-argument elementwise operator ``f`` whose attributes name no axis (``nn.relu``,
  ``clip``, ``sigmoid``, ``cast`` ...),
* ``nn.bias_add(reshape(x), b, axis)`` when the reshape keeps that axis: some axis ``i`` of
  ``x`` has the same extent and the same number of elements before it (``[C, H*W]`` ->
  ``[1, C, H, W]``, axis 1 -> 0); it becomes ``reshape(nn.bias_add(x, b, i))``, and
* a two-argument elementwise or broadcast operator (``multiply``, ``add`` ...) whose
  arguments are reshapes of the same source and result shapes, or one such reshape and a
  scalar, or one such reshape and an operand (of no higher rank than the reshape's source)
  broadcast over trailing axes the reshape keeps (``add(reshape(dense(x, W), (1, T, K)), b)``
  with ``b`` of shape ``(K,)``: a Linear over a 3-D input as ONNX exports it, MatMul + Add): ``f(reshape(x), reshape(y))`` becomes
  ``reshape(f(x, y))`` (SiLU's ``x *
  sigmoid(x)`` and HardSwish over a reshape; the attention scores' ``1/sqrt(d)`` after a
  batched MatMul, exported as ``Reshape(MatMul) * c``, which then fuses into the
  batch_matmul instead of costing a pass over the scores of its own).

When valid
For ``bias_add`` the reshape must have no other use (the rewritten ``f(x)`` then replaces
it); the pointwise operators may share it (a reshape's other uses keep it: a view, free).
FuseOps does not fuse an injective ``reshape`` into a preceding matmul or convolution, while an
elementwise or broadcast epilogue fuses into it; and a function that is only a reshape costs
nothing in the graph executor (its output aliases its input, ``relay/backend/graph_codegen.py``).
Made for
x86's 1x1 convolutions as ``reshape(matmul(W, reshape(x)))`` + bias + activation
(``relay/op/strategy/x86_alter_op.py``), where the bias and activation were a separate kernel.
Runs at opt_level 3, after AlterOpLayout; the values computed are unchanged.

Example
    before:  %1 = nn.dense(reshape(%y, newshape=[8, 16]), %W); nn.relu(reshape(%1, newshape=[1, 8, 4]))
    after:   %1 = nn.dense(reshape(%y, newshape=[8, 16]), %W); reshape(nn.relu(%1), newshape=[1, 8, 4])
"""

from __future__ import annotations

import math
from typing import Any

from ..expr import Call, Constant, Function, RelayExpr
from ..op import transform as _tr
from ..op.registry import Op, OpPattern, make_call
from ..ty import TensorType
from ..visitor import ExprMutator, dataflow_children
from .pass_infra import FunctionPass

__all__ = ["SinkReshape", "bias_axis_through_reshape"]

_NAMED_AXIS_ATTRS = frozenset({"axis", "axes", "shape", "newshape", "layout"})


def bias_axis_through_reshape(src: tuple[int, ...], dst: tuple[int, ...],
                              axis: int) -> int | None:
    """The axis of ``src`` that becomes axis ``axis`` of ``dst`` under a row-major reshape
    ``src -> dst`` with the same extent and the same element count before it, else None."""
    if axis < 0:
        axis += len(dst)
    if not 0 <= axis < len(dst):
        return None
    before = math.prod(dst[:axis])
    for i, ext in enumerate(src):
        if ext == dst[axis] and math.prod(src[:i]) == before:
            return i
    return None


def _static(t: Any) -> tuple[int, ...] | None:
    if not isinstance(t, TensorType):
        return None
    dims = [getattr(d, "value", d) for d in t.shape]
    return tuple(dims) if all(isinstance(d, int) for d in dims) else None


class _Sink(ExprMutator):
    def __init__(self, uses: dict[int, int]) -> None:
        super().__init__()
        self.uses = uses
        # reshapes this pass made: id -> (source shape, result shape); each has one use
        self.made: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def _reshape_of(self, orig: RelayExpr, new: RelayExpr, shared: bool = False
                    ) -> tuple[RelayExpr, tuple[int, ...], tuple[int, ...]] | None:
        """``(x, src shape, dst shape)`` when ``new`` (the rewrite of ``orig``) is a reshape
        of ``x`` with no other use (with ``shared``: or with others), else None."""
        if not (isinstance(new, Call) and isinstance(new.op, Op) and new.op.name == "reshape"):
            return None
        if id(new) in self.made:
            return (new.args[0], *self.made[id(new)])
        if not (isinstance(orig, Call) and getattr(orig.op, "name", None) == "reshape") \
                or (self.uses.get(id(orig), 0) != 1 and not shared):
            return None
        src = _static(getattr(orig.args[0], "checked_type", None))
        dst = _static(getattr(orig, "checked_type", None))
        if src is None or dst is None:
            return None
        return new.args[0], src, dst  # the rewritten source (orig.args[0] would duplicate it)

    def _wrap(self, inner: RelayExpr, src: tuple[int, ...], dst: tuple[int, ...]) -> RelayExpr:
        out = _tr.reshape(inner, dst)
        self.made[id(out)] = (src, dst)
        return out

    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if not (isinstance(new, Call) and isinstance(new.op, Op)) or not new.args:
            return new
        if (len(new.args) == 2 and new.op.pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST)
                and not set(new.attrs.values) & _NAMED_AXIS_ATTRS):
            return self._binary(c, new)
        pointwise = (len(new.args) == 1 and new.op.pattern == OpPattern.ELEMWISE
                     and not set(new.attrs.values) & _NAMED_AXIS_ATTRS)
        found = self._reshape_of(c.args[0], new.args[0], shared=pointwise)
        if found is None:
            return new
        x, src, dst = found
        name = new.op.name
        if name == "nn.bias_add" and len(new.args) == 2:
            i = bias_axis_through_reshape(src, dst, int(new.attrs.axis))
            if i is None:
                return new
            attrs = {**new.attrs.values, "axis": i}
            return self._wrap(make_call("nn.bias_add", [x, new.args[1]], attrs), src, dst)
        if pointwise:
            return self._wrap(Call(new.op, [x], new.attrs), src, dst)
        return new

    def _binary(self, c: Call, new: Call) -> RelayExpr:
        """``f(reshape(a), reshape(b))`` -> ``reshape(f(a, b))`` when both reshapes have the
        same source and result shapes, and ``f(reshape(a), s)`` -> ``reshape(f(a, s))`` for a
        scalar ``s`` (either side): SiLU's ``x * sigmoid(x)``, HardSwish's ``x * clip(x / 6 +
        0.5, 0, 1)`` over a 1x1 conv's output. Shared reshapes are fine here (the other uses
        keep the original view, which costs nothing)."""
        found = [self._reshape_of(o, n, shared=True) for o, n in zip(c.args, new.args)]
        shapes = {(f[1], f[2]) for f in found if f is not None}
        if len(shapes) != 1:
            return new
        ((src, dst),) = shapes
        if _static(getattr(c, "checked_type", None)) != dst:
            return new  # the other operand broadcasts the result beyond the reshape's shape
        args = []
        for f, o, n in zip(found, c.args, new.args):
            if f is not None:
                args.append(f[0])
                continue
            shape = _static(getattr(o, "checked_type", None))
            if shape is None:
                return new
            if _trailing(shape, src, dst):  # a bias over trailing axes the reshape keeps
                args.append(n)
                continue
            if any(d != 1 for d in shape):
                return new  # not a scalar: it broadcasts against the reshaped axes
            if len(shape) > len(src):  # of higher rank than the source: as a 0-d constant
                if not isinstance(n, Constant):
                    return new
                n = Constant(n.data.numpy().reshape(()))
            args.append(n)
        return self._wrap(Call(new.op, args, new.attrs), src, dst)


def _trailing(shape: tuple[int, ...], src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """Whether an operand of ``shape`` broadcasts over the same trailing axes before and after
    the reshape ``src -> dst`` (a Linear's bias after ``reshape(dense)``): ``shape`` without
    its leading 1s is a non-empty trailing part of both, and ``shape`` is of no higher rank
    than ``src`` (so it broadcasts against ``src`` as it is; a higher-rank operand, e.g. an
    attention mask ``(1, 1, 1, k)`` over ``reshape(batch_matmul)``, stays below)."""
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    core = shape[k:]
    if not core or len(shape) > len(src):
        return False
    return src[len(src) - len(core):] == core and dst[len(dst) - len(core):] == core


def _use_counts(body: RelayExpr) -> dict[int, int]:
    uses: dict[int, int] = {}
    seen: set[int] = set()
    stack = [body]
    uses[id(body)] = 1  # the result is a use
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        for ch in dataflow_children(e):
            uses[id(ch)] = uses.get(id(ch), 0) + 1
            stack.append(ch)
    return uses


class SinkReshape(FunctionPass):
    """``relay.transform.SinkReshape()`` (opt_level 3): see the module docstring."""

    def __init__(self) -> None:
        super().__init__(name="SinkReshape", opt_level=3)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        if func.attrs.get("Primitive"):
            return func
        body = _Sink(_use_counts(func.body)).visit(func.body)
        if body is func.body:
            return func
        return Function(func.params, body, func.ret_type, attrs=func.attrs)
