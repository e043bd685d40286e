"""relay.frontend.from_pytorch on TorchScript (TVM's input: ``torch.jit.trace`` and
``torch.jit.script`` output, with TVM's ``shape_list``): models with random weights compiled
with relay.build (llvm, opt_level 3) and compared with eager torch on random inputs."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.relay.frontend import OpNotImplemented, PyTorchConvertError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning",
                                        "ignore::FutureWarning",
                                        "ignore::torch.jit.TracerWarning")
warnings.filterwarnings("ignore", module="torch.ao")


def _seed(k: int = 0) -> None:
    torch.manual_seed(k)


def _jit(model: nn.Module, mode: str, *example: torch.Tensor):
    if mode == "trace":
        return torch.jit.trace(model, example if len(example) > 1 else example[0])
    return torch.jit.script(model)


def _build_run(mod, params, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for k, v in feeds.items():
        g.set_input(k, v)
    g.run()
    return [g.get_output(i).numpy() for i in range(g.get_num_outputs())]


def _eager(model, *xs) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*xs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [o.numpy() for o in outs]


def _check(script, model, names, xs, rtol=1e-4, atol=1e-5, **kw):
    shape_list = [(n, tuple(x.shape)) if x.dtype == torch.float32 else
                  (n, (tuple(x.shape), str(x.dtype).replace("torch.", "")))
                  for n, x in zip(names, xs)]
    mod, params = relay.frontend.from_pytorch(script, shape_list, **kw)
    got = _build_run(mod, params, {n: x.numpy() for n, x in zip(names, xs)})
    want = _eager(model, *xs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        tvm.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return mod, params


def _settle_bn(model: nn.Module, *xs) -> nn.Module:
    """Batch-norm statistics from a few random batches (random-weight nets otherwise decay
    to ~0 activations, where any output matches), then eval mode."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(*[torch.randn(4, *x.shape[1:], dtype=x.dtype) for x in xs])
    return model.eval()


# ---- models -------------------------------------------------------------------------------------
class SmallCNN(nn.Module):
    """conv + BN + relu, max / average pooling, a residual add, a strided depthwise conv,
    flatten and linear; odd sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 6, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(6)
        self.dw = nn.Conv2d(6, 6, 3, stride=2, padding=1, groups=6)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(6, 7)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = nn.functional.max_pool2d(y, 2, ceil_mode=True)
        y = torch.relu(self.bn2(self.conv2(y)) + y)
        y = nn.functional.avg_pool2d(self.dw(y), 3, 1, 1)
        return self.fc(torch.flatten(self.pool(y), 1))


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(5, 7, num_layers=2, batch_first=True)
        self.gru = nn.GRU(7, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        z, h = self.gru(y)
        return z, h


class ShapeFlow(nn.Module):
    """Control flow on shapes (known at import) and a loop with a static trip count."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if x.shape[0] > 1:
            x = x * 2.0
        else:
            x = x - 1.0
        for _ in range(3):
            x = torch.tanh(self.lin(x))
        return x


