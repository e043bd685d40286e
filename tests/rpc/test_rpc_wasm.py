"""``--device wasm``: a server whose modules are .wasm files that tvmpy's runtime runs in
wasmtime; a kernel and a graph built for wasm32 run and are timed through an RPC session."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import rpc
from tvmpy.contrib import graph_executor

from .rpc_util import GRAPH_IN, build_libs, graph_reference

WASM = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128"


def test_wasm_device_server(tmp_path, rng):
    libs = build_libs(str(tmp_path), target=WASM, ext="wasm")
    with rpc.Server(port=0, device="wasm", silent=True) as srv, \
            rpc.connect("127.0.0.1", srv.port, call_timeout=120, token=srv.token) as remote:
        assert remote.get_function("runtime.device_info")()["device"] == "wasm"
        remote.upload(libs["affine"])
        remote.upload(libs["graph"])
        dev = remote.cpu(0)
        f = remote.load_module("affine.wasm")
        x = rng.standard_normal(45).astype("float32")
        a, b = tvm.nd.array(x, dev), tvm.nd.empty((45,), "float32", dev)
        f(a, b)
        np.testing.assert_allclose(b.numpy(), x * 2 + 1, rtol=1e-6)
        assert f.time_evaluator("affine", dev, number=3, repeat=2)(a, b).mean > 0
        m = graph_executor.GraphModule(remote.load_module("graph.wasm")["default"](dev))
        xg = rng.standard_normal(GRAPH_IN).astype("float32")
        m.set_input("data", xg)
        m.run()
        for i, want in enumerate(graph_reference(libs, xg)):
            np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5, atol=1e-5)
        assert m.module.time_evaluator("run", dev, number=2)().mean > 0
        res = remote.get_function("runtime.measure")(
            "affine.wasm", "affine", [[[300], "float32"], [[300], "float32"]], 2, 2, 0, 0, "", 1,
            True)
        np.testing.assert_allclose(res["args"][1], res["args"][0] * 2 + 1, rtol=1e-6)
