"""Runtime modules: compiled code in a shared library, callable from Python.

For code generators (the API the LLVM and C backends call)
-----------------------------------------------------------
``Module.from_objects(objects, funcs, entry, link_libs=(), imports=(), type_key="llvm",
sources=None) -> Module``

- ``objects``: relocatable, position-independent (``-fPIC`` / ``reloc="pic"``) ELF object files as
  bytes. Each exported function follows runtime/abi.py: ``int32_t name(params..., shape vars...)``.
  Helper symbols (outlined parallel bodies, constants) must have internal linkage (LLVM
  ``internal``/``private``, C ``static``) so that several modules link into one library.
- ``funcs``: the ``abi.Signature`` of each exported function (codegen/abi.py ``signature``
  computes it for a PrimFunc) or its JSON dict, or the metadata JSON string/dict of
  ``abi.metadata_json``.
- ``__tvmpy_last_error``: the runtime links a weak definition (``const char* = 0``). Codegens
  should only *declare* it (LLVM ``@__tvmpy_last_error = external global ptr``; C
  ``extern const char* __tvmpy_last_error;``); a strong definition also works for one module,
  but two strong ones collide when modules are linked together.
- ``link_libs``: extra libraries: ``"tvmpy_parallel"`` (tvmpy's parallel runtime, linked once per
  library), ``"gomp"`` (-> ``-lgomp``, for ``GOMP_parallel``), paths to ``.so``/``.a``/``.o``,
  or raw flags. ``-lm`` is always linked.
- ``imports``: Modules whose objects are linked into the same library (e.g. an external C
  micro-kernel for tensorize, built with ``Module.from_c_source(src, funcs=[])``); their
  symbols resolve at link time, their functions stay reachable through ``imported_modules``.
- ``sources``: ``{"ll": llvm_ir_text, "asm": ..., "c": c_text}`` for ``get_source(fmt)``; a value
  may be a function returning the text, called on first request (assembly: made on demand).
- ``load=False``: do not link and load now (code cross-compiled for another machine): the module
  can only be exported (``export_library`` links with ``CC``, e.g. a cross compiler).

``Module.from_c_source(source, funcs, entry, cflags=linker.DEFAULT_CFLAGS, ...)`` compiles C with
``config.get("CC")`` first (the C backend; pass e.g. ``-march=native``, ``-fopenmp``).

The runtime guarantees to the generated code: every buffer pointer is 64-byte aligned, points to
writable memory (read-only arrays are passed as scratch copies) and has the layout of the buffer's
signature (compact row-major unless the signature has strides); empty buffers get a valid
pointer; shapes match the signature; shape vars are appended after the parameters.

For users
---------
``m(*args)`` calls the entry function (arguments: NDArrays, numpy arrays, scalars; see
runtime/function.py); ``m.entry_name``; ``m.get_function(name)`` / ``m[name]``;
``m.imported_modules``; ``m.import_module(other)``; ``m.get_source(fmt)``; ``m.type_key``;
``m.export_library(path, fcompile=None)`` (one .so with all code, imports and metadata;
``fcompile``: TVM's compiler argument, a callable ``fcompile(output, objects, options)`` such as
``tvmpy.contrib.cc.cross_compiler("aarch64-linux-gnu")`` or a compiler command; a module built
for another architecture is linked with that architecture's default cross compiler when
``fcompile`` is left out, see runtime/linker.py; a ``.tar`` path writes TVM's tar of object
files instead, which needs no linker of the target); ``m.save(path, fmt="")`` (``.o``: one
relocatable object with the metadata, so ``cc -shared x.o`` makes a loadable library; or
``.ll``/``.s``/``.c`` source; a GPU build's ``.o`` is its host part, its device code is saved
from ``m.imported_modules[0]`` as ``.cl`` / ``.ptx`` / ``.cu``, see runtime/gpu_module.py);
``m.time_evaluator(name, dev, number, repeat, min_repeat_ms)``;
``load_module(path)`` loads an exported library in any process (ctypes + numpy only; a
``.tar`` or ``.o`` is first linked with this machine's C compiler into ``path + ".so"``, as TVM
does; ``.cl`` / ``.ptx`` / ``.cu``: saved device code, to ``import_module`` into its host module).
A library built in this process is unloaded once nothing uses it any more (no Module, Function
or graph executor of it is left); loaded ones stay for the life of the process.
"""

