"""The RPC server: ``python -m tvmpy.rpc.server`` on the device, ``rpc.Server`` from Python.

The listening process never blocks on a client: one loop (selectors) accepts connections and
runs their handshakes (gate.py: a deadline for the whole handshake, the oldest pending
connection pushed out when ``max_pending`` are open, failed authentications answered later
and later per peer address). Only an authenticated client gets a session: a forked process
with its own directory (mode 0700) that the listener deletes when the process ends, however
it ends (client gone, ``session_timeout``, ``idle_timeout`` without a request, a request frame
not whole within ``frame_timeout``, a crash in loaded code); a crash never takes the server
down. ``max_sessions`` sessions run at once (default 1: a device times one thing at a time, as
TVM's server and the fleet do); other authenticated clients wait in a queue and are refused
with "server busy" after ``queue_timeout`` seconds. A session ends, telling its client, when
the listener stops or disappears (a fleet's device that left).

Security: the server binds 127.0.0.1 unless told otherwise; any other address needs
``allow_remote`` and a token. A token is required by default: without one the server
generates a random token and prints it (``TOKEN_LINE``), as Jupyter does;
``--insecure-no-token`` opts out (loopback only). Weak tokens are refused. Clients answer an
HMAC challenge (the token never crosses the network) and the server proves it knows the token
too. Frames are size-checked before allocation and never unpickled (protocol.py). Device side:
imports the runtime, numpy and the standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from . import ports, session
from .gate import (
    TOKEN_ENV,
    Client,
    Gate,
    Policy,
    check_token,
    generate_token,
    resolve_token,
)
from .launch import wait_for_line
from .protocol import (
    MIN_RATE,
    Limits,
    ProtocolError,
    RPCError,
    byte_view,
    error_header,
    recv_frame,
    send_frame,
)
from .session import Session

__all__ = ["Server", "serve", "main", "LOOPBACK", "check_bind", "Policy", "TOKEN_ENV"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
READY = "tvmpy rpc server listening on"
TOKEN_LINE = "tvmpy rpc server token:"
DEVICES = ("native", "qemu-aarch64", "wasm", "vta")
#: modules a device's server imports at start: they register what its sessions need (``vta``:
#: the simulated VTA's module loader, so ``load_module`` reads ``vta.build``'s files). A table
#: of names, because the server process has imported nothing above the runtime layer.
DEVICE_MODULES: dict[str, tuple[str, ...]] = {"vta": ("tvmpy.vta",)}


def check_bind(host: str, allow_remote: bool, token: str | bool | None) -> None:
    """Refuse to listen beyond the loopback without ``allow_remote`` and a token (``token``:
    the token, or whether there will be one)."""
    if host in LOOPBACK:
        return
    if not allow_remote:
        raise PermissionError(f"refusing to bind {host!r}: only the loopback is served by default; "
                              "pass allow_remote=True (--allow-remote) to serve other machines")
    if not token:
        raise PermissionError(f"refusing to bind {host!r} without a token: a server reachable "
                              "from other machines must authenticate its clients (drop "
                              "--insecure-no-token)")


def _bind(host: str, port: int, port_end: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    last: OSError | None = None
    for p in ([0] if port == 0 else range(port, max(port, port_end) + 1)):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((host, p))
            sock.listen(min(socket.SOMAXCONN, 1024))  # a burst of connects waits in the kernel
            sock.setblocking(False)
            return sock
        except OSError as e:
            sock.close()
            last = e
    raise OSError(f"rpc server: no free port in {port}..{port_end} on {host}: {last}")


# ---- one session (in the forked child) ----------------------------------------------------------
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def _end_session(conn: socket.socket, lock: threading.Lock, reason: BaseException) -> None:
    """Tell the client why its session ends (if no reply is being sent) and hang up."""
    if lock.acquire(timeout=2.0):
        try:
            conn.settimeout(2.0)
            send_frame(conn, error_header(reason, closed=True))
        except OSError:
            pass
        finally:
            lock.release()
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _watchdog(conn: socket.socket, lock: threading.Lock, done: threading.Event, timeout: float,
              listener: int, workdir: str) -> None:
    """Ends the session when ``timeout`` (session_timeout) passes, when the listener stops it
    (SIGTERM/SIGINT, blocked in every thread and taken here) or when the listener is gone (its
    device left the fleet, or it was killed): the client gets a closing error, not answers
    from a server that no longer exists."""
    end = time.monotonic() + timeout if timeout > 0 else None
    while not done.is_set():
        sig = signal.sigtimedwait(_STOP_SIGNALS, 0.2)
        if done.is_set():
            return
        if sig is not None:
            reason: BaseException = RPCError("the server is stopping: session closed")
        elif os.getppid() != listener:
            reason = RPCError("the server is gone (stopped, killed, or its device left the "
                              "fleet): session closed")
        elif end is not None and time.monotonic() >= end:
            reason = TimeoutError(f"session timed out after {timeout:g} s (session_timeout)")
        else:
            continue
        _end_session(conn, lock, reason)
        if not done.wait(2.0):  # stuck in device code: end the process
            _remove_session_dir(workdir, listener)
            os._exit(3)
        return


def _remove_session_dir(workdir: str, listener: int) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
    if os.getppid() != listener:  # nobody else will: the listener's folder, once empty
        try:
            os.rmdir(os.path.dirname(workdir))
        except OSError:
            pass


def _run_session(conn: socket.socket, workdir: str, limits: Limits, policy: Policy,
                 client: Client, listener: int) -> None:
    """Serve one authenticated client until it closes, goes silent past ``idle_timeout``,
    sends a frame that does not arrive whole within ``frame_timeout``, or the watchdog ends
    the session."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # taken by the watchdog thread
    conn.setblocking(True)
    _tune_socket(conn)
    lock = threading.Lock()
    done = threading.Event()
    conn.settimeout(policy.frame_timeout)
    send_frame(conn, {"ok": True, "proof": client.proof})
    threading.Thread(target=_watchdog, args=(conn, lock, done, client.session_timeout,
                                             listener, workdir), daemon=True).start()
    sess = Session(workdir, limits.max_payload)
    idle = policy.idle_timeout * 1000 if policy.idle_timeout else None
    poller = select.poll()  # not select(): this descriptor may be past FD_SETSIZE
    poller.register(conn, select.POLLIN)
    try:
        while True:
            if not poller.poll(idle):
                _log(f"closing a session idle for {policy.idle_timeout:g} s")
                _end_session(conn, lock, TimeoutError(
                    f"session closed after {policy.idle_timeout:g} s without a request (the "
                    "server's --idle-timeout)"))
                return
            try:
                header, payloads = recv_frame(conn, limits, timeout=policy.frame_timeout)
            except EOFError:
                return
            except ProtocolError as e:
                _log(f"closing a session: {e}")
                _end_session(conn, lock, e)
                return
            out: list = []
            if header.get("op") == "close":
                reply = {"ok": True, "result": None}
            else:
                try:
                    reply, out = sess.handle(header, payloads)
                except ProtocolError as e:
                    _end_session(conn, lock, e)
                    return
                except Exception as e:  # the code the client runs raised: report it, go on
                    reply, out = error_header(e), []
            del payloads
            size = sum(len(byte_view(p)) for p in out)
            with lock:
                conn.settimeout(policy.frame_timeout + size / MIN_RATE)  # a reader that stalls
                send_frame(conn, reply, out)
            if header.get("op") == "close":
                return
    except OSError:
        return  # the client went away, stopped reading, or the watchdog closed the socket
    finally:
        done.set()


