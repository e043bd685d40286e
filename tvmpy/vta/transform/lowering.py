"""The VTA lowering passes (see the package docstring for the order). Each takes and returns a
statement of flattened loop IR; ``env`` is the :class:`tvmpy.vta.Environment`."""

from __future__ import annotations

from typing import Any

from ...arith import simplify
from ...tir import expr as E
from ...tir import stmt as S
from ...tir.functor import ir_transform, post_order_visit, substitute, uses_var
from ...tir.op import call_extern
from ..intrin import UOP_SCOPE, sram_ref, uop_push

__all__ = ["inject_dma_intrin", "inject_alu_intrin", "inject_coproc_sync",
           "inject_virtual_thread", "place_sram", "lift_uop_kernels", "VTALoweringError",
           "SYNC_GROUP", "UOP_KERNEL"]

SYNC_GROUP = "vta.sync_group"   # an op with its token pops/pushes: one unit for virtual threads
UOP_KERNEL = "vta.uop_kernel"   # a micro-kernel: its body records micro-ops (finit)
_ALU_OPS = {"min": 0, "max": 1, "add": 2, "shr": 3}
_IMM_RANGE = (-(1 << 15), 1 << 15)


class VTALoweringError(ValueError):
    """A stage marked for VTA does not have a form the accelerator can execute."""


def _is_call(e: Any, name: str) -> bool:
    return (isinstance(e, E.Call) and e.op == "call_extern" and isinstance(e.args[0], E.StringImm)
            and e.args[0].value == name)


def _extern(name: str, *args: Any) -> S.Stmt:
    return S.Evaluate(call_extern("int32", name, *args))


def _nest(stmt: S.Stmt, what: str, guards: list | None = None
          ) -> tuple[list[S.For], S.BufferStore]:
    """The loops and the store of a copy/ALU stage; the conditions of bound guards (a split
    that does not divide) are appended to ``guards`` when given."""
    loops: list[S.For] = []
    while True:
        if isinstance(stmt, S.For):
            loops.append(stmt)
            stmt = stmt.body
        elif isinstance(stmt, S.AttrStmt) and stmt.attr_key.startswith("pragma_"):
            stmt = stmt.body
        elif isinstance(stmt, S.IfThenElse) and stmt.else_case is None and guards is not None:
            guards.append(_unlikely(stmt.condition))
            stmt = stmt.then_case
        elif isinstance(stmt, S.BufferStore):
            return loops, stmt
        else:
            raise VTALoweringError(f"{what}: expected a loop nest around one store, found "
                                   f"{type(stmt).__name__}:\n{stmt}")


def _coeffs(idx: E.PrimExpr, vars_: list[E.Var]) -> tuple[E.PrimExpr, list[E.PrimExpr]] | None:
    """``idx`` as ``base + sum(c_v * v)`` (None when not affine in ``vars_``)."""
    zero = {v: E.const(0, v.dtype) for v in vars_}
    base = simplify(substitute(idx, zero))
    cs = []
    for v in vars_:
        cs.append(simplify(substitute(idx, {**zero, v: E.const(1, v.dtype)}) - base))
    rebuilt: E.PrimExpr = base
    for v, c in zip(vars_, cs):
        rebuilt = rebuilt + c * v
    d = simplify(idx - rebuilt)
    if not (isinstance(d, E.IntImm) and d.value == 0):
        return None
    return base, cs


def _const(e: E.PrimExpr) -> int | None:
    e = simplify(e)
    return e.value if isinstance(e, E.IntImm) else None


def _eq(a: Any, b: Any) -> bool:
    d = _const(E.convert(a) - E.convert(b))
    return d == 0


def _split_tile(loops: list[S.For], coef_lists: list[list[E.PrimExpr]], tile: int,
                what: str) -> int:
    """How many innermost loops cover one tile (same unit-stride layout on every side)."""
    prod, k = 1, len(loops)
    while prod < tile:
        k -= 1
        if k < 0:
            raise VTALoweringError(f"{what}: the copied region is smaller than one tile of "
                                   f"{tile} elements")
        ext = _const(loops[k].extent)
        if ext is None or any(not _eq(cs[k], prod) for cs in coef_lists):
            raise VTALoweringError(
                f"{what}: the innermost loops must walk one tile of {tile} elements "
                f"contiguously on both sides (loop {loops[k].loop_var.name})")
        prod *= ext
    if prod != tile:
        raise VTALoweringError(f"{what}: the innermost loops cover {prod} elements, not a "
                               f"whole tile of {tile}")
    return k


def _unlikely(c: E.PrimExpr) -> E.PrimExpr:
    return c.args[0] if isinstance(c, E.Call) and c.op == "likely" else c


def _conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    cond = _unlikely(cond)
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _pad_bounds(conj: list[E.PrimExpr], loops: list[S.For], what: str) -> dict[int, list]:
    """Bounds ``lo <= v < hi`` per loop var from comparisons (each bounding one loop)."""
    out: dict[int, list] = {}
    byid = {id(f.loop_var): f for f in loops}
    for c in conj:
        if not isinstance(c, (E.LT, E.LE, E.GT, E.GE)):
            raise VTALoweringError(f"{what}: padding condition {c} is not a bound on a loop")
        d = simplify(c.a - c.b)  # d OP 0
        used = [f for f in loops if uses_var(d, f.loop_var)]
        if len(used) != 1:
            raise VTALoweringError(f"{what}: padding condition {c} must bound one loop")
        v = used[0].loop_var
        r = _coeffs(d, [v])
        if r is None or _const(r[1][0]) not in (1, -1):
            raise VTALoweringError(f"{what}: padding condition {c} is not v +- const")
        rest, sign = r[0], _const(r[1][0])
        b = out.setdefault(id(v), [E.const(0), byid[id(v)].extent])
        strict = isinstance(c, (E.LT, E.GT))
        upper = (sign == 1) == isinstance(c, (E.LT, E.LE))  # v < / <= something
        if sign == 1:   # v OP -rest
            lim = simplify(E.const(0) - rest)
        else:           # -v + rest OP 0  <=>  v OP' rest
            lim = rest
        if upper:
            hi = lim if strict else simplify(lim + 1)
            b[1] = simplify(E.Min(b[1], hi))
        else:
            lo = lim if strict is False else simplify(lim + 1)
            b[0] = simplify(E.Max(b[0], lo))
    return out