from __future__ import annotations

import _ctypes
import ctypes
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

from .abi import ERROR_SYMBOL, METADATA_SYMBOL, Signature
from .device import Device, cpu
from .elf import ElfError, check_loadable_size, read_dynamic_symbol
from .evaluator import BenchmarkResult, ProfileResult, time_evaluator
from .fork_guard import install_fork_guard
from .function import Function
from .host_cpu import unsupported
from .linker import (
    DEFAULT_CFLAGS,
    check_output_path,
    compile_c,
    elf_arch,
    host_arch,
    link_shared,
    module_object_files,
    relocatable_module,
    system_libs,
)
from .packed_func import bind_library
from .parallel_pool import STOP_SYMBOL

__all__ = ["Module", "load_module", "ProfileResult"]

#: a module's attached source: the text, or a function that makes it on first request
Source = Union[str, Callable[[], str]]


def _metadata_of(funcs: Any, entry: str | None) -> dict:
    if isinstance(funcs, Mapping):
        meta = dict(funcs)
    elif isinstance(funcs, str):
        meta = json.loads(funcs)
    else:
        sigs = []
        for f in funcs:
            if isinstance(f, Signature):
                sigs.append(f.to_json())
            elif isinstance(f, Mapping):
                sigs.append(dict(f))
            else:  # a PrimFunc: its code generator describes it (codegen/abi.py ``signature``)
                raise TypeError(f"funcs: expected abi.Signature or dict, got {type(f).__name__}")
        meta = {"version": 1, "entry": entry or (sigs[0]["name"] if sigs else ""), "functions": sigs}
    if entry is not None:
        meta["entry"] = entry
    meta.setdefault("version", 1)
    meta.setdefault("entry", "")
    meta.setdefault("functions", [])
    return meta


