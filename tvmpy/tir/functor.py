"""Visitors and mutators over the loop IR, with per-class cached dispatch.

Subclass and define ``visit_<ClassName>`` for the nodes you care about; everything else is
traversed (visitor) or rebuilt only when a child changed (mutator). Dispatch walks the MRO once
per class, so ``visit_BinaryOp`` catches every arithmetic node that has no own method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.functor import ChainFunctor
from . import expr as E
from . import stmt as S
from .buffer import Buffer

__all__ = ["Visitor", "Mutator", "post_order_visit", "substitute", "stmt_substitute",
           "collect_vars", "uses_var", "reads_memory", "referenced_vars", "ir_transform"]


#: expression kinds that chain deeply (an unrolled reduction's Add chain) and whose handlers
#: visit their operands in place: past ``ir.functor.CHAIN_DEPTH`` nested ones, functors evaluate
#: the chain below with an explicit stack (see ``ChainFunctor``)
CHAIN_KINDS: frozenset[type] = frozenset({
    E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max,
    E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.Cast,
})  # fmt: skip


class _Functor(ChainFunctor):
    _chain_kinds = CHAIN_KINDS

    def generic_visit(self, node: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError(type(node).__name__)


class Visitor(_Functor):
    """Read-only traversal of expressions and statements (buffers' shapes included)."""

    visit_buffers = False

    def generic_visit(self, node: Any) -> None:
        if node is None:
            return
        if isinstance(node, (list, tuple)):
            for x in node:
                self.visit(x)
            return
        if isinstance(node, Buffer):
            if self.visit_buffers:
                for s in node.shape:
                    self.visit(s)
            return
        fields = getattr(node, "_fields", None)
        if fields is None:
            return
        for f in fields:
            v = getattr(node, f)
            if isinstance(v, (E.PrimExpr, S.Stmt, list, tuple, E.Range, E.IterVar)):
                self.visit(v)
            elif isinstance(v, Buffer) and self.visit_buffers:
                self.visit(v)
        if self.visit_buffers:
            b = getattr(node, "buffer", None)
            if isinstance(b, Buffer):
                self.visit(b)

    def visit_dict(self, node: dict) -> None:
        for v in node.values():
            self.visit(v)


class Mutator(_Functor):
    """Rebuilds nodes whose children changed; returns the same object otherwise."""

    def generic_visit(self, node: Any) -> Any:
        if node is None:
            return None
        if isinstance(node, (list, tuple)):
            new = [self.visit(x) for x in node]
            if all(a is b for a, b in zip(new, node)):
                return node
            return type(node)(new) if isinstance(node, tuple) else new
        fields = getattr(node, "_fields", None)
        if not fields:
            return node
        changes = {}
        for f in fields:
            v = getattr(node, f)
            if isinstance(v, (E.PrimExpr, S.Stmt, list, tuple, E.Range, E.IterVar)):
                nv = self.visit(v)
                if nv is not v:
                    changes[f] = nv
        if not changes:
            return node
        return _rebuild(node, changes)


def _rebuild(node: Any, changes: dict) -> Any:
    """Rebuild through the constructor when dtypes may change (binary ops), else copy fields."""
    if isinstance(node, E.BinaryOp):
        a = changes.get("a", node.a)
        b = changes.get("b", node.b)
        if a.dtype != b.dtype:
            a, b = E.binary_match(a, b)
        return type(node)(a, b)
    if isinstance(node, E.Not):
        return E.Not(changes["a"])
    if isinstance(node, E.Select):
        return E.Select(changes.get("condition", node.condition), changes.get("true_value", node.true_value),
                        changes.get("false_value", node.false_value))
    if isinstance(node, E.Ramp):
        return E.Ramp(changes.get("base", node.base), changes.get("stride", node.stride), node.lanes)
    if isinstance(node, E.Broadcast):
        return E.Broadcast(changes["value"], node.lanes)
    if isinstance(node, E.Let):
        return E.Let(changes.get("var", node.var), changes.get("value", node.value), changes.get("body", node.body))
    if isinstance(node, E.BufferLoad):
        return E.BufferLoad(node.buffer, changes.get("indices", node.indices), changes.get("predicate", node.predicate))
    if isinstance(node, E.Call):
        return E.Call(node.dtype, node.op, changes["args"])
    if isinstance(node, E.Range):
        return E.Range.from_min_extent(changes.get("min", node.min), changes.get("extent", node.extent))
    return node.replace(**changes)


class _PostOrderVisit(Visitor):
    def __init__(self, fvisit: Callable[[Any], None]):
        self.fvisit = fvisit

    def generic_visit(self, n: Any) -> None:
        super().generic_visit(n)
        if isinstance(n, (E.PrimExpr, S.Stmt)):
            self.fvisit(n)


def post_order_visit(node: Any, fvisit: Callable[[Any], None]) -> None:
    """Call ``fvisit`` on every expression/statement node, children first."""
    _PostOrderVisit(fvisit).visit(node)


def ir_transform(stmt: Any, preorder: Callable[[Any], Any] | None,
                 postorder: Callable[[Any], Any] | None,
                 only_enable: list[str] | None = None) -> Any:
    """TVM's ``tvm.tir.stmt_functor.ir_transform``: rewrite ``stmt`` with callbacks.

    ``preorder(node)`` runs before a node's children: a non-None result replaces the node and
    its children are not visited. Otherwise the children are transformed, then
    ``postorder(node)`` may return a replacement. ``only_enable`` names the node types given to
    the callbacks ("tir.For" or "For"); all types when None."""
    names = None if only_enable is None else {str(n).split(".")[-1] for n in only_enable}
    return _Transform(preorder, postorder, names).visit(stmt)


class _Transform(Mutator):
    def __init__(self, preorder: Callable[[Any], Any] | None,
                 postorder: Callable[[Any], Any] | None, names: set[str] | None):
        self.preorder, self.postorder, self.names = preorder, postorder, names

    def enabled(self, node: Any) -> bool:
        return isinstance(node, (E.PrimExpr, S.Stmt)) and (
            self.names is None or type(node).__name__ in self.names)

    def generic_visit(self, node: Any) -> Any:  # every node (no visit_* methods)
        if self.preorder is not None and self.enabled(node):
            out = self.preorder(node)
            if out is not None:
                return out
        new = super().generic_visit(node)
        if self.postorder is not None and self.enabled(node):
            out = self.postorder(new)
            if out is not None:
                return out
        return new


class _Substituter(Mutator):
    def __init__(self, vmap: dict):
        self.vmap = vmap
        self._bufs: dict[int, Any] = {}

    def visit_Var(self, v: E.Var) -> Any:
        r = self.vmap.get(v)
        return v if r is None else E.convert(r)

    def _buffer(self, b: Any) -> Any:
        """``b`` mapped by vmap; else ``b`` with the variables of its element offset and strides
        substituted when they use one (a view bound by tensorize starts at an offset in the loop
        variables), else None."""
        nb = self.vmap.get(b)
        if nb is not None:
            return nb
        off = b.elem_offset
        if isinstance(off, E.IntImm) and not b.strides:
            return None
        key = id(b)
        if key not in self._bufs:
            new_off = self.visit(off) if isinstance(off, E.PrimExpr) else off
            strides = [self.visit(x) if isinstance(x, E.PrimExpr) else x for x in b.strides]
            same = new_off is off and all(x is y for x, y in zip(strides, b.strides))
            self._bufs[key] = None if same else Buffer(
                b.data, b.dtype, b.shape, strides, new_off, b.name, b.scope, b.data_alignment,
                b.offset_factor)
        return self._bufs[key]

    def visit_BufferLoad(self, node: E.BufferLoad) -> Any:
        new = self.generic_visit(node)
        nb = self._buffer(node.buffer)
        if nb is not None:
            return E.BufferLoad(nb, new.indices, new.predicate)
        return new

    def visit_BufferStore(self, node: S.BufferStore) -> Any:
        new = self.generic_visit(node)
        nb = self._buffer(node.buffer)
        if nb is not None:
            return S.BufferStore(nb, new.value, new.indices, new.predicate)
        return new


def substitute(node: Any, vmap: dict) -> Any:
    """Replace variables (keys: Var objects, by identity) in an expression or statement; Buffer
    keys replace buffers. Values may be Python numbers."""
    if not vmap:
        return node
    return _Substituter(vmap).visit(node)


stmt_substitute = substitute


def collect_vars(node: Any) -> list[E.Var]:
    """The distinct Vars appearing in ``node`` in first-seen order."""
    seen: dict[int, E.Var] = {}

    def f(n: Any) -> None:
        if isinstance(n, E.Var) and id(n) not in seen:
            seen[id(n)] = n

    post_order_visit(node, f)
    return list(seen.values())


def uses_var(node: Any, pred: Callable[[E.Var], bool] | E.Var) -> bool:
    if isinstance(pred, E.Var):
        target = pred
        pred = lambda v: v is target  # noqa: E731
    found = False

    def f(n: Any) -> None:
        nonlocal found
        if isinstance(n, E.Var) and pred(n):
            found = True

    post_order_visit(node, f)
    return found


def reads_memory(node: Any) -> bool:
    """True when ``node`` contains a load or a call: such an expression may not be duplicated,
    hoisted or moved past a store (a load can see a store, a call can have effects)."""
    found = False

    def f(n: Any) -> None:
        nonlocal found
        if isinstance(n, (E.BufferLoad, E.ProducerLoad, E.Call)):
            found = True

    post_order_visit(node, f)
    return found


def referenced_vars(node: Any) -> list[E.Var]:
    """Every Var ``node`` refers to, with the data pointers (and element offsets) of the buffers
    it accesses and the sizes of its allocations, in first-seen order: what a body outlined into
    its own function (a parallel loop) may need from the enclosing scope; callers keep the ones
    defined there."""
    collect = _ReferencedVars()
    collect.visit(node)
    return list(collect.seen.values())


class _ReferencedVars(Visitor):
    visit_buffers = True

    def __init__(self) -> None:
        self.seen: dict[int, E.Var] = {}

    def visit_Var(self, v: E.Var) -> None:
        self.seen.setdefault(id(v), v)

    def visit_Buffer(self, b: Buffer) -> None:
        self.seen.setdefault(id(b.data), b.data)
        self.visit(b.elem_offset)

    def visit_Allocate(self, a: S.Allocate) -> None:
        for x in a.buffer.shape:  # the size is computed in the enclosing scope
            self.visit(x)
        self.generic_visit(a)
