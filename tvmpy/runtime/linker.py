"""Turning object code into a loadable shared library with the system toolchain.

- :func:`compile_c`: C source -> relocatable object bytes (``cc -c -fPIC``);
- :func:`metadata_c_source`: the C file that defines ``__tvmpy_metadata`` (the module's JSON) and a
  weak ``__tvmpy_last_error`` (a codegen may define its own; the linker then keeps that one);
- :func:`link_shared`: objects + metadata -> ``.so`` (``cc -shared``), with extra libraries
  (the token ``"tvmpy_parallel"`` links the parallel runtime of runtime/parallel_pool.py).

The compiler is ``config.get("CC")`` (default ``cc``) for objects of this machine's
architecture. Objects of another architecture (cross-compiled, e.g. ``-mtriple=aarch64-linux-gnu``;
recognised by their ELF ``e_machine``) are linked with a cross compiler: the one passed as ``cc``
(a command, or TVM's ``fcompile(output, objects, options)`` callable), else the default for the
architecture (:func:`cross_compiler`): ``aarch64-linux-gnu-gcc`` (Debian's
gcc-aarch64-linux-gnu) when on PATH, else ``python -m ziglang cc -target aarch64-linux-gnu`` (the
``ziglang`` wheel); for 32-bit ARM (``-mtriple=armv7l-linux-gnueabihf``, ELF machine 40)
``arm-linux-gnueabihf-gcc`` (gcc-arm-linux-gnueabihf), else zig. Errors raise RuntimeError
with the command and the compiler's output.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

from .. import config
from .abi import ERROR_SYMBOL, LOOKUP_SYMBOL, METADATA_SYMBOL

__all__ = ["compiler", "cross_compiler", "elf_arch", "host_arch", "compile_c", "metadata_c_source", "metadata_object", "blob_object",
           "link_shared", "relocatable_link", "DEFAULT_CFLAGS", "check_output_path"]

POOL_TOKEN = "tvmpy_parallel"  # = parallel_pool.LINK_TOKEN (parallel_pool imports this module)

DEFAULT_CFLAGS = ("-O3", "-std=gnu11", "-fPIC", "-fno-strict-aliasing")


#: a compiler: a command (string or argv list), or TVM's ``fcompile(output, objects, options)``
CompilerSpec = Union[str, Sequence[str], Callable[..., Any], None]

# ELF e_machine -> architecture (triple spelling), and the GNU triple of its Linux toolchain
_ELF_ARCHS = {62: "x86_64", 183: "aarch64", 243: "riscv64", 40: "arm"}
_GNU_TRIPLES = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
                "arm": "arm-linux-gnueabihf",
                "riscv64": "riscv64-linux-gnu"}


#: other spellings of an architecture -> the triple's ("x86_64", "aarch64")
ARCH_ALIASES = {"amd64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64",
                **{v: "arm" for v in ("armv7", "armv7l", "armv7a", "armv7hl", "armhf")}}


def triple_arch(triple: str) -> str:
    """The architecture of an LLVM/GNU triple ("aarch64-linux-gnu" -> "aarch64")."""
    arch = triple.split("-", 1)[0].lower()
    return ARCH_ALIASES.get(arch, arch)


_OS_NAMES = ("linux", "none", "windows", "freebsd", "darwin", "android")


def normalize_triple(triple: str) -> str:
    """``arch-os-env`` written without a vendor ("armv7l-linux-gnueabihf", as TVM users write
    it) as LLVM reads it: "armv7l-unknown-linux-gnueabihf". Taken as is, LLVM reads "linux" as
    the vendor and no EABI environment: 32-bit ARM code then calls ``__divsi3`` rather than
    the EABI's ``__aeabi_idiv``, which a library linked by zig does not define."""
    parts = triple.split("-")
    if len(parts) == 3 and parts[1].lower() in _OS_NAMES:
        return "-".join([parts[0], "unknown", *parts[1:]])
    return triple


def host_arch() -> str:
    """This machine's architecture in triple spelling ("x86_64", "aarch64")."""
    m = platform.machine().lower()
    return ARCH_ALIASES.get(m, m)


def elf_arch(obj: bytes) -> str | None:
    """The architecture of an ELF object (from ``e_machine``); None when not ELF or unknown."""
    if len(obj) < 20 or obj[:4] != b"\x7fELF":
        return None
    machine = int.from_bytes(obj[18:20], "little" if obj[5] == 1 else "big")
    return _ELF_ARCHS.get(machine)


