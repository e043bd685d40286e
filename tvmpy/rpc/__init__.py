"""``tvm.rpc``: run and time compiled code on another machine or process (TVM's RPC API).

- ``connect(host, port, key, session_timeout, token)`` -> :class:`RPCSession` (client.py);
- ``Server`` / ``python -m tvmpy.rpc.server`` / ``tvmpy rpc server``: the device side
  (server.py, gate.py, session.py; imports only the runtime, numpy and the standard library);
  a token is required by default (generated and printed when none is given);
- ``LocalSession``: the same API in this process;
- protocol.py: the framed wire format (JSON headers, raw array payloads, never pickle), the
  size limits and the HMAC token challenge.
"""

from __future__ import annotations

import importlib
from typing import Any

from .client import (
    LocalSession,
    RemoteDevice,
    RemoteFunction,
    RemoteGraphExecutor,
    RemoteModule,
    RemoteNDArray,
    RPCSession,
    connect,
)
from .protocol import AuthenticationError, ProtocolError, RPCError
from .session import register_func

__all__ = ["connect", "connect_tracker", "LocalSession", "RPCSession", "Server", "RPCError",
           "ProtocolError", "AuthenticationError", "RemoteDevice", "RemoteNDArray",
           "RemoteModule", "RemoteFunction", "RemoteGraphExecutor", "register_func"]


def __getattr__(name: str) -> Any:
    # server.py loads on first use, so ``python -m tvmpy.rpc.server`` runs it as __main__ only
    if name == "Server":
        return importlib.import_module(".server", __name__).Server
    # the tracker (tracker.py, on Dask) loads on first use: the device side never needs it
    if name in ("connect_tracker", "Tracker"):
        return getattr(importlib.import_module(".tracker", __name__), name)
    raise AttributeError(f"module 'tvmpy.rpc' has no attribute {name!r}")
