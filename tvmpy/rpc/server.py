"""The RPC server: ``python -m tvmpy.rpc.server`` on the device, ``rpc.Server`` from Python.

The listening process is single-threaded: it accepts connections and runs one session at a time
in a forked child (a device runs one thing at a time). Each session gets its own directory
(mode 0700) that the listener deletes when the child ends, however it ends (client gone,
``session_timeout`` reached, a crash in loaded code); a crash never takes the server down.
Connections that arrive while a session runs wait in a queue; after ``queue_timeout`` seconds
they are refused with a "server busy" error.

Security: the server binds 127.0.0.1 unless told otherwise; any other address needs
``allow_remote`` *and* a token. With a token, clients must answer an HMAC challenge (the token
never crosses the network) and the server proves it knows the token too. Frames are size-checked
before allocation and never unpickled (protocol.py). Device side: imports the runtime, numpy and
the standard library only.
"""

from __future__ import annotations

import argparse
import collections
import os
import secrets
import select
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
from .launch import wait_for_line
from .protocol import (
    PROTOCOL,
    VERSION,
    AuthenticationError,
    Limits,
    ProtocolError,
    error_header,
    mac,
    recv_frame,
    send_frame,
)
from .session import Session

__all__ = ["Server", "serve", "main", "LOOPBACK", "check_bind"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_ENV = "TVMPY_RPC_TOKEN"
READY = "tvmpy rpc server listening on"
DEVICES = ("native", "qemu-aarch64", "wasm")
HANDSHAKE_TIMEOUT = 10.0


def check_bind(host: str, allow_remote: bool, token: str | None) -> None:
    """Refuse to listen beyond the loopback without ``allow_remote`` and a token."""
    if host in LOOPBACK:
        return
    if not allow_remote:
        raise PermissionError(f"refusing to bind {host!r}: only the loopback is served by default; "
                              "pass allow_remote=True (--allow-remote) and a token to serve "
                              "other machines")
    if not token:
        raise PermissionError(f"refusing to bind {host!r} without a token: a server reachable "
                              "from other machines must authenticate its clients (--token or "
                              f"${TOKEN_ENV})")


def _bind(host: str, port: int, port_end: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    last: OSError | None = None
    for p in ([0] if port == 0 else range(port, max(port, port_end) + 1)):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((host, p))
            sock.listen(16)
            return sock
        except OSError as e:
            sock.close()
            last = e
    raise OSError(f"rpc server: no free port in {port}..{port_end} on {host}: {last}")


# ---- one session (in the forked child) ----------------------------------------------------------
def _handshake(conn: socket.socket, key: str, token: str | None, limits: Limits) -> float:
    """Greet, check the client's key and token; returns the session timeout it asked for."""
    conn.settimeout(HANDSHAKE_TIMEOUT)
    nonce = secrets.token_bytes(32)
    send_frame(conn, {"proto": PROTOCOL, "version": VERSION, "key": key, "auth": bool(token),
                      "nonce": nonce.hex(), "max_header": limits.max_header,
                      "max_payload": limits.max_payload})
    hello, _ = recv_frame(conn, Limits(max_header=65536, max_payload=0))
    if hello.get("proto") != PROTOCOL:
        raise ProtocolError("the client did not answer the greeting with the tvmpy-rpc handshake")
    if hello.get("version") != VERSION:
        raise ProtocolError(f"the client speaks protocol version {hello.get('version')}, this "
                            f"server {VERSION}")
    ckey = hello.get("key") or ""
    if ckey and key and ckey != key:
        raise AuthenticationError(f"key mismatch: this server serves key {key!r}, the client "
                                  f"asked for {ckey!r}")
    try:
        cnonce = bytes.fromhex(str(hello.get("cnonce", "")))
    except ValueError:
        raise ProtocolError("bad client nonce") from None
    proof = None
    if token:
        answer = hello.get("mac")
        if not answer:
            raise AuthenticationError("this server requires a token: connect with token=...")
        if not secrets.compare_digest(str(answer), mac(token, b"client", nonce, cnonce)):
            raise AuthenticationError("authentication failed: wrong token")
        proof = mac(token, b"server", cnonce, nonce)
    timeout = hello.get("session_timeout") or 0
    if not isinstance(timeout, (int, float)) or not 0 <= timeout <= 1e8:
        raise ProtocolError(f"bad session_timeout {timeout!r}")
    send_frame(conn, {"ok": True, "proof": proof})
    return float(timeout)


def _run_session(conn: socket.socket, workdir: str, key: str, token: str | None,
                 limits: Limits) -> None:
    lock = threading.Lock()
    try:
        timeout = _handshake(conn, key, token, limits)
    except (OSError, EOFError, ProtocolError, AuthenticationError) as e:
        _log(f"refused a client: {e}")
        if isinstance(e, (ProtocolError, AuthenticationError)):
            try:
                send_frame(conn, error_header(e))
            except OSError:
                pass
        return
    conn.settimeout(None)
    done = threading.Event()
    if timeout > 0:
        def watchdog() -> None:
            if done.wait(timeout):
                return
            msg = TimeoutError(f"session timed out after {timeout:g} s (session_timeout)")
            if lock.acquire(timeout=2.0):
                try:
                    send_frame(conn, error_header(msg, closed=True))
                except OSError:
                    pass
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            if not done.wait(2.0):  # stuck in device code: end the process
                os._exit(3)

        threading.Thread(target=watchdog, daemon=True).start()
    sess = Session(workdir, limits.max_payload)
    try:
        while True:
            try:
                header, payloads = recv_frame(conn, limits)
            except EOFError:
                return
            except ProtocolError as e:
                _log(f"closing a session: {e}")
                with lock:
                    send_frame(conn, error_header(e, closed=True))
                return
            if header.get("op") == "close":
                with lock:
                    send_frame(conn, {"ok": True, "result": None})
                return
            try:
                reply, out = sess.handle(header, payloads)
            except ProtocolError as e:
                with lock:
                    send_frame(conn, error_header(e, closed=True))
                return
            except Exception as e:  # the code the client runs raised: report it, go on
                reply, out = error_header(e), []
            del payloads
            with lock:
                send_frame(conn, reply, out)
    except OSError:
        return  # the client went away (or the watchdog closed the socket)
    finally:
        done.set()


# ---- the listener ----------------------------------------------------------------------------
def _log(msg: str) -> None:
    print(f"[tvmpy rpc server {os.getpid()}] {msg}", file=sys.stderr, flush=True)


def serve(host: str = "127.0.0.1", port: int = 9091, port_end: int = 9199, key: str = "",
          token: str | None = None, allow_remote: bool = False, max_header: int = 1 << 20,
          max_payload: int = 1 << 30, queue_timeout: float = 60.0, max_queue: int = 16,
          exit_with_parent: bool = False, device: str = "native") -> None:
    """Listen and serve sessions until SIGTERM/SIGINT (prints ``READY HOST:PORT`` once bound);
    with ``exit_with_parent``, also once the process that started this one is gone."""
    parent = os.getppid()  # before READY: the parent may exit as soon as it reads the line
    if exit_with_parent and parent == 1:
        raise OSError("the process that started this server is already gone")
    check_bind(host, allow_remote, token)
    session.DEVICE = device
    limits = Limits(max_header, max_payload)
    listener = _bind(host, port, port_end)
    _sweep_stale_dirs()
    base = tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}_")
    bound = listener.getsockname()[1]
    print(f"{READY} {host}:{bound}", flush=True)
    pending: collections.deque = collections.deque()
    active: tuple[int, str] | None = None

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # a session's end (SIGCHLD) wakes the select at once: a queued client starts without delay
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    try:
        while True:
            if exit_with_parent and os.getppid() != parent:
                _log("the process that started this server is gone: stopping")
                return
            ready, _, _ = select.select([listener.fileno(), wake_r], [], [], 0.5)
            if wake_r in ready:
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
            if listener.fileno() in ready:
                try:
                    conn, _addr = listener.accept()
                except OSError:  # the client gave up before we accepted
                    conn = None
                if conn is None:
                    pass
                elif len(pending) >= max_queue:
                    _refuse(conn, "server busy: too many clients waiting")
                else:
                    pending.append((conn, time.monotonic()))
            if active is not None:
                pid, status = os.waitpid(active[0], os.WNOHANG)
                if pid:
                    if os.WIFSIGNALED(status) or os.WEXITSTATUS(status):
                        _log(f"session process {pid} ended abnormally (status {status})")
                    shutil.rmtree(active[1], ignore_errors=True)
                    active = None
            now = time.monotonic()
            while pending and now - pending[0][1] > queue_timeout:
                _refuse(pending.popleft()[0], f"server busy: another session is running and "
                        f"did not end within {queue_timeout:g} s")
            if active is None and pending:
                conn, _t = pending.popleft()
                try:
                    workdir = tempfile.mkdtemp(prefix="session_", dir=base)  # mode 0700
                except OSError as e:
                    _refuse(conn, f"server cannot create a session directory: {e}")
                    continue
                try:
                    pid = os.fork()
                except OSError as e:
                    shutil.rmtree(workdir, ignore_errors=True)
                    _refuse(conn, f"server cannot start a session process: {e}")
                    continue
                if pid == 0:  # the session process
                    code = 0
                    try:
                        signal.set_wakeup_fd(-1)
                        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
                            signal.signal(sig, signal.SIG_DFL)
                        os.close(wake_r)
                        os.close(wake_w)
                        listener.close()
                        for c, _t2 in pending:
                            c.close()
                        _tune_socket(conn)
                        _run_session(conn, workdir, key, token, limits)
                    except BaseException as e:  # noqa: BLE001 - the child must never return
                        _log(f"session failed: {type(e).__name__}: {e}")
                        code = 1
                    finally:
                        try:
                            conn.close()
                            # also here: the listener may have been killed meanwhile
                            shutil.rmtree(workdir, ignore_errors=True)
                        finally:
                            os._exit(code)
                conn.close()
                active = (pid, workdir)
    finally:
        signal.set_wakeup_fd(-1)
        os.close(wake_r)
        os.close(wake_w)
        listener.close()
        for c, _t in pending:
            c.close()
        if active is not None:
            try:
                os.kill(active[0], signal.SIGKILL)
                os.waitpid(active[0], 0)
            except OSError:
                pass
            shutil.rmtree(active[1], ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)


_DIR_PREFIX = "tvmpy_rpcd_"  # + the listener's pid: its sessions' directories live inside


def _sweep_stale_dirs() -> None:
    """Delete the directories of listeners of this user that died without cleaning up
    (killed with SIGKILL); a directory whose listener still runs is left alone."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        if not name.startswith(_DIR_PREFIX):
            continue
        path = os.path.join(tmp, name)
        try:
            pid = int(name[len(_DIR_PREFIX):].split("_", 1)[0])
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


def _refuse(conn: socket.socket, msg: str) -> None:
    try:
        conn.settimeout(2.0)
        send_frame(conn, error_header(RuntimeError(msg)))
    except OSError:
        pass
    finally:
        conn.close()


# ---- rpc.Server: the server in a background process --------------------------------------------
def device_command(device: str) -> list[str]:
    """The interpreter that runs the server for ``device``: this Python (``native``; ``wasm``,
    whose modules are .wasm files run by wasmtime in that process), or an AArch64 Python under
    qemu-user (``qemu-aarch64``, see tvmpy.contrib.qemu)."""
    if device in ("native", "wasm"):  # wasm: this Python, loading .wasm modules in wasmtime
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
    """An RPC server in a background process (TVM's ``rpc.Server``): ``.port``, ``.terminate()``.

    ``device``: ``"native"`` (this Python) or ``"qemu-aarch64"`` (an AArch64 Python under
    qemu-user). The token reaches the process through its environment, not its command line."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9091, port_end: int = 9199,
                 key: str = "", token: str | None = None, allow_remote: bool = False,
                 device: str = "native", max_payload: int = 1 << 30, max_header: int = 1 << 20,
                 queue_timeout: float = 60.0, start: bool = True, start_timeout: float = 120.0,
                 silent: bool = False):
        check_bind(host, allow_remote, token)
        self.host, self.key, self.device = host, key, device
        self._argv = ["-m", "tvmpy.rpc.server", "--device", device, "--host", host,
                      "--port", str(port),
                      "--port-end", str(port_end), "--key", key, "--max-payload", str(max_payload),
                      "--max-header", str(max_header), "--queue-timeout", str(queue_timeout)]
        if allow_remote:
            self._argv.append("--allow-remote")
        self._argv.append("--exit-with-parent")  # no server outlives a crashed test or script
        self._token = token
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
            env=server_env(self.device, self._token), start_new_session=True,
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
                   help="address to bind (default 127.0.0.1; others need --allow-remote and a token)")
    p.add_argument("--port", type=ports.port, default=9091,
                   help="first port to try (0: any free port)")
    p.add_argument("--port-end", type=ports.port, default=9199, help="last port to try")
    p.add_argument("--key", default="", help="the device key this server serves (e.g. rasp4b)")
    p.add_argument("--token", default=None,
                   help=f"shared secret clients must prove (default: ${TOKEN_ENV})")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow binding an address other than the loopback (needs a token)")
    p.add_argument("--max-payload", type=int, default=1 << 30,
                   help="largest array/file data of one message in bytes (default 1 GiB)")
    p.add_argument("--max-header", type=int, default=1 << 20,
                   help="largest message header in bytes (default 1 MiB)")
    p.add_argument("--queue-timeout", type=float, default=60.0,
                   help="seconds a client waits for a busy server before it is refused")
    p.add_argument("--device", choices=DEVICES, default="native",
                   help="native: this machine; qemu-aarch64: an AArch64 Python under qemu-user; "
                   "wasm: this machine's Python running .wasm modules in wasmtime")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop when the process that started the server ends")


def run_from_args(args: argparse.Namespace) -> int:
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    try:
        serve(args.host, args.port, args.port_end, args.key, token, args.allow_remote,
              args.max_header, args.max_payload, args.queue_timeout,
              exit_with_parent=args.exit_with_parent, device=args.device)
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