def cross_compiler(arch: str) -> list[str]:
    """The default C compiler/linker command for Linux on ``arch``: ``<triple>-gcc`` when on PATH
    (Debian's gcc-<triple> packages), else the ``ziglang`` wheel's ``zig cc -target <triple>``."""
    triple = _GNU_TRIPLES.get(arch)
    if triple is None:
        raise RuntimeError(f"no cross toolchain known for architecture {arch!r}; pass "
                           "export_library(path, fcompile) with a compiler for it")
    gcc = shutil.which(f"{triple}-gcc")
    if gcc is not None:
        return [gcc]
    if importlib.util.find_spec("ziglang") is not None:
        return [sys.executable, "-m", "ziglang", "cc", "-target", triple]
    raise RuntimeError(
        f"no cross compiler for {arch}: install Debian's gcc-{triple.replace('_', '-')} "
        f"(apt-get install gcc-{triple.replace('_', '-')}) or the ziglang wheel (pip install "
        "ziglang), or pass export_library(path, tvmpy.contrib.cc.cross_compiler(...))")


def _gnu_triple_arch(name: str) -> str | None:
    """The architecture of a GNU triple such as "aarch64-linux-gnu" (not a compiler name)."""
    arch = triple_arch(name)
    if "-" not in name or arch not in _GNU_TRIPLES or name.endswith(
            ("gcc", "g++", "cc", "c++", "clang", "clang++")):
        return None
    return arch


def compiler(cc: CompilerSpec = None, arch: str | None = None) -> list[str]:
    """The C compiler command: ``cc`` when given (a command string or argv list, or a GNU
    triple naming its default cross toolchain; a callable ``fcompile`` lends its
    ``cc_command`` attribute if it has one), else ``CC`` (may carry flags,
    e.g. ``CC="gcc -m64"``) for this machine's architecture or :func:`cross_compiler` for
    another ``arch``."""
    if callable(cc):
        cc = getattr(cc, "cc_command", None)
    if cc is not None:
        cmd = shlex.split(cc) if isinstance(cc, str) else [str(c) for c in cc]
        gnu_arch = _gnu_triple_arch(cmd[0]) if len(cmd) == 1 else None
        if gnu_arch is not None and shutil.which(cmd[0]) is None:
            return cross_compiler(gnu_arch)  # a triple ("aarch64-linux-gnu"): its toolchain
    elif arch is not None and arch != host_arch():
        return cross_compiler(arch)
    else:
        cmd = shlex.split(config.get("CC") or "cc")
    if not cmd or shutil.which(cmd[0]) is None:
        raise RuntimeError(f"C compiler {cmd[0] if cmd else '(empty CC)'!r} not found: install one "
                           "(e.g. gcc) or set CC; it is needed to build and export modules, "
                           "not to load them")
    return cmd


def _objects_arch(objects: Sequence[bytes]) -> str | None:
    """The one architecture of ``objects`` (None when unknown); mixing two is an error."""
    archs = {a for a in (elf_arch(o) for o in objects) if a is not None}
    if len(archs) > 1:
        raise RuntimeError(f"cannot link objects of different architectures into one library: "
                           f"{', '.join(sorted(archs))}")
    return archs.pop() if archs else None


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n  {shlex.join(cmd)}\n"
                           f"{proc.stdout}{proc.stderr}")


def compile_c(source: str, cflags: Sequence[str] = DEFAULT_CFLAGS, name: str = "module",
              cc: CompilerSpec = None) -> bytes:
    """Compile C ``source`` to a position-independent object file with ``cc`` (default: ``CC``,
    see :func:`compiler`); return its bytes."""
    with tempfile.TemporaryDirectory(prefix="tvmpy_cc_") as tmp:
        src = os.path.join(tmp, f"{name}.c")
        obj = os.path.join(tmp, f"{name}.o")
        with open(src, "w") as f:
            f.write(source)
        flags = list(cflags)
        if "-fPIC" not in flags and "-fpic" not in flags:
            flags.append("-fPIC")
        if 'extern "C"' in source:  # C++ (as in TVM's tutorials): compile it as such
            flags = ["-x", "c++"] + [f for f in flags if not f.startswith("-std=")]
        _run(compiler(cc) + flags + ["-c", src, "-o", obj], "compiling C source")
        with open(obj, "rb") as fh:
            return fh.read()


def _c_string(text: str) -> str:
    out = []
    for ch in text:
        o = ord(ch)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 32 <= o < 127:
            out.append(ch)
        else:  # json.dumps output is ASCII; keep any other byte exact anyway
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