# ---- the listener ----------------------------------------------------------------------------
def _log(msg: str) -> None:
    print(f"[tvmpy rpc server {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def serve(host: str = "127.0.0.1", port: int = 9091, port_end: int = 9199, key: str = "",
          token: str | None = None, allow_remote: bool = False, limits: Limits | None = None,
          policy: Policy | None = None, exit_with_parent: bool = False, device: str = "native",
          insecure_no_token: bool = False) -> None:
    """Listen and serve sessions until SIGTERM/SIGINT (prints ``READY HOST:PORT`` once bound);
    with ``exit_with_parent``, also once the process that started this one is gone.

    Without ``token`` (and without ``insecure_no_token``) a random token is generated and
    printed first (``TOKEN_LINE TOKEN``), as Jupyter does."""
    parent = os.getppid()  # before READY: the parent may exit as soon as it reads the line
    if exit_with_parent and parent == 1:
        raise OSError("the process that started this server is already gone")
    generated = False
    if insecure_no_token:
        if token:
            raise ValueError("insecure_no_token, yet a token is given: choose one")
        token = None
    elif token is None:
        token, generated = generate_token(), True
    else:
        check_token(token)
    check_bind(host, allow_remote, token)
    session.DEVICE = device
    for name in DEVICE_MODULES.get(device, ()):
        importlib.import_module(name)
    limits = limits or Limits()
    policy = policy or Policy()
    _raise_fd_limit(policy.max_pending + policy.max_queue + policy.max_sessions + 64)
    listener = _bind(host, port, port_end)
    _sweep_stale_dirs()
    gate = Gate(key, token, limits, policy, _log)
    sessions: dict[int, str] = {}  # session process -> its directory
    wake_r, wake_w = os.pipe()
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        # once: a second SIGTERM (a process group stopped, then its server stopped again by
        # its owner) must not cut the cleanup below short
        nonlocal stopping
        if not stopping:
            stopping = True
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    base = ""
    try:
        base = tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}_")
        # a session's end (SIGCHLD) wakes the loop at once: a queued client starts without delay
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        gate.sel.register(listener, selectors.EVENT_READ, "listen")
        gate.sel.register(wake_r, selectors.EVENT_READ, "wake")
        bound = listener.getsockname()[1]
        if generated:
            print(f"{TOKEN_LINE} {token}", flush=True)
            _log("no token given: generated the one printed above; clients pass it "
                 "(rpc.connect(..., token=TOKEN)); --insecure-no-token serves without one")
        elif token is None:
            _log("serving WITHOUT a token (--insecure-no-token): every local user can upload "
                 "and run native code here")
        print(f"{READY} {host}:{bound}", flush=True)
        while True:
            if exit_with_parent and os.getppid() != parent:
                _log("the process that started this server is gone: stopping")
                return
            now = time.monotonic()
            nxt = gate.next_deadline()
            wait = 0.5 if nxt is None else min(0.5, max(0.0, nxt - now))
            accept = False
            for sel_key, _ in gate.sel.select(wait):
                if sel_key.data == "listen":
                    accept = True
                elif sel_key.data == "wake":
                    _drain(wake_r)
                elif sel_key.data.sock.fileno() >= 0:  # not closed earlier in this round
                    gate.readable(sel_key.data, time.monotonic())
            if accept:  # after the reads: a hello that arrived is taken before any eviction
                _accept(listener, gate, time.monotonic())
            _reap(sessions)
            gate.expire(time.monotonic())
            while len(sessions) < policy.max_sessions:
                client = gate.next_authenticated()
                if client is None:
                    break
                _start_session(client, base, sessions, limits, policy, gate, listener,
                               (wake_r, wake_w))
    finally:  # bounded (sessions get 3 s): a second signal must not cut it short
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        signal.set_wakeup_fd(-1)
        listener.close()
        gate.close_all("the server is stopping")
        gate.sel.close()
        os.close(wake_r)
        os.close(wake_w)
        _stop_sessions(sessions)
        if base:
            shutil.rmtree(base, ignore_errors=True)


