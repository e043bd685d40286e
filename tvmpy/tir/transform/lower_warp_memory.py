"""LowerWarpMemory: buffers of storage scope "warp" on GPU targets (TVM's pass of that name).

What it does
A "warp" buffer is memory shared by the ``threadIdx.x`` lanes of one thread group (the lanes of a
warp on CUDA); each group (each value of the other thread indices) has its own copy. te places it
with ``s.cache_read(A, "warp", [C])``: the fetch stage binds an axis to threadIdx.x, the reader
reads any element of it.

CUDA / nvptx (``target.thread_warp_size`` W > 1): with ``w`` the threadIdx.x extent (a power of
two, ``W % w == 0``; the lanes of a group are ``w`` consecutive lanes of one warp) and ``m`` the
coefficient of threadIdx.x in the buffer's store indices, element ``i`` belongs to lane
``(i // m) % w`` and lives in that lane's registers at ``(i // (m*w)) * m + i % m``. So:

- the allocation becomes "local" of ``ceil(n / (m*w)) * m`` elements (``n`` per group before);
- a store must write an element of its own lane (proved by the simplifier, else an error);
- a load of element ``i`` is ``local[(i // (m*w)) * m + i % m]`` when ``i`` belongs to the
  reading lane, else ``tvm_warp_shuffle(tvm_warp_activemask(), local[...], lane, w, W)``
  (``__shfl_sync`` / ``llvm.nvvm.shfl.sync.idx``); its local index must be the same on every
  lane of the group (free of threadIdx.x), as a shuffle reads the source lane's register;
- every lane must execute each shuffle: a condition on a thread index enclosing a shuffle (a
  bound check of ``tx < N``, a stage guard) is pushed down to the statements below it, with the
  shuffled values computed before the guard.

OpenCL (no shuffles, ``thread_warp_size`` 1): the buffer becomes "shared" memory with one copy per
group (``n`` times the product of the threadIdx.y/z extents, offset by the group's index), placed
at the kernel's top; ThreadSync then puts the barriers between its writes and reads. This keeps
the warp semantics (and the numbers) at the cost of local memory and barriers.

When valid
The pass runs after UnifyThreadBinding (each thread tag bound once at the kernel's top) on
flattened buffers; vector accesses to a warp buffer are refused.

Example
    before:  A_warp = allocate((32,), 'warp'); A_warp[tx] = A[tx]; B[tx] = A_warp[31 - tx]
    after:   A_warp = allocate((1,), 'local'); A_warp[0] = A[tx]
             B[tx] = tvm_warp_shuffle(tvm_warp_activemask(), A_warp[0], 31 - tx, 32, 32)
"""

from __future__ import annotations

from typing import Any

from ...arith.analyzer import Analyzer
from ...arith.linear import detect_linear_equation
from .. import expr as E
from .. import stmt as S
from ..buffer import Buffer, decl_buffer
from ..function import PrimFunc
from ..functor import Mutator, post_order_visit, uses_var
from .function_pass import PrimFuncPass

__all__ = ["LowerWarpMemory", "lower_warp_memory_func", "WARP_SHUFFLE"]

#: ``tvm_warp_shuffle(mask, value, src_lane, width, warp_size)``: ``value`` of lane ``src_lane``
#: of the caller's ``width``-lane segment
WARP_SHUFFLE = "tir.tvm_warp_shuffle"
_ACTIVEMASK = "tir.tvm_warp_activemask"


class WarpMemoryError(ValueError):
    """A warp-scope buffer whose accesses LowerWarpMemory cannot map to lanes."""


def _tag(s: Any) -> str:
    return (s.node.thread_tag if isinstance(s, S.AttrStmt) and s.attr_key == "thread_extent"
            and isinstance(s.node, E.IterVar) else "")


def _int(x: int) -> E.PrimExpr:
    return E.const(x, "int32")


def _has(node: Any, pred: Any) -> bool:
    hit: list[int] = []
    post_order_visit(node, lambda n: hit.append(1) if pred(n) else None)
    return bool(hit)


def _is_shuffle(n: Any) -> bool:
    return isinstance(n, E.Call) and n.op == WARP_SHUFFLE