def metadata_c_source(metadata_json: str, weak: bool = False) -> str:
    """C source defining ``__tvmpy_metadata`` (weak with ``weak``: a saved object file, which a
    later library may link beside its own metadata), a weak ``__tvmpy_last_error`` and a weak
    ``__tvmpy_packed_lookup`` (the PackedFunc registry's entry, set at load time)."""
    chunks = [_c_string(metadata_json[i:i + 200]) for i in range(0, len(metadata_json), 200)]
    body = "\n  ".join(chunks) if chunks else '""'
    attrs = "weak, visibility(\"default\")" if weak else "visibility(\"default\")"
    return (
        "/* generated by tvmpy.runtime.linker: module metadata */\n"
        f"__attribute__(({attrs})) const char {METADATA_SYMBOL}[] =\n  {body};\n"
        f"__attribute__((weak, visibility(\"default\"))) const char* {ERROR_SYMBOL} = 0;\n"
        f"__attribute__((weak, visibility(\"default\"))) void* {LOOKUP_SYMBOL} = 0;\n"
    )


# ELF e_machine -> LLVM triple, for writing the metadata object in-process
_ELF_TRIPLES = {62: "x86_64-unknown-linux-gnu", 183: "aarch64-unknown-linux-gnu",
                40: "armv7-unknown-linux-gnueabihf",
                243: "riscv64-unknown-linux-gnu"}


def _init_llvm_for(llvm: Any, triple: str, asmparser: bool = False) -> None:
    """Initialise llvmlite for ``triple``: the native target when it is this machine's."""
    if triple.split("-", 1)[0] == host_arch():
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        if asmparser:
            llvm.initialize_native_asmparser()
    else:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        if asmparser:
            llvm.initialize_all_asmparsers()


def _ir_string(text: str) -> str:
    return "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else
                   "".join(f"\\{b:02X}" for b in ch.encode("utf-8")) for ch in text)


def metadata_object(metadata_json: str, like: bytes | None, weak: bool = False) -> bytes | None:
    """The metadata as an object file for the machine of the object ``like``, written with
    llvmlite (no compiler process: ~20 ms less per link); None when that is not possible.
    ``weak``: see :func:`metadata_c_source`."""
    if like is None or like[:4] != b"\x7fELF" or like[4] not in (1, 2) or like[5] != 1:
        return None  # only little-endian ELF
    triple = _ELF_TRIPLES.get(int.from_bytes(like[18:20], "little"))
    if triple is None:
        return None
    try:
        import llvmlite.binding as llvm

        _init_llvm_for(llvm, triple)
        data = metadata_json.encode("utf-8")
        ir = (f'target triple = "{triple}"\n'
              f'@{METADATA_SYMBOL} = {"weak " if weak else ""}constant [{len(data) + 1} x i8] '
              f'c"{_ir_string(metadata_json)}\\00", align 1\n'
              f"@{ERROR_SYMBOL} = weak global ptr null, align 8\n"
              f"@{LOOKUP_SYMBOL} = weak global ptr null, align 8\n")
        mod = llvm.parse_assembly(ir)
        tm = llvm.Target.from_triple(triple).create_target_machine(reloc="pic", codemodel="default")
        return tm.emit_object(mod)
    except Exception:  # any llvmlite trouble: fall back to compiling the C version
        return None


def _blob_asm(symbol: str, data_path: str) -> list[str]:
    # "%" rather than "@": "@" starts a comment in 32-bit ARM assembly
    return [".section .rodata.tvmpy_blob,\"a\",%progbits", f".globl {symbol}",
            f".type {symbol},%object", ".balign 64", f"{symbol}:", f'.incbin "{data_path}"',
            f".size {symbol}, .-{symbol}"]


def blob_object(symbol: str, data: bytes, like: bytes | None, tmp: str,
                cc: CompilerSpec = None) -> str:
    """Write an object file defining the read-only, 64-byte-aligned symbol ``symbol`` holding
    ``data`` (e.g. a model's parameters, tens of MB) into the folder ``tmp``; return its path.

    The bytes are pulled in by the assembler's ``.incbin`` (llvmlite's integrated assembler,
    else the C compiler), never spelled out as source text."""
    data_path = os.path.join(tmp, f"{symbol}.bin")
    with open(data_path, "wb") as f:
        f.write(data)
    out = os.path.join(tmp, f"{symbol}.o")
    triple = None
    if like is not None and like[:4] == b"\x7fELF" and like[4] in (1, 2) and like[5] == 1:
        triple = _ELF_TRIPLES.get(int.from_bytes(like[18:20], "little"))
    if triple is not None and '"' not in data_path and "\\" not in data_path:
        try:
            import llvmlite.binding as llvm

            _init_llvm_for(llvm, triple, asmparser=True)  # module asm aborts without a parser
            ir = f'target triple = "{triple}"\n' + "".join(
                f'module asm "{_ir_string(line)}"\n' for line in _blob_asm(symbol, data_path))
            tm = llvm.Target.from_triple(triple).create_target_machine(reloc="pic",
                                                                       codemodel="default")
            with open(out, "wb") as f:
                f.write(tm.emit_object(llvm.parse_assembly(ir)))
            return out
        except Exception:  # fall back to the C compiler's assembler
            pass
    src = os.path.join(tmp, f"{symbol}.c")
    with open(src, "w") as f:
        f.write("__asm__(\n" + "".join(f"  {_c_string(line + chr(10))}\n"
                                       for line in _blob_asm(symbol, data_path)) + ");\n")
    arch = elf_arch(like) if like is not None else None
    _run(compiler(cc, arch) + ["-c", "-fPIC", src, "-o", out], "assembling a data object")
    return out


