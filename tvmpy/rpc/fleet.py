"""The device fleet on Dask distributed: the tracker's bookkeeping and the device workers.

The tracker is a Dask scheduler (tracker.py starts it) with :class:`FleetPlugin`. Each device is
a Dask worker (``nthreads=1``, resources ``{KEY: 1}``) that owns one device RPC server
subprocess (``python -m tvmpy.rpc.server``, natively or under qemu-user): ``tvmpy rpc server
--tracker HOST:PORT --key KEY --device native|qemu-aarch64`` runs :func:`run_device_worker`.
Work for a key is a Dask task with resources ``{KEY: 1}``, so a device runs one thing at a
time; Dask queues the rest by task priority.

- :func:`measure_task`: one measurement (upload the library, time it on the device with
  ``runtime.measure``, return the costs); :func:`hold_task`: holds a device for a
  ``tracker.request`` session until the client releases it.
- Claims: a task calls the scheduler (``tvmpy_fleet_claim``) when it starts on a device. When a
  device dies mid-task, Dask runs the task again on another device of the key; the claim tells
  that run its first device was lost, and it reports the trial as failed (``RUNTIME_DEVICE``)
  instead of measuring it again (or, with ``retry_lost``, measures it and names the lost
  device), so a log holds every trial once. The device's queued tasks go to the other devices
  of the key (Dask reschedules them), as does a task that starts in the moment between its
  device server's exit and its worker's leaving (it makes no claim: it lost nothing).
- ``tvmpy_fleet_summary``: devices per key (free/busy, jobs done), the queue per key, lost devices.

Results are plain tuples (this module does not import autotvm), see :func:`measure_task`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

__all__ = ["FleetPlugin", "DevicePlugin", "measure_task", "hold_task", "run_device_worker",
           "start_device_server", "PLUGIN_NAME", "quiet_dask_logs"]

PLUGIN_NAME = "tvmpy-fleet"
WORKER_DIR_PREFIX = "tvmpy_fleet_worker_"  # + the worker's pid: its Dask local directory
READY_WORKER = "tvmpy rpc device worker ready:"
_DONE_STATES = ("memory", "erred", "forgotten")


def quiet_dask_logs(level: int = logging.ERROR) -> None:
    """Dask logs every connection and worker event at INFO: keep only errors. (A result lost
    with its device is reported by RPCRunner; Dask's own note of it is dropped.)"""
    for name in ("distributed", "distributed.scheduler", "distributed.worker",
                 "distributed.core", "distributed.comm", "distributed.nanny",
                 "distributed.client"):
        logging.getLogger(name).setLevel(level)
    aio = logging.getLogger("asyncio")
    if not any(isinstance(f, _DropDaskGatherExit) for f in aio.filters):
        aio.addFilter(_DropDaskGatherExit())


class _DropDaskGatherExit(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" for Dask's internal ``AllExit``
    (left behind when a ``Future.result(timeout=...)`` gives up on a lost result)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[0] if record.exc_info else None
        return exc is None or exc.__name__ != "AllExit"


# ---- scheduler side ----------------------------------------------------------------------------
class FleetPlugin(SchedulerPlugin):
    """The tracker's view of the fleet (devices, claims, queue), served through handlers."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.scheduler: Any = None
        self.devices: dict[str, dict] = {}  # worker address -> device info
        self.lost: list[dict] = []  # devices that left, most recent last
        self.claims: dict[str, dict] = {}  # task key -> {"worker", "name", "since"}
        self.jobs_done: dict[str, int] = {}  # worker address -> jobs started
        self._claimed: dict[str, asyncio.Event] = {}
        self._released: dict[str, asyncio.Event] = {}

    async def start(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        for name in ("register", "leaving", "claim", "wait", "hold", "summary"):
            scheduler.handlers[f"tvmpy_fleet_{name}"] = getattr(self, f"h_{name}")

    # -- handlers (called as ``await scheduler.tvmpy_fleet_NAME(...)``) --
    def h_register(self, info: dict) -> None:
        if info.get("worker") not in self.scheduler.workers:
            raise ValueError(f"register: {info.get('worker')} is not a worker of this tracker")
        self.devices[info["worker"]] = dict(info)

    def h_leaving(self, worker: str, reason: str) -> None:
        """A device worker says why it is about to leave (else it was lost)."""
        if worker in self.devices:
            self.devices[worker]["leaving"] = reason

    def h_claim(self, task: str, worker: str) -> dict | None:
        """Record that ``task`` starts on ``worker``; returns the device that had it before (it
        was lost mid-task) or None."""
        prev = self.claims.get(task)
        self.jobs_done[worker] = self.jobs_done.get(worker, 0) + 1
        self.claims[task] = {"worker": worker, "since": time.time(),
                             "name": self.devices.get(worker, {}).get("name", worker)}
        ev = self._claimed.get(task)
        if ev is not None:
            ev.set()
        if prev is not None and prev["worker"] != worker:
            return prev
        return None

    async def h_wait(self, task: str, timeout: float) -> dict | None:
        """The device info of the worker that claimed ``task``, once it has (None on timeout)."""
        if task not in self.claims:
            ev = self._claimed.setdefault(task, asyncio.Event())
            try:
                await asyncio.wait_for(ev.wait(), timeout)
            except asyncio.TimeoutError:
                return None
            finally:
                self._claimed.pop(task, None)
        claim = self.claims.get(task)
        if claim is None:
            return None
        return self.devices.get(claim["worker"])

    async def h_hold(self, task: str, timeout: float) -> bool:
        """Wait until ``task`` is released by its client (True) or ``timeout`` s pass (False)."""
        ts = self.scheduler.tasks.get(task)
        if ts is None or ts.state != "processing":
            return True
        ev = self._released.setdefault(task, asyncio.Event())
        try:
            await asyncio.wait_for(ev.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    def h_summary(self) -> dict:
        keys: dict[str, dict] = {}
        busy = {c["worker"]: (k, c["since"]) for k, c in self.claims.items()
                if self._state(k) == "processing"}
        for addr, info in sorted(self.devices.items(), key=lambda kv: kv[1].get("name", "")):
            entry = keys.setdefault(info["key"], {"devices": [], "queue": []})
            job = busy.get(addr)
            entry["devices"].append({
                "name": info.get("name"), "device": info.get("device"), "worker": addr,
                "address": f"{info.get('host')}:{info.get('port')}",
                "status": "busy" if job else "free", "job": job[0] if job else None,
                "busy_s": round(time.time() - job[1], 3) if job else None,
                "jobs_done": self.jobs_done.get(addr, 0), "pid": info.get("pid"),
                "worker_pid": info.get("worker_pid")})
        for ts in self.scheduler.tasks.values():
            if ts.state not in ("no-worker", "waiting", "queued", "processing", "released"):
                continue
            if ts.key in self.claims and self._state(ts.key) == "processing":
                continue
            for k in (ts.resource_restrictions or {}):
                entry = keys.setdefault(k, {"devices": [], "queue": []})
                entry["queue"].append({"task": str(ts.key), "priority": -ts.priority[0]
                                       if ts.priority else 0, "state": ts.state})
        for entry in keys.values():
            entry["queue"].sort(key=lambda q: -q["priority"])
        return {"keys": keys, "lost": self.lost[-20:]}

    # -- hooks --
    def _state(self, key: str) -> str | None:
        ts = self.scheduler.tasks.get(key)
        return None if ts is None else ts.state

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if start == "processing":
            ev = self._released.pop(key, None)
            if ev is not None:
                ev.set()
        if finish in _DONE_STATES:
            self.claims.pop(key, None)

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        info = self.devices.pop(worker, None)
        if info is not None:
            reason = info.pop("leaving", None) or "lost (its connection dropped)"
            self.lost.append({**info, "lost_at": time.time(), "reason": reason})


# ---- worker side -------------------------------------------------------------------------------
class DevicePlugin(WorkerPlugin):
    """Holds the device this worker owns: ``info`` (key, name, device kind, RPC address, token)
    and, in the worker process, ``proc``: its device server (to see that it exited)."""

    name = PLUGIN_NAME

    def __init__(self, info: dict, proc: subprocess.Popen | None = None):
        self.info = info
        self.proc = proc


def _this_device() -> tuple[Any, dict]:
    from distributed import get_worker

    worker = get_worker()
    # duck-typed: the worker process may have run this module as __main__ (python -m)
    info = getattr(worker.plugins.get(PLUGIN_NAME), "info", None)
    if not isinstance(info, dict):
        raise RuntimeError("this Dask worker owns no tvmpy device (start it with "
                           "`tvmpy rpc server --tracker HOST:PORT --key KEY`)")
    return worker, info


def _leave_if_device_gone(worker: Any) -> None:
    """A task that starts after this worker's device server exited, in the moment before the
    worker notices and leaves the fleet, did not lose its device mid-run: it waits for the worker
    to close, then asks Dask to run it on another device (no claim made, so it is measured)."""
    from distributed import Reschedule

    proc = getattr(worker.plugins.get(PLUGIN_NAME), "proc", None)
    if proc is None or proc.poll() is None:
        return
    deadline = time.monotonic() + 5.0
    while worker.status.name not in ("closing", "closed", "failed") \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    raise Reschedule()


def _claim(worker: Any) -> dict | None:
    from distributed.utils import sync

    task = worker.get_current_task()
    return sync(worker.loop, worker.scheduler.tvmpy_fleet_claim, task=str(task),
                worker=worker.address)


def _lost_message(prev: dict) -> str:
    return (f"device {prev.get('name')} was lost while it ran this measurement (it died or "
            f"disconnected); not measured again so that the trial is logged once")


def measure_task(lib: bytes, lib_name: str, func_name: str, arg_specs: Sequence[Any],
                 number: int, repeat: int, min_repeat_ms: float, timeout: float,
                 f_preproc: str = "", seed: int = 0, retry_lost: bool = False) -> tuple:
    """Run on a device worker: upload ``lib``, time ``func_name`` on random arguments with the
    device server's ``runtime.measure``. Returns ``("ok", costs, device, seconds, lost)`` or
    ``("error", kind, message, device, seconds, lost)`` (seconds: this task's wall time;
    ``lost``: the device lost while it ran this task before, or None). A task whose first
    device was lost fails at once, unless ``retry_lost``: then it is measured here."""
    t_start = time.monotonic()
    worker, info = _this_device()
    name = info["name"]
    _leave_if_device_gone(worker)
    prev = _claim(worker)
    lost = None if prev is None else prev.get("name")
    if prev is not None and not retry_lost:
        return ("error", "RUNTIME_DEVICE", _lost_message(prev), name,
                time.monotonic() - t_start, lost)
    from . import connect

    try:
        sess = connect(info["host"], info["port"], key=info["key"],
                       session_timeout=timeout + 2, token=info.get("token"),
                       timeout=timeout + 10)
    except Exception as e:  # noqa: BLE001 - the device is unreachable
        return ("error", "RUNTIME_DEVICE", f"device {name}: cannot connect: {type(e).__name__}: "
                f"{e}", name, time.monotonic() - t_start, lost)
    t0 = time.monotonic()
    try:
        sess.upload(lib, target=lib_name)
        t0 = time.monotonic()
        fmeasure = sess.get_function("runtime.measure")
        res = fmeasure(lib_name, func_name, [[list(s), str(d)] for s, d in arg_specs],
                       int(number), int(repeat), float(min_repeat_ms), 0.0, f_preproc, int(seed))
        return ("ok", tuple(float(c) for c in res["costs"]), name, time.monotonic() - t_start,
                lost)
    except Exception as e:  # noqa: BLE001 - a failed run is a result
        kind = "RUN_TIMEOUT" if time.monotonic() - t0 >= timeout else "RUNTIME_DEVICE"
        return ("error", kind, f"device {name}: {type(e).__name__}: {e}", name,
                time.monotonic() - t_start, lost)
    finally:
        try:
            sess.close()
        except Exception:  # noqa: BLE001
            pass


def hold_task(session_timeout: float) -> str:
    """Run on a device worker for ``tracker.request``: hold the device until the client releases
    the session (or ``session_timeout`` seconds pass; 0: no limit)."""
    from distributed.utils import sync

    worker, info = _this_device()
    _leave_if_device_gone(worker)
    if _claim(worker) is not None:
        return "lost"
    task = str(worker.get_current_task())
    deadline = time.monotonic() + session_timeout if session_timeout > 0 else None
    while True:
        left = 5.0 if deadline is None else min(5.0, deadline - time.monotonic())
        if left <= 0:
            return "timeout"
        if sync(worker.loop, worker.scheduler.tvmpy_fleet_hold, task=task, timeout=left):
            return "released"


# ---- the device worker process (`tvmpy rpc server --tracker ...`) ------------------------------
def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child before exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def start_device_server(device: str, host: str, token: str | None, key: str = "",
                        timeout: float = 120.0) -> tuple[subprocess.Popen, int]:
    """Start the device RPC server (``python -m tvmpy.rpc.server`` for ``device``) on a free
    port of ``host``; it dies with this process. Returns the process and its port."""
    from .launch import wait_for_line
    from .server import LOOPBACK, READY, device_command, server_env

    cmd = device_command(device) + ["-m", "tvmpy.rpc.server", "--device", device, "--host",
                                    host, "--port", "0", "--key", key, "--exit-with-parent"]
    if host not in LOOPBACK:  # reachable from other machines: the token is always set
        cmd.append("--allow-remote")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=server_env(device, token), cwd=tempfile.gettempdir(),
                            preexec_fn=_set_pdeathsig)
    try:
        text = wait_for_line(proc, READY, timeout, f"the {device} device server", cmd)
    except BaseException:  # a signal while it starts, too: it ends (and cleans up) with us
        stop_process(proc)
        raise
    return proc, int(text.rsplit(":", 1)[1])


def stop_process(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM ``proc`` (it cleans up), SIGKILL it after ``grace`` seconds; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace)
    if proc.stdout is not None:
        proc.stdout.close()


class Stopped(BaseException):
    """SIGTERM or SIGINT arrived while a device worker was starting (not yet in its loop)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """SIGTERM/SIGINT raise :class:`Stopped` in the main thread, so every stage before the
    worker's loop (reaching the tracker, starting the device server) unwinds and cleans up."""
    def handler(signum: int, frame: Any) -> None:
        raise Stopped(signum)

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def wait_for_tracker(tracker: str, timeout: float) -> None:
    """Return once a TCP connection to the tracker's address succeeds; ConnectionError naming
    it after ``timeout`` seconds of attempts (a tracker still starting gets that long)."""
    hostport = tracker.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--tracker must be HOST:PORT, got {tracker!r}")
    deadline = time.monotonic() + timeout
    said = False
    while True:
        try:
            socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                     timeout=max(0.1, min(2.0, deadline - time.monotonic()))
                                     ).close()
            return
        except OSError as e:
            if time.monotonic() + 0.5 > deadline:
                raise ConnectionError(f"cannot reach the tracker at {hostport} within "
                                      f"{timeout:g} s ({e.strerror or e}): is `tvmpy rpc "
                                      "tracker` running there?") from None
            if not said:
                print(f"tvmpy rpc server: the tracker at {hostport} does not answer yet "
                      f"({e.strerror or e}); trying for {timeout:g} s", file=sys.stderr,
                      flush=True)
                said = True
            time.sleep(0.5)


async def _serve_device(tracker: str, key: str, device: str, host: str, name: str,
                        security: Any, proc: subprocess.Popen, port: int, token: str,
                        connect_timeout: float, workdir: str) -> int:
    import dask
    from distributed import Worker

    dask.config.set({"distributed.worker.http.routes": []})  # no HTTP endpoints, loopback
    info = {"key": key, "name": name, "device": device, "host": host, "port": port,
            "token": token, "pid": proc.pid, "worker_pid": os.getpid()}
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # death_timeout: joining (and re-joining after a lost connection) is bounded in time
    worker = Worker(tracker, nthreads=1, resources={key: 1}, name=name, host=host,
                    dashboard=False, dashboard_address="127.0.0.1:0", memory_limit=0,
                    security=security, death_timeout=connect_timeout,
                    local_directory=workdir, plugins=(DevicePlugin(info, proc),))
    start = asyncio.ensure_future(_join(worker, info))
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({start, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not start.done():  # a signal while joining the tracker
        start.cancel()
        with contextlib.suppress(BaseException):
            await start
        await _close_worker(worker, "stopped")
        print(f"tvmpy rpc device worker {name}: stopped before it joined the tracker",
              file=sys.stderr, flush=True)
        return 0
    try:
        start.result()
    except (asyncio.TimeoutError, RuntimeError, OSError) as e:
        await _close_worker(worker, "failed to join")
        raise ConnectionError(f"could not join the tracker at {tracker} within "
                              f"{connect_timeout:g} s ({type(e).__name__}: {e})") from None
    print(f"{READY_WORKER} key={key} name={name} device={device} rpc={host}:{port} "
          f"worker={worker.address}", flush=True)
    reason = "stopped"
    while not stop.is_set():  # the device dies: this worker leaves the fleet
        if proc.poll() is not None:
            reason = f"device server exited (status {proc.returncode})"
            break
        if worker.status.name in ("closed", "closing", "failed"):
            reason = "disconnected from the tracker"
            break
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except asyncio.TimeoutError:
            pass
    print(f"tvmpy rpc device worker {name}: {reason}", file=sys.stderr, flush=True)
    try:
        await asyncio.wait_for(worker.scheduler.tvmpy_fleet_leaving(worker=worker.address,
                                                                    reason=reason), 5)
    except Exception:  # noqa: BLE001 - the tracker may be gone already
        pass
    await _close_worker(worker, reason)
    return 0 if reason == "stopped" else 1


async def _join(worker: Any, info: dict) -> None:
    await worker
    info["worker"] = worker.address
    await worker.scheduler.tvmpy_fleet_register(info=info)


async def _close_worker(worker: Any, reason: str) -> None:
    try:
        await asyncio.wait_for(worker.close(reason=reason), 10)
    except Exception:  # noqa: BLE001 - closing what never fully started
        pass


def run_device_worker(tracker: str, key: str, device: str = "native", host: str = "127.0.0.1",
                      name: str | None = None, security: Any = None,
                      connect_timeout: float = 10.0) -> int:
    """Own one device: start its RPC server, join the tracker as a Dask worker with resources
    ``{key: 1}``, serve until stopped or until the device dies (then leave the fleet).

    The tracker must be reachable within ``connect_timeout`` seconds (else ConnectionError).
    SIGTERM/SIGINT stop it at any stage; the device server and the worker's directory go with
    it. Returns 0 when stopped, 1 when the device or the tracker was lost."""
    if not key:
        raise ValueError("a device worker needs a key (--key)")
    if not connect_timeout > 0:
        raise ValueError(f"--connect-timeout must be > 0 seconds, got {connect_timeout!r}")
    from .server import _sweep_stale_dirs

    quiet_dask_logs()
    address = _tracker_address(tracker, security)
    proc: subprocess.Popen | None = None
    workdir: str | None = None
    try:
        with _signals_raise():  # until the worker's loop takes the signals over
            wait_for_tracker(address, connect_timeout)
            token = secrets.token_hex(16)
            proc, port = start_device_server(device, host, token, key)
            _sweep_stale_dirs(WORKER_DIR_PREFIX)  # those of workers killed with SIGKILL
            workdir = tempfile.mkdtemp(prefix=f"{WORKER_DIR_PREFIX}{os.getpid()}_")
            name = name or f"{key}-{device}-{os.getpid()}"
            return asyncio.run(_serve_device(address, key, device, host, name, security, proc,
                                             port, token, connect_timeout, workdir))
    except Stopped as e:
        print(f"tvmpy rpc server: stopped ({e}) before it joined the tracker", file=sys.stderr,
              flush=True)
        return 0
    finally:  # bounded; a second signal must not cut it short
        old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM,
                                                                   signal.SIGINT)}
        try:
            if proc is not None:
                stop_process(proc)
                _sweep_stale_dirs()  # the server's directory, had it no time to delete it
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)


