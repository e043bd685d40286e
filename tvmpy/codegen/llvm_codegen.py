"""Lowered loop IR (IR form 2) -> LLVM IR text: statements, expressions and memory accesses.

One :class:`CodeGenLLVM` builds one LLVM module from PrimFuncs. Semantics chosen here:

- integer ``/`` and ``%`` (Div, Mod) truncate (sdiv/srem, udiv/urem); FloorDiv/FloorMod round
  toward -inf (sign fixed after sdiv/srem); float FloorMod is ``a - floor(a/b)*b``;
- float Min/Max: a NaN operand gives NaN, as ``numpy.minimum``/``numpy.maximum`` do; on x86
  the native MINPS/MAXPS with a NaN fix-up (llvm_arith ``_x86_min_max``): elementwise exactly
  numpy's (a +-0 tie gives the second operand), a reduction's update ``acc = max(acc, x)``
  keeps ``acc`` on a tie; elsewhere ``llvm.minimum``/``llvm.maximum`` (one instruction on
  AArch64; -0 orders below +0);
- float -> int casts truncate toward zero; to 8/16-bit (and uint32) targets they go through a
  wider signed integer and wrap, matching numpy on x86; float -> bool is ``x != 0`` (NaN is true);
- float arithmetic carries only the ``contract`` fast-math flag (FMA formation, no reassociation);
- signed 32/64-bit arithmetic inside buffer indices and loop counters is ``nsw``; value
  arithmetic wraps (int8 overflow is defined and wraps, as in numpy);
- a scalar int32 element index is computed in i64 (its +, -, * over sign-extended leaves:
  :data:`WIDE_INDEX`), the type the address needs: with i32 arithmetic LLVM's ScalarEvolution
  has to prove every index expression free of signed wrap to widen it (IndVarSimplify,
  ``isImpliedCond`` over the loop nest), which was ~40% of an auto-scheduler conv candidate's
  build (bench/RESULTS.md, issue 28 point 5);
- a vector ``if_then_else`` evaluates both sides, with the loads of each side masked by the
  condition, so guarded out-of-bounds lanes are never read;
- a predicated load gives 0 in masked-off lanes (as the interpreter); a predicated store leaves
  them untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ..ir import dtype as dt
from ..ir.functor import ChainFunctor
from ..ir.node import structural_equal
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer
from ..tir.function import PrimFunc
from ..tir.functor import CHAIN_KINDS, Visitor, collect_vars, post_order_visit
from . import abi
from .llvm_align import access_alignment, modular
from .llvm_arith import binary as _binary
from .llvm_arith import cast as _cast
from .llvm_intrinsics import call_intrinsic, lower_call
from .llvm_ir import (
    CodegenError,
    FunctionBuilder,
    ModuleBuilder,
    Value,
    const_value,
    intrinsic_suffix,
    llvm_type,
    scalar_type,
)

__all__ = ["CodeGenLLVM", "CodegenError"]

STACK_LIMIT_BYTES = 64 * 1024
HEAP_ALIGN = 64
SMALL_TILE_BYTES = 2048
#: a serial loop whose whole body is one parallel loop (a recurrence's time loop around its
#: step's jobs) runs as one parallel launch with a wait between steps
#: (llvm_parallel.emit_stepped_parallel_for) instead of one launch a step; False: a launch a step
STEPPED_PARALLEL = True
"""Local buffers up to this size read with strided vectors at constant offsets are built from
scalar loads (see ``CodeGenLLVM._tile_load``), which LLVM turns into register shuffles."""


class _FnCtx:
    """Per-LLVM-function state: builder, variable bindings, live heap allocations."""

    def __init__(self, fb: FunctionBuilder, in_parallel: bool = False):
        self.fb = fb
        self.syms: dict[int, Value] = {}
        self.heap: list[Value] = []
        self.mod_env: dict[int, tuple[int, int]] = {}
        self.align: dict[int, int] = {}  # handle var id -> known alignment of the pointer
        self.noalias: set[int] = set()  # handle var ids of distinct buffers (params, allocations)
        self.in_parallel = in_parallel
        self.mask: Value | None = None  # vector lanes that may execute (vector if_then_else)


def _prefers_loop_vectorizer(var: E.Var, body: S.Stmt) -> bool:
    """An innermost serial loop that stores scalars at unit stride in ``var``: left rolled for
    LLVM's loop vectorizer. Otherwise LLVM's early full unroll turns it into straight-line code
    and then vectorizes the loop *around* it with gathers and scatters (a tiled loop nest whose
    inner tile loop is not vectorized by the schedule ran ~10x slower that way)."""
    from ..arith import detect_linear_equation

    found = False
    nested = False

    def visit(n: object) -> None:
        nonlocal found, nested
        if isinstance(n, S.For):
            nested = True
        elif isinstance(n, S.BufferStore) and not found and len(n.indices) == 1 \
                and dt.lanes_of(n.value.dtype) == 1:
            coef = detect_linear_equation(n.indices[0], [var])
            if coef is not None and isinstance(coef[0], E.IntImm) and coef[0].value == 1:
                found = True

    post_order_visit(body, visit)
    return found and not nested


_NONAFFINE = (E.FloorDiv, E.FloorMod, E.Div, E.Mod)
_MD_UNROLL_FULL = '!"llvm.loop.unroll.full"'
_MD_NO_UNROLL = '!"llvm.loop.unroll.disable"'
_MD_NO_VECTORIZE = '!"llvm.loop.vectorize.enable", i1 false'


def _nonaffine_index(var: E.Var, body: S.Stmt) -> bool:
    """Does a memory index in ``body`` divide ``var`` (or a value computed from it) or take its
    remainder? LLVM 22's loop vectorizer miscompiles such loops: for ``B[q * 8 + i % 8]`` over
    ``i in [0, 16)`` it loads 16 consecutive elements (it widens ``zext(trunc i to i3)`` as if it
    did not wrap). Our own VectorizeLoop already handles such indices (window loads + shuffles,
    gathers) where the schedule asks for vectors; elsewhere they would be gathers at best, so
    LLVM's loop vectorizer is turned off for these loops (see tests/codegen for the
    reproducer)."""
    from ..tir.functor import post_order_visit

    tainted = {id(var)}
    found = False

    def scan() -> None:
        # one post-order walk: whether each node uses a tainted variable (``uses``) and whether
        # it contains a division/remainder of such a value (``bad``), from its children's
        uses: dict[int, bool] = {}
        bad: dict[int, bool] = {}

        def kids(n: Any) -> list[Any]:
            out = []
            for f in n._fields:
                v = getattr(n, f, None)
                if isinstance(v, (list, tuple)):
                    out.extend(v)
                elif v is not None:
                    out.append(v)
            return out

        def visit(n: Any) -> None:
            nonlocal found
            if found:
                return
            if isinstance(n, E.Var):
                uses[id(n)] = id(n) in tainted
                return
            ks = kids(n)
            uses[id(n)] = any(uses.get(id(k), False) for k in ks)
            bad[id(n)] = (isinstance(n, _NONAFFINE) and uses.get(id(n.a), False)) or any(
                bad.get(id(k), False) for k in ks)
            if isinstance(n, (S.LetStmt, E.Let)) and uses.get(id(n.value), False):
                tainted.add(id(n.var))
            elif isinstance(n, (E.BufferLoad, S.BufferStore)):
                found = any(bad.get(id(i), False) for i in n.indices)

        post_order_visit(body, visit)

    # a let's body is reached before the let itself in post-order: run until the taint set
    # is stable
    while True:
        before = len(tainted)
        scan()
        if found or len(tainted) == before:
            return found


class _LoopFacts(Visitor):
    """What :func:`_nonaffine_index` and :func:`_prefers_loop_vectorizer` ask of each loop,
    for all loops of a function in one walk (asking per loop walked the body once per
    enclosing loop: the unrolled Winograd transforms many times over).

    ``loops``: ids of the loop variables of the function; ``nested``: of those whose body
    holds another loop; ``divided``: of the variables a memory index divides or takes the
    remainder of, directly or through a let-bound value (each variable being defined once,
    a loop variable is divided inside its loop exactly when it is in this set)."""

    def __init__(self, body: S.Stmt):
        self.loops: set[int] = set()
        self.nested: set[int] = set()
        self._count = 0
        self._lets: dict[int, list[E.PrimExpr]] = {}
        self._dividends: list[E.PrimExpr] = []
        self.visit(body)
        self.divided = self._closure()

    def visit_For(self, f: S.For) -> None:
        before = self._count
        self.generic_visit(f)
        if self._count != before:
            self.nested.add(id(f.loop_var))
        self.loops.add(id(f.loop_var))
        self._count += 1

    def _let(self, n: Any) -> None:
        self._lets.setdefault(id(n.var), []).append(n.value)
        self.generic_visit(n)

    visit_LetStmt = visit_Let = _let

    def _access(self, n: Any) -> None:
        def dividend(m: Any) -> None:
            if isinstance(m, _NONAFFINE):
                self._dividends.append(m.a)

        for i in n.indices:
            post_order_visit(i, dividend)
        self.generic_visit(n)

    visit_BufferLoad = visit_BufferStore = _access

    def _closure(self) -> set[int]:
        out: set[int] = set()
        todo = list(self._dividends)
        while todo:
            for v in collect_vars(todo.pop()):
                if id(v) not in out:
                    out.add(id(v))
                    todo.extend(self._lets.get(id(v), ()))
        return out


WIDE_INDEX = True
"""Scalar int32 element indices as i64 arithmetic (module docstring); False: i32, then the
address's implicit sign extension (the code before; bench/index_width_ab.py compares both)."""
_WIDE_OPS: dict[type, str] = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}


