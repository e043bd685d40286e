"""The client side of an RPC session: ``rpc.connect`` and the remote objects it hands out.

    remote = rpc.connect("127.0.0.1", 9091, token=TOKEN)  # the token the server printed
    remote.upload("net.so"); rlib = remote.load_module("net.so")
    dev = remote.cpu(0)
    a = tvm.nd.array(x, dev)                        # lives on the server; a.numpy() copies back
    m = graph_executor.GraphModule(rlib["default"](dev))
    m.module.time_evaluator("run", dev, number=10)().mean   # timed on the device

Remote arrays, modules, functions and graph executors are handles into the server session's
object table; dropping the last reference frees the object there (the handle rides on the next
request). Exceptions raised by code on the server come back as the same builtin type with the
server's message. ``LocalSession`` offers the same API in this process.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..runtime import ndarray as nd
from ..runtime.device import DEVICE_TYPES, Device, cpu
from ..runtime.evaluator import BenchmarkResult
from ..runtime.module import Module
from ..runtime.ndarray import NDArray
from .protocol import (
    PROTOCOL,
    VERSION,
    AuthenticationError,
    Limits,
    ProtocolError,
    RPCError,
    byte_view,
    check_dtype,
    decode,
    encode,
    mac,
    raise_remote,
    recv_frame,
    same_secret,
    send_frame,
)
from .session import Session, get_global_func

__all__ = ["connect", "RPCSession", "LocalSession", "RemoteDevice", "RemoteNDArray",
           "RemoteModule", "RemoteFunction", "RemoteGraphExecutor"]


def connect(url: str, port: int, key: str = "", session_timeout: float = 0,
            token: str | None = None, timeout: float = 30, call_timeout: float | None = None,
            max_payload: int = 1 << 30) -> RPCSession:
    """Open a session on the RPC server at ``url:port``.

    ``key``: the device key the server must serve ("" accepts any); ``session_timeout``: the
    server ends the session after that many seconds (0: never); ``token``: the server's token
    (printed when it started, or ``Server.token``; proved by HMAC, never sent; None only for a
    server started with ``--insecure-no-token``); ``timeout``: seconds for the TCP connection
    and the handshake, including a wait for a busy server's session slot; ``call_timeout``:
    seconds to wait for each reply (None: no limit)."""
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"rpc.connect: bad port {port!r}")
    try:
        sock = socket.create_connection((url, port), timeout=timeout)
    except OSError as e:
        raise ConnectionError(f"rpc.connect: cannot reach {url}:{port}: {e}") from None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        server_limits = _handshake(sock, url, port, key, session_timeout, token)
    except TimeoutError:
        sock.close()
        raise TimeoutError(f"rpc.connect: no handshake from {url}:{port} within {timeout:g} s "
                           "(busy server, or not a tvmpy rpc server?)") from None
    except BaseException:
        sock.close()
        raise
    sock.settimeout(call_timeout)
    sess = RPCSession(sock, f"{url}:{port}", key, Limits(max_payload=max_payload))
    sess._server_limits = server_limits
    return sess


def _handshake(sock: socket.socket, url: str, port: int, key: str, session_timeout: float,
               token: str | None) -> Limits:
    small = Limits(max_header=65536, max_payload=0)
    where = f"rpc server {url}:{port}"
    try:
        greet, _ = recv_frame(sock, small)
    except EOFError:
        raise RPCError(f"{where} closed the connection before greeting") from None
    if greet.get("ok") is False:
        raise_remote(greet.get("error"), where)
    if greet.get("proto") != PROTOCOL or greet.get("version") != VERSION:
        raise ProtocolError(f"{where} is not a tvmpy rpc server of protocol version {VERSION}")
    if greet.get("auth") and not token:
        raise AuthenticationError(f"{where} requires a token: rpc.connect(..., token=...)")
    if token and not greet.get("auth"):
        raise AuthenticationError(f"{where} was started without a token and cannot prove its "
                                  "identity; connect without token= to use it")
    try:
        nonce = bytes.fromhex(str(greet.get("nonce", "")))
        limits = Limits(int(greet.get("max_header", 1 << 20)),
                        int(greet.get("max_payload", 1 << 30)))
    except (ValueError, TypeError) as e:
        raise ProtocolError(f"{where}: bad greeting ({e})") from None
    cnonce = secrets.token_bytes(32)
    send_frame(sock, {"proto": PROTOCOL, "version": VERSION, "key": key,
                      "session_timeout": float(session_timeout), "cnonce": cnonce.hex(),
                      "mac": mac(token, b"client", nonce, cnonce) if token else None})
    try:
        reply, _ = recv_frame(sock, small)
    except EOFError:
        raise RPCError(f"{where} closed the connection during the handshake") from None
    if not reply.get("ok"):
        raise_remote(reply.get("error"), where)
    if token and not same_secret(str(reply.get("proof")), mac(token, b"server", cnonce, nonce)):
        raise AuthenticationError(f"{where} failed to prove it knows the token")
    return limits


class RemoteDevice(Device):
    """A device of an RPC session's server (``remote.cpu(0)``)."""

    __slots__ = ("_rpc_sess",)

    def __init__(self, sess: RPCSession, device_type: int, device_id: int = 0):
        super().__init__(device_type, device_id)
        self._rpc_sess = sess

    @property
    def exist(self) -> bool:
        return self.device_type == 1 and not self._rpc_sess._closed

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RemoteDevice) and other._rpc_sess is self._rpc_sess
                and super().__eq__(other))

    def __hash__(self) -> int:
        return hash((id(self._rpc_sess), self.device_type, self.device_id))

    def __str__(self) -> str:
        return f"remote[{self._rpc_sess.address}]:{self.name}({self.device_id})"

    def __repr__(self) -> str:
        return f"RemoteDevice({self._rpc_sess.address}, {self.name}, {self.device_id})"


