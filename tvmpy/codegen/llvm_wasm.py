"""The LLVM backend for WebAssembly (``llvm -mtriple=wasm32-unknown-unknown [-mattr=+simd128]``).

llvmlite's LLVM emits a wasm32 object file; :func:`link_wasm` links it with wasi-libc (malloc,
memcpy, libm's expf/tanhf ...) into a WebAssembly *reactor* module with ``zig cc -target
wasm32-wasi`` from the ``ziglang`` wheel (a registry package: no emscripten SDK to install; the
C library is built once into zig's cache, ~20 s). The module exports the kernels, ``memory``,
``aligned_alloc``/``free`` and ``__tvmpy_last_error``, and imports nothing (the parts of
wasi-libc we use make no system calls). ``TVMPY_WASM_CC`` overrides the command (e.g.
``"zig cc"`` or a clang with a wasi sysroot).

Code generation differences (set in llvm.py ``_generate``): no threads in a plain WebAssembly
instance, so parallel loops run serially; size_t is 32-bit; no libmvec (vector math calls libm
per lane). Runtime side: runtime/wasm.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from ..runtime.abi import ERROR_SYMBOL
from ..runtime.wasm import WasmModule
from .abi import signature

__all__ = ["is_wasm_triple", "wasm_cc", "link_wasm", "build_wasm", "avoid_backend_hangs"]

_HALF_FCMP = re.compile(r"fcmp \w+ (<\d+ x )?half ")


def is_wasm_triple(triple: str | None) -> bool:
    return bool(triple) and str(triple).startswith(("wasm32", "wasm64"))


def wasm_cc() -> list[str]:
    """The linker driver for wasm32-wasi: ``$TVMPY_WASM_CC`` or the ziglang wheel's ``zig cc``."""
    env = os.environ.get("TVMPY_WASM_CC")
    if env:
        return shlex.split(env)
    try:
        import ziglang  # noqa: F401  (only to check that the wheel is installed)
    except ImportError:
        raise RuntimeError("linking WebAssembly modules needs zig: pip install ziglang "
                           "(or set TVMPY_WASM_CC to a wasm32-wasi C compiler driver)") from None
    return [sys.executable, "-m", "ziglang", "cc"]


def avoid_backend_hangs(tm: Any, text: str, triple: str, cpu: str, features: str) -> tuple[Any, str]:
    """(target machine, IR text) to compile ``text`` with. LLVM 22's WebAssembly backend never
    finishes compiling a vector ``fcmp`` of ``half`` with simd128 (isnan, compares, casts to
    bool of float16; LLVM's loop vectorizer makes one from scalar code, and InstCombine folds
    a float compare of extended halves back): such a module is compiled without simd128."""
    if "+simd128" not in features or not _HALF_FCMP.search(text):
        return tm, text
    import llvmlite.binding as llvm

    scalar = ",".join("-simd128" if f == "+simd128" else f for f in features.split(","))
    tm = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=scalar, opt=3, reloc="pic", codemodel="default")
    return tm, text.replace('"target-features"="' + features + '"',
                            '"target-features"="' + scalar + '"')


def _error_object() -> bytes:
    """A wasm32 object defining the weak ``__tvmpy_last_error`` (NULL)."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    ir = (f'target triple = "wasm32-unknown-wasi"\n'
          f"@{ERROR_SYMBOL} = weak global ptr null, align 4\n")
    tm = llvm.Target.from_triple("wasm32-unknown-wasi").create_target_machine(reloc="pic")
    return tm.emit_object(llvm.parse_assembly(ir))


def link_wasm(objects: Sequence[bytes], exports: Sequence[str], out_path: str,
              options: Sequence[str] = (), cc: Sequence[str] | None = None) -> None:
    """Link wasm32 objects with wasi-libc into a reactor module exporting ``exports``, the
    allocator, the memory and ``__tvmpy_last_error`` (a weak NULL definition is linked in);
    ``options``: more compiler-driver flags;
    ``cc``: the driver's argv (default :func:`wasm_cc`)."""
    with tempfile.TemporaryDirectory(prefix="tvmpy_wasm_") as tmp:
        paths = []
        for i, data in enumerate([*objects, _error_object()]):
            p = os.path.join(tmp, f"obj{i}.o")
            with open(p, "wb") as f:
                f.write(data)
            paths.append(p)
        names = list(exports) + ["aligned_alloc", "malloc", "free", ERROR_SYMBOL]
        cmd = (list(cc) if cc else wasm_cc()) + ["-target", "wasm32-wasi", "-O2", "-mexec-model=reactor", "-s",
                           "-o", out_path] + paths + ["-lm"] + [f"-Wl,--export={n}" for n in names] \
            + list(options)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"linking the WebAssembly module timed out:\n  {shlex.join(cmd)}") \
                from None
        if proc.returncode != 0:
            raise RuntimeError(f"linking the WebAssembly module failed (exit {proc.returncode}):"
                               f"\n  {shlex.join(cmd)}\n{proc.stdout}{proc.stderr}")
        # wasm-ld turns a call whose signature does not match the definition into a trap with
        # only a warning: that is a codegen bug, refuse it here
        if "signature mismatch" in proc.stderr:
            raise RuntimeError(f"linking the WebAssembly module: {proc.stderr.strip()}")


def build_wasm(funcs: Sequence[Any], compiled: Any, imports: Sequence[Any] = (),
               sources: dict | None = None, triple: str = "wasm32") -> WasmModule:
    """Link the object of ``compiled`` (llvm.py ``compile_funcs``) into a :class:`WasmModule`."""
    if not triple.startswith("wasm32"):
        raise ValueError(f"WebAssembly target {triple!r}: only wasm32 is supported (wasmtime "
                         "and browsers run 32-bit memories); use -mtriple=wasm32-unknown-unknown")
    from .extern_link import extern_symbols

    if compiled.extra_objects or list(imports) or extern_symbols(funcs):
        raise ValueError("WebAssembly target: external C/object kernels (pragma_import_c, "
                         "registered extern objects, imported modules) are host code and cannot "
                         "be linked into a .wasm; use schedules without them")
    sigs = [signature(f) for f in funcs]
    meta = {"version": 1, "entry": sigs[0].name if sigs else "",
            "functions": [s.to_json() for s in sigs]}
    with tempfile.TemporaryDirectory(prefix="tvmpy_wasm_") as tmp:
        out = os.path.join(tmp, "module.wasm")
        link_wasm([compiled.object], [s.name for s in sigs], out)
        with open(out, "rb") as fh:
            binary = fh.read()
    return WasmModule(binary, meta, objects=[compiled.object], sources=sources)
