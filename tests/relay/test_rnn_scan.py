"""``nn.rnn_scan`` (issue 25): the LSTM/GRU recurrence as one kernel (a serial loop over time,
parallel blocks of hidden units, hidden sizes padded to whole vectors), against onnxruntime
(ONNX LSTM/GRU) and eager PyTorch (nn.LSTM/GRU through torch.export, a dynamic sequence length
included): prime and vector-multiple hidden sizes, one step, batch > 1, reverse and
bidirectional, initial states given or not, both GRU variants."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.op.rnn import padded_hidden, rnn_scan

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx_rnn import ort_run, rnn_model  # noqa: E402

RNG = np.random.default_rng(2511)


def _r(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


def _model(kind, T, N, I, H, dirs=1, states=False, bias=True, **attrs):
    return rnn_model(kind, T, N, I, H, _r, dirs, ("h0", "c0") if states else (), bias, **attrs)


def _feeds(model, T, N, I, H, dirs):
    feeds = {"X": _r(T, N, I)}
    for i in model.graph.input[1:]:
        feeds[i.name] = _r(dirs, N, H)
    return feeds


CASES = [  # kind, T, N, I, H, direction, states, extra attrs
    ("LSTM", 7, 1, 5, 13, "forward", False, {}),
    ("LSTM", 1, 3, 4, 37, "reverse", True, {}),
    ("LSTM", 5, 2, 6, 32, "bidirectional", True, {}),
    ("LSTM", 4, 3, 3, 1, "forward", True, {}),
    ("GRU", 6, 1, 5, 17, "forward", False, {}),                          # linear_before_reset 0
    ("GRU", 5, 3, 4, 23, "bidirectional", True, {"linear_before_reset": 1}),
    ("GRU", 1, 2, 3, 48, "reverse", True, {}),
    ("GRU", 3, 1, 2, 31, "forward", True, {"linear_before_reset": 1}),
    # batches over one row block (4 rows share each weight load), a partial last block
    ("LSTM", 4, 6, 3, 20, "forward", True, {}),
    ("GRU", 3, 5, 4, 16, "bidirectional", True, {}),
    ("GRU", 2, 9, 3, 7, "reverse", False, {"linear_before_reset": 1}),
]


@pytest.mark.parametrize("kind,T,N,I,H,direction,states,extra", CASES)
def test_onnx_rnn_matches_onnxruntime(kind, T, N, I, H, direction, states, extra):
    dirs = 2 if direction == "bidirectional" else 1
    model = _model(kind, T, N, I, H, dirs, states, direction=direction, **extra)
    feeds = _feeds(model, T, N, I, H, dirs)
    mod, params = relay.frontend.from_onnx(model, {k: v.shape for k, v in feeds.items()},
                                           freeze_params=False)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    names = [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
             if n["op"] == "tvm_op"]
    assert sum("rnn_scan" in n for n in names) == dirs, names  # one kernel per direction
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for k, v in feeds.items():
        m.set_input(k, v)
    m.run()
    for i, want in enumerate(ort_run(model, feeds)):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-4, atol=2e-5)


def test_no_bias_and_wide_hidden():
    """No B input; a hidden size over several blocks with a partial last vector."""
    T, N, I, H = 3, 2, 4, 70
    model = _model("LSTM", T, N, I, H, bias=False)
    feeds = _feeds(model, T, N, I, H, 1)
    mod, params = relay.frontend.from_onnx(model, {"X": feeds["X"].shape}, freeze_params=False)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("X", feeds["X"])
    m.run()
    for i, want in enumerate(ort_run(model, feeds)):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("kind,extra", [("LSTM", {}), ("GRU", {}),
                                        ("GRU", {"linear_before_reset": 1})])
def test_dynamic_sequence_through_the_vm(kind, extra):
    """A sequence length (and batch) known only at run time: one rnn_scan kernel serves every
    length, 1 included (before: a while loop of per-step kernels)."""
    I, H = 5, 19
    model = _model(kind, "T", "n", I, H, 2, True, direction="bidirectional", **extra)
    mod, params = relay.frontend.from_onnx(model, freeze_params=False)
    assert "nn.rnn_scan" in mod.astext()
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    from tvmpy.runtime import vm as rvm

    vm = rvm.VirtualMachine(exe, tvm.cpu())
    for T, n in ((1, 1), (6, 3), (11, 2)):
        feeds = _feeds(model, T, n, I, H, 2)
        got = vm.run(*feeds.values())
        for g, want in zip(got, ort_run(model, feeds)):
            np.testing.assert_allclose(g.numpy(), want, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_torch_export_dynamic_sequence_matches_eager(cell):
    """nn.LSTM/GRU (2 layers, bidirectional, batch_first) exported with a dynamic batch and
    sequence length (``symbolic_rnn_export``), run through the VM at several lengths."""
    torch = pytest.importorskip("torch")
    from tvmpy.relay.frontend.pytorch.rnn import symbolic_rnn_export
    from tvmpy.runtime import vm as rvm

    torch.manual_seed(1)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(torch.nn, cell)(5, 11, num_layers=2, bidirectional=True,
                                               batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    m = M().eval()
    dims = {0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("seq", min=1,
                                                                               max=1024)}
    with symbolic_rnn_export():
        ep = torch.export.export(m, (torch.randn(2, 7, 5),), dynamic_shapes=(dims,))
    mod, params = relay.frontend.from_pytorch(ep, [("x", (["batch", "seq", 5], "float32"))])
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    for n, T in ((1, 1), (3, 13), (2, 4)):
        x = torch.randn(n, T, 5)
        with torch.no_grad():
            want = m(x).numpy()
        got = vm.run(x.numpy())
        got = got[0] if isinstance(got, (list, tuple)) else got
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=2e-5)


def test_symbolic_rnn_export_restores_torch():
    """Outside the block torch's own kernels run again (eager results unchanged)."""
    torch = pytest.importorskip("torch")
    from tvmpy.relay.frontend.pytorch.rnn import symbolic_rnn_export

    op = torch.ops.aten.lstm.input
    before = dict(op.py_kernels)
    with symbolic_rnn_export():
        assert op.py_kernels != before
        lstm = torch.nn.LSTM(3, 4)
        x = torch.randn(5, 1, 3)
        inside = lstm(x)[0]  # real tensors: torch's kernels even inside the block
    assert op.py_kernels == before
    torch.testing.assert_close(inside, lstm(x)[0])