class _RemoteObject:
    def __init__(self, sess: RPCSession, handle: int):
        self._sess = sess
        self._handle = handle

    def __del__(self) -> None:
        sess = getattr(self, "_sess", None)
        if sess is not None and not sess._closed:
            sess._free.append(self._handle)


class RemoteNDArray(_RemoteObject):
    """An array in the server's memory: ``.numpy()`` copies it here, ``.copyfrom(x)`` there."""

    def __init__(self, sess: RPCSession, handle: int, shape: Sequence[int], dtype: str,
                 dev: RemoteDevice):
        super().__init__(sess, handle)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = str(dtype)
        self.device = dev

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def numpy(self) -> np.ndarray:
        out = self._sess._call({"op": "nd_numpy", "h": self._handle})
        return np.array(out, copy=True)

    asnumpy = numpy

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def copyfrom(self, source: Any) -> RemoteNDArray:
        if not isinstance(source, (RemoteNDArray, NDArray, np.ndarray)):
            source = np.asarray(source)
        if tuple(source.shape) != self.shape:
            raise ValueError(f"copyfrom: shape mismatch: array has shape {self.shape}, source "
                             f"has {tuple(source.shape)}")
        if isinstance(source, RemoteNDArray) and source._sess is not self._sess:
            source = source.numpy()
        self._sess._call({"op": "nd_copyfrom", "h": self._handle}, [source])
        return self

    def copyto(self, target: Any) -> Any:
        if isinstance(target, (RemoteNDArray, NDArray)):
            return target.copyfrom(self if isinstance(target, RemoteNDArray) else self.numpy())
        if isinstance(target, Device):
            return nd.array(self.numpy(), target)
        raise TypeError(f"copyto expects an array or a Device, got {type(target).__name__}")

    def __repr__(self) -> str:
        return f"<RemoteNDArray shape={self.shape}, dtype={self.dtype}, {self.device}>"

    def __len__(self) -> int:
        return self.shape[0]


class RemoteFunction(_RemoteObject):
    """A function on the server; calling it sends the arguments (remote arrays by handle, numpy
    arrays and local NDArrays by value, scalars, strings) and returns its result. Arrays sent by
    value are copies: what the function writes into them stays there, so pass remote arrays
    (``tvm.nd.empty(shape, dtype, remote_dev)``) for outputs."""

    def __init__(self, sess: RPCSession, handle: int, name: str = ""):
        super().__init__(sess, handle)
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        header: dict = {"op": "call", "h": self._handle}
        return self._sess._call(header, list(args), kwargs)

    def __repr__(self) -> str:
        return f"RemoteFunction({self.name!r} on {self._sess.address})"


