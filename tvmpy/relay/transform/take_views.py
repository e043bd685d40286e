"""CopyViewsIntoTakes: a chain of data-movement ops (reshape, transpose, squeeze, expand_dims)
whose every use is a ``take`` of one constant index is copied into each of those takes, so that
each take fuses with its own copy of the chain and reads its part of the chain's source
directly, instead of the chain being one kernel that writes the whole rearranged tensor
(a copy) for the takes to read back.

What it does
``t = reshape/transpose(...(x)); a = take(t, 0, axis); b = take(t, 1, axis); ...`` becomes
``a = take(reshape/transpose(...(x)), 0, axis); b = take(reshape/transpose(...(x)), 1, axis)``
with one fresh copy of the chain per take. Made for the fused Q/K/V projection of
``nn.MultiheadAttention`` as PyTorch exports it (ViT, CLIP, any ``in_proj``): the
``[T, 3 * E]`` product is reshaped and transposed to ``[3, T, B, E]`` and Q, K, V are
``Gather``s of index 0, 1, 2; the transposed ``[3, T, B, E]`` copy was a kernel of its own.

When valid
Every use of the chain's last op is a ``take`` whose indices are a constant of one element
(each take then reads a slice of the chain; together they read it about once, as the one copy
did); the chain's ops are views (no arithmetic: nothing is computed twice). The chain is
copied down to its first op that is not a view (its source, which stays shared). Types are
inferred again by the passes that follow (FuseOps' InferType); the values are unchanged.

Example
    before:  %1 = transpose(reshape(%x, newshape=[4, 3, 8]), axes=[1, 0, 2]);
             (take(%1, 0, axis=0), take(%1, 2, axis=0))
    after:   (take(transpose(reshape(%x, ...), ...), 0, axis=0),
              take(transpose(reshape(%x, ...), ...), 2, axis=0))
"""

from __future__ import annotations

from typing import Any

from ..expr import Call, Constant, Function, RelayExpr
from ..op.registry import Op
from ..visitor import ExprMutator, dataflow_children
from .pass_infra import FunctionPass

__all__ = ["CopyViewsIntoTakes"]

_VIEWS = frozenset({"reshape", "transpose", "squeeze", "expand_dims"})


def _name(e: Any) -> str | None:
    return e.op.name if isinstance(e, Call) and isinstance(e.op, Op) else None


def _scalar_take(e: Any) -> bool:
    return (_name(e) == "take" and isinstance(e.args[1], Constant)
            and e.args[1].data.numpy().size == 1)


def _consumers(body: RelayExpr) -> dict[int, list[Any]]:
    """Each dataflow node's consumers (a node used twice by one call is listed twice)."""
    users: dict[int, list[Any]] = {id(body): [None]}  # the result is a use
    seen: set[int] = set()
    stack = [body]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        for ch in dataflow_children(e):
            users.setdefault(id(ch), []).append(e)
            stack.append(ch)
    return users


class _Copy(ExprMutator):
    def __init__(self, users: dict[int, list[Any]]) -> None:
        super().__init__()
        self.users = users

    def _copyable(self, t: Any) -> bool:
        us = self.users.get(id(t), [])
        return _name(t) in _VIEWS and len(us) > 1 and all(_scalar_take(u) for u in us)

    def _copy_chain(self, e: Any) -> RelayExpr:
        """A fresh copy of the view chain ending at ``e``; its source visited (shared)."""
        if _name(e) not in _VIEWS:
            return self.visit(e)
        return Call(e.op, [self._copy_chain(e.args[0]), *(self.visit(a) for a in e.args[1:])],
                    e.attrs)

    def visit_call(self, c: Call) -> RelayExpr:
        if _scalar_take(c) and self._copyable(c.args[0]):
            return Call(c.op, [self._copy_chain(c.args[0]), self.visit(c.args[1])], c.attrs)
        return super().visit_call(c)


class CopyViewsIntoTakes(FunctionPass):
    """``relay.transform.CopyViewsIntoTakes()`` (opt_level 3): see the module docstring."""

    def __init__(self) -> None:
        super().__init__(name="CopyViewsIntoTakes", opt_level=3)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        if func.attrs.get("Primitive"):
            return func
        body = _Copy(_consumers(func.body)).visit(func.body)
        if body is func.body:
            return func
        return Function(func.params, body, func.ret_type, attrs=func.attrs)