def _pinned(conds: list[E.PrimExpr], loops: list[S.For], i: int, what: str) -> bool:
    """Whether the padding conditions on loop ``i`` alone leave exactly one valid index.

    Padding a dimension of extent 1 (a 1x1 feature map under a padded 3x3 conv) bounds its
    loop to one value; the simplifier then folds that loop's DRAM index to a constant (inside
    ``if_then_else`` it knows ``v - pad == 0``), so the DRAM side has no stride for it. One
    row or tile is read there, and any stride is as good: the loop is still a DMA dimension."""
    v = loops[i].loop_var
    own = [c for c in conds if uses_var(c, v)
           and not any(uses_var(c, f.loop_var) for f in loops if f is not loops[i])]
    if not own:
        return False
    lo, hi = _pad_bounds(own, loops, what)[id(v)]
    return _const(simplify(hi - lo)) == 1


def _dma_stmt(env: Any, body: S.Stmt) -> S.Stmt:
    what = "dma_copy"
    guards: list[E.PrimExpr] = []
    loops, store = _nest(body, what, guards)
    value = store.value
    while isinstance(value, E.Cast):
        value = value.value
    cond = None
    if isinstance(value, E.Call) and value.op == "if_then_else" or isinstance(value, E.Select):
        parts = value.args if isinstance(value, E.Call) else (value.condition, value.true_value,
                                                               value.false_value)
        cond, value, pad = parts
        if _const(pad) != 0:
            raise VTALoweringError(f"{what}: padding value must be 0, got {pad}")
        while isinstance(value, E.Cast):
            value = value.value
    if not isinstance(value, E.BufferLoad):
        raise VTALoweringError(f"{what} of {store.buffer.name}: the stage must copy a tensor "
                               f"(store of a load), got {store.value}")
    dst, src = store.buffer, value.buffer
    sram_scopes = (env.inp_scope, env.wgt_scope, env.acc_scope)
    is_load = dst.scope in sram_scopes
    if not is_load and src.scope not in sram_scopes:
        raise VTALoweringError(f"{what}: neither {dst.name} ({dst.scope}) nor {src.name} "
                               f"({src.scope}) is in a VTA on-chip scope")
    what = f"dma_copy {src.name} -> {dst.name}"
    if is_load:
        info = env.mem_info(dst.scope)
        sram_idx, dram_idx = store.indices[0], value.indices[0]
    else:
        if cond is not None:
            raise VTALoweringError(f"{what}: a store cannot pad")
        info = env.mem_info(src.scope)
        if src.scope != env.acc_scope:
            raise VTALoweringError(f"{what}: stores read the accumulator ({env.acc_scope})")
        sram_idx, dram_idx = value.indices[0], store.indices[0]
    tile = info.tile_elems
    vars_ = [f.loop_var for f in loops]
    sc, dc = _coeffs(sram_idx, vars_), _coeffs(dram_idx, vars_)
    if sc is None or dc is None:
        raise VTALoweringError(f"{what}: the indices are not affine in the loops")
    k = _split_tile(loops, [sc[1], dc[1]], tile, what)
    conds = _conjuncts(cond) if cond is not None else []
    dcoef = list(dc[1])
    for j in range(k):  # padding that leaves one valid index: the DRAM side reads one tile
        if _eq(dcoef[j], 0) and _pinned(conds, loops, j, what):
            dcoef[j] = E.const(tile) if j == k - 1 else E.const(0)
    outer = list(range(k))
    x = y = None
    if outer and _eq(sc[1][outer[-1]], tile) and _eq(dcoef[outer[-1]], tile):
        x = outer.pop()
    x_total = _const(loops[x].extent) if x is not None else 1
    if outer and x_total is not None and _eq(sc[1][outer[-1]], x_total * tile):
        y = outer.pop()
    # the pad compute's condition and the bound guards (split remainders): conditions on the
    # two DMA dimensions become bounds (loads zero-fill outside them: padding, or elements a
    # guard leaves unused), conditions on the loops outside guard the DMA
    gconds = [c for g in guards for c in _conjuncts(g)]
    if not is_load and y is not None and x is not None and any(
            uses_var(c, loops[x].loop_var) for c in gconds):
        outer.append(y)  # a store moves whole rows of the on-chip block: one row per DMA
        y = None
    dma_vars = {id(loops[i].loop_var) for i in (x, y) if i is not None}
    tile_vars = {id(f.loop_var) for f in loops[k:]}
    host_guards = []
    for c in conds + gconds:
        used = {id(f.loop_var) for f in loops if uses_var(c, f.loop_var)}
        if used & tile_vars:
            raise VTALoweringError(f"{what}: condition {c} splits a tile; tiles are copied whole")
        if c in conds and not used <= dma_vars:
            raise VTALoweringError(f"{what}: padding is supported on the two DMA dimensions only")
        if not used & dma_vars:
            host_guards.append(c)
    bounds = _pad_bounds([c for c in conds + gconds if c not in host_guards], loops, what)
    if not is_load:
        for i in (x, y):
            if i is not None and id(loops[i].loop_var) in bounds \
                    and _const(bounds[id(loops[i].loop_var)][0]) != 0:
                raise VTALoweringError(f"{what}: a store's guard must bound from above only")

    def dim(i: int | None) -> tuple[Any, Any, Any, Any]:  # size, pad_before, pad_after, lo
        if i is None:
            return 1, 0, 0, 0
        ext = loops[i].extent
        lo, hi = bounds.get(id(loops[i].loop_var), (E.const(0), ext))
        lo = simplify(E.Min(E.Max(lo, E.const(0)), ext))
        hi = simplify(E.Max(E.Min(hi, ext), lo))
        return simplify(hi - lo), lo, simplify(ext - hi), lo

    xs, xpb, xpa, xlo = dim(x)
    ys, ypb, ypa, ylo = dim(y)
    tvars = {f.loop_var: E.const(0, f.loop_var.dtype) for f in loops[k:]}
    at = dict(tvars)
    if x is not None:
        at[loops[x].loop_var] = E.convert(xlo)
    if y is not None:
        at[loops[y].loop_var] = E.convert(ylo)
    zero = dict(tvars)
    for i in (x, y):
        if i is not None:
            zero[loops[i].loop_var] = E.const(0, loops[i].loop_var.dtype)
    dram_off = simplify(substitute(dram_idx, at if is_load else zero))
    sram_off = simplify(substitute(sram_idx, zero))
    x_stride = call_extern("int32", "VTATile", dc[1][y], tile) \
        if y is not None and not _eq(dc[1][y], 0) else xs
    dram_tiles = call_extern("int32", "VTATile", dram_off, tile)
    if is_load:
        op = _extern("VTALoadBuffer2D", src.data, dram_tiles, xs, ys, x_stride, xpb, ypb, xpa,
                     ypa, sram_ref(dst.data, sram_off), info.mem_id)
    else:
        op = _extern("VTAStoreBuffer2D", sram_ref(src.data, sram_off), env.MEM_ID_OUT,
                     dst.data, dram_tiles, xs, ys, x_stride)
    for c in host_guards:
        op = S.IfThenElse(c, op)
    for i in sorted(outer, reverse=True):  # dimensions beyond two: host loops around the DMA
        f = loops[i]
        op = S.For(f.loop_var, f.min, f.extent, S.ForKind.SERIAL, op)
    return op


