"""A plan's calls as one native function: ``run()`` as one foreign call (an AOT-style runner).

The Python loop of ``_run_calls`` costs ~0.3 us per kernel when its objects are in cache, but a
kernel evicts them (its weights and activations stream through L1/L2), so each iteration after
a kernel -- the loop's bytecode, the tuple of arguments, ctypes' conversion of each one -- runs
on cold caches: ~1.5-3 us per kernel measured (Intel Xeon, 1 thread; bench/RESULTS.md, session
7 "run() vs its kernels"), 2-6% of small-kernel CNNs (MobileNetV2/V3, MnasNet, ShuffleNetV2,
EfficientNet-B0). TVM's AOT executor removes that loop at build time; here the loop is removed at
run time instead: for a plan whose prepared calls are all plain C functions taking pointers,
integers and floats (every CPU kernel of a tvmpy library), one LLVM function is generated that
calls every kernel in order with its argument values as constants (the entries' addresses are
fixed for the plan's lifetime) and returns 0, or at the first nonzero return code ``k + 1``
(``k`` the failing call's position: the executor names the node, as the Python loop does).
It is JIT-compiled with llvmlite's MCJIT at ``opt=0`` (straight-line calls: nothing to
optimise; ~5 ms CPU for 100 calls), lazily (``GraphExecutor`` builds it on a plan's third run,
``TVMPY_GRAPH_NATIVE_RUN``, so an executor run once or twice pays nothing), and kept with the
plan (freed with it).

Not covered (the Python loop stays): calls through a Python callable (GPU launches, WebAssembly
functions), argument types other than pointers/integers/floats, and anything llvmlite cannot
JIT on this machine (``native_runner`` returns None)."""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["native_runner", "NativeRunner"]

_INT_TYPES: dict[Any, tuple[str, str]] = {  # ctypes type -> (LLVM type, ABI extension)
    ctypes.c_int8: ("i8", "signext "), ctypes.c_uint8: ("i8", "zeroext "),
    ctypes.c_int16: ("i16", "signext "), ctypes.c_uint16: ("i16", "zeroext "),
    ctypes.c_int32: ("i32", ""), ctypes.c_uint32: ("i32", ""),
    ctypes.c_int64: ("i64", ""), ctypes.c_uint64: ("i64", ""),
}
_CFuncPtr: Any = ctypes.CFUNCTYPE(ctypes.c_int32).__mro__[1]  # ctypes' function-pointer base


class NativeRunner:
    """The JIT-compiled function of one plan's calls; ``runner()`` returns 0 or ``k + 1``."""

    __slots__ = ("_engine", "_context", "_fn", "ncalls")

    def __init__(self, engine: Any, context: Any, address: int, ncalls: int):
        self._engine = engine  # owns the machine code (and the module)
        self._context = context  # the module's LLVM context: outlives the engine
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32)(address)
        self.ncalls = ncalls

    def __call__(self) -> int:
        return int(self._fn())


def _arg_ir(ctype: Any, value: Any) -> str | None:
    """One argument as a typed LLVM constant, or None when it cannot be passed natively."""
    if ctype is ctypes.c_void_p:
        if value is None:
            return "ptr null"
        if isinstance(value, ctypes.c_void_p):
            value = value.value or 0
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return f"ptr inttoptr (i64 {value & 0xFFFFFFFFFFFFFFFF} to ptr)"
    if ctype in _INT_TYPES:
        ty, ext = _INT_TYPES[ctype]
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        bits = int(ty[1:])
        v = value & ((1 << bits) - 1)
        return f"{ty} {ext}{v - (1 << bits) if v >> (bits - 1) else v}"
    if ctype in (ctypes.c_float, ctypes.c_double):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        x = float(value)
        if ctype is ctypes.c_float:  # LLVM writes a float constant as the double it equals
            try:
                x = struct.unpack("<f", struct.pack("<f", x))[0]
            except OverflowError:
                return None
        bits = struct.unpack("<Q", struct.pack("<d", x))[0]
        return f"{'float' if ctype is ctypes.c_float else 'double'} 0x{bits:016X}"
    return None


def plan_ir(calls: Sequence[tuple[Any, tuple]], name: str = "tvmpy_graph_run") -> str | None:
    """The LLVM IR of a function calling ``calls`` in order (see the module docstring), or None
    when one of them cannot be called natively."""
    lines = [f"define i32 @{name}() {{", "entry:"]
    for k, (cfunc_, args) in enumerate(calls):
        cfunc: Any = cfunc_
        if not isinstance(cfunc, _CFuncPtr) or cfunc.restype is not ctypes.c_int32:
            return None
        argtypes = cfunc.argtypes or ()
        if len(argtypes) != len(args):
            return None
        vals = [_arg_ir(t, a) for t, a in zip(argtypes, args)]
        if any(v is None for v in vals):
            return None
        addr = ctypes.cast(cfunc, ctypes.c_void_p).value
        if not addr:
            return None
        lines += [f"  %r{k} = call i32 inttoptr (i64 {addr} to ptr)({', '.join(map(str, vals))})",
                  f"  %c{k} = icmp ne i32 %r{k}, 0",
                  f"  br i1 %c{k}, label %fail{k}, label %ok{k}",
                  f"fail{k}:",
                  f"  ret i32 {k + 1}",
                  f"ok{k}:"]
    lines += ["  ret i32 0", "}", ""]
    return "\n".join(lines)


_llvm_ready: bool | None = None
_lock = threading.Lock()  # one compile at a time (executors of several threads)


def _llvm() -> Any:
    global _llvm_ready
    if _llvm_ready is False:
        return None
    try:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()
        _llvm_ready = True
        return llvm
    except Exception:  # noqa: BLE001  (no native target in this llvmlite: the loop stays)
        _llvm_ready = False
        return None


def native_runner(calls: Sequence[tuple[Any, tuple]]) -> Callable[[], int] | None:
    """A :class:`NativeRunner` of ``calls``, or None when they (or this machine) do not allow
    one."""
    if not calls:
        return None
    ir = plan_ir(calls)
    if ir is None:
        return None
    llvm = _llvm()
    if llvm is None:
        return None
    try:
        with _lock:
            tm = llvm.Target.from_default_triple().create_target_machine(opt=0)
            # a context of its own (as codegen/llvm.py): freed with the runner, not kept in
            # the global one
            ctx = llvm.create_context()
            mod = llvm.parse_assembly(ir, context=ctx)
            mod.triple = tm.triple
            engine = llvm.create_mcjit_compiler(mod, tm)
            engine.finalize_object()
            address = engine.get_function_address("tvmpy_graph_run")
    except Exception:  # noqa: BLE001  (llvmlite refused: the Python loop runs the plan)
        return None
    if not address:
        return None
    return NativeRunner(engine, ctx, address, len(calls))