def _lib_flag(lib: str) -> str:
    if lib.startswith("-") or os.sep in lib or lib.endswith((".so", ".a", ".o")):
        return lib
    return "-l" + lib


def _write_objects(objects: Sequence[bytes], tmp: str, stem: str = "obj") -> list[str]:
    paths = []
    for i, data in enumerate(objects):
        p = os.path.join(tmp, f"{stem}{i}.o")
        with open(p, "wb") as f:
            f.write(data)
        paths.append(p)
    return paths


def _library_inputs(objects: Sequence[bytes], metadata_json: str, tmp: str,
                    link_libs: Sequence[str], blobs: Mapping[str, bytes] | None,
                    cmd: CompilerSpec, weak_metadata: bool = False) -> tuple[list[str], list[str]]:
    """The files a library of ``objects`` is linked from, written into ``tmp`` (the metadata
    first, then the objects, the blobs and the parallel pool's object when ``link_libs`` asks
    for it), and the link flags of the other libraries (``-lm`` last). The compiler ``cmd``
    is looked up only when something must be compiled (the pool, or the metadata without
    llvmlite): a tar of cross-compiled code needs no cross toolchain."""
    paths = _write_objects(objects, tmp)
    like = objects[0] if objects else None
    meta_obj = metadata_object(metadata_json, like, weak_metadata)
    if meta_obj is not None:
        meta = os.path.join(tmp, "tvmpy_metadata.o")
        with open(meta, "wb") as f:
            f.write(meta_obj)
    else:
        meta = os.path.join(tmp, "tvmpy_metadata.c")
        with open(meta, "w") as f:
            f.write(metadata_c_source(metadata_json, weak_metadata))
    for symbol, data in (blobs or {}).items():
        paths.append(blob_object(symbol, data, like, tmp, cmd))
    link_libs = list(link_libs)
    if POOL_TOKEN in link_libs:  # tvmpy's parallel runtime: its object, once per library
        from .parallel_pool import pool_object

        link_libs = [x for x in link_libs if x != POOL_TOKEN] + ["pthread"]
        pool = pool_object(compiler(cmd, _objects_arch(objects)))
        paths += _write_objects([pool], tmp, "tvmpy_parallel_pool")
    libs: list[str] = []
    for lib in link_libs + ["m"]:
        flag = _lib_flag(lib)
        if flag not in libs:
            libs.append(flag)
    return [meta] + paths, libs


def link_shared(objects: Sequence[bytes], metadata_json: str, out_path: str,
                link_libs: Sequence[str] = (), blobs: Mapping[str, bytes] | None = None,
                cc: CompilerSpec = None, options: Sequence[str] = ()) -> None:
    """Link object files (bytes) and the metadata into the shared library ``out_path``.

    ``link_libs``: library names (``"gomp"`` -> ``-lgomp``), paths, or raw linker flags;
    ``"tvmpy_parallel"`` links tvmpy's parallel runtime (runtime/parallel_pool.py) once.
    ``blobs``: ``{symbol: bytes}`` embedded as read-only data symbols (see :func:`blob_object`).
    ``cc``: the compiler that links (see :func:`compiler`; default: ``CC``, or the default cross
    compiler of the objects' architecture); a callable is TVM's ``fcompile(output, objects,
    options)`` and does the final link itself. ``options``: extra flags for the link."""
    arch = _objects_arch(objects)
    cmd = compiler(cc, arch)  # also compiles the pool for the objects' architecture
    fcompile = cc if callable(cc) else None
    with tempfile.TemporaryDirectory(prefix="tvmpy_ld_") as tmp:
        paths, libs = _library_inputs(objects, metadata_json, tmp, link_libs, blobs, cmd)
        meta, paths = paths[0], paths[1:]
        out_path = check_output_path(out_path, "export_library")
        # link next to the target, then rename: a library this process already loaded from
        # ``out_path`` keeps its (old) inode instead of being overwritten under its mapping
        tmp_out = f"{out_path}.{os.getpid()}.tmp"
        try:
            if fcompile is not None:
                fcompile(tmp_out, [meta] + paths, libs + list(options))
                if not os.path.exists(tmp_out):
                    raise RuntimeError(f"export_library: fcompile {fcompile!r} wrote no {tmp_out}")
            else:
                _run(cmd + ["-shared", "-fPIC", "-o", tmp_out, meta] + paths + libs + list(options),
                     "linking shared library")
            os.replace(tmp_out, out_path)
        finally:
            if os.path.exists(tmp_out):
                os.unlink(tmp_out)


