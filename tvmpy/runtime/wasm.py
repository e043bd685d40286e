"""WebAssembly modules: code compiled for ``wasm32`` run in-process by the ``wasmtime`` runtime.

A ``.wasm`` written by ``export_library`` (codegen/llvm_wasm.py links it) is one WebAssembly
module that exports its kernels (the ABI of runtime/abi.py with 32-bit pointers: each buffer is an
``i32`` offset into the module's linear memory), ``memory``, ``aligned_alloc``/``free`` (wasi-libc)
and the global ``__tvmpy_last_error``; it imports nothing. The module metadata JSON travels in a
custom section ``tvmpy.metadata``; a graph module (``relay.build`` exported) also carries its
parameters (``save_param_dict`` bytes) in the custom section ``tvmpy.params``. So one file is the
whole deployable model; any WebAssembly engine that reads custom sections can run it
(``web/tvmpy_wasm.mjs`` does it for node).

Calling: arguments are checked exactly as for host functions (runtime/function.py); an array that
is not already in the module's linear memory is copied into a staging area there for the call
(and back afterwards when the kernel writes it). The graph executor allocates its whole storage
arena inside linear memory (:meth:`WasmModule.alloc_arena`), so a model's activations never leave
it between kernels. Linear memory only grows and wasmtime never moves it on 64-bit hosts; numpy
views of it stay valid (checked). A trap (out-of-bounds access, unreachable) raises RuntimeError
naming the function. ``wasmtime`` is imported when a module is first instantiated, not before.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .abi import ERROR_SYMBOL
from .device import Device
from .function import Function
from .linker import check_output_path
from .module import Module
from .ndarray import ALIGNMENT

__all__ = ["WasmModule", "WasmFunction", "WasmInstance", "load_wasm", "is_wasm", "strip_custom_sections",
           "factory_bytes",
           "custom_section", "read_custom_sections", "WASM_MAGIC", "METADATA_SECTION",
           "PARAMS_SECTION"]

WASM_MAGIC = b"\0asm"
METADATA_SECTION = "tvmpy.metadata"
PARAMS_SECTION = "tvmpy.params"
_WASM_VERSION = b"\x01\0\0\0"
_INT_WRAP = {"uint32": 1 << 32, "uint64": 1 << 64}


# ---- the binary format: custom sections ---------------------------------------------------------
def _leb_u32(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_leb(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 35:
            raise ValueError("malformed WebAssembly module: bad LEB128 integer")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def custom_section(name: str, payload: bytes) -> bytes:
    """A WebAssembly custom section (id 0) ``name`` holding ``payload``; append it to a module."""
    raw = name.encode("utf-8")
    body = _leb_u32(len(raw)) + raw + bytes(payload)
    return b"\0" + _leb_u32(len(body)) + body


def read_custom_sections(data: bytes | memoryview) -> dict[str, memoryview]:
    """The custom sections of a WebAssembly module: ``{name: payload}`` (the last one wins)."""
    data = memoryview(data)
    if bytes(data[:4]) != WASM_MAGIC or bytes(data[4:8]) != _WASM_VERSION:
        raise ValueError("not a WebAssembly module (version 1)")
    pos, out = 8, {}
    while pos < len(data):
        sid = data[pos]
        size, pos = _read_leb(data, pos + 1)
        end = pos + size
        if end > len(data):
            raise ValueError("malformed WebAssembly module: a section runs past the end of the "
                             "file (truncated?)")
        if sid == 0:
            nlen, p = _read_leb(data, pos)
            out[bytes(data[p:p + nlen]).decode("utf-8", "replace")] = data[p + nlen:end]
        pos = end
    return out


def strip_custom_sections(data: bytes, prefix: str = "tvmpy.") -> bytes:
    """``data`` without its custom sections whose names start with ``prefix``."""
    view = memoryview(data)
    read_custom_sections(view)  # validates
    out, pos = [bytes(view[:8])], 8
    while pos < len(view):
        size, body = _read_leb(view, pos + 1)
        end = body + size
        keep = True
        if view[pos] == 0:
            nlen, p = _read_leb(view, body)
            keep = not bytes(view[p:p + nlen]).decode("utf-8", "replace").startswith(prefix)
        if keep:
            out.append(bytes(view[pos:end]))
        pos = end
    return b"".join(out)


def is_wasm(path_or_bytes: str | bytes) -> bool:
    """Whether a file (path) or bytes start with the WebAssembly magic number."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes[:4]) == WASM_MAGIC
    try:
        with open(path_or_bytes, "rb") as fh:
            return fh.read(4) == WASM_MAGIC
    except OSError:
        return False


