"""Dispatch and traversal shared by every IR: the one functor the visitors, mutators, printers,
interpreters and code generators of tir and relay are built on.

``Functor`` dispatches ``visit(node)`` to a method named for the node's class (``visit_Add``),
or for the nearest base class that has one (``visit_BinaryOp``), else to ``generic_visit``. The
lookup walks the MRO once per (functor class, node class) pair and is cached on the functor
class, so a visit costs two dict lookups.

``post_order`` is the traversal: an explicit-stack, identity-memoised walk over any node graph,
children first, each node once (a DAG's shared nodes too). Its depth is bounded by memory, not by
Python's recursion limit, so recursive handlers stay shallow when a walk fills their memo first:
``memo_post_order`` computes a handler's results bottom-up before the handler of the root asks
for them.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator
from typing import Any

from .node import Node

__all__ = ["Functor", "node_children", "post_order", "memo_post_order"]


class Functor:
    """Class-based dispatch: ``visit(node)`` calls ``self.<method for type(node)>(node)``.

    The method for a node class is ``_prefix + klass.__name__`` for the first class of its MRO
    that the functor defines (``visit_Add``, then ``visit_BinaryOp``, ...), else
    ``generic_visit``. A functor that spells its methods differently overrides
    :meth:`_method_name` (relay's ``visit_call``); ``None`` there means "no method"."""

    _prefix = "visit_"

    @classmethod
    def _method_name(cls, node_cls: type) -> str | None:
        return cls._prefix + node_cls.__name__

    @classmethod
    def dispatch(cls, node_cls: type) -> Callable[..., Any]:
        """The (unbound) method that handles ``node_cls``; cached per (functor, node) class."""
        table = cls.__dict__.get("_dispatch_cache")
        if table is None:
            table = {}
            type.__setattr__(cls, "_dispatch_cache", table)
        m = table.get(node_cls)
        if m is None:
            for klass in node_cls.__mro__:
                name = cls._method_name(klass)
                fn = getattr(cls, name, None) if name is not None else None
                if fn is not None:
                    m = fn
                    break
            else:
                m = cls.generic_visit
            table[node_cls] = m
        return m

    def visit(self, node: Any) -> Any:
        return type(self).dispatch(type(node))(self, node)

    def generic_visit(self, node: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}: no method for {type(node).__name__}")


def _flatten(v: Any, out: list[Any]) -> None:
    if isinstance(v, Node):
        out.append(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _flatten(x, out)
    elif isinstance(v, dict):
        for k, x in v.items():
            _flatten(k, out)
            _flatten(x, out)


def node_children(node: Any) -> list[Any]:
    """The nodes held in ``node``'s ``_fields`` in field order (lists, tuples and dicts, keys
    and values, are looked into)."""
    out: list[Any] = []
    for f in getattr(node, "_fields", ()):
        _flatten(getattr(node, f, None), out)
    return out


def post_order(roots: Any, children: Callable[[Any], Iterable[Any]] = node_children,
               skip: Container[int] = ()) -> list[Any]:
    """Every node reachable from ``roots`` (a node or a list of nodes) through ``children``,
    children before parents, siblings in order, each node once (by identity). Nodes whose id is
    in ``skip`` (e.g. a functor's memo) are neither listed nor entered. Iterative: any depth."""
    order: list[Any] = []
    seen: set[int] = set()
    stack: list[tuple[Any, Iterator[Any] | None]] = []
    for r in reversed(roots) if isinstance(roots, (list, tuple)) else (roots,):
        stack.append((r, None))
    while stack:
        node, it = stack[-1]
        if it is None:
            if id(node) in seen or id(node) in skip:
                stack.pop()
                continue
            seen.add(id(node))
            it = iter(children(node))
            stack[-1] = (node, it)
        for c in it:
            if id(c) not in seen and id(c) not in skip:
                stack.append((c, None))
                break
        else:
            stack.pop()
            order.append(node)
    return order


def memo_post_order(root: Any, children: Callable[[Any], Iterable[Any]],
                    visit: Callable[[Any], Any], memo: Container[int]) -> None:
    """Call ``visit`` on the nodes below ``root`` that ``memo`` does not hold yet, children
    first, so that a recursive handler of ``root`` finds its descendants' results memoised and
    recurses one level only. ``root`` itself is left to the caller."""
    for n in post_order(root, children, memo)[:-1]:
        visit(n)
