"""One RPC session on the device side: its directory, its objects, the requests it serves.

Imports only the runtime, numpy and the standard library (it runs on the device). A session's
files live in its own directory; every name a client gives is checked to stay inside it
(no absolute paths, no ``..``, no symlink leading out). Objects the client holds (arrays,
modules, functions, graph executors) are kept in a handle table of this session only.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.random import default_rng  # loaded once by the listener, not per session

from ..runtime import ndarray as nd
from ..runtime import packed_func
from ..runtime.device import Device
from ..runtime.evaluator import BenchmarkResult
from ..runtime.graph_executor import GraphExecutor
from ..runtime.module import Module, load_module
from ..runtime.ndarray import NDArray
from .protocol import ProtocolError, check_dtype, decode, encode

__all__ = ["Session", "register_func", "get_global_func", "safe_path"]

_GLOBALS: dict[str, tuple[Callable[..., Any], bool]] = {}
DEVICE = "native"  # what the server serves (set by serve(): native, qemu-aarch64, wasm)


def register_func(name: str, with_session: bool = False
                  ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a device-side function under ``name`` (``remote.get_function(name)``); with
    ``with_session`` it receives the calling :class:`Session` as its first argument."""
    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        _GLOBALS[name] = (f, with_session)
        return f
    return deco


def get_global_func(name: str, session: Session | None = None) -> Callable[..., Any]:
    """The function registered as ``name`` (bound to ``session`` if it takes one): the server's
    own (``rpc.register_func``), else one of the PackedFunc registry of the server process
    (``tvm.register_func`` run there, and the runtime's own such as ``tvm.contrib.cblas.*``).
    Only registered functions are reachable: a name is never imported or evaluated."""
    if not isinstance(name, str):
        raise TypeError(f"function name must be a str, got {type(name).__name__}")
    if name not in _GLOBALS:
        pf = packed_func.get_global_func(name, allow_missing=True)
        if pf is not None:
            return pf
        raise ValueError(f"no server function {name!r}: register it on the server with "
                         "tvm.register_func (server functions: "
                         f"{', '.join(sorted(_GLOBALS))})")
    f, with_session = _GLOBALS[name]
    if not with_session:
        return f
    if session is None:
        raise ValueError(f"server function {name!r} needs a session")
    return functools.partial(f, session)


