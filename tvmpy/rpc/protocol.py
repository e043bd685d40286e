"""The wire format of tvmpy's RPC: length-prefixed frames over TCP, JSON headers, raw payloads.

A frame is ``MAGIC | header length (u32) | payload count (u32) | payload bytes (u64)``, then
the payload lengths (u64 each), the UTF-8 JSON header and the payloads. Every length is checked
against the receiver's limits *before* anything is allocated; a frame that breaks them raises
:class:`ProtocolError` and the receiver closes the connection. Nothing received is ever
unpickled: values are JSON plus tagged objects (``{"__t": "nd", ...}``) whose array data and
file contents travel as raw payloads (numeric dtypes only).

Authentication is an HMAC-SHA256 challenge-response over both sides' nonces, so the shared
token never crosses the network and a recorded exchange cannot be replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["RPCError", "ProtocolError", "FrameTimeout", "AuthenticationError", "Limits",
           "send_frame", "recv_frame", "check_prefix", "FrameReader", "encode_frame",
           "frame_deadline", "encode", "decode", "check_dtype", "mac", "raise_remote",
           "error_header", "same_secret", "PROTOCOL", "VERSION"]

PROTOCOL = "tvmpy-rpc"
VERSION = 1
MAGIC = b"TVRP"
_PREFIX = struct.Struct("!4sIIQ")
_LEN = struct.Struct("!Q")
MAX_PAYLOADS = 1024
MIN_RATE = 1 << 20  # bytes/s a frame's deadline allows for its payload (see frame_deadline)
_DTYPE_RE = re.compile(r"^(bool|u?int(8|16|32|64)|float(16|32|64))$")


class RPCError(RuntimeError):
    """An RPC failure that is not an exception raised by the remote code itself."""


class ProtocolError(RPCError):
    """A malformed, truncated or oversized frame: the connection is closed."""


class FrameTimeout(ProtocolError):
    """A frame did not arrive whole within its deadline (a truncated or stalled frame)."""


class AuthenticationError(RPCError):
    """The peer failed the token challenge (or one side has a token and the other none)."""


class Limits:
    """Largest JSON header and largest total payload of one frame, in bytes, and most
    payloads (at most MAX_PAYLOADS)."""

    def __init__(self, max_header: int = 1 << 20, max_payload: int = 1 << 30,
                 max_payloads: int = MAX_PAYLOADS):
        if max_header < 1024 or max_payload < 0 or not 0 <= max_payloads <= MAX_PAYLOADS:
            raise ValueError(f"RPC limits too small: max_header={max_header}, "
                             f"max_payload={max_payload}, max_payloads={max_payloads}")
        self.max_header = int(max_header)
        self.max_payload = int(max_payload)
        self.max_payloads = int(max_payloads)


def _recv_exact(sock: socket.socket, n: int, what: str, at_start: bool = False,
                deadline: float | None = None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:  # the whole frame, not each recv, is bounded in time
            left = deadline - time.monotonic()
            if left <= 0:
                raise FrameTimeout(f"frame not complete within its deadline ({what}: got {got} "
                                   f"of {n} bytes): truncated or stalled frame")
            sock.settimeout(left)
        try:
            k = sock.recv_into(view[got:], n - got)
        except TimeoutError:
            if deadline is None:
                raise
            continue  # the deadline check above reports it
        if k == 0:
            if at_start and got == 0:
                raise EOFError("connection closed by the peer")
            raise ProtocolError(f"connection closed in the middle of a frame ({what}: got {got} "
                                f"of {n} bytes)")
        got += k
    return buf


def byte_view(p: Any) -> Any:
    """``p`` (bytes-like or numpy array) as a flat view of its bytes."""
    if isinstance(p, (bytes, bytearray)):
        return p
    if isinstance(p, np.ndarray):
        return np.ascontiguousarray(p).reshape(-1).view(np.uint8).data
    return memoryview(p).cast("B")


def send_frame(sock: socket.socket, header: dict, payloads: Sequence[Any] = ()) -> None:
    """Send one frame; ``payloads`` are bytes-like (C-contiguous numpy arrays included)."""
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    views = [byte_view(p) for p in payloads]
    sizes = [len(v) for v in views]
    parts = [_PREFIX.pack(MAGIC, len(head), len(views), sum(sizes))]
    parts += [_LEN.pack(s) for s in sizes]
    parts.append(head)
    small = b"".join(parts)
    if sum(sizes) <= 65536:  # one write: no Nagle/delayed-ACK round trip for small messages
        sock.sendall(small + b"".join(bytes(v) for v in views))
        return
    sock.sendall(small)
    for v in views:
        sock.sendall(v)


def check_prefix(prefix: bytes | bytearray, limits: Limits) -> tuple[int, int, int]:
    """``(header length, payload count, payload bytes)`` of a frame prefix, every one checked
    against ``limits`` (raises ProtocolError)."""
    magic, head_len, count, total = _PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ProtocolError(f"bad frame: magic {bytes(magic)!r}, expected {MAGIC!r} (not a "
                            "tvmpy RPC peer?)")
    if head_len > limits.max_header:
        raise ProtocolError(f"frame header of {head_len} bytes exceeds the limit of "
                            f"{limits.max_header} bytes")
    if count > limits.max_payloads:
        raise ProtocolError(f"frame has {count} payloads, more than the limit of "
                            f"{limits.max_payloads}")
    if total > limits.max_payload:
        raise ProtocolError(f"frame payload of {total} bytes exceeds the limit of "
                            f"{limits.max_payload} bytes")
    return head_len, count, total


def _parse_header(raw: bytes | bytearray) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ProtocolError(f"bad frame: the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise ProtocolError("bad frame: the header is not a JSON object")
    return header


def frame_deadline(timeout: float, payload_bytes: int = 0) -> float:
    """When a frame started now must be complete: ``timeout`` seconds, plus one second per
    MIN_RATE bytes of payload (a large upload on a slow link is not cut off)."""
    return time.monotonic() + timeout + payload_bytes / MIN_RATE


def recv_frame(sock: socket.socket, limits: Limits,
               timeout: float | None = None) -> tuple[dict, list[bytearray]]:
    """Receive one frame, checking every length against ``limits`` before allocating.
    Raises EOFError on a clean close before the frame, ProtocolError on a bad frame.

    ``timeout``: the whole frame must arrive within that many seconds (plus the payload's
    allowance, :func:`frame_deadline`), else :class:`FrameTimeout`; None: the socket's own
    per-recv timeout applies. With a timeout, the socket's timeout is changed."""
    deadline = None if timeout is None else frame_deadline(timeout)
    head_len, count, total = check_prefix(
        _recv_exact(sock, _PREFIX.size, "frame prefix", at_start=True, deadline=deadline),
        limits)
    if timeout is not None:
        deadline = frame_deadline(timeout, total)
    sizes = [_LEN.unpack_from(_recv_exact(sock, 8, "payload length", deadline=deadline))[0]
             for _ in range(count)]
    if sum(sizes) != total:
        raise ProtocolError(f"bad frame: payload lengths add up to {sum(sizes)}, the prefix "
                            f"says {total}")
    header = _parse_header(_recv_exact(sock, head_len, "header", deadline=deadline))
    return header, [_recv_exact(sock, s, "payload", deadline=deadline) for s in sizes]


