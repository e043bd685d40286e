"""A structural digest of IR that is stable across processes (the persistent kernel cache's key).

``structural_hash`` (ir/node.py) is a bucket key for one process: it hashes strings with
Python's salted ``hash`` and variables by dtype only. :func:`structural_digest` serialises the
same structure (every non-underscore field of every node, ``span`` excepted) into a BLAKE2b
digest: variables by their order of first appearance and their signature (so alpha-renamed
programs digest alike, as ``structural_equal(map_free_vars=True)`` sees them), shared nodes by
a back reference (a DAG digests in linear time), arrays by dtype, shape and bytes. A value it
cannot serialise faithfully (a function, an arbitrary object) raises :class:`Undigestable`: the
caller then does not cache, rather than risk two different programs sharing a key.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from .node import Node, _fields, _is_var, _var_sig

__all__ = ["structural_digest", "Undigestable"]

_SKIP = frozenset({"span"})  # source locations: no effect on the code


class Undigestable(TypeError):
    """A value in the IR has no stable serialisation (it names the type)."""


def _fields_of(node: Node) -> list[str]:
    return [f for f in _fields(node) if f not in _SKIP]


def structural_digest(obj: Any) -> str:
    """The hex BLAKE2b digest of ``obj``'s structure (see the module docstring)."""
    h = hashlib.blake2b(digest_size=20)
    put = h.update
    var_ids: dict[int, int] = {}
    seen: dict[int, int] = {}
    keep: list[Any] = []  # objects whose id() is memoised stay alive until the end
    stack: list[Any] = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            b = o.encode()
            put(b"s%d:" % len(b) + b)
        elif o is None or isinstance(o, (bool, int)):
            put(f"{type(o).__name__}:{o!r};".encode())
        elif isinstance(o, float):
            put(b"f" + o.hex().encode() + b";")
        elif isinstance(o, _Close):
            put(o.tag)
        elif isinstance(o, Node):
            if _is_var(o):
                k = var_ids.get(id(o))
                if k is None:
                    k = var_ids[id(o)] = len(var_ids)
                    keep.append(o)
                    put(f"V{k}:{type(o).__name__}(".encode())
                    stack.append(_CLOSE)
                    stack.append(_var_sig(o))
                else:
                    put(f"V{k};".encode())
                continue
            ref = seen.get(id(o))
            if ref is not None:
                put(f"R{ref};".encode())
                continue
            seen[id(o)] = len(seen)
            keep.append(o)
            cls = type(o)
            put(f"N{cls.__module__}.{cls.__qualname__}(".encode())
            stack.append(_CLOSE)
            stack.extend(getattr(o, f, None) for f in reversed(_fields_of(o)))
        elif isinstance(o, (list, tuple)):
            put(b"L%d(" % len(o))
            stack.append(_CLOSE)
            stack.extend(reversed(o))
        elif isinstance(o, dict):
            put(b"D%d(" % len(o))
            stack.append(_CLOSE)
            for kv in reversed(list(o.items())):
                stack.extend(reversed(kv))
        elif isinstance(o, (np.ndarray, np.generic)) or hasattr(o, "numpy"):
            a = np.ascontiguousarray(o.numpy() if hasattr(o, "numpy") else o)
            put(f"A{a.dtype.str}{a.shape};".encode())
            put(a.tobytes())
        elif isinstance(o, (bytes, bytearray)):
            put(b"b%d:" % len(o) + bytes(o))
        else:
            raise Undigestable(f"structural_digest: no stable serialisation of a "
                               f"{type(o).__module__}.{type(o).__qualname__}")
    return h.hexdigest()


class _Close:
    __slots__ = ("tag",)

    def __init__(self, tag: bytes):
        self.tag = tag


_CLOSE = _Close(b")")
