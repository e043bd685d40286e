"""PrimFunc: a loop-IR function, the unit of tvm.lower's IRModule that codegen compiles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.function import BaseFunc
from .buffer import Buffer
from .expr import Var
from .stmt import Stmt

__all__ = ["PrimFunc"]


class PrimFunc(BaseFunc):
    """``params``: Vars (handles for buffers, scalars for sizes/values); ``buffer_map`` maps a
    handle param to the Buffer it carries. ``attrs``: e.g. {"global_symbol": "mm"}."""

    __slots__ = ("params", "body", "buffer_map", "attrs")
    params: tuple[Var, ...]
    body: Stmt
    buffer_map: dict[Var, Buffer]
    attrs: dict[str, Any]
    _fields = ("params", "buffer_map", "body")
    _def_fields = ("params",)

    def __init__(self, params: Sequence[Var], body: Stmt, buffer_map: dict[Var, Buffer] | None = None,
                 attrs: dict[str, Any] | None = None):
        self._init(params=tuple(params), body=body, buffer_map=dict(buffer_map or {}),
                   attrs=dict(attrs or {}))

    @property
    def name(self) -> str:
        return self.attrs.get("global_symbol", "default_function")

    def astext_global(self, name: str, show_types: bool = True, meta: Any = None) -> str:
        return f"@{name} = {self}"

    def with_body(self, body: Stmt) -> PrimFunc:
        return PrimFunc(self.params, body, self.buffer_map, self.attrs)

    def with_attr(self, key: str, value: Any) -> PrimFunc:
        attrs = dict(self.attrs)
        attrs[key] = value
        return PrimFunc(self.params, self.body, self.buffer_map, attrs)
