"""Statements of the loop IR."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from ..ir.node import Node
from .buffer import Buffer
from .expr import PrimExpr, Range, Var, convert

__all__ = [
    "Stmt", "LetStmt", "AttrStmt", "AssertStmt", "BufferStore", "Allocate", "ForKind", "For",
    "IfThenElse", "SeqStmt", "Evaluate", "Prefetch", "seq", "no_op",
]


class Stmt(Node):
    __slots__ = ()


class LetStmt(Stmt):
    __slots__ = ("var", "value", "body")
    var: Var
    value: PrimExpr
    body: Stmt
    _fields = ("var", "value", "body")
    _def_fields = ("var",)

    def __init__(self, var: Var, value: PrimExpr, body: Stmt):
        self._init(var=var, value=convert(value), body=body)


class AttrStmt(Stmt):
    """Annotates ``body`` with ``attr_key`` on ``node``. Keys used by the lowering:

    - "thread_extent" (node: IterVar of a thread axis, value: extent)
    - "virtual_thread" (node: IterVar of a vthread, value: extent)
    - "pragma_<name>" (node: loop var, value: the pragma's value)
    - "storage_alignment", "double_buffer_scope", "double_buffer_write", "storage_scope"
    """

    __slots__ = ("node", "attr_key", "value", "body")
    node: Any
    attr_key: str
    value: PrimExpr
    body: Stmt
    _fields = ("node", "value", "body")

    def __init__(self, node: Any, attr_key: str, value: Any, body: Stmt):
        self._init(node=node, attr_key=attr_key, value=convert(value), body=body)


class AssertStmt(Stmt):
    __slots__ = ("condition", "message", "body")
    condition: PrimExpr
    message: PrimExpr
    body: Stmt
    _fields = ("condition", "message", "body")

    def __init__(self, condition: PrimExpr, message: Any, body: Stmt):
        self._init(condition=convert(condition), message=convert(message), body=body)


class BufferStore(Stmt):
    """``buffer[indices] = value`` (vector store when an index is a Ramp)."""

    __slots__ = ("buffer", "value", "indices", "predicate")
    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]
    predicate: PrimExpr | None
    _fields = ("value", "indices", "predicate")

    def __init__(self, buffer: Buffer, value: Any, indices: Sequence[Any], predicate: PrimExpr | None = None):
        self._init(buffer=buffer, value=convert(value), indices=tuple(convert(i) for i in indices),
                   predicate=predicate)


class Allocate(Stmt):
    """Allocates ``buffer`` (its ``data`` var, shape, dtype, scope) for the duration of ``body``.
    ``condition`` false skips the allocation (unused for CPU)."""

    __slots__ = ("buffer", "condition", "body")
    buffer: Buffer
    condition: PrimExpr
    body: Stmt
    _fields = ("buffer", "condition", "body")
    _def_fields = ()

    def __init__(self, buffer: Buffer, body: Stmt, condition: Any = True):
        self._init(buffer=buffer, condition=convert(condition), body=body)

    # TVM's fields of tir.Allocate, read from the buffer (passes written for TVM read these)
    @property
    def buffer_var(self) -> Var:
        return self.buffer.data

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def extents(self) -> list[PrimExpr]:
        return list(self.buffer.shape)


class ForKind(enum.IntEnum):
    SERIAL = 0
    PARALLEL = 1
    VECTORIZED = 2
    UNROLLED = 3
    THREAD_BINDING = 4


class For(Stmt):
    """``for loop_var in range(min, min + extent): body``."""

    __slots__ = ("loop_var", "min", "extent", "kind", "body", "thread_binding", "annotations")
    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    thread_binding: Any
    annotations: dict[str, Any]
    _fields = ("loop_var", "min", "extent", "body")
    _def_fields = ("loop_var",)

    def __init__(self, loop_var: Var, min: Any, extent: Any, kind: ForKind, body: Stmt,
                 thread_binding: Any = None, annotations: dict | None = None):
        self._init(loop_var=loop_var, min=convert(min), extent=convert(extent), kind=ForKind(kind),
                   body=body, thread_binding=thread_binding, annotations=dict(annotations or {}))


class IfThenElse(Stmt):
    __slots__ = ("condition", "then_case", "else_case")
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None
    _fields = ("condition", "then_case", "else_case")

    def __init__(self, condition: Any, then_case: Stmt, else_case: Stmt | None = None):
        self._init(condition=convert(condition), then_case=then_case, else_case=else_case)


class SeqStmt(Stmt):
    __slots__ = ("seq",)
    seq: tuple[Stmt, ...]
    _fields = ("seq",)

    def __init__(self, seq: Sequence[Stmt]):
        self._init(seq=tuple(seq))

    def __len__(self) -> int:
        return len(self.seq)

    def __getitem__(self, i: int) -> Stmt:
        return self.seq[i]


class Evaluate(Stmt):
    """Evaluates an expression for its side effect (an external call)."""

    __slots__ = ("value",)
    value: PrimExpr
    _fields = ("value",)

    def __init__(self, value: Any):
        self._init(value=convert(value))


class Prefetch(Stmt):
    __slots__ = ("buffer", "bounds")
    buffer: Buffer
    bounds: tuple[Range, ...]
    _fields = ("bounds",)

    def __init__(self, buffer: Buffer, bounds: Sequence[Any]):
        self._init(buffer=buffer, bounds=tuple(bounds))


def no_op() -> Stmt:
    return Evaluate(0)


def is_no_op(s: Stmt | None) -> bool:
    from .expr import IntImm

    if s is None:
        return True
    if isinstance(s, Evaluate) and isinstance(s.value, IntImm):
        return True
    return isinstance(s, SeqStmt) and len(s.seq) == 0


def seq(*stmts: Stmt | None) -> Stmt:
    """Flatten nested SeqStmts and drop no-ops; one statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None or is_no_op(s):
            continue
        if isinstance(s, SeqStmt):
            flat.extend(x for x in s.seq if not is_no_op(x))
        else:
            flat.append(s)
    if not flat:
        return no_op()
    return flat[0] if len(flat) == 1 else SeqStmt(flat)
