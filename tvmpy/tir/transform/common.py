"""Helpers shared by the loop-IR passes: the analyzer, fresh copies of statements, linear forms.

Invariant kept by every pass: each Var is *defined* (loop var, let var, allocation data var) at
most once in a function. Passes that duplicate a statement (unrolling, loop partitioning, virtual
threads, double buffering) use :func:`fresh_copy`, which renames the variables that the copy
defines, so that later passes may bind every loop variable to one range in one analyzer.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ...ir import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..functor import Mutator, Visitor

if TYPE_CHECKING:
    from ...arith import Analyzer

__all__ = ["make_analyzer", "fresh_copy", "linear_form", "flat_size", "is_const",
           "VarCollector", "substitute_buffers",
           "fold_add", "fold_mul", "add_offset", "thread_tag", "is_thread_extent",
           "KernelMapper"]


def make_analyzer(func: Any = None) -> Analyzer:
    """A fresh ``tvmpy.arith.Analyzer``; given a PrimFunc, the variables in its parameters'
    shapes are known to be >= 0 (sizes)."""
    from ...arith import Analyzer

    ana = Analyzer()
    if func is not None:
        for b in func.buffer_map.values():
            for s in b.shape:
                if isinstance(s, E.Var) and dt.is_integer(s.dtype):
                    ana.update_bound(s, lo=0)
    return ana


def is_const(e: Any, value: int | None = None) -> bool:
    return isinstance(e, E.IntImm) and (value is None or e.value == value)


def flat_size(buf: Buffer) -> E.PrimExpr:
    """Number of elements a flat allocation of ``buf`` needs (strides honoured)."""
    if not buf.shape:
        return E.const(1, "int32")
    if not buf.strides:
        size: E.PrimExpr = buf.shape[0]
        for s in buf.shape[1:]:
            size = fold_mul(size, s)
        return size
    # the furthest element is at sum((shape_i - 1) * stride_i); + 1 for its own slot
    last: E.PrimExpr = E.const(1, buf.strides[0].dtype)
    for n, st in zip(buf.shape, buf.strides):
        n1 = E.const(n.value - 1, n.dtype) if isinstance(n, E.IntImm) else n - 1
        last = fold_add(last, fold_mul(n1, st))
    return last


class _FreshCopier(Mutator):
    """Substitute ``vmap`` and rename every Var defined inside the statement."""

    def __init__(self, vmap: dict):
        self.vmap: dict[Any, Any] = dict(vmap)
        self.buf_map: dict[int, Buffer] = {}

    def _new_var(self, v: E.Var) -> E.Var:
        nv = type(v)(v.name, v.dtype)
        self.vmap[v] = nv
        return nv

    def _buf(self, b: Buffer) -> Buffer:
        nb = self.buf_map.get(id(b))
        if nb is not None:
            return nb
        data = self.vmap.get(b.data, b.data)
        shape = tuple(self.visit(s) for s in b.shape)
        strides = tuple(self.visit(s) for s in b.strides)
        eo = self.visit(b.elem_offset)
        if (data is b.data and all(x is y for x, y in zip(shape, b.shape))
                and all(x is y for x, y in zip(strides, b.strides)) and eo is b.elem_offset):
            nb = b
        else:
            nb = b.replace(data=data, shape=shape, strides=strides, elem_offset=eo)
        self.buf_map[id(b)] = nb
        return nb

    def visit_Var(self, v: E.Var) -> Any:
        r = self.vmap.get(v)
        return v if r is None else E.convert(r)

    def visit_For(self, f: S.For) -> S.Stmt:
        mn, ext = self.visit(f.min), self.visit(f.extent)
        nv = self._new_var(f.loop_var)
        return f.replace(loop_var=nv, min=mn, extent=ext, body=self.visit(f.body))

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        val = self.visit(s.value)
        nv = self._new_var(s.var)
        return S.LetStmt(nv, val, self.visit(s.body))

    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        val = self.visit(e.value)
        nv = self._new_var(e.var)
        return E.Let(nv, val, self.visit(e.body))

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        self._new_var(s.buffer.data)
        nb = self._buf(s.buffer)
        return S.Allocate(nb, self.visit(s.body), self.visit(s.condition))

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        # a condition the substitution made constant (an unrolled loop's ``idx == 2``: the
        # Winograd transforms select a matrix row so) keeps only the branch it takes, instead
        # of copying every branch for Simplify to drop later
        cond = self.visit(e.condition)
        known = _const_truth(cond)
        if known is not None:
            chosen = self.visit(e.true_value if known else e.false_value)
            if chosen.dtype == e.dtype:
                return chosen
        t, f = self.visit(e.true_value), self.visit(e.false_value)
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f)

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        idx = tuple(self.visit(i) for i in e.indices)
        pred = self.visit(e.predicate) if e.predicate is not None else None
        return E.BufferLoad(self._buf(e.buffer), idx, pred)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        idx = tuple(self.visit(i) for i in s.indices)
        pred = self.visit(s.predicate) if s.predicate is not None else None
        return S.BufferStore(self._buf(s.buffer), self.visit(s.value), idx, pred)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        node = s.node
        if isinstance(node, E.Var):
            node = self.visit(node)
        elif isinstance(node, Buffer):
            node = self._buf(node)
        return S.AttrStmt(node, s.attr_key, self.visit(s.value), self.visit(s.body))


_CMP: dict[type, Callable[[int, int], bool]] = {
    E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b}


def _const_int(e: Any, depth: int = 0) -> int | None:
    """The value of an integer expression of constants (``0 + 3``), else None."""
    if isinstance(e, E.IntImm):
        return int(e.value)
    if depth < 4 and isinstance(e, (E.Add, E.Sub, E.Mul)):
        a, b = _const_int(e.a, depth + 1), _const_int(e.b, depth + 1)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, E.Add) else a - b if isinstance(e, E.Sub) else a * b
    return None


def _const_truth(c: Any) -> bool | None:
    """The truth of a scalar condition over integer constants (or of a vector condition that
    broadcasts one: a vectorized loop's ``select(broadcast(idx == 2), ...)``), else None."""
    if isinstance(c, E.Broadcast):
        return _const_truth(c.value)
    if dt.lanes_of(c.dtype) != 1:
        return None
    cmp = _CMP.get(type(c))
    if cmp is not None:
        a, b = _const_int(c.a), _const_int(c.b)
        return None if a is None or b is None else cmp(a, b)
    if isinstance(c, E.IntImm):
        return bool(c.value)
    if isinstance(c, (E.And, E.Or)):
        a, b = _const_truth(c.a), _const_truth(c.b)
        if isinstance(c, E.And):
            return False if a is False or b is False else (True if a and b else None)
        return True if a or b else (False if a is False and b is False else None)
    if isinstance(c, E.Not):
        a = _const_truth(c.a)
        return None if a is None else not a
    return None


def fresh_copy(stmt: S.Stmt, vmap: dict | None = None) -> S.Stmt:
    """A copy of ``stmt`` with ``vmap`` substituted and all variables it defines renamed."""
    return _FreshCopier(vmap or {}).visit(stmt)


def linear_form(e: E.PrimExpr, var: E.Var) -> tuple[int, E.PrimExpr] | None:
    """Write ``e`` as ``coeff * var + rest`` with an integer ``coeff`` and ``rest`` free of
    ``var``; None when ``e`` is not linear in ``var`` (or not an integer expression)."""
    if not dt.is_integer(e.dtype) or dt.lanes_of(e.dtype) != 1:
        return None
    zero = E.const(0, e.dtype)

    def go(x: E.PrimExpr) -> tuple[int, E.PrimExpr] | None:
        if x is var:
            return 1, zero
        if isinstance(x, (E.IntImm, E.Var)) or not _uses(x, var):
            return 0, x
        if isinstance(x, (E.Add, E.Sub)):
            la, lb = go(x.a), go(x.b)
            if la is None or lb is None:
                return None
            if isinstance(x, E.Add):
                return la[0] + lb[0], _add(la[1], lb[1])
            return la[0] - lb[0], _sub(la[1], lb[1])
        if isinstance(x, E.Mul):
            for p, q in ((x.a, x.b), (x.b, x.a)):
                if isinstance(q, E.IntImm):
                    lp = go(p)
                    if lp is None:
                        return None
                    return lp[0] * q.value, _mul(lp[1], q)
            return None
        return None

    return go(e)


def _add(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    if is_const(a, 0):
        return b
    if is_const(b, 0):
        return a
    return a + b


def _sub(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    if is_const(b, 0):
        return a
    return a - b


def _mul(a: E.PrimExpr, c: E.IntImm) -> E.PrimExpr:
    if c.value == 0 or is_const(a, 0):
        return E.const(0, a.dtype)
    if c.value == 1:
        return a
    return a * c


def _uses(node: Any, var: E.Var) -> bool:
    from ..functor import uses_var

    return uses_var(node, var)


class VarCollector(Visitor):
    """Every Var used (read) in a node, by identity."""

    visit_buffers = False

    def __init__(self) -> None:
        self.vars: dict[int, E.Var] = {}

    def visit_Var(self, v: E.Var) -> None:
        self.vars[id(v)] = v

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        self.vars[id(e.buffer.data)] = e.buffer.data
        self.generic_visit(e)

    def visit_BufferStore(self, s: S.BufferStore) -> None:
        self.vars[id(s.buffer.data)] = s.buffer.data
        self.generic_visit(s)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if isinstance(s.node, E.Var):
            self.vars[id(s.node)] = s.node
        self.generic_visit(s)


class _BufferReplacer(Mutator):
    """Replace buffers by data var (``data_map``: id(old data) -> new Buffer), optionally
    rewriting each access index with ``index_fn(old_buffer, index)``."""

    def __init__(self, data_map: dict[int, Buffer], index_fn=None):
        self.data_map = data_map
        self.index_fn = index_fn

    def _idx(self, old: Buffer, indices: tuple) -> tuple:
        if self.index_fn is None:
            return indices
        return tuple(self.index_fn(old, i) for i in indices)

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.PrimExpr:
        new = self.generic_visit(e)
        nb = self.data_map.get(id(e.buffer.data))
        if nb is None:
            return new
        return E.BufferLoad(nb, self._idx(e.buffer, new.indices), new.predicate)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        new = self.generic_visit(s)
        nb = self.data_map.get(id(s.buffer.data))
        if nb is None:
            return new
        return S.BufferStore(nb, new.value, self._idx(s.buffer, new.indices), new.predicate)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        body = self.visit(s.body)
        nb = self.data_map.get(id(s.buffer.data), s.buffer)
        if body is s.body and nb is s.buffer:
            return s
        return S.Allocate(nb, body, s.condition)

    def visit_Var(self, v: E.Var) -> E.PrimExpr:
        nb = self.data_map.get(id(v))
        return nb.data if nb is not None else v

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        new = self.generic_visit(e)
        if (e.op == "tvm_access_ptr" and self.index_fn is not None and len(e.args) > 2
                and isinstance(e.args[1], E.Var) and id(e.args[1]) in self.data_map):
            args = list(new.args)
            args[2] = self.index_fn(SimpleNamespace(data=e.args[1], name=""), args[2])
            return E.Call(e.dtype, e.op, args)
        return new

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        node = s.node
        if isinstance(node, E.Var) and id(node) in self.data_map:
            node = self.data_map[id(node)].data
        body = self.visit(s.body)
        value = self.visit(s.value)
        if node is s.node and body is s.body and value is s.value:
            return s
        return S.AttrStmt(node, s.attr_key, value, body)


def substitute_buffers(stmt: S.Stmt, data_map: dict[int, Buffer],
                       index_fn: Callable[[Buffer, E.PrimExpr], E.PrimExpr] | None = None
                       ) -> S.Stmt:
    """Replace every access to the buffers whose data var id is a key of ``data_map`` by the
    new buffer (uses of the data var itself, e.g. in access pointers, are renamed too);
    ``index_fn(old_buffer, index) -> index`` rewrites the (flat) index of each access, and the
    offset of ``tvm_access_ptr`` calls on those buffers (``old_buffer`` then has only ``data``)."""
    return _BufferReplacer(data_map, index_fn).visit(stmt)


def fold_add(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """``a + b`` with integer constants folded (keeps flattened indices readable)."""
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm) and a.dtype == b.dtype:
        return E.const(a.value + b.value, a.dtype)
    return _add(a, b)


def fold_mul(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """``a * b`` with integer constants folded and multiplications by 1 dropped."""
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm) and a.dtype == b.dtype:
        return E.const(a.value * b.value, a.dtype)
    if is_const(a, 1):
        return b
    if is_const(b, 1):
        return a
    if is_const(a, 0) or is_const(b, 0):
        return E.const(0, (b if is_const(a, 0) else a).dtype)
    return a * b


def add_offset(index: E.PrimExpr, offset: E.PrimExpr) -> E.PrimExpr:
    """``index + offset`` for a scalar index or a ramp (offset added to its base)."""
    if isinstance(index, E.Ramp):
        return E.Ramp(fold_add(index.base, offset), index.stride, index.lanes)
    if offset.dtype != index.dtype:
        offset = E.cast(offset, index.dtype)
    return fold_add(index, offset)


def thread_tag(s: Any) -> str:
    """The thread tag (``threadIdx.x``, ``blockIdx.y``...) an AttrStmt binds, or ""."""
    return s.node.thread_tag if isinstance(s, S.AttrStmt) and isinstance(s.node, E.IterVar) else ""


def is_thread_extent(s: Any) -> bool:
    """Whether ``s`` is a ``thread_extent`` attribute binding an IterVar (a launch dimension)."""
    return isinstance(s, S.AttrStmt) and s.attr_key == "thread_extent" and isinstance(
        s.node, E.IterVar)


class KernelMapper(Mutator):
    """Applies ``fn`` to every GPU kernel of a body: each outermost ``thread_extent`` subtree."""

    def __init__(self, fn: Any):
        self.fn = fn

    def visit_PrimExpr(self, e: Any) -> Any:
        return e

    def visit_AttrStmt(self, s: S.AttrStmt) -> Any:
        if is_thread_extent(s):
            return self.fn(s)
        return self.generic_visit(s)
