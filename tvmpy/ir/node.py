"""The base of every IR node: immutable, slotted, with structural equality kept apart from identity.

``==`` on expressions builds comparison nodes (as in TVM), so identity is what ``hash`` and ``is``
use; structural comparison is the explicit :func:`structural_equal` / :func:`structural_hash`.
"""

from __future__ import annotations

import importlib
import operator
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

__all__ = ["Node", "register_printer", "structural_equal", "structural_hash",
           "assert_structural_equal"]

# node class -> its printer, or "module:function" loaded on first use (each IR registers its own)
_PRINTERS: dict[type, Callable[[Any], str] | str] = {}
_RESOLVED: dict[type, Callable[[Any], str] | None] = {}  # per concrete class, after the MRO walk


def register_printer(classes: type | tuple[type, ...], printer: Callable[[Any], str] | str) -> None:
    """``str()`` of a node of ``classes`` (and their subclasses) is ``printer(node)``;
    ``printer`` may be ``"module:function"``, imported when a node is first printed."""
    for cls in classes if isinstance(classes, tuple) else (classes,):
        _PRINTERS[cls] = printer
    _RESOLVED.clear()


def _printer_of(cls: type) -> Callable[[Any], str] | None:
    if cls in _RESOLVED:
        return _RESOLVED[cls]
    found = None
    for klass in cls.__mro__:
        printer = _PRINTERS.get(klass)
        if isinstance(printer, str):
            module, _, name = printer.partition(":")
            printer = _PRINTERS[klass] = getattr(importlib.import_module(module), name)
        if printer is not None:
            found = printer
            break
    _RESOLVED[cls] = found
    return found


_N = TypeVar("_N", bound="Node")