def inject_dma_intrin(env: Any, stmt: S.Stmt) -> S.Stmt:
    """Stages under ``pragma_dma_copy`` -> 2-D DMA loads (with padding) and stores."""
    def pre(n: Any) -> Any:
        if isinstance(n, S.AttrStmt) and n.attr_key == "pragma_" + env.dma_copy:
            return _dma_stmt(env, n.body)
        return None
    return ir_transform(stmt, pre, None)


# ---- ALU ------------------------------------------------------------------------------------
def _alu_operands(value: E.PrimExpr, what: str) -> tuple[str, E.PrimExpr, E.PrimExpr | None]:
    while isinstance(value, E.Cast):
        value = value.value
    if isinstance(value, E.Add):
        return "add", value.a, value.b
    if isinstance(value, E.Sub):
        c = _const(value.b)
        if c is None:
            raise VTALoweringError(f"{what}: subtraction only of an immediate, got {value}")
        return "add", value.a, E.const(-c)
    if isinstance(value, E.Min):
        return "min", value.a, value.b
    if isinstance(value, E.Max):
        return "max", value.a, value.b
    if isinstance(value, E.Call) and value.op in ("shift_right", "shift_left"):
        a, b = value.args
        if uses_loads(b):
            raise VTALoweringError(f"{what}: shifts take an immediate amount, got {b}")
        return "shr", a, (b if value.op == "shift_right" else simplify(E.const(0) - b))
    if isinstance(value, E.BufferLoad):
        return "copy", value, None
    raise VTALoweringError(f"{what}: unsupported ALU expression {value} (add, min, max, "
                           "shifts by an immediate, copies)")


def uses_loads(e: Any) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, E.BufferLoad) else None)
    return bool(found)


def _strip(e: E.PrimExpr) -> E.PrimExpr:
    while isinstance(e, E.Cast):
        e = e.value
    return e


