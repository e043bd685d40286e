"""A plan's calls run by one native function: ``run()`` as one foreign call (an AOT-style runner).

The Python loop of ``_run_calls`` costs ~0.3 us per kernel when its objects are in cache, but a
kernel evicts them (its weights and activations stream through L1/L2), so each iteration after
a kernel -- the loop's bytecode, the tuple of arguments, ctypes' conversion of each one -- runs
on cold caches: 1.5-3 us per kernel measured (Intel Xeon, 1 thread; bench/RESULTS.md, session 7
"run() vs the sum of its kernels"), 2-8% of small-kernel CNNs (MobileNetV2/V3, MnasNet,
ShuffleNetV2, EfficientNet-B0). TVM's AOT executor removes that loop at build time; here it is
removed at load time instead, without compiling anything per graph:

- one function, ``tvmpy_graph_run(table, ncalls)``, is JIT-compiled once per process (llvmlite
  MCJIT, LLVM's global context, never freed): it walks a table of calls -- per call the
  function's address, its argument count ``n`` and ``n`` 64-bit argument words -- and calls each
  function with its ``n`` words as integer arguments (a switch on ``n``, up to
  :data:`MAX_ARGS`), returning 0, or at the first nonzero return code ``k + 1`` (``k`` the
  failing call's position: the executor names the node, as the Python loop does);
- a plan's table (:func:`native_runner`) holds its prepared calls: the entries' addresses (fixed
  for the plan's lifetime), shape variables and integer scalars, each widened to 64 bits with the
  sign or zero extension of its C type. Passing a pointer or a narrower integer as a 64-bit
  integer argument is the same machine call on the 64-bit ABIs this is enabled for (x86-64
  System V and AArch64 AAPCS64 on Linux: every such argument takes one integer register or one
  8-byte stack slot, the callee reads its low bits, already extended as C requires).

Not covered (the Python loop stays): calls through a Python callable (GPU launches, WebAssembly
functions), float scalar arguments (they travel in floating-point registers), more than
:data:`MAX_ARGS` arguments, other platforms, and anything llvmlite cannot JIT here
(``native_runner`` returns None)."""

from __future__ import annotations

import ctypes
import platform
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["native_runner", "NativeRunner", "MAX_ARGS"]

MAX_ARGS = 64  # arguments of one call the native runner passes (more: the Python loop)

_INT_BITS: dict[Any, tuple[int, bool]] = {  # ctypes integer type -> (bits, signed)
    ctypes.c_int8: (8, True), ctypes.c_uint8: (8, False), ctypes.c_int16: (16, True),
    ctypes.c_uint16: (16, False), ctypes.c_int32: (32, True), ctypes.c_uint32: (32, False),
    ctypes.c_int64: (64, True), ctypes.c_uint64: (64, False),
}
_CFuncPtr: Any = ctypes.CFUNCTYPE(ctypes.c_int32).__mro__[1]  # ctypes' function-pointer base
_RUN_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64)


class NativeRunner:
    """One plan's table of calls and the process's table walker; ``runner()`` returns 0 or
    ``k + 1`` (call ``k`` returned nonzero)."""

    __slots__ = ("_fn", "_table", "_ptr", "ncalls")

    def __init__(self, fn: Any, table: Any, ncalls: int):
        self._fn, self._table, self.ncalls = fn, table, ncalls
        self._ptr = ctypes.addressof(table)

    def __call__(self) -> int:
        return int(self._fn(self._ptr, self.ncalls))


def arg_word(ctype: Any, value: Any) -> int | None:
    """One argument as the signed 64-bit word passed for it, or None when it cannot be passed
    natively (a float, a bool, a value of another kind)."""
    if ctype is ctypes.c_void_p:
        if value is None:
            return 0
        if isinstance(value, ctypes.c_void_p):
            value = value.value or 0
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
            return None
        return value - (1 << 64) if value >= 1 << 63 else value
    spec = _INT_BITS.get(ctype)
    if spec is None or isinstance(value, bool) or not isinstance(value, int):
        return None
    bits, signed = spec
    v = value & ((1 << bits) - 1)  # the C type's value (ctypes truncates the same way)
    if signed and v >> (bits - 1):
        v -= 1 << bits  # sign-extended
    return v - (1 << 64) if v >= 1 << 63 else v