def _is_accumulate(s: S.BufferStore) -> bool:
    """``buf[i] = max(buf[i], x)`` (or min) on floats: a reduction's update, its first operand
    the value being stored over."""
    v = s.value
    if not isinstance(v, (E.Max, E.Min)) or not dt.is_float(v.dtype):
        return False
    a = v.a
    return (isinstance(a, E.BufferLoad) and a.buffer.data is s.buffer.data
            and len(a.indices) == len(s.indices)
            and all(structural_equal(x, y) for x, y in zip(a.indices, s.indices)))


class CodeGenLLVM(ChainFunctor):
    """LLVM IR for PrimFuncs: ``_s_<Stmt>`` methods emit statements, ``_e_<Expr>`` methods
    return the value of an expression (dispatched by node class, ``ir.functor``)."""

    _prefix = "_e_"
    _chain_kinds = CHAIN_KINDS

    def __init__(self, triple: str, datalayout: str, cpu: str, features: str,
                 module_name: str = "tvmpy_module", mvec_isas: Sequence[tuple[str, int]] = (),
                 vector_bits: int = 128):
        """``mvec_isas``: libmvec variants usable for vector math, widest first, as
        (ISA letter, vector bits), e.g. [("e", 512), ("d", 256), ("b", 128)]; empty: none."""
        self.mb = ModuleBuilder(module_name, triple, datalayout)
        self.x86 = triple.split("-")[0] in ("x86_64", "i386", "i486", "i586", "i686")
        self.mvec_isas = list(mvec_isas)
        self.imported_llvm: list[str] = []  # LLVM IR of pragma_import_llvm, linked in
        self.imported_c: list[str] = []  # C source of pragma_import_c, compiled and linked
        self.uses_mvec = False
        tattrs = f'"target-cpu"="{cpu}" "min-legal-vector-width"="{vector_bits}"'
        if features:
            tattrs += f' "target-features"="{features}"'
        self.fn_attrs = self.mb.add_attribute_group(f"nounwind {tattrs}")
        self.outlined_attrs = self.mb.add_attribute_group(f"noinline nounwind {tattrs}")
        # defined (weak) by the runtime's linker; several modules may link into one library
        self.mb.globals.append(f"@{abi.ERROR_SYMBOL} = external global ptr, align 8")
        self._likely_md: str | None = None
        self._loop_props: dict[str, str] = {}  # loop property text -> its metadata node
        self.ctx: _FnCtx
        self._index_depth = 0
        self._small_tiles: set[int] = set()  # data var ids of small local tiles in scope
        self._plain_loads = 0  # > 0: no masked widening of odd-width loads (a tile's fill)
        self._func_name = ""
        # size_t of the target (wasm32: i32); threads: False runs parallel loops serially
        self.size_type = "i32" if re.search(r"(^|-)p:32", datalayout) else "i64"
        self.threads = True
        self.vector_bits = vector_bits
        self._loop_facts: _LoopFacts | None = None  # of the function being emitted
        # id of the float Min/Max a store accumulates into its own target (``acc = max(acc,
        # x)``): emitted in the reduction's form (llvm_arith._x86_min_max)
        self._accumulate: int | None = None

    # =========================================================================================
    # functions
    @property
    def fb(self) -> FunctionBuilder:
        return self.ctx.fb

    def add_function(self, func: PrimFunc) -> None:
        sig = abi.signature(func)
        self._func_name = func.name
        self._check_symbol(func.name)
        params = []
        bindings = []
        names = set()
        for var in sig.vars:
            buf = func.buffer_map.get(var)
            # no '.' in parameter names: FunctionBuilder.fresh names are "<hint>.<n>", so a
            # parameter can never collide with one (two tensors may share a name)
            base = _ident(var.name).replace(".", "_")
            name = base
            k = 0
            while name in names:
                k += 1
                name = f"{base}_{k}"
            names.add(name)
            if buf is not None:
                # the runtime guarantees 64-byte aligned arguments, no more
                align = min(buf.data_alignment, HEAP_ALIGN) if buf.data_alignment > 0 else 1
                align = align if align & (align - 1) == 0 else 1
                params.append(("ptr", f"noalias nocapture align {align}", f"%{name}"))
                bindings.append((var, Value("ptr", f"%{name}"), align))
            else:
                ty = llvm_type(var.dtype)
                attr = "zeroext" if ty == "i1" else ""
                params.append((ty, attr, f"%{name}"))
                bindings.append((var, Value(ty, f"%{name}"), 0))
        fb = FunctionBuilder(func.name, "i32", params, self.fn_attrs)
        self.mb.functions.append(fb)
        self.ctx = _FnCtx(fb)
        for var, val, align in bindings:
            self.ctx.syms[id(var)] = val
            if align:
                self.ctx.align[id(var)] = align
                self.ctx.noalias.add(id(var))
        self._loop_facts = _LoopFacts(func.body)
        try:
            self.stmt(func.body)
        finally:
            self._loop_facts = None
        if not fb.terminated:
            fb.terminate("ret i32 0")

    def _check_symbol(self, name: str) -> None:
        if not name or not all(c.isalnum() or c in "_." for c in name) or name[0].isdigit():
            raise CodegenError(f"function name {name!r} is not a valid C symbol")
        if any(f.name == name for f in self.mb.functions):
            raise CodegenError(f"two functions named {name!r} in one module")
        if name in self.mb.decls:
            raise CodegenError(f"function name {name!r} collides with an external function "
                               "the module calls")

    def text(self) -> str:
        return self.mb.text()

    # =========================================================================================
    # statements
    def stmt(self, s: S.Stmt) -> None:
        m = type(self).dispatch_prefix(type(s), "_s_")
        if m is None:
            raise CodegenError(f"LLVM codegen: unsupported statement {type(s).__name__}: {s}")
        m(self, s)

    def _s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def _s_Evaluate(self, s: S.Evaluate) -> None:
        if isinstance(s.value, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        self.expr(s.value)

    def _s_LetStmt(self, s: S.LetStmt) -> None:
        v = self.expr(s.value)
        with self._bind(s.var, v, s.value):
            self.stmt(s.body)

    def _s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key in ("pragma_import_llvm", "pragma_import_c"):
            # TVM's way to link a hand-written micro-kernel: the pragma's value is its source
            if not isinstance(s.value, E.StringImm):
                raise CodegenError(f"{s.attr_key} needs the source code as a string value")
            lst = self.imported_llvm if s.attr_key == "pragma_import_llvm" else self.imported_c
            if s.value.value not in lst:
                lst.append(s.value.value)
        if s.attr_key in ("thread_extent", "virtual_thread"):
            node = s.node
            name = getattr(node, "thread_tag", "") or getattr(getattr(node, "var", None), "name", "")
            raise CodegenError(
                f"LLVM CPU codegen cannot compile AttrStmt {s.attr_key!r} ({name}): loops bound to "
                "GPU threads / virtual threads need a GPU target; for CPU remove the bind(), or "
                "lower virtual threads first (tir pipeline)")
        self.stmt(s.body)

    def _s_Prefetch(self, s: S.Prefetch) -> None:
        return

    def _s_AssertStmt(self, s: S.AssertStmt) -> None:
        cond = self.condition(s.condition)
        if dt.lanes_of(s.condition.dtype) > 1:
            cond = call_intrinsic(self, "llvm.vector.reduce.and", [cond], "i1")
        msg = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)
        self._check_or_fail(cond, msg)
        self.stmt(s.body)

    def _check_or_fail(self, ok: Value, msg: str | None) -> None:
        """Continue when ``ok`` holds; otherwise record ``msg`` (None: already recorded) and
        leave the function with -1, freeing live heap allocations."""
        fb = self.fb
        ok_l, fail_l = fb.label("assert_ok"), fb.label("assert_fail")
        fb.cond_br(ok, ok_l, fail_l, f", !prof {self._likely()}")
        fb.new_block(fail_l)
        if msg is not None:
            m = self.mb.string(msg)
            fb.emit(f"store ptr {m.ref}, ptr @{abi.ERROR_SYMBOL}, align 8")
        self._free_live()
        fb.terminate("ret i32 -1")
        fb.new_block(ok_l)

    def _free_live(self) -> None:
        for p in reversed(self.ctx.heap):
            self.mb.declare("free", "void", ["ptr"])
            self.fb.emit(f"call void @free({p})")

    def _likely(self) -> str:
        """Branch weights: the first successor is the likely one."""
        if self._likely_md is None:
            self._likely_md = self.mb.add_metadata('!"branch_weights", i32 2000, i32 1')
        return self._likely_md


    def _s_IfThenElse(self, s: S.IfThenElse) -> None:
        if dt.lanes_of(s.condition.dtype) != 1:
            raise CodegenError(f"IfThenElse needs a scalar condition, got {s.condition.dtype}")
        cond = self.condition(s.condition)
        fb = self.fb
        then_l, end_l = fb.label("if_then"), fb.label("if_end")
        else_l = fb.label("if_else") if s.else_case is not None else end_l
        likely = isinstance(s.condition, E.Call) and s.condition.op == "likely"
        fb.cond_br(cond, then_l, else_l, f", !prof {self._likely()}" if likely else "")
        fb.new_block(then_l)
        self.stmt(s.then_case)
        fb.br(end_l)
        if s.else_case is not None:
            fb.new_block(else_l)
            self.stmt(s.else_case)
            fb.br(end_l)
        fb.new_block(end_l)

    def _s_For(self, s: S.For) -> None:
        kind = s.kind
        if kind == S.ForKind.PARALLEL and not self.ctx.in_parallel and self.threads:
            from .llvm_parallel import emit_parallel_for

            emit_parallel_for(self, s)
            return
        if kind == S.ForKind.SERIAL and not self.ctx.in_parallel and self.threads \
                and STEPPED_PARALLEL:
            from .llvm_parallel import emit_stepped_parallel_for, stepped_inner

            inner = stepped_inner(s)
            if inner is not None:
                emit_stepped_parallel_for(self, s, inner)
                return
        if kind == S.ForKind.THREAD_BINDING:
            raise CodegenError(f"LLVM CPU codegen cannot compile a thread-bound loop over "
                               f"{s.loop_var.name}; use a GPU target or remove the bind()")
        if kind == S.ForKind.VECTORIZED:
            kind = S.ForKind.SERIAL  # vectorized loops left by the pipeline: scalar code
        # full-unroll metadata only where LLVM can honour it (a constant trip count); on a
        # symbolic extent it would only print "loop not unrolled" warnings
        unroll = kind == S.ForKind.UNROLLED and isinstance(s.extent, E.IntImm)
        self.serial_loop(s.loop_var, s.min, s.extent, s.body, unroll=unroll)

    def serial_loop(self, var: E.Var, min_e: E.PrimExpr | Value, extent_e: E.PrimExpr | Value,
                    body: S.Stmt, unroll: bool = False) -> None:
        """A counted loop ``for var in [min, min+extent)`` with a phi induction variable."""
        ty = llvm_type(var.dtype)
        if not dt.is_integer(var.dtype) or dt.lanes_of(var.dtype) != 1:
            raise CodegenError(f"loop variable {var.name} must be a scalar integer, got {var.dtype}")
        self._index_depth += 1
        lo = self._as_value(min_e, var.dtype)
        ext = self._as_value(extent_e, var.dtype)
        fb = self.fb
        hi = fb.value(ty, f"add nsw {lo}, {ext.ref}", "for_end")
        self._index_depth -= 1
        pre = fb.cur
        head, body_l, exit_l = fb.label("for_head"), fb.label("for_body"), fb.label("for_exit")
        fb.br(head)
        fb.new_block(head)
        iv = fb.fresh(_ident(var.name))
        nxt = fb.fresh(_ident(var.name) + "_next")
        phi_lines = fb.lines
        phi_lines.append("")  # patched below, once the latch block is known
        cmp = "slt" if dt.is_int(var.dtype) else "ult"
        c = fb.value("i1", f"icmp {cmp} {ty} {iv}, {hi.ref}", "for_cond")
        fb.cond_br(c, body_l, exit_l)
        fb.new_block(body_l)
        with self._bind(var, Value(ty, iv), None):
            self.stmt(body)
        if not fb.terminated:
            flag = "nsw " if dt.is_int(var.dtype) else "nuw "
            fb.emit(f"{nxt} = add {flag}{ty} {iv}, 1")
            latch = fb.cur
            facts = self._loop_facts
            if facts is not None and id(var) not in facts.loops:
                facts = None  # a loop made here, not in the function: asked directly
            if unroll:
                meta = ", !llvm.loop " + self._loop_md(_MD_UNROLL_FULL)
            elif (id(var) in facts.divided) if facts is not None else \
                    _nonaffine_index(var, body):
                meta = ", !llvm.loop " + self._loop_md(_MD_NO_VECTORIZE)
            elif (facts is None or id(var) not in facts.nested) and \
                    _prefers_loop_vectorizer(var, body):
                meta = ", !llvm.loop " + self._loop_md(_MD_NO_UNROLL)
            else:
                meta = ""
            fb.br(head, meta)
            phi_lines[0] = f"  {iv} = phi {ty} [ {lo.ref}, %{pre} ], [ {nxt}, %{latch} ]"
        else:  # the body always leaves (e.g. a failing assert): no back edge
            phi_lines[0] = f"  {iv} = phi {ty} [ {lo.ref}, %{pre} ]"
        fb.new_block(exit_l)

    def _loop_md(self, prop: str) -> str:
        """A fresh loop id (``distinct !{self, !prop}``) carrying one loop property."""
        ref = self._loop_props.get(prop)
        if ref is None:
            ref = self._loop_props[prop] = self.mb.add_metadata(prop)
        return self.mb.add_metadata(ref, distinct=True, self_ref=True)

    def _as_value(self, e: E.PrimExpr | Value, dtype: str) -> Value:
        if isinstance(e, Value):
            return e
        v = self.expr(e)
        return self.cast(v, e.dtype, dtype) if e.dtype != dtype else v

    # ---- allocation ------------------------------------------------------------------------
    def _s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        fb = self.fb
        ety = llvm_type(buf.dtype, memory=True)
        ebytes = dt.bytes_of(buf.dtype)
        count: int | None = 1
        for d in buf.shape:
            if isinstance(d, E.IntImm) and count is not None:
                count *= d.value
            else:
                count = None
        on_stack = count is not None and (
            count * ebytes <= STACK_LIMIT_BYTES
            or (buf.scope.startswith("local") and count * ebytes <= 16 * STACK_LIMIT_BYTES))
        if on_stack:
            ptr = fb.alloca(f"[{max(count, 1)} x {ety}]", HEAP_ALIGN, _ident(buf.name))
            small = buf.scope.startswith("local") and count * ebytes <= SMALL_TILE_BYTES
            if small:
                self._small_tiles.add(id(buf.data))
            try:
                with self._bind_buffer(buf.data, ptr):
                    self.stmt(s.body)
            finally:
                self._small_tiles.discard(id(buf.data))
            return
        self._index_depth += 1
        n = const_value(1, "int64")
        for d in buf.shape:
            dv = self.cast(self.expr(d), d.dtype, "int64") if d.dtype != "int64" else self.expr(d)
            n = fb.value("i64", f"mul nsw {n}, {dv.ref}", "alloc_n")
        self._index_depth -= 1
        nbytes = fb.value("i64", f"mul nsw {n}, {ebytes}", "alloc_bytes")
        # aligned_alloc wants a multiple of the alignment; 0 bytes still gets a valid pointer
        padded = fb.value("i64", f"add i64 {nbytes.ref}, {HEAP_ALIGN - 1 + HEAP_ALIGN}", "alloc_pad")
        rounded = fb.value("i64", f"and i64 {padded.ref}, {-HEAP_ALIGN}", "alloc_size")
        st = self.size_type
        if st != "i64":  # a 32-bit target: size_t is i32
            rounded = fb.value(st, f"trunc {rounded} to {st}", "alloc_size32")
        self.mb.declare("aligned_alloc", "ptr", [st, st])
        ptr = fb.value("ptr", f"call ptr @aligned_alloc({st} {HEAP_ALIGN}, {rounded})",
                       _ident(buf.name))
        ok = fb.value("i1", f"icmp ne {ptr}, null", "alloc_ok")
        self._check_or_fail(ok, f"{self._func_name}: out of memory allocating buffer {buf.name}")
        self.ctx.heap.append(ptr)
        with self._bind_buffer(buf.data, ptr):
            self.stmt(s.body)
        self.ctx.heap.pop()
        if not fb.terminated:
            self.mb.declare("free", "void", ["ptr"])
            fb.emit(f"call void @free({ptr})")

    def _bind_buffer(self, data: E.Var, ptr: Value):
        ctx = self.ctx
        ctx.align[id(data)] = HEAP_ALIGN
        ctx.noalias.add(id(data))
        return self._bind(data, ptr, None)

    # ---- stores ------------------------------------------------------------------------------
    def _s_BufferStore(self, s: S.BufferStore) -> None:
        buf = s.buffer
        index = self._flat_index(buf, s.indices)
        into_tile = id(buf.data) in self._small_tiles
        if into_tile:  # a tile's fill: plain loads (LLVM shuffles them straight into the tile)
            self._plain_loads += 1
        self._accumulate = id(s.value) if _is_accumulate(s) else None
        try:
            value = self.expr(s.value)
        finally:
            self._accumulate = None
            if into_tile:
                self._plain_loads -= 1
        vdtype = s.value.dtype
        mem_val = self._to_memory(value, vdtype)
        lanes = dt.lanes_of(index.dtype)
        pred = self.expr(s.predicate) if s.predicate is not None else None
        fb = self.fb
        if lanes == 1:
            if pred is not None:
                if dt.lanes_of(s.predicate.dtype) != 1:
                    raise CodegenError(f"scalar store into {buf.name} with a vector predicate")
                st_l, end_l = fb.label("pstore"), fb.label("pstore_end")
                fb.cond_br(pred, st_l, end_l)
                fb.new_block(st_l)
                self._store_scalar(buf, index, mem_val, vdtype)
                fb.br(end_l)
                fb.new_block(end_l)
                return
            self._store_scalar(buf, index, mem_val, vdtype)
            return
        if dt.lanes_of(buf.dtype) != 1:
            raise CodegenError(f"vector index into vector-typed buffer {buf.name} is not supported")
        if dt.lanes_of(vdtype) != lanes:
            raise CodegenError(f"store into {buf.name}: value has {dt.lanes_of(vdtype)} lanes, "
                               f"index has {lanes}")
        ety = scalar_type(buf.dtype, memory=True)
        data = self._data(buf)
        if _unit_ramp(index):
            base = self._index(index.base)
            ptr = fb.value("ptr", f"getelementptr inbounds {ety}, {data}, {base}", "addr")
            align = self._alignment(buf, index.base)
            wide = 0 if id(buf.data) in self._small_tiles else self._masked_width(lanes, ety)
            if pred is None and wide:
                wty = f"<{wide} x {ety}>"
                spread = ", ".join(f"i32 {i}" if i < lanes else "i32 poison"
                                   for i in range(wide))
                w = fb.value(wty, f"shufflevector {mem_val}, {mem_val.ty} poison, "
                                  f"<{wide} x i32> <{spread}>", "wwiden")
                name = f"llvm.masked.store.{intrinsic_suffix(wty)}.p0"
                self.mb.declare(name, "void", [wty, "ptr", f"<{wide} x i1>"])
                fb.emit(f"call void @{name}({w}, ptr align {align} {ptr.ref}, "
                        f"{_prefix_mask(lanes, wide)})")
            elif pred is None:
                fb.emit(f"store {mem_val}, ptr {ptr.ref}, align {align}")
            else:
                name = f"llvm.masked.store.{intrinsic_suffix(mem_val.ty)}.p0"
                self.mb.declare(name, "void", [mem_val.ty, "ptr", f"<{lanes} x i1>"])
                fb.emit(f"call void @{name}({mem_val}, ptr align {align} {ptr.ref}, {pred})")
            return
        stride = _small_stride(index, lanes)
        if stride:
            self._strided_store(buf, index, lanes, stride, pred, mem_val, ety, data)
            return
        idx = self._index(index)
        ptrs = fb.value(f"<{lanes} x ptr>", f"getelementptr inbounds {ety}, {data}, {idx}", "addrs")
        mask = pred if pred is not None else const_value(True, f"boolx{lanes}")
        name = f"llvm.masked.scatter.{intrinsic_suffix(mem_val.ty)}.v{lanes}p0"
        self.mb.declare(name, "void", [mem_val.ty, ptrs.ty, mask.ty])
        al = dt.bytes_of(buf.dtype)
        fb.emit(f"call void @{name}({mem_val}, {ptrs.ty} align {al} {ptrs.ref}, {mask})")

    def _store_scalar(self, buf, index: E.PrimExpr, mem_val: Value, vdtype: str) -> None:
        ptr = self.element_ptr(buf, (index,), flat=True)
        align = self._alignment(buf, index)
        self.fb.emit(f"store {mem_val}, ptr {ptr.ref}, align {align}")

    # =========================================================================================
    # memory helpers
    def _flat_index(self, buf, indices) -> E.PrimExpr:
        if len(indices) != 1:
            raise CodegenError(
                f"LLVM codegen needs flattened 1-D accesses (run tvmpy.tir.pipeline.lower_pipeline "
                f"first): buffer {buf.name} is accessed with {len(indices)} indices")
        idx = indices[0]
        off = buf.elem_offset
        if not (isinstance(off, E.IntImm) and off.value == 0):
            lanes = dt.lanes_of(idx.dtype)
            if isinstance(idx, E.Ramp):
                idx = E.Ramp(E.binary_match(idx.base, off)[0] + off, idx.stride, idx.lanes)
            elif lanes > 1:
                idx = idx + E.Broadcast(E.cast(off, dt.element_of(idx.dtype)), lanes)
            else:
                idx = idx + off
        return idx

    def _data(self, buf) -> Value:
        v = self.ctx.syms.get(id(buf.data))
        if v is None:
            raise CodegenError(f"{self._func_name}: buffer {buf.name} is used but its data "
                               f"pointer {buf.data.name} is neither a parameter nor allocated")
        return v

    def _index(self, e: E.PrimExpr) -> Value:
        self._index_depth += 1
        try:
            if WIDE_INDEX and e.dtype == "int32":
                return self._wide_index(e)
            return self.expr(e)
        finally:
            self._index_depth -= 1

    def _wide_index(self, e: E.PrimExpr) -> Value:
        """A scalar int32 element index as i64 arithmetic (``nsw``) over sign-extended leaves."""
        if isinstance(e, E.IntImm):
            return Value("i64", str(int(e.value)))
        op = _WIDE_OPS.get(type(e))
        if op is not None:
            a = self._wide_index(e.a)  # type: ignore[attr-defined]
            b = self._wide_index(e.b)  # type: ignore[attr-defined]
            return self.fb.value("i64", f"{op} nsw {a}, {b.ref}", op)
        v = self.expr(e)
        return self.fb.value("i64", f"sext {v} to i64", "idx")

    def element_ptr(self, buf: Buffer, indices: Sequence[E.PrimExpr], flat: bool = False,
                    inbounds: bool = True) -> Value:
        """Pointer to element ``indices`` of ``buf`` (scalar index). ``inbounds=False``: an
        address that may lie past the buffer (a prefetch hint's)."""
        index = indices[0] if flat else self._flat_index(buf, indices)
        ety = llvm_type(buf.dtype, memory=True)
        idx = self._index(index)
        gep = "getelementptr inbounds" if inbounds else "getelementptr"
        return self.fb.value("ptr", f"{gep} {ety}, {self._data(buf)}, {idx}", "addr")

    def _alignment(self, buf, index: E.PrimExpr) -> int:
        base_align = self.ctx.align.get(id(buf.data), 1)
        return access_alignment(index, self.ctx.mod_env, dt.bytes_of(buf.dtype), base_align)

    def _to_memory(self, v: Value, dtype: str) -> Value:
        if dt.is_bool(dtype):
            ty = llvm_type(dtype, memory=True)
            return self.fb.value(ty, f"zext {v} to {ty}", "b2m")
        return v

    def _from_memory(self, v: Value, dtype: str) -> Value:
        if dt.is_bool(dtype):
            zero = const_value(0, dtype, memory=True)
            return self.fb.value(llvm_type(dtype), f"icmp ne {v}, {zero.ref}", "m2b")
        return v

    # =========================================================================================
    # expressions
    expr = ChainFunctor.visit  # ``expr(e) -> Value``: the value of an expression

    def generic_visit(self, e: Any) -> Value:
        raise CodegenError(f"LLVM codegen: unsupported expression {type(e).__name__}: {e}")

    def condition(self, e: E.PrimExpr) -> Value:
        """``e`` as i1 (or a vector of i1): non-bool conditions mean ``e != 0``."""
        v = self.expr(e)
        if dt.is_bool(e.dtype):
            return v
        return self.cast(v, e.dtype, dt.with_lanes("bool", dt.lanes_of(e.dtype)))

    def _e_Var(self, e: E.Var) -> Value:
        v = self.ctx.syms.get(id(e))
        if v is None:
            raise CodegenError(f"{self._func_name}: variable {e.name} ({e.dtype}) is not defined "
                               "here: it is neither a parameter, a shape variable of a buffer "
                               "parameter, a loop variable nor let-bound")
        return v

    def _e_IntImm(self, e: E.IntImm) -> Value:
        return const_value(e.value, e.dtype)

    def _e_FloatImm(self, e: E.FloatImm) -> Value:
        return const_value(e.value, e.dtype)

    def _e_StringImm(self, e: E.StringImm) -> Value:
        return self.mb.string(e.value)

    def _e_Cast(self, e: E.Cast) -> Value:
        return self.cast(self.expr(e.value), e.value.dtype, e.dtype)

    def _e_BinaryOp(self, e: E.BinaryOp) -> Value:
        return _binary(self, e)

    def _e_Not(self, e: E.Not) -> Value:
        a = self.expr(e.a)
        return self.fb.value(a.ty, f"xor {a}, {const_value(True, e.dtype).ref}", "not")

    def _e_Select(self, e: E.Select) -> Value:
        c = self.condition(e.condition)
        t = self.expr(e.true_value)
        f = self.expr(e.false_value)
        if dt.lanes_of(e.condition.dtype) == 1 or dt.lanes_of(e.dtype) == dt.lanes_of(
                e.condition.dtype):
            return self.fb.value(t.ty, f"select {c}, {t}, {f}", "select")
        raise CodegenError(f"select: condition lanes {e.condition.dtype} vs value {e.dtype}")

    def _e_Let(self, e: E.Let) -> Value:
        v = self.expr(e.value)
        with self._bind(e.var, v, e.value):
            return self.expr(e.body)

    def _e_Ramp(self, e: E.Ramp) -> Value:
        lanes = e.lanes
        b, s = e.base, e.stride
        if isinstance(b, E.IntImm) and isinstance(s, E.IntImm):
            return const_value([b.value + i * s.value for i in range(lanes)], e.dtype)
        base = self.broadcast(self.expr(b), lanes)
        if isinstance(s, E.IntImm):
            steps = const_value([i * s.value for i in range(lanes)], e.dtype)
        else:
            sv = self.broadcast(self.expr(s), lanes)
            iota = const_value(list(range(lanes)), e.dtype)
            steps = self.fb.value(sv.ty, f"mul {sv}, {iota.ref}", "ramp_step")
        flag = " nsw" if self._index_depth and dt.is_int(e.dtype) and dt.bits_of(e.dtype) >= 32 else ""
        return self.fb.value(base.ty, f"add{flag} {base}, {steps.ref}", "ramp")

    def _e_Broadcast(self, e: E.Broadcast) -> Value:
        cv = e.value
        if isinstance(cv, (E.IntImm, E.FloatImm)):
            return const_value(cv.value, e.dtype)
        return self.broadcast(self.expr(cv), e.lanes)

    def broadcast(self, v: Value, lanes: int) -> Value:
        if v.ty.startswith("<"):
            return v
        vty = f"<{lanes} x {v.ty}>"
        fb = self.fb
        t = fb.value(vty, f"insertelement {vty} poison, {v}, i64 0", "bc")
        return fb.value(vty, f"shufflevector {t}, {vty} poison, <{lanes} x i32> zeroinitializer",
                        "bcast")

    def _e_Shuffle(self, e: E.Shuffle) -> Value:
        idx = []
        for i in e.indices:
            if not isinstance(i, E.IntImm):
                raise CodegenError(f"shuffle indices must be constants, got {i}")
            idx.append(i.value)
        vecs = [self.expr(v) for v in e.vectors]
        fb = self.fb
        out_ty = llvm_type(e.dtype)
        n = len(idx)
        mask = f"<{n} x i32> <" + ", ".join(f"i32 {i}" for i in idx) + ">"
        if n == 1 and len(vecs) == 1 and vecs[0].ty.startswith("<"):
            return fb.value(out_ty, f"extractelement {vecs[0]}, i32 {idx[0]}", "lane")
        if len(vecs) == 1 and vecs[0].ty.startswith("<"):
            return fb.value(out_ty, f"shufflevector {vecs[0]}, {vecs[0].ty} poison, {mask}", "shuf")
        if n > 1 and len(vecs) == 2 and vecs[0].ty == vecs[1].ty and vecs[0].ty.startswith("<"):
            return fb.value(out_ty, f"shufflevector {vecs[0]}, {vecs[1]}, {mask}", "shuf")
        lanes_of = [dt.lanes_of(v.dtype) for v in e.vectors]
        est = scalar_type(e.dtype)
        flat: list[tuple[Value, int | None]] = []
        for v, ln in zip(vecs, lanes_of):
            flat.extend([(v, i) for i in range(ln)] if ln > 1 else [(v, None)])
        out = Value(out_ty, "poison")
        for k, i in enumerate(idx):
            if not 0 <= i < len(flat):
                raise CodegenError(f"shuffle index {i} out of range 0..{len(flat) - 1}")
            src, lane = flat[i]
            x = src if lane is None else fb.value(est, f"extractelement {src}, i32 {lane}", "ext")
            if n == 1:
                return x
            out = fb.value(out_ty, f"insertelement {out}, {x}, i32 {k}", "ins")
        return out

    def _e_Call(self, e: E.Call) -> Value:
        return lower_call(self, e)

    def _e_ProducerLoad(self, e: E.ProducerLoad) -> Value:
        raise CodegenError(f"tensor read {e} reached codegen: lower the schedule first")

    def _e_BufferLoad(self, e: E.BufferLoad) -> Value:
        buf = e.buffer
        index = self._flat_index(buf, e.indices)
        lanes = dt.lanes_of(index.dtype)
        fb = self.fb
        pred = self.expr(e.predicate) if e.predicate is not None else None
        mask = self.ctx.mask
        if lanes == 1:
            conds = [c for c in (pred,) if c is not None]
            if mask is not None:
                conds.append(call_intrinsic(self, "llvm.vector.reduce.or", [mask], "i1"))
            if not conds:
                return self._load_scalar(buf, index, e.dtype)
            cond = conds[0]
            if len(conds) == 2:
                cond = fb.value("i1", f"and {conds[0]}, {conds[1].ref}", "lmask")
            return self._guarded(cond, lambda: self._load_scalar(buf, index, e.dtype),
                                 const_value(0, e.dtype) if not dt.is_handle(e.dtype)
                                 else Value("ptr", "null"))
        if dt.lanes_of(buf.dtype) != 1:
            raise CodegenError(f"vector index into vector-typed buffer {buf.name} is not supported")
        if mask is not None and mask.ty == f"<{lanes} x i1>":
            pred = mask if pred is None else fb.value(mask.ty, f"and {mask}, {pred.ref}", "lmask")
        mty = llvm_type(e.dtype, memory=True)
        ety = scalar_type(buf.dtype, memory=True)
        data = self._data(buf)
        if _unit_ramp(index):
            base = self._index(index.base)
            ptr = fb.value("ptr", f"getelementptr inbounds {ety}, {data}, {base}", "addr")
            align = self._alignment(buf, index.base)
            wide = 0 if id(buf.data) in self._small_tiles else self._masked_width(lanes, ety)
            if pred is None and wide:
                wty = f"<{wide} x {ety}>"
                name = f"llvm.masked.load.{intrinsic_suffix(wty)}.p0"
                self.mb.declare(name, wty, ["ptr", f"<{wide} x i1>", wty])
                m = _prefix_mask(lanes, wide)
                w = fb.value(wty, f"call {wty} @{name}(ptr align {align} {ptr.ref}, {m}, "
                                  f"{wty} poison)", "wload")
                keep = ", ".join(f"i32 {i}" for i in range(lanes))
                v = fb.value(mty, f"shufflevector {w}, {wty} poison, <{lanes} x i32> <{keep}>",
                             "wnarrow")
            elif pred is None:
                v = fb.value(mty, f"load {mty}, ptr {ptr.ref}, align {align}", "vload")
            else:
                name = f"llvm.masked.load.{intrinsic_suffix(mty)}.p0"
                self.mb.declare(name, mty, ["ptr", f"<{lanes} x i1>", mty])
                v = fb.value(mty, f"call {mty} @{name}(ptr align {align} {ptr.ref}, {pred}, "
                                  f"{mty} zeroinitializer)", "mload")
            return self._from_memory(v, e.dtype)
        stride = _small_stride(index, lanes)
        if stride:
            return self._from_memory(self._strided_load(buf, index, lanes, stride, pred, mty,
                                                        ety, data), e.dtype)
        if (pred is None and id(buf.data) in self._small_tiles and isinstance(index, E.Ramp)
                and isinstance(index.base, E.IntImm) and isinstance(index.stride, E.IntImm)):
            return self._from_memory(self._tile_load(buf, index, lanes, mty, ety, data),
                                     e.dtype)
        idx = self._index(index)
        ptrs = fb.value(f"<{lanes} x ptr>", f"getelementptr inbounds {ety}, {data}, {idx}", "addrs")
        m = pred if pred is not None else const_value(True, f"boolx{lanes}")
        name = f"llvm.masked.gather.{intrinsic_suffix(mty)}.v{lanes}p0"
        self.mb.declare(name, mty, [ptrs.ty, m.ty, mty])
        al = dt.bytes_of(buf.dtype)
        v = fb.value(mty, f"call {mty} @{name}({ptrs.ty} align {al} {ptrs.ref}, {m}, "
                          f"{mty} zeroinitializer)", "gather")
        return self._from_memory(v, e.dtype)

    def _masked_width(self, lanes: int, ety: str) -> int:
        """The power-of-two width of a masked access standing in for a contiguous ``lanes``-wide
        vector access whose width is not a power of two (12, 13, 9 lanes ...), else 0: with
        AVX-512 (vectors of 512 bits) one masked load/store instead of the split pieces LLVM
        makes of an odd width (a 12-lane load was an 8-lane + a 4-lane load and an insert).
        Not for small local tiles nor the loads that fill them: LLVM promotes such a tile to
        registers and shuffles plain loads better (NCHW12c -> NCHW of 24x56x56 4.7 us, 8.3 with
        masked loads filling the tile). Measured on whole conv + bias + relu models (graph
        executor, same process, interleaved, 2 threads, loaded machine; masked / split time):
        12-lane blocks (24 channels) 3x56x56 -> 24 0.82, 24x56x56 -> 24 0.80, 24x13x13 -> 57
        0.87, 57x13x13 -> 57 stride 2 0.77; 16-lane blocks unchanged (0.96-1.00)."""
        if self._plain_loads or self.vector_bits < 512 or lanes < 5 or lanes & (lanes - 1) == 0:
            return 0
        bits = {"float": 32, "i32": 32, "double": 64, "i64": 64}.get(ety)
        wide = 1 << (lanes - 1).bit_length()
        return wide if bits is not None and wide * bits <= self.vector_bits else 0

    def _tile_load(self, buf, index: E.Ramp, lanes: int, mty: str, ety: str,
                   data: Value) -> Value:
        """A vector read at constant offsets of a small local tile: scalar loads put together
        with ``insertelement``. Every access of such a tile (a register-sized transpose buffer,
        ``topi.x86.injective``) is at a constant offset, so LLVM promotes the tile to registers
        and the reads become shuffles, instead of gathers from the stack."""
        fb = self.fb
        v = Value(mty, "poison")
        for i in range(lanes):
            off = index.base.value + i * index.stride.value
            ptr = fb.value("ptr", f"getelementptr inbounds {ety}, {data}, i64 {off}", "taddr")
            x = fb.value(ety, f"load {ety}, ptr {ptr.ref}, align {dt.bytes_of(buf.dtype)}",
                         "tload")
            v = fb.value(mty, f"insertelement {v}, {x}, i32 {i}", "tins")
        return v

    def _strided_load(self, buf, index: E.Ramp, lanes: int, stride: int, pred: Value | None,
                      mty: str, ety: str, data: Value) -> Value:
        """``lanes`` elements at ``base + i * stride``: a masked load of ``lanes * stride``
        contiguous elements (only every ``stride``-th lane enabled, so nothing past the last
        element is touched), then a shuffle that keeps the enabled lanes."""
        fb = self.fb
        wide = lanes * stride
        wty = f"<{wide} x {ety}>"
        base = self._index(index.base)
        ptr = fb.value("ptr", f"getelementptr inbounds {ety}, {data}, {base}", "addr")
        align = self._alignment(buf, index.base)
        m = self._stride_mask(pred, lanes, stride)
        name = f"llvm.masked.load.{intrinsic_suffix(wty)}.p0"
        self.mb.declare(name, wty, ["ptr", f"<{wide} x i1>", wty])
        v = fb.value(wty, f"call {wty} @{name}(ptr align {align} {ptr.ref}, {m}, "
                          f"{wty} zeroinitializer)", "sload")
        keep = ", ".join(f"i32 {i * stride}" for i in range(lanes))
        return fb.value(mty, f"shufflevector {v}, {wty} poison, <{lanes} x i32> <{keep}>",
                        "sshuf")

    def _stride_mask(self, pred: Value | None, lanes: int, stride: int) -> Value:
        """``lanes * stride`` mask bits: lane ``i``'s predicate (or true) at ``i * stride``."""
        wide = lanes * stride
        if pred is None:
            return Value(f"<{wide} x i1>", "<" + ", ".join(
                "i1 true" if j % stride == 0 else "i1 false" for j in range(wide)) + ">")
        spread = ", ".join(f"i32 {j // stride}" if j % stride == 0 else f"i32 {lanes}"
                           for j in range(wide))
        return self.fb.value(f"<{wide} x i1>", f"shufflevector {pred}, <{lanes} x i1> "
                             f"zeroinitializer, <{wide} x i32> <{spread}>", "smask")

    def _strided_store(self, buf, index: E.Ramp, lanes: int, stride: int, pred: Value | None,
                       mem_val: Value, ety: str, data: Value) -> None:
        """A store of ``lanes`` elements to ``base + i * stride``: the value spread over a
        ``lanes * stride`` vector and one masked store (only the addressed lanes enabled; the
        elements in between are not written), instead of a scatter."""
        fb = self.fb
        wide = lanes * stride
        wty = f"<{wide} x {ety}>"
        base = self._index(index.base)
        ptr = fb.value("ptr", f"getelementptr inbounds {ety}, {data}, {base}", "addr")
        align = self._alignment(buf, index.base)
        spread = ", ".join(f"i32 {j // stride}" if j % stride == 0 else "i32 poison"
                           for j in range(wide))
        v = fb.value(wty, f"shufflevector {mem_val}, {mem_val.ty} poison, <{wide} x i32> "
                          f"<{spread}>", "sspread")
        m = self._stride_mask(pred, lanes, stride)
        name = f"llvm.masked.store.{intrinsic_suffix(wty)}.p0"
        self.mb.declare(name, "void", [wty, "ptr", f"<{wide} x i1>"])
        fb.emit(f"call void @{name}({v}, ptr align {align} {ptr.ref}, {m})")

    def _load_scalar(self, buf, index: E.PrimExpr, dtype: str) -> Value:
        ptr = self.element_ptr(buf, (index,), flat=True)
        mty = llvm_type(dtype, memory=True)
        align = self._alignment(buf, index)
        v = self.fb.value(mty, f"load {mty}, ptr {ptr.ref}, align {align}", "load")
        return self._from_memory(v, dtype)

    # ---- control flow in expressions ---------------------------------------------------------
    def _guarded(self, cond: Value, make: Callable[[], Value], default: Value) -> Value:
        """``cond ? make() : default`` where make() runs only when cond holds."""
        fb = self.fb
        t_l, end_l = fb.label("guard"), fb.label("guard_end")
        pre = fb.cur
        fb.cond_br(cond, t_l, end_l)
        fb.new_block(t_l)
        v = make()
        t_end = fb.cur
        fb.br(end_l)
        fb.new_block(end_l)
        return fb.value(v.ty, f"phi {v.ty} [ {v.ref}, %{t_end} ], [ {default.ref}, %{pre} ]",
                        "guarded")

    def if_then_else(self, cond_e: E.PrimExpr, t_e: E.PrimExpr, f_e: E.PrimExpr,
                     dtype: str) -> Value:
        fb = self.fb
        cond = self.condition(cond_e)
        if dt.lanes_of(cond_e.dtype) > 1:
            # lane-wise: evaluate both sides with their loads masked by the condition
            ctx = self.ctx
            saved = ctx.mask
            not_c = fb.value(cond.ty, f"xor {cond}, {const_value(True, cond_e.dtype).ref}", "ncond")
            tm = cond if saved is None else fb.value(cond.ty, f"and {cond}, {saved.ref}", "m")
            fm = not_c if saved is None else fb.value(cond.ty, f"and {not_c}, {saved.ref}", "m")
            try:
                ctx.mask = tm
                t = self.expr(t_e)
                ctx.mask = fm
                f = self.expr(f_e)
            finally:
                ctx.mask = saved
            return fb.value(t.ty, f"select {cond}, {t}, {f}", "ite")
        t_l, f_l, end_l = fb.label("ite_then"), fb.label("ite_else"), fb.label("ite_end")
        fb.cond_br(cond, t_l, f_l)
        fb.new_block(t_l)
        t = self.expr(t_e)
        t_end = fb.cur
        fb.br(end_l)
        fb.new_block(f_l)
        f = self.expr(f_e)
        f_end = fb.cur
        fb.br(end_l)
        fb.new_block(end_l)
        return fb.value(t.ty, f"phi {t.ty} [ {t.ref}, %{t_end} ], [ {f.ref}, %{f_end} ]", "ite")

    def map_lanes(self, v: Value, dtype: str, fn: Callable[[Value], Value]) -> Value:
        """Apply a scalar emitter to each lane of ``v`` (or to ``v`` itself when scalar)."""
        lanes = dt.lanes_of(dtype)
        if lanes == 1:
            return fn(v)
        fb = self.fb
        st = scalar_type(dtype)
        out = Value(v.ty, "poison")
        for i in range(lanes):
            x = fb.value(st, f"extractelement {v}, i32 {i}", "lane")
            r = fn(x)
            out = fb.value(v.ty, f"insertelement {out}, {r}, i32 {i}", "vec")
        return out

    # ---- casts -------------------------------------------------------------------------------
    def cast(self, v: Value, src: str, dst: str) -> Value:
        return _cast(self, v, src, dst)

    # ---- scoping -----------------------------------------------------------------------------
    def _bind(self, var: E.Var, value: Value, value_expr: E.PrimExpr | None):
        return _Binding(self.ctx, var, value, value_expr)

    @property
    def index_context(self) -> bool:
        return self._index_depth > 0