class FrameReader:
    """One frame read from a non-blocking socket piece by piece (the server's handshake):
    :meth:`wants` bytes are read and given to :meth:`feed` until it returns the frame. Lengths
    are checked against ``limits`` before anything is allocated, as in :func:`recv_frame`."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._buf = bytearray()
        self._need = _PREFIX.size
        self._head: tuple[int, int, int] | None = None

    def wants(self) -> int:
        return self._need - len(self._buf)

    def feed(self, data: bytes) -> tuple[dict, list[bytes]] | None:
        if len(data) > self.wants():
            raise ValueError("FrameReader.feed: more bytes than wanted")
        self._buf += data
        if self.wants():
            return None
        if self._head is None:
            self._head = check_prefix(self._buf, self.limits)
            head_len, count, total = self._head
            self._need = _PREFIX.size + 8 * count + head_len + total
            if self.wants():
                return None
        head_len, count, total = self._head
        pos = _PREFIX.size
        sizes = [_LEN.unpack_from(self._buf, pos + 8 * i)[0] for i in range(count)]
        if sum(sizes) != total:
            raise ProtocolError(f"bad frame: payload lengths add up to {sum(sizes)}, the "
                                f"prefix says {total}")
        pos += 8 * count
        header = _parse_header(self._buf[pos:pos + head_len])
        pos += head_len
        payloads = []
        for size in sizes:
            payloads.append(bytes(self._buf[pos:pos + size]))
            pos += size
        return header, payloads


def encode_frame(header: dict) -> bytes:
    """A payload-less frame as bytes (sent at once on a non-blocking socket)."""
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return _PREFIX.pack(MAGIC, len(head), 0, 0) + head


# ---- values --------------------------------------------------------------------------------
def check_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype of a numeric dtype name; anything else (object, structured) is refused."""
    name = str(dtype)
    if not _DTYPE_RE.match(name):
        raise TypeError(f"RPC arrays must have a numeric dtype (bool, intN, uintN, floatN), "
                        f"got {name!r}")
    return np.dtype(name)


