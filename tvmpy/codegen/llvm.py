"""The LLVM CPU backend: lowered PrimFuncs -> LLVM IR -> optimized object code -> runtime Module.

Public entry points:

- :func:`build` ``(funcs, target, imports=()) -> runtime Module`` (used by ``tvm.build``);
- :func:`emit_llvm_ir` ``(funcs, target, optimized=False) -> str``: the LLVM IR text we generate
  (also what ``Module.get_source("ll")`` returns); ``optimized=True``: after the O3 pipeline;
- :func:`emit_assembly` ``(funcs, target) -> str``: the optimized machine assembly;
- :func:`compile_funcs` ``(funcs, target) -> Compiled(object, ir, link_libs)``: all but linking;
- :func:`compile_ir` ``(ir_text, target) -> bytes``: object code of an LLVM IR module (e.g. a
  hand-written micro-kernel for tensorize, linked through ``build(..., imports=...)``).

Code generation proper lives in llvm_ir.py (text builder), llvm_codegen.py (statements, memory),
llvm_arith.py (arithmetic, casts), llvm_intrinsics.py (tir.op intrinsics, libmvec vector math),
llvm_parallel.py (parallel loops: tvmpy's pool or GOMP), llvm_align.py (alignment facts).
Through llvmlite 0.50 (LLVM 22): never ``llvm.initialize()`` (it raises); a fresh TargetMachine
and LLVM context per compile; the new pass manager at O3 run explicitly; relocation model PIC,
default code model.

Vector math (log, tanh, erf, pow, sin ...; exp on float64) on float32/float64 vectors calls
glibc's libmvec (``_ZGVeN16v_logf`` ...; <= 4 ulp) in the widest variant the target supports;
set ``USE_LIBMVEC = False`` for per-lane libm calls. float32 vector exp (and sigmoid, SiLU,
softmax through it) is inline arithmetic on every target (llvm_vexp.py, <= 2 ulp): a call
would spill a fused loop's live vectors. On AArch64, other vector math is per-lane libm:
glibc's AArch64 libmvec (``_ZGVnN4v_expf`` ...) only exists since glibc 2.38, and neither the
Debian 12 cross libc (/usr/aarch64-linux-gnu, 2.36) nor a typical board's libc has it, so a
library calling it would not load there. Known llvmlite issue: each run of the new pass
manager leaks ~100 KB, so tuning loops that compile thousands of kernels should compile in
worker processes that are recycled.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import config
from ..runtime.linker import compile_c, cross_compiler, normalize_triple
from ..runtime.module import Module
from ..target import Target, as_target
from ..target.cpu_features import isa_features, requirement, target_machine
from ..tir.function import PrimFunc
from .abi import signature
from .extern_link import extern_modules
from .llvm_codegen import CodegenError, CodeGenLLVM
from .llvm_parallel import LINK_LIBS, install_fork_guard, link_libs_for

__all__ = ["build", "emit_llvm_ir", "emit_assembly", "compile_ir", "compile_funcs", "Compiled",
           "CodegenError", "LINK_LIBS", "USE_LIBMVEC", "vector_isa"]

_init_lock = threading.Lock()
_initialized = {"native": False, "all": False}


def _init_llvm(cross: bool) -> Any:
    import llvmlite.binding as llvm

    with _init_lock:
        if not _initialized["native"]:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized["native"] = True
        if cross and not _initialized["all"]:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialized["all"] = True
    return llvm


def _as_target(target: Any) -> Target:
    t = as_target(target)
    if t.kind != "llvm":
        raise ValueError(f"the LLVM backend compiles for target kind 'llvm', got {t}")
    return t


def _cpu_of(target: Target) -> tuple[str, str, str]:
    """(triple, CPU name, feature string) the target machine of ``target`` is created with: a
    named CPU gets only -mattr (LLVM applies the CPU's own features), the host its detected
    features; a triple without -mcpu LLVM's "generic" CPU."""
    llvm = _init_llvm(cross=target.mtriple is not None)
    triple = normalize_triple(target.mtriple) if target.mtriple else llvm.get_default_triple()
    if target.mtriple is not None and target.mcpu is None:
        return triple, "generic", ",".join(target.mattr)
    return triple, target.cpu, target.features


def _target_machine(target: Target):
    triple, cpu, features = _cpu_of(target)
    tm = target_machine(triple, cpu, features, f"target {target}")
    return tm, triple, cpu, features


def _check_funcs(funcs: Sequence[PrimFunc]) -> list[PrimFunc]:
    if isinstance(funcs, PrimFunc):
        funcs = [funcs]
    funcs = list(funcs)
    if not funcs:
        raise ValueError("nothing to build: no functions given")
    for f in funcs:
        if not isinstance(f, PrimFunc):
            raise TypeError(f"the LLVM backend compiles tir.PrimFunc, got {type(f).__name__}")
    return funcs


# glibc's vector math library: set to False to call scalar libm per lane instead
USE_LIBMVEC = True


def vector_isa(triple: str, cpu: str, features: str) -> tuple[int, list[tuple[str, int]]]:
    """(widest vector bits, libmvec variants usable) for an x86-64 Linux target, from the
    instruction-set features LLVM gives the CPU (target/cpu_features.py); others: (128, [])."""
    if not (triple.startswith("x86_64") and "linux" in triple):
        return 128, []
    feats = isa_features(triple, cpu, features)
    avx512, avx2 = "avx512f" in feats, "avx2" in feats
    isas: list[tuple[str, int]] = []
    if avx512:
        isas.append(("e", 512))
    if avx2:
        isas.append(("d", 256))
    isas.append(("b", 128))
    bits = 512 if avx512 else 256 if avx2 else 128
    return bits, (isas if USE_LIBMVEC else [])


def _generate(funcs: list[PrimFunc], tm, triple: str, cpu: str, features: str) -> CodeGenLLVM:
    bits, isas = vector_isa(triple, cpu, features)
    cg = CodeGenLLVM(triple, str(tm.target_data), cpu, features, mvec_isas=isas,
                     vector_bits=bits)
    if triple.startswith("wasm"):
        cg.threads = False  # no threads in a WebAssembly instance: parallel loops run serially
    for f in funcs:
        cg.add_function(f)
    return cg


def _link_libs(cg: CodeGenLLVM) -> list[str]:
    return link_libs_for(cg.mb.decl_sigs) + (["mvec"] if cg.uses_mvec else [])


def _optimize(ir_text: str, tm, imported: Sequence[str] = (), *, mergeable: bool = False) -> Any:
    """Parse, verify, link in ``imported`` LLVM IR modules, run the O3 pipeline."""
    import llvmlite.binding as llvm

    # a fresh context per module: the global one would keep every constant and type of
    # thousands of tuning compiles alive
    ctx = llvm.create_context()
    try:
        mod = llvm.parse_assembly(ir_text, context=ctx)
        mod.verify()
    except RuntimeError as err:
        raise CodegenError(f"generated LLVM IR is invalid (a tvmpy codegen bug): {err}\n"
                           f"{_excerpt(ir_text, str(err))}") from None
    if mergeable:
        _mergeable(mod)
    for k, src in enumerate(imported):
        try:
            other = llvm.parse_assembly(src, context=ctx)
            other.verify()
        except RuntimeError as err:
            raise CodegenError(f"LLVM IR imported with pragma import_llvm (#{k}) is invalid: "
                               f"{err}\n{_excerpt(src, str(err))}") from None
        other.triple = mod.triple
        other.data_layout = mod.data_layout
        _mergeable(other)
        try:
            mod.link_in(other)
        except RuntimeError as err:
            raise CodegenError(f"cannot link the LLVM IR of pragma import_llvm (#{k}): {err}") \
                from None
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)
    return mod