def _alu_stmt(env: Any, body: S.Stmt) -> S.Stmt:
    guards: list[E.PrimExpr] = []
    loops, store = _nest(body, "alu", guards)
    dst = store.buffer
    what = f"alu {dst.name}"
    if dst.scope != env.acc_scope:
        raise VTALoweringError(f"{what}: ALU stages write the accumulator ({env.acc_scope}), "
                               f"not {dst.scope}")
    op, a, b = _alu_operands(store.value, what)
    a = _strip(a)
    b = _strip(b) if b is not None else None
    if op != "shr" and not isinstance(a, E.BufferLoad) and isinstance(b, E.BufferLoad):
        a, b = b, a
    dst_idx = store.indices[0]
    if op in ("add", "min", "max") and isinstance(b, E.BufferLoad) and b.buffer.data is dst.data \
            and _eq(b.indices[0], dst_idx):
        a, b = b, a
    loads = [x for x in (a, b) if isinstance(x, E.BufferLoad)]
    for ld in loads:
        if ld.buffer.scope != env.acc_scope:
            raise VTALoweringError(f"{what}: ALU operands must be in the accumulator, "
                                   f"{ld.buffer.name} is in {ld.buffer.scope}")
    for imm in (a, b):
        if imm is not None and not isinstance(imm, E.BufferLoad):
            if uses_loads(imm) or any(uses_var(imm, f.loop_var) for f in loops):
                raise VTALoweringError(f"{what}: immediate {imm} must not vary in the stage")
            c = _const(imm)
            if c is not None and not _IMM_RANGE[0] <= c < _IMM_RANGE[1]:
                raise VTALoweringError(f"{what}: immediate {c} does not fit the ALU's 16 bits")
    vars_ = [f.loop_var for f in loops]
    cd = _coeffs(dst_idx, vars_)
    cl = [_coeffs(ld.indices[0], vars_) for ld in loads]
    if cd is None or any(c is None for c in cl):
        raise VTALoweringError(f"{what}: indices are not affine in the loops")
    tile = env.BATCH * env.BLOCK_OUT
    k = _split_tile(loops, [cd[1], *(c[1] for c in cl)], tile, what)  # type: ignore[index]
    zero = {f.loop_var: E.const(0, f.loop_var.dtype) for f in loops[k:]}
    dref = sram_ref(dst.data, simplify(substitute(dst_idx, zero)))

    def ref(ld: E.BufferLoad) -> E.PrimExpr:
        return sram_ref(ld.buffer.data, simplify(substitute(ld.indices[0], zero)))

    ops: list[S.Stmt] = []
    in_place = isinstance(a, E.BufferLoad) and a.buffer.data is dst.data and _eq(a.indices[0],
                                                                                  dst_idx)
    if not in_place:  # dst := a  (reset, then add)
        ops.append(uop_push(env, 0, 1, dref, 0, 0))
        if isinstance(a, E.BufferLoad):
            ops.append(uop_push(env, 1, 0, dref, ref(a), 0, _ALU_OPS["add"]))
        elif _const(a) != 0:
            ops.append(uop_push(env, 1, 0, dref, dref, 0, _ALU_OPS["add"], 1, a))
    if op != "copy":
        assert b is not None
        if isinstance(b, E.BufferLoad):
            ops.append(uop_push(env, 1, 0, dref, ref(b), 0, _ALU_OPS[op]))
        else:
            ops.append(uop_push(env, 1, 0, dref, dref, 0, _ALU_OPS[op], 1, b))
    for g in guards:  # split remainders: the guard stays, around whole tiles
        if any(uses_var(g, f.loop_var) for f in loops[k:]):
            raise VTALoweringError(f"{what}: guard {g} splits a tile; tiles are computed whole")
    for g in guards:
        ops = [S.IfThenElse(_unlikely(g), o) for o in ops]

    def wrap(st: S.Stmt) -> S.Stmt:
        for f in reversed(loops[:k]):
            st = S.For(f.loop_var, f.min, f.extent, S.ForKind.SERIAL, st)
        return st
    # one loop nest per operation (each one micro-kernel, its loops folded), unless an operand
    # reads the destination elsewhere, where the per-tile order matters
    alias = any(ld.buffer.data is dst.data and not _eq(ld.indices[0], dst_idx) for ld in loads)
    if alias or len(ops) == 1:
        return wrap(S.seq(*ops))
    return S.seq(*(wrap(o) for o in ops))


def inject_alu_intrin(env: Any, stmt: S.Stmt) -> S.Stmt:
    """Stages under ``pragma_alu`` -> ALU micro-op pushes (tile-wide vector ops)."""
    def pre(n: Any) -> Any:
        if isinstance(n, S.AttrStmt) and n.attr_key == "pragma_" + env.alu:
            return _alu_stmt(env, n.body)
        return None
    return ir_transform(stmt, pre, None)


# ---- dependency tokens ----------------------------------------------------------------------
def _op_queue(env: Any, n: Any) -> int | None:
    if isinstance(n, S.AttrStmt) and n.attr_key == UOP_SCOPE:
        return 2
    if isinstance(n, S.Evaluate):
        v: Any = n.value
        if _is_call(v, "VTALoadBuffer2D"):
            mem = _const(v.args[-1])
            return 1 if mem in (env.MEM_ID_INP, env.MEM_ID_WGT) else 2
        if _is_call(v, "VTAStoreBuffer2D"):
            return 3
    return None


def _dep(kind: str, a: int, b: int) -> S.Stmt:
    """A token push (pop) from queue ``a`` to ``b``. Tokens flow between neighbouring
    modules only, so load <-> store goes through compute, which relays it (pops and pushes
    on at the push's place in the stream)."""
    if abs(a - b) == 2:
        if kind == "push":
            return S.seq(_extern("VTADepPush", a, 2), _extern("VTADepPop", a, 2),
                         _extern("VTADepPush", 2, b))
        return _extern("VTADepPop", 2, b)
    return _extern("VTADepPush" if kind == "push" else "VTADepPop", a, b)


