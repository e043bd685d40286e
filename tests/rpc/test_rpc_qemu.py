"""An RPC server running under qemu-user in an AArch64 Python (``--device qemu-aarch64``):
a session with arrays and files, and modules cross-built for AArch64 run through it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import rpc
from tvmpy.contrib import graph_executor

from .rpc_util import GRAPH_IN, build_libs, graph_reference, read_ready

AARCH64 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon"
ROOT = Path(__file__).resolve().parents[2]


def _ensure_sysroot() -> None:
    from tvmpy.contrib import qemu

    try:
        qemu.find_sysroot()
    except RuntimeError:
        qemu.setup_sysroot()


@pytest.fixture(scope="module")
def a64_remote():
    _ensure_sysroot()
    srv = rpc.Server(port=0, device="qemu-aarch64", start_timeout=300)
    sess = rpc.connect("127.0.0.1", srv.port, call_timeout=600, token=srv.token)
    yield sess
    sess.close()
    srv.terminate()


def test_qemu_server_session(a64_remote, libs, rng):
    remote = a64_remote
    assert remote.get_function("runtime.device_info")()["machine"] == "aarch64"
    dev = remote.cpu(0)
    for dtype, shape in [("float32", (4, 9)), ("int16", (13,)), ("float64", (2, 0, 3))]:
        x = (rng.standard_normal(shape) * 100).astype(dtype)
        a = tvm.nd.array(x, dev)
        np.testing.assert_array_equal(a.numpy(), x)
    remote.upload(b"\x00\x01payload", target="f.bin")
    assert remote.download("f.bin") == b"\x00\x01payload"
    remote.upload(libs["affine"], target="x86.so")  # a host library cannot load there
    with pytest.raises(Exception, match="x86.so"):
        remote.load_module("x86.so")
    with pytest.raises(PermissionError):
        remote.download("../f.bin")
    assert remote.ping() == "pong"


def test_qemu_server_runs_aarch64_modules(a64_remote, tmp_path, rng):
    remote = a64_remote
    a64 = build_libs(str(tmp_path), target=AARCH64)
    remote.upload(a64["affine"], target="affine_a64.so")
    remote.upload(a64["graph"], target="graph_a64.so")
    dev = remote.cpu(0)
    f = remote.load_module("affine_a64.so")
    x = rng.standard_normal(77).astype("float32")
    a, b = tvm.nd.array(x, dev), tvm.nd.empty((77,), "float32", dev)
    f(a, b)
    np.testing.assert_allclose(b.numpy(), x * 2 + 1, rtol=1e-6)
    assert f.time_evaluator("affine", dev, number=3, repeat=2)(a, b).mean > 0
    m = graph_executor.GraphModule(remote.load_module("graph_a64.so")["default"](dev))
    xg = rng.standard_normal(GRAPH_IN).astype("float32")
    m.set_input("data", xg)
    m.run()
    for i, want in enumerate(graph_reference(a64, xg)):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5, atol=1e-5)
    assert m.module.time_evaluator("run", dev, number=2)().mean > 0
    res = remote.get_function("runtime.measure")("affine_a64.so", "affine",
                                                 [[[256], "float32"], [[256], "float32"]], 2, 2)
    assert len(res["costs"]) == 2 and os.path.basename(a64["graph"]) == "graph.so"


def test_cli_qemu_server():
    """``tvmpy rpc server --device qemu-aarch64`` serves from an AArch64 process; stopping the
    command stops it."""
    _ensure_sysroot()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "tvmpy", "rpc", "server", "--device",
                             "qemu-aarch64", "--port", "0", "--key", "a64"],
                            stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        line, token = read_ready(proc, 300)  # no token given: the server printed one
        assert line.startswith("tvmpy rpc server listening on 127.0.0.1:"), line
        with rpc.connect("127.0.0.1", int(line.rsplit(":", 1)[1]), key="a64",
                         token=token) as sess:
            assert sess.get_function("runtime.device_info")()["machine"] == "aarch64"
        proc.terminate()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        proc.stdout.close()  # type: ignore[union-attr]