class ListFlow(nn.Module):
    """A list of tensors from an op, a loop over it appending to a Python list, len() and
    ``is not None`` on tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 5)

    def forward(self, x, y: torch.Tensor | None = None):
        parts = torch.chunk(x, 3, dim=1)
        ys: list[torch.Tensor] = []
        for p in parts:
            ys.append(torch.relu(p) * float(len(ys) + 1))
        z = torch.cat(ys, 1)
        if y is not None:
            z = z + y
        if len(ys) == 3:
            z = z - 0.5
        return self.lin(z)


class DataFlow(nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            return x + 1
        return x - 1


class DataShape(nn.Module):
    def forward(self, x):
        n = int(x.abs().sum() > -1.0) + 1
        return x.reshape(n, -1)


class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        self.lin = nn.Linear(6, 3)

    def forward(self, ids, scale):
        return self.lin(self.emb(ids)) * scale


class Unsupported(nn.Module):
    def forward(self, x):
        return torch.erfinv(torch.tanh(x)) + torch.lgamma(x.abs() + 1) + torch.erfinv(x / 9)


class Erfinv(nn.Module):
    def forward(self, x):
        return torch.erfinv(x) * 2


# ---- tests --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["trace", "script"])
def test_small_cnn(mode):
    _seed(1)
    x = torch.randn(2, 3, 13, 11)
    m = _settle_bn(SmallCNN(), x)
    mod, params = _check(_jit(m, mode, x), m, ["input0"], [x])
    # parameters named by attribute path, as TVM's from_pytorch (and the state_dict)
    assert set(params) <= set(m.state_dict())
    assert {"conv1.weight", "fc.bias", "bn1.running_var"} <= set(params)


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_resnet18_zoo(mode):
    from tvmpy.relay.testing import zoo

    spec = zoo.MODELS["resnet18"]("small")
    m = spec.module
    x = torch.randn(1, *[int(d) for d in spec.inputs[0].shape[1:]])
    _settle_bn(m, x)
    _check(_jit(m, mode, x), m, ["data"], [x], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_lstm_gru(mode):
    _seed(2)
    m = Recurrent().eval()
    x = torch.randn(2, 4, 5)
    _check(_jit(m, mode, x), m, ["seq"], [x])


def test_bert_traced():
    from tvmpy.relay.testing import zoo  # noqa: F401  (torchvision shim: transformers imports it)

    transformers = pytest.importorskip("transformers")
    _seed(3)
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=37,
                                  max_position_embeddings=16, torchscript=True,
                                  return_dict=False)
    m = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 50, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.int64)
    mask[1, 6:] = 0
    traced = torch.jit.trace(m, (ids, mask), strict=False)
    _check(traced, m, ["input_ids", "attention_mask"], [ids, mask], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_shape_control_flow(mode):
    _seed(4)
    m = ShapeFlow().eval()
    for batch in (1, 3):  # each batch takes its own branch
        x = torch.randn(batch, 4)
        _check(_jit(m, mode, x), m, ["x"], [x])


def test_list_loop_script():
    _seed(9)
    m = ListFlow().eval()
    x, y = torch.randn(2, 6), torch.randn(1, 6)
    _check(torch.jit.script(m), m, ["x"], [x])  # y left out: its default None
    _check(torch.jit.script(m), m, ["x", "y"], [x, y])


def test_training_mode_and_tuple_input_errors():
    m = SmallCNN()  # training mode
    with pytest.raises(ValueError, match="training mode"):
        relay.frontend.from_pytorch(torch.jit.script(m), [("x", (1, 3, 8, 8))])

    class TupleIn(nn.Module):
        def forward(self, xs: tuple[torch.Tensor, torch.Tensor]):
            return xs[0] + xs[1]

    with pytest.raises(ValueError, match=r"graph input %xs(\.\d+)? is a Tuple"):
        relay.frontend.from_pytorch(torch.jit.script(TupleIn().eval()), [("xs", (2, 2))])

    class IntOut(nn.Module):
        def forward(self, x):
            return x + 1, x.shape[0]

    with pytest.raises(ValueError, match="output 0 of the TorchScript graph is tuple"):
        relay.frontend.from_pytorch(torch.jit.script(IntOut().eval()), [("x", (2, 2))])


def test_script_function():
    @torch.jit.script
    def f(x, y):
        z = x * y
        for k in range(2):
            z = z + float(k)
        return torch.softmax(z, dim=-1)

    x, y = torch.randn(3, 5), torch.randn(3, 5)
    _check(f, f, ["x", "y"], [x, y])


def test_data_dependent_control_flow_is_named():
    m = DataFlow().eval()
    with pytest.raises(PyTorchConvertError,
                       match=r"condition of .*prim::If.* input data \(by .*aten::Bool"):
        relay.frontend.from_pytorch(torch.jit.script(m), [("x", (2, 3))])
    # a shape computed from the data, through Python arithmetic: named at its use
    with pytest.raises(PyTorchConvertError,
                       match=r"an input of .*aten::reshape.*input data \(by .*aten::Int"):
        relay.frontend.from_pytorch(torch.jit.script(DataShape().eval()), [("x", (2, 3))])


def test_dtype_variants():
    _seed(5)
    m = TwoInputs().eval()
    ids = torch.randint(0, 11, (3, 4))
    scale = torch.randn(3, 4, 1)
    _check(torch.jit.trace(m, (ids, scale)), m, ["ids", "scale"], [ids, scale])
    # float64 model: default_dtype, and the dtype inside shape_list
    md = SmallCNN().double()
    x = torch.randn(1, 3, 9, 9, dtype=torch.float64)
    md = _settle_bn(md, x)
    tr = torch.jit.trace(md, x)
    for kw, shape_list in (({"default_dtype": "float64"}, [("x", (1, 3, 9, 9))]),
                           ({}, [("x", ((1, 3, 9, 9), "float64"))])):
        mod, params = relay.frontend.from_pytorch(tr, shape_list, **kw)
        assert mod["main"].params[0].checked_type.dtype == "float64"
        got = _build_run(mod, params, {"x": x.numpy()})
        tvm.testing.assert_allclose(got[0], _eager(md, x)[0], rtol=1e-7, atol=1e-9)


def test_parser_friendly_names():
    _seed(6)
    x = torch.randn(1, 3, 8, 8)
    m = _settle_bn(SmallCNN(), x)
    buf = io.BytesIO()  # a saved .pt, loaded back with torch.jit.load, as TVM users have them
    torch.jit.save(torch.jit.trace(m, x), buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    mod, params = relay.frontend.from_pytorch(loaded, [("input0", (1, 3, 8, 8))],
                                              use_parser_friendly_name=True)
    assert "conv1_weight" in params and not any("." in k for k in params)
    got = _build_run(mod, params, {"input0": x.numpy()})
    tvm.testing.assert_allclose(got[0], _eager(m, x)[0], rtol=1e-4, atol=1e-5)


def test_shape_list_length_error():
    m = torch.jit.trace(TwoInputs().eval(), (torch.zeros(2, 3, dtype=torch.int64),
                                            torch.ones(2, 3, 1)))
    with pytest.raises(ValueError, match=r"shape_list has 1 entries.*takes 2 inputs"):
        relay.frontend.from_pytorch(m, [("ids", ((2, 3), "int64"))])
    with pytest.raises(ValueError, match="required"):
        relay.frontend.from_pytorch(m, None)


def test_unsupported_ops_listed_together():
    m = torch.jit.trace(Unsupported().eval(), torch.randn(2, 3))
    with pytest.raises(OpNotImplemented) as e:
        relay.frontend.from_pytorch(m, [("x", (2, 3))])
    msg = str(e.value)
    assert "2 operator type(s)" in msg
    assert "aten::erfinv" in msg and "aten::lgamma" in msg
    assert msg.count("= aten::erfinv") == 2  # both nodes named


def test_custom_convert_map_tvm_style():
    from tvmpy.relay import op as _op

    seen = []

    def erfinv(inputs, input_types):
        seen.append(input_types)
        x = inputs[0]
        # erfinv(x) ~ x * sqrt(pi)/2 * (1 + pi/12 x^2) near 0 (a stand-in converter)
        c = relay.const(np.float32(np.sqrt(np.pi) / 2))
        return _op.multiply(_op.multiply(x, c), _op.add(
            relay.const(np.float32(1.0)), _op.multiply(relay.const(np.float32(np.pi / 12)),
                                                       _op.multiply(x, x))))

    x = torch.rand(2, 5) * 0.1
    m = torch.jit.trace(Erfinv().eval(), x)
    for args, kw in (((), {"custom_convert_map": {"aten::erfinv": erfinv}}),
                     (({"aten::erfinv": erfinv},), {})):  # TVM's third positional argument
        mod, params = relay.frontend.from_pytorch(m, [("x", (2, 5))], *args, **kw)
        got = _build_run(mod, params, {"x": x.numpy()})
        tvm.testing.assert_allclose(got[0], Erfinv()(x).numpy(), rtol=1e-4, atol=1e-5)
    assert seen and seen[0][0] == "float32"


def test_export_path_still_takes_modules():
    _seed(7)
    x = torch.randn(1, 3, 8, 8)
    m = _settle_bn(SmallCNN(), x)
    mod, params = relay.frontend.from_pytorch(m, [("input0", (1, 3, 8, 8))])
    got = _build_run(mod, params, {"input0": x.numpy()})
    tvm.testing.assert_allclose(got[0], _eager(m, x)[0], rtol=1e-4, atol=1e-5)


# ---- quantized TorchScript ----------------------------------------------------------------------
class QNet(nn.Module):
    """conv + relu (fused), a quantized add (FloatFunctional), max pooling, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.add = nn.quantized.FloatFunctional()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        y = self.relu(self.conv(self.quant(x)))
        y = self.add.add(self.conv2(y), y)
        y = nn.functional.max_pool2d(y, 2)
        return self.dequant(self.fc(torch.flatten(self.pool(y), 1)))


