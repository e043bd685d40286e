"""Parallel loops for the LLVM code generator: outlining, and the parallel runtime they call.

``for i in parallel(min, extent): body`` becomes

    shards = {0}                                 (one counter per cache line, caller's stack)
    closure = {captured values..., min, extent, &err, &shards} (a struct on the caller's stack)
    tvmpy_parallel_run(f_parN, &closure)          (or GOMP_parallel(f_parN, &closure, 0, 0))
    if err: return -1                                          (message already recorded)

``f_parN(closure)`` runs on any number (>= 1) of threads. A team of one runs the whole loop in
one call; otherwise the loop is cut into one contiguous home shard per thread (at most
MAX_SHARDS), and the thread of index ``t`` (the caller 0, each pool worker its fixed slot + 1)
takes chunks of about extent / (8 * nthreads) iterations from its own shard's atomic counter,
then from the other shards' (a dynamic schedule: on a loaded machine a preempted thread's work
is done by the others). Each thread so touches the same part of every loop's data in every run,
the part its cache holds from the kernels before (see :func:`_emit_schedule`). For each chunk it
calls ``f_parN_impl(captured..., begin, end)``, a ``noinline`` function whose buffer parameters
keep ``noalias``/``align`` (and ``begin``/``end`` a ``range``), so the loop body is optimized as
well as in the caller. Parallel loops nested in a parallel body run serially.

The runtime (config ``PARALLEL_RUNTIME``, else env ``TVMPY_PARALLEL_RUNTIME``, read when code is
generated):

- ``"pool"`` (default): tvmpy's thread pool (runtime/parallel_pool.py), linked into the module's
  library with hidden symbols (link token ``"tvmpy_parallel"``). The caller runs ``f_parN`` too
  and waits only for the workers that joined, never for ones the OS has not scheduled yet.
- ``"gomp"``: libgomp's ``GOMP_parallel`` (``-lgomp``; its closing barrier waits for every thread
  of the team: milliseconds per loop on a loaded machine).

An object file written with ``Module.save("x.o")`` calls ``tvmpy_parallel_run``: link it with
the bytes of ``tvmpy.runtime.parallel_pool.pool_object()`` (``export_library`` does this).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import config
from ..ir import dtype as dt
from ..tir import stmt as S
from ..tir.functor import referenced_vars
from .llvm_ir import FunctionBuilder, Value, llvm_type

if TYPE_CHECKING:
    from .llvm_codegen import CodeGenLLVM

__all__ = ["emit_parallel_for", "LINK_LIBS", "install_fork_guard", "parallel_runtime",
           "link_libs_for"]

#: what the default runtime's parallel loops need at link time
LINK_LIBS = ("tvmpy_parallel",)
RUNTIMES = ("pool", "gomp")
#: home shards of a parallel loop (threads beyond share them: index modulo this), and the
#: bytes of each one's counter (a cache line of its own: its owner's grabs stay in its cache)
MAX_SHARDS = 16
SHARD_BYTES = 64
#: chunks per thread: a shard of extent / nthreads iterations is taken in about this many
CHUNKS_PER_THREAD = 8

from ..runtime.fork_guard import install_fork_guard  # noqa: E402,F401  (re-export)


def parallel_runtime() -> str:
    """The runtime new parallel loops call: ``"pool"`` or ``"gomp"`` (see the module doc)."""
    name = (config.get("PARALLEL_RUNTIME") or os.environ.get("TVMPY_PARALLEL_RUNTIME")
            or "pool").strip().lower()
    if name not in RUNTIMES:
        raise ValueError(f"PARALLEL_RUNTIME: expected one of {', '.join(RUNTIMES)}, got {name!r}")
    return name


def link_libs_for(declared: Iterable[str]) -> list[str]:
    """The libraries code that declares the external functions ``declared`` needs: the pool
    for ``tvmpy_parallel_*``, libgomp for ``GOMP_*``/``omp_*`` (also called by user code)."""
    names = list(declared)
    libs = []
    if any(n.startswith("tvmpy_parallel_") for n in names):
        libs.append(LINK_LIBS[0])
    if any(n.startswith(("GOMP_", "omp_")) for n in names):
        libs.append("gomp")
    return libs


_SCALAR_BYTES = {"i1": 1, "i8": 1, "i16": 2, "half": 2, "bfloat": 2, "i32": 4, "float": 4,
                 "i64": 8, "double": 8, "ptr": 8}


def _abi_align(ty: str) -> int:
    """An upper bound of the ABI alignment of the LLVM type ``ty`` (scalar, pointer or vector
    ``<N x T>``: its size rounded up to a power of two), at least 8, at most 64."""
    ty = ty.strip()
    if ty.startswith("<") and " x " in ty:
        lanes, elem = ty[1:-1].split(" x ", 1)
        size = int(lanes) * _SCALAR_BYTES.get(elem.strip(), 8)
        align = 8
        while align < size and align < 64:
            align *= 2
        return align
    return 8


def _range_attr(loop: S.For, lty: str, end: int) -> str:
    """The ``range`` attribute of the outlined body's ``%begin`` (``end`` 0: in [min, min +
    extent)) or ``%end`` (``end`` 1: in [min, min + extent]) when ``min`` is a constant >= 0
    (``%begin`` of a signed loop variable with a non-constant extent: in [min, max)); ""
    otherwise. With it LLVM knows the loop variable is not negative, as in the serial loop it
    replaces: a floor division or modulo of an index (``floordiv(i, 33)``) compiles to an
    unsigned division by a magic multiply without the sign fix-ups it needs for an argument of
    unknown sign (a window copy's parallel form ran 1.8x slower than its serial form at one
    thread without it)."""
    from ..tir import expr as E

    var = loop.loop_var
    if not isinstance(loop.min, E.IntImm) or loop.min.value < 0:
        return ""
    top = (1 << (dt.bits_of(var.dtype) - 1)) - 1  # (an unsigned variable: kept below it too)
    lo = int(loop.min.value)
    if isinstance(loop.extent, E.IntImm):
        hi = lo + int(loop.extent.value) + end  # exclusive
    elif dt.is_int(var.dtype) and not end:
        hi = top  # begin < end <= top
    else:
        return ""
    if hi <= lo or hi > top:
        return ""
    return f"range({lty} {lo}, {hi})"


def emit_parallel_for(cg: CodeGenLLVM, loop: S.For) -> None:
    from .llvm_codegen import _FnCtx, _ident

    parent = cg.ctx
    fb = parent.fb
    var = loop.loop_var
    lty = llvm_type(var.dtype)
    captured = [v for v in referenced_vars(loop.body) if id(v) in parent.syms and v is not var]
    cap_vals = [parent.syms[id(v)] for v in captured]

    cg._index_depth += 1
    lo = cg._as_value(loop.min, var.dtype)
    ext = cg._as_value(loop.extent, var.dtype)
    cg._index_depth -= 1

    n = sum(1 for f in cg.mb.functions if f.name.startswith(f"{cg._func_name}_par"))
    wname = f"{cg._func_name}_par{n}"
    iname = f"{wname}_impl"
    # ..., min, extent, err, shard counters, shard count
    fields = [v.ty for v in cap_vals] + [lty, lty, "ptr", "ptr", "i32"]
    sty = "{ " + ", ".join(fields) + " }"

    # ---- caller side -----------------------------------------------------------------------
    # aligned for its widest field: loads/stores of captured vectors assume their ABI alignment
    closure = fb.alloca(sty, max(_abi_align(t) for t in fields), "closure")
    flag = fb.alloca("i32", 4, "par_err")
    fb.emit(f"store i32 0, ptr {flag.ref}, align 4")
    # the shard counters: one area per calling function (its parallel loops run one at a time)
    shards = getattr(fb, "_par_shards", None)
    if shards is None:
        shards = fb.alloca(f"[{MAX_SHARDS * SHARD_BYTES} x i8]", SHARD_BYTES, "par_shards")
        fb._par_shards = shards  # type: ignore[attr-defined]
    gomp = parallel_runtime() == "gomp"
    # the shard count, decided here and passed on (the threads split the loop the same way
    # whatever team they form): min(threads, MAX_SHARDS), their counters zeroed
    team_fn = "omp_get_max_threads" if gomp else "tvmpy_parallel_num_threads"
    cg.mb.declare(team_fn, "i32", [])
    cg.mb.declare("llvm.umin.i32", "i32", ["i32", "i32"])
    cg.mb.declare("llvm.memset.p0.i64", "void", ["ptr", "i8", "i64", "i1"])
    team = fb.value("i32", f"call i32 @{team_fn}()", "team")
    nshards = fb.value("i32", f"call i32 @llvm.umin.i32({team}, i32 {MAX_SHARDS})", "nshards")
    nbytes = fb.value("i64", f"zext {nshards} to i64", "nshards")
    nbytes = fb.value("i64", f"mul i64 {nbytes.ref}, {SHARD_BYTES}", "shard_bytes")
    fb.emit(f"call void @llvm.memset.p0.i64(ptr align {SHARD_BYTES} {shards.ref}, i8 0, "
            f"{nbytes}, i1 false)")
    for k, val in enumerate(cap_vals + [lo, ext, flag, shards, nshards]):
        p = fb.value("ptr", f"getelementptr inbounds {sty}, ptr {closure.ref}, i32 0, i32 {k}",
                     "cl")
        fb.emit(f"store {val}, ptr {p.ref}")
    if gomp:
        cg.mb.declare("GOMP_parallel", "void", ["ptr", "ptr", "i32", "i32"])
        fb.emit(f"call void @GOMP_parallel(ptr @{wname}, ptr {closure.ref}, i32 0, i32 0)")
    else:  # hidden: resolved inside the module's own library, called directly (no PLT)
        cg.mb.declare("tvmpy_parallel_run", "void", ["ptr", "ptr"])
        fb.emit(f"call void @tvmpy_parallel_run(ptr @{wname}, ptr {closure.ref})")
    err = fb.value("i32", f"load i32, ptr {flag.ref}, align 4", "par_err_v")
    ok = fb.value("i1", f"icmp eq {err}, 0", "par_ok")
    cg._check_or_fail(ok, None)

    # ---- implementation: the serial loop over [begin, end) with noalias buffer params -----
    iparams = []
    for k, (v, val) in enumerate(zip(captured, cap_vals)):
        attrs = ""
        if val.ty == "ptr" and id(v) in parent.noalias:
            attrs = f"noalias nocapture align {parent.align.get(id(v), 1)}"
        iparams.append((val.ty, attrs, f"%{_ident(v.name)}.c{k}"))
    iparams += [(lty, _range_attr(loop, lty, 0), "%begin"),
                (lty, _range_attr(loop, lty, 1), "%end")]
    ifb = FunctionBuilder(iname, "i32", iparams, cg.outlined_attrs, linkage="internal")
    cg.mb.functions.append(ifb)
    ictx = _FnCtx(ifb, in_parallel=True)
    for k, v in enumerate(captured):
        ictx.syms[id(v)] = Value(cap_vals[k].ty, iparams[k][2])
        if id(v) in parent.mod_env:
            ictx.mod_env[id(v)] = parent.mod_env[id(v)]
        if id(v) in parent.noalias:
            ictx.noalias.add(id(v))
            ictx.align[id(v)] = parent.align.get(id(v), 1)
    saved_ctx, saved_depth = cg.ctx, cg._index_depth
    cg.ctx, cg._index_depth = ictx, 0
    try:
        count = ifb.value(lty, f"sub nsw {lty} %end, %begin", "count")
        cg.serial_loop(var, Value(lty, "%begin"), count, loop.body,
                       unroll=loop.kind == S.ForKind.UNROLLED)
        if not ifb.terminated:
            ifb.terminate("ret i32 0")
    finally:
        cg.ctx, cg._index_depth = saved_ctx, saved_depth

    # ---- per-thread wrapper ---------------------------------------------------------------
    wfb = FunctionBuilder(wname, "void", [("ptr", "", "%closure")], cg.fn_attrs,
                          linkage="internal")
    cg.mb.functions.append(wfb)
    loaded = []
    for k, ty in enumerate(fields):
        p = wfb.value("ptr", f"getelementptr inbounds {sty}, ptr %closure, i32 0, i32 {k}", "cl")
        loaded.append(wfb.value(ty, f"load {ty}, ptr {p.ref}", "cap"))
    w_lo, w_ext, w_flag, w_shards, w_ns = loaded[-5:]
    _emit_schedule(cg, wfb, iname, loaded[:-5], w_lo, w_ext, w_flag, w_shards, w_ns, lty,
                   dt.is_int(var.dtype), gomp)


def _emit_schedule(cg: CodeGenLLVM, wfb: FunctionBuilder, iname: str, captured: list[Value],
                   lo: Value, ext: Value, flag: Value, shards: Value, ns: Value, lty: str,
                   signed: bool, gomp: bool) -> None:
    """The wrapper's schedule: calls ``iname(captured..., begin, end)`` on chunks of
    ``[lo, lo + ext)`` until none is left.

    With one shard (one thread) the whole loop is one call. Otherwise the loop is cut into
    ``S`` contiguous home shards (``ns``: min(nthreads, MAX_SHARDS), decided by the caller,
    which zeroed their counters), shard ``k`` the ``k``-th of the iterations; the thread of index ``t`` (the caller 0, a pool worker its fixed slot + 1)
    takes chunks of ~extent / (CHUNKS_PER_THREAD * nthreads) from shard ``t mod S``'s counter,
    then from the next shards' (a thread the OS preempts, or one that never joined, has its
    shard done by the others). Every loop thus gives each thread the same share of its
    iterations in every run, so consecutive kernels find the data they read and write in the
    cache of the core that touched it last, instead of moving half of it between the cores'
    caches: a 655360-element parallel copy after itself on the 2-vCPU Zen 4 (KVM) took 34 us
    in two fixed halves against 45 us (median 75) from one shared counter, and the serial copy
    60 us (bench/RESULTS.md, session 8). The chunks keep the dynamic schedule's tolerance of a
    loaded machine."""
    nth_fn = "omp_get_num_threads" if gomp else "tvmpy_parallel_num_threads"
    tid_fn = "omp_get_thread_num" if gomp else "tvmpy_parallel_thread_index"
    cg.mb.declare(nth_fn, "i32", [])
    cg.mb.declare(tid_fn, "i32", [])
    div, rem = ("sdiv", "srem") if signed else ("udiv", "urem")
    lt = "slt" if signed else "ult"
    mn = "smin" if signed else "umin"
    mx = "smax" if signed else "umax"
    cg.mb.declare(f"llvm.{mx}.{lty}", lty, [lty, lty])
    cg.mb.declare(f"llvm.{mn}.{lty}", lty, [lty, lty])

    def widen(v: Value, name: str) -> Value:  # a non-negative i32 as the loop type
        return v if lty == "i32" else wfb.value(lty, f"zext {v} to {lty}", name)

    def call_impl(b: Value, e: Value, then: str) -> None:
        args = ", ".join(str(x) for x in captured + [b, e])
        rc = wfb.value("i32", f"call i32 @{iname}({args})", "rc")
        bad = wfb.value("i1", f"icmp ne {rc}, 0", "bad")
        wfb.cond_br(bad, "fail", then)

    nth = wfb.value("i32", f"call i32 @{nth_fn}()", "nthreads")
    empty = wfb.value("i1", f"icmp {'sle' if signed else 'eq'} {ext}, 0", "empty")
    wfb.cond_br(empty, "done", "some")
    wfb.new_block("some")
    solo = wfb.value("i1", f"icmp ule {ns}, 1", "solo")
    wfb.cond_br(solo, "solo", "team")
    wfb.new_block("solo")
    whole = wfb.value(lty, f"add {lo}, {ext.ref}", "end")
    call_impl(lo, whole, "done")

    wfb.new_block("team")
    tid = wfb.value("i32", f"call i32 @{tid_fn}()", "tid")
    home = wfb.value("i32", f"urem {tid}, {ns.ref}", "home")
    nsl = widen(ns, "nshards")
    q = wfb.value(lty, f"{div} {ext}, {nsl.ref}", "q")
    r = wfb.value(lty, f"{rem} {ext}, {nsl.ref}", "r")
    parts = wfb.value(lty, f"mul {widen(nth, 'nth')}, {CHUNKS_PER_THREAD}", "parts")
    t1 = wfb.value(lty, f"add {ext}, {parts.ref}", "t")
    t2 = wfb.value(lty, f"sub {lty} {t1.ref}, 1", "t")
    c0 = wfb.value(lty, f"{div} {lty} {t2.ref}, {parts.ref}", "chunk")
    chunk = wfb.value(lty, f"call {lty} @llvm.{mx}.{lty}({c0}, {lty} 1)", "chunk")
    wfb.br("shard")

    # shard s = (home + k) mod S, k = 0..S-1: [s*q + min(s, r), + q + (s < r))
    wfb.new_block("shard")
    k = wfb.fresh("k")
    k_next = wfb.fresh("k_next")
    wfb.emit(f"{k} = phi i32 [ 0, %team ], [ {k_next}, %next ]")
    hk = wfb.value("i32", f"add {home}, {k}", "hk")
    wrap = wfb.value("i1", f"icmp uge {hk}, {ns.ref}", "wrap")
    hk2 = wfb.value("i32", f"sub {hk}, {ns.ref}", "hk")
    sh = wfb.value("i32", f"select {wrap}, {hk2}, {hk}", "s")
    shl_ = widen(sh, "s")
    base = wfb.value(lty, f"mul {shl_}, {q.ref}", "sb")
    extra = wfb.value(lty, f"call {lty} @llvm.{mn}.{lty}({shl_}, {r})", "sr")
    sb = wfb.value(lty, f"add {base}, {extra.ref}", "sb")
    has = wfb.value("i1", f"icmp {lt} {shl_}, {r.ref}", "sx")
    one = wfb.value(lty, f"zext {has} to {lty}", "sx")
    qs = wfb.value(lty, f"add {q}, {one.ref}", "ssize")
    se = wfb.value(lty, f"add {sb}, {qs.ref}", "se")
    off = wfb.value("i64", f"mul i64 {SHARD_BYTES}, {wfb.value('i64', f'zext {sh} to i64', 's64').ref}",
                    "off")
    ctr = wfb.value("ptr", f"getelementptr inbounds i8, ptr {shards.ref}, i64 {off.ref}", "ctr")
    wfb.br("grab")

    wfb.new_block("grab")
    got = wfb.value(lty, f"atomicrmw add ptr {ctr.ref}, {chunk} monotonic", "got")
    start = wfb.value(lty, f"add {sb}, {got.ref}", "start")
    more = wfb.value("i1", f"icmp {lt} {start}, {se.ref}", "more")
    wfb.cond_br(more, "work", "next")
    wfb.new_block("work")
    e0 = wfb.value(lty, f"add {start}, {chunk.ref}", "e")
    e1 = wfb.value(lty, f"call {lty} @llvm.{mn}.{lty}({e0}, {se})", "e")
    begin = wfb.value(lty, f"add {lo}, {start.ref}", "begin")
    end = wfb.value(lty, f"add {lo}, {e1.ref}", "end")
    call_impl(begin, end, "grab")

    wfb.new_block("next")
    wfb.emit(f"{k_next} = add i32 {k}, 1")
    again = wfb.value("i1", f"icmp ult i32 {k_next}, {ns.ref}", "again")
    wfb.cond_br(again, "shard", "done")

    wfb.new_block("fail")
    wfb.emit(f"store atomic i32 1, ptr {flag.ref} monotonic, align 4")
    wfb.br("done")
    wfb.new_block("done")
    wfb.terminate("ret void")
