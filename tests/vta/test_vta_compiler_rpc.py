"""VTA through RPC as TVM's tutorials run it: save, upload, load_module, ext_dev, on a real
``--device vta`` server (its own process, vta-hw's simulator)."""

import numpy as np

import tvmpy as tvm
import tvmpy.vta as vta
from tvmpy import rpc

from .test_vta_compiler_gemm import _gemm_ref, _gemm_schedule


def test_rpc_server_device_vta(tmp_path):
    env = vta.get_env()
    o, n, m = 1, 3, 2
    s, A, B, C = _gemm_schedule(env, o, n, m)
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host, name="my_gemm")
    path = str(tmp_path / "gemm.o")
    f.save(path)
    srv = rpc.Server(port=0, silent=True, start_timeout=60, device="vta")
    try:
        remote = rpc.connect("127.0.0.1", srv.port, timeout=30, call_timeout=120,
                             token=srv.token)
        remote.upload(path)
        g = remote.load_module("gemm.o")
        ctx = remote.ext_dev(0)
        rng = np.random.default_rng(7)
        a = rng.integers(-128, 128, (o, n, env.BATCH, env.BLOCK_IN)).astype(np.int8)
        b = rng.integers(-128, 128, (m, n, env.BLOCK_OUT, env.BLOCK_IN)).astype(np.int8)
        a_nd = tvm.nd.array(a, ctx)
        b_nd = tvm.nd.array(b, ctx)
        c_nd = tvm.nd.array(np.zeros((o, m, env.BATCH, env.BLOCK_OUT), np.int8), ctx)
        g(a_nd, b_nd, c_nd)
        np.testing.assert_array_equal(c_nd.numpy(), _gemm_ref(env, a, b))
        remote.close()
    finally:
        srv.terminate()


def test_fleet_device_vta(tmp_path):
    """``tvmpy rpc server --device vta --tracker ...`` as a fleet device of key "vta": a
    session requested from the tracker runs the module on the simulated VTA."""
    from tvmpy.rpc.tracker import DeviceWorker, Tracker, connect_tracker

    env = vta.get_env()
    o, n, m = 1, 2, 3
    s, A, B, C = _gemm_schedule(env, o, n, m)
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host, name="my_gemm")
    path = str(tmp_path / "gemm.o")
    f.save(path)
    tracker = Tracker(port=0)
    worker = None
    try:
        worker = DeviceWorker(tracker.address, "vta", device="vta", name="vta-0")
        remote = connect_tracker("127.0.0.1", tracker.port).request("vta", timeout=60)
        remote.upload(path)
        g = remote.load_module("gemm.o")
        ctx = remote.ext_dev(0)
        rng = np.random.default_rng(11)
        a = rng.integers(-128, 128, (o, n, env.BATCH, env.BLOCK_IN)).astype(np.int8)
        b = rng.integers(-128, 128, (m, n, env.BLOCK_OUT, env.BLOCK_IN)).astype(np.int8)
        c_nd = tvm.nd.array(np.zeros((o, m, env.BATCH, env.BLOCK_OUT), np.int8), ctx)
        g(tvm.nd.array(a, ctx), tvm.nd.array(b, ctx), c_nd)
        np.testing.assert_array_equal(c_nd.numpy(), _gemm_ref(env, a, b))
        remote.close()
    finally:
        if worker is not None:
            worker.terminate()
        tracker.terminate()


def test_cli_server_device_vta_defaults_to_key_vta(monkeypatch):
    import argparse

    from tvmpy.rpc import cli, fleet

    seen = {}
    monkeypatch.setattr(fleet, "run_from_args", lambda args: seen.setdefault("key", args.key) and 0)
    p = argparse.ArgumentParser()
    cli.add_arguments(p)
    args = p.parse_args(["server", "--device", "vta", "--tracker", "127.0.0.1:9190"])
    cli.run(args)
    assert seen["key"] == "vta"