def _raise_fd_limit(wanted: int) -> None:
    """Raise this process's soft limit of open files towards ``wanted`` (at most the hard
    limit): every pending connection is a descriptor."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (
                wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))
    except (ImportError, ValueError, OSError):
        pass


def _accept(listener: socket.socket, gate: Gate, now: float) -> None:
    for _ in range(32):  # then serve the others' events: a flood cannot starve them
        try:
            conn, addr = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:  # out of descriptors: make room (the oldest handshake goes)
            if e.errno in (errno.EMFILE, errno.ENFILE) and gate.evict_oldest(
                    "server busy: out of file descriptors"):
                continue
            return  # e.g. the client gave up before we accepted
        gate.add(conn, str(addr[0]), now)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _reap(sessions: dict[int, str]) -> None:
    for pid in list(sessions):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done, status = pid, 0
        if done:
            if os.WIFSIGNALED(status) or os.WEXITSTATUS(status):
                _log(f"session process {pid} ended abnormally (status {status})")
            shutil.rmtree(sessions.pop(pid), ignore_errors=True)


def _stop_sessions(sessions: dict[int, str], grace: float = 3.0) -> None:
    """SIGTERM every session (each tells its client and exits), SIGKILL those left after
    ``grace`` seconds; reap them all and delete their directories."""
    for pid in sessions:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while sessions and time.monotonic() < end:
        _reap(sessions)
        time.sleep(0.02)
    for pid, workdir in sessions.items():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        shutil.rmtree(workdir, ignore_errors=True)
    sessions.clear()


def _start_session(client: Client, base: str, sessions: dict[int, str], limits: Limits,
                   policy: Policy, gate: Gate, listener: socket.socket,
                   wake: tuple[int, int]) -> None:
    """Fork the process of an authenticated client's session."""
    try:
        workdir = tempfile.mkdtemp(prefix="session_", dir=base)  # mode 0700
    except OSError as e:
        gate.refuse(client, f"server cannot create a session directory: {e}")
        return
    me = os.getpid()  # the session watches for this listener's end
    try:
        pid = os.fork()
    except OSError as e:
        shutil.rmtree(workdir, ignore_errors=True)
        gate.refuse(client, f"server cannot start a session process: {e}")
        return
    if pid == 0:  # the session process
        code = 0
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            for fd in wake:
                os.close(fd)
            listener.close()
            gate.close_in_child()
            _run_session(client.sock, workdir, limits, policy, client, me)
        except BaseException as e:  # noqa: BLE001 - the child must never return
            _log(f"session failed: {type(e).__name__}: {e}")
            code = 1
        finally:
            try:
                client.sock.close()
                # also here: the listener may have been killed meanwhile
                _remove_session_dir(workdir, me)
            finally:
                os._exit(code)
    client.sock.close()
    sessions[pid] = workdir


