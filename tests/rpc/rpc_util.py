"""Libraries the RPC tests run remotely, with their numpy references."""

from __future__ import annotations

import os
import select
import subprocess
import time

import numpy as np

GRAPH_IN = (3, 17)
GRAPH_W = (5, 17)


def build_libs(folder: str, target: str = "llvm", ext: str = "so") -> dict:
    """``affine.<ext>`` (B = A * 2 + 1 over a symbolic length), ``graph.<ext>`` (relay.build of
    dense + bias + relu with a second output, parameters embedded) and its parameters."""
    import tvmpy as tvm
    from tvmpy import relay, te

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    affine = os.path.join(folder, f"affine.{ext}")
    tvm.build(s, [A, B], target, name="affine").export_library(affine)

    rng = np.random.default_rng(7)
    w = rng.standard_normal(GRAPH_W).astype("float32")
    b = rng.standard_normal(GRAPH_W[0]).astype("float32")
    x = relay.var("data", shape=GRAPH_IN)
    wv, bv = relay.var("w", shape=GRAPH_W), relay.var("b", shape=(GRAPH_W[0],))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, wv), bv))
    out = relay.Tuple([y, relay.sigmoid(y) * relay.const(3.0)])
    mod = tvm.IRModule.from_expr(relay.Function([x, wv, bv], out))
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(mod, target=target, params={"w": w, "b": b})
    graph = os.path.join(folder, f"graph.{ext}")
    factory.export_library(graph)
    return {"affine": affine, "graph": graph, "w": w, "b": b}


def graph_reference(libs: dict, x: np.ndarray) -> list[np.ndarray]:
    y = np.maximum(x @ libs["w"].T + libs["b"], 0)
    return [y, 3.0 / (1.0 + np.exp(-y))]


def read_ready(proc: subprocess.Popen, timeout: float = 120) -> tuple[str, str | None]:
    """A server process's "listening on" line and the token it printed before (None if it
    printed none), or a failure after ``timeout`` seconds (its stdout read unbuffered)."""
    from tvmpy.rpc.server import READY, TOKEN_LINE

    token, buf = None, b""
    end = time.monotonic() + timeout
    while True:
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            line = raw.decode()
            if line.startswith(TOKEN_LINE):
                token = line[len(TOKEN_LINE):].strip()
            elif line.startswith(READY):
                return line, token
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, end - time.monotonic()))
        assert ready, f"the server printed no '{READY}' line within {timeout} s"
        chunk = os.read(proc.stdout.fileno(), 4096)  # type: ignore[union-attr]
        assert chunk, "the server exited before it was ready"
        buf += chunk


def ready_line(proc: subprocess.Popen, timeout: float = 120) -> str:
    """A server process's "listening on" line (lines before it skipped)."""
    return read_ready(proc, timeout)[0]


def save_conv_model(path, seed: int) -> None:
    """A one-Conv ONNX model (1x3x10x10 -> 1x8x8x8, random weights of ``seed``) at ``path``:
    the model the fleet's `tvmpy tune` tests tune."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(seed).standard_normal((8, 3, 3, 3))
                                .astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3])],
                          "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                 [1, 3, 10, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                          initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.save(m, path)
