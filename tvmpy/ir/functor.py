"""Dispatch and traversal shared by every IR: the one functor the visitors, mutators, printers,
interpreters and code generators of tir and relay are built on.

``Functor`` dispatches ``visit(node)`` to a method named for the node's class (``visit_Add``),
or for the nearest base class that has one (``visit_BinaryOp``), else to ``generic_visit``. The
lookup walks the MRO once per (functor class, node class) pair and is cached on the functor
class, so a visit costs two dict lookups.

``ChainFunctor`` adds what tree functors need for expression chains deeper than Python's stack
(an unrolled reduction's 10,000-term Add): past a nesting depth, the chain below is evaluated
children first with an explicit stack into a memo that the handlers read.

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

__all__ = ["Functor", "ChainFunctor", "node_children", "post_order", "memo_post_order"]

_MISS = object()

#: nested chain nodes a ChainFunctor handles recursively before it evaluates the rest of the
#: chain with an explicit stack (a few Python frames each: well inside the default limit)
CHAIN_DEPTH = 128


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

    _dispatch_table: dict[type, Callable[..., Any]] = {}
    _prefix_tables: dict[str, dict[type, Callable[..., Any] | None]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch_table = {}  # each functor class has its own cache
        cls._prefix_tables = {}

    @classmethod
    def dispatch(cls, node_cls: type) -> Callable[..., Any]:
        """The (unbound) method that handles ``node_cls``; cached per (functor, node) class."""
        m = cls._dispatch_table.get(node_cls)
        if m is None:
            m = cls._dispatch_table[node_cls] = cls._lookup(node_cls, cls._prefix) or cls.generic_visit
        return m

    @classmethod
    def dispatch_prefix(cls, node_cls: type, prefix: str) -> Callable[..., Any] | None:
        """As :meth:`dispatch` for a second family of methods (``_s_For`` beside ``_e_Add``);
        None when the functor has no method for ``node_cls``."""
        table = cls._prefix_tables.get(prefix)
        if table is None:
            table = cls._prefix_tables[prefix] = {}
        if node_cls in table:
            return table[node_cls]
        m = table[node_cls] = cls._lookup(node_cls, prefix)
        return m

    @classmethod
    def _lookup(cls, node_cls: type, prefix: str) -> Callable[..., Any] | None:
        for klass in node_cls.__mro__:
            name = cls._method_name(klass) if prefix == cls._prefix else prefix + klass.__name__
            fn = getattr(cls, name, None) if name is not None else None
            if fn is not None:
                return fn
        return None

    def visit(self, node: Any) -> Any:
        cls = type(node)
        m = self._dispatch_table.get(cls) or type(self).dispatch(cls)
        return m(self, node)

    def generic_visit(self, node: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}: no method for {type(node).__name__}")


class ChainFunctor(Functor):
    """A functor over expression trees whose chains may be deeper than Python's stack (the
    10,000-term Add of an unrolled reduction).

    Nodes of the classes in ``_chain_kinds`` are handled recursively as usual, but past
    ``CHAIN_DEPTH`` nested ones the chain below is evaluated children first with an explicit stack
    (``post_order`` through chain-kind children), each result memoised by identity; the handlers
    then recurse into the memo, one level deep. The memo lives while the handler of the node that
    started it runs, so chain kinds must be ones whose handlers visit their children in the
    context they are visited in (arithmetic, comparisons, casts: not scopes such as Let, nor
    short-circuit logic a code generator branches on). One extra argument (a C lane) goes through
    :meth:`visit_with` and is passed along unchanged."""

    _chain_kinds: frozenset[type] = frozenset()
    _chain_depth = 0
    _chain_memo: dict[int, Any] | None = None

    def visit(self, node: Any) -> Any:
        cls = type(node)
        m = self._dispatch_table.get(cls) or type(self).dispatch(cls)
        if cls not in self._chain_kinds:  # only chain kinds are memoised or counted
            return m(self, node)
        memo = self._chain_memo
        if memo is not None:
            r = memo.get(id(node), _MISS)
            if r is not _MISS:
                return r
        depth = self._chain_depth
        if depth >= CHAIN_DEPTH:
            return self._visit_chain(node, ())
        # no try/finally: after an exception the count is only too high, which is still correct
        self._chain_depth = depth + 1
        r = m(self, node)
        self._chain_depth = depth
        return r

    def visit_with(self, node: Any, arg: Any) -> Any:
        """:meth:`visit` for handlers that take one more argument (the C printer's lane)."""
        cls = type(node)
        m = self._dispatch_table.get(cls) or type(self).dispatch(cls)
        if cls not in self._chain_kinds:
            return m(self, node, arg)
        memo = self._chain_memo
        if memo is not None:
            r = memo.get(id(node), _MISS)
            if r is not _MISS:
                return r
        depth = self._chain_depth
        if depth >= CHAIN_DEPTH:
            return self._visit_chain(node, (arg,))
        self._chain_depth = depth + 1
        r = m(self, node, arg)
        self._chain_depth = depth
        return r

    def _chain_children(self, node: Any) -> list[Any]:
        kinds = self._chain_kinds
        return [c for c in node_children(node) if type(c) in kinds]

    def _visit_chain(self, node: Any, args: tuple[Any, ...]) -> Any:
        saved, saved_depth = self._chain_memo, self._chain_depth
        memo = {} if saved is None else saved
        self._chain_memo, self._chain_depth = memo, 0
        try:
            for n in post_order(node, self._chain_children, memo)[:-1]:
                memo[id(n)] = self.visit_with(n, *args) if args else self.visit(n)
            return type(self).dispatch(type(node))(self, node, *args)
        finally:
            self._chain_memo, self._chain_depth = saved, saved_depth


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