_DIR_PREFIX = "tvmpy_rpcd_"  # + the listener's pid: its sessions' directories live inside


def _sweep_stale_dirs(prefix: str = _DIR_PREFIX) -> None:
    """Delete the directories (``PREFIX<pid>_...``) of processes of this user that died
    without cleaning up (killed with SIGKILL); a directory whose process still runs is left
    alone."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        if not name.startswith(prefix):
            continue
        path = os.path.join(tmp, name)
        try:
            pid = int(name[len(prefix):].split("_", 1)[0])
            if os.stat(path).st_uid != os.getuid():
                continue
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except (ValueError, OSError):  # not ours, or alive (PermissionError)
            continue


def _tune_socket(conn: socket.socket) -> None:
    """No Nagle delay for small replies; keepalive probes end a session whose client machine
    vanished without closing the connection (after about 90 s)."""
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for opt, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
            if hasattr(socket, opt):
                conn.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), value)
    except OSError:
        pass


# ---- rpc.Server: the server in a background process --------------------------------------------
def device_command(device: str) -> list[str]:
    """The interpreter that runs the server for ``device``: this Python (``native``; ``wasm``,
    whose modules are .wasm files run by wasmtime in that process), or an AArch64 Python under
    qemu-user (``qemu-aarch64``, see tvmpy.contrib.qemu)."""
    if device in ("native", "wasm", "vta"):  # wasm: .wasm modules run by wasmtime; vta: the
        # simulated VTA in this Python
        return [sys.executable]
    if device == "qemu-aarch64":  # its argv sets the AArch64 Python's own sys.path
        from ..contrib import qemu

        return qemu.python_command()
    raise ValueError(f"unknown device {device!r}: expected one of {', '.join(DEVICES)}")


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def server_env(device: str, token: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [_package_root(), env.get("PYTHONPATH", "")]  # (qemu: python_command sets its own)
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    # the server's imports never come from its working directory (a stray numpy.py or tvmpy/
    # folder in /tmp would shadow the real ones; Python >= 3.11)
    env["PYTHONSAFEPATH"] = "1"
    env.pop(TOKEN_ENV, None)
    if token:
        env[TOKEN_ENV] = token
    return env


class Server:
    """An RPC server in a background process (TVM's ``rpc.Server``): ``.port``, ``.token``,
    ``.terminate()``.

    ``device``: ``"native"`` (this Python) or ``"qemu-aarch64"`` (an AArch64 Python under
    qemu-user). Without ``token`` a random one is generated (``.token``; clients pass
    ``token=server.token``) unless ``insecure_no_token``. The token reaches the process through
    its environment, not its command line. The other arguments: see :class:`Policy` and
    ``tvmpy rpc server --help``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9091, port_end: int = 9199,
                 key: str = "", token: str | None = None, allow_remote: bool = False,
                 device: str = "native", max_payload: int = 1 << 30, max_header: int = 1 << 20,
                 queue_timeout: float = 60.0, start: bool = True, start_timeout: float = 120.0,
                 silent: bool = False, *, insecure_no_token: bool = False,
                 max_sessions: int = 1, max_pending: int = 1024, max_queue: int = 16,
                 handshake_timeout: float = 10.0, idle_timeout: float = 300.0,
                 frame_timeout: float = 60.0):
        if insecure_no_token:
            if token:
                raise ValueError("insecure_no_token, yet a token is given: choose one")
            self.token: str | None = None
        else:
            self.token = generate_token() if token is None else check_token(token)
        check_bind(host, allow_remote, self.token)
        Limits(max_header, max_payload)  # checked here, not only in the process
        Policy(max_sessions, max_pending, max_queue, handshake_timeout, queue_timeout,
               idle_timeout, frame_timeout)
        self.host, self.key, self.device = host, key, device
        self._argv = ["-m", "tvmpy.rpc.server", "--device", device, "--host", host,
                      "--port", str(port),
                      "--port-end", str(port_end), "--key", key, "--max-payload", str(max_payload),
                      "--max-header", str(max_header), "--queue-timeout", str(queue_timeout),
                      "--max-sessions", str(max_sessions), "--max-pending", str(max_pending),
                      "--max-queue", str(max_queue), "--handshake-timeout",
                      str(handshake_timeout), "--idle-timeout", str(idle_timeout),
                      "--frame-timeout", str(frame_timeout)]
        if allow_remote:
            self._argv.append("--allow-remote")
        if insecure_no_token:
            self._argv.append("--insecure-no-token")
        self._argv.append("--exit-with-parent")  # no server outlives a crashed test or script
        self._start_timeout = start_timeout
        self._silent = silent
        self.proc: subprocess.Popen | None = None
        self.port = 0
        if start:
            self.start()

    def start(self) -> Server:
        if self.proc is not None:
            return self
        cmd = device_command(self.device) + self._argv
        # silent: the log goes to a file, shown only if the server fails to start
        log = tempfile.TemporaryFile() if self._silent else None
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
            env=server_env(self.device, self.token), start_new_session=True,
            cwd=_package_root())
        try:
            self._wait_ready(cmd, log)
        finally:
            if log is not None:
                log.close()
        return self

    def _wait_ready(self, cmd: list[str], log: Any) -> None:
        assert self.proc is not None
        try:
            text = wait_for_line(self.proc, READY, self._start_timeout,
                                 f"rpc server ({self.device})", cmd, log)
        except BaseException:
            self.terminate()
            raise
        self.port = int(text.rsplit(":", 1)[1])

    def terminate(self) -> None:
        """Stop the server and its session (their directories are deleted)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        _sweep_stale_dirs()  # its directory, had it no time to delete it (SIGKILL)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.terminate()

    def __del__(self) -> None:
        try:
            self.terminate()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# ---- command line ------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; others need --allow-remote)")
    p.add_argument("--port", type=ports.port, default=9091,
                   help="first port to try (0: any free port)")
    p.add_argument("--port-end", type=ports.port, default=9199, help="last port to try")
    p.add_argument("--key", default="", help="the device key this server serves (e.g. rasp4b)")
    tok = p.add_argument_group(
        "token", "clients must prove a shared token (HMAC; it never crosses the network): --token, "
        f"--token-file or ${TOKEN_ENV}; without any, a random token is generated and printed "
        "at start, as Jupyter does")
    tok.add_argument("--token", default=None,
                     help="the token (other users can read a command line in `ps`: prefer "
                     f"--token-file or ${TOKEN_ENV}); at least 16 varied characters")
    tok.add_argument("--token-file", default=None, metavar="PATH",
                     help="read the token from PATH (readable by its owner only: chmod 600)")
    tok.add_argument("--insecure-no-token", action="store_true",
                     help="serve WITHOUT a token: every local user can upload and run native "
                     "code through this server (loopback only)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow binding an address other than the loopback (never without a "
                   "token)")
    p.add_argument("--max-payload", type=int, default=1 << 30,
                   help="largest array/file data of one message in bytes (default 1 GiB)")
    p.add_argument("--max-header", type=int, default=1 << 20,
                   help="largest message header in bytes (default 1 MiB)")
    p.add_argument("--max-sessions", type=int, default=1,
                   help="sessions run at once, each in its own process (default 1: timings "
                   "on a device are not disturbed by another client)")
    p.add_argument("--max-pending", type=int, default=1024,
                   help="connections in handshake at once; a new one pushes out the oldest "
                   "(default 1024)")
    p.add_argument("--max-queue", type=int, default=16,
                   help="authenticated clients waiting for a session (default 16)")
    p.add_argument("--handshake-timeout", type=float, default=10.0,
                   help="seconds a client has for the whole handshake (default 10)")
    p.add_argument("--queue-timeout", type=float, default=60.0,
                   help="seconds a client waits for a busy server before it is refused")
    p.add_argument("--idle-timeout", type=float, default=300.0,
                   help="end a session after this many seconds without a request (default "
                   "300; 0: never)")
    p.add_argument("--frame-timeout", type=float, default=60.0,
                   help="seconds for a request to arrive whole, plus 1 s per MiB of data "
                   "(default 60): a truncated or stalled message ends the session")
    p.add_argument("--device", choices=DEVICES, default="native",
                   help="native: this machine; qemu-aarch64: an AArch64 Python under qemu-user; "
                   "wasm: this machine's Python running .wasm modules in wasmtime; vta: the "
                   "simulated VTA accelerator (tvmpy.vta; fleet key 'vta' by default)")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop when the process that started the server ends")


def policy_from_args(args: argparse.Namespace) -> Policy:
    return Policy(args.max_sessions, args.max_pending, args.max_queue, args.handshake_timeout,
                  args.queue_timeout, args.idle_timeout, args.frame_timeout)


def run_from_args(args: argparse.Namespace) -> int:
    try:
        token = resolve_token(args.token, args.token_file, args.insecure_no_token)
        serve(args.host, args.port, args.port_end, args.key, token, args.allow_remote,
              Limits(args.max_header, args.max_payload), policy_from_args(args),
              exit_with_parent=args.exit_with_parent, device=args.device,
              insecure_no_token=args.insecure_no_token)
    except (PermissionError, OSError, ValueError) as e:
        print(f"tvmpy rpc server: error: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tvmpy.rpc.server",
                                description="tvmpy RPC server (the device side)")
    add_arguments(p)
    return run_from_args(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