def _mergeable(mod: Any) -> None:
    """Give the external definitions of an imported IR module ``weak_odr`` linkage: two
    ``pragma import_llvm`` blocks (or two objects) defining the same micro-kernel then link to
    one copy instead of failing with "symbol multiply defined" (TVM marks imported functions
    ``available_externally`` + always-inline to the same end). ``weak_odr``, not ``linkonce``:
    the definition stays even where this module does not call it."""
    import llvmlite.binding as llvm

    for g in (*mod.functions, *mod.global_variables):
        if not g.is_declaration and g.linkage == llvm.Linkage.external:
            g.linkage = "weak_odr"


def _excerpt(ir_text: str, err: str, context: int = 12) -> str:
    """The numbered lines of ``ir_text`` around the line an LLVM error message points at."""
    lines = ir_text.splitlines()
    m = re.search(r"<string>:(\d+):", err)
    center = int(m.group(1)) - 1 if m else 0
    lo, hi = (max(0, center - context), center + context + 1) if m else (0, 2 * context)
    return "\n".join(f"{i + 1:5d} {lines[i]}" for i in range(lo, min(hi, len(lines))))


def emit_llvm_ir(funcs: Sequence[PrimFunc], target: Any = None, optimized: bool = False) -> str:
    """LLVM IR text of ``funcs`` (lowered PrimFuncs, IR form 2)."""
    funcs = _check_funcs(funcs)
    tgt = _as_target(target or "llvm")
    tm, triple, cpu, features = _target_machine(tgt)
    cg = _generate(funcs, tm, triple, cpu, features)
    text = cg.text()
    if not optimized:
        return text
    return str(_optimize(text, tm, cg.imported_llvm))


