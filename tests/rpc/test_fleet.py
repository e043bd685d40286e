"""The device fleet on Dask distributed (loopback only): the tracker is a Dask scheduler, each
device a Dask worker with resources {KEY: 1} owning a native device RPC server.

status shows the fleet; requests queue by priority; RPCRunner tunes an x86 task and
``tune_model`` runs over it; a device killed mid-run (its worker process, or only its device
server) becomes one failed trial while the others go on, and the log holds every trial once.
Every process is killed in the fixtures' teardown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay, te, tir
from tvmpy.autotvm import record
from tvmpy.autotvm.measure import MeasureErrorNo, MeasureInput, create_measure_batch
from tvmpy.rpc.tracker import DeviceWorker, Tracker, check_tracker_bind, connect_tracker

from .rpc_util import save_conv_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@autotvm.template("test_fleet/slow_add")
def slow_add(n):
    """Each call sleeps 50 ms per element: a measurement lasts long enough to be killed."""
    A = te.placeholder((n,), name="A")
    cfg = autotvm.get_config()
    cfg.define_knob("k", list(range(16)))
    pause = tir.call_extern("int32", "usleep", 50000).astype("float32")
    B = te.compute((n,), lambda i: A[i] + pause, name="B")
    return te.create_schedule(B.op), [A, B]


class Fleet:
    def __init__(self, devices: dict[str, int]):
        self.tracker = Tracker(port=0)
        self.devices: list[DeviceWorker] = []
        self.session = None
        try:
            for key, n in devices.items():
                for i in range(n):
                    self.devices.append(DeviceWorker(self.tracker.address, key,
                                                     name=f"{key}-{i}"))
            self.session = connect_tracker("127.0.0.1", self.tracker.port)
        except BaseException:
            self.close()
            raise

    def device(self, name: str) -> dict:
        for entry in self.session.summary()["keys"].values():
            for d in entry["devices"]:
                if d["name"] == name:
                    return d
        raise KeyError(name)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        for d in self.devices:
            d.terminate()
        self.tracker.terminate()


@pytest.fixture(scope="module")
def fleet():
    f = Fleet({"x86": 2, "solo": 1})
    yield f
    f.close()


def _wait_for(pred, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


def test_status_shows_the_fleet(fleet):
    summary = fleet.session.summary()["keys"]
    assert sorted(d["name"] for d in summary["x86"]["devices"]) == ["x86-0", "x86-1"]
    assert [d["name"] for d in summary["solo"]["devices"]] == ["solo-0"]
    assert all(d["status"] == "free" and d["device"] == "native"
               for e in summary.values() for d in e["devices"])
    text = fleet.session.text_summary()
    for word in ("x86-0", "x86-1", "solo-0", "free", "queued"):
        assert word in text
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "tvmpy.cli", "rpc", "status", "--tracker",
                          fleet.tracker.address], capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 0, out.stderr
    assert "x86-1" in out.stdout and "solo-0" in out.stdout


def test_cli_server_joins_the_fleet(fleet):
    """`tvmpy rpc server --tracker HOST:PORT --key KEY` is a device of the fleet until stopped."""
    proc = subprocess.Popen([sys.executable, "-m", "tvmpy", "rpc", "server", "--tracker",
                             fleet.tracker.address, "--key", "cli", "--name", "cli-0"],
                            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: "cli" in fleet.session.keys(), timeout=60, what="cli-0 to join")
        assert fleet.device("cli-0")["device"] == "native"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    _wait_for(lambda: "cli" not in fleet.session.keys(), what="cli-0 to leave")
    bad = subprocess.run([sys.executable, "-m", "tvmpy", "rpc", "server", "--tracker",
                          fleet.tracker.address], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert bad.returncode == 2 and "--tracker needs --key" in bad.stderr


def test_request_gives_a_session_on_a_device(fleet):
    from tvmpy import rpc

    assert rpc.connect_tracker is connect_tracker and rpc.Tracker is Tracker
    sess = fleet.session.request("x86", priority=1, session_timeout=30, timeout=30)
    try:
        x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
        a = tvm.nd.array(x, sess.cpu(0))
        np.testing.assert_array_equal(a.numpy(), x)
        busy = [d for d in fleet.session.summary()["keys"]["x86"]["devices"]
                if d["status"] == "busy"]
        assert len(busy) == 1
    finally:
        sess.close()
    _wait_for(lambda: all(d["status"] == "free" for d in
                          fleet.session.summary()["keys"]["x86"]["devices"]),
              what="the device to be released")


def test_unknown_key_is_refused(fleet):
    with pytest.raises(LookupError, match="no device with key 'nope'.*solo"):
        fleet.session.request("nope", timeout=10)
    with pytest.raises(LookupError, match="no device with key 'nope'"):
        autotvm.RPCRunner("nope", port=fleet.tracker.port).set_task(None)


def test_requests_queue_by_priority(fleet):
    holder = fleet.session.request("solo", session_timeout=60, timeout=30)
    order: list[int] = []
    errors: list[BaseException] = []

    def ask(priority: int) -> None:
        try:
            s = fleet.session.request("solo", priority=priority, session_timeout=60, timeout=60)
            order.append(priority)
            s.close()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = []
    for p in (1, 7, 3):
        t = threading.Thread(target=ask, args=(p,), daemon=True)
        t.start()
        threads.append(t)
        # the request is queued (on the tracker) before the next one is made
        _wait_for(lambda n=len(threads): len(fleet.session.summary()["keys"]["solo"]["queue"])
                  == n, what="the request to be queued")
    queue = fleet.session.summary()["keys"]["solo"]["queue"]
    assert [q["priority"] for q in queue] == [7, 3, 1]
    assert "7,3,1" in fleet.session.text_summary()
    holder.close()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert order == [7, 3, 1]


def test_rpc_runner_tunes_an_x86_gemm(fleet, tmp_path):
    task = autotvm.task.create("gemm.x86", (64, 48, 40, "float32"), target="llvm")
    log = tmp_path / "gemm.json"
    runner = autotvm.RPCRunner("x86", port=fleet.tracker.port, number=2, repeat=2, timeout=30)
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2), runner=runner)
    tuner = autotvm.tuner.RandomTuner(task)
    tuner.tune(n_trial=6, measure_option=option, callbacks=[autotvm.callback.log_to_file(log)])
    runner.close()
    recs = list(record.load_from_file(log))
    assert len(recs) == 6
    assert len({inp.config.index for inp, _ in recs}) == 6
    assert all(res.error_no == 0 and len(res.costs) == 2 and min(res.costs) > 0
               for _, res in recs), recs
    done = sum(d["jobs_done"] for d in fleet.session.summary()["keys"]["x86"]["devices"])
    assert done >= 6


def test_tune_model_over_the_fleet(fleet, tmp_path):
    rng = np.random.default_rng(5)
    x = relay.var("x", shape=(4, 32), dtype="float32")
    w = relay.var("w", shape=(24, 32), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w))))
    params = {"w": rng.standard_normal((24, 32)).astype("float32")}
    log = tmp_path / "model.json"
    runner = autotvm.RPCRunner("x86", host="127.0.0.1", port=fleet.tracker.port, number=2,
                               repeat=1, timeout=30)
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2), runner=runner)
    tasks = autotvm.tune_model(mod, params, "llvm", log_file=log, n_trial_total=4,
                               tuner="random", measure_option=option, progress=False)
    runner.close()
    assert tasks
    recs = list(record.load_from_file(log))
    assert 0 < len(recs) <= 4 and all(r.error_no == 0 for _, r in recs)


def test_toplevel_script_tunes_over_the_fleet(fleet, tmp_path):
    """A tuning script without ``if __name__ == "__main__":``, its template defined in the
    script, measures on the fleet: the builder's workers never re-run the script."""
    import textwrap

    script = tmp_path / "tune_fleet.py"
    script.write_text(textwrap.dedent(f'''
        from tvmpy import autotvm, te

        @autotvm.template("toplevel_fleet/add")
        def add(n):
            A = te.placeholder((n,), name="A")
            B = te.compute((n,), lambda i: A[i] * 3.0 + 1.0, name="B")
            s = te.create_schedule(B.op)
            cfg = autotvm.get_config()
            cfg.define_split("t", s[B].op.axis[0], num_outputs=2)
            cfg["t"].apply(s, B, s[B].op.axis[0])
            return s, [A, B]

        print("top level ran", flush=True)
        task = autotvm.task.create("toplevel_fleet/add", (1000,), target="llvm")
        runner = autotvm.RPCRunner("x86", port={fleet.tracker.port}, number=2, repeat=1)
        option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2),
                                        runner=runner)
        autotvm.tuner.GridSearchTuner(task).tune(
            n_trial=3, measure_option=option,
            callbacks=[autotvm.callback.log_to_file({str(tmp_path / "t.json")!r})])
        runner.close()
    '''))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, PYTHONPATH=ROOT), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("top level ran") == 1
    recs = list(record.load_from_file(tmp_path / "t.json"))
    assert len(recs) == 3 and all(r.error_no == 0 for _, r in recs)