class _Sync:
    def __init__(self, env: Any):
        self.env = env

    def visit(self, s: S.Stmt) -> tuple[S.Stmt, int | None, int | None]:
        q = _op_queue(self.env, s)
        if q is None and _kernel_kind(s) is not None:
            q = 2  # micro-ops (and their loops): one GEMM/ALU instruction stream
        if q is not None:
            return s, q, q
        if isinstance(s, S.SeqStmt):
            return self.seq(list(s.seq))
        if isinstance(s, S.For):
            body, f, l = self.seq([s.body])
            if f is None or l is None:
                return s, None, None
            if f == l:
                return S.For(s.loop_var, s.min, s.extent, s.kind, body), f, l
            # loop-carried: the first op of iteration i+1 waits for the last of iteration i
            assert isinstance(body, S.Stmt)
            guard = S.IfThenElse(E.NE(s.loop_var, s.min), _dep("pop", l, f))
            body = _attach(body, [guard], first=True)
            body = _attach(body, [_dep("push", l, f)], first=False)
            loop = S.For(s.loop_var, s.min, s.extent, s.kind, body)
            return S.seq(loop, _dep("pop", l, f)), f, l
        if isinstance(s, (S.AttrStmt, S.LetStmt, S.Allocate)):
            b, f, l = self.visit(s.body)
            return _with_body(s, b), f, l
        if isinstance(s, S.IfThenElse):
            t, f, l = self.visit(s.then_case)
            e, f2, l2 = self.visit(s.else_case) if s.else_case is not None else (None, None, None)
            if f2 is not None and (f2 != f or l2 != l):
                raise VTALoweringError("VTA: both branches of an if must start and end on the "
                                       "same queues")
            return S.IfThenElse(s.condition, t, e), f, l
        return s, None, None

    def seq(self, items: list[S.Stmt]) -> tuple[S.Stmt, int | None, int | None]:
        parts = [self.visit(x) for x in items]
        groups: list[list] = []  # [stmt, pre, post, first, last]
        for st, f, l in parts:
            groups.append([st, [], [], f, l])
        prev = None
        for g in groups:
            if g[3] is None:
                continue
            if prev is not None and prev[4] != g[3]:
                prev[2].append(_dep("push", prev[4], g[3]))
                g[1].append(_dep("pop", prev[4], g[3]))
            prev = g
        with_ops = [g for g in groups if g[3] is not None]
        first = with_ops[0][3] if with_ops else None
        last = with_ops[-1][4] if with_ops else None
        out = []
        for st, pre, post, q, _ in groups:
            if not (pre or post):
                out.append(st)
            elif _is_leaf(self.env, st):
                out.append(_group(st, pre, post, q))
            else:  # a compound statement: its tokens stand beside it
                out.append(S.seq(*pre, st, *post))
        return S.seq(*out), first, last


def _is_leaf(env: Any, st: Any) -> bool:
    """One op (a DMA, or a micro-op region: one instruction) or an op group."""
    return (_op_queue(env, st) is not None or _kernel_kind(st) is not None
            or isinstance(st, S.AttrStmt) and st.attr_key == SYNC_GROUP)


def _attach(st: S.Stmt, deps: list, first: bool) -> S.Stmt:
    """``deps`` before the first (after the last) op of ``st``: inside that op's group when
    it is reached through sequences and scopes, so each virtual thread's copy carries its own
    tokens; else beside ``st``."""
    if isinstance(st, S.SeqStmt) and len(st.seq):
        items = list(st.seq)
        k = 0 if first else len(items) - 1
        items[k] = _attach(items[k], deps, first)
        return S.seq(*items)
    if isinstance(st, S.AttrStmt) and st.attr_key == SYNC_GROUP:
        return _regroup(st, pre=deps) if first else _regroup(st, post=deps)
    if isinstance(st, (S.Allocate, S.LetStmt)) or (
            isinstance(st, S.AttrStmt) and st.attr_key not in (UOP_SCOPE, UOP_KERNEL)):
        return _with_body(st, _attach(st.body, deps, first))
    if isinstance(st, S.Evaluate) or _kernel_kind(st) is not None or (
            isinstance(st, S.AttrStmt) and st.attr_key == UOP_SCOPE):
        return _regroup(st, pre=deps) if first else _regroup(st, post=deps)
    return S.seq(*deps, st) if first else S.seq(st, *deps)


def _with_body(s: Any, body: S.Stmt) -> S.Stmt:
    if isinstance(s, S.AttrStmt):
        return S.AttrStmt(s.node, s.attr_key, s.value, body)
    if isinstance(s, S.LetStmt):
        return S.LetStmt(s.var, s.value, body)
    return S.Allocate(s.buffer, body, s.condition)


def _group(st: S.Stmt, pre: list, post: list, q: int) -> S.Stmt:
    if isinstance(st, S.AttrStmt) and st.attr_key == SYNC_GROUP:
        return _regroup(st, pre, post)
    return S.AttrStmt(E.StringImm("vta"), SYNC_GROUP, q, S.seq(*pre, st, *post))


def _regroup(st: S.Stmt, pre: list | None = None, post: list | None = None) -> S.Stmt:
    if isinstance(st, S.AttrStmt) and st.attr_key == SYNC_GROUP:
        return S.AttrStmt(st.node, SYNC_GROUP, st.value,
                          S.seq(*(pre or []), st.body, *(post or [])))
    return S.AttrStmt(E.StringImm("vta"), SYNC_GROUP, 0, S.seq(*(pre or []), st, *(post or [])))


def inject_coproc_sync(env: Any, stmt: S.Stmt) -> S.Stmt:
    """Dependency tokens (TVM's CoProcSync): between consecutive ops of different queues a
    push from the producer queue and a pop by the consumer (RAW: load -> compute -> store,
    WAR: compute -> load, store -> compute through loop-carried tokens, each loop's surplus
    token popped after it), so the queues run decoupled but never race."""
    return _Sync(env).visit(stmt)[0]