def test_bad_shapes_are_named():
    H = 5
    hp = padded_hidden(H)
    xw = relay.var("xw", shape=(3, 1, 4 * hp))
    rt = relay.var("rt", shape=(H, 4 * H))  # not padded
    h0 = relay.var("h0", shape=(1, H))
    c0 = relay.var("c0", shape=(1, H))
    with pytest.raises(Exception, match=r"rt must be \(5, 64\)"):
        relay.transform.InferType()(tvm.IRModule.from_expr(rnn_scan(xw, rt, h0, c0, "LSTM", H)))
    with pytest.raises(ValueError, match="cell must be"):
        rnn_scan(xw, rt, h0, c0, "RNN", H)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("lanes", [1, 4, 8, 16])
@pytest.mark.parametrize("cell,lbr", [("LSTM", True), ("GRU", False), ("GRU", True)])
def test_kernel_at_every_vector_width(cell, lbr, lanes, packed):
    """The topi kernel for a target of any vector width (the block is a multiple of the lanes
    dividing the padded size) against the numpy meaning (float64), batch 5 over two row
    blocks, a prime hidden size; ``R^T`` plain or packed by the kernel's blocks (the numpy
    meaning reads the packed one too)."""
    from types import SimpleNamespace

    from tvmpy import te
    from tvmpy.relay.op.rnn import rnn_scan_np
    from tvmpy.topi.rnn import GATES
    from tvmpy.topi.rnn import rnn_scan as topi_rnn_scan

    T, N, H = 4, 5, 19
    G, hp = GATES[cell], padded_hidden(H)
    xw = _r(T, N, G, hp)
    rt = _r(H, G, hp)
    xw[..., H:] = 0
    rt[..., H:] = 0
    xw, rt = xw.reshape(T, N, G * hp), rt.reshape(H, G * hp)
    if packed:
        from tvmpy.topi.rnn import pack_rt_np, packed_block, unpack_rt_np

        ub = packed_block(cell, hp, lanes, N)
        assert hp // ub > 1
        rt = np.ascontiguousarray(pack_rt_np(rt, cell, ub))
        assert rt.shape == (hp // ub, H, G * ub)
        np.testing.assert_array_equal(pack_rt_np(unpack_rt_np(rt, cell), cell, ub), rt)
    h0 = _r(N, H)
    aux = _r(N, H) if cell == "LSTM" else np.concatenate([_r(H), np.zeros(hp - H, "float32")])
    ph = [te.placeholder(a.shape, name=n) for a, n in ((xw, "xw"), (rt, "rt"), (h0, "h0"),
                                                       (aux, "aux"))]
    outs = topi_rnn_scan(*ph, cell, H, reverse=False, linear_before_reset=lbr, lanes=lanes)
    f = tvm.build(te.create_schedule([o.op for o in outs]), ph + outs, "llvm")
    args = [tvm.nd.array(a) for a in (xw, rt, h0, aux)]
    args += [tvm.nd.empty([int(d) for d in o.shape], "float32") for o in outs]
    f(*args)
    attrs = SimpleNamespace(cell=cell, hidden=H, reverse=False, linear_before_reset=lbr)
    want = rnn_scan_np(attrs, xw, rt, h0, aux)
    n_real = 3 if cell == "LSTM" else 2  # Y, h_T (, c_T); the workspaces are not results
    for got, w in zip(args[4:4 + n_real], want[:n_real]):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,extra", [("LSTM", {}), ("GRU", {}),
                                        ("GRU", {"linear_before_reset": 1})])