class RemoteModule(_RemoteObject):
    """A module loaded on the server: ``mod[name]`` / ``get_function`` give RemoteFunctions,
    ``time_evaluator`` times on the device."""

    def __init__(self, sess: RPCSession, handle: int, type_key: str = "", entry: str = ""):
        super().__init__(sess, handle)
        self.type_key = type_key
        self.entry_name = entry

    def get_function(self, name: str, query_imports: bool = True) -> Any:
        return self._sess._call({"op": "get_function", "h": self._handle, "name": name})

    def __getitem__(self, name: str) -> Any:
        return self.get_function(name)

    def __call__(self, *args: Any) -> Any:
        if not self.entry_name:
            raise ValueError("this remote module has no entry function; use mod[name](...)")
        return self.get_function(self.entry_name)(*args)

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
                       f_preproc: str = "") -> Callable[..., BenchmarkResult]:
        """``evaluate(*args) -> BenchmarkResult`` (seconds per call), timed on the server's
        clock around the calls only: the network is not counted."""
        opts = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                "cooldown_interval_ms": cooldown_interval_ms, "f_preproc": f_preproc}

        def evaluate(*args: Any) -> BenchmarkResult:
            header = {"op": "time_evaluator", "h": self._handle, "name": func_name, "opts": opts,
                      "dev": self._sess._encode_device(dev)}
            return self._sess._call(header, list(args))

        return evaluate

    def __repr__(self) -> str:
        return f"RemoteModule({self.type_key!r} on {self._sess.address})"


class RemoteGraphExecutor(RemoteModule):
    """A graph executor on the server (``rlib["default"](dev)``); wrap it in
    ``graph_executor.GraphModule`` as with a local one."""

    _is_graph_executor = True

    def __init__(self, sess: RPCSession, handle: int):
        super().__init__(sess, handle, "GraphExecutor", "")
        self._funcs: dict[str, RemoteFunction] = {}

    def _f(self, name: str) -> RemoteFunction:
        f = self._funcs.get(name)
        if f is None:
            f = self._funcs[name] = self.get_function(name)
        return f

    def set_input(self, key: Any = None, value: Any = None, **params: Any) -> None:
        self._f("set_input")(key, value, **params)

    def run(self, **inputs: Any) -> None:
        if inputs:
            self.set_input(**inputs)
        self._f("run")()

    def get_output(self, index: int, out: Any = None) -> Any:
        res = self._f("get_output")(index)
        if out is None:
            return res
        if isinstance(out, np.ndarray):
            np.copyto(out, res.numpy())
            return out
        return out.copyfrom(res if isinstance(out, RemoteNDArray) else res.numpy())

    def get_input(self, index: Any, out: Any = None) -> Any:
        res = self._f("get_input")(index)
        return res if out is None else out.copyfrom(res.numpy())

    def get_num_outputs(self) -> int:
        return int(self._f("get_num_outputs")())

    def get_num_inputs(self) -> int:
        return int(self._f("get_num_inputs")())

    def get_input_index(self, name: str) -> int:
        return int(self._f("get_input_index")(name))

    def get_input_info(self) -> tuple[dict, dict]:
        shapes, dtypes = self._f("get_input_info")()
        return {k: tuple(v) for k, v in shapes.items()}, dtypes

    def load_params(self, params_bytes: bytes) -> None:
        self._f("load_params")(bytes(params_bytes))

    def benchmark(self, device: Device | None = None, func_name: str = "run", repeat: int = 5,
                  number: int = 5, min_repeat_ms: float | None = None, *args: Any,
                  **kwargs: Any) -> BenchmarkResult:
        return self._f("benchmark")(device, func_name, repeat, number, min_repeat_ms, *args,
                                    **kwargs)

    def __repr__(self) -> str:
        return f"RemoteGraphExecutor(on {self._sess.address})"


