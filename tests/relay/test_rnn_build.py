"""How ONNX LSTM/GRU build (issue 25): one packed copy of the recurrent weight for every time
step, the same compiled kernels in every step, a symbolic batch through the VM, and the
answers of onnxruntime (initial states, sequence_lens, batch > 1, bidirectional)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import numpy_helper  # noqa: E402
from onnx_rnn import ort_run, rnn_model  # noqa: E402

RNG = np.random.default_rng(25)


def _r(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


def _model(kind, T, N, I, H, dirs=1, extra=(), **attrs):
    return rnn_model(kind, T, N, I, H, _r, dirs, extra, **attrs)


def _feeds(model, T, N, I, H, dirs):
    feeds = {"X": _r(T, N, I)}
    names = {i.name for i in model.graph.input}
    for nm in ("h0", "c0"):
        if nm in names:
            feeds[nm] = _r(dirs, N, H)
    if "lens" in names:
        feeds["lens"] = np.array([T, max(1, T - 3), T - 1][:N] + [T] * max(0, N - 3), np.int32)
    return feeds


def _build(model, shapes):
    mod, params = relay.frontend.from_onnx(model, shapes, freeze_params=False)
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, "llvm", params=params)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_weight_is_packed_once(kind):
    """Every step's recurrent dense reads the same packed weight (it was one folded copy per
    step: 64 MB of parameters for a 32-step 2-layer LSTM of hidden 256)."""
    T, N, I, H = 12, 1, 8, 16
    model = _model(kind, T, N, I, H)
    lib = _build(model, {"X": (T, N, I)})
    weights = sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    params = sum(v.numpy().nbytes for v in lib.get_params().values())
    assert params < 2 * weights, (params, weights)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_steps_share_their_kernels(kind):
    """The kernels compiled do not grow with the sequence: each step runs the same ones (a
    per-step slice of the input projection at a literal offset was a kernel per step)."""
    distinct = []
    attrs = {"linear_before_reset": 1} if kind == "GRU" else {}  # (PyTorch's GRU)
    for T in (4, 9):
        lib = _build(_model(kind, T, 2, 8, 16, **attrs), {"X": (T, 2, 8)})
        nodes = json.loads(lib.get_graph_json())["nodes"]
        names = [n["attrs"]["func_name"] for n in nodes if n["op"] == "tvm_op"]
        distinct.append(len(set(names)))
        assert len(names) <= 3 * T + 8  # dense + gates (+ state) per step
    assert distinct[0] == distinct[1]


@pytest.mark.parametrize("kind,dirs,extra", [
    ("LSTM", 2, ("h0", "c0")),
    ("LSTM", 1, ("lens", "h0")),
    ("GRU", 2, ("h0",)),
    ("GRU", 1, ("lens",)),
])
def test_matches_onnxruntime(kind, dirs, extra):
    T, N, I, H = 7, 3, 5, 11
    attrs = {"direction": "bidirectional"} if dirs == 2 else {}
    if kind == "GRU" and dirs == 2:
        attrs["linear_before_reset"] = 1
    model = _model(kind, T, N, I, H, dirs, extra, **attrs)
    feeds = _feeds(model, T, N, I, H, dirs)
    lib = _build(model, {k: v.shape for k, v in feeds.items()})
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for k, v in feeds.items():
        m.set_input(k, v)
    m.run()
    for i, want in enumerate(ort_run(model, feeds)):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_symbolic_batch_through_the_vm(kind):
    T, I, H = 6, 5, 7
    model = _model(kind, T, "n", I, H, 2, ("h0",), direction="bidirectional")
    mod, params = relay.frontend.from_onnx(model, freeze_params=False)
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    from tvmpy.runtime import vm as rvm

    vm = rvm.VirtualMachine(exe, tvm.cpu())
    for n in (1, 4):
        feeds = {"X": _r(T, n, I), "h0": _r(2, n, H)}
        got = vm.run(feeds["X"], feeds["h0"])
        for g, want in zip(got, ort_run(model, feeds)):
            np.testing.assert_allclose(g.numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_torch_lstm_gru_match_eager(cell, batch_first):
    """torch.nn.LSTM/GRU through torch.export: aten.lstm/gru.input are converted whole (the
    recurrence of the ONNX importer), not decomposed into per-step ATen calls."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    rnn = getattr(torch.nn, cell)(5, 7, num_layers=2, bidirectional=True,
                                  batch_first=batch_first).eval()
    T, N = 6, 3
    x = torch.randn((N, T, 5) if batch_first else (T, N, 5))
    h0 = torch.randn(4, N, 7)
    state = (h0, torch.randn(4, N, 7)) if cell == "LSTM" else h0

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn

        def forward(self, x, *s):
            out = self.rnn(x, s if cell == "LSTM" else s[0])
            return (out[0], *out[1]) if cell == "LSTM" else out

    m = M().eval()
    args = (x, *state) if cell == "LSTM" else (x, state)
    mod, params = relay.frontend.from_pytorch(torch.export.export(m, args))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    names = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
             if n["op"] == "tvm_op"]
    assert len(names) <= 2 * 2 * (3 * T + 8)  # 2 layers x 2 directions, ~3 kernels per step
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for p, a in zip(mod["main"].params, args):
        g.set_input(p.name_hint, a.numpy())
    g.run()
    with torch.no_grad():
        want = m(*args)
    for i, w in enumerate(want):
        np.testing.assert_allclose(g.get_output(i).numpy(), w.numpy(), rtol=1e-4, atol=1e-5)