def _host_bytes(addr: int, nbytes: int) -> np.ndarray:
    """A writable uint8 numpy view of ``nbytes`` of this process's memory at ``addr``."""
    buf = (ctypes.c_ubyte * max(nbytes, 1)).from_address(addr)
    return np.frombuffer(memoryview(buf).cast("B"), np.uint8, count=nbytes)


def _wasmtime() -> Any:
    try:
        import wasmtime
    except ImportError:
        raise RuntimeError("running a WebAssembly module needs the wasmtime runtime: "
                           "pip install wasmtime") from None
    return wasmtime


# ---- one instance: store, linear memory, allocator ----------------------------------------------
class WasmInstance:
    """A wasmtime instance of a tvmpy WebAssembly module, with numpy views of its memory."""

    def __init__(self, binary: bytes):
        wt = _wasmtime()
        self._wt = wt
        # a wasmtime Store is not thread-safe: calls (and the staging of their arguments) hold
        # this lock
        self.lock = threading.RLock()
        config = wt.Config()
        try:  # numpy views of linear memory must stay valid: reserve the 4 GiB, never move
            config.memory_reservation = 1 << 32
            config.memory_may_move = False
        except AttributeError:  # an older wasmtime-py: its 64-bit default is the same
            pass
        self.engine = wt.Engine(config)
        self.store = wt.Store(self.engine)
        try:
            module = wt.Module(self.engine, bytes(binary))
        except wt.WasmtimeError as e:
            raise RuntimeError(f"invalid WebAssembly module: {e}") from None
        imports = [f"{i.module}.{i.name}" for i in module.imports]
        if imports:
            raise RuntimeError("this WebAssembly module imports "
                               f"{', '.join(imports)}; tvmpy modules must import nothing")
        self.instance = wt.Instance(self.store, module, [])
        ex = self.instance.exports(self.store)
        self._exports = ex
        for need in ("memory", "aligned_alloc", "free"):
            if ex.get(need) is None:
                raise RuntimeError(f"WebAssembly module does not export {need!r}: not a tvmpy "
                                   "module")
        init = ex.get("_initialize")  # a WASI reactor: runs the C library's constructors
        if init is not None:
            init(self.store)
        self.memory = ex["memory"]
        self._aligned_alloc = ex["aligned_alloc"]
        self._free = ex["free"]
        err = ex.get(ERROR_SYMBOL)
        self._err_addr = int(err.value(self.store)) if err is not None else None
        self.base = self._base()

    def _base(self) -> int:
        return ctypes.addressof(self.memory.data_ptr(self.store).contents)

    @property
    def size(self) -> int:
        return int(self.memory.data_len(self.store))

    def export(self, name: str) -> Any:
        return self._exports.get(name)

    def alloc(self, nbytes: int, zero: bool = False) -> int:
        """``nbytes`` (at least 1) of linear memory, 64-byte aligned: its offset."""
        n = max(int(nbytes), 1)
        n = -(-n // ALIGNMENT) * ALIGNMENT
        if n >= 1 << 31:
            raise MemoryError(f"{nbytes} bytes do not fit a 32-bit WebAssembly memory")
        off = int(self._aligned_alloc(self.store, ALIGNMENT, n))
        if off == 0:
            raise MemoryError(f"WebAssembly module is out of memory allocating {nbytes} bytes "
                              f"(linear memory: {self.size} bytes)")
        if self._base() != self.base:  # the engine reserves the 4 GiB up front: never expected
            raise RuntimeError("WebAssembly linear memory moved; views of it are invalid")
        if zero:
            self.view(off, n)[:] = 0
        return off

    def free(self, off: int) -> None:
        self._free(self.store, off)

    def view(self, off: int, nbytes: int) -> np.ndarray:
        """A writable uint8 numpy view of linear memory ``[off, off + nbytes)``."""
        if off < 0 or off + nbytes > self.size:
            raise IndexError(f"[{off}, {off + nbytes}) is outside WebAssembly memory "
                             f"({self.size} bytes)")
        return _host_bytes(self.base + off, nbytes)

    def offset_of(self, addr: int, nbytes: int) -> int | None:
        """The offset of host address ``addr`` if ``[addr, addr + nbytes)`` is in linear memory."""
        off = addr - self.base
        return off if 0 <= off and off + nbytes <= self.size else None

    def c_string(self, off: int, limit: int = 4096) -> str:
        view = self.view(off, min(limit, self.size - off))
        end = np.flatnonzero(view == 0)
        return bytes(view[:end[0] if end.size else len(view)]).decode("utf-8", "replace")

    def last_error(self) -> str | None:
        """The message of the last failed kernel (``__tvmpy_last_error``), consumed."""
        if self._err_addr is None:
            return None
        cell = self.view(self._err_addr, 4).view(np.uint32)
        ptr = int(cell[0])
        if not ptr:
            return None
        cell[0] = 0
        return self.c_string(ptr)


# ---- functions ----------------------------------------------------------------------------------
class _Packed:
    """Raw arguments packed once into wasmtime's value array (see :class:`_WasmCall`)."""

    __slots__ = ("template", "work", "nbytes")

    def __init__(self, template: Any, work: Any):
        self.template, self.work, self.nbytes = template, work, ctypes.sizeof(template)


class _WasmCall:
    """Stands in for the ctypes function of a host :class:`Function`: called with the raw
    arguments (i32 offsets, scalars, shape vars), returns the kernel's int32 return code.

    wasmtime-py's ``Func.__call__`` checks and converts every argument on each call (~17 us);
    :meth:`pack` builds the value array once and a call with that one :class:`_Packed` argument
    goes straight to ``wasmtime_func_call_unchecked`` (~1-2 us: what the graph executor's
    ``run()`` and the time evaluator use). Without that entry point (another wasmtime-py
    version) every call takes the checked path."""

    def __init__(self, inst: WasmInstance, name: str, export: Any):
        self.inst, self.name, self._f = inst, name, export
        self.argtypes: Any = None
        self.restype: Any = None
        ty = export.type(inst.store)
        self._kinds = [str(t) for t in ty.params]
        self._n = max(len(self._kinds), len(ty.results), 1)
        self._unchecked: Any = None
        try:
            from wasmtime import _ffi as ffi

            self._ffi = ffi
            self._unchecked = ffi.wasmtime_func_call_unchecked
            self._ctx = inst.store._context()
            self._fref = ctypes.byref(export._func)
            self._raw_t = ffi.wasmtime_val_raw_t
        except (ImportError, AttributeError):
            pass

    def pack(self, args: Sequence[Any]) -> list[Any]:
        """``args`` as the one-element argument list of a fast call (or unchanged)."""
        if self._unchecked is None or any(k not in ("i32", "i64", "f32", "f64")
                                          for k in self._kinds):
            return list(args)
        if len(args) != len(self._kinds):
            raise TypeError(f"{self.name}: the WebAssembly function takes {len(self._kinds)} "
                            f"values, got {len(args)}")
        template = (self._raw_t * self._n)()
        for k, (kind, v) in enumerate(zip(self._kinds, args)):
            setattr(template[k], kind, v)
        return [_Packed(template, (self._raw_t * self._n)())]

    def __call__(self, *args: Any) -> int:
        with self.inst.lock:
            return self._call(args)

    def _call(self, args: tuple) -> int:
        if len(args) == 1 and isinstance(args[0], _Packed):
            p = args[0]
            ctypes.memmove(p.work, p.template, p.nbytes)  # results overwrite the arguments
            ffi = self._ffi
            trap = ctypes.POINTER(ffi.wasm_trap_t)()
            err = self._unchecked(self._ctx, self._fref, p.work, self._n, ctypes.byref(trap))
            if err:
                raise RuntimeError(f"{self.name}: {self.inst._wt.WasmtimeError._from_ptr(err)}")
            if trap:
                self._raise_trap(self.inst._wt.Trap._from_ptr(trap))
            return int(p.work[0].i32)
        try:
            return int(self._f(self.inst.store, *args))
        except self.inst._wt.Trap as e:
            self._raise_trap(e)
            raise

    def _raise_trap(self, e: Any) -> None:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else "trap"
        raise RuntimeError(f"{self.name}: WebAssembly trap: {msg}") from None


def _span(a: np.ndarray) -> int:
    """Bytes from the first to past the last element of ``a`` (non-negative strides)."""
    if a.size == 0:
        return 0
    return a.itemsize + sum((n - 1) * s for n, s in zip(a.shape, a.strides))


class WasmFunction(Function):
    """A kernel of a :class:`WasmModule`; arguments as for host functions."""

    def __init__(self, inst: WasmInstance, export: Any, signature: dict, module: Any,
                 device: Device | None = None):
        super().__init__(_WasmCall(inst, signature["name"], export), signature, module, device)
        self._inst = inst
        self._stage_off = 0
        self._stage_size = 0
        self._wrap = [(p.index, _INT_WRAP[p.dtype]) for p in self._scalars if p.dtype in _INT_WRAP]
        self._bools = [p.index for p in self._scalars if p.dtype == "bool"]

    def _staging(self, nbytes: int) -> int:
        if nbytes > self._stage_size:
            if self._stage_size:
                self._inst.free(self._stage_off)
            self._stage_size = max(nbytes, 2 * self._stage_size)
            self._stage_off = self._inst.alloc(self._stage_size)
        return self._stage_off

    def prepare(self, args: tuple | list) -> tuple[list[Any], list[tuple[Any, np.ndarray]]]:
        """As :meth:`Function.prepare`, with linear-memory offsets for the buffers: arrays in
        linear memory are passed in place, others are copied into this function's staging area
        (the returned writeback list then copies written ones back first)."""
        raw, host_wb = super().prepare(args)
        inst = self._inst
        views = {scratch.ctypes.data: scratch for _, scratch in host_wb}
        regions: list[tuple[int, int, int]] = []  # (param index, host address, bytes) to stage
        for p in self._bufs:
            addr = raw[p.index]
            a = views.get(addr)
            if a is None:
                arg = args[p.index]
                a = arg if isinstance(arg, np.ndarray) else arg._arr
            n = _span(a)
            off = inst.offset_of(addr, n)
            if off is not None:
                raw[p.index] = off
            else:
                regions.append((p.index, addr, n))
        staged: list[tuple[Any, np.ndarray]] = []
        if regions:
            sizes: dict[int, int] = {}
            for _, addr, n in regions:
                sizes[addr] = max(sizes.get(addr, 0), n)
            total = sum(-(-max(n, 1) // ALIGNMENT) * ALIGNMENT for n in sizes.values())
            base = self._staging(total)
            where: dict[int, int] = {}
            pos = base
            for addr, n in sizes.items():
                where[addr] = pos
                if n:
                    host = _host_bytes(addr, n)
                    wview = inst.view(pos, n)
                    wview[:] = host
                    staged.append((host, wview))
                pos += -(-max(n, 1) // ALIGNMENT) * ALIGNMENT
            for idx, addr, _ in regions:
                raw[idx] = where[addr]
            written = {raw[p.index] for p in self._bufs if p.written}
            staged = [(h, w) for h, w in staged
                      if h.flags.writeable and (w.ctypes.data - inst.base) in written]
        for idx, mod in self._wrap:
            if raw[idx] >= mod >> 1:
                raw[idx] -= mod
        for idx in self._bools:
            raw[idx] = int(raw[idx])
        return self._cfunc.pack(raw), staged + host_wb

    def __call__(self, *args: Any) -> None:
        with self._inst.lock:  # the staging area is this function's: one call at a time
            raw, writeback = self.prepare(args)
            rc = self._cfunc(*raw)
            for dst, src in writeback:
                if dst is not None:
                    np.copyto(dst, src)
        if rc != 0:
            self._raise_error(rc)

    def __repr__(self) -> str:
        return f"<tvmpy.runtime.WasmFunction {self.name}({self._param_names})>"


# ---- the module ---------------------------------------------------------------------------------
class WasmModule(Module):
    """A linked WebAssembly module (all functions in one binary); instantiated on first use."""

    is_wasm = True

    def __init__(self, binary: bytes, metadata: dict, objects: Any = (),
                 sources: Mapping[str, str] | None = None, lib_path: str | None = None):
        super().__init__(None, metadata, "wasm", objects=(), sources=sources, lib_path=lib_path)
        self.binary = bytes(binary)
        self.wasm_objects = list(objects)  # wasm32 relocatable objects (``save("x.o")``)
        self._inst: WasmInstance | None = None

    @property
    def instance(self) -> WasmInstance:
        if self._inst is None:
            self._inst = WasmInstance(self.binary)
        return self._inst

    def _find(self, name: str) -> Function | None:
        f = self._funcs.get(name)
        if f is not None:
            return f
        sig = self._sigs.get(name)
        if sig is None:
            return None
        inst = self.instance
        export = inst.export(name)
        if export is None:
            raise RuntimeError(f"function {name} is in the module metadata but the WebAssembly "
                               "module does not export it")
        f = WasmFunction(inst, export, sig, self, self.device)
        self._funcs[name] = f
        return f

    def _last_error(self) -> str | None:
        return self._inst.last_error() if self._inst is not None else None

    def alloc_arena(self, nbytes: int) -> np.ndarray:
        """A zero-filled, 64-byte-aligned uint8 array of ``nbytes`` in linear memory (the graph
        executor's storage); freed when the array is no longer used."""
        inst = self.instance
        off = inst.alloc(nbytes, zero=True)
        view = inst.view(off, max(nbytes, 1))[:nbytes]
        weakref.finalize(view.base if view.base is not None else view, inst.free, off)
        return view

    def _collect(self, device_code: bool = True) -> tuple[list[bytes], list[str], dict]:
        raise RuntimeError("a WebAssembly module cannot be linked into a host library; "
                           "export it on its own with export_library('x.wasm')")

    def wasm_bytes(self, extra_meta: Mapping[str, Any] | None = None,
                   params: bytes | None = None) -> bytes:
        """The deployable binary: code, metadata (plus ``extra_meta``), parameters."""
        meta = {k: v for k, v in self._meta.items() if k != "imports"}
        meta["type_key"] = "wasm"
        if extra_meta:
            meta = {**dict(extra_meta), "imports": [meta]}
        out = self.binary + custom_section(METADATA_SECTION,
                                           json.dumps(meta, sort_keys=True).encode("utf-8"))
        if params is not None:
            out += custom_section(PARAMS_SECTION, params)
        return out

    def export_library(self, file_name: str, fcompile: Any = None, addons: Any = None,
                       workspace_dir: str | None = None, **kwargs: Any) -> None:
        """Write the WebAssembly module (``.wasm``) with its metadata (already linked: TVM's
        compiler arguments are accepted and not needed)."""
        _write(file_name, self.wasm_bytes())

    def save(self, file_name: str, fmt: str = "") -> None:
        """``.wasm``: the linked module; ``.o``: the wasm32 object (one); else source."""
        ext = fmt or os.path.splitext(os.fspath(file_name))[1].lstrip(".")
        if ext == "wasm":
            self.export_library(file_name)
        elif ext == "o":
            if len(self.wasm_objects) != 1:
                raise ValueError("this WebAssembly module carries no single object file")
            with open(file_name, "wb") as f:
                f.write(self.wasm_objects[0])
        else:
            super().save(file_name, fmt)


def _write(file_name: str, data: bytes) -> None:
    out = check_output_path(file_name, "export_library")
    tmp = f"{out}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)


def export_factory(factory: Any, file_name: str) -> None:
    """Write a graph executor factory whose library is a :class:`WasmModule` as one ``.wasm``:
    the code, the graph JSON (metadata) and the parameters (custom sections)."""
    _write(file_name, factory_bytes(factory))


def factory_bytes(factory: Any) -> bytes:
    """The ``.wasm`` bytes of a graph executor factory whose library is a :class:`WasmModule`."""
    from .param_dict import save_param_dict

    lib = factory.get_lib()
    meta = {k: v for k, v in factory._meta.items() if k != "imports"}
    meta["type_key"] = factory.type_key
    return bytes(lib.wasm_bytes(meta, save_param_dict(factory.params)))


def load_wasm(path: str, webgpu: bool = True) -> Module:
    """Load a ``.wasm`` written by ``export_library`` (a kernel module or a graph module); a
    webgpu web artefact (runtime/webgpu_artefact.py) loads as its WebGPU module unless
    ``webgpu`` is False (then its wasm32 CPU fallback)."""
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        sections = read_custom_sections(data)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    if webgpu and "tvmpy.webgpu" in sections:
        from .webgpu_artefact import load_artefact

        return load_artefact(path)
    if METADATA_SECTION not in sections:
        raise ValueError(f"{path} is a WebAssembly module but not a tvmpy one (no "
                         f"{METADATA_SECTION!r} custom section)")
    meta = json.loads(bytes(sections[METADATA_SECTION]).decode("utf-8"))
    if meta.get("version", 1) != 1:
        raise ValueError(f"{path}: module metadata version {meta.get('version')} is not supported")
    if meta.get("type_key") == "GraphExecutorFactory":
        from .graph_executor import GraphExecutorFactory
        from .param_dict import load_param_dict

        subs = meta.get("imports", [])
        info = meta.get("graph_executor") or {}
        if len(subs) != 1 or "graph_json" not in info:
            raise ValueError(f"{path}: malformed graph executor factory metadata")
        lib = WasmModule(strip_custom_sections(data), subs[0], lib_path=path)
        blob = sections.get(PARAMS_SECTION)
        params = load_param_dict(bytes(blob)) if blob is not None else {}
        fac = GraphExecutorFactory(info["graph_json"], lib, params, info.get("mod_name", "default"))
        fac._lib_path = path
        return fac
    return WasmModule(strip_custom_sections(data), meta, lib_path=path)