class RPCSession:
    """A session on an RPC server (from :func:`connect`, or a tracker's ``request``)."""

    def __init__(self, sock: socket.socket, address: str, key: str = "",
                 limits: Limits | None = None):
        self._sock = sock
        self.address = address
        self.key = key
        self._limits = limits or Limits()
        self._lock = threading.Lock()
        self._free: list[int] = []
        self._closed = False
        self._server_limits = Limits()

    # ---- plumbing ---------------------------------------------------------------------------
    def _encode_obj(self, v: Any, payloads: list) -> Any:
        if isinstance(v, _RemoteObject):
            if v._sess is not self:
                raise ValueError(f"{v!r} belongs to another RPC session")
            return {"__t": "ref", "h": v._handle}
        if isinstance(v, Device):
            return self._encode_device(v)
        if isinstance(v, NDArray):
            return encode(v.numpy(), payloads)
        return NotImplemented

    def _encode_device(self, dev: Any) -> dict:
        if not isinstance(dev, RemoteDevice) or dev._rpc_sess is not self:
            raise ValueError(f"expected a device of this RPC session (remote.cpu(0)), got {dev!r}")
        return {"__t": "dev", "type": dev.device_type, "id": dev.device_id}

    def _decode_obj(self, obj: dict) -> Any:
        tag = obj.get("__t")
        if tag == "bench":
            return BenchmarkResult(obj.get("results") or [0.0])
        if tag == "dev":
            return RemoteDevice(self, int(obj["type"]), int(obj["id"]))
        if tag != "ref":
            raise ProtocolError(f"unknown RPC value tag {tag!r}")
        h, kind = obj.get("h"), obj.get("kind")
        if not isinstance(h, int):
            raise ProtocolError(f"bad remote handle {h!r}")
        if kind == "ndarray":
            return RemoteNDArray(self, h, obj.get("shape") or [], str(obj.get("dtype")),
                                 self.cpu(0))
        if kind == "executor":
            return RemoteGraphExecutor(self, h)
        if kind == "module":
            return RemoteModule(self, h, str(obj.get("type_key", "")), str(obj.get("entry", "")))
        if kind == "function":
            return RemoteFunction(self, h, str(obj.get("name", "")))
        raise ProtocolError(f"unknown remote object kind {kind!r}")

    def _call(self, header: dict, args: list | None = None, kwargs: dict | None = None,
              raw: Sequence[Any] = ()) -> Any:
        payloads: list = list(raw)
        if args is not None:
            header["args"] = encode(args, payloads, self._encode_obj)
        if kwargs:
            header["kwargs"] = encode(kwargs, payloads, self._encode_obj)
        where = f"rpc server {self.address}"
        size = sum(len(byte_view(p)) for p in payloads)
        if size > self._server_limits.max_payload:
            raise ValueError(f"{header.get('op')}: {size} bytes of data exceed the message limit "
                             f"of {where} ({self._server_limits.max_payload} bytes)")
        with self._lock:
            if self._closed:
                raise RPCError(f"the RPC session with {self.address} is closed")
            if self._free:
                header["free"], self._free = self._free, []
            try:
                send_frame(self._sock, header, payloads)
                reply, data = recv_frame(self._sock, self._limits)
            except TimeoutError:
                self._shutdown()
                raise TimeoutError(f"{where}: no reply within the call timeout") from None
            except EOFError:
                self._shutdown()
                raise RPCError(f"{where} closed the session") from None
            except ProtocolError:
                self._shutdown()
                raise
            except OSError as e:
                self._shutdown()
                raise RPCError(f"connection to {where} lost: {e}") from None
        if reply.get("closed"):
            self._shutdown()
        if not reply.get("ok"):
            raise_remote(reply.get("error"), where)
        return decode(reply.get("result"), data, self._decode_obj)

    def _shutdown(self) -> None:
        self._closed = True
        try:
            self._sock.close()
        except OSError:
            pass

    # ---- TVM's RPCSession API ----------------------------------------------------------------
    def upload(self, data: str | bytes | os.PathLike, target: str | None = None) -> None:
        """Upload a local file (path) or ``bytes`` (then ``target`` names the file)."""
        if isinstance(data, (bytes, bytearray, memoryview)):
            if not target:
                raise ValueError("upload(bytes) needs target=<file name on the server>")
            blob = bytes(data)
        else:
            path = os.fspath(data)
            size = os.path.getsize(path)
            if size > self._limits.max_payload:
                raise ValueError(f"upload: {path} has {size} bytes, more than the message limit "
                                 f"of {self._limits.max_payload}")
            with open(path, "rb") as f:
                blob = f.read()
            target = target or os.path.basename(path)
        self._call({"op": "upload", "name": target}, raw=[blob])

    def download(self, name: str) -> bytes:
        return self._call({"op": "download", "name": name})

    def remove(self, name: str) -> None:
        self._call({"op": "remove", "name": name})

    def listdir(self, name: str = ".") -> list[str]:
        return self._call({"op": "listdir", "name": name})

    def load_module(self, name: str) -> RemoteModule:
        return self._call({"op": "load_module", "name": name})

    def get_function(self, name: str) -> RemoteFunction:
        """A function registered on the server (e.g. ``"runtime.measure"``)."""
        return self._call({"op": "get_function", "h": None, "name": name})

    def device(self, dev_type: str | int, dev_id: int = 0) -> RemoteDevice:
        code = dev_type if isinstance(dev_type, int) else DEVICE_TYPES.get(str(dev_type).lower())
        if code is None:
            raise ValueError(f"unknown device {dev_type!r}; known: {', '.join(sorted(DEVICE_TYPES))}")
        return RemoteDevice(self, code, dev_id)

    def cpu(self, dev_id: int = 0) -> RemoteDevice:
        return RemoteDevice(self, 1, dev_id)

    def ext_dev(self, dev_id: int = 0) -> RemoteDevice:
        """TVM's ``remote.ext_dev`` (a ``--device vta`` server): arrays in the server's host
        memory, which its VTA modules copy into the simulated DRAM."""
        return RemoteDevice(self, 1, dev_id)

    # TVM's names of the GPU devices of a session (remote.cl(0) in its tutorials)
    def cl(self, dev_id: int = 0) -> RemoteDevice:
        return self.device("opencl", dev_id)

    def cuda(self, dev_id: int = 0) -> RemoteDevice:
        return self.device("cuda", dev_id)

    opencl, gpu = cl, cuda

    def ping(self) -> Any:
        return self._call({"op": "ping"})

    def _nd_array(self, arr: Any, dev: RemoteDevice, dtype: Any = None) -> RemoteNDArray:
        if isinstance(arr, RemoteNDArray):
            arr = arr.numpy()
        src = arr.numpy() if isinstance(arr, NDArray) else np.asarray(arr)
        if dtype is not None:
            src = src.astype(check_dtype(np.dtype(dtype) if not isinstance(dtype, str) else dtype))
        payloads: list = []
        value = encode(src, payloads)
        return self._call({"op": "nd_array", "value": value,
                           "dev": self._encode_device(dev)}, raw=payloads)

    def _nd_empty(self, shape: Any, dtype: Any, dev: RemoteDevice) -> RemoteNDArray:
        shape = [int(s) for s in ((shape,) if isinstance(shape, (int, np.integer)) else shape)]
        dt = check_dtype(np.dtype(dtype).name if not isinstance(dtype, str) else dtype)
        return self._call({"op": "nd_empty", "shape": shape, "dtype": dt.name,
                           "dev": self._encode_device(dev)})

    def close(self) -> None:
        """End the session (the server deletes its directory)."""
        if self._closed:
            return
        try:
            with self._lock:
                send_frame(self._sock, {"op": "close"})
                recv_frame(self._sock, self._limits)
        except (OSError, EOFError, ProtocolError):
            pass
        self._shutdown()

    def __enter__(self) -> RPCSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._shutdown()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"RPCSession({self.address}{', closed' if self._closed else ''})"


