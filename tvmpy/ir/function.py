"""``BaseFunc``: what an IRModule holds, a relay ``Function`` or a tir ``PrimFunc`` (TVM's
``tvm.ir.BaseFunc``). Each kind prints itself as a module-level definition.

``TextMeta``: what one ``astext`` call shares across the functions it prints (TVM's text
format): the metadata (tensor constants, printed as ``meta[relay.Constant][i]``), the user's
``annotate(expr) -> str`` callback, and the framing: a ``#[version = "0.0.5"]`` first line and,
at the end, the ``#[metadata]`` section (``show_meta_data=True``) or a comment saying it was
left out. ``str()`` prints neither.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .node import Node

__all__ = ["BaseFunc", "TextMeta", "TEXT_VERSION"]

TEXT_VERSION = "0.0.5"  # the version line TVM's text format starts with


class TextMeta:
    """The metadata of one ``astext`` print (see the module docstring)."""

    def __init__(self, annotate: Callable[[Any], Any] | None = None) -> None:
        if annotate is not None and not callable(annotate):
            raise TypeError(f"astext: annotate must be a function expr -> str, got {annotate!r}")
        self.annotate = annotate
        self.sections: dict[str, list[dict]] = {}
        self._index: dict[tuple[str, int], int] = {}
        self._keep: list[Any] = []  # the nodes indexed by id() stay alive while printing

    def ref(self, kind: str, node: Any, record: Callable[[], dict]) -> str:
        """``meta[kind][i]`` for ``node``, the same ``i`` each time; ``record()`` is its entry
        in the metadata section."""
        key = (kind, id(node))
        if key not in self._index:
            entries = self.sections.setdefault(kind, [])
            self._index[key] = len(entries)
            entries.append(record())
            self._keep.append(node)
        return f"meta[{kind}][{self._index[key]}]"

    def finish(self, text: str, show_meta_data: bool) -> str:
        """``text`` framed as TVM's astext: the version line, then the metadata section (or
        the note that it was omitted) when anything was referenced."""
        out = f'#[version = "{TEXT_VERSION}"]\n{text}'
        if self.sections:
            if show_meta_data:
                out += "\n#[metadata]\n" + json.dumps(self.sections, indent=1)
            else:
                out += ("\n/* For debugging purposes the metadata section has been omitted.\n"
                        " * If you would like to see the full metadata section you can set the\n"
                        " * option to `True` when invoking `astext`.\n */")
        return out


class BaseFunc(Node):
    """Base class of module-level functions (no fields of its own)."""

    __slots__ = ()

    def astext_global(self, name: str, show_types: bool = True,
                      meta: TextMeta | None = None) -> str:
        """The text of this function defined as ``@name`` in a module (``meta``: the
        metadata shared by the module's functions in one astext)."""
        raise NotImplementedError(f"{type(self).__name__}.astext_global")