class Node:
    """Immutable IR node. Subclasses list their child fields in ``_fields`` (order = printing order)."""

    __slots__ = ("__weakref__",)
    _fields: tuple[str, ...] = ()
    # variables compare by binding site (see _StructEq); ``_struct_sig()``, when defined,
    # replaces the dtype in that comparison
    _struct_var: ClassVar[bool] = False

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; build a new node instead")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _init(self, **fields: Any) -> None:
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def replace(self: _N, **changes: Any) -> _N:
        """A copy with some fields changed (``dataclasses.replace`` for IR nodes)."""
        new = object.__new__(type(self))
        for k in self._all_slots():
            if k == "__weakref__":
                continue
            try:
                object.__setattr__(new, k, changes.pop(k) if k in changes else getattr(self, k))
            except AttributeError:
                pass
        if changes:
            raise TypeError(f"{type(self).__name__} has no fields {sorted(changes)}")
        return new

    @classmethod
    def _all_slots(cls) -> tuple[str, ...]:
        cached = cls.__dict__.get("_slots_cache")
        if cached is None:
            names: list[str] = []
            for klass in reversed(cls.__mro__):
                for s in getattr(klass, "__slots__", ()):
                    if s not in names:
                        names.append(s)
            cached = tuple(names)
            type.__setattr__(cls, "_slots_cache", cached)
        return cached

    @classmethod
    def _all_slots_nw(cls) -> tuple[str, ...]:
        """:meth:`_all_slots` without ``__weakref__``: the values a pickle carries."""
        cached = cls.__dict__.get("_slots_nw_cache")
        if cached is None:
            cached = tuple(k for k in cls._all_slots() if k != "__weakref__")
            type.__setattr__(cls, "_slots_nw_cache", cached)
        return cached

    def same_as(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        printer = _printer_of(type(self))
        if printer is None:
            return f"{type(self).__name__}({', '.join(self._fields)})"
        return printer(self)

    def __reduce__(self):
        # pickling (worker processes, the kernel cache): rebuild from slot values, read with
        # one C-level attrgetter per class (a kernel's loop IR has ~10^5 nodes); a node with
        # a slot left unset (a lazily filled cache) goes by name
        cls = type(self)
        get = cls.__dict__.get("_slot_getter")
        if get is None:
            get = _slot_getter(cls)
        try:
            return (_rebuild_slots, (cls, get(self)))
        except AttributeError:
            return (_rebuild, (cls, {k: getattr(self, k) for k in self._all_slots()
                                     if k != "__weakref__" and hasattr(self, k)}))


def _slot_getter(cls: type) -> Callable[[Any], tuple]:
    names = cls._all_slots_nw()  # type: ignore[attr-defined]
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        get: Callable[[Any], tuple] = lambda n: (one(n),)  # noqa: E731
    elif names:
        get = operator.attrgetter(*names)
    else:
        get = lambda n: ()  # noqa: E731
    type.__setattr__(cls, "_slot_getter", get)
    return get


def _rebuild_slots(cls, values: tuple):
    obj = object.__new__(cls)
    for k, v in zip(cls._all_slots_nw(), values):
        object.__setattr__(obj, k, v)
    return obj


def _rebuild(cls, state):
    obj = object.__new__(cls)
    for k, v in state.items():
        object.__setattr__(obj, k, v)
    return obj


def _is_var(a: Any) -> bool:
    """Variables compare by binding site, not by fields: node classes that set
    ``_struct_var = True`` (tir.Var, relay.Var)."""
    return getattr(type(a), "_struct_var", False)


def _var_sig(a: Any) -> Any:
    sig = getattr(a, "_struct_sig", None)
    return sig() if sig is not None else a.dtype


def _leaf_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    return type(a) is type(b) and a == b


def _fields(a: Node) -> list[str]:
    return [f for f in a._all_slots() if f != "__weakref__" and not f.startswith("_")]


_DONE = object()  # stack marker: every child of the pair below it compared equal


class _StructEq:
    """Structural comparison. Variables match when they are bound at the same place
    (loop var, let var, param) or, for free variables, when they are the same object
    (or any pairing, with map_free_vars).

    Iterative (an explicit stack visiting pairs in the recursive order: defining fields bound on
    entry, fields left to right), so a graph thousands of operators deep compares without
    exhausting Python's recursion limit."""

    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.var_map: dict[int, Any] = {}
        self.equal: set[tuple[int, int]] = set()  # node pairs found equal: a DAG's shared ones

    def eq(self, a: Any, b: Any) -> bool:
        stack: list[tuple[Any, Any]] = [(a, b)]
        while stack:
            x, y = stack.pop()
            if x is _DONE:
                self.equal.add(y)
                continue
            children = self._enter(x, y)
            if children is None:
                return False
            stack.extend(reversed(children))
        return True

    def _enter(self, a: Any, b: Any) -> list[tuple[Any, Any]] | None:
        """Compare ``a`` and ``b`` at their top level: None when they differ, else the pairs
        still to compare (in order)."""
        if a is b:
            return []
        if isinstance(a, Node):
            if type(a) is not type(b):
                return None
            if _is_var(a):
                mapped = self.var_map.get(id(a))
                if mapped is not None:
                    return [] if mapped is b else None
                if self.map_free_vars and _var_sig(a) == _var_sig(b):
                    self.var_map[id(a)] = b
                    return []
                return None
            for f in getattr(a, "_def_fields", ()):  # bind defining occurrences first
                va, vb = getattr(a, f), getattr(b, f)
                if isinstance(va, (list, tuple)):
                    if len(va) != len(vb):
                        return None
                    pairs = list(zip(va, vb))
                else:
                    pairs = [(va, vb)]
                for x, y in pairs:
                    if _is_var(x):
                        if not _is_var(y) or _var_sig(x) != _var_sig(y):
                            return None
                        self.var_map[id(x)] = y
            pair = (id(a), id(b))
            if pair in self.equal:  # var bindings only grow: still equal
                return []
            todo = [(getattr(a, f, None), getattr(b, f, None)) for f in _fields(a)]
            return todo + [(_DONE, pair)]
        if isinstance(a, (list, tuple)):
            if not isinstance(b, (list, tuple)) or len(a) != len(b):
                return None
            return list(zip(a, b))
        if isinstance(a, dict):
            if not isinstance(b, dict) or len(a) != len(b):
                return None
            todo = []
            for (ka, va), (kb, vb) in zip(a.items(), b.items()):
                todo += [(ka, kb), (va, vb)]
            return todo
        return [] if _leaf_equal(a, b) else None


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """True when ``a`` and ``b`` are the same program up to renaming of bound variables."""
    return _StructEq(map_free_vars).eq(a, b)


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    if not structural_equal(a, b, map_free_vars):
        raise AssertionError(f"not structurally equal:\n--- lhs\n{a}\n--- rhs\n{b}")


class HashMemo:
    """Node hashes shared by many :func:`structural_hash` calls (one lowering hashes the index
    tuples of thousands of reads, most of them built over the same shared subexpressions):
    each node is hashed once. Keeps the hashed nodes alive, so that an id is never reused while
    the memo lives; one memo per ``map_free_vars`` setting."""

    __slots__ = ("map_free_vars", "memo", "alive")

    def __init__(self, map_free_vars: bool = True) -> None:
        self.map_free_vars = map_free_vars
        self.memo: dict[int, int] = {}
        self.alive: list[Any] = []


def structural_hash(a: Any, map_free_vars: bool = True, memo: HashMemo | None = None) -> int:
    """A hash consistent with structural_equal(map_free_vars=True): variables hash by dtype only.
    ``memo`` (made with the same ``map_free_vars``) carries node hashes from call to call."""
    if memo is None:
        return _shash(a, map_free_vars, {})
    if memo.map_free_vars != map_free_vars:
        raise ValueError("structural_hash: the memo was made for another map_free_vars")
    return _shash(a, map_free_vars, memo.memo, memo.alive)


def _shash(a: Any, map_free_vars: bool, memo: dict[int, int], alive: list | None = None) -> int:
    """structural_hash, each node hashed once (``memo``, by id): a DAG's shared nodes too.

    Iterative post-order (an explicit stack), so deep graphs hash without recursion."""
    results: list[int] = []
    # ("visit", obj) pushes its children then ("combine", obj, n_children)
    stack: list[tuple[Any, ...]] = [("visit", a)]
    while stack:
        item = stack.pop()
        if item[0] == "combine":
            _, obj, n = item
            parts = results[len(results) - n:] if n else []
            del results[len(results) - n:]
            if isinstance(obj, Node):
                h = hash(type(obj).__name__)
                for p in parts:
                    h = hash((h, p))
                memo[id(obj)] = h
                if alive is not None:
                    alive.append(obj)
            elif isinstance(obj, dict):
                h = hash(tuple(zip(parts[0::2], parts[1::2])))
            else:
                h = hash(tuple(parts))
            results.append(h)
            continue
        obj = item[1]
        if _is_var(obj):
            results.append(hash(("Var", _var_sig(obj))) if map_free_vars else id(obj))
            continue
        if isinstance(obj, Node):
            h0 = memo.get(id(obj))
            if h0 is not None:
                results.append(h0)
                continue
            kids = [getattr(obj, f, None) for f in _fields(obj)]
        elif isinstance(obj, (list, tuple)):
            kids = list(obj)
        elif isinstance(obj, dict):
            kids = [z for kv in obj.items() for z in kv]
        else:
            try:
                results.append(hash(obj))
            except TypeError:
                results.append(id(obj))
            continue
        stack.append(("combine", obj, len(kids)))
        stack.extend(("visit", k) for k in reversed(kids))
    return results[0]
