"""The device side stands alone: a server in a fresh process where llvmlite, onnx, xgboost,
torch, dask/distributed and tvmpy's compiler packages cannot be imported (and no C compiler is on
PATH) serves a full session: uploads, remote arrays, a tvm.build module, a relay.build graph
over the remote graph executor, time_evaluator and runtime.measure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import tvmpy as tvm
from tvmpy import rpc
from tvmpy.contrib import graph_executor

from .rpc_util import GRAPH_IN, graph_reference, read_ready

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("llvmlite", "onnx", "onnxruntime", "xgboost", "torch", "dask", "distributed",
           "cloudpickle", "tvmpy.relay", "tvmpy.te", "tvmpy.tir", "tvmpy.codegen", "tvmpy.topi",
           "tvmpy.autotvm", "tvmpy.driver", "tvmpy.target", "tvmpy.arith")

DEVICE = r"""
import sys
BLOCKED = {blocked!r}
for name in BLOCKED:
    sys.modules[name] = None  # importing them now raises ImportError
from tvmpy.rpc.session import register_func

@register_func("test.loaded_modules")
def loaded():
    return sorted(m for m in sys.modules
                  if sys.modules[m] is not None and m.split(".")[0] in ("tvmpy",) + BLOCKED
                  or m in BLOCKED and sys.modules[m] is not None)

import runpy
sys.argv = ["tvmpy.rpc.server", "--port", "0"]
runpy.run_module("tvmpy.rpc.server", run_name="__main__")
"""


def test_server_with_runtime_only(libs, rng):
    env = dict(os.environ, CC="/bin/false", PATH="/nonexistent",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", DEVICE.format(blocked=BLOCKED)],
                            stdout=subprocess.PIPE, text=True, env=env, cwd="/")
    try:
        line, token = read_ready(proc)  # no token given: it generated and printed one
        assert token
        assert line.startswith("tvmpy rpc server listening on"), line
        port = int(line.rsplit(":", 1)[1])
        with rpc.connect("127.0.0.1", port, call_timeout=120, token=token) as remote:
            dev = remote.cpu(0)
            remote.upload(libs["affine"])
            remote.upload(libs["graph"])
            f = remote.load_module("affine.so")
            x = rng.standard_normal(101).astype("float32")
            a, b = tvm.nd.array(x, dev), tvm.nd.empty((101,), "float32", dev)
            f(a, b)
            np.testing.assert_allclose(b.numpy(), x * 2 + 1, rtol=1e-6)
            assert f.time_evaluator("affine", dev, number=3, repeat=2)(a, b).mean > 0
            m = graph_executor.GraphModule(remote.load_module("graph.so")["default"](dev))
            xg = rng.standard_normal(GRAPH_IN).astype("float32")
            m.set_input("data", xg)
            m.run()
            for i, want in enumerate(graph_reference(libs, xg)):
                np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5, atol=1e-5)
            assert m.module.time_evaluator("run", dev, number=3)().mean > 0
            res = remote.get_function("runtime.measure")(
                "affine.so", "affine", [[[64], "float32"], [[64], "float32"]], 2, 2)
            assert len(res["costs"]) == 2
            loaded = remote.get_function("test.loaded_modules")()
        assert "tvmpy.runtime.graph_executor" in loaded and "tvmpy.rpc.session" in loaded, loaded
        outside = [m for m in loaded if not m.startswith(("tvmpy.runtime", "tvmpy.rpc"))
                   and m not in ("tvmpy", "tvmpy.config", "tvmpy.ir", "tvmpy.ir.dtype",
                                 "tvmpy.contrib", "tvmpy.contrib.graph_executor")]
        assert not outside, f"the device side imported {outside}"
    finally:
        proc.terminate()
        proc.wait(30)