def _dlopen(path: str) -> ctypes.CDLL:
    check_loadable_size(path)
    try:
        return ctypes.CDLL(os.path.abspath(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        raise RuntimeError(f"cannot load shared library {path}: {e}") from None


def _unload(handle: int, stop: int | None) -> None:
    if stop:  # the library's thread pool: no worker may run its code once it is unmapped
        ctypes.CFUNCTYPE(None)(stop)()
    _ctypes.dlclose(handle)


def _unload_when_unused(lib: ctypes.CDLL) -> None:
    """dlclose ``lib`` when the last Python object referencing it goes away (without this,
    every module built in a process stays mapped: ~30 KB per relay.build).

    Everything that reaches into the library holds the CDLL: each ctypes function pointer
    (hence every Function and every graph executor), the Modules sharing it, the parameter
    views of a loaded factory. Its parallel pool, if linked, is stopped first (its workers are
    joined). Not at interpreter exit: other threads may still be running its code then."""
    _pin_threaded_dependencies()
    try:
        stop = ctypes.cast(lib[STOP_SYMBOL], ctypes.c_void_p).value
    except AttributeError:  # no parallel loop: no pool linked
        stop = None
    weakref.finalize(lib, _unload, lib._handle, stop).atexit = False


# Shared libraries that keep threads of their own parked in their code (libgomp's OpenMP team,
# used by the C backend): the library that pulled one in must not take it along when it is
# unloaded, or those threads wake up in unmapped memory (found by the fuzzer: a segfault right
# after a C-backend module was garbage collected).
_THREADED_DEPENDENCIES = ("libgomp.so.1",)
_pinned: dict[str, ctypes.CDLL] = {}


def _pin_threaded_dependencies() -> None:
    for name in _THREADED_DEPENDENCIES:
        if name in _pinned:
            continue
        try:  # RTLD_NOLOAD: only if some library already loaded it; the handle is never closed
            _pinned[name] = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
        except OSError:
            pass


class Module:
    """Compiled functions in one loaded shared library, plus imported modules."""

    #: device code (a GPU build's kernels): left out of ``save("x.o")``, which is host code
    _device_code = False

    def __init__(self, lib: ctypes.CDLL | None, metadata: dict, type_key: str = "llvm",
                 objects: Sequence[bytes] = (), link_libs: Sequence[str] = (),
                 sources: Mapping[str, Source] | None = None, lib_path: str | None = None,
                 device: Device | None = None):
        self._lib = lib
        self._meta = metadata
        self.type_key = type_key
        self._objects = list(objects)
        self._link_libs = list(link_libs)
        self._sources: dict[str, Source] = dict(sources or {})
        self._lib_path = lib_path  # set for modules loaded from a file: exported by copying it
        self.device = device or cpu(0)
        self.imported_modules: list[Module] = []
        self._sigs = {s["name"]: s for s in metadata.get("functions", [])}
        self._funcs: dict[str, Function] = {}
        self._err: ctypes.c_char_p | None = None
        self._refused: str | None = None  # why the code cannot be loaded on this machine
        if lib is not None:
            try:
                self._err = ctypes.c_char_p.in_dll(lib, ERROR_SYMBOL)
            except ValueError:
                self._err = None
            bind_library(lib)  # tir.call_packed in its code reaches the registry

    # ---- construction (code generators) -------------------------------------------------------
    @classmethod
    def from_objects(cls, objects: Sequence[bytes], funcs: Any, entry: str | None = None,
                     link_libs: Sequence[str] = (), imports: Sequence[Module] = (),
                     type_key: str = "llvm", sources: Mapping[str, Source] | None = None,
                     load: bool = True, cpu: Mapping[str, Any] | None = None) -> Module:
        """Link ``objects`` (+ the objects of ``imports``) with the metadata of ``funcs`` into a
        shared library, load it and return the Module (see the module docstring). ``cpu``: what
        the code was compiled for (``{"triple", "name", "features"}``, recorded in the metadata);
        code needing features this machine lacks is not loaded (its functions raise when
        called), only exported."""
        objects = [bytes(o) for o in objects]
        for o in objects:
            if o[:4] != b"\x7fELF":
                raise ValueError("Module.from_objects: expected ELF relocatable object files")
        meta = _metadata_of(funcs, entry)
        if cpu is not None:
            meta["cpu"] = dict(cpu)
        mod = cls(None, meta, type_key, objects, link_libs, sources)
        for m in imports:
            mod.imported_modules.append(m)
        all_objs, all_libs, all_meta = mod._collect()
        foreign = mod.foreign_arch()
        if foreign is not None and load:
            raise RuntimeError(f"cannot load code built for {foreign} on this {host_arch()} "
                               "machine; build it with load=False and export_library it")
        if not load:
            return mod
        refused = unsupported(all_meta)
        if refused is not None:  # never run code this CPU may not execute (SIGILL)
            mod._refuse(refused)
            return mod
        with tempfile.TemporaryDirectory(prefix="tvmpy_mod_") as tmp:
            path = os.path.join(tmp, "module.so")
            link_shared(all_objs, json.dumps(all_meta, sort_keys=True), path, all_libs)
            lib = _dlopen(path)  # the mapping outlives the file, which is removed with tmp
        _unload_when_unused(lib)
        mod._attach(lib)
        for m in mod.imported_modules:
            m._share_lib(lib)
        return mod

    @classmethod
    def from_c_source(cls, source: str, funcs: Any, entry: str | None = None,
                      cflags: Sequence[str] | None = None, link_libs: Sequence[str] = (),
                      imports: Sequence[Module] = (), type_key: str = "c") -> Module:
        """Compile C ``source`` with the system compiler, then :meth:`from_objects`."""
        obj = compile_c(source, DEFAULT_CFLAGS if cflags is None else cflags)
        return cls.from_objects([obj], funcs, entry, link_libs, imports, type_key, {"c": source})

    def _refuse(self, reason: str) -> None:
        """Mark this module and its imports as not loadable on this machine, for ``reason``."""
        self._refused = reason
        for m in self.imported_modules:
            m._refuse(reason)

    def _attach(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        self._funcs.clear()
        try:
            self._err = ctypes.c_char_p.in_dll(lib, ERROR_SYMBOL)
        except ValueError:
            self._err = None
        bind_library(lib)

    def _share_lib(self, lib: ctypes.CDLL) -> None:
        """An import whose code was linked into its importer's library: resolve there too when
        it has no library of its own."""
        if self._lib is None:
            self._attach(lib)
            for m in self.imported_modules:
                m._share_lib(lib)

    def _collect(self, device_code: bool = True) -> tuple[list[bytes], list[str], dict]:
        """Objects, libraries and metadata of this module and all its imports (each once;
        without ``device_code``, the imported device modules left out)."""
        objs: list[bytes] = []
        libs: list[str] = []
        seen: set[int] = set()

        def visit(m: Module) -> dict:
            seen.add(id(m))
            if not m._objects and m._sigs:
                raise RuntimeError(
                    f"module ({m.type_key}) loaded from {m._lib_path or 'a library'} has no object "
                    "code to link into another library; export the module it was built from")
            objs.extend(m._objects)
            libs.extend(x for x in m._link_libs if x not in libs)
            meta = {k: v for k, v in m._meta.items() if k != "imports"}
            meta["type_key"] = m.type_key
            meta["imports"] = [visit(i) for i in m.imported_modules if id(i) not in seen
                               and (device_code or not i._device_code)]
            return meta

        meta = visit(self)
        names: set[str] = set()

        def check(meta: dict) -> None:
            for s in meta["functions"]:
                if s["name"] in names:
                    raise ValueError(f"function {s['name']!r} is defined by two modules linked "
                                     "together; give the functions distinct names")
                names.add(s["name"])
            for i in meta["imports"]:
                check(i)

        check(meta)
        return objs, libs, meta

    # ---- functions ----------------------------------------------------------------------------
    @property
    def entry_name(self) -> str:
        return self._meta.get("entry", "")

    def function_names(self) -> list[str]:
        return list(self._sigs)

    def _find(self, name: str) -> Function | None:
        f = self._funcs.get(name)
        if f is not None:
            return f
        sig = self._sigs.get(name)
        if sig is not None:
            if self._lib is None:
                if self._refused is not None:
                    raise RuntimeError(f"function {name} cannot run on this machine: "
                                       f"{self._refused}")
                arch = self.foreign_arch()
                if arch is not None:
                    raise RuntimeError(
                        f"function {name} was built for {arch}, this machine is {host_arch()}: "
                        "export_library it with a cross compiler (tvmpy.contrib.cc."
                        "cross_compiler) and run it on the device / over RPC")
                raise RuntimeError(f"function {name} is in a module that was not loaded (built "
                                   "with load=False): export_library it "
                                   "and load it where it can run")
            try:
                cfunc = self._lib[name]  # a fresh function object: its argtypes are ours
            except AttributeError:
                raise RuntimeError(f"function {name} is in the module metadata but not in its "
                                   "library") from None
            f = Function(cfunc, sig, self, self.device)
            self._funcs[name] = f
            return f
        for m in self.imported_modules:
            f = m._find(name)
            if f is not None:
                return f
        return None

    def get_function(self, name: str, query_imports: bool = True) -> Function:
        """The function ``name`` of this module (or, with ``query_imports``, of an import)."""
        f = self._find(name) if query_imports else (
            self._find(name) if name in self._sigs else None)
        if f is None:
            known = ", ".join(self._all_names()) or "none"
            raise AttributeError(f"module has no function {name!r}; functions: {known}")
        return f

    def _all_names(self) -> list[str]:
        out = list(self._sigs)
        for m in self.imported_modules:
            out.extend(m._all_names())
        return out

    def __getitem__(self, name: str) -> Function:
        return self.get_function(name)

    def __contains__(self, name: str) -> bool:
        return name in self._all_names()

    def __call__(self, *args: Any) -> None:
        if not self.entry_name:
            raise RuntimeError("module has no entry function; use get_function(name)")
        self.get_function(self.entry_name)(*args)

    def _last_error(self) -> str | None:
        """The message of the last failed call, consumed (reset to NULL) so that a later failure
        that sets none is not reported with a stale one."""
        if self._err is None or not self._err.value:
            return None
        msg = self._err.value.decode("utf-8", "replace")
        self._err.value = None
        return msg

    def foreign_arch(self) -> str | None:
        """The architecture of this module's object code (or its imports') when it is not this
        machine's (code cross-compiled for e.g. aarch64: export only); None otherwise."""
        mods, seen = [self], set()
        while mods:
            m = mods.pop()
            if id(m) in seen:
                continue
            seen.add(id(m))
            for o in m._objects:
                arch = elf_arch(o)
                if arch is not None and arch != host_arch():
                    return arch
            mods.extend(m.imported_modules)
        return None

    # ---- imports, sources ---------------------------------------------------------------------
    def import_module(self, mod: Module) -> None:
        """Add ``mod`` to the imports: its functions become reachable through this module and
        ``export_library`` links its code into the same library."""
        if not isinstance(mod, Module):
            raise TypeError(f"import_module expects a Module, got {type(mod).__name__}")
        if mod is self:
            raise ValueError("a module cannot import itself")
        self.imported_modules.append(mod)

    def get_source(self, fmt: str = "") -> str:
        """Source attached by the code generator: ``"ll"``/``"llvm"`` (LLVM IR), ``"asm"``,
        ``"c"``; the default is the first one attached."""
        if not self._sources:
            raise ValueError(f"this {self.type_key} module carries no source")
        if fmt in ("", None):
            key = next(iter(self._sources))
        else:
            key = {"llvm": "ll", "s": "asm", "cc": "c"}.get(fmt, fmt)
        if key not in self._sources:
            raise ValueError(f"no {fmt!r} source in this module; available: "
                             + ", ".join(self._sources))
        src = self._sources[key]
        if callable(src):  # made on demand (assembly): the code generator left a function
            src = self._sources[key] = src()
        return src

    # ---- export -------------------------------------------------------------------------------
    def export_library(self, file_name: str, fcompile: Any = None, addons: Any = None,
                       workspace_dir: str | None = None, **kwargs: Any) -> None:
        """Write one shared library with the code of this module and all its imports and the
        metadata ``load_module`` reads. ``fcompile``: TVM's ``fcompile(output, objects,
        options)`` callable or a compiler command (default: ``CC``, or the default cross
        compiler of the module's architecture); ``options=[...]``: extra link flags; ``cc=``
        is accepted as a synonym of ``fcompile``."""
        file_name = os.fspath(file_name)
        fcompile = fcompile if fcompile is not None else kwargs.pop("cc", None)
        options = list(kwargs.pop("options", None) or [])
        check_output_path(file_name, "export_library")
        if file_name.endswith(".tar") or getattr(fcompile, "output_format", None) == "tar":
            self._export_tar(file_name, fcompile)
            return
        if not self._objects and self._lib_path is not None and self._self_contained():
            if os.path.abspath(file_name) != os.path.abspath(self._lib_path):
                tmp = f"{os.path.abspath(file_name)}.{os.getpid()}.tmp"
                shutil.copyfile(self._lib_path, tmp)
                os.replace(tmp, file_name)
            return
        objs, libs, meta = self._collect()
        blobs = self._export_blobs(meta)
        link_shared(objs, json.dumps(meta, sort_keys=True), file_name, libs, blobs=blobs,
                    cc=fcompile, options=options)

    def _portable_parts(self, device_code: bool = True
                        ) -> tuple[list[bytes], list[str], dict, dict[str, bytes]]:
        """Objects, link libraries, metadata (naming the system libraries ``load_module`` loads
        first) and blobs of a saved object file or tar: no link step has added the libraries."""
        objs, libs, meta = self._collect(device_code)  # raises for a loaded library's functions
        meta["system_libs"] = system_libs(libs)
        return objs, libs, meta, self._export_blobs(meta)

    def _export_tar(self, file_name: str, fcompile: Any = None) -> None:
        """TVM's ``export_library("x.tar")``: a tar of object files that ``load_module`` (or
        ``cc -shared *.o``) links into a library; needs no linker of the target's architecture
        when llvmlite writes the metadata object."""
        import tarfile

        objs, libs, meta, blobs = self._portable_parts()
        cc = getattr(fcompile, "cc_command", None) if callable(fcompile) else fcompile
        with tempfile.TemporaryDirectory(prefix="tvmpy_tar_") as tmp:
            paths = module_object_files(objs, json.dumps(meta, sort_keys=True), tmp, libs, blobs,
                                        cc)
            out = os.path.abspath(file_name)
            part = f"{out}.{os.getpid()}.tmp"
            with tarfile.open(part, "w") as tar:
                for k, p in enumerate(paths):
                    tar.add(p, arcname=f"lib{k}.o")
            os.replace(part, out)

    def _export_blobs(self, meta: dict) -> dict[str, bytes]:
        """Read-only data a subclass embeds in its exported library (``{symbol: bytes}``:
        parameters, bytecode), recording where in ``meta``; none here."""
        return {}

    def _self_contained(self) -> bool:
        """All code of this module and its imports is in the one file it was loaded from."""
        return all(m._lib_path == self._lib_path and not m._objects and m._self_contained()
                   for m in self.imported_modules)

    def save(self, file_name: str, fmt: str = "") -> None:
        """TVM's ``Module.save``: the object code (``.o``: one relocatable object with the code of
        this module and its host imports, the parallel runtime it calls and the metadata, so
        that ``cc -shared x.o -o x.so`` makes a library ``load_module`` loads; as in TVM, a GPU
        build's device code is not in it: ``imported_modules[0].save("x.cl")``) or the
        attached source (``.ll``, ``.s``, ``.c``). ``fmt`` overrides the file name's extension."""
        file_name = os.fspath(file_name)
        ext = (fmt or os.path.splitext(file_name)[1]).lstrip(".")
        if ext in ("o", "obj"):
            objs, libs, meta, blobs = self._portable_parts(device_code=False)
            relocatable_module(objs, json.dumps(meta, sort_keys=True), file_name, libs, blobs)
            return
        if not ext:
            raise ValueError(f"save: cannot tell the format of {file_name!r}: give it an "
                             "extension (.o, .ll, .s, .c) or pass fmt=")
        text = self.get_source({"s": "asm"}.get(ext, ext))
        with open(file_name, "w") as f:
            f.write(text)

    # ---- timing -------------------------------------------------------------------------------
    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
                       f_preproc: str = "") -> Callable[..., BenchmarkResult]:
        """A callable ``(*args) -> BenchmarkResult`` timing ``func_name`` (seconds per call);
        see runtime/evaluator.py."""
        return time_evaluator(self.get_function(func_name), dev, number, repeat, min_repeat_ms,
                              cooldown_interval_ms, f_preproc)

    def __repr__(self) -> str:
        return (f"Module(type_key={self.type_key!r}, entry={self.entry_name!r}, "
                f"functions={self.function_names()}, imports={len(self.imported_modules)})")


#: type_key -> ``loader(meta, path) -> Module`` for imported modules that carry their code in the
#: metadata (a higher layer registers them, as ``FILE_LOADERS``: tvmpy.vta's "vta" modules)
META_LOADERS: dict[str, Callable[[dict, str], Module]] = {}


def _module_from_meta(lib: ctypes.CDLL, meta: dict, path: str) -> Module:
    loader = META_LOADERS.get(str(meta.get("type_key")))
    if loader is not None:
        return loader(meta, path)
    if meta.get("type_key") == "GraphExecutorFactory":  # relay.build's output, exported
        from .graph_executor import GraphExecutorFactory

        return GraphExecutorFactory._from_loaded(lib, meta, path)
    if meta.get("type_key") == "VMExecutable":  # relay.vm.compile's output, exported
        from .vm_library import VMExecutableModule

        return VMExecutableModule._from_loaded(lib, meta, path)
    if meta.get("type_key") == "gpu_host":  # an OpenCL/CUDA build: plan + device source
        from .gpu_module import GPUHostModule

        return GPUHostModule._from_meta(meta, path)
    mod = Module(lib, meta, meta.get("type_key", "library"), lib_path=path)
    for sub in meta.get("imports", []):
        mod.imported_modules.append(_module_from_meta(lib, sub, path))
    return mod


# path -> identity of the file when this process first loaded it from that path
_LOADED: dict[str, tuple[int, int, int, int]] = {}


def _dlopen_current(path: str) -> ctypes.CDLL:
    """dlopen ``path``; if the file was replaced since this process loaded it, load a private
    copy: the dynamic loader matches by name and would return the old library."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    first = _LOADED.setdefault(path, key)
    if first == key:
        return _dlopen(path)
    with tempfile.TemporaryDirectory(prefix="tvmpy_load_") as tmp:
        copy = os.path.join(tmp, os.path.basename(path))
        shutil.copyfile(path, copy)
        return _dlopen(copy)


def _read_metadata(path: str) -> tuple[dict, bytes]:
    """The metadata of the library at ``path`` (and its raw bytes), read from the file without
    loading it: dlopen would run the library's constructors even when it is then refused."""
    try:
        raw = read_dynamic_symbol(path, METADATA_SYMBOL)
    except ElfError as err:
        raise RuntimeError(f"cannot load shared library {path}: {err}") from None
    if raw is None:
        raise ValueError(f"{path} is not a tvmpy module (no {METADATA_SYMBOL} symbol)")
    raw = raw.split(b"\0", 1)[0]
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path}: its {METADATA_SYMBOL} is not tvmpy metadata ({err})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: its {METADATA_SYMBOL} is not tvmpy metadata (not an object)")
    if meta.get("version", 1) != 1:
        raise ValueError(f"{path}: module metadata version {meta.get('version')} is not supported "
                         "by this tvmpy (reads version 1)")
    return meta, raw


def _load_system_libs(names: Sequence[str]) -> None:
    """Load the system libraries a library linked from saved object files needs (``cc -shared
    x.o`` adds no ``-lmvec``): globally, so that its undefined symbols resolve at dlopen."""
    import ctypes.util

    for name in names:
        if not isinstance(name, str) or name in _pinned:
            continue
        found = ctypes.util.find_library(name)
        try:
            _pinned[name] = ctypes.CDLL(found or f"lib{name}.so", mode=os.RTLD_GLOBAL)
        except OSError:
            pass  # dlopen of the library then names the symbol that is missing


def _link_portable(path: str, is_object: bool) -> str:
    """TVM's ``load_module`` of a ``.tar`` (written by ``export_library("x.tar")``) or a ``.o``
    (``Module.save``): link its object files with this machine's compiler into ``path + ".so"``
    (as TVM does; in a temporary folder when ``path``'s folder is not writable); that path."""
    import tarfile

    with tempfile.TemporaryDirectory(prefix="tvmpy_untar_") as tmp:
        if is_object:
            files = [path]
        else:
            try:
                with tarfile.open(path) as tar:
                    members = [m for m in tar.getmembers() if m.isfile()]
                    for m in members:
                        if os.path.basename(m.name) != m.name or not m.name.endswith(".o"):
                            raise ValueError(f"load_module: {path} holds {m.name!r}; expected "
                                             "only object files (.o) as export_library writes")
                    tar.extractall(tmp, members=members, filter="data")
            except tarfile.TarError as err:
                raise ValueError(f"load_module: {path} is not a tar file ({err})") from None
            files = [os.path.join(tmp, m.name) for m in members]
            if not files:
                raise ValueError(f"load_module: {path} holds no object files")
        for f in files:
            with open(f, "rb") as fh:
                arch = elf_arch(fh.read(20))
            if arch is not None and arch != host_arch():
                raise RuntimeError(f"cannot load {path}: its code is for {arch}, this machine is "
                                   f"{host_arch()}; run it on such a device (over RPC)")
        out = path + ".so"
        if not os.access(os.path.dirname(out), os.W_OK):
            out = os.path.join(tempfile.mkdtemp(prefix="tvmpy_lib_"), os.path.basename(out))
        part = os.path.join(tmp, "linked.so")
        from .linker import compiler

        try:
            cmd = compiler()
        except RuntimeError as err:
            raise RuntimeError(f"load_module: {path} holds object files, which are linked on the "
                               f"machine that loads them, and this one has no C compiler ({err}); "
                               "export_library a .so (cross-linked) for such a device") from None
        argv = cmd + ["-shared", "-fPIC", "-o", part] + files
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"load_module: linking {path} failed:\n  {shlex.join(argv)}\n"
                               f"{proc.stdout}{proc.stderr}")
        shutil.copyfile(part, f"{out}.{os.getpid()}.tmp")
        os.replace(f"{out}.{os.getpid()}.tmp", out)
    return out