# ---- virtual threads ------------------------------------------------------------------------
def _touches(s: Any, vt: E.Var, bufs: set[int]) -> bool:
    hit = []

    def f(n: Any) -> None:
        if isinstance(n, E.Var) and (n is vt or id(n) in bufs):
            hit.append(n)
    post_order_visit(s, f)
    return bool(hit)


def _has_calls(s: Any) -> bool:
    hit = []
    post_order_visit(s, lambda n: hit.append(n) if isinstance(n, E.Call) else None)
    return bool(hit)


def _queues(s: Any, env: Any = None) -> set[int]:
    qs: set[int] = set()

    def f(n: Any) -> None:
        if isinstance(n, S.AttrStmt) and n.attr_key == UOP_SCOPE:
            qs.add(2)
        elif isinstance(n, S.Evaluate) and _is_call(n.value, "VTALoadBuffer2D"):
            v: Any = n.value
            qs.add(1 if _const(v.args[-1]) in (1, 2) else 2)
        elif isinstance(n, S.Evaluate) and _is_call(n.value, "VTAStoreBuffer2D"):
            qs.add(3)
    post_order_visit(s, f)
    return qs


def _side(x: Any) -> int | None:
    """The one queue ``x`` runs on (1 load, 2 compute, 3 store): its DMA/GEMM/ALU ops, or a
    token push from / pop into that queue; None for a statement touching several queues."""
    if isinstance(x, S.Evaluate) and (_is_call(x.value, "VTADepPush")
                                      or _is_call(x.value, "VTADepPop")):
        call: Any = x.value
        a, b = (_const(v) for v in call.args[1:3])
        return a if call.args[0].value == "VTADepPush" else b
    qs = _queues(x)
    return next(iter(qs)) if len(qs) == 1 else None


def _hoist_allocs(s: S.Stmt) -> S.Stmt:
    """``seq(a, allocate B { seq(b, c) })`` -> ``allocate B { seq(a, b, c) }`` (one level of
    statements, so groups of one queue that allocations separate become neighbours)."""
    if not isinstance(s, S.SeqStmt):
        return s
    allocs: list[S.Allocate] = []
    flat: list[S.Stmt] = []

    def add(x: S.Stmt) -> None:
        while isinstance(x, S.Allocate):
            allocs.append(x)
            x = x.body
        if isinstance(x, S.SeqStmt):
            for y in x.seq:
                add(y)
        else:
            flat.append(x)
    for x in s.seq:
        add(x)
    out: S.Stmt = S.seq(*flat)
    for a in reversed(allocs):
        out = S.Allocate(a.buffer, out, a.condition)
    return out


def _vt_inject(s: S.Stmt, vt: E.Var, n: int, bufs: set[int]) -> S.Stmt:
    if isinstance(s, S.SeqStmt):
        s = _hoist_allocs(s)
        if not isinstance(s, S.SeqStmt):
            return _vt_inject(s, vt, n, bufs)
        # neighbouring statements of one queue (e.g. a thread's data and weight loads) are
        # replicated together: thread 0's, then thread 1's. A load waiting on a thread's
        # compute then does not hold back the other thread's loads in the in-order queue, and
        # every queue sees the threads in the same order (nested virtual threads too), so
        # each token pairs the ops of one thread.
        out: list[S.Stmt] = []
        run: list[S.Stmt] = []
        run_side: list[int | None] = [None]

        def flush() -> None:
            if run:
                grp = S.seq(*run)
                out.append(S.seq(*(substitute(grp, {vt: E.const(k, vt.dtype)})
                                   for k in range(n))))
                run.clear()
        for x in s.seq:
            side = _side(x)
            if side is not None and (_touches(x, vt, bufs) or _has_calls(x)):
                if side != run_side[0]:
                    flush()
                run_side[0] = side
                run.append(x)
                continue
            flush()
            run_side[0] = None
            out.append(_vt_inject(x, vt, n, bufs))
        flush()
        return S.seq(*out)
    if isinstance(s, S.For) and not uses_var(s.extent, vt) and not uses_var(s.min, vt):
        return S.For(s.loop_var, s.min, s.extent, s.kind, _vt_inject(s.body, vt, n, bufs))
    if isinstance(s, S.LetStmt) and not uses_var(s.value, vt):
        return S.LetStmt(s.var, s.value, _vt_inject(s.body, vt, n, bufs))
    if isinstance(s, S.Allocate):
        return S.Allocate(s.buffer, _vt_inject(s.body, vt, n, bufs), s.condition)
    if isinstance(s, S.AttrStmt) and s.attr_key not in (SYNC_GROUP, UOP_SCOPE) \
            and not uses_var(s.value, vt):
        return _with_body(s, _vt_inject(s.body, vt, n, bufs))
    if isinstance(s, S.IfThenElse) and not uses_var(s.condition, vt):
        return S.IfThenElse(s.condition, _vt_inject(s.then_case, vt, n, bufs),
                            _vt_inject(s.else_case, vt, n, bufs) if s.else_case else None)
    if not _touches(s, vt, bufs) and not _has_calls(s):
        return s
    return S.seq(*(substitute(s, {vt: E.const(k, vt.dtype)}) for k in range(n)))