def _tracker_address(tracker: str, security: Any = None) -> str:
    if "://" in tracker:
        return tracker
    scheme = "tls" if security is not None and getattr(security, "require_encryption",
                                                       False) else "tcp"
    return f"{scheme}://{tracker}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tvmpy.rpc.fleet",
                                description="a device worker of the tvmpy fleet")
    add_worker_arguments(p)
    args = p.parse_args(argv)
    return run_from_args(args)


def add_worker_arguments(p: argparse.ArgumentParser) -> None:
    from .ports import host_port

    p.add_argument("--tracker", required=True, type=host_port,
                   help="HOST:PORT of `tvmpy rpc tracker`")
    p.add_argument("--key", required=True, help="device key, e.g. rasp4b")
    from .server import DEVICES

    p.add_argument("--device", default="native", choices=DEVICES)
    p.add_argument("--host", default="127.0.0.1", help="address of this worker and its device "
                   "server (default 127.0.0.1)")
    p.add_argument("--name", default=None, help="device name shown by `tvmpy rpc status`")
    add_connect_timeout_argument(p)
    add_tls_arguments(p)


def add_connect_timeout_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                   help="with --tracker: seconds to reach and join the tracker before giving "
                   "up with an error (default 10)")


def add_tls_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls-ca-file", default=None, help="CA certificate (Dask TLS)")
    p.add_argument("--tls-cert", default=None, help="this side's certificate (Dask TLS)")
    p.add_argument("--tls-key", default=None, help="this side's private key (Dask TLS)")


def security_from_args(args: argparse.Namespace) -> Any:
    """A Dask ``Security`` requiring TLS when the three TLS files are given, else None."""
    files = (args.tls_ca_file, args.tls_cert, args.tls_key)
    if not any(files):
        return None
    if not all(files):
        raise ValueError("TLS needs --tls-ca-file, --tls-cert and --tls-key together")
    from distributed.security import Security

    return Security(tls_ca_file=args.tls_ca_file, tls_client_cert=args.tls_cert,
                    tls_client_key=args.tls_key, tls_worker_cert=args.tls_cert,
                    tls_worker_key=args.tls_key, tls_scheduler_cert=args.tls_cert,
                    tls_scheduler_key=args.tls_key, require_encryption=True)


def run_from_args(args: argparse.Namespace) -> int:
    try:
        return run_device_worker(args.tracker, args.key, args.device, args.host, args.name,
                                 security_from_args(args), args.connect_timeout)
    except (ValueError, OSError, RuntimeError, TimeoutError) as e:
        print(f"tvmpy rpc server: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
