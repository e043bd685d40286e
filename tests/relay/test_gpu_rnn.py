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

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from tvmpy.relay.testing import onnx_models  # noqa: E402

_model = onnx_models.recurrent  # (kind, T, N, I, H, direction, states, layers, **attrs)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


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
    model = _model(kind, T, N, I, H, direction, states, layers, **extra)
    feeds = onnx_models.input_feeds(model)
    want = _ort(model, feeds)
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
    lib = _build(model, onnx_models.input_feeds(model), "cuda")
    dev_mod = lib.get_lib().imported_modules[0]
    assert dev_mod.ptxas_info and "__global__" in dev_mod.get_source()


@pytest.mark.parametrize("kind,extra", [("LSTM", {}), ("GRU", {})])
def test_rnn_for_c_target_matches_onnxruntime(kind, extra):
    """The C target keeps the ``rnn_scan`` kernel (the "cpu" strategy)."""
    model = _model(kind, 4, 2, 5, 9, "bidirectional", True, 1, **extra)
    feeds = onnx_models.input_feeds(model)
    want = _ort(model, feeds)
    lib = _build(model, feeds, "c")
    assert sum("rnn_scan" in k for k in _kernels(lib)) == 2
    for g, w in zip(_run(lib, tvm.cpu(0), feeds), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)


def test_symbolic_sequence_on_gpu_is_a_clear_error():
    """A run-time sequence length never built for a GPU target (the unrolled recurrence needs
    a static one): a clear error, not a crash in lowering."""
    mod, params = relay.frontend.from_onnx(_model("LSTM", "T", 2, 3, 5))
    with pytest.raises(Exception, match="sequence length"):
        with tvm.transform.PassContext(opt_level=3):
            relay.build(mod, "opencl", params=params)


@pytest.mark.parametrize("T", [1, 3])
@pytest.mark.parametrize("cell,lbr,reverse", [("LSTM", True, False), ("LSTM", True, True),
                                              ("GRU", False, True), ("GRU", True, False)])
def test_expanded_rnn_scan_matches_its_numpy_meaning(cell, lbr, reverse, T):
    """``nn.rnn_scan`` called directly (padded weights, a prime hidden size, batch 3) built for
    opencl, i.e. expanded by Legalize, equals ``rnn_scan_np`` (float64)."""
    from types import SimpleNamespace

    from tvmpy.relay.op.rnn import padded_hidden, rnn_scan, rnn_scan_np
    from tvmpy.topi.rnn import GATES

    rng = np.random.default_rng(T)
    N, H = 3, 19
    G, hp = GATES[cell], padded_hidden(H)

    def r(*s):
        return (rng.standard_normal(s) * 0.5).astype(np.float32)

    xw, rt = r(T, N, G, hp), r(H, G, hp)
    xw[..., H:] = 0
    rt[..., H:] = 0
    vals = {"xw": xw.reshape(T, N, G * hp), "rt": rt.reshape(H, G * hp), "h0": r(N, H),
            "aux": r(N, H) if cell == "LSTM" else np.concatenate([r(H), np.zeros(hp - H,
                                                                                 "float32")])}
    vs = [relay.var(k, shape=v.shape) for k, v in vals.items()]
    out = rnn_scan(*vs, cell, H, reverse, lbr)
    n_real = 3 if cell == "LSTM" else 2  # Y, h_T (, c_T); the workspaces are not results
    body = relay.Tuple([relay.TupleGetItem(out, i) for i in range(n_real)])
    mod = tvm.IRModule.from_expr(relay.Function(vs, body))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "opencl")
    got = _run(lib, tvm.opencl(0), vals)
    attrs = SimpleNamespace(cell=cell, hidden=H, reverse=reverse, linear_before_reset=lbr)
    want = rnn_scan_np(attrs, *vals.values())
    for g, w in zip(got, want[:n_real]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