def _is_ramp(idx: Any) -> bool:
    return _has(idx, lambda n: isinstance(n, (E.Ramp, E.Broadcast)))


class _Kernel:
    """The thread indices of one kernel (its top thread_extent attributes)."""

    def __init__(self, kernel: S.Stmt, fname: str):
        self.fname = fname
        self.threads: dict[str, tuple[E.Var, E.PrimExpr]] = {}

        def f(n: Any) -> None:
            if _tag(n):
                self.threads.setdefault(_tag(n), (n.node.var, n.value))

        post_order_visit(kernel, f)
        self.thread_vars = [v for t, (v, _) in self.threads.items() if t.startswith("threadIdx")]

    def uses_thread(self, node: Any) -> bool:
        ids = {id(v) for v in self.thread_vars}
        return uses_var(node, lambda v: id(v) in ids)


# ---------------------------------------------------------------------------------------------
# OpenCL: warp -> shared, one copy per thread group
class _ToShared(Mutator):
    def __init__(self, k: _Kernel):
        self.k = k
        self.hoisted: list[S.Allocate] = []
        self.map: dict[int, tuple[Buffer, E.PrimExpr]] = {}
        group: E.PrimExpr | None = None
        self.groups = 1
        for tag in ("threadIdx.z", "threadIdx.y"):
            if tag in k.threads:
                v, ext = k.threads[tag]
                if not isinstance(ext, E.IntImm):
                    raise WarpMemoryError(f"{k.fname}: warp memory in a kernel with {tag} of "
                                          f"symbolic extent {ext}")
                group = v if group is None else group * ext.value + v
                self.groups *= ext.value
        self.group = group

    def visit_Allocate(self, s: S.Allocate) -> Any:
        if s.buffer.scope != "warp":
            return self.generic_visit(s)
        size = s.buffer.shape[0]
        if not isinstance(size, E.IntImm):
            raise WarpMemoryError(f"{self.k.fname}: warp buffer {s.buffer.name} has a symbolic "
                                  f"size {size}")
        buf = decl_buffer((size.value * self.groups,), s.buffer.dtype, s.buffer.name,
                          data=E.Var(s.buffer.data.name, "handle"), scope="shared")
        off = _int(0) if self.group is None else self.group * size.value
        self.map[id(s.buffer.data)] = (buf, off)
        self.hoisted.append(S.Allocate(buf, S.Evaluate(_int(0)), s.condition))
        return self.visit(s.body)

    def visit_BufferLoad(self, e: E.BufferLoad) -> Any:
        e = self.generic_visit(e)
        hit = self.map.get(id(e.buffer.data))
        if hit is None:
            return e
        return E.BufferLoad(hit[0], [e.indices[0] + hit[1]])

    def visit_BufferStore(self, s: S.BufferStore) -> Any:
        s = self.generic_visit(s)
        hit = self.map.get(id(s.buffer.data))
        if hit is None:
            return s
        return S.BufferStore(hit[0], s.value, [s.indices[0] + hit[1]])


# ---------------------------------------------------------------------------------------------
# CUDA: warp -> local registers + shuffles
class _Info:
    def __init__(self, old: Buffer, new: Buffer, m: int):
        self.old, self.new, self.m = old, new, m