def check_shape(shape: Any) -> tuple[int, ...]:
    if (not isinstance(shape, list) or len(shape) > 64
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
        raise ProtocolError(f"bad array shape {shape!r}")
    return tuple(shape)


def array_from_payload(obj: dict, payloads: list) -> np.ndarray:
    """The numpy array an ``{"__t": "nd"}`` value describes (a view of its payload)."""
    dtype = check_dtype(obj.get("dtype"))
    shape = check_shape(obj.get("shape"))
    data = _payload(obj, payloads)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if n * dtype.itemsize != len(data):
        raise ProtocolError(f"array of shape {shape} and dtype {dtype} needs "
                            f"{n * dtype.itemsize} bytes, the payload has {len(data)}")
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def _payload(obj: dict, payloads: list) -> Any:
    i = obj.get("p")
    if not isinstance(i, int) or not 0 <= i < len(payloads):
        raise ProtocolError(f"bad payload reference {i!r}")
    return payloads[i]


def encode(value: Any, payloads: list, hook: Callable[[Any, list], Any] | None = None) -> Any:
    """A JSON-able form of ``value``; arrays and bytes are appended to ``payloads``. ``hook``
    encodes the objects this side knows (remote handles, devices); it returns NotImplemented
    for the others."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if hook is not None:
        out = hook(value, payloads)
        if out is not NotImplemented:
            return out
    if isinstance(value, np.ndarray):
        check_dtype(value.dtype)
        payloads.append(np.ascontiguousarray(value))
        return {"__t": "nd", "p": len(payloads) - 1, "shape": list(value.shape),
                "dtype": str(value.dtype)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        payloads.append(bytes(value))
        return {"__t": "bytes", "p": len(payloads) - 1}
    if isinstance(value, (list, tuple)):
        return [encode(v, payloads, hook) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("RPC: only dicts with str keys can be sent")
        return {"__t": "dict", "v": {k: encode(v, payloads, hook) for k, v in value.items()}}
    raise TypeError(f"RPC: cannot send a value of type {type(value).__name__}")


def decode(obj: Any, payloads: list, hook: Callable[[dict], Any] | None = None,
           depth: int = 0) -> Any:
    """The value ``encode`` wrote; tags other than nd/bytes/dict go to ``hook``."""
    if depth > 32:
        raise ProtocolError("RPC value nested too deeply")
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [decode(v, payloads, hook, depth + 1) for v in obj]
    if not isinstance(obj, dict):
        raise ProtocolError(f"bad RPC value {obj!r}")
    tag = obj.get("__t")
    if tag == "nd":
        return array_from_payload(obj, payloads)
    if tag == "bytes":
        return bytes(_payload(obj, payloads))
    if tag == "dict":
        v = obj.get("v")
        if not isinstance(v, dict):
            raise ProtocolError("bad RPC dict value")
        return {k: decode(x, payloads, hook, depth + 1) for k, x in v.items()}
    if hook is not None:
        return hook(obj)
    raise ProtocolError(f"unknown RPC value tag {tag!r}")


# ---- errors --------------------------------------------------------------------------------
_BUILTIN_ERRORS: dict[str, type[BaseException]] = {e.__name__: e for e in (
    ValueError, TypeError, KeyError, IndexError, RuntimeError, AttributeError, NotImplementedError,
    FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError,
    TimeoutError, OSError, MemoryError, ZeroDivisionError, OverflowError)}


def error_header(exc: BaseException, **extra: Any) -> dict:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    kind = type(exc).__name__
    if kind not in _BUILTIN_ERRORS and not isinstance(exc, RPCError):
        # report the nearest builtin base, so the client raises something it can catch
        kind = next((b.__name__ for b in type(exc).__mro__ if b.__name__ in _BUILTIN_ERRORS),
                    "RuntimeError")
    return {"ok": False, "error": {"type": kind, "message": str(msg)}, **extra}


def raise_remote(err: Any, where: str) -> None:
    """Raise the exception an error header describes (its builtin type, the server's message)."""
    if not isinstance(err, dict):
        raise ProtocolError(f"bad error from {where}: {err!r}")
    kind, msg = str(err.get("type", "RuntimeError")), str(err.get("message", ""))
    if kind == "AuthenticationError":
        raise AuthenticationError(msg)
    if kind in ("ProtocolError", "FrameTimeout"):
        raise ProtocolError(f"{where}: {msg}")
    if kind == "RPCError":
        raise RPCError(f"{where}: {msg}")
    cls = _BUILTIN_ERRORS.get(kind)
    if cls is None:
        raise RPCError(f"{kind} on {where}: {msg}")
    raise cls(msg)


def mac(token: str, *parts: bytes) -> str:
    """HMAC-SHA256 of ``parts`` under ``token`` (hex)."""
    h = hmac.new(token.encode("utf-8"), b"tvmpy-rpc-v1", hashlib.sha256)
    for p in parts:
        h.update(len(p).to_bytes(4, "big") + p)
    return h.hexdigest()


def same_secret(a: str, b: str) -> bool:
    """Constant-time comparison of two strings of any characters (``secrets.compare_digest``
    refuses non-ASCII str, which a hostile peer could send)."""
    return hmac.compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8", "replace"))