def _as_objects(paths: list[str], cmd: list[str]) -> list[str]:
    """``paths`` with the metadata C file (the fallback of :func:`metadata_object`) compiled."""
    out = []
    for p in paths:
        if p.endswith(".c"):
            obj = p[:-2] + ".o"
            _run(cmd + ["-c", "-fPIC", p, "-o", obj], "compiling the module metadata")
            p = obj
        out.append(p)
    return out


def system_libs(link_libs: Sequence[str]) -> list[str]:
    """The shared system libraries (names such as ``"mvec"``, ``"gomp"``) among ``link_libs``,
    as a saved object file records them for ``load_module`` (which loads them first)."""
    names = [x for x in link_libs if x != POOL_TOKEN and _lib_flag(x) == "-l" + x]
    if POOL_TOKEN in link_libs:
        names.append("pthread")
    return [x for i, x in enumerate(names + ["m"]) if x not in names[:i]]


def module_object_files(objects: Sequence[bytes], metadata_json: str, tmp: str,
                        link_libs: Sequence[str] = (), blobs: Mapping[str, bytes] | None = None,
                        cc: CompilerSpec = None) -> list[str]:
    """The object files (paths in ``tmp``) that ``cc -shared`` links into a library
    ``load_module`` loads: ``objects``, the metadata as a *weak* symbol (a library may link
    such files beside its own metadata), the blobs, and the parallel pool when ``link_libs``
    asks for it. What TVM's ``export_library("x.tar")`` packs."""
    paths, _ = _library_inputs(objects, metadata_json, tmp, link_libs, blobs, cc,
                               weak_metadata=True)
    if not any(p.endswith(".c") for p in paths):
        return paths
    return _as_objects(paths, compiler(cc, _objects_arch(objects)))


def relocatable_module(objects: Sequence[bytes], metadata_json: str, out_path: str,
                       link_libs: Sequence[str] = (), blobs: Mapping[str, bytes] | None = None,
                       cc: CompilerSpec = None) -> None:
    """:func:`module_object_files` merged into the one relocatable object ``out_path``
    (``cc -r``): ``Module.save("x.o")``, then ``cc -shared x.o -o x.so`` and ``load_module``."""
    cmd = compiler(cc, _objects_arch(objects))
    with tempfile.TemporaryDirectory(prefix="tvmpy_ld_") as tmp:
        paths = module_object_files(objects, metadata_json, tmp, link_libs, blobs, cmd)
        out = check_output_path(out_path, "save")
        _run(cmd + ["-r", "-nostdlib", "-o", out] + paths, "merging object files")


def relocatable_link(objects: Sequence[bytes], out_path: str, cc: CompilerSpec = None) -> None:
    """Merge object files into one relocatable object (``cc -r``)."""
    cmd = compiler(cc, _objects_arch(objects))
    with tempfile.TemporaryDirectory(prefix="tvmpy_ld_") as tmp:
        paths = _write_objects(objects, tmp)
        _run(cmd + ["-r", "-nostdlib", "-o", os.path.abspath(out_path)] + paths,
             "merging object files")


def check_output_path(path: str, what: str) -> str:
    """The absolute path of a file to write (a library), checked before any work: not empty
    and not a directory, in a directory that exists (as onnxruntime and TVM, folders are never
    created on the caller's behalf: a typo in the path is reported, not silently made)."""
    path = os.fspath(path)
    if not path or os.path.isdir(path):
        raise ValueError(f"{what}: expected the path of the library file to write (e.g. "
                         f"'mod.so'), got {'a directory ' if path else ''}{path!r}")
    out = os.path.abspath(path)
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        existing = parent
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise NotADirectoryError(f"{what}: cannot write {path!r}: {existing!r} is a file, "
                                     "not a directory")
        raise FileNotFoundError(f"{what}: cannot write {path!r}: the directory {parent!r} does "
                                "not exist (create it first)")
    return out
