"""The tracker: a Dask scheduler that keeps the device fleet (TVM's ``rpc.tracker``).

    tvmpy rpc tracker [--host 127.0.0.1 --port 9190]          # the scheduler (fleet.FleetPlugin)
    tvmpy rpc server --tracker 127.0.0.1:9190 --key rasp4b --device qemu-aarch64   # a device
    tvmpy rpc status [--tracker 127.0.0.1:9190]               # devices per key, free/busy, queue

From Python: ``Tracker(port=0)`` starts one in a background process (``.port``,
``.terminate()``), ``DeviceWorker(tracker, key, device)`` a device; ``connect_tracker(host,
port)`` returns a :class:`TrackerSession`: ``request(key, priority=1, session_timeout=60)`` waits
for a free device of ``key`` (larger priorities first: a Dask task with resources ``{key: 1}``
holds the device while the session lasts) and returns an RPC session to it; ``summary()`` /
``text_summary()`` describe the fleet.

Security: the tracker binds 127.0.0.1 unless told otherwise; another address needs
``allow_remote`` *and* TLS through Dask's security settings (``--tls-ca-file/--tls-cert/
--tls-key``, encryption required: a client or worker without a certificate signed by that CA
is refused).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import weakref
from collections.abc import Sequence
from typing import Any

from . import ports
from .fleet import (
    FleetPlugin,
    _tracker_address,
    add_tls_arguments,
    hold_task,
    quiet_dask_logs,
    security_from_args,
)
from .launch import wait_for_line

__all__ = ["Tracker", "DeviceWorker", "TrackerSession", "connect_tracker", "serve_tracker",
           "check_tracker_bind", "format_summary", "DEFAULT_PORT"]

DEFAULT_PORT = 9190
READY = "tvmpy rpc tracker listening on"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_tracker_bind(host: str, allow_remote: bool, security: Any) -> None:
    """Refuse to serve beyond the loopback without ``allow_remote`` and TLS."""
    if host in LOOPBACK:
        return
    if not allow_remote:
        raise PermissionError(f"refusing to bind the tracker to {host!r}: only the loopback is "
                              "served by default; pass --allow-remote (allow_remote=True) and "
                              "TLS files to serve other machines")
    if security is None or not getattr(security, "require_encryption", False):
        raise PermissionError(f"refusing to bind the tracker to {host!r} without TLS: a tracker "
                              "reachable from other machines must authenticate its clients and "
                              "devices (--tls-ca-file, --tls-cert, --tls-key)")


# ---- the tracker process -----------------------------------------------------------------------
async def _serve(host: str, port: int, port_end: int, security: Any, workdir: str) -> None:
    import dask
    from distributed import Scheduler

    # Dask's HTTP server (dashboard, metrics) stays on the loopback and serves nothing
    dask.config.set({"distributed.scheduler.http.routes": []})
    last: Exception | None = None
    ports = [0] if port == 0 else range(port, max(port, port_end) + 1)
    protocol = "tls" if security is not None else "tcp"
    for p in ports:
        try:
            sched = Scheduler(host=host, port=p, protocol=protocol, dashboard=False,
                              dashboard_address="127.0.0.1:0", security=security,
                              plugins=[FleetPlugin()], worker_ttl=60.0,
                              local_directory=workdir)
            await sched
            break
        except OSError as e:
            last = e
    else:
        raise OSError(f"no free port for the tracker in {port}..{port_end}: {last}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = sched.address.rsplit(":", 1)[1]
    print(f"{READY} {host}:{bound}", flush=True)
    await stop.wait()
    await sched.close()


def serve_tracker(host: str = "127.0.0.1", port: int = DEFAULT_PORT, port_end: int | None = None,
                  allow_remote: bool = False, security: Any = None) -> None:
    """Run the tracker (a Dask scheduler with the fleet plugin) until SIGTERM/SIGINT."""
    from .server import _sweep_stale_dirs

    check_tracker_bind(host, allow_remote, security)
    quiet_dask_logs()
    _sweep_stale_dirs(_DIR_PREFIX)  # those of trackers killed with SIGKILL
    workdir = tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}_")  # Dask's scratch space
    try:
        asyncio.run(_serve(host, port, port if port_end is None else port_end, security,
                           workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


_DIR_PREFIX = "tvmpy_tracker_"


def _start(cmd: list[str], ready: str, what: str, timeout: float,
           silent: bool) -> tuple[subprocess.Popen, str]:
    """Start ``cmd`` in its own session and wait for its line starting with ``ready``."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                  else []))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                            stderr=subprocess.DEVNULL if silent else None,
                            start_new_session=True, cwd=tempfile.gettempdir())
    try:
        return proc, wait_for_line(proc, ready, timeout, what, cmd)
    except BaseException:
        _stop(proc)
        raise