def table_words(calls: Sequence[tuple[Any, tuple]]) -> list[int] | None:
    """The table of ``calls`` (see the module docstring), or None when one of them cannot be
    made natively."""
    words: list[int] = []
    for cfunc, args in calls:
        if not isinstance(cfunc, _CFuncPtr) or getattr(cfunc, "restype", None) is not ctypes.c_int32:
            return None
        argtypes = getattr(cfunc, "argtypes", None) or ()
        if len(argtypes) != len(args) or len(args) > MAX_ARGS:
            return None
        addr = ctypes.cast(cfunc, ctypes.c_void_p).value
        if not addr:
            return None
        ws = [arg_word(t, a) for t, a in zip(argtypes, args)]
        if any(w is None for w in ws):
            return None
        words += [addr - (1 << 64) if addr >= 1 << 63 else addr, len(ws)]
        words += ws  # type: ignore[arg-type]
    return words


def walker_ir(max_args: int = MAX_ARGS) -> str:
    """The LLVM IR of ``tvmpy_graph_run(ptr table, i64 ncalls) -> i32``."""
    cases = " ".join(f"i64 {n}, label %c{n}" for n in range(max_args + 1))
    out = ["define i32 @tvmpy_graph_run(ptr %table, i64 %ncalls) {",
           "entry:", "  br label %loop",
           "loop:",
           "  %k = phi i64 [ 0, %entry ], [ %k1, %next ]",
           "  %pos = phi i64 [ 0, %entry ], [ %pos1, %next ]",
           "  %done = icmp sge i64 %k, %ncalls",
           "  br i1 %done, label %finish, label %body",
           "body:",
           "  %fpa = getelementptr i64, ptr %table, i64 %pos",
           "  %fpw = load i64, ptr %fpa",
           "  %fp = inttoptr i64 %fpw to ptr",
           "  %na = getelementptr i64, ptr %fpa, i64 1",
           "  %n = load i64, ptr %na",
           "  %args = getelementptr i64, ptr %fpa, i64 2",
           f"  switch i64 %n, label %bad [ {cases} ]"]
    phis = []
    for n in range(max_args + 1):
        out.append(f"c{n}:")
        vals = []
        for j in range(n):
            out.append(f"  %p{n}_{j} = getelementptr i64, ptr %args, i64 {j}")
            out.append(f"  %a{n}_{j} = load i64, ptr %p{n}_{j}")
            vals.append(f"i64 %a{n}_{j}")
        out.append(f"  %r{n} = call i32 %fp({', '.join(vals)})")
        out.append("  br label %check")
        phis.append(f"[ %r{n}, %c{n} ]")
    out += ["check:",
            f"  %rc = phi i32 {', '.join(phis)}",
            "  %failed = icmp ne i32 %rc, 0",
            "  br i1 %failed, label %fail, label %next",
            "fail:",
            "  %kk = add i64 %k, 1",
            "  %kk32 = trunc i64 %kk to i32",
            "  ret i32 %kk32",
            "next:",
            "  %k1 = add i64 %k, 1",
            "  %pos2 = add i64 %pos, 2",
            "  %pos1 = add i64 %pos2, %n",
            "  br label %loop",
            "bad:",
            "  ret i32 -1",
            "finish:",
            "  ret i32 0",
            "}", ""]
    return "\n".join(out)


_lock = threading.Lock()
_walker: list[Any] = []  # [function, its engine] once compiled; [None] when it cannot be here


def supported() -> bool:
    """Whether this platform passes pointers and integers alike (see the module docstring)."""
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64",
                                                                      "aarch64", "arm64")


def _walker_fn() -> Any:
    with _lock:
        if not _walker:
            fn = None
            if supported():
                try:
                    import llvmlite.binding as llvm

                    llvm.initialize_native_target()
                    llvm.initialize_native_asmprinter()
                    llvm.initialize_native_asmparser()
                    tm = llvm.Target.from_default_triple().create_target_machine(opt=0)
                    mod = llvm.parse_assembly(walker_ir())  # the global context: kept
                    mod.triple = tm.triple
                    engine = llvm.create_mcjit_compiler(mod, tm)
                    engine.finalize_object()
                    address = engine.get_function_address("tvmpy_graph_run")
                    if address:
                        fn = _RUN_TYPE(address)
                        _walker.append(engine)  # the machine code's owner: kept for good
                except Exception:  # noqa: BLE001  (llvmlite refused: the Python loop stays)
                    fn = None
            _walker.insert(0, fn)
        return _walker[0]


def native_runner(calls: Sequence[tuple[Any, tuple]]) -> Callable[[], int] | None:
    """A :class:`NativeRunner` of ``calls``, or None when they (or this platform) do not allow
    one."""
    if not calls:
        return None
    words = table_words(calls)
    if words is None:
        return None
    fn = _walker_fn()
    if fn is None:
        return None
    return NativeRunner(fn, (ctypes.c_int64 * len(words))(*words), len(calls))