@pytest.mark.parametrize("T,N,H", [(9, 1, 67), (1, 1, 67), (3, 2, 128)])
def test_recurrent_weight_packed_by_the_kernels_blocks(kind, extra, T, N, H):
    """x86 AlterOpLayout gives the kernel ``R^T`` packed by its blocks of hidden units (one
    contiguous run a block, folded once: a constant (Hp/ub, H, G*ub) parameter): the results
    equal onnxruntime's; a prime hidden size, one step, batch 1, bidirectional."""
    dirs = 2
    model = _model(kind, T, N, 5, H, dirs, True, direction="bidirectional", **extra)
    feeds = _feeds(model, T, N, 5, H, dirs)
    mod, params = relay.frontend.from_onnx(model, {k: v.shape for k, v in feeds.items()},
                                           freeze_params=False)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm", params=params)
    G = {"GRU": 3, "LSTM": 4}[kind]
    packed = [p.shape for p in lib.get_params().values()
              if len(p.shape) == 3 and p.shape[1] == H and p.shape[0] > 1]
    assert len(packed) == dirs, [p.shape for p in lib.get_params().values()]
    assert all(nb * gub == G * padded_hidden(H) for nb, _, gub in packed)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for k, v in feeds.items():
        m.set_input(k, v)
    m.run()
    for i, want in enumerate(ort_run(model, feeds)):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-4, atol=2e-5)


def test_from_pytorch_module_with_a_symbolic_sequence():
    """``from_pytorch(nn.Module, input_infos)`` with symbolic dims exports the module itself:
    an nn.GRU keeps its sequence symbolic there too (one import serves every length)."""
    torch = pytest.importorskip("torch")
    from tvmpy.runtime import vm as rvm

    torch.manual_seed(2)
    gru = torch.nn.GRU(4, 9).eval()

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = gru

        def forward(self, x):
            return self.gru(x)[0]

    m = M().eval()
    mod, params = relay.frontend.from_pytorch(m, [("x", (["seq", "batch", 4], "float32"))])
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm", params=params)
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    for T, n in ((1, 1), (9, 2)):
        x = torch.randn(T, n, 4)
        with torch.no_grad():
            want = m(x).numpy()
        got = vm.run(x.numpy())
        got = got[0] if isinstance(got, (list, tuple)) else got
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=2e-5)