class _ToLanes(Mutator):
    def __init__(self, k: _Kernel, warp_size: int):
        self.k = k
        self.warp = warp_size
        if "threadIdx.x" not in k.threads:
            raise WarpMemoryError(f"{k.fname}: warp memory in a kernel without threadIdx.x (the "
                                  "lanes that share it)")
        self.tx, ext = k.threads["threadIdx.x"]
        w = ext.value if isinstance(ext, E.IntImm) else -1
        if w < 1 or w > warp_size or warp_size % w or w & (w - 1):
            raise WarpMemoryError(
                f"{k.fname}: warp memory needs threadIdx.x of a constant power-of-two extent "
                f"dividing the warp size {warp_size} (its lanes are one warp's), got {ext}")
        self.width = w
        self.ana = Analyzer()
        for v, e in k.threads.values():
            if isinstance(e, E.IntImm):
                self.ana.bind(v, E.Range(0, e.value))
        self.info: dict[int, _Info] = {}

    def visit_For(self, s: S.For) -> Any:
        if isinstance(s.min, E.IntImm) and isinstance(s.extent, E.IntImm):
            if s.extent.value > 0:
                self.ana.bind(s.loop_var, E.Range(s.min.value, s.min.value + s.extent.value))
        else:  # a loop bound by thread indices (a partitioned tail): its constant bounds
            lo = self.ana.const_int_bound(s.min)
            ext = self.ana.const_int_bound(s.extent)
            hi = lo.max_value + ext.max_value - 1
            if abs(lo.min_value) < 2**31 and abs(hi) < 2**31 and hi >= lo.min_value:
                self.ana.update_bound(s.loop_var, int(lo.min_value), int(hi))
        return self.generic_visit(s)

    def visit_IfThenElse(self, s: S.IfThenElse) -> Any:
        cond = self.visit(s.condition)
        with self.ana.constraint_scope(cond):
            then = self.visit(s.then_case)
        other = None
        if s.else_case is not None:
            with self.ana.constraint_scope(E.Not(cond)):
                other = self.visit(s.else_case)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return S.IfThenElse(cond, then, other)

    def _coeff(self, buf: Buffer, body: S.Stmt) -> int:
        """``m``: the coefficient of threadIdx.x in every store index of ``buf``."""
        coeffs: set[int] = set()

        def f(n: Any) -> None:
            if isinstance(n, S.BufferStore) and n.buffer.data is buf.data:
                if _is_ramp(n.indices[0]):
                    raise WarpMemoryError(f"{self.k.fname}: vector store to warp buffer "
                                          f"{buf.name}; keep the warp stage scalar")
                lin = detect_linear_equation(n.indices[0], [self.tx], self.ana)
                c = lin[0] if lin else None
                if E.is_const_int(c, 0):
                    return  # one element (e.g. under ``if tx == 0``): checked at the store
                if not isinstance(c, E.IntImm) or c.value <= 0:
                    raise WarpMemoryError(
                        f"{self.k.fname}: store {buf.name}[{n.indices[0]}]: the index must be "
                        "linear in threadIdx.x with a positive constant coefficient (bind the "
                        "warp stage's fetch axis to threadIdx.x)")
                coeffs.add(c.value)

        post_order_visit(body, f)
        if not coeffs:
            return 1
        if len(coeffs) > 1:
            raise WarpMemoryError(f"{self.k.fname}: the stores to warp buffer {buf.name} use "
                                  f"threadIdx.x with different strides {sorted(coeffs)}")
        return coeffs.pop()

    def visit_Allocate(self, s: S.Allocate) -> Any:
        if s.buffer.scope != "warp":
            return self.generic_visit(s)
        buf = s.buffer
        size = buf.shape[0]
        if not isinstance(size, E.IntImm):
            raise WarpMemoryError(f"{self.k.fname}: warp buffer {buf.name} has a symbolic size "
                                  f"{size}")
        m = self._coeff(buf, s.body)
        group = m * self.width
        local_size = -(-size.value // group) * m
        new = decl_buffer((local_size,), buf.dtype, buf.name,
                          data=E.Var(buf.data.name, "handle"), scope="local")
        self.info[id(buf.data)] = _Info(buf, new, m)
        return S.Allocate(new, self.visit(s.body), s.condition)

    def _split(self, inf: _Info, idx: E.PrimExpr) -> tuple[E.PrimExpr, E.PrimExpr]:
        """(local index, lane) of element ``idx``."""
        m, w = inf.m, self.width
        if m == 1:
            local: E.PrimExpr = E.FloorDiv(idx, _int(w))
            lane: E.PrimExpr = E.FloorMod(idx, _int(w))
        else:
            local = E.FloorDiv(idx, _int(m * w)) * m + E.FloorMod(idx, _int(m))
            lane = E.FloorMod(E.FloorDiv(idx, _int(m)), _int(w))
        return self.ana.simplify(local), self.ana.simplify(lane)

    def visit_BufferStore(self, s: S.BufferStore) -> Any:
        inf = self.info.get(id(s.buffer.data))
        value = self.visit(s.value)
        if inf is None:
            return s if value is s.value else S.BufferStore(s.buffer, value, s.indices)
        idx = s.indices[0]
        local, lane = self._split(inf, idx)
        if not E.is_const_int(self.ana.simplify(lane - self.tx), 0):
            raise WarpMemoryError(
                f"{self.k.fname}: store {inf.old.name}[{idx}] writes the element of lane {lane}, "
                "which the simplifier cannot prove is the storing thread's threadIdx.x (each "
                "lane stores only its own elements of warp memory)")
        return S.BufferStore(inf.new, value, [local])

    def visit_BufferLoad(self, e: E.BufferLoad) -> Any:
        inf = self.info.get(id(e.buffer.data))
        if inf is None:
            return self.generic_visit(e)
        idx = self.visit(e.indices[0])
        if _is_ramp(idx) or e.dtype != inf.old.dtype:
            raise WarpMemoryError(f"{self.k.fname}: vector load of warp buffer {inf.old.name}; "
                                  "keep the reading stage scalar")
        local, lane = self._split(inf, idx)
        own = E.BufferLoad(inf.new, [local])
        if E.is_const_int(self.ana.simplify(lane - self.tx), 0):
            return own
        if uses_var(local, self.tx):
            raise WarpMemoryError(
                f"{self.k.fname}: load {inf.old.name}[{idx}]: lanes would read different "
                f"registers ({local}) of other lanes; a shuffle reads one register index for "
                "the whole warp (make the index's part above the lane uniform)")
        mask = E.Call("uint32", _ACTIVEMASK, [])
        return E.Call(e.dtype, WARP_SHUFFLE, [mask, own, lane, _int(self.width),
                                              _int(self.warp)])


class _Converge(Mutator):
    """Every lane executes every shuffle: each statement's shuffles are bound to lets before it
    (none is left inside a lazily evaluated ``?:``, ``&&`` or ``||``), and conditions on a
    thread index that enclose shuffles are pushed down below those lets."""

    def __init__(self, k: _Kernel):
        self.k = k
        self.count = 0

    def visit_PrimExpr(self, e: Any) -> Any:
        return e

    def visit_BufferStore(self, s: S.BufferStore) -> Any:
        return self._hoist(None, s)

    def visit_Evaluate(self, s: S.Evaluate) -> Any:
        return self._hoist(None, s)

    def visit_For(self, s: S.For) -> Any:
        s = self.generic_visit(s)
        if (self.k.uses_thread(s.min) or self.k.uses_thread(s.extent)) and _has(s, _is_shuffle):
            raise WarpMemoryError(f"{self.k.fname}: warp-memory reads in a loop whose bounds "
                                  f"depend on a thread index ({s.loop_var.name}): lanes would "
                                  "miss shuffles")
        return s

    def visit_IfThenElse(self, s: S.IfThenElse) -> Any:
        s = self.generic_visit(s)
        if not (self.k.uses_thread(s.condition) and _has(s, _is_shuffle)):
            return s
        if _has(s.condition, _is_shuffle):
            raise WarpMemoryError(f"{self.k.fname}: a warp-memory read in a condition on a "
                                  f"thread index ({s.condition})")
        parts = [self._push(s.condition, s.then_case)]
        if s.else_case is not None:
            parts.append(self._push(E.Not(s.condition), s.else_case))
        return S.seq(*parts)

    def _push(self, c: E.PrimExpr, s: S.Stmt) -> S.Stmt:
        if not _has(s, _is_shuffle):
            return S.IfThenElse(c, s)
        if isinstance(s, S.SeqStmt):
            return S.seq(*[self._push(c, x) for x in s.seq])
        if isinstance(s, S.Allocate):
            return S.Allocate(s.buffer, self._push(c, s.body), s.condition)
        if isinstance(s, S.AttrStmt) and not _tag(s):
            return S.AttrStmt(s.node, s.attr_key, s.value, self._push(c, s.body))
        if isinstance(s, S.For):
            if self.k.uses_thread(s.min) or self.k.uses_thread(s.extent):
                raise WarpMemoryError(f"{self.k.fname}: warp-memory reads in a loop whose bounds "
                                      f"depend on a thread index ({s.loop_var.name}): lanes "
                                      "would miss shuffles")
            return S.For(s.loop_var, s.min, s.extent, s.kind, self._push(c, s.body),
                         s.thread_binding, s.annotations)
        if isinstance(s, S.LetStmt) and (_has(s.value, _is_shuffle) or not _has(
                s.value, lambda n: isinstance(n, E.BufferLoad))):
            return S.LetStmt(s.var, s.value, self._push(c, s.body))
        if isinstance(s, S.IfThenElse):
            other = self._push(c, s.else_case) if s.else_case is not None else None
            return S.IfThenElse(s.condition, self._push(c, s.then_case), other)
        if isinstance(s, (S.BufferStore, S.Evaluate)):
            return self._hoist(c, s)
        raise WarpMemoryError(f"{self.k.fname}: warp-memory reads under a condition on a thread "
                              f"index ({c}) in a {type(s).__name__} this pass cannot reorder")

    def _hoist(self, c: E.PrimExpr | None, s: S.Stmt) -> S.Stmt:
        """``s``'s shuffles as lets before it (and before ``if c``, when given)."""
        inner: set[int] = set()
        post_order_visit(s, lambda n: inner.add(id(n.var)) if isinstance(n, E.Let) else None)
        calls: list[E.Call] = []
        post_order_visit(s, lambda n: calls.append(n) if _is_shuffle(n) and not any(
            x is n for x in calls) and not uses_var(n, lambda v: id(v) in inner) else None)
        if not calls:
            return s if c is None else S.IfThenElse(c, s)
        lets: list[tuple[E.Var, E.Call]] = []
        repl: dict[int, E.Var] = {}
        for call in calls:
            v = E.Var(f"warp_val{self.count}", call.dtype)
            self.count += 1
            lets.append((v, call))
            repl[id(call)] = v

        class _Sub(Mutator):
            def visit_Call(self, e: E.Call) -> Any:
                hit = repl.get(id(e))
                return hit if hit is not None else self.generic_visit(e)

        out: S.Stmt = _Sub().visit(s)
        if c is not None:
            out = S.IfThenElse(c, out)
        for v, call in reversed(lets):
            out = S.LetStmt(v, call, out)
        return out


def _lower_kernel(kernel: S.AttrStmt, fname: str, warp_size: int) -> S.Stmt:
    if not _has(kernel, lambda n: isinstance(n, S.Allocate) and n.buffer.scope == "warp"):
        return kernel
    k = _Kernel(kernel, fname)
    # the kernel's top thread attributes (UnifyThreadBinding binds each tag once there)
    chain: list[S.AttrStmt] = []
    body: S.Stmt = kernel
    while isinstance(body, S.AttrStmt) and _tag(body):
        chain.append(body)
        body = body.body
    if warp_size <= 1:
        ts = _ToShared(k)
        body = ts.visit(body)
        for h in reversed(ts.hoisted):
            body = S.Allocate(h.buffer, body, h.condition)
    else:
        body = _Converge(k).visit(_ToLanes(k, warp_size).visit(body))
    for a in reversed(chain):
        body = S.AttrStmt(a.node, a.attr_key, a.value, body)
    return body


class _Kernels(Mutator):
    def __init__(self, fname: str, warp_size: int):
        self.fname = fname
        self.warp_size = warp_size

    def visit_PrimExpr(self, e: Any) -> Any:
        return e

    def visit_AttrStmt(self, s: S.AttrStmt) -> Any:
        if _tag(s):
            return _lower_kernel(s, self.fname, self.warp_size)
        return self.generic_visit(s)


def lower_warp_memory_func(func: PrimFunc, target: Any = None) -> PrimFunc:
    """``func`` with its "warp" buffers lowered for ``target`` (the function's target by
    default): registers and shuffles where the target has warps, shared memory otherwise."""
    if target is None:
        target = func.attrs.get("target")
    warp = int(getattr(target, "thread_warp_size", 1) or 1)
    body = _Kernels(func.name, warp).visit(func.body)
    return func if body is func.body else func.with_body(body)


def LowerWarpMemory(target: Any = None) -> PrimFuncPass:  # noqa: N802 - TVM's name
    """The pass form of :func:`lower_warp_memory_func`."""
    return PrimFuncPass.from_func(lambda f: lower_warp_memory_func(f, target), "LowerWarpMemory")