def inject_virtual_thread(env: Any, stmt: S.Stmt) -> S.Stmt:
    """Virtual threads (``cthread``) -> interleaved copies: each on-chip buffer allocated in
    the thread gets one copy per thread; each op group (an op with its token pushes/pops) is
    replicated per thread, as deep in the loop nest as possible, so the queues see the threads'
    ops interleaved and a thread's compute overlaps another's loads (latency hiding)."""
    def post(s: Any) -> Any:
        if not (isinstance(s, S.AttrStmt) and s.attr_key == "virtual_thread"):
            return None
        n = _const(s.value)
        if n is None:
            raise VTALoweringError("VTA: a virtual thread needs a constant extent")
        vt = s.node.var
        allocs: list[S.Allocate] = []
        post_order_visit(s.body, lambda x: allocs.append(x) if isinstance(x, S.Allocate) else None)
        sizes = {}
        for a in allocs:
            size = 1
            for d in a.buffer.shape:
                c = _const(d)
                if c is None:
                    raise VTALoweringError(f"VTA: buffer {a.buffer.name} needs a constant size")
                size *= c
            sizes[id(a.buffer.data)] = size

        def grow(x: Any) -> Any:
            if isinstance(x, S.Allocate) and id(x.buffer.data) in sizes:
                b = x.buffer
                nb = type(b)(b.data, b.dtype, (sizes[id(b.data)] * n,), (), b.elem_offset,
                             b.name, b.scope, b.data_alignment, b.offset_factor)
                return S.Allocate(nb, x.body, x.condition)
            if _is_call(x, "VTASram") and id(x.args[1]) in sizes:
                return sram_ref(x.args[1], x.args[2] + vt * sizes[id(x.args[1])])
            return None
        body = ir_transform(s.body, None, grow)
        return _vt_inject(body, vt, n, set(sizes))
    return ir_transform(stmt, None, post)