class _Binding:
    def __init__(self, ctx: _FnCtx, var: E.Var, value: Value, value_expr: E.PrimExpr | None):
        self.ctx, self.var, self.value, self.value_expr = ctx, var, value, value_expr

    def __enter__(self) -> None:
        k = id(self.var)
        ctx = self.ctx
        self.old = (ctx.syms.get(k), ctx.mod_env.get(k))
        ctx.syms[k] = self.value
        if self.value_expr is not None and dt.is_integer(self.var.dtype):
            ctx.mod_env[k] = modular(self.value_expr, ctx.mod_env)
        else:
            ctx.mod_env.pop(k, None)
        if self.value_expr is not None and dt.is_handle(self.var.dtype):
            ctx.align.pop(k, None)

    def __exit__(self, *exc) -> None:
        k = id(self.var)
        old_v, old_m = self.old
        ctx = self.ctx
        if old_v is None:
            ctx.syms.pop(k, None)
        else:
            ctx.syms[k] = old_v
        if old_m is None:
            ctx.mod_env.pop(k, None)
        else:
            ctx.mod_env[k] = old_m


def _prefix_mask(lanes: int, wide: int) -> str:
    """The constant ``<wide x i1>`` mask with the first ``lanes`` lanes on."""
    return f"<{wide} x i1> <" + ", ".join("i1 true" if i < lanes else "i1 false"
                                          for i in range(wide)) + ">"


def _unit_ramp(index: E.PrimExpr) -> bool:
    return isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm) and index.stride.value == 1


def _small_stride(index: E.PrimExpr, lanes: int) -> int:
    """The stride of a ramp index with a small constant stride (2..4, at most 64 lanes loaded),
    else 0: such loads (stride-2 convolution and pooling windows) are a masked contiguous load
    plus a shuffle instead of a gather, which is several times slower."""
    if not (isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm)):
        return 0
    st = index.stride.value
    return st if 2 <= st <= 4 and lanes * st <= 64 else 0


def _ident(name: str) -> str:
    s = "".join(c if (c.isascii() and c.isalnum()) or c in "._" else "_" for c in name) or "v"
    return "v" + s if s[0].isdigit() else s  # %1A would read as the numbered value %1
