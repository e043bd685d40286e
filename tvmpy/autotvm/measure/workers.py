"""Persistent worker processes for the builder and the runner.

A :class:`WorkerProcess` is one child process. By default (``"popen"``) it is a fresh
interpreter, ``python -m tvmpy.autotvm.measure.worker``, that talks to the parent over a socket
pair: unlike multiprocessing's ``spawn`` it never imports the user's ``__main__``, so a tuning
script written at module top level (no ``if __name__ == "__main__":``) works; templates defined
in that script reach the worker by value (cloudpickle, see local_builder.py). The multiprocessing
contexts ``spawn``/``forkserver``/``fork`` remain available. Either way the child does not
inherit the parent's LLVM state, loaded kernels or libgomp threads (except ``fork``).
The child runs ``serve(conn, handler, init)``: it calls
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
import pickle
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["WorkerProcess", "WorkerDied", "get_context", "serve", "POPEN"]

POPEN = "popen"
"""The default worker kind: a fresh interpreter (``python -m tvmpy.autotvm.measure.worker``)."""


class WorkerDied(RuntimeError):
    """The worker process exited while the parent waited for an answer."""


def get_context(method: str | None) -> Any:
    """``"popen"`` (default: a fresh interpreter) or a multiprocessing context
    (``"spawn"``/``"forkserver"``/``"fork"``)."""
    method = method or POPEN
    if method == POPEN:
        return POPEN
    if method not in multiprocessing.get_all_start_methods():
        raise ValueError(f"worker start method {method!r} is not available here; known: "
                         f"{[POPEN] + multiprocessing.get_all_start_methods()}")
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
    if isinstance(w.process, _PopenProcess):
        return " (its error is printed above)" if (w.process.exitcode or 0) > 0 else ""
    if (w.process.exitcode or 0) > 0 and getattr(main, "__file__", None):
        return (f"; a spawned worker first re-runs the main script {main.__file__}: put the "
                f"script's tuning code under `if __name__ == \"__main__\":` (its error is printed "
                f"above), or pass mp_context=\"fork\"")
    return ""


class _PopenProcess:
    """A fresh interpreter running :mod:`tvmpy.autotvm.measure.worker`, with the parts of
    ``multiprocessing.Process``'s interface that :class:`WorkerProcess` uses. ``sentinel`` is
    the read end of a pipe whose only write end the child holds: it becomes readable (EOF) when
    the child exits, so ``multiprocessing.connection.wait`` can watch it."""

    def __init__(self, child_fd: int):
        # the folder holding the tvmpy package (tvmpy/autotvm/measure/workers.py)
        root = os.path.abspath(__file__)
        for _ in range(4):
            root = os.path.dirname(root)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]]
                                                      if env.get("PYTHONPATH") else []))
        death_r, death_w = os.pipe()
        try:
            self._popen = subprocess.Popen(
                [sys.executable, "-m", "tvmpy.autotvm.measure.worker", str(child_fd),
                 str(death_w)], pass_fds=(child_fd, death_w), env=env, stdin=subprocess.DEVNULL)
        except BaseException:
            os.close(death_r)
            raise
        finally:
            os.close(death_w)
        self.sentinel = death_r
        self.pid = self._popen.pid

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """Release the sentinel (once the child is gone or killed)."""
        if self.sentinel >= 0:
            os.close(self.sentinel)
            self.sentinel = -1

    def __del__(self) -> None:
        self.close()


def _start_popen(handler: Callable[[Any, Any], Any], init: Callable[..., Any],
                 init_args: tuple) -> tuple[Any, _PopenProcess]:
    parent_sock, child_sock = socket.socketpair()
    try:
        conn = multiprocessing.connection.Connection(parent_sock.detach())
        try:
            process = _PopenProcess(child_sock.fileno())
        except BaseException:
            conn.close()
            raise
    finally:
        child_sock.close()
    # the child's first message: where to import from (as multiprocessing's spawn does) and
    # what to serve; handler and init are module-level functions, pickled by name
    conn.send_bytes(pickle.dumps((list(sys.path), handler, init, init_args)))
    return conn, process


class WorkerProcess:
    """Parent-side handle of one worker child (``ctx``: :func:`get_context`'s result)."""

    def __init__(self, ctx: Any, handler: Callable[[Any, Any], Any], init: Callable[..., Any],
                 init_args: tuple = ()):
        self.process: Any
        if ctx == POPEN:
            self.conn, self.process = _start_popen(handler, init, init_args)
        else:
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
        if isinstance(self.process, _PopenProcess) and not self.process.is_alive():
            self.process.close()

    def shutdown(self, timeout: float = 2.0) -> None:
        """Ask the child to exit; kill it if it does not within ``timeout``."""
        if self.process.is_alive():
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                pass
            self.process.join(timeout)
        self.kill()