# ---- on-chip placement ----------------------------------------------------------------------
def place_sram(env: Any, stmt: S.Stmt) -> S.Stmt:
    """Give each on-chip buffer a tile address (stack allocation per scope, nested
    allocations after their parents'); ``VTASram(buf, elem)`` becomes the tile index.
    A scope over its capacity is a :class:`VTALoweringError` naming the buffers."""
    scopes = (env.inp_scope, env.wgt_scope, env.acc_scope)
    top = {sc: 0 for sc in scopes}
    base: dict[int, tuple[int, int]] = {}
    live: dict[str, list[str]] = {sc: [] for sc in scopes}

    def rec(s: Any) -> Any:
        if isinstance(s, S.Allocate):
            sc = s.buffer.scope
            if sc not in scopes:
                raise VTALoweringError(
                    f"VTA: intermediate tensor {s.buffer.name} would live in DRAM scope "
                    f"{sc!r}; set its scope to one of {scopes} (or inline it)")
            info = env.mem_info(sc)
            size = 1
            for d in s.buffer.shape:
                c = _const(d)
                if c is None:
                    raise VTALoweringError(f"VTA: buffer {s.buffer.name} needs a constant size")
                size *= c
            tiles = -(-size // info.tile_elems)
            start = top[sc]
            base[id(s.buffer.data)] = (start, info.tile_elems)
            top[sc] += tiles
            live[sc].append(f"{s.buffer.name} ({tiles} tiles)")
            if top[sc] > info.max_entries:
                raise VTALoweringError(
                    f"VTA: {sc} overflows: {', '.join(live[sc])} need {top[sc]} tiles, the "
                    f"buffer holds {info.max_entries} ({info.max_num_bits // 8} bytes); "
                    "tile the computation smaller")
            body = rec(s.body)
            top[sc] = start
            live[sc].pop()
            return body
        if isinstance(s, S.SeqStmt):
            return S.seq(*(rec(x) for x in s.seq))
        if isinstance(s, S.For):
            return S.For(s.loop_var, s.min, s.extent, s.kind, rec(s.body))
        if isinstance(s, (S.AttrStmt, S.LetStmt)):
            return _with_body(s, rec(s.body))
        if isinstance(s, S.IfThenElse):
            return S.IfThenElse(s.condition, rec(s.then_case),
                                rec(s.else_case) if s.else_case is not None else None)
        return s

    def repl(x: Any) -> Any:
        if _is_call(x, "VTASram"):
            b = base.get(id(x.args[1]))
            if b is None:
                raise VTALoweringError(f"VTA: {x.args[1]} is not an on-chip buffer")
            return simplify(E.const(b[0]) + E.FloorDiv(x.args[2], E.const(b[1])))
        return None
    out = rec(stmt)
    return ir_transform(out, None, repl)


# ---- micro-kernels --------------------------------------------------------------------------
def _kernel_kind(s: Any) -> Any:
    """The signature (kind, mode, reset, ALU op, immediate) shared by every micro-op ``s``
    pushes, None when they differ (a micro-kernel has one GEMM/ALU operation)."""
    if isinstance(s, S.AttrStmt) and s.attr_key == UOP_SCOPE:
        node: Any = s
        a = node.body.value.args
        return (node.value.value, str(a[1]), str(a[2]), str(a[6]), str(a[7]), str(a[8]))
    if isinstance(s, S.For):
        return _kernel_kind(s.body)
    if isinstance(s, S.SeqStmt):
        kinds = {_kernel_kind(x) for x in s.seq}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def _uop_count(s: Any, fold: int = 2) -> int:
    if isinstance(s, S.For):
        ext = _const(s.extent) or 1 << 20
        return _uop_count(s.body, fold - 1) * (1 if fold > 0 else ext)
    if isinstance(s, S.SeqStmt):
        return sum(_uop_count(x, 0) for x in s.seq)
    return 1


def lift_uop_kernels(env: Any, stmt: S.Stmt, max_uops: int = 4096) -> S.Stmt:
    """Wrap each maximal micro-op-only region (pushes and the loops around them, of one kind)
    in a ``vta.uop_kernel`` scope: the runtime records it once (cached) and issues one GEMM or
    ALU instruction; its outer two loops fold into the 2-level micro-op loop."""
    def rec(s: Any) -> Any:
        kind = _kernel_kind(s)
        if kind is not None and _uop_count(s) <= max_uops:
            return S.AttrStmt(E.StringImm(kind[0]), UOP_KERNEL, E.StringImm(kind[0]), s)
        if isinstance(s, S.SeqStmt):
            return S.seq(*(rec(x) for x in s.seq))
        if isinstance(s, S.For):
            return S.For(s.loop_var, s.min, s.extent, s.kind, rec(s.body))
        if isinstance(s, (S.AttrStmt, S.LetStmt, S.Allocate)):
            return _with_body(s, rec(s.body))
        if isinstance(s, S.IfThenElse):
            return S.IfThenElse(s.condition, rec(s.then_case),
                                rec(s.else_case) if s.else_case is not None else None)
        return s
    return rec(stmt)


# ---- in-place ALU stages --------------------------------------------------------------------
def _alu_store(s: Any) -> Any:
    """The BufferStore under a ``pragma_alu`` stage (through loops and guards)."""
    while True:
        if isinstance(s, S.For):
            s = s.body
        elif isinstance(s, S.IfThenElse) and s.else_case is None:
            s = s.then_case
        elif isinstance(s, S.AttrStmt):
            s = s.body
        else:
            return s if isinstance(s, S.BufferStore) else None


def _inplace_candidate(env: Any, stage: S.AttrStmt, allocs: dict[int, Any]) -> tuple | None:
    """(dst buffer, src buffer) when the ALU stage computes ``dst[i] = src[i] op x`` with both
    accumulator allocations of one size and dtype (so dst can live in src's storage)."""
    st = _alu_store(stage.body)
    if st is None or id(st.buffer.data) not in allocs or len(st.indices) != 1:
        return None
    v = _strip(st.value)
    ops: list[Any] = []
    if isinstance(v, (E.Add, E.Min, E.Max)):
        ops = [v.a, v.b]
    elif isinstance(v, E.Sub) or (isinstance(v, E.Call) and v.op in ("shift_right", "shift_left")):
        ops = [v.a if isinstance(v, E.Sub) else v.args[0]]
    for o in ops:
        o = _strip(o)
        if isinstance(o, E.BufferLoad) and id(o.buffer.data) in allocs \
                and o.buffer.data is not st.buffer.data and len(o.indices) == 1 \
                and _eq(o.indices[0], st.indices[0]) and o.buffer.dtype == st.buffer.dtype \
                and _size(allocs[id(o.buffer.data)].buffer) == _size(allocs[id(st.buffer.data)].buffer):
            return st.buffer, o.buffer
    return None


def _size(buf: Any) -> int | None:
    n = 1
    for d in buf.shape:
        c = _const(d)
        if c is None:
            return None
        n *= c
    return n


def alu_inplace(env: Any, stmt: S.Stmt) -> S.Stmt:
    """Element-wise ALU stages whose source dies there write into the source's storage (TVM
    gets this from StorageRewrite's in-place reuse): ``C[i] = A[i] >> 8`` with ``A`` read by
    nothing later becomes ``A[i] = A[i] >> 8``, one ALU pass instead of a reset, a copy and the
    operation, and one accumulator allocation less."""
    changed = True
    while changed:
        changed = False
        allocs: dict[int, Any] = {}
        stages: list[S.AttrStmt] = []

        def collect(n: Any, allocs: dict = allocs, stages: list = stages) -> None:
            if isinstance(n, S.Allocate) and n.buffer.scope == env.acc_scope:
                allocs[id(n.buffer.data)] = n
            elif isinstance(n, S.AttrStmt) and n.attr_key == "pragma_" + env.alu:
                stages.append(n)
        post_order_visit(stmt, collect)
        order: list[Any] = []
        post_order_visit(stmt, order.append)
        pos = {id(n): k for k, n in enumerate(order)}
        for stage in stages:
            cand = _inplace_candidate(env, stage, allocs)
            if cand is None:
                continue
            dst, src = cand
            end = pos[id(stage)]
            later = [n for n in order[end + 1:]
                     if (isinstance(n, E.Var) and n is src.data)
                     or (isinstance(n, (E.BufferLoad, S.BufferStore)) and n.buffer.data is src.data)]
            # dst must be fresh (first written by this stage): nothing reads or writes it before
            st = _alu_store(stage.body)
            before = [n for n in order[:end + 1] if n is not st
                      and ((isinstance(n, E.Var) and n is dst.data)
                           or (isinstance(n, (E.BufferLoad, S.BufferStore))
                               and n.buffer.data is dst.data))]
            if later or before:
                continue
            stmt = _replace_buffer(stmt, dst, src)
            changed = True
            break
    return stmt


def _replace_buffer(stmt: S.Stmt, old: Any, new: Any) -> S.Stmt:
    def post(n: Any) -> Any:
        if isinstance(n, S.Allocate) and n.buffer.data is old.data:
            return n.body
        if isinstance(n, E.BufferLoad) and n.buffer.data is old.data:
            return E.BufferLoad(new, n.indices, n.predicate)
        if isinstance(n, S.BufferStore) and n.buffer.data is old.data:
            return S.BufferStore(new, n.value, n.indices, n.predicate)
        return None
    out = ir_transform(stmt, None, post)
    return substitute(out, {old.data: new.data})