def test_run_past_the_timeout_is_a_run_timeout(fleet):
    task = autotvm.task.create("test_fleet/slow_add", (40,), target="llvm")  # 2 s per call
    runner = autotvm.RPCRunner("solo", port=fleet.tracker.port, number=1, repeat=1, timeout=1)
    batch = create_measure_batch(task, autotvm.measure_option(
        builder=autotvm.LocalBuilder(n_parallel=1), runner=runner))
    (res,) = batch([MeasureInput(task.target, task, task.config_space.get(0))])
    batch.close()
    assert res.error_no == MeasureErrorNo.RUN_TIMEOUT, res
    assert "solo-0" in res.costs[0]
    # the device is free again and measures the next candidate
    _wait_for(lambda: fleet.device("solo-0")["status"] == "free", what="solo-0 to be free")


def test_cli_tune_over_the_fleet(fleet, tmp_path):
    save_conv_model(tmp_path / "conv.onnx", 2)
    env = dict(os.environ, PYTHONPATH=ROOT)
    base = [sys.executable, "-m", "tvmpy", "tune", str(tmp_path / "conv.onnx"), "--trials", "3",
            "--tuner", "random", "--tracker", fleet.tracker.address]
    out = subprocess.run(base + ["--log", str(tmp_path / "t.json"), "--rpc-key", "x86"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    recs = list(record.load_from_file(tmp_path / "t.json"))
    assert len(recs) == 3 and all(r.error_no == 0 for _, r in recs)
    bad = subprocess.run(base + ["--log", str(tmp_path / "u.json"), "--rpc-key", "nope"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert bad.returncode == 2 and "no device with key 'nope'" in bad.stderr


# the victims' measurements last > 1.2 s (two calls of 0.6 s) and are killed within 0.1 s of their
# start: a killer thread slowed by a loaded machine still lands mid-run (at 0.6 s in all, a late
# kill once found the measurement done, its result only waiting on the device: Dask measured it
# again elsewhere, and no trial failed)
MID_RUN_N = 12


def _just_busy(dev: dict) -> dict | None:
    """A device inside a measurement: past its first 0.15 s (before that the client may still
    be connecting, and a device lost then is silently replaced by another), well before its
    end (a call lasts MID_RUN_N x 50 ms)."""
    return dev if dev["status"] == "busy" and 0.15 <= dev["busy_s"] < 0.45 else None


def test_device_killed_mid_run(tmp_path):
    """Three devices of one key: one loses its whole worker process mid-measurement, another
    only its device server. Each becomes one failed trial (RUNTIME_DEVICE, naming the device);
    the other trials are measured on the devices left; every trial is logged once."""
    f = Fleet({"victim": 3})
    try:
        task = autotvm.task.create("test_fleet/slow_add", (MID_RUN_N,), target="llvm")
        runner = autotvm.RPCRunner("victim", port=f.tracker.port, number=1, repeat=1,
                                   timeout=30)
        option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2),
                                        runner=runner)
        kills: list[str] = []

        def killer() -> None:
            for name, how in (("victim-0", "worker"), ("victim-1", "server")):
                dev = _wait_for(lambda n=name: _just_busy(f.device(n)), timeout=60,
                                what=f"{name} to be busy")
                os.kill(dev["worker_pid"] if how == "worker" else dev["pid"], signal.SIGKILL)
                kills.append(name)
                _wait_for(lambda n=name: n in [x["name"] for x in f.session.summary()["lost"]],
                          what=f"{name} to leave the fleet")

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        log = tmp_path / "victim.json"
        tuner = autotvm.tuner.GridSearchTuner(task)
        tuner.tune(n_trial=16, measure_option=option,
                   callbacks=[autotvm.callback.log_to_file(log)])
        t.join(60)
        runner.close()
        assert kills == ["victim-0", "victim-1"]
        recs = list(record.load_from_file(log))
        assert sorted(inp.config.index for inp, _ in recs) == list(range(16))
        failed = [res for _, res in recs if res.error_no != 0]
        assert len(failed) == 2, failed
        assert all(res.error_no == MeasureErrorNo.RUNTIME_DEVICE for res in failed)
        text = " ".join(str(res.costs[0]) for res in failed)
        assert "victim-0" in text and "victim-1" in text
        assert all(min(res.costs) > 0 for _, res in recs if res.error_no == 0)
        summary = f.session.summary()
        assert [d["name"] for d in summary["keys"]["victim"]["devices"]] == ["victim-2"]
        gone = {d["name"]: d["reason"] for d in summary["lost"]}
        assert gone["victim-0"].startswith("lost")  # SIGKILL: its connection dropped
        assert gone["victim-1"].startswith("device server exited")  # it said why it left
        assert "victim-1 (victim: device server exited" in f.session.text_summary()
    finally:
        f.close()


def test_retry_lost_measures_the_trial_on_another_device(tmp_path):
    """With ``retry_lost``, the trial of a device killed mid-measurement is measured on the
    other device: no failed trial, the loss is noted, every trial logged once."""
    f = Fleet({"retry": 2})
    try:
        task = autotvm.task.create("test_fleet/slow_add", (MID_RUN_N,), target="llvm")
        runner = autotvm.RPCRunner("retry", port=f.tracker.port, number=1, repeat=1,
                                   timeout=30, retry_lost=True)
        batch = create_measure_batch(task, autotvm.measure_option(
            builder=autotvm.LocalBuilder(n_parallel=2), runner=runner))
        inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in range(4)]
        killed: list[str] = []

        def killer() -> None:
            dev = _wait_for(lambda: _just_busy(f.device("retry-0")), timeout=60,
                            what="retry-0 to be busy")
            os.kill(dev["worker_pid"], signal.SIGKILL)
            killed.append(dev["name"])

        t = threading.Thread(target=killer, daemon=True)
        t.start()
        results = batch(inputs)
        t.join(60)
        batch.close()
        assert killed == ["retry-0"]
        assert [r.error_no for r in results] == [0] * 4, results
        assert len(runner.lost_devices) == 1 and "retry-0" in runner.lost_devices[0]
    finally:
        f.close()


def test_runner_gives_up_when_no_device_is_left(tmp_path):
    f = Fleet({"last": 1})
    try:
        task = autotvm.task.create("test_fleet/slow_add", (2,), target="llvm")
        runner = autotvm.RPCRunner("last", port=f.tracker.port, number=1, repeat=1, timeout=30,
                                   device_wait=2)
        batch = create_measure_batch(task, autotvm.measure_option(
            builder=autotvm.LocalBuilder(n_parallel=1), runner=runner))
        f.devices[0].terminate()
        _wait_for(lambda: not f.session.summary()["keys"].get("last", {}).get("devices"),
                  what="the device to leave")
        inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in range(2)]
        results = batch(inputs)
        batch.close()
        assert [r.error_no for r in results] == [MeasureErrorNo.RUNTIME_DEVICE] * 2
        assert "no device with key 'last' left" in results[0].costs[0]
    finally:
        f.close()