class LocalSession:
    """The RPC session API on this process (TVM's ``rpc.LocalSession``): files go to a private
    temporary directory, modules load here, devices are local."""

    def __init__(self) -> None:
        self._session = Session(tempfile.mkdtemp(prefix="tvmpy_rpc_local_"))
        self.address = "local"
        self.key = "local"

    def upload(self, data: str | bytes | os.PathLike, target: str | None = None) -> None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            if not target:
                raise ValueError("upload(bytes) needs target=<file name>")
            self._session.upload(target, bytes(data))
            return
        with open(os.fspath(data), "rb") as f:
            self._session.upload(target or os.path.basename(os.fspath(data)), f.read())

    def download(self, name: str) -> bytes:
        return self._session.download(name)

    def remove(self, name: str) -> None:
        self._session.remove(name)

    def listdir(self, name: str = ".") -> list[str]:
        return self._session.listdir(name)

    def load_module(self, name: str) -> Module:
        return self._session.load_module(name)

    def get_function(self, name: str) -> Callable[..., Any]:
        return get_global_func(name, self._session)

    def cpu(self, dev_id: int = 0) -> Device:
        return cpu(dev_id)

    def ext_dev(self, dev_id: int = 0) -> Device:
        """TVM's ``remote.ext_dev`` (VTA): its arrays live in host memory (a VTA module copies
        them into the simulated DRAM), so this is the host's memory device."""
        return cpu(dev_id)

    def cl(self, dev_id: int = 0) -> Device:
        return self.device("opencl", dev_id)

    def cuda(self, dev_id: int = 0) -> Device:
        return self.device("cuda", dev_id)

    opencl, gpu = cl, cuda

    def device(self, dev_type: str | int, dev_id: int = 0) -> Device:
        return nd.device(dev_type, dev_id)

    def close(self) -> None:
        shutil.rmtree(self._session.workdir, ignore_errors=True)

    def __enter__(self) -> LocalSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
