"""LowerThreadAllreduce: a reduction across the threads of a block, as a tree or warp shuffles.

What it does
te lowers a reduction axis bound to ``threadIdx.*`` as the update ``X[idx] = X[idx] op v``
inside that thread attribute, with ``idx`` free of the thread index (the serial-loop meaning).
On a GPU the threads would race on ``X[idx]``; here, inside a thread attribute ``T`` of extent
``E`` (a constant) with group offset ``g`` (the linear index of the enclosing threadIdx
attributes of other tags, ``G`` groups):

    acc = allocate((1,), local); acc[0] = identity
    <T's body with X[idx] read and written as acc[0]>      # each thread's partial value
    red = allocate((G * E,), shared)
    red[g*E + T] = acc[0]
    if T < s and T + s < E: red[g*E + T] = red[g*E + T] op red[g*E + T + s]   for s = P/2 .. 1
    if T == 0: X[idx] = X[idx] op red[g*E]

(P: E rounded up to a power of two). ThreadSync("shared") then puts a barrier before each tree
step. ``op``: ``+ * min max``; a store predicate on ``T`` (``set_store_predicate(tx == 0)``) is
dropped (thread 0 writes the result).

Warp form (a target with ``thread_warp_size > 1``, i.e. CUDA, when ``T`` is threadIdx.x with
the same power-of-two extent ``E <= warp size`` everywhere in the kernel, so each group is ``E``
consecutive lanes of one warp): no shared memory and no barrier::

    mask = tvm_warp_activemask()
    acc[0] = acc[0] op tvm_warp_shuffle_down(mask, acc[0], s, E, warp_size)   for s = E/2 .. 1
    if T == 0: X[idx] = X[idx] op acc[0]

Tuple combiners (argmin/argmax: a ``comm_reducer`` of several values): te marks such an update
with ``AttrStmt(combiner, "tvmpy.tuple_reduce", tvm_tuple(rhs...))`` when its reduction axis is
bound to threadIdx. The same two forms then run with one accumulator (and one shared buffer, or
one shuffle per step) per value; each step shuffles or reads every value at the same lane and
applies the combiner to the whole tuple (its results bound to lets before any store).

When valid
    GPU kernels after UnifyThreadBinding, for a thread extent ``E`` that is a constant;
    updates whose index depends on the thread index are not reductions and are left alone;
    a racy update the rewrite cannot express is refused with an error, not miscompiled.

Example
    before:  attr [threadIdx.x] thread_extent = 32 { B[0] = B[0] + A[tx] }
    after:   acc[0] = A[tx]; red[tx] = acc[0]; (tree steps over red, barriers by ThreadSync)
             if tx == 0 { B[0] = B[0] + red[0] }      (CUDA: tvm_warp_shuffle_down steps)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.node import structural_equal
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer
from ..function import PrimFunc
from ..functor import Mutator, post_order_visit
from .common import thread_tag
from .function_pass import PrimFuncPass

_OPS = (E.Add, E.Mul, E.Min, E.Max)
#: ``tvm_warp_shuffle_down(mask, value, offset, width, warp_size)``: the value of lane
#: ``lane + offset`` of the caller's ``width``-lane segment (its own past the segment's end)
WARP_SHUFFLE_DOWN = "tir.tvm_warp_shuffle_down"
#: ``tvm_warp_activemask()``: the uint32 mask of the warp's active lanes (CUDA __activemask)
WARP_ACTIVEMASK = "tir.tvm_warp_activemask"


def _identity(op: type, dtype: str) -> E.PrimExpr:
    if op is E.Add:
        return E.const(0, dtype)
    if op is E.Mul:
        return E.const(1, dtype)
    info = np.finfo(dtype) if "float" in dtype else np.iinfo(dtype)
    return E.const(info.min if op is E.Max else info.max, dtype)


def _uses(node: Any, var: E.Var) -> bool:
    hit: list[int] = []
    post_order_visit(node, lambda n: hit.append(1) if n is var else None)
    return bool(hit)


def _inner_vars(body: S.Stmt) -> set[int]:
    """ids of the variables ``body`` defines itself (loop, let and thread variables)."""
    inner: set[int] = set()

    def defs(n: Any) -> None:
        if isinstance(n, S.For):
            inner.add(id(n.loop_var))
        elif isinstance(n, (S.LetStmt, E.Let)):
            inner.add(id(n.var))
        elif isinstance(n, S.AttrStmt) and isinstance(n.node, E.IterVar):
            inner.add(id(n.node.var))

    post_order_visit(body, defs)
    return inner


def _refuse_racy_updates(fname: str, body: S.Stmt, tvar: E.Var, tag: str) -> None:
    """Raise for a read-modify-write that every thread of ``tvar`` does on the same element of
    memory they share (its index free of ``tvar`` and of the body's own variables, no guard on
    ``tvar``): a reduction this pass cannot turn into a cross-thread one (an update that is
    neither ``X = X op v`` nor a tuple reduction marked by te). Left as is, the threads would
    race and the result be wrong."""
    inner = _inner_vars(body)
    allocated: set[int] = set()
    post_order_visit(body, lambda n: allocated.add(id(n.buffer.data))
                     if isinstance(n, S.Allocate) else None)
    loads: list[E.BufferLoad] = []
    post_order_visit(body, lambda n: loads.append(n) if isinstance(n, E.BufferLoad) else None)

    def shared_element(st: S.BufferStore) -> bool:
        if st.buffer.scope == "local" or id(st.buffer.data) in allocated:
            return False
        free: list[E.Var] = []
        post_order_visit(st.indices, lambda x: free.append(x) if isinstance(x, E.Var) else None)
        return all(v is not tvar and id(v) not in inner for v in free)

    def walk(n: Any) -> None:
        if isinstance(n, S.IfThenElse):
            if _uses(n.condition, tvar):
                return  # guarded on the thread: not every thread writes
            walk(n.then_case)
            if n.else_case is not None:
                walk(n.else_case)
        elif isinstance(n, S.BufferStore):
            if shared_element(n) and any(
                    ld.buffer.data is n.buffer.data and structural_equal(ld.indices, n.indices)
                    for ld in loads):
                raise NotImplementedError(
                    f"{fname}: every {tag} thread updates {n.buffer.name}{list(n.indices)} "
                    "(a reduction over the thread axis whose combiner this lowering cannot "
                    "turn into a cross-thread reduction: not X = X op v with op in + * min "
                    f"max, nor a te comm_reducer): the threads would race. Keep that reduction "
                    f"axis off {tag} (one thread per output).")
        elif isinstance(n, S.SeqStmt):
            for x in n.seq:
                walk(x)
        elif isinstance(n, S.AttrStmt) and thread_tag(n).startswith("threadIdx"):
            return
        elif isinstance(n, (S.For, S.AttrStmt, S.Allocate, S.LetStmt, S.AssertStmt)):
            walk(n.body)

    walk(body)


class _Candidate:
    def __init__(self, store: S.BufferStore, op: type, conds: list[E.PrimExpr]):
        self.store = store
        self.op = op
        self.conds = conds  # the enclosing conditions free of the thread index


def _match(st: S.BufferStore) -> tuple[type, E.PrimExpr] | None:
    v = st.value
    if not isinstance(v, _OPS):
        return None
    for a, b in ((v.a, v.b), (v.b, v.a)):
        if isinstance(a, E.BufferLoad) and a.buffer.data is st.buffer.data and structural_equal(
                a.indices, st.indices):
            return type(v), b
    return None


def _find(body: S.Stmt, tvar: E.Var) -> list[_Candidate]:
    """Updates in ``body`` of a global/any-scope element whose index is free of ``tvar`` and of
    every variable defined inside ``body``."""
    inner = _inner_vars(body)
    out: list[_Candidate] = []
    conds: list[E.PrimExpr] = []

    def walk(n: Any) -> None:
        if isinstance(n, S.IfThenElse):
            walk_cond(n.condition, n.then_case)
            if n.else_case is not None:
                walk_cond(E.Not(n.condition), n.else_case)
            return
        if isinstance(n, S.BufferStore):
            f(n)
            return
        if isinstance(n, S.SeqStmt):
            for x in n.seq:
                walk(x)
        elif isinstance(n, S.AttrStmt) and thread_tag(n).startswith("threadIdx"):
            return  # a nested thread scope: its own reductions
        elif isinstance(n, (S.For, S.AttrStmt, S.Allocate, S.LetStmt, S.AssertStmt)):
            walk(n.body)

    def walk_cond(c: E.PrimExpr, body: S.Stmt) -> None:
        used: list[E.Var] = []
        post_order_visit(c, lambda x: used.append(x) if isinstance(x, E.Var) else None)
        keep = all(v is not tvar and id(v) not in inner for v in used)
        if keep:
            conds.append(c)
        walk(body)
        if keep:
            conds.pop()

    def f(n: Any) -> None:
        if n.buffer.scope == "local":
            return
        if any(_uses(i, tvar) for i in n.indices):
            return
        m = _match(n)
        if m is None:
            return
        free = []
        post_order_visit(n.indices, lambda x: free.append(x) if isinstance(x, E.Var) else None)
        if any(id(v) in inner for v in free):
            raise NotImplementedError(
                f"cross-thread reduction into {n.buffer.name}: the output index changes inside "
                f"the {tvar.name} loop; bind the reduction axis innermost (one output per "
                "thread group)")
        out.append(_Candidate(n, m[0], list(conds)))

    walk(body)
    # an element also written otherwise in the body (its init): a reduction of each thread's
    # own, not across the threads
    own: list[S.BufferStore] = []
    post_order_visit(body, lambda n: own.append(n) if isinstance(n, S.BufferStore) else None)
    cand_stores = {id(c.store) for c in out}
    return [c for c in out if not any(
        id(x) not in cand_stores and x.buffer.data is c.store.buffer.data
        and structural_equal(x.indices, c.store.indices) for x in own)]


TUPLE_ATTR = "tvmpy.tuple_reduce"


class _Tuple:
    """A tuple reduction's update: its attribute, the (buffer, index) it stores per value and
    the enclosing conditions free of the thread index."""

    def __init__(self, attr: S.AttrStmt, stores: list[S.BufferStore], conds: list[E.PrimExpr]):
        self.attr = attr
        self.comb = attr.node
        self.stores = stores
        self.conds = conds


def _free_vars(node: Any) -> list[E.Var]:
    out: list[E.Var] = []
    post_order_visit(node, lambda x: out.append(x) if isinstance(x, E.Var) else None)
    return out


def _find_tuples(fname: str, body: S.Stmt, tvar: E.Var) -> list[_Tuple]:
    inner = _inner_vars(body)
    out: list[_Tuple] = []
    conds: list[E.PrimExpr] = []

    def walk(n: Any) -> None:
        if isinstance(n, S.AttrStmt) and n.attr_key == TUPLE_ATTR:
            stores: list[S.BufferStore] = []
            post_order_visit(n.body, lambda x: stores.append(x)
                             if isinstance(x, S.BufferStore) else None)
            if len(stores) != len(n.node.lhs):
                raise NotImplementedError(f"{fname}: tuple reduction with {len(stores)} stores "
                                          f"for {len(n.node.lhs)} values")
            for st in stores:
                free = _free_vars(st.indices)
                if any(v is tvar for v in free):
                    return  # a reduction of each thread's own (the axis is not this one)
                if any(id(v) in inner for v in free):
                    raise NotImplementedError(
                        f"cross-thread reduction into {st.buffer.name}: the output index changes "
                        f"inside the {tvar.name} loop; bind the reduction axis innermost")
            out.append(_Tuple(n, stores, list(conds)))
            return
        if isinstance(n, S.IfThenElse):
            for c, b in ((n.condition, n.then_case), (E.Not(n.condition), n.else_case)):
                if b is None:
                    continue
                keep = all(v is not tvar and id(v) not in inner for v in _free_vars(c))
                if keep:
                    conds.append(c)
                walk(b)
                if keep:
                    conds.pop()
        elif isinstance(n, S.SeqStmt):
            for x in n.seq:
                walk(x)
        elif isinstance(n, S.AttrStmt) and thread_tag(n).startswith("threadIdx"):
            return
        elif isinstance(n, (S.For, S.AttrStmt, S.Allocate, S.LetStmt, S.AssertStmt)):
            walk(n.body)

    walk(body)
    return out


def _combine(comb: Any, lhs: Sequence[E.PrimExpr], rhs: Sequence[E.PrimExpr], k: int,
             emit: Any) -> S.Stmt:
    """Lets of ``comb(lhs, rhs)`` (all computed before ``emit(results)``, the stores)."""
    res = comb.combine(lhs, rhs)
    tmps = [E.Var(f"red_t{k}_{j}", r.dtype) for j, r in enumerate(res)]
    stmt: S.Stmt = emit(tmps)
    for t, r in reversed(list(zip(tmps, res))):
        stmt = S.LetStmt(t, r, stmt)
    return stmt


class _ReplaceTuple(Mutator):
    """The tuple attribute -> its update with X_j[idx_j] read and written as acc_j[0];
    a store predicate on ``tvar`` around it dropped."""

    def __init__(self, t: _Tuple, accs: list[Buffer], tvar: E.Var):
        self.t = t
        self.accs = accs
        self.tvar = tvar
        self.zero = E.const(0, "int32")

    def visit_PrimExpr(self, e: Any) -> Any:
        return e

    def _acc(self, buf: Buffer, idx: Any) -> Buffer | None:
        for st, acc in zip(self.t.stores, self.accs):
            if buf.data is st.buffer.data and structural_equal(idx, st.indices):
                return acc
        return None

    def _sub(self, e: Any) -> Any:
        outer = self

        class _Loads(Mutator):
            def visit_BufferLoad(self, x: E.BufferLoad) -> Any:
                acc = outer._acc(x.buffer, x.indices)
                return E.BufferLoad(acc, [outer.zero]) if acc is not None else \
                    self.generic_visit(x)

        return _Loads().visit(e)

    def visit_AttrStmt(self, s: S.AttrStmt) -> Any:
        if s is self.t.attr:
            return self.visit(s.body)
        return self.generic_visit(s)

    def visit_LetStmt(self, s: S.LetStmt) -> Any:
        return S.LetStmt(s.var, self._sub(s.value), self.visit(s.body))

    def visit_IfThenElse(self, s: S.IfThenElse) -> Any:
        if s.else_case is None and _uses(s.condition, self.tvar) and not (
                isinstance(s.condition, E.Call) and s.condition.op == "likely"):
            found: list[int] = []
            post_order_visit(s.then_case, lambda n: found.append(1) if n is self.t.attr else None)
            if found:
                return self.visit(s.then_case)
        return S.IfThenElse(self._sub(s.condition), self.visit(s.then_case),
                            self.visit(s.else_case) if s.else_case is not None else None)

    def visit_BufferStore(self, s: S.BufferStore) -> Any:
        acc = self._acc(s.buffer, s.indices)
        if acc is not None:
            return S.BufferStore(acc, self._sub(s.value), [self.zero])
        return s


class _Replace(Mutator):
    """X[idx] -> acc[0] for the candidate element; store predicates on ``tvar`` dropped."""

    def __init__(self, cand: _Candidate, acc: Buffer, tvar: E.Var):
        self.c = cand
        self.acc = acc
        self.tvar = tvar
        self.zero = E.const(0, "int32")

    def _same(self, buf: Buffer, idx: Any) -> bool:
        return buf.data is self.c.store.buffer.data and structural_equal(
            idx, self.c.store.indices)

    def visit_BufferLoad(self, e: E.BufferLoad) -> Any:
        if self._same(e.buffer, e.indices):
            return E.BufferLoad(self.acc, [self.zero])
        return self.generic_visit(e)

    def visit_BufferStore(self, s: S.BufferStore) -> Any:
        if self._same(s.buffer, s.indices):
            return S.BufferStore(self.acc, self.visit(s.value), [self.zero])
        return self.generic_visit(s)

    def visit_IfThenElse(self, s: S.IfThenElse) -> Any:
        likely_ = isinstance(s.condition, E.Call) and s.condition.op == "likely"
        if s.else_case is None and not likely_ and _uses(s.condition, self.tvar):
            found: list[int] = []
            post_order_visit(s.then_case, lambda n: found.append(1) if n is self.c.store else None)
            if found:  # the stage's store predicate (thread 0 stores): after the tree
                return self.visit(s.then_case)
        return self.generic_visit(s)


class _Lower(Mutator):
    def __init__(self, fname: str, warp_size: int):
        self.fname = fname
        self.warp_size = warp_size
        self.outer: list[S.AttrStmt] = []  # enclosing threadIdx attributes
        self.count = 0
        self.in_kernel = False
        self.tx_extents: list[Any] = []  # the kernel's threadIdx.x extents

    def visit_PrimExpr(self, e: Any) -> Any:
        return e

    def visit_AttrStmt(self, s: S.AttrStmt) -> Any:
        if s.attr_key == "thread_extent" and not self.in_kernel:
            self.in_kernel = True
            self.tx_extents = []
            post_order_visit(s, lambda n: self.tx_extents.append(n.value) if isinstance(
                n, S.AttrStmt) and n.attr_key == "thread_extent" and thread_tag(n) == "threadIdx.x"
                else None)
            try:
                return self._visit_attr(s)
            finally:
                self.in_kernel = False
        return self._visit_attr(s)

    def _warp_fits(self, tag: str, ext: int) -> bool:
        """A shuffle reduction: the group is ``ext`` consecutive lanes of one warp (threadIdx.x
        of the same extent everywhere in the kernel, a power of two up to the warp size)."""
        return (self.warp_size > 1 and tag == "threadIdx.x" and 1 < ext <= self.warp_size
                and ext & (ext - 1) == 0
                and all(isinstance(x, E.IntImm) and x.value == ext for x in self.tx_extents))

    def _visit_attr(self, s: S.AttrStmt) -> Any:
        tag = thread_tag(s)
        if s.attr_key != "thread_extent" or not tag.startswith("threadIdx"):
            return self.generic_visit(s)
        tvar = s.node.var
        single = isinstance(s.value, E.IntImm) and s.value.value == 1
        cands = [] if single else _find(s.body, tvar)
        tuples = [] if single else _find_tuples(self.fname, s.body, tvar)
        self.outer.append(s)
        try:
            body = self.visit(s.body)
        finally:
            self.outer.pop()
        if not cands and not tuples:
            if not single:
                _refuse_racy_updates(self.fname, body, tvar, tag)
            return s if body is s.body else S.AttrStmt(s.node, s.attr_key, s.value, body)
        if not isinstance(s.value, E.IntImm):
            raise NotImplementedError(f"{self.fname}: cross-thread reduction over {tag} needs a "
                                      f"constant extent, got {s.value}")
        for c in cands:
            body = self._rewrite(body, c, tvar, s.value.value, tag)
        for t in tuples:
            body = self._rewrite_tuple(body, t, tvar, s.value.value, tag)
        _refuse_racy_updates(self.fname, body, tvar, tag)
        return S.AttrStmt(s.node, s.attr_key, s.value, body)

    def _rewrite(self, body: S.Stmt, c: _Candidate, tvar: E.Var, ext: int, tag: str) -> S.Stmt:
        dtype = c.store.buffer.dtype
        k = self.count
        self.count += 1
        from ..buffer import decl_buffer

        acc = decl_buffer((1,), dtype, f"red_acc{k}", data=E.Var(f"red_acc{k}", "handle"),
                          scope="local")
        g, groups = self._groups(tag)  # the thread groups: other threadIdx tags enclosing it
        red = decl_buffer((groups * ext,), dtype, f"red_buf{k}",
                          data=E.Var(f"red_buf{k}", "handle"), scope="shared")
        op = c.op
        if self._warp_fits(tag, ext):
            return self._warp(body, c, acc, tvar, ext)
        base = g * ext if groups > 1 else E.const(0, "int32")
        me = base + tvar if groups > 1 else tvar
        zero = E.const(0, "int32")
        partial = _Replace(c, acc, tvar).visit(body)
        steps: list[S.Stmt] = [S.BufferStore(red, E.BufferLoad(acc, [zero]), [me])]
        p = 1
        while p < ext:
            p *= 2
        s = p // 2
        while s >= 1:
            cond: E.PrimExpr = E.LT(tvar, E.const(s, tvar.dtype))
            if s * 2 > ext:  # the partner may be past the end
                cond = E.And(cond, E.LT(tvar + s, E.const(ext, tvar.dtype)))
            steps.append(S.IfThenElse(cond, S.BufferStore(
                red, op(E.BufferLoad(red, [me]), E.BufferLoad(red, [me + s])), [me])))
            s //= 2
        out_val = op(E.BufferLoad(c.store.buffer, list(c.store.indices)),
                     E.BufferLoad(red, [base]))
        final: S.Stmt = S.BufferStore(c.store.buffer, out_val, list(c.store.indices))
        for cond in reversed(c.conds):  # the store's own guards (bounds of its index)
            final = S.IfThenElse(cond, final)
        steps.append(S.IfThenElse(E.EQ(tvar, E.const(0, tvar.dtype)), final))
        tree = S.Allocate(red, S.seq(*steps))
        init = S.BufferStore(acc, _identity(op, dtype), [zero])
        return S.Allocate(acc, S.seq(init, partial, tree))

    def _groups(self, tag: str) -> tuple[E.PrimExpr, int]:
        """(the linear index of the enclosing threadIdx attributes of other tags, their count)."""
        g: E.PrimExpr = E.const(0, "int32")
        groups = 1
        for a in self.outer:
            t = thread_tag(a)
            if t == tag:
                continue
            if not isinstance(a.value, E.IntImm):
                raise NotImplementedError(f"{self.fname}: cross-thread reduction inside {t} of "
                                          f"symbolic extent {a.value}")
            g = g * a.value.value + a.node.var if groups > 1 else a.node.var
            groups *= a.value.value
        return g, groups

    def _rewrite_tuple(self, body: S.Stmt, t: _Tuple, tvar: E.Var, ext: int,
                       tag: str) -> S.Stmt:
        """A tuple combiner across the threads of ``tvar``: one accumulator per value; the
        shared tree or the warp shuffles carry every value, the combiner applied to tuples."""
        from ..buffer import decl_buffer

        k = self.count
        self.count += 1
        comb = t.comb
        dtypes = [st.buffer.dtype for st in t.stores]
        zero = E.const(0, "int32")
        accs = [decl_buffer((1,), d, f"red_acc{k}_{j}", data=E.Var(f"red_acc{k}_{j}", "handle"),
                            scope="local") for j, d in enumerate(dtypes)]

        def acc_vals() -> list[E.PrimExpr]:
            return [E.BufferLoad(a, [zero]) for a in accs]

        def store_accs(vals: list[E.Var]) -> S.Stmt:
            return S.seq(*[S.BufferStore(a, v, [zero]) for a, v in zip(accs, vals)])

        outs = [E.BufferLoad(st.buffer, list(st.indices)) for st in t.stores]

        def final_of(vals: list[E.PrimExpr]) -> S.Stmt:
            fin = _combine(comb, outs, vals, k, lambda r: S.seq(*[
                S.BufferStore(st.buffer, v, list(st.indices)) for st, v in zip(t.stores, r)]))
            for cond in reversed(t.conds):
                fin = S.IfThenElse(cond, fin)
            return S.IfThenElse(E.EQ(tvar, E.const(0, tvar.dtype)), fin)

        partial = _ReplaceTuple(t, accs, tvar).visit(body)
        steps: list[S.Stmt] = []
        if self._warp_fits(tag, ext):
            mask = E.Var(f"warp_mask{k}", "uint32")
            off = ext // 2
            while off >= 1:
                others = [E.Call(d, WARP_SHUFFLE_DOWN, [
                    mask, v, E.const(off, "int32"), E.const(ext, "int32"),
                    E.const(self.warp_size, "int32")]) for d, v in zip(dtypes, acc_vals())]
                shfl = [E.Var(f"red_o{k}_{j}_{off}", d) for j, d in enumerate(dtypes)]
                step = _combine(comb, acc_vals(), list(shfl), k, store_accs)
                for v, o in reversed(list(zip(shfl, others))):
                    step = S.LetStmt(v, o, step)
                steps.append(step)
                off //= 2
            steps.append(final_of(acc_vals()))
            tree: S.Stmt = S.LetStmt(mask, E.Call("uint32", WARP_ACTIVEMASK, []), S.seq(*steps))
        else:
            g, groups = self._groups(tag)
            reds = [decl_buffer((groups * ext,), d, f"red_buf{k}_{j}",
                                data=E.Var(f"red_buf{k}_{j}", "handle"), scope="shared")
                    for j, d in enumerate(dtypes)]
            base = g * ext if groups > 1 else zero
            me = base + tvar if groups > 1 else tvar
            steps += [S.BufferStore(r, v, [me]) for r, v in zip(reds, acc_vals())]
            p = 1
            while p < ext:
                p *= 2
            s = p // 2
            while s >= 1:
                cond: E.PrimExpr = E.LT(tvar, E.const(s, tvar.dtype))
                if s * 2 > ext:
                    cond = E.And(cond, E.LT(tvar + s, E.const(ext, tvar.dtype)))
                mine = [E.BufferLoad(r, [me]) for r in reds]
                theirs = [E.BufferLoad(r, [me + s]) for r in reds]
                steps.append(S.IfThenElse(cond, _combine(comb, mine, theirs, k, lambda r: S.seq(
                    *[S.BufferStore(b, v, [me]) for b, v in zip(reds, r)]))))
                s //= 2
            steps.append(final_of([E.BufferLoad(r, [base]) for r in reds]))
            tree = S.seq(*steps)
            for r in reversed(reds):
                tree = S.Allocate(r, tree)
        init = S.seq(*[S.BufferStore(a, v, [zero])
                       for a, v in zip(accs, comb.identity_element)])
        out: S.Stmt = S.seq(init, partial, tree)
        for a in reversed(accs):
            out = S.Allocate(a, out)
        return out

    def _warp(self, body: S.Stmt, c: _Candidate, acc: Buffer, tvar: E.Var, ext: int) -> S.Stmt:
        """The partial values combined by ``tvm_warp_shuffle_down`` within ``ext`` lanes."""
        dtype = acc.dtype
        zero = E.const(0, "int32")
        k = self.count - 1
        mask = E.Var(f"warp_mask{k}", "uint32")
        steps: list[S.Stmt] = []
        off = ext // 2
        while off >= 1:
            other = E.Call(dtype, WARP_SHUFFLE_DOWN, [
                mask, E.BufferLoad(acc, [zero]), E.const(off, "int32"), E.const(ext, "int32"),
                E.const(self.warp_size, "int32")])
            steps.append(S.BufferStore(acc, c.op(E.BufferLoad(acc, [zero]), other), [zero]))
            off //= 2
        out_val = c.op(E.BufferLoad(c.store.buffer, list(c.store.indices)),
                       E.BufferLoad(acc, [zero]))
        final: S.Stmt = S.BufferStore(c.store.buffer, out_val, list(c.store.indices))
        for cond in reversed(c.conds):
            final = S.IfThenElse(cond, final)
        steps.append(S.IfThenElse(E.EQ(tvar, E.const(0, tvar.dtype)), final))
        tree = S.LetStmt(mask, E.Call("uint32", WARP_ACTIVEMASK, []), S.seq(*steps))
        partial = _Replace(c, acc, tvar).visit(body)
        init = S.BufferStore(acc, _identity(c.op, dtype), [zero])
        return S.Allocate(acc, S.seq(init, partial, tree))


def lower_allreduce(func: PrimFunc, target: Any = None) -> PrimFunc:
    if target is None:
        target = func.attrs.get("target")
    warp = int(getattr(target, "thread_warp_size", 1) or 1)
    body = _Lower(func.name, warp).visit(func.body)
    return func if body is func.body else func.with_body(body)


def lower_thread_allreduce_func(func: PrimFunc, target: Any = None) -> PrimFunc:
    """The function form of :func:`LowerThreadAllreduce`."""
    return lower_allreduce(func, target)


def LowerThreadAllreduce(target: Any = None) -> PrimFuncPass:  # noqa: N802 - TVM's name
    return PrimFuncPass.from_func(lambda f: lower_thread_allreduce_func(f, target),
                                  "LowerThreadAllreduce")
