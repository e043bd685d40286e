"""The fleet's device workers and sessions as they start, stop and die (issue 24, point 3):
an unreachable or mute tracker fails fast with one error line; SIGTERM/SIGINT stop a device
worker at every stage and leave no process or temporary directory; a session ends (with a clear
error) when its device goes; ``tvmpy tune`` that loses its only device exits non-zero.

Everything runs on 127.0.0.1 and stops by itself (``no_leaks``: no process or file in the
private TMPDIR outlives a test).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tvmpy import rpc
from tvmpy.rpc.fleet import READY_WORKER, WORKER_DIR_PREFIX
from tvmpy.rpc.tracker import DeviceWorker, Tracker, connect_tracker

from .rpc_util import save_conv_model

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("no_leaks")


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT))  # TMPDIR: no_leaks's private one


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connecting is refused
    return port


def _wait_for(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


class _Output:
    """The lines a process writes on stdout and stderr, read as they come."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._threads = [threading.Thread(target=self._read, args=(f,), daemon=True)
                         for f in (proc.stdout, proc.stderr)]
        for t in self._threads:
            t.start()

    def _read(self, f) -> None:
        for line in f:
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def join(self) -> str:
        for t in self._threads:
            t.join(10)
        return "\n".join(self.lines)


class _MuteTracker:
    """A TCP listener that accepts connections and never answers (not a Dask scheduler)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self._t.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


def _device_worker_cli(tracker: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tvmpy", "rpc", "server", "--tracker", tracker,
                             "--key", "life", *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)


# ---- an unreachable tracker ----------------------------------------------------------------------
def test_unreachable_tracker_fails_fast_with_one_error_line():
    port = _closed_port()
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "tvmpy", "rpc", "server", "--tracker",
                          f"127.0.0.1:{port}", "--key", "x"], capture_output=True, text=True,
                         timeout=120, env=_env())
    took = time.monotonic() - t0
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error" in line]
    assert errors == [f"tvmpy rpc server: error: cannot reach the tracker at 127.0.0.1:{port} "
                      "within 10 s (Connection refused): is `tvmpy rpc tracker` running there?"]
    assert "does not answer yet" in out.stderr  # it said what it was waiting for
    assert took < 60  # 10 s of attempts (the default --connect-timeout), not forever


def test_tracker_that_never_answers_fails_fast():
    mute = _MuteTracker()
    try:
        out = subprocess.run([sys.executable, "-m", "tvmpy", "rpc", "server", "--tracker",
                              f"127.0.0.1:{mute.port}", "--key", "x", "--connect-timeout", "3"],
                             capture_output=True, text=True, timeout=120, env=_env())
    finally:
        mute.close()
    assert out.returncode == 2, out.stderr
    assert f"error: could not join the tracker at tcp://127.0.0.1:{mute.port} within 3 s" \
        in out.stderr
    assert "Traceback" not in out.stderr


# ---- signals at every stage -----------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("stage", ["reaching", "joining", "serving"])
def test_signal_stops_a_device_worker_at_every_stage(stage, sig):
    """SIGTERM/SIGINT while the tracker is unreachable, while a mute tracker keeps the Dask
    worker joining, and while serving: the worker exits 0 within seconds, its device server
    with it, and their directories are deleted (no_leaks)."""
    mute = tracker = None
    try:
        if stage == "reaching":
            address = f"127.0.0.1:{_closed_port()}"
        elif stage == "joining":
            mute = _MuteTracker()
            address = f"127.0.0.1:{mute.port}"
        else:
            tracker = Tracker(port=0)
            address = tracker.address
        proc = _device_worker_cli(address, "--connect-timeout", "120")
        out = _Output(proc)
        try:
            if stage == "reaching":
                _wait_for(lambda: out.has("does not answer yet"), 60, "the first attempt")
            elif stage == "joining":  # the reachability probe, then the Dask worker's connection
                _wait_for(lambda: len(mute.conns) >= 2, 60, "the worker to connect")
            else:
                _wait_for(lambda: out.has(READY_WORKER), 120, "the worker to join")
            t0 = time.monotonic()
            proc.send_signal(sig)
            assert proc.wait(30) == 0, out.join()
            assert time.monotonic() - t0 < 20
        finally:
            _kill(proc)
        text = out.join()
        assert "Traceback" not in text and "stopped" in text, text
        if tracker is not None:
            with connect_tracker("127.0.0.1", tracker.port) as t:
                _wait_for(lambda: not t.keys(), 30, "the device to leave the fleet")
                assert t.summary()["lost"][-1]["reason"] == "stopped"
    finally:
        if mute is not None:
            mute.close()
        if tracker is not None:
            tracker.terminate()


# ---- a session ends with its device ----------------------------------------------------------------
@pytest.mark.parametrize("victim", ["worker", "server"])
def test_session_ends_with_its_device(victim, no_leaks):
    """The device worker (or only its RPC server) is killed while a client holds a session on
    it: once the fleet shows no device, the session answers with an error saying the server is
    gone, not with results from a process that no longer belongs to the fleet."""
    from tvmpy.rpc.server import _sweep_stale_dirs

    tracker = Tracker(port=0)
    dev = None
    try:
        dev = DeviceWorker(tracker.address, "gone", name="gone-0")
        with connect_tracker("127.0.0.1", tracker.port) as t:
            sess = t.request("gone", session_timeout=120, timeout=60)
            try:
                assert sess.ping() == "pong"
                info = t.summary()["keys"]["gone"]["devices"][0]
                os.kill(info["worker_pid" if victim == "worker" else "pid"], signal.SIGKILL)
                _wait_for(lambda: "gone" not in t.keys(), 60, "the device to leave the fleet")

                def ended() -> str | None:
                    try:
                        sess.ping()
                    except rpc.RPCError as e:
                        return str(e)
                    return None

                message = _wait_for(ended, 10, "the session to end")
                assert "server is gone" in message, message
                with pytest.raises(rpc.RPCError, match="closed"):
                    sess.ping()
            finally:
                sess.close()
    finally:
        if dev is not None:
            dev.terminate()
        tracker.terminate()
    # a killed worker cannot delete its own directories: the next server or worker sweeps them
    def swept() -> bool:
        _sweep_stale_dirs()
        _sweep_stale_dirs(WORKER_DIR_PREFIX)
        return not list(no_leaks.iterdir())

    _wait_for(swept, 15, "the dead device's directories to be swept")


# ---- tvmpy tune loses its only device ---------------------------------------------------------------
def test_cli_tune_exits_nonzero_when_no_device_is_left(tmp_path):
    from tvmpy.autotvm import record
    from tvmpy.autotvm.measure import MeasureErrorNo

    save_conv_model(tmp_path / "conv.onnx", 3)
    log = tmp_path / "t.json"
    tracker = Tracker(port=0)
    dev = proc = None
    try:
        dev = DeviceWorker(tracker.address, "lone", name="lone-0")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tvmpy", "tune", str(tmp_path / "conv.onnx"), "--trials", "8",
             "--tuner", "random", "--tracker", tracker.address, "--rpc-key", "lone",
             "--rpc-device-wait", "2", "--log", str(log)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        with connect_tracker("127.0.0.1", tracker.port) as t:
            _wait_for(lambda: any(d["jobs_done"] >= 1 for d in
                                  t.summary()["keys"].get("lone", {}).get("devices", [])),
                      240, "the first measurement")
        dev.terminate()  # the only device leaves while trials remain
        out, err = proc.communicate(timeout=600)
    finally:
        if proc is not None:
            _kill(proc)
        if dev is not None:
            dev.terminate()
        tracker.terminate()
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err, err
    assert "tvmpy tune: error: RPCRunner: no device with key 'lone' left in the fleet" in err, err
    recs = list(record.load_from_file(log))
    failed = [r for _, r in recs if r.error_no != 0]
    assert 1 <= len(failed) and len(recs) <= 8, recs
    assert all(r.error_no == MeasureErrorNo.RUNTIME_DEVICE for r in failed)
    assert f"{len(failed)} of the {len(recs)} trials of this run failed" in err, err