#: ``(probe(path) -> bool, loader(path) -> module)`` pairs tried first by :func:`load_module`:
#: a package whose modules are not shared libraries (``tvmpy.vta``) registers one on import
FILE_LOADERS: list[tuple[Callable[[str], bool], Callable[[str], Any]]] = []


def load_module(path: str, fmt: str = "") -> Module:
    """Load a library written by ``export_library`` (needs ctypes and numpy, no compiler).

    Nothing of the file runs before it is accepted: its metadata is read from the file (ELF
    dynamic symbol table), a file without tvmpy metadata, for another architecture, or whose
    code needs CPU features this machine lacks is refused with a ValueError / RuntimeError
    naming why, and only then is it loaded (dlopen runs its constructors)."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_module: no such file {path!r}")
    for probe, loader in FILE_LOADERS:  # modules of other kinds (VTA's driver files)
        if probe(path):
            return loader(path)
    ext = fmt or os.path.splitext(path)[1].lstrip(".")
    if ext in ("cl", "ptx", "cu", "cubin", "clbin", "fatbin"):  # saved device code
        from .gpu_module import load_device_file

        return load_device_file(path, ext)
    if fmt in ("tar", "o") or (not fmt and path.endswith((".tar", ".o"))):
        path = _link_portable(path, fmt == "o" or (not fmt and path.endswith(".o")))
    from .wasm import is_wasm, load_wasm  # wasmtime itself is imported only to run one

    if fmt == "wasm" or is_wasm(path):  # a WebAssembly module (runtime/wasm.py)
        return load_wasm(path)
    check_loadable_size(path)
    meta, raw = _read_metadata(path)
    with open(path, "rb") as fh:
        arch = elf_arch(fh.read(20))
    if arch is not None and arch != host_arch():
        raise RuntimeError(f"cannot load {path}: its code is for {arch}, this machine is "
                           f"{host_arch()}; run it on such a device (over RPC)")
    refused = unsupported(meta)
    if refused is not None:
        raise RuntimeError(f"cannot load {path}: {refused}")
    install_fork_guard()
    _load_system_libs(meta.get("system_libs", ()))
    lib = _dlopen_current(path)
    try:
        addr = ctypes.addressof(ctypes.c_char.in_dll(lib, METADATA_SYMBOL))
    except ValueError:
        raise ValueError(f"{path} is not a tvmpy module (no {METADATA_SYMBOL} symbol)") from None
    if ctypes.string_at(addr) != raw:  # the file was replaced between the check and dlopen
        raise RuntimeError(f"cannot load {path}: the file changed while it was being loaded")
    return _module_from_meta(lib, meta, path)
