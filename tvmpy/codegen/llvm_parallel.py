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
well as in the caller. Parallel loops nested in a parallel body run serially. A serial loop
whose whole body is one parallel loop (a recurrence's time loop around its step's jobs) is one
launch whose threads wait for each other between steps (:func:`emit_stepped_parallel_for`).

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
from typing import TYPE_CHECKING, Any

from .. import config
from ..ir import dtype as dt
from ..tir import stmt as S
from ..tir.functor import referenced_vars
from .llvm_ir import FunctionBuilder, Value, llvm_type

if TYPE_CHECKING:
    from .llvm_codegen import CodeGenLLVM

__all__ = ["emit_parallel_for", "emit_stepped_parallel_for", "stepped_inner", "LINK_LIBS", "install_fork_guard", "parallel_runtime",
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
    nshards = _zeroed_shards(cg, fb, shards, gomp)
    _launch(cg, fb, closure, sty, cap_vals + [lo, ext, flag, shards, nshards], wname, flag,
            gomp)

    # ---- implementation: the serial loop over [begin, end) with noalias buffer params -----
    _outline(cg, iname, captured, cap_vals, [], var, loop)

    # ---- per-thread wrapper ---------------------------------------------------------------
    wfb, loaded = _wrapper(cg, wname, sty, fields)
    w_lo, w_ext, w_flag, w_shards, w_ns = loaded[-5:]
    _emit_schedule(cg, wfb, iname, loaded[:-5], w_lo, w_ext, w_flag, w_shards, w_ns, lty,
                   dt.is_int(var.dtype), gomp)


def _zeroed_shards(cg: CodeGenLLVM, fb: FunctionBuilder, shards: Value, gomp: bool) -> Value:
    """The shard count, decided by the caller and passed on (the threads split the loop the
    same way whatever team they form): min(threads, MAX_SHARDS), their counters zeroed."""
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
    return nshards


def _launch(cg: CodeGenLLVM, fb: FunctionBuilder, closure: Value, sty: str, vals: list[Value],
            wname: str, flag: Value, gomp: bool) -> None:
    """Store ``vals`` into the closure, run ``wname`` on the team, fail if a job failed."""
    for k, val in enumerate(vals):
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


def _outline(cg: CodeGenLLVM, iname: str, captured: list, cap_vals: list[Value],
             leading: list[tuple[Any, str, str]], var: Any, loop: S.For) -> None:
    """The outlined body ``iname(captured..., leading..., begin, end)``: the serial loop of
    ``loop``'s body over ``[begin, end)``, buffer params noalias as in the caller; ``leading``
    are (variable, LLVM type, param name) bound before the job bounds (a step index)."""
    from .llvm_codegen import _FnCtx, _ident

    parent = cg.ctx
    lty = llvm_type(var.dtype)
    iparams = []
    for k, (v, val) in enumerate(zip(captured, cap_vals)):
        attrs = ""
        if val.ty == "ptr" and id(v) in parent.noalias:
            attrs = f"noalias nocapture align {parent.align.get(id(v), 1)}"
        iparams.append((val.ty, attrs, f"%{_ident(v.name)}.c{k}"))
    iparams += [(ty, "", name) for _, ty, name in leading]
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
    for v, ty, name in leading:
        ictx.syms[id(v)] = Value(ty, name)
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


def _wrapper(cg: CodeGenLLVM, wname: str, sty: str,
             fields: list[str]) -> tuple[FunctionBuilder, list[Value]]:
    """The per-thread wrapper ``wname(closure)`` and the closure's fields loaded in it."""
    wfb = FunctionBuilder(wname, "void", [("ptr", "", "%closure")], cg.fn_attrs,
                          linkage="internal")
    cg.mb.functions.append(wfb)
    loaded = []
    for k, ty in enumerate(fields):
        p = wfb.value("ptr", f"getelementptr inbounds {sty}, ptr %closure, i32 0, i32 {k}", "cl")
        loaded.append(wfb.value(ty, f"load {ty}, ptr {p.ref}", "cap"))
    return wfb, loaded


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


def stepped_inner(loop: S.For) -> S.For | None:
    """The parallel loop of ``loop`` when ``loop`` is a serial loop whose whole body is one
    parallel loop with bounds free of the serial variable (a recurrence's time loop around its
    step's jobs): :func:`emit_stepped_parallel_for` runs such a pair as ONE parallel launch."""
    inner = loop.body
    if loop.kind != S.ForKind.SERIAL or not isinstance(inner, S.For) \
            or inner.kind != S.ForKind.PARALLEL:
        return None
    outer = loop.loop_var
    for e in (inner.min, inner.extent):
        if any(v is outer for v in referenced_vars(e)):
            return None
    return inner


def emit_stepped_parallel_for(cg: CodeGenLLVM, loop: S.For, inner: S.For) -> None:
    """``for s in serial: for j in parallel: body(s, j)`` as one launch (one wake-up of the
    pool for all the steps, instead of one a step).

    Every thread of the team walks the steps. At step ``s`` it waits until the step counter
    ``done`` (jobs finished, over all steps) reaches ``s * extent`` (every job of the earlier
    steps finished: an acquire that sees their writes), then claims chunks of step ``s`` from
    the home shards (its own first, as :func:`_emit_schedule`): a shard's counter runs over
    ``[s * size, (s + 1) * size)`` at step ``s``, advanced by compare-and-swap so that it stops
    at the step's end, where the next step's range begins. Each finished chunk is added to
    ``done`` (release). A thread that joins late starts at the step ``done`` names; no thread
    ever waits for a job nobody has claimed, so a worker the OS has not scheduled holds no one
    up (the pool's rule). A failing body sets the error flag, which the waits watch. A team of
    one runs the steps in order, one call each. On the 2-vCPU Zen 4 (KVM) a launch a step cost
    1.5-3 us of a 7-8 us LSTM step at two threads (bench/RESULTS.md, session 9)."""
    parent = cg.ctx
    fb = parent.fb
    ovar, var = loop.loop_var, inner.loop_var
    oty, lty = llvm_type(ovar.dtype), llvm_type(var.dtype)
    captured = [v for v in referenced_vars(inner.body)
                if id(v) in parent.syms and v is not var and v is not ovar]
    cap_vals = [parent.syms[id(v)] for v in captured]

    cg._index_depth += 1
    lo = cg._as_value(inner.min, var.dtype)
    ext = cg._as_value(inner.extent, var.dtype)
    slo = cg._as_value(loop.min, ovar.dtype)
    sext = cg._as_value(loop.extent, ovar.dtype)
    cg._index_depth -= 1
    lo64 = fb.value("i64", f"sext {lo} to i64" if lty != "i64" else f"add {lo}, 0", "lo")
    ext64 = fb.value("i64", f"sext {ext} to i64" if lty != "i64" else f"add {ext}, 0", "ext")
    slo64 = fb.value("i64", f"sext {slo} to i64" if oty != "i64" else f"add {slo}, 0", "slo")
    sext64 = fb.value("i64", f"sext {sext} to i64" if oty != "i64" else f"add {sext}, 0",
                      "sext")

    n = sum(1 for f in cg.mb.functions if f.name.startswith(f"{cg._func_name}_par"))
    wname = f"{cg._func_name}_par{n}"
    iname = f"{wname}_impl"
    # ..., job min, job extent, step min, steps, err, shard counters, shard count, done
    fields = [v.ty for v in cap_vals] + ["i64", "i64", "i64", "i64", "ptr", "ptr", "i32", "ptr"]
    sty = "{ " + ", ".join(fields) + " }"

    # ---- caller side -----------------------------------------------------------------------
    closure = fb.alloca(sty, max(_abi_align(t) for t in fields), "closure")
    flag = fb.alloca("i32", 4, "par_err")
    fb.emit(f"store i32 0, ptr {flag.ref}, align 4")
    shards = fb.alloca(f"[{MAX_SHARDS * SHARD_BYTES} x i8]", SHARD_BYTES, "step_shards")
    done = fb.alloca(f"[{SHARD_BYTES} x i8]", SHARD_BYTES, "step_done")
    fb.emit(f"store i64 0, ptr {done.ref}, align 8")
    gomp = parallel_runtime() == "gomp"
    nshards = _zeroed_shards(cg, fb, shards, gomp)
    _launch(cg, fb, closure, sty,
            cap_vals + [lo64, ext64, slo64, sext64, flag, shards, nshards, done], wname, flag,
            gomp)

    # ---- implementation: one step's jobs [begin, end) -----------------------------------------
    _outline(cg, iname, captured, cap_vals, [(ovar, oty, "%step")], var, inner)

    # ---- per-thread wrapper ---------------------------------------------------------------
    wfb, loaded = _wrapper(cg, wname, sty, fields)
    w_lo, w_ext, w_slo, w_steps, w_flag, w_shards, w_ns, w_done = loaded[-8:]
    _emit_stepped_schedule(cg, wfb, iname, loaded[:-8], w_lo, w_ext, w_slo, w_steps, w_flag,
                           w_shards, w_ns, w_done, lty, oty, gomp)


def _emit_stepped_schedule(cg: CodeGenLLVM, wfb: FunctionBuilder, iname: str,
                           captured: list[Value], lo: Value, ext: Value, slo: Value,
                           nsteps: Value, flag: Value, shards: Value, ns: Value, done: Value,
                           lty: str, oty: str, gomp: bool) -> None:
    """The stepped wrapper's schedule (see :func:`emit_stepped_parallel_for`); every count in
    i64, the impl called with the step and the job bounds in their own types."""
    tid_fn = "omp_get_thread_num" if gomp else "tvmpy_parallel_thread_index"
    cg.mb.declare(tid_fn, "i32", [])
    cg.mb.declare("sched_yield", "i32", [])
    for f in ("smin", "smax"):
        cg.mb.declare(f"llvm.{f}.i64", "i64", ["i64", "i64"])

    def narrow(v: Value, ty: str, name: str) -> Value:
        return v if ty == "i64" else wfb.value(ty, f"trunc {v} to {ty}", name)

    def call_impl(step: Value, b: Value, e: Value, then: str) -> None:
        args = ", ".join(str(x) for x in captured + [narrow(step, oty, "st"),
                                                    narrow(b, lty, "b"), narrow(e, lty, "e")])
        rc = wfb.value("i32", f"call i32 @{iname}({args})", "rc")
        bad = wfb.value("i1", f"icmp ne {rc}, 0", "bad")
        wfb.cond_br(bad, "fail", then)

    empty0 = wfb.value("i1", f"icmp sle {ext}, 0", "empty")
    empty1 = wfb.value("i1", f"icmp sle {nsteps}, 0", "nosteps")
    empty = wfb.value("i1", f"or i1 {empty0.ref}, {empty1.ref}", "empty")
    wfb.cond_br(empty, "done", "some")
    wfb.new_block("some")
    hi = wfb.value("i64", f"add {lo}, {ext.ref}", "hi")
    solo = wfb.value("i1", f"icmp ule {ns}, 1", "solo")
    wfb.cond_br(solo, "solo", "team")

    # a team of one: the steps in order, one call each
    wfb.new_block("solo")
    wfb.br("solo_head")
    wfb.new_block("solo_head")
    si = wfb.fresh("si")
    si_next = wfb.fresh("si_next")
    wfb.emit(f"{si} = phi i64 [ 0, %solo ], [ {si_next}, %solo_next ]")
    sv = wfb.value("i64", f"add {slo}, {si}", "step")
    call_impl(sv, lo, hi, "solo_next")
    wfb.new_block("solo_next")
    wfb.emit(f"{si_next} = add i64 {si}, 1")
    more_s = wfb.value("i1", f"icmp slt i64 {si_next}, {nsteps.ref}", "more")
    wfb.cond_br(more_s, "solo_head", "done")

    wfb.new_block("team")
    tid = wfb.value("i32", f"call i32 @{tid_fn}()", "tid")
    home = wfb.value("i32", f"urem {tid}, {ns.ref}", "home")
    nsl = wfb.value("i64", f"zext {ns} to i64", "nshards")
    q = wfb.value("i64", f"sdiv {ext}, {nsl.ref}", "q")
    r = wfb.value("i64", f"srem {ext}, {nsl.ref}", "r")
    team_fn = "omp_get_num_threads" if gomp else "tvmpy_parallel_num_threads"
    cg.mb.declare(team_fn, "i32", [])
    nthr = wfb.value("i32", f"call i32 @{team_fn}()", "nthreads")
    nthr64 = wfb.value("i64", f"zext {nthr} to i64", "nthreads")
    parts = wfb.value("i64", f"mul {nthr64}, {CHUNKS_PER_THREAD}", "parts")
    t1 = wfb.value("i64", f"add {ext}, {parts.ref}", "t")
    t2 = wfb.value("i64", f"sub i64 {t1.ref}, 1", "t")
    c0 = wfb.value("i64", f"sdiv i64 {t2.ref}, {parts.ref}", "chunk")
    chunk = wfb.value("i64", f"call i64 @llvm.smax.i64({c0}, i64 1)", "chunk")
    d0 = wfb.value("i64", f"load atomic i64, ptr {done.ref} acquire, align 8", "d0")
    st0 = wfb.value("i64", f"sdiv {d0}, {ext.ref}", "st0")
    start_any = wfb.value("i1", f"icmp slt {st0}, {nsteps.ref}", "go")
    wfb.cond_br(start_any, "step", "done")

    # step st: wait for every job of the steps before it, then claim this step's chunks
    wfb.new_block("step")
    st = wfb.fresh("st")
    st_next = wfb.fresh("st_next")
    wfb.emit(f"{st} = phi i64 [ {st0.ref}, %team ], [ {st_next}, %step_end ]")
    need = wfb.value("i64", f"mul i64 {st}, {ext.ref}", "need")
    wfb.br("wait")
    wfb.new_block("wait")
    spins = wfb.fresh("spins")
    spins_next = wfb.fresh("spins_next")
    wfb.emit(f"{spins} = phi i32 [ 0, %step ], [ {spins_next}, %wait_more ], "
             "[ 0, %wait_yield ]")
    dv = wfb.value("i64", f"load atomic i64, ptr {done.ref} acquire, align 8", "dv")
    ready = wfb.value("i1", f"icmp sge {dv}, {need.ref}", "ready")
    wfb.cond_br(ready, "claim", "wait_check")
    wfb.new_block("wait_check")
    fv = wfb.value("i32", f"load atomic i32, ptr {flag.ref} monotonic, align 4", "fv")
    failed = wfb.value("i1", f"icmp ne {fv}, 0", "failed")
    wfb.cond_br(failed, "done", "wait_more")
    wfb.new_block("wait_more")
    wfb.emit(f"{spins_next} = add i32 {spins}, 1")
    polite = wfb.value("i1", f"icmp ugt i32 {spins_next}, 2000", "polite")
    wfb.cond_br(polite, "wait_yield", "wait")
    wfb.new_block("wait_yield")
    wfb.emit("call i32 @sched_yield()")
    wfb.br("wait")

    # shard sh = (home + k) mod S: jobs [sb, sb + size), its counter in [st*size, (st+1)*size)
    wfb.new_block("claim")
    wfb.br("shard")
    wfb.new_block("shard")
    k = wfb.fresh("k")
    k_next = wfb.fresh("k_next")
    wfb.emit(f"{k} = phi i32 [ 0, %claim ], [ {k_next}, %next ]")
    hk = wfb.value("i32", f"add {home}, {k}", "hk")
    wrap = wfb.value("i1", f"icmp uge {hk}, {ns.ref}", "wrap")
    hk2 = wfb.value("i32", f"sub {hk}, {ns.ref}", "hk")
    sh = wfb.value("i32", f"select {wrap}, {hk2}, {hk}", "s")
    sh64 = wfb.value("i64", f"zext {sh} to i64", "s")
    base = wfb.value("i64", f"mul {sh64}, {q.ref}", "sb")
    extra = wfb.value("i64", f"call i64 @llvm.smin.i64({sh64}, {r})", "sr")
    sb = wfb.value("i64", f"add {base}, {extra.ref}", "sb")
    has = wfb.value("i1", f"icmp slt {sh64}, {r.ref}", "sx")
    one = wfb.value("i64", f"zext {has} to i64", "sx")
    size = wfb.value("i64", f"add {q}, {one.ref}", "ssize")
    cbase = wfb.value("i64", f"mul i64 {st}, {size.ref}", "cb")
    cend = wfb.value("i64", f"add {cbase}, {size.ref}", "ce")
    off = wfb.value("i64", f"mul i64 {SHARD_BYTES}, {sh64.ref}", "off")
    ctr = wfb.value("ptr", f"getelementptr inbounds i8, ptr {shards.ref}, i64 {off.ref}", "ctr")
    wfb.br("grab")

    wfb.new_block("grab")
    got = wfb.value("i64", f"load atomic i64, ptr {ctr.ref} monotonic, align 8", "got")
    more = wfb.value("i1", f"icmp slt {got}, {cend.ref}", "more")
    wfb.cond_br(more, "try", "next")
    wfb.new_block("try")
    want = wfb.value("i64", f"add {got}, {chunk.ref}", "want")
    want2 = wfb.value("i64", f"call i64 @llvm.smin.i64({want}, {cend})", "want")
    pair = wfb.value("{ i64, i1 }", f"cmpxchg ptr {ctr.ref}, {got}, {want2} monotonic monotonic",
                     "cas")
    won = wfb.value("i1", f"extractvalue {{ i64, i1 }} {pair.ref}, 1", "won")
    wfb.cond_br(won, "work", "grab")
    wfb.new_block("work")
    rel = wfb.value("i64", f"sub {got}, {cbase.ref}", "rel")
    b0 = wfb.value("i64", f"add {sb}, {rel.ref}", "b")
    begin = wfb.value("i64", f"add {lo}, {b0.ref}", "begin")
    cnt = wfb.value("i64", f"sub {want2}, {got.ref}", "cnt")
    end = wfb.value("i64", f"add {begin}, {cnt.ref}", "end")
    sv2 = wfb.value("i64", f"add {slo}, {st}", "step")
    call_impl(sv2, begin, end, "finished")
    wfb.new_block("finished")
    wfb.emit(f"atomicrmw add ptr {done.ref}, {cnt} release, align 8")
    wfb.br("grab")

    wfb.new_block("next")
    wfb.emit(f"{k_next} = add i32 {k}, 1")
    again = wfb.value("i1", f"icmp ult i32 {k_next}, {ns.ref}", "again")
    wfb.cond_br(again, "shard", "step_end")
    wfb.new_block("step_end")
    wfb.emit(f"{st_next} = add i64 {st}, 1")
    go_on = wfb.value("i1", f"icmp slt i64 {st_next}, {nsteps.ref}", "go")
    wfb.cond_br(go_on, "step", "done")

    wfb.new_block("fail")
    wfb.emit(f"store atomic i32 1, ptr {flag.ref} monotonic, align 4")
    wfb.br("done")
    wfb.new_block("done")
    wfb.terminate("ret void")