def test_tracker_binds_loopback_unless_allowed():
    check_tracker_bind("127.0.0.1", False, None)
    with pytest.raises(PermissionError, match="only the loopback"):
        check_tracker_bind("0.0.0.0", False, None)
    with pytest.raises(PermissionError, match="without TLS"):
        check_tracker_bind("0.0.0.0", True, None)
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "tvmpy.cli", "rpc", "tracker", "--host",
                          "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=60,
                         env=env)
    assert out.returncode == 2 and "refusing to bind" in out.stderr


def _cert(dirpath, name: str, ca: str | None = None) -> tuple[str, str]:
    """A self-signed CA (``ca`` None) or a certificate for 127.0.0.1 signed by CA ``ca``."""
    key, pem = str(dirpath / f"{name}.key"), str(dirpath / f"{name}.pem")
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True,  # noqa: E731
                                    timeout=60)
    if ca is None:
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", pem,
            "-days", "2", "-subj", f"/CN={name}")
        return pem, key
    csr, ext = str(dirpath / f"{name}.csr"), dirpath / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj",
        "/CN=127.0.0.1")
    run("x509", "-req", "-in", csr, "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", pem, "-days", "2", "-extfile", str(ext))
    return pem, key


def test_tls_tracker_refuses_clients_without_its_certificates(tmp_path):
    from distributed.security import Security

    from tvmpy.rpc.tracker import READY, _start, _stop

    ca_pem, _ = _cert(tmp_path, "ca")
    node_pem, node_key = _cert(tmp_path, "node", ca=str(tmp_path / "ca"))
    rogue_ca, _ = _cert(tmp_path, "rogue")
    rogue_pem, rogue_key = _cert(tmp_path, "intruder", ca=str(tmp_path / "rogue"))
    proc, line = _start([sys.executable, "-m", "tvmpy.rpc.tracker", "--port", "0",
                         "--tls-ca-file", ca_pem, "--tls-cert", node_pem, "--tls-key", node_key],
                        READY, "the TLS tracker", 60, True)
    try:
        port = int(line.rsplit(":", 1)[1])
        with pytest.raises(Exception):  # noqa: B017 - plain TCP: the TLS tracker hangs up
            connect_tracker("127.0.0.1", port, timeout=5)
        intruder = Security(tls_ca_file=rogue_ca, tls_client_cert=rogue_pem,
                            tls_client_key=rogue_key, require_encryption=True)
        with pytest.raises(Exception):  # noqa: B017 - a certificate of another CA
            connect_tracker("127.0.0.1", port, security=intruder, timeout=5)
        member = Security(tls_ca_file=ca_pem, tls_client_cert=node_pem, tls_client_key=node_key,
                          require_encryption=True)
        check_tracker_bind("0.0.0.0", True, member)  # TLS + the flag: a remote bind is allowed
        with connect_tracker("127.0.0.1", port, security=member, timeout=10) as t:
            assert t.summary()["keys"] == {} and not t.summary()["lost"]
    finally:
        _stop(proc)


