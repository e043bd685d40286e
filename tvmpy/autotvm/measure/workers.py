"""Persistent worker processes for the builder and the runner.

A :class:`WorkerProcess` is one child process started with a ``spawn`` (default) or
``forkserver`` multiprocessing context: the child does not inherit the parent's LLVM state,
loaded kernels or libgomp threads. The child runs ``serve(conn, handler, init)``: it calls
``init(*init_args)`` once (imports, task unpickling), answers ``("ready",)`` (or
``("init_error", message)``), then answers each request ``msg`` with ``handler(state, msg)``
until it receives ``None`` or the pipe closes.

The parent side never blocks without a deadline: ``wait_ready`` / ``recv`` take a timeout; a
child that dies is reported with its exit signal (``describe_death``), and ``kill`` ends it
(the caller then starts a fresh one).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["WorkerProcess", "WorkerDied", "get_context", "serve"]


class WorkerDied(RuntimeError):
    """The worker process exited while the parent waited for an answer."""


def get_context(method: str | None) -> Any:
    """The multiprocessing context: ``"spawn"`` (default) or ``"forkserver"``/``"fork"``."""
    method = method or "spawn"
    if method not in multiprocessing.get_all_start_methods():
        raise ValueError(f"multiprocessing start method {method!r} is not available here; "
                         f"known: {multiprocessing.get_all_start_methods()}")
    return multiprocessing.get_context(method)


def serve(conn: Any, handler: Callable[[Any, Any], Any], init: Callable[..., Any],
          init_args: tuple) -> None:
    """Child main loop (see the module docstring)."""
    # Ctrl-C in a terminal reaches the whole process group: the parent handles it (and kills
    # its workers); a worker printing its own KeyboardInterrupt traceback only adds noise
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        state = init(*init_args)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("init_error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"))
        return
    conn.send(("ready",))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        conn.send(handler(state, msg))


def describe_death(exitcode: int | None) -> str:
    if exitcode is None:
        return "process crashed (still running)"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown"
        return f"process crashed (signal {-exitcode}, {name})"
    return f"process exited with code {exitcode}"


def _start_hint(w: WorkerProcess) -> str:
    main = sys.modules.get("__main__")
    if (w.process.exitcode or 0) > 0 and getattr(main, "__file__", None):
        return (f"; a spawned worker first re-runs the main script {main.__file__}: put the "
                f"script's tuning code under `if __name__ == \"__main__\":` (its error is printed "
                f"above), or pass mp_context=\"fork\"")
    return ""


class WorkerProcess:
    """Parent-side handle of one worker child."""

    def __init__(self, ctx: Any, handler: Callable[[Any, Any], Any], init: Callable[..., Any],
                 init_args: tuple = ()):
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self.conn = parent_conn
        self.process = ctx.Process(target=serve, args=(child_conn, handler, init, init_args),
                                   daemon=True)
        self.process.start()
        child_conn.close()
        self.ready = False
        self.jobs_done = 0
        self.busy_since: float | None = None

    @property
    def sentinel(self) -> Any:
        return self.process.sentinel

    def alive(self) -> bool:
        return self.process.is_alive()

    def _recv(self, timeout: float | None) -> Any:
        """One answer, or None on timeout; WorkerDied if the child is gone."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait([self.conn, self.process.sentinel], left)
            if self.conn in ready:
                try:
                    return self.conn.recv()
                except (EOFError, OSError):
                    pass  # the child died after or while writing: fall through
            if self.conn in ready or self.process.sentinel in ready:
                if self.conn.poll(0):
                    try:
                        return self.conn.recv()
                    except (EOFError, OSError):
                        pass
                self.process.join(1.0)
                raise WorkerDied(describe_death(self.process.exitcode))
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def wait_ready(self, timeout: float) -> None:
        """Wait for the child's init; raise RuntimeError on failure or timeout."""
        if self.ready:
            return
        try:
            msg = self._recv(timeout)
        except WorkerDied as e:
            raise RuntimeError(f"worker process failed to start: {e}{_start_hint(self)}") from None
        if msg is None:
            self.kill()
            raise RuntimeError(f"worker process did not start within {timeout:g} s")
        if msg[0] != "ready":
            self.kill()
            raise RuntimeError(f"worker process failed to start: {msg[1]}")
        self.ready = True

    def send(self, msg: Any) -> None:
        self.conn.send(msg)
        self.busy_since = time.monotonic()

    def recv(self, timeout: float | None) -> Any:
        """The answer to the last request, None on timeout, WorkerDied if the child died."""
        msg = self._recv(timeout)
        if msg is not None:
            self.busy_since = None
            self.jobs_done += 1
        return msg

    def kill(self) -> None:
        """End the child now (SIGKILL) and release the pipe."""
        if self.process.is_alive():
            try:
                os.kill(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, TypeError):
                pass
        self.process.join(5.0)
        self.conn.close()

    def shutdown(self, timeout: float = 2.0) -> None:
        """Ask the child to exit; kill it if it does not within ``timeout``."""
        if self.process.is_alive():
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                pass
            self.process.join(timeout)
        self.kill()