def _stop(proc: subprocess.Popen | None, timeout: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout)
    if proc.stdout is not None:
        proc.stdout.close()


class Tracker:
    """A tracker in a background process (TVM's ``rpc.tracker.Tracker``): ``.host``, ``.port``,
    ``.terminate()``. ``port=0`` picks a free port."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, port_end: int = 9199,
                 silent: bool = True, start_timeout: float = 60.0):
        check_tracker_bind(host, False, None)
        cmd = [sys.executable, "-m", "tvmpy.rpc.tracker", "--host", host, "--port", str(port),
               "--port-end", str(port_end)]
        self.proc: subprocess.Popen | None
        self.proc, line = _start(cmd, READY, "the tracker", start_timeout, silent)
        self.host = host
        self.port = int(line.rsplit(":", 1)[1])
        self._finalizer = weakref.finalize(self, _stop, self.proc)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def terminate(self) -> None:
        self._finalizer()
        self.proc = None

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.terminate()


class DeviceWorker:
    """A device of the fleet in a background process (``tvmpy rpc server --tracker``): a Dask
    worker with resources ``{key: 1}`` and its device RPC server. ``.pid`` (the worker),
    ``.name``, ``.terminate()``; killing the process takes the device out of the fleet."""

    def __init__(self, tracker: str, key: str, device: str = "native", name: str | None = None,
                 silent: bool = True, start_timeout: float = 120.0):
        from .fleet import READY_WORKER

        cmd = [sys.executable, "-m", "tvmpy.rpc.fleet", "--tracker", tracker, "--key", key,
               "--device", device]
        if name:
            cmd += ["--name", name]
        self.proc: subprocess.Popen | None
        self.proc, line = _start(cmd, READY_WORKER, f"the {device} device worker ({key})",
                                 start_timeout, silent)
        fields = dict(f.split("=", 1) for f in line[len(READY_WORKER):].split())
        self.name, self.key, self.device = fields["name"], key, device
        self.pid = self.proc.pid
        self._finalizer = weakref.finalize(self, _stop, self.proc)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        from .fleet import WORKER_DIR_PREFIX
        from .server import _sweep_stale_dirs

        stopped = self.proc is not None
        self._finalizer()
        self.proc = None
        if stopped:  # what the worker and its server left, had they no time to clean up
            _sweep_stale_dirs(WORKER_DIR_PREFIX)
            _sweep_stale_dirs()

    def __enter__(self) -> DeviceWorker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.terminate()


# ---- the client side ---------------------------------------------------------------------------
class TrackerSession:
    """A connection to the tracker (a Dask client); see the module docstring."""

    def __init__(self, address: str, security: Any = None, timeout: float = 30.0):
        from distributed import Client

        quiet_dask_logs()
        self.address = address
        self.client = Client(address, security=security, timeout=timeout, set_as_default=False,
                             direct_to_workers=False)
        try:
            self.summary()
        except Exception as e:
            self.client.close()
            raise RuntimeError(f"{address} is a Dask scheduler without the tvmpy fleet "
                               f"(start it with `tvmpy rpc tracker`): {e}") from None

    def _call(self, name: str, **kwargs: Any) -> Any:
        return self.client.sync(getattr(self.client.scheduler, f"tvmpy_fleet_{name}"), **kwargs)

    def summary(self) -> dict:
        """``{"keys": {key: {"devices": [...], "queue": [...]}}, "lost": [...]}``."""
        return self._call("summary")

    def text_summary(self) -> str:
        return format_summary(self.summary())

    def keys(self) -> list[str]:
        return sorted(k for k, v in self.summary()["keys"].items() if v["devices"])

    def request(self, key: str, priority: int = 1, session_timeout: float = 0,
                max_retry: int = 5, timeout: float | None = None) -> Any:
        """An RPC session to a free device of ``key``, once one is free (higher ``priority``
        first). The device is held until the session closes or ``session_timeout`` seconds
        pass (0: no limit). ``timeout``: seconds to wait for a device (None: as long as one
        of the key is in the fleet)."""
        from . import connect

        if not isinstance(key, str) or not key:
            raise ValueError(f"request needs a device key, got {key!r}")
        last: Exception | None = None
        for _ in range(max(1, int(max_retry))):
            fut, info = self._acquire(key, priority, session_timeout, timeout)
            try:
                sess = connect(info["host"], int(info["port"]), key=key,
                               session_timeout=session_timeout, token=info.get("token"))
            except Exception as e:  # noqa: BLE001 - the device went away: try another
                last = e
                fut.cancel()
                continue
            _attach_release(sess, fut)
            # the session keeps this connection alive: `connect_tracker(...).request(key)` in
            # one expression must not release the device when the tracker session is collected
            setattr(sess, "tracker_session", self)  # noqa: B010
            return sess
        raise RuntimeError(f"could not open a session on a device of key {key!r}: {last}")

    def _acquire(self, key: str, priority: int, session_timeout: float,
                 timeout: float | None) -> tuple[Any, dict]:
        if key not in self.keys():
            raise LookupError(f"no device with key {key!r} in the fleet at {self.address} "
                              f"(keys: {self.keys() or 'none'})")
        fut = self.client.submit(hold_task, float(session_timeout), resources={key: 1},
                                 priority=int(priority), pure=False,
                                 key=f"tvmpy-session-{key}-{uuid.uuid4().hex[:12]}")
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                info = self._call("wait", task=fut.key, timeout=2.0)
                if info is not None:
                    return fut, info
                if fut.done():
                    raise RuntimeError(f"the session task ended before it got a device: "
                                       f"{fut.status}")
                if key not in self.keys():
                    raise LookupError(f"no device with key {key!r} in the fleet at "
                                      f"{self.address} (keys: {self.keys() or 'none'})")
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"no device of key {key!r} became free within "
                                       f"{timeout:g} s")
        except BaseException:
            fut.cancel()
            raise

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> TrackerSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _attach_release(sess: Any, fut: Any) -> None:
    """Closing ``sess`` (or losing it) releases the device held by ``fut``."""
    orig_close = sess.close

    def close() -> None:
        try:
            orig_close()
        finally:
            fut.cancel()

    sess.close = close
    sess.tracker_future = fut


def connect_tracker(url: str = "127.0.0.1", port: int = DEFAULT_PORT, security: Any = None,
                    timeout: float = 30.0) -> TrackerSession:
    """Connect to a tracker (TVM's ``rpc.connect_tracker``)."""
    return TrackerSession(_tracker_address(f"{url}:{int(port)}", security), security, timeout)


def format_summary(summary: dict) -> str:
    """The fleet as a table: each device (key, name, kind, RPC address, free/busy, jobs done),
    then per key: devices, free, queued requests."""
    rows = [("key", "device", "kind", "rpc address", "status", "jobs")]
    totals = []
    for key in sorted(summary["keys"]):
        entry = summary["keys"][key]
        devs = entry["devices"]
        for d in devs:
            status = d["status"] if d["status"] == "free" else f"busy {d['busy_s']:.1f}s"
            rows.append((key, d["name"], d["device"], d["address"], status, str(d["jobs_done"])))
        free = sum(d["status"] == "free" for d in devs)
        prios = sorted({q["priority"] for q in entry["queue"]}, reverse=True)
        totals.append((key, str(len(devs)), str(free), str(len(entry["queue"])),
                       ",".join(str(p) for p in prios) or "-"))
    out = [_table(rows), "", _table([("key", "devices", "free", "queued", "priorities")]
                                    + totals)]
    if summary.get("lost"):
        out += ["", "devices gone: " + ", ".join(f"{d['name']} ({d['key']}: {d['reason']})"
                                                 for d in summary["lost"])]
    return "\n".join(out)


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


# ---- command line ------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; others need --allow-remote and TLS)")
    p.add_argument("--port", type=ports.port, default=DEFAULT_PORT,
                   help="first port to try (0: any)")
    p.add_argument("--port-end", type=ports.port, default=None, help="last port to try")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow binding an address other than the loopback (needs TLS)")
    add_tls_arguments(p)


def run_from_args(args: argparse.Namespace) -> int:
    try:
        serve_tracker(args.host, args.port, args.port_end, args.allow_remote,
                      security_from_args(args))
    except (PermissionError, OSError, ValueError) as e:
        print(f"tvmpy rpc tracker: error: {e}", file=sys.stderr)
        return 2
    return 0


def status_from_args(args: argparse.Namespace) -> int:
    """``tvmpy rpc status``: print the fleet."""
    host, _, port = args.tracker.rpartition(":")
    try:
        with connect_tracker(host or "127.0.0.1", int(port), security_from_args(args),
                             timeout=args.timeout) as t:
            print(t.text_summary())
    except (OSError, ValueError, RuntimeError, TimeoutError) as e:
        print(f"tvmpy rpc status: error: cannot reach the tracker at {args.tracker}: {e}",
              file=sys.stderr)
        return 2
    return 0


def add_status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tracker", type=ports.host_port, default=f"127.0.0.1:{DEFAULT_PORT}",
                   help="HOST:PORT")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to reach the tracker")
    add_tls_arguments(p)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tvmpy.rpc.tracker",
                                description="the tvmpy RPC tracker (a Dask scheduler)")
    add_arguments(p)
    return run_from_args(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