def emit_assembly(funcs: Sequence[PrimFunc], target: Any = None) -> str:
    """Optimized assembly of ``funcs`` for ``target``."""
    funcs = _check_funcs(funcs)
    tgt = _as_target(target or "llvm")
    tm, triple, cpu, features = _target_machine(tgt)
    cg = _generate(funcs, tm, triple, cpu, features)
    return tm.emit_assembly(_optimize(cg.text(), tm, cg.imported_llvm))


def _assembly(ir_text: str, target: Target) -> str:
    """The optimized assembly of LLVM IR text (``Module.get_source("asm")``, made on demand)."""
    tm = _target_machine(target)[0]
    return str(tm.emit_assembly(_optimize(ir_text, tm)))


def compile_ir(ir_text: str, target: Any = None, imported: bool = False) -> bytes:
    """Optimize LLVM IR text and return the object file bytes for ``target``. ``imported``: IR
    of a ``pragma import_llvm`` block, whose definitions become mergeable (:func:`_mergeable`)."""
    tgt = _as_target(target or "llvm")
    tm = _target_machine(tgt)[0]
    return tm.emit_object(_optimize(ir_text, tm, mergeable=imported))


@dataclass
class Compiled:
    """What :func:`compile_funcs` produces: the object file, our LLVM IR text, the libraries the
    object needs at link time (``tvmpy_parallel`` or ``gomp``, ``mvec``) and the objects of
    ``pragma_import_c`` sources (link them too)."""

    object: bytes
    ir: str
    link_libs: list[str]
    extra_objects: list[bytes] = field(default_factory=list)
    machine: tuple[str, str, str] = ("", "", "")  # (triple, cpu, features) compiled for
    declared: list[str] = field(default_factory=list)  # external functions the code calls

    @property
    def cpu(self) -> dict:
        """The metadata's CPU requirement of this code (runtime/host_cpu.py checks it)."""
        return requirement(*self.machine)


def compile_funcs(funcs: Sequence[PrimFunc], target: Any = None) -> Compiled:
    """Object code of ``funcs``: everything :func:`build` needs but linking."""
    funcs = _check_funcs(funcs)
    tgt = _as_target(target or "llvm")
    tm, triple, cpu, features = _target_machine(tgt)
    cg = _generate(funcs, tm, triple, cpu, features)
    text = cg.text()
    if triple.startswith("wasm"):  # a known LLVM hang: see llvm_wasm.py
        from .llvm_wasm import avoid_backend_hangs

        tm, text = avoid_backend_hangs(tm, text, triple, cpu, features)
    if config.get("DEBUG") >= 4:
        print(f"// ---- LLVM IR of {', '.join(f.name for f in funcs)} ----\n{text}")
    obj = tm.emit_object(_optimize(text, tm, cg.imported_llvm))
    extra = []
    if cg.imported_c:  # pragma import_c: compiled for the target's architecture
        cc = cross_compiler(tgt.arch) if tgt.is_foreign else None
        extra = [compile_c(src, name=f"import_c{k}", cc=cc) for k, src in enumerate(cg.imported_c)]
    return Compiled(obj, text, _link_libs(cg), extra, (triple, cpu, features),
                    list(cg.mb.decl_sigs))


def build(funcs: Sequence[PrimFunc], target: Any = None, imports: Sequence[Any] = (),
          load: bool = True) -> Module:
    """Compile lowered PrimFuncs to a runtime Module (an in-memory shared library; with
    ``load=False`` not linked yet: ``export_library`` links it once, straight into its file).

    The objects of registered external kernels the functions call (codegen/extern_link.py)
    and ``imports`` (runtime Modules, e.g. an LLVM micro-kernel built with
    ``Module.from_objects([compile_ir(ll)], [])``) are linked into the same library.

    Code for another architecture (``-mtriple=aarch64-linux-gnu`` on an x86-64 host) is never
    loaded: the Module can only be exported (with a cross compiler) and run on its device. Nor is
    code for a CPU with features this machine lacks (``-mcpu=emeraldrapids`` on an AMD host):
    calling it raises, the exported library runs on such a CPU (the library records them)."""
    funcs = _check_funcs(funcs)
    tgt = _as_target(target or "llvm")
    c = compile_funcs(funcs, tgt)
    if tgt.mtriple and tgt.mtriple.startswith("wasm"):  # a .wasm run by wasmtime: llvm_wasm.py
        from .llvm_wasm import build_wasm

        return build_wasm(funcs, c, imports, {"ll": c.ir}, tgt.mtriple)
    install_fork_guard()
    # what the code may use, checked before it is loaded here or anywhere (runtime/host_cpu.py)
    return Module.from_objects([c.object, *c.extra_objects], [signature(f) for f in funcs],
                               link_libs=c.link_libs, type_key="llvm",
                               sources={"ll": c.ir, "asm": functools.partial(_assembly, c.ir, tgt)},
                               imports=extern_modules(funcs, tgt) + list(imports),
                               load=load and not tgt.is_foreign, cpu=c.cpu)