def test_quantized_traced():
    tq = torch.ao.quantization
    _seed(8)
    engine = torch.backends.quantized.engine
    torch.backends.quantized.engine = "qnnpack"
    try:
        m = QNet().eval()
        m.qconfig = tq.get_default_qconfig("qnnpack")
        tq.fuse_modules(m, [["conv", "relu"]], inplace=True)
        tq.prepare(m, inplace=True)
        with torch.no_grad():
            for _ in range(4):
                m(torch.randn(2, 3, 10, 10))
        tq.convert(m, inplace=True)
        x = torch.randn(1, 3, 10, 10)
        traced = torch.jit.trace(m, x)
        mod, params = relay.frontend.from_pytorch(traced, [("input", (1, 3, 10, 10))])
        text = mod.astext() if hasattr(mod, "astext") else str(mod)
        assert "qnn.conv2d" in text and "qnn.dense" in text and "qnn.add" in text
        got = _build_run(mod, params, {"input": x.numpy()})[0]
        want = _eager(m, x)[0]
        step = float(m.fc.scale)  # one quantization step of the output
        assert np.abs(want).max() > 10 * step  # not a degenerate (all-zero) output
        tvm.testing.assert_allclose(got, want, rtol=0, atol=step * 1.01)
    finally:
        torch.backends.quantized.engine = engine
