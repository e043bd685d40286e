"""Loop-IR operators as objects: ``tvm.ir.Op`` and ``tvm.ir.register_op_attr``.

A ``tir.Call``'s ``op`` is an :class:`Op`. It *is* its short name as a string (``"exp"``,
``"call_extern"``, ``"mylog"``): it compares equal to and hashes like that string, so passes and
code generators that test ``call.op == "exp"`` or look it up in a name table keep working, and the
structural digest (the kernel cache's key) serialises it as before. ``op.name`` is TVM's full name
(``"tir.exp"``). One object exists per name (:meth:`Op.get`).

Per-operator attributes (``"TCallEffectKind"``, ...) live in this module's table, set with
:func:`register_op_attr` (TVM's plevel rule: a higher level replaces a lower one, an equal level
is an error, a lower one is ignored). Registering an attribute of an unknown ``"tir.<name>"``
declares a custom intrinsic (TVM's way: ``register_op_attr("tir.mylog", "TCallEffectKind",
CallEffectKind.Pure)``); ``tir.call_intrin`` then accepts it. Lowering rules per target are not
attributes here: they live in ``target.intrin.RULES`` (``register_intrin_lowering``).

Relay operators have their own registry (``relay.op.get``); :meth:`Op.get` forwards names it
does not know to the resolvers a higher layer adds with :func:`register_op_resolver`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Op", "register_op_attr", "declare_ops", "declared_ops", "is_registered", "op_key",
           "register_op_resolver"]

_OPS: dict[str, Op] = {}  # short name -> its one Op object
_DECLARED: set[str] = set()  # short names of the known loop-IR operators (built-ins and custom)
_ATTRS: dict[str, dict[str, tuple[int, Any]]] = {}  # short name -> attr key -> (level, value)
# higher layers' registries (relay's operators): (get or None, set_attr(name, key, value, level))
_RESOLVERS: list[tuple[Callable[[str], Any], Callable[[str, str, Any, int], Any]]] = []


def op_key(name: str) -> str:
    """The short name of a loop-IR operator: ``"tir.exp"`` -> ``"exp"``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"an operator name must be a non-empty string, got {name!r}")
    return name[4:] if name.startswith("tir.") else name


class Op(str):
    """A loop-IR operator. A ``str`` subclass whose value is the short name (see the module
    docstring); build one with :meth:`Op.get` (or implicitly: ``tir.Call(dtype, "exp", args)``)."""

    __slots__ = ()

    @staticmethod
    def get(op_name: str) -> Any:
        """TVM's ``tvm.ir.Op.get("tir.exp")``: the operator of that name. Names of relay
        operators (``"nn.conv2d"``) return relay's Op once relay is imported."""
        key = op_key(op_name)
        if key in _DECLARED:
            return intern(key)
        for known in (op_name, key):  # an operator no table lists but a Call has used
            if known in _OPS:
                return _OPS[known]
        for resolve, _ in _RESOLVERS:
            found = resolve(op_name)
            if found is not None:
                return found
        raise ValueError(f"operator {op_name!r} is not registered; declare a custom intrinsic with "
                         f"tvm.ir.register_op_attr({op_name!r}, 'TCallEffectKind', "
                         "tvm.tir.CallEffectKind.Pure)")

    @property
    def name(self) -> str:
        """TVM's full name: ``"tir.exp"`` for the loop-IR intrinsic ``"exp"``."""
        key = str(self)
        return key if "." in key else "tir." + key

    def get_attr(self, attr_name: str) -> Any:
        """The attribute ``attr_name`` registered for this operator, or None."""
        entry = _ATTRS.get(op_key(str(self)), {}).get(attr_name)
        return None if entry is None else entry[1]

    def has_attr(self, attr_name: str) -> bool:
        return attr_name in _ATTRS.get(op_key(str(self)), {})

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (intern, (str(self),))


def intern(name: str) -> Op:
    """The one :class:`Op` of short name ``name`` (made on first use)."""
    op = _OPS.get(name)
    if op is None:
        op = _OPS[name] = Op(name)
    return op


def declare_ops(names: Iterable[str]) -> None:
    """Mark ``names`` (short names) as known loop-IR operators (tir's built-in intrinsics)."""
    _DECLARED.update(names)


def is_registered(name: str) -> bool:
    """Whether ``name`` ("tir.mylog" or "mylog") is a known loop-IR operator."""
    return op_key(name) in _DECLARED


def declared_ops() -> frozenset[str]:
    """The short names of every known loop-IR operator (built-in and custom)."""
    return frozenset(_DECLARED)


def register_op_resolver(resolve: Callable[[str], Any],
                         set_attr: Callable[[str, str, Any, int], Any]) -> None:
    """Let :meth:`Op.get` and :func:`register_op_attr` reach the operators of a higher layer's
    registry: ``resolve(name)`` returns that layer's op or None; ``set_attr(name, key, value,
    level)`` sets an attribute of one of them."""
    _RESOLVERS.append((resolve, set_attr))


def _set_attr(op_name: str, attr_key: str, value: Any, level: int) -> None:
    key = op_key(op_name)
    if key not in _DECLARED:
        for resolve, set_attr in _RESOLVERS:  # a relay operator: its registry holds its attributes
            if resolve(op_name) is not None:
                set_attr(op_name, attr_key, value, level)
                return
    attrs = _ATTRS.setdefault(key, {})
    old = attrs.get(attr_key)
    if old is not None:
        if old[0] == level:
            raise ValueError(f"attribute {attr_key!r} of operator {op_name!r} is already "
                             f"registered at level {level}; pass a higher level to override it")
        if old[0] > level:
            return
    attrs[attr_key] = (level, value)
    _DECLARED.add(key)


def register_op_attr(op_name: str, attr_key: str, value: Any = None, level: int = 10) -> Any:
    """TVM's ``tvm.ir.register_op_attr``: set ``attr_key`` of operator ``op_name`` to ``value``
    (a decorator when ``value`` is omitted). An unknown ``"tir.<name>"`` becomes a custom
    intrinsic. Returns ``value`` (or the decorator)."""
    if not isinstance(attr_key, str) or not attr_key:
        raise TypeError(f"register_op_attr: attr_key must be a non-empty string, got {attr_key!r}")
    if not isinstance(level, int):
        raise TypeError(f"register_op_attr: level must be an int, got {level!r}")
    op_key(op_name)

    def register(v: Any) -> Any:
        _set_attr(op_name, attr_key, v, level)
        return v

    return register if value is None else register(value)


def __getattr__(name: str) -> Any:
    if name == "register_intrin_lowering":  # ``tvm.ir.op.register_intrin_lowering`` (TVM's home)
        from ..target.intrin import register_intrin_lowering

        return register_intrin_lowering
    raise AttributeError(f"module 'tvmpy.ir.op' has no attribute {name!r}")
