"""LSTM / GRU models (``nn.rnn_scan`` on CPU targets) built for GPU targets: the ``Legalize``
pass expands each ``rnn_scan`` into the per-step ops it replaced (no GPU kernel of its own).
Built for opencl and run on PoCL against onnxruntime; built for cuda (NVRTC + ptxas, not run)
and for the C target (run) with the same results."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(3011)


def _r(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


def _model(kind, T, N, I, H, direction="forward", states=False, layers=1, **attrs):
    """``layers`` stacked ONNX LSTM/GRU nodes (layer k's Y, its direction axis folded into the
    features, is layer k+1's input); initial states as graph inputs when ``states``."""
    G, dirs = {"GRU": 3, "LSTM": 4}[kind], 2 if direction == "bidirectional" else 1
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, N, I])]
    inits, nodes, outs, x, feat = [], [], [], "X", I
    for k in range(layers):
        inits += [numpy_helper.from_array(_r(dirs, G * H, feat), f"W{k}"),
                  numpy_helper.from_array(_r(dirs, G * H, H), f"R{k}"),
                  numpy_helper.from_array(_r(dirs, 2 * G * H), f"B{k}")]
        names = [x, f"W{k}", f"R{k}", f"B{k}", ""]
        if states:
            for nm in (f"h{k}", f"c{k}") if kind == "LSTM" else (f"h{k}",):
                names.append(nm)
                ins.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, [dirs, N, H]))
        y = [f"Y{k}", f"Yh{k}"] + ([f"Yc{k}"] if kind == "LSTM" else [])
        nodes.append(helper.make_node(kind, names, y, hidden_size=H, direction=direction,
                                      **attrs))
        outs += y[1:]
        inits.append(numpy_helper.from_array(np.array([-1, N, dirs * H], np.int64), f"s{k}"))
        nodes += [helper.make_node("Transpose", [y[0]], [f"t{k}"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"t{k}", f"s{k}"], [f"x{k}"])]
        x, feat = f"x{k}", dirs * H
    outs.append(x)
    graph = helper.make_graph(nodes, "rnn", ins, [helper.make_tensor_value_info(
        o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _feeds(model, N, H, dirs):
    t = model.graph.input[0].type.tensor_type.shape.dim
    feeds = {"X": _r(*[d.dim_value for d in t])}
    for i in model.graph.input[1:]:
        feeds[i.name] = _r(dirs, N, H)
    return feeds


def _build(model, feeds, target):
    mod, params = relay.frontend.from_onnx(model, {k: v.shape for k, v in feeds.items()})
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target, params=params)


def _run(lib, dev, feeds):
    g = graph_executor.GraphModule(lib["default"](dev))
    g.set_input(**feeds)
    g.run()
    return [g.get_output(i).numpy() for i in range(g.get_num_outputs())]


def _kernels(lib):
    return [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
            if n["op"] == "tvm_op"]


CASES = [  # kind, T, N, I, H, direction, states, layers, extra attrs
    ("LSTM", 5, 2, 6, 13, "forward", False, 1, {}),
    ("LSTM", 4, 3, 5, 20, "bidirectional", True, 2, {}),
    ("LSTM", 3, 1, 4, 7, "reverse", True, 1, {}),
    ("GRU", 5, 2, 4, 17, "forward", False, 2, {}),                       # linear_before_reset 0
    ("GRU", 4, 3, 5, 11, "bidirectional", True, 1, {}),
    ("GRU", 4, 2, 3, 19, "bidirectional", False, 2, {"linear_before_reset": 1}),
    ("GRU", 1, 1, 3, 16, "reverse", True, 1, {"linear_before_reset": 1}),
]


@pytest.mark.parametrize("kind,T,N,I,H,direction,states,layers,extra", CASES)
def test_rnn_on_opencl_matches_onnxruntime(kind, T, N, I, H, direction, states, layers, extra):
    dirs = 2 if direction == "bidirectional" else 1
    model = _model(kind, T, N, I, H, direction, states, layers, **extra)
    feeds = _feeds(model, N, H, dirs)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    lib = _build(model, feeds, "opencl")
    assert not any("rnn_scan" in k for k in _kernels(lib))  # expanded: per-step kernels
    got = _run(lib, tvm.opencl(0), feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("kind,extra", [("LSTM", {}), ("GRU", {}),
                                        ("GRU", {"linear_before_reset": 1})])
def test_rnn_for_cuda_passes_ptxas(kind, extra):
    model = _model(kind, 4, 2, 5, 12, "bidirectional", True, 2, **extra)
    lib = _build(model, _feeds(model, 2, 12, 2), "cuda")
    dev_mod = lib.get_lib().imported_modules[0]
    assert dev_mod.ptxas_info and "__global__" in dev_mod.get_source()


@pytest.mark.parametrize("kind,extra", [("LSTM", {}), ("GRU", {})])
def test_rnn_for_c_target_matches_onnxruntime(kind, extra):
    """The C target keeps the ``rnn_scan`` kernel (the "cpu" strategy)."""
    model = _model(kind, 4, 2, 5, 9, "bidirectional", True, 1, **extra)
    feeds = _feeds(model, 2, 9, 2)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    lib = _build(model, feeds, "c")
    assert sum("rnn_scan" in k for k in _kernels(lib)) == 2
    for g, w in zip(_run(lib, tvm.cpu(0), feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)


def test_symbolic_sequence_on_gpu_is_a_clear_error():
    """A run-time sequence length never built for a GPU target (the unrolled recurrence needs
    a static one): a clear error, not a crash in lowering."""
    model = _model("LSTM", "T", 2, 3, 5)
    mod, params = relay.frontend.from_onnx(model)
    with pytest.raises(Exception, match="sequence length"):
        with tvm.transform.PassContext(opt_level=3):
            relay.build(mod, "opencl", params=params)
