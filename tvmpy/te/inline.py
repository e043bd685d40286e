"""Substitute inlined stages into their consumers, sharing repeated reads through ``Let``.

Inlining by plain substitution turns the stage graph into a tree: a stage read ``k`` times by
the (already inlined) expression of its consumer is copied ``k`` times, so a chain of ``n``
stages whose values are each used several times grows as ``k**n``. Fused elementwise chains do
this (an ONNX QuantizeLinear's round-half-to-even reads ``floor(x / s)`` five times; a few
Quantize/Dequantize pairs in one fused group were enough to make lowering run for hours).

:class:`InlineScope` instead instantiates each inlined stage once per distinct index
expression within a scope, binds the value to a fresh variable, and at the end of the scope
substitutes back the bindings used only once (or whose value is a leaf) and wraps the rest in
``Let``. The result is linear in the size of the stage graph. A scope is one top-level
expression of a consumer's body (a reduction's source, condition, init are separate scopes,
so values depending on reduction variables stay inside the reduction), and each branch of an
``if_then_else`` and the body of a ``Let`` open a child scope: values needed only there are not
hoisted out of the condition that guards them (``if_then_else`` is lazy, e.g. padding reads).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.node import HashMemo, structural_equal, structural_hash
from ..tir import expr as E
from ..tir.functor import Mutator, Visitor, substitute

__all__ = ["InlineScope"]

# (var, value, stage id, value index, indices) of one instantiated read
_Binding = tuple[E.Var, E.PrimExpr, int, int, tuple]


class _Scope:
    def __init__(self) -> None:
        self.bindings: list[_Binding] = []
        self.memo: dict[tuple[int, int, int], list[_Binding]] = {}


class InlineScope(Mutator):
    """Rewrites consumer expressions: reads of stages for which ``inlined(tensor)`` returns
    ``(stage_id, body)`` are replaced by ``body`` (the stage's expression of that output over its
    axes, given as ``(axis_vars, expr)``); other reads keep their (rewritten) indices."""

    def __init__(self, inlined: Callable[[Any], tuple[int, list[E.Var], E.PrimExpr] | None],
                 simplify_index: Callable[[E.PrimExpr], E.PrimExpr] | None = None):
        self.inlined = inlined
        # applied to a large rewritten index (see _large): through a chain of reshapes each
        # index is the previous one's flat index divided and taken modulo once per dimension,
        # so unsimplified indices grow by the rank at every inlined reshape
        self.simplify_index = simplify_index
        self.vmap: dict[E.Var, E.PrimExpr] = {}
        self.scopes: list[_Scope] = []
        self._hashes = HashMemo(map_free_vars=False)  # indices share most of their subtrees

    # ---- entry -------------------------------------------------------------------------------
    def rewrite(self, e: E.PrimExpr) -> E.PrimExpr:
        """``e`` with every inlined read substituted (one top-level scope)."""
        return self._in_scope(e)

    def _in_scope(self, e: E.PrimExpr) -> E.PrimExpr:
        self.scopes.append(_Scope())
        try:
            r = self.visit(e)
        finally:
            sc = self.scopes.pop()
        return _finish(r, sc.bindings)

    # ---- visitors ----------------------------------------------------------------------------
    def visit_Var(self, v: E.Var) -> Any:
        r = self.vmap.get(v)
        return v if r is None else r

    def visit_Let(self, node: E.Let) -> Any:
        value = self.visit(node.value)
        nv = E.Var(node.var.name, node.var.dtype)  # fresh: a stage may be instantiated twice
        saved = self.vmap.get(node.var)
        self.vmap[node.var] = nv
        try:
            body = self._in_scope(node.body)
        finally:
            if saved is None:
                del self.vmap[node.var]
            else:
                self.vmap[node.var] = saved
        return E.Let(nv, value, body)

    def visit_Call(self, node: E.Call) -> Any:
        if node.op != "if_then_else" or len(node.args) != 3:
            return self.generic_visit(node)
        cond = self.visit(node.args[0])
        t = self._in_scope(node.args[1])
        f = self._in_scope(node.args[2])
        if cond is node.args[0] and t is node.args[1] and f is node.args[2]:
            return node
        return E.Call(node.dtype, node.op, [cond, t, f])

    def visit_ProducerLoad(self, node: E.ProducerLoad) -> Any:
        idx = tuple(self.visit(i) for i in node.indices)
        if self.simplify_index is not None:
            idx = tuple(self.simplify_index(i) if _large(i) else i for i in idx)
        inl = self.inlined(node.producer)
        if inl is None:
            if all(a is b for a, b in zip(idx, node.indices)):
                return node
            return E.ProducerLoad(node.producer, idx)
        sid, axes, body = inl
        key = (sid, node.producer.value_index,
               structural_hash(idx, map_free_vars=False, memo=self._hashes))
        for sc in reversed(self.scopes):
            for b in sc.memo.get(key, ()):
                if structural_equal(b[4], idx):
                    return b[0]
        saved = self.vmap
        self.vmap = {a: i for a, i in zip(axes, idx)}
        try:
            value = self.visit(body)
        finally:
            self.vmap = saved
        var = E.Var(f"{node.producer.name}_v", value.dtype)
        b = (var, value, sid, node.producer.value_index, idx)
        sc = self.scopes[-1]
        sc.bindings.append(b)
        sc.memo.setdefault(key, []).append(b)
        return var


_LARGE_INDEX = 24  # nodes: an index this size is simplified before it is substituted further


class _Size(Visitor):
    def __init__(self) -> None:
        self.n = 0

    def visit(self, node: Any) -> Any:
        self.n += 1
        if self.n <= _LARGE_INDEX:
            super().visit(node)


def _large(e: E.PrimExpr) -> bool:
    if isinstance(e, (E.Var, E.IntImm)):
        return False
    c = _Size()
    c.visit(e)
    return c.n > _LARGE_INDEX


class _Count(Visitor):
    def __init__(self, counts: dict[E.Var, int]):
        self.counts = counts

    def visit_Var(self, v: E.Var) -> None:
        if v in self.counts:
            self.counts[v] += 1


def _leaf(e: E.PrimExpr) -> bool:
    """Cheap to repeat: a constant, a variable, a read at plain indices, a cast of one."""
    while isinstance(e, (E.Cast, E.Broadcast)):
        e = e.value
    if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm, E.Var)):
        return True
    return isinstance(e, E.ProducerLoad) and all(
        isinstance(i, (E.Var, E.IntImm)) for i in e.indices)


def _finish(r: E.PrimExpr, bindings: list[_Binding]) -> E.PrimExpr:
    """Substitute back bindings used at most once or with leaf values; ``Let`` the others."""
    if not bindings:
        return r
    vars_ = [b[0] for b in bindings]
    counts = {v: 0 for v in vars_}
    uses: dict[E.Var, dict[E.Var, int]] = {}  # variables each binding's value reads
    _Count(counts).visit(r)
    for v, value, *_ in bindings:
        c: dict[E.Var, int] = {u: 0 for u in vars_}
        _Count(c).visit(value)
        uses[v] = {u: n for u, n in c.items() if n}
        for u, n in uses[v].items():
            counts[u] += n
    keep: set[E.Var] = set()
    for v, value, *_ in reversed(bindings):  # later bindings read earlier ones, never after
        n = counts[v]
        if n > 1 and not _leaf(value):
            keep.add(v)
            continue
        for u, k in uses[v].items():  # the value moves to its n uses (none: dropped)
            counts[u] += (n - 1) * k
    resolved: dict[E.Var, E.PrimExpr] = {}
    kept: list[tuple[E.Var, E.PrimExpr]] = []
    for v, value, *_ in bindings:
        value = substitute(value, resolved) if resolved and uses[v] else value
        if v in keep:
            kept.append((v, value))
        elif counts[v]:
            resolved[v] = value
    out = substitute(r, resolved) if resolved else r
    for v, value in reversed(kept):
        out = E.Let(v, value, out)
    return out