def test_a_task_after_its_device_server_exited_is_rescheduled_not_failed():
    """A task that starts on a worker whose device server has already exited (the worker has
    not noticed yet) lost nothing: it waits for the worker to close and asks Dask to run it on
    another device, before any claim (so it is measured there, not reported as lost)."""
    from types import SimpleNamespace

    from distributed import Reschedule

    from tvmpy.rpc.fleet import PLUGIN_NAME, DevicePlugin, _leave_if_device_gone

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    status = SimpleNamespace(name="running")
    worker = SimpleNamespace(plugins={PLUGIN_NAME: DevicePlugin({"name": "d-0"}, dead)},
                             status=status)
    closer = threading.Timer(0.2, lambda: setattr(status, "name", "closing"))
    closer.start()
    t0 = time.monotonic()
    with pytest.raises(Reschedule):
        _leave_if_device_gone(worker)
    assert 0.15 < time.monotonic() - t0 < 4.0  # it waited for the worker to close, no longer
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        worker.plugins[PLUGIN_NAME] = DevicePlugin({"name": "d-1"}, alive)
        _leave_if_device_gone(worker)  # a live device: nothing happens
        worker.plugins[PLUGIN_NAME] = DevicePlugin({"name": "d-2"})  # no process known
        _leave_if_device_gone(worker)
    finally:
        alive.kill()
        alive.wait()
