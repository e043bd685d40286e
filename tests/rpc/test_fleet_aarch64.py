"""An AArch64 device in the fleet: a Dask worker owning an RPC server in an AArch64 Python under
qemu-user. RPCRunner tunes an AArch64 conv2d task on it (LocalBuilder cross-links each
candidate); the best configuration, run in a session from ``tracker.request``, equals a numpy
convolution. Loopback only; every process is killed in the teardown."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm import record
from tvmpy.rpc.tracker import DeviceWorker, Tracker, connect_tracker

A64 = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon"
C, H, W, OC, K, ICB, OCB = 8, 9, 7, 8, 3, 4, 4  # awkward spatial sizes, NEON-width blocks


def _args():
    data = te.placeholder((1, C // ICB, H, W, ICB), name="data")
    kernel = te.placeholder((OC // OCB, C // ICB, K, K, ICB, OCB), name="kernel")
    return (data, kernel, (1, 1), (1, 1, 1, 1), (1, 1), f"NCHW{ICB}c", f"NCHW{OCB}c", "float32")


def _reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NCHWc conv2d (stride 1, pad 1) through the plain NCHW/OIHW layouts."""
    xn = x.transpose(0, 1, 4, 2, 3).reshape(1, C, H, W)
    wn = w.transpose(0, 5, 1, 4, 2, 3).reshape(OC, C, K, K)
    xp = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, OC, H, W), "float64")
    for dy in range(K):
        for dx in range(K):
            out += np.einsum("nchw,oc->nohw", xp[:, :, dy:dy + H, dx:dx + W], wn[:, :, dy, dx])
    return out.reshape(1, OC // OCB, OCB, H, W).transpose(0, 1, 3, 4, 2).astype("float32")


@pytest.fixture(scope="module")
def fleet():
    tracker = Tracker(port=0)
    devices = []
    try:
        devices.append(DeviceWorker(tracker.address, "a64", "qemu-aarch64", "qemu-0"))
        yield tracker
    finally:
        for d in devices:
            d.terminate()
        tracker.terminate()


def test_aarch64_conv2d_tunes_over_a_qemu_device(fleet, tmp_path):
    task = autotvm.task.create("conv2d_NCHWc.x86", _args(), target=A64)
    log = tmp_path / "a64.json"
    runner = autotvm.RPCRunner("a64", port=fleet.port, number=2, repeat=1, timeout=60)
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2, timeout=60),
                                    runner=runner)
    autotvm.tuner.RandomTuner(task).tune(n_trial=3, measure_option=option,
                                         callbacks=[autotvm.callback.log_to_file(log)])
    runner.close()
    recs = list(record.load_from_file(log))
    assert len(recs) == 3
    assert all(res.error_no == 0 and min(res.costs) > 0 for _, res in recs), recs

    # the best configuration computes the convolution on the device
    best = min(recs, key=lambda p: np.mean(p[1].costs))[0]
    s, args = task.instantiate(best.config)
    lib_path = str(tmp_path / "best.so")
    tvm.build(s, args, A64).export_library(lib_path)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, tuple(int(d) for d in args[0].shape)).astype("float32")
    w = rng.uniform(-1, 1, tuple(int(d) for d in args[1].shape)).astype("float32")
    with connect_tracker("127.0.0.1", fleet.port) as tracker:
        sess = tracker.request("a64", priority=2, session_timeout=120, timeout=120)
        try:
            sess.upload(lib_path)
            rlib = sess.load_module("best.so")
            dev = sess.cpu(0)
            out = tvm.nd.empty(tuple(int(d) for d in args[2].shape), "float32", dev)
            rlib(tvm.nd.array(x, dev), tvm.nd.array(w, dev), out)
            got = out.numpy()
        finally:
            sess.close()
    want = _reference(x, w)
    assert np.abs(want).max() > 0.5
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