def safe_path(root: str, name: Any, must_exist: bool = False) -> str:
    """``root/name`` if ``name`` is a relative path that stays inside ``root`` (symlinks
    resolved); raises PermissionError naming the problem otherwise."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"invalid file name {name!r}")
    if os.path.isabs(name) or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise PermissionError(f"absolute paths are refused: {name!r} (names are relative to the "
                              "session's directory)")
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        raise PermissionError(f"'..' is refused in file names: {name!r}")
    real_root = os.path.realpath(root)
    path = os.path.join(real_root, *[p for p in parts if p not in ("", ".")])
    real = os.path.realpath(path)
    if real != real_root and not real.startswith(real_root + os.sep):
        raise PermissionError(f"{name!r} leads out of the session's directory (symlink)")
    if must_exist and not os.path.exists(real):
        raise FileNotFoundError(f"no file {name!r} in the session's directory")
    return real


class Session:
    """A session's state: ``workdir`` and the objects handed to the client."""

    def __init__(self, workdir: str, max_payload: int = 1 << 30):
        self.workdir = workdir
        self.max_payload = max_payload
        self.objects: dict[int, Any] = {}
        self._next = 1
        self._modules: dict[str, tuple[tuple, Module]] = {}
        self._uploads = 0
        self._generation: dict[str, int] = {}  # path -> number of the upload that wrote it

    # ---- files ------------------------------------------------------------------------------
    def upload(self, name: str, data: Any) -> None:
        path = safe_path(self.workdir, name)
        if os.path.isdir(path):
            raise IsADirectoryError(f"upload: {name!r} is a directory")
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        # a new file each time (written aside, then renamed over): a module loaded from the old
        # one keeps its code, and loading the new one never returns the old code
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._uploads += 1
        self._generation[path] = self._uploads

    def download(self, name: str) -> bytes:
        path = safe_path(self.workdir, name, must_exist=True)
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"download: {name!r} is not a regular file")
        if st.st_size > self.max_payload:
            raise ValueError(f"download: {name!r} has {st.st_size} bytes, more than the message "
                             f"limit of {self.max_payload}")
        with open(path, "rb") as f:
            return f.read()

    def remove(self, name: str) -> None:
        path = safe_path(self.workdir, name, must_exist=True)
        if os.path.isdir(path) and not os.path.islink(path):
            if path == os.path.realpath(self.workdir):
                raise PermissionError("remove: cannot remove the session's directory")
            shutil.rmtree(path)
        else:
            os.remove(path)

    def listdir(self, name: str = ".") -> list[str]:
        return sorted(os.listdir(safe_path(self.workdir, name, must_exist=True)))

    def load_module(self, name: str) -> Module:
        path = safe_path(self.workdir, name, must_exist=True)
        st = os.stat(path)
        key = (self._generation.get(path, 0), st.st_ino, st.st_mtime_ns, st.st_size)
        hit = self._modules.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        mod = load_module(path)
        self._modules[path] = (key, mod)
        return mod

    # ---- handles ----------------------------------------------------------------------------
    def _ref(self, obj: Any, kind: str, **info: Any) -> dict:
        h = self._next
        self._next += 1
        self.objects[h] = obj
        return {"__t": "ref", "h": h, "kind": kind, **info}

    def get(self, h: Any) -> Any:
        if not isinstance(h, int) or h not in self.objects:
            raise ValueError(f"no remote object with handle {h!r} in this session (freed?)")
        return self.objects[h]

    def encode_result(self, value: Any, payloads: list) -> Any:
        return encode(value, payloads, self._encode_obj)

    def _encode_obj(self, v: Any, payloads: list) -> Any:
        if isinstance(v, NDArray):
            return self._ref(v, "ndarray", shape=list(v.shape), dtype=v.dtype)
        if isinstance(v, GraphExecutor):
            return self._ref(v, "executor")
        if isinstance(v, Module):
            return self._ref(v, "module", type_key=v.type_key, entry=v.entry_name)
        if isinstance(v, Device):
            return {"__t": "dev", "type": v.device_type, "id": v.device_id}
        if isinstance(v, BenchmarkResult):
            return {"__t": "bench", "results": list(v.results)}
        if callable(v) and not isinstance(v, type):
            return self._ref(v, "function", name=getattr(v, "name", getattr(v, "__name__", "")))
        return NotImplemented

    def decode_args(self, obj: Any, payloads: list) -> Any:
        return decode(obj, payloads, self._decode_obj)

    def _decode_obj(self, obj: dict) -> Any:
        tag = obj.get("__t")
        if tag == "ref":
            return self.get(obj.get("h"))
        if tag == "dev":
            t, i = obj.get("type"), obj.get("id")
            if not isinstance(t, int) or not isinstance(i, int):
                raise ProtocolError(f"bad device {obj!r}")
            return Device(t, i)
        raise ProtocolError(f"unknown RPC value tag {tag!r}")

    # ---- requests ---------------------------------------------------------------------------
    def handle(self, header: dict, payloads: list) -> tuple[dict, list]:
        """Serve one request; returns the reply header and payloads (raises on errors)."""
        for h in header.get("free") or ():
            self.objects.pop(h, None)
        op = header.get("op")
        fn = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
        if fn is None:
            raise ProtocolError(f"unknown request {op!r}")
        out: list = []
        result = fn(header, payloads, out)
        return {"ok": True, "result": result}, out

    def _args(self, header: dict, payloads: list) -> list:
        args = self.decode_args(header.get("args", []), payloads)
        if not isinstance(args, list):
            raise ProtocolError("args must be a list")
        return [nd.array(a) if isinstance(a, np.ndarray) else a for a in args]

    def op_ping(self, header: dict, payloads: list, out: list) -> Any:
        return "pong"

    def op_upload(self, header: dict, payloads: list, out: list) -> Any:
        if len(payloads) != 1:
            raise ProtocolError("upload takes one payload")
        self.upload(header.get("name"), payloads[0])  # type: ignore[arg-type]

    def op_download(self, header: dict, payloads: list, out: list) -> Any:
        return self.encode_result(self.download(header.get("name")), out)  # type: ignore[arg-type]

    def op_remove(self, header: dict, payloads: list, out: list) -> Any:
        self.remove(header.get("name"))  # type: ignore[arg-type]

    def op_listdir(self, header: dict, payloads: list, out: list) -> Any:
        return self.listdir(header.get("name") or ".")

    def op_load_module(self, header: dict, payloads: list, out: list) -> Any:
        return self.encode_result(self.load_module(header.get("name")), out)  # type: ignore[arg-type]

    def op_get_function(self, header: dict, payloads: list, out: list) -> Any:
        name = header.get("name")
        if not isinstance(name, str):
            raise ProtocolError("get_function needs a name")
        if header.get("h") is None:
            return self._ref(get_global_func(name, self), "function", name=name)
        obj = self.get(header["h"])
        return self.encode_result(obj[name], out)

    def op_call(self, header: dict, payloads: list, out: list) -> Any:
        f = self.get(header.get("h"))
        if not callable(f):
            raise TypeError("remote object is not callable")
        kwargs = self.decode_args(header.get("kwargs") or {"__t": "dict", "v": {}}, payloads)
        if not isinstance(kwargs, dict):
            raise ProtocolError("kwargs must be a dict")
        kwargs = {k: nd.array(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        return self.encode_result(f(*self._args(header, payloads), **kwargs), out)

    def op_nd_array(self, header: dict, payloads: list, out: list) -> Any:
        arr = self.decode_args(header.get("value"), payloads)
        if not isinstance(arr, np.ndarray):
            raise ProtocolError("nd_array needs an array")
        return self.encode_result(nd.array(arr, self._device(header)), out)

    def op_nd_empty(self, header: dict, payloads: list, out: list) -> Any:
        shape = header.get("shape")
        if not isinstance(shape, list):
            raise ProtocolError("nd_empty needs a shape")
        return self.encode_result(nd.empty(tuple(shape), str(check_dtype(header.get("dtype"))),
                                           self._device(header)), out)

    def _device(self, header: dict) -> Device:
        dev = self.decode_args(header.get("dev"), [])
        if not isinstance(dev, Device):
            raise ProtocolError("a device is needed")
        return dev

    def op_nd_numpy(self, header: dict, payloads: list, out: list) -> Any:
        a = self.get(header.get("h"))
        if not isinstance(a, NDArray):
            raise TypeError("remote object is not an array")
        return self.encode_result(a.numpy(), out)

    def op_nd_copyfrom(self, header: dict, payloads: list, out: list) -> Any:
        a = self.get(header.get("h"))
        if not isinstance(a, NDArray):
            raise TypeError("remote object is not an array")
        a.copyfrom(self._args(header, payloads)[0])

    def op_time_evaluator(self, header: dict, payloads: list, out: list) -> Any:
        obj = self.get(header.get("h"))
        name = header.get("name")
        opts = header.get("opts") or {}
        number, repeat = int(opts.get("number", 10)), int(opts.get("repeat", 1))
        min_ms = float(opts.get("min_repeat_ms", 0))
        cooldown = float(opts.get("cooldown_interval_ms", 0))
        dev = self._device(header)
        args = self._args(header, payloads)
        if isinstance(obj, (GraphExecutor, Module)):
            res = obj.time_evaluator(name, dev, number, repeat, min_ms,  # type: ignore[arg-type]
                                     cooldown, str(opts.get("f_preproc", "")))(*args)
        else:
            raise TypeError("time_evaluator needs a remote module")
        return self.encode_result(res, out)


# ---- functions every server offers -----------------------------------------------------------
@register_func("tvm.rpc.server.workpath", with_session=True)
def _workpath(session: Session, name: str) -> str:
    return safe_path(session.workdir, name)


@register_func("runtime.device_info")
def _device_info() -> dict:
    """What the server runs on (``machine`` is e.g. ``x86_64`` or ``aarch64``)."""
    import platform

    return {"device": DEVICE, "machine": platform.machine(), "system": platform.system(),
            "python": platform.python_version(), "numpy": np.__version__,
            "cpu_count": os.cpu_count() or 1}


@register_func("runtime.ping")
def _ping(*args: Any) -> Any:
    return list(args)


def _random_arg(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 8, shape).astype(dtype)


@register_func("runtime.measure", with_session=True)
def measure(session: Session, lib_name: str, func_name: str, arg_specs: list, number: int = 10,
            repeat: int = 1, min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
            f_preproc: str = "", seed: int = 0, return_args: bool = False) -> dict:
    """Time ``func_name`` of the uploaded library ``lib_name`` on random arguments
    (``arg_specs``: ``[[shape, dtype], ...]``), on the device (a GPU library: on its device,
    e.g. ``opencl(0)`` of the server, arguments in device memory). Returns ``{"costs": seconds per
    call of each repeat, "mean": ...}``, and ``"args"`` (the arguments after the runs, outputs
    included) when ``return_args``."""
    if not isinstance(arg_specs, list):
        raise TypeError("runtime.measure: arg_specs must be a list of [shape, dtype]")
    rng = default_rng(seed)
    mod = session.load_module(lib_name)
    from ..runtime.device import cpu

    # a GPU library (OpenCL/CUDA build) runs on its device: arguments in device memory
    dev = getattr(mod, "device", None) or cpu(0)
    if dev.device_type != cpu(0).device_type:
        f_preproc = ""  # cache flushing is for CPU caches
    args = []
    for spec in arg_specs:
        if not isinstance(spec, list) or len(spec) != 2:
            raise TypeError(f"runtime.measure: bad arg spec {spec!r}: expected [shape, dtype]")
        shape = tuple(int(s) for s in spec[0])
        args.append(nd.array(_random_arg(rng, shape, check_dtype(spec[1])), dev))
    res = mod.time_evaluator(func_name, dev, int(number), int(repeat), float(min_repeat_ms),
                             float(cooldown_interval_ms), f_preproc)(*args)
    out: dict = {"costs": list(res.results), "mean": res.mean}
    if return_args:
        out["args"] = [a.numpy() for a in args]
    return out
