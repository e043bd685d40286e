"""``tvm.tir.ir_builder``: build statements imperatively (tensor intrinsics, ``te.extern`` bodies).

``ib = create(); ib.emit(call_extern(...)); with ib.for_range(0, n, name="i") as i: ...;
with ib.if_scope(cond): ...; with ib.else_scope(): ...; stmt = ib.get()``.

Memory: ``p = ib.buffer_ptr(buf)`` gives flat element access to a buffer (``p[i]`` loads,
``p[i] = v`` stores); ``ib.allocate(dtype, shape, name, scope)`` allocates a buffer for the rest
of the current scope and returns the same kind of handle; ``ib.let(name, value)`` binds a scalar.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..ir import dtype as dt
from . import stmt as S
from .buffer import Buffer, decl_buffer
from .expr import BufferLoad, PrimExpr, Var, cast, convert

__all__ = ["IRBuilder", "BufferVar", "create"]

_KINDS = {"serial": S.ForKind.SERIAL, "parallel": S.ForKind.PARALLEL,
          "vectorize": S.ForKind.VECTORIZED, "unroll": S.ForKind.UNROLLED}


def _seq(stmts: list[S.Stmt]) -> S.Stmt:
    if not stmts:
        return S.Evaluate(0)
    return stmts[0] if len(stmts) == 1 else S.SeqStmt(stmts)


class BufferVar:
    """Element access to a buffer inside an IRBuilder: ``p[i]`` is a load, ``p[i] = v`` emits a
    store (``v`` cast to the buffer's dtype when it is a Python number)."""

    def __init__(self, builder: IRBuilder, buffer: Buffer):
        self._builder, self.buffer = builder, buffer

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def data(self) -> Var:
        return self.buffer.data

    def asobject(self) -> Buffer:
        return self.buffer

    def _index(self, index: Any) -> tuple:
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != len(self.buffer.shape):
            raise IndexError(f"buffer {self.buffer.name} has {len(self.buffer.shape)} dimensions, "
                             f"indexed with {len(idx)}")
        out = []
        for i in idx:
            e = convert(i)
            if not isinstance(e, PrimExpr) or not dt.is_integer(e.dtype):
                raise TypeError(f"buffer {self.buffer.name}: an index must be an integer expression, "
                                f"got {i!r}")
            out.append(e)
        return tuple(out)

    def __getitem__(self, index: Any) -> BufferLoad:
        return BufferLoad(self.buffer, self._index(index))

    def __setitem__(self, index: Any, value: Any) -> None:
        v = convert(value)
        if v.dtype != self.buffer.dtype:
            same_kind = (dt.is_integer(v.dtype) and dt.is_integer(self.buffer.dtype)) or (
                dt.is_float(v.dtype) and dt.is_float(self.buffer.dtype))
            if not isinstance(value, (int, float, bool)) and not same_kind:
                raise TypeError(f"store to buffer {self.buffer.name} ({self.buffer.dtype}): value "
                                f"{value} has dtype {v.dtype}; cast it")
            v = cast(v, self.buffer.dtype)
        self._builder.emit(S.BufferStore(self.buffer, v, self._index(index)))

    def __repr__(self) -> str:
        return f"BufferVar({self.buffer.name})"


class IRBuilder:
    """Collects statements; nested scopes (loops, conditions, attributes, allocations, lets)
    wrap what they emit."""

    def __init__(self) -> None:
        self._stack: list[list[S.Stmt]] = [[]]
        # AttrStmt/Allocate/LetStmt that take what follows, by id; the statements are held so
        # that an id is not reused by a later statement once a scope's node has been replaced
        self._open: dict[int, S.Stmt] = {}

    def emit(self, stmt: Any) -> None:
        """Append a statement; an expression (e.g. ``call_extern``) becomes an ``Evaluate``."""
        if isinstance(stmt, PrimExpr) or not isinstance(stmt, S.Stmt):
            stmt = S.Evaluate(stmt)
        self._stack[-1].append(stmt)

    @contextmanager
    def _scope(self) -> Iterator[list[S.Stmt]]:
        self._stack.append([])
        try:
            yield self._stack[-1]
        finally:
            self._stack.pop()

    @contextmanager
    def for_range(self, begin: Any, end: Any, name: str = "i", dtype: str = "int32",
                  kind: str = "serial") -> Iterator[Var]:
        """A loop ``for name in range(begin, end)``; yields the loop variable."""
        if kind not in _KINDS:
            raise ValueError(f"for_range: unknown kind {kind!r}; expected one of {sorted(_KINDS)}")
        var = Var(name, dtype)
        with self._scope() as body:
            yield var
        self.emit(S.For(var, begin, end - begin, _KINDS[kind], self._fold(body)))

    @contextmanager
    def if_scope(self, cond: Any) -> Iterator[None]:
        with self._scope() as body:
            yield
        self.emit(S.IfThenElse(cond, self._fold(body)))

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        prev = self._stack[-1][-1] if self._stack[-1] else None
        if not isinstance(prev, S.IfThenElse) or prev.else_case is not None:
            raise RuntimeError("else_scope must directly follow an if_scope")
        with self._scope() as body:
            yield
        self._stack[-1][-1] = S.IfThenElse(prev.condition, prev.then_case, self._fold(body))

    def _open_scope(self, stmt: S.Stmt) -> None:
        self._open[id(stmt)] = stmt
        self._stack[-1].append(stmt)

    def scope_attr(self, node: Any, attr_key: str, value: Any) -> None:
        """Wrap everything emitted after this call (in the current scope) in an AttrStmt."""
        self._open_scope(S.AttrStmt(node, attr_key, value, S.Evaluate(0)))

    def buffer_ptr(self, buf: Buffer, shape: Any = None) -> BufferVar:
        """Flat element access to ``buf``'s memory (a 1-d view unless ``shape`` is given)."""
        if isinstance(buf, BufferVar):
            buf = buf.buffer
        if not isinstance(buf, Buffer):
            raise TypeError(f"buffer_ptr: expected a tir.Buffer, got {type(buf).__name__}")
        if shape is None:
            if len(buf.shape) == 1:
                return BufferVar(self, buf)
            n: Any = convert(1)
            for d in buf.shape:
                n = n * d
            shape = (n,)
        shape = shape if isinstance(shape, (list, tuple)) else (shape,)
        view = Buffer(buf.data, buf.dtype, shape, (), buf.elem_offset, buf.name, buf.scope)
        return BufferVar(self, view)

    def allocate(self, dtype: str, shape: Any, name: str = "buf", scope: str = "") -> BufferVar:
        """A buffer allocated for the rest of the current scope ("local": registers/stack)."""
        dims = shape if isinstance(shape, (list, tuple)) else (shape,)
        buf = decl_buffer(dims, dtype, name, scope=scope or "global")
        self._open_scope(S.Allocate(buf, S.Evaluate(0)))
        return BufferVar(self, buf)

    def let(self, var_name: str, value: Any) -> Var:
        """Bind ``value`` to a new variable for the rest of the current scope."""
        value = convert(value)
        var = Var(var_name, value.dtype)
        self._open_scope(S.LetStmt(var, value, S.Evaluate(0)))
        return var

    def get(self) -> S.Stmt:
        """The statement built so far."""
        if len(self._stack) != 1:
            raise RuntimeError("IRBuilder.get() inside an open scope")
        return self._fold(self._stack[0])

    def _fold(self, stmts: list[S.Stmt]) -> S.Stmt:
        # an AttrStmt/Allocate/LetStmt opened by scope_attr/allocate/let takes everything after
        # it (in its scope) as its body
        for i, s in enumerate(stmts):
            if self._open.get(id(s)) is s:
                rest = self._fold(stmts[i + 1:])
                if isinstance(s, S.AttrStmt):
                    new: S.Stmt = S.AttrStmt(s.node, s.attr_key, s.value, rest)
                elif isinstance(s, S.Allocate):
                    new = S.Allocate(s.buffer, rest, s.condition)
                else:
                    assert isinstance(s, S.LetStmt)
                    new = S.LetStmt(s.var, s.value, rest)
                return _seq([*stmts[:i], new])
        return _seq(stmts)


def create() -> IRBuilder:
    """A new IRBuilder (TVM's ``tvm.tir.ir_builder.create()``)."""
    return IRBuilder()
