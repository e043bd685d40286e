"""torch.ao quantized models (static post-training quantization, FX graph mode with the "x86",
"fbgemm" and "qnnpack" qconfig mappings, and eager mode) imported by ``from_pytorch`` into the
QNN dialect, compared with the torch quantized model's own output: compiled (relay.build,
opt_level 3) and on the reference interpreter.

Tolerance: one quantization step of the output. Where tvmpy and torch differ, it is by a
rounding tie: torch's fbgemm adds the float bias after scaling the accumulator (tvmpy quantizes
the bias to int32 at scale s_x * s_w, as qnnpack does) and its requantization of adds and pools
rounds differently from onnxruntime's, whose arithmetic the QNN ops follow.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.relay.frontend import OpNotImplemented  # noqa: E402
from tvmpy.relay.interpreter import evaluate  # noqa: E402

warnings.filterwarnings("ignore", module="torch.ao")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore::UserWarning", "ignore::FutureWarning")
CONFIGS = ["x86", "fbgemm", "qnnpack"]


# ---- models ----------------------------------------------------------------------------------
class ResCNN(nn.Module):
    """conv+bn+relu (fused), a residual add + relu, a depthwise strided conv, max/avg pooling,
    cat, hardswish, linear; odd sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, padding=1)
        self.b1 = nn.BatchNorm2d(6)
        self.r1 = nn.ReLU()
        self.c2 = nn.Conv2d(6, 6, 3, padding=1)
        self.b2 = nn.BatchNorm2d(6)
        self.dw = nn.Conv2d(6, 6, 3, stride=2, padding=1, groups=6)
        self.c3 = nn.Conv2d(6, 10, 1)
        self.hs = nn.Hardswish()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(20, 7)

    def forward(self, x):
        y = self.r1(self.b1(self.c1(x)))
        z = torch.relu(self.b2(self.c2(y)) + y)
        z = nn.functional.max_pool2d(self.dw(z), 2, ceil_mode=True)
        z = self.hs(self.c3(z))
        z = torch.cat([z, nn.functional.avg_pool2d(z, 3, 1, 1)], 1)
        return self.fc(torch.flatten(self.pool(z), 1))


def _cbr(i: int, o: int, k: int, s: int = 1, g: int = 1, act: type | None = nn.ReLU6
         ) -> list[nn.Module]:
    layers = [nn.Conv2d(i, o, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(o)]
    return layers + ([act()] if act is not None else [])


class InvertedResidual(nn.Module):
    def __init__(self, i: int, o: int, stride: int, expand: int, act: type) -> None:
        super().__init__()
        h = i * expand
        self.conv = nn.Sequential(*_cbr(i, h, 1, act=act), *_cbr(h, h, 3, stride, h, act=act),
                                  *_cbr(h, o, 1, act=None))
        self.res = stride == 1 and i == o

    def forward(self, x):
        return x + self.conv(x) if self.res else self.conv(x)


class MobileNetV2Like(nn.Module):
    """MobileNetV2's structure, narrow: inverted residuals (1x1 expand, 3x3 depthwise, 1x1
    project, residual adds), ReLU6 (ReLU for qnnpack), global pool, classifier."""

    def __init__(self, act: type = nn.ReLU6) -> None:
        super().__init__()
        self.features = nn.Sequential(
            *_cbr(3, 16, 3, 2, act=act), InvertedResidual(16, 16, 1, 1, act),
            InvertedResidual(16, 24, 2, 4, act), InvertedResidual(24, 24, 1, 4, act),
            InvertedResidual(24, 32, 2, 4, act), InvertedResidual(32, 32, 1, 4, act),
            *_cbr(32, 64, 1, act=act))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(17, 24)
        self.r1 = nn.ReLU()
        self.l2 = nn.Linear(24, 24)
        self.l3 = nn.Linear(24, 5)

    def forward(self, x):
        h = self.r1(self.l1(x))
        h = torch.relu(self.l2(h)) * h
        return self.l3(h)


class Misc(nn.Module):
    """Ops on quantized tensors outside the products: a standalone batch norm, relu6 /
    hardtanh, leaky relu, elu, scalar add / mul, adaptive (non-global) and average pooling,
    layer norm, permute, sigmoid, nearest upsampling, mean, slicing, view, cat."""

    def __init__(self, relu6: bool = True) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3)
        # torch's qnnpack hardtanh garbles a channels-last input (a conv's output): not there
        self.r6 = nn.ReLU6() if relu6 else nn.ReLU()
        self.bn = nn.BatchNorm2d(8)
        self.lr = nn.LeakyReLU(0.1)
        self.elu = nn.ELU()
        self.sig = nn.Sigmoid()
        self.ln = nn.LayerNorm([8, 4, 4])
        self.fc = nn.Linear(8 * 4 * 4, 6)

    def forward(self, x):
        y = self.bn(self.r6(self.c(x))) + 1.0
        y = self.lr(y) * 0.5
        y = nn.functional.hardtanh(self.elu(y), -0.5, 2.0)
        y = self.ln(nn.functional.adaptive_avg_pool2d(y, (4, 4)))
        y = self.sig(y.permute(0, 1, 3, 2).contiguous())
        y = nn.functional.interpolate(y, scale_factor=2, mode="nearest")
        y = torch.mean(y, dim=1, keepdim=True) + y[:, :1]
        y = nn.functional.avg_pool2d(y, 2).reshape(y.shape[0], -1)
        return self.fc(torch.cat([y] * 8, 1))


class EagerCNN(nn.Module):
    """Eager-mode quantization: stubs, fuse_modules, a FloatFunctional add; returns the
    quantized features and the dequantized logits."""

    def __init__(self) -> None:
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = nn.Conv2d(3, 8, 3, stride=2)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.add = torch.ao.nn.quantized.FloatFunctional()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        y = self.relu(self.bn(self.conv(self.quant(x))))
        z = self.add.add(self.relu2(self.conv2(y)), y)
        return z, self.dequant(self.fc(torch.flatten(self.pool(z), 1)))


def _randomize(m: nn.Module, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
                mod.bias.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
    return m.eval()


def quantize_fx(make: Callable[[], nn.Module], shape: tuple[int, ...], config: str,
                seed: int = 0):
    """``make()`` (random weights from ``seed``) quantized by prepare_fx / convert_fx with the
    ``config`` qconfig mapping, calibrated on 8 random batches."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.backends.quantized.engine = config
    torch.manual_seed(seed)
    m = _randomize(make(), seed)
    g = torch.Generator().manual_seed(seed + 1)
    example = torch.randn(shape, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_fx(m, get_default_qconfig_mapping(config), (example,))
        for _ in range(8):
            prepared(torch.randn(shape, generator=g))
        return convert_fx(prepared)


def quantize_eager(seed: int = 0) -> nn.Module:
    torch.backends.quantized.engine = "x86"
    torch.manual_seed(seed)
    m = _randomize(EagerCNN(), seed)
    m.qconfig = torch.ao.quantization.get_default_qconfig("x86")
    m = torch.ao.quantization.fuse_modules(m, [["conv", "bn", "relu"], ["conv2", "relu2"]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ao.quantization.prepare(m, inplace=True)
        g = torch.Generator().manual_seed(seed + 1)
        for _ in range(8):
            m(torch.randn(2, 3, 15, 13, generator=g))
        return torch.ao.quantization.convert(m)


# ---- running ---------------------------------------------------------------------------------
def _calls(expr) -> list:
    out: list = []
    relay.post_order_visit(expr, lambda e: out.append(e) if isinstance(e, relay.Call)
                           and isinstance(e.op, relay.op.Op) else None)
    return out


def _compile(mod, params):
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    return graph_executor.GraphModule(lib["default"](tvm.cpu()))


def _integer_products(mod, params) -> list:
    """The conv2d / dense calls of the optimized graph that relay.build compiles."""
    from tvmpy.relay.build_module import optimize

    with tvm.transform.PassContext(opt_level=3):
        opt = optimize(mod, params, target="llvm")
    found = []
    for f in [opt["main"]] + [c.op for c in _calls(opt["main"].body)
                              if isinstance(c.op, relay.Function)]:
        body = f.body if isinstance(f, relay.Function) else f
        for c in _calls(body):
            if c.op.name in ("nn.conv2d", "nn.contrib_conv2d_NCHWc", "nn.dense",
                             "nn.contrib_dense_pack", "nn.contrib_conv2d_NCHWc_int8",
                             "nn.contrib_dense_pack_int8"):
                found.append((c.op.name, c.args[0].checked_type.dtype,
                              c.args[1].checked_type.dtype, c.checked_type.dtype))
    return found


def _out_step(mod) -> float:
    """The scale of the final qnn.dequantize (one output step)."""
    body = mod["main"].body
    assert body.op.name == "qnn.dequantize", body.op.name
    return float(body.args[1].data.numpy())


def _torch_outputs(model, x) -> list[np.ndarray]:
    with torch.no_grad():
        outs = model(*x) if isinstance(x, tuple) else model(x)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [o.int_repr().numpy() if o.is_quantized else o.numpy() for o in outs]


def _steps(got: np.ndarray, want: np.ndarray, step: float = 1.0) -> float:
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / step)


WORST: dict[str, float] = {}


def _check_model(qmodel, shape, name: str, n_inputs: int = 6, products: bool = True) -> float:
    mod, params = relay.frontend.from_pytorch(qmodel, [("x", list(shape))])
    found = _integer_products(mod, params) if products else []
    assert found or not products, "no conv/dense left after relay.build's passes"
    for op, dt, wt, acc in found:
        assert (dt, wt, acc) == ("uint8", "int8", "int32"), (op, dt, wt, acc)
    step = _out_step(mod)
    g = _compile(mod, params)
    pvals = [params[p.name_hint] for p in mod["main"].params[1:]]
    rng = np.random.default_rng(7)
    worst = 0.0
    for k in range(n_inputs):
        x = rng.standard_normal(shape).astype("float32")
        (want,) = _torch_outputs(qmodel, torch.from_numpy(x))
        g.set_input("x", x)
        g.run()
        got = g.get_output(0).numpy()
        assert got.shape == want.shape and got.dtype == want.dtype
        worst = max(worst, _steps(got, want, step))
        if k < 2:  # the interpreter on the QNN ops (slower)
            ref = np.asarray(evaluate(mod["main"], x, *pvals))
            worst = max(worst, _steps(ref, want, step))
    WORST[name] = worst
    assert worst <= 1.001, f"{name}: {worst} output steps from torch"
    return worst


# ---- tests -----------------------------------------------------------------------------------
@pytest.mark.parametrize("config", CONFIGS)
def test_resnet_like_cnn(config):
    shape = (2, 3, 13, 11)
    q = quantize_fx(ResCNN, shape, config)
    names = {type(m).__name__ for m in q.modules()}
    assert {"ConvReLU2d", "Conv2d", "Linear"} <= names, names  # the fuser did its part
    _check_model(q, shape, f"ResCNN/{config}")


@pytest.mark.parametrize("config", CONFIGS)
def test_mobilenet_v2_like(config):
    # torch's qnnpack ReLU6 (hardtanh) garbles channels-last input, i.e. every conv output
    act = nn.ReLU if config == "qnnpack" else nn.ReLU6
    shape = (1, 3, 32, 32)
    q = quantize_fx(lambda: MobileNetV2Like(act), shape, config, seed=21)
    _check_model(q, shape, f"MobileNetV2-like/{config}", n_inputs=4)


@pytest.mark.parametrize("config", CONFIGS)
def test_mlp(config):
    shape = (3, 17)
    q = quantize_fx(MLP, shape, config, seed=3)
    assert "LinearReLU" in {type(m).__name__ for m in q.modules()}
    _check_model(q, shape, f"MLP/{config}")


def _per_node_steps(qmodel, shape) -> dict[str, float]:
    """Each node converted alone, fed torch's own values of its inputs: its distance from
    torch's value, in steps of the node's output (or absolute for float values)."""
    from tvmpy.relay.frontend.pytorch import quantized as Q

    ctxs: list = []
    init = Q._Ctx.__init__

    def keep(self, *a, **k):
        init(self, *a, **k)
        ctxs.append(self)

    Q._Ctx.__init__ = keep
    try:
        relay.frontend.from_pytorch(qmodel, [("x", list(shape))], freeze_params=True)
    finally:
        Q._Ctx.__init__ = init
    ctx = ctxs[-1]

    def arr(v):
        return v.int_repr().numpy() if v.is_quantized else v.numpy()

    out = {}
    for n in ctx.gm.graph.nodes:
        v = ctx.values.get(n)
        if n.op not in ("call_function", "call_method", "call_module") or not isinstance(
                v, torch.Tensor):
            continue
        ins = [i for i in Q._input_nodes(n) if isinstance(ctx.values.get(i), torch.Tensor)
               and i.op != "get_attr"]
        saved = {i: ctx.env[i] for i in ins}
        params = []
        for k, i in enumerate(ins):
            a = arr(ctx.values[i])
            ctx.env[i] = relay.var(f"in{k}", shape=a.shape, dtype=str(a.dtype))
            params.append(ctx.env[i])
        expr = Q._run_plan(ctx, n, Q._plan(ctx, n, {}))
        ctx.env.update(saved)
        mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(params, expr)))
        got = np.asarray(evaluate(mod["main"], *[arr(ctx.values[i]) for i in ins]))
        out[n.name] = _steps(got, arr(v))
    return out


@pytest.mark.parametrize("config", CONFIGS)
def test_ops_on_quantized_tensors(config):
    """Node by node within one step of torch; end to end the one-step differences (rounding
    ties of conv biases and pooling) can grow through layer norm and sigmoid: a few steps."""
    shape = (2, 3, 10, 9)
    q = quantize_fx(lambda: Misc(relu6=config != "qnnpack"), shape, config, seed=2)
    per_node = _per_node_steps(q, shape)
    assert max(per_node.values()) <= 1.001, per_node
    mod, params = relay.frontend.from_pytorch(q, [("x", list(shape))])
    step = _out_step(mod)
    g = _compile(mod, params)
    x = np.random.default_rng(3).standard_normal(shape).astype("float32")
    g.set_input("x", x)
    g.run()
    (want,) = _torch_outputs(q, torch.from_numpy(x))
    WORST[f"Misc/{config} (end to end)"] = worst = _steps(g.get_output(0).numpy(), want, step)
    assert worst <= 4.001


class Shared(nn.Module):
    """One Linear called twice (its int32 bias differs with the input's scale), and a tuple of
    outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        return self.lin(torch.relu(h) * 3.0), h


def test_shared_module_and_tuple_output():
    shape = (3, 8)
    q = quantize_fx(Shared, shape, "x86", seed=15)
    mod, params = relay.frontend.from_pytorch(q, [("x", list(shape))])
    names = [p.name_hint for p in mod["main"].params]
    assert len(names) == len(set(names)), names
    assert "lin.weight" in params
    x = np.random.default_rng(5).standard_normal(shape).astype("float32")
    g = _compile(mod, params)
    g.set_input("x", x)
    g.run()
    want = _torch_outputs(q, torch.from_numpy(x))
    steps = [float(f.args[1].data.numpy()) for f in mod["main"].body.fields]
    for k in range(2):
        assert _steps(g.get_output(k).numpy(), want[k], steps[k]) <= 1.001


def test_linear_on_3d_input():
    shape = (2, 5, 17)
    _check_model(quantize_fx(MLP, shape, "x86", seed=4), shape, "MLP-3d/x86", n_inputs=3)


def test_eager_mode_model_quantized_and_float_outputs():
    q = quantize_eager()
    shape = (2, 3, 15, 13)
    mod, params = relay.frontend.from_pytorch(q, [("x", list(shape))])
    feat_t, logit_t = mod["main"].body.checked_type.fields
    assert feat_t.dtype == "uint8" and logit_t.dtype == "float32"
    assert all(dt == "uint8" for _, dt, _, _ in _integer_products(mod, params))
    logit_step = float(mod["main"].body.fields[1].args[1].data.numpy())
    g = _compile(mod, params)
    pvals = [params[p.name_hint] for p in mod["main"].params[1:]]
    rng = np.random.default_rng(11)
    worst = 0.0
    for k in range(4):
        x = rng.standard_normal(shape).astype("float32")
        feat, logits = _torch_outputs(q, torch.from_numpy(x))
        g.set_input("x", x)
        g.run()
        runs = [[g.get_output(0).numpy(), g.get_output(1).numpy()]]
        if k == 0:
            r = evaluate(mod["main"], x, *pvals)
            runs.append([np.asarray(r[0]), np.asarray(r[1])])
        for f, lg in runs:
            assert f.dtype == np.uint8
            worst = max(worst, _steps(f, feat), _steps(lg, logits, logit_step))
    WORST["eager"] = worst
    assert worst <= 1.001


class UpNet(nn.Module):
    """Quantized ConvTranspose2d (float inside) and QFunctional matmul (eager mode)."""

    def __init__(self) -> None:
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.mm = torch.ao.nn.quantized.FloatFunctional()
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        y = self.up(self.quant(x))
        return self.dequant(self.mm.matmul(y, y.transpose(2, 3)))


def test_conv_transpose_and_matmul():
    torch.backends.quantized.engine = "qnnpack"
    torch.manual_seed(14)
    m = UpNet().eval()
    m.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    shape = (2, 4, 5, 5)
    g = torch.Generator().manual_seed(14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ao.quantization.prepare(m, inplace=True)
        for _ in range(4):
            m(torch.randn(shape, generator=g))
        q = torch.ao.quantization.convert(m)
    assert max(_per_node_steps(q, shape).values()) <= 1.001
    _check_model(q, shape, "UpNet/qnnpack", n_inputs=3, products=False)


class Conv1dNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv1d(4, 8, 5, padding=2)
        self.r = nn.ReLU()
        self.c2 = nn.Conv1d(8, 6, 3, stride=2, dilation=2)

    def forward(self, x):
        return self.c2(self.r(self.c1(x))).mean(-1)


@pytest.mark.parametrize("config", ["x86", "qnnpack"])
def test_conv1d(config):
    shape = (2, 4, 19)
    q = quantize_fx(Conv1dNet, shape, config, seed=8)
    assert "ConvReLU1d" in {type(m).__name__ for m in q.modules()}
    _check_model(q, shape, f"Conv1d/{config}", n_inputs=3)


def test_reference_model_through_fake_quantization_to_integer():
    """convert_to_reference_fx output (reference modules: float in and out, per-channel
    weights, which torch.export refuses): imported in QDQ form, made integer by relay.build's
    FakeQuantizationToInteger; compared with the reference model's own (simulated) output."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx

    torch.backends.quantized.engine = "x86"
    shape = (2, 3, 13, 11)
    torch.manual_seed(9)
    m = _randomize(ResCNN(), 9)
    g = torch.Generator().manual_seed(10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = prepare_fx(m, get_default_qconfig_mapping("x86"), (torch.randn(shape),))
        for _ in range(8):
            p(torch.randn(shape, generator=g))
        q = convert_to_reference_fx(p)
    assert any(type(m).__module__.startswith("torch.ao.nn.quantized.reference")
               for m in q.modules())
    _check_model(q, shape, "ResCNN/x86 reference", n_inputs=3)


def test_onednn_conv_add():
    """onednn's fused ConvAdd2d / ConvAddReLU2d (two quantized inputs, two model inputs)."""
    import torch.ao.nn.intrinsic.quantized as nniq
    import torch.ao.nn.quantized as nnq

    torch.backends.quantized.engine = "onednn"
    g = torch.Generator().manual_seed(12)
    wf = torch.randn(5, 4, 3, 3, generator=g) * 0.1
    ws = torch.rand(5, generator=g) * 0.002 + 0.001
    # 7-bit weights: without VNNI, onednn's u8s8 kernels (vpmaddubsw) saturate pair sums beyond
    # int16 (9 steps off on an AVX2 Zen 3), so full-range weights have no exact torch reference
    lim = (63 * ws).view(5, 1, 1, 1)
    w = torch.quantize_per_channel(torch.maximum(torch.minimum(wf, lim), -lim), ws,
                                   torch.zeros(5, dtype=torch.long), 0, torch.qint8)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qx = nnq.Quantize(0.02, 120, torch.quint8)
            self.qe = nnq.Quantize(0.03, 90, torch.quint8)
            self.add = nniq.ConvAdd2d(4, 5, 3, padding=1)
            self.add_relu = nniq.ConvAddReLU2d(4, 5, 3, padding=1)
            for mod, (s, z) in ((self.add, (0.05, 70)), (self.add_relu, (0.04, 10))):
                mod.set_weight_bias(w, torch.randn(5, generator=g))
                mod.scale, mod.zero_point = s, z
            self.dq = nnq.DeQuantize()

        def forward(self, x, e):
            qx, qe = self.qx(x), self.qe(e)
            return self.dq(self.add(qx, qe)), self.add_relu(qx, qe)

    model = Model().eval()
    shape = [2, 4, 7, 6]
    x = np.random.default_rng(1).standard_normal(shape).astype("float32")
    e = np.random.default_rng(2).standard_normal([2, 5, 7, 6]).astype("float32")
    mod, params = relay.frontend.from_pytorch(model, [("x", shape), ("e", [2, 5, 7, 6])])
    out_f, out_q = _torch_outputs(model, (torch.from_numpy(x), torch.from_numpy(e)))
    got = evaluate(mod["main"], x, e, *[params[p.name_hint] for p in mod["main"].params[2:]])
    g = _compile(mod, params)
    g.set_input("x", x)
    g.set_input("e", e)
    g.run()
    for f, q in ([np.asarray(got[0]), np.asarray(got[1])],
                 [g.get_output(0).numpy(), g.get_output(1).numpy()]):
        assert _steps(f, out_f, 0.05) <= 1.001 and _steps(q, out_q) <= 1.001


class Functional(nn.Module):
    """F.conv2d / F.linear on parameters: convert_fx emits quantized.conv2d_relu /
    quantized.linear calls on packed weights (get_attr script objects)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 3, 3, 3) * 0.2)
        self.b = nn.Parameter(torch.randn(8) * 0.1)
        self.lw = nn.Parameter(torch.randn(6, 8) * 0.3)
        self.lb = nn.Parameter(torch.randn(6) * 0.1)

    def forward(self, x):
        y = nn.functional.relu(nn.functional.conv2d(x, self.w, self.b, (2, 2), (1, 1), (1, 1), 1))
        return nn.functional.linear(y.mean((2, 3)), self.lw, self.lb)


@pytest.mark.parametrize("config", ["x86", "qnnpack"])
def test_functional_conv_and_linear_on_packed_weights(config):
    shape = (2, 3, 9, 8)
    q = quantize_fx(Functional, shape, config, seed=13)
    targets = {str(n.target) for n in q.graph.nodes if n.op == "call_function"}
    assert {"quantized.conv2d_relu", "quantized.linear"} <= targets, targets
    assert max(_per_node_steps(q, shape).values()) <= 1.001
    mod, params = relay.frontend.from_pytorch(q, [("x", list(shape))])
    assert "conv2d_relu.weight" not in params and "linear.weight" in params, list(params)
    g = _compile(mod, params)
    x = np.random.default_rng(4).standard_normal(shape).astype("float32")
    g.set_input("x", x)
    g.run()
    (want,) = _torch_outputs(q, torch.from_numpy(x))
    # a 1-step tie in the quantized mean grows through the linear layer (weights ~0.3 x 8)
    WORST[f"Functional/{config}"] = worst = _steps(g.get_output(0).numpy(), want, _out_step(mod))
    assert worst <= 4.001


def test_freeze_params_embeds_the_quantized_weights():
    q = quantize_fx(MLP, (3, 17), "qnnpack", seed=5)
    mod, params = relay.frontend.from_pytorch(q, [("x", [3, 17])], freeze_params=True)
    assert params == {} and [p.name_hint for p in mod["main"].params] == ["x"]
    mod2, params2 = relay.frontend.from_pytorch(q, [("x", [3, 17])])
    assert params2["l1.weight"].dtype == np.int8 and params2["l1.bias"].dtype == np.int32
    x = np.random.default_rng(0).standard_normal((3, 17)).astype("float32")
    a = np.asarray(evaluate(mod["main"], x))
    b = np.asarray(evaluate(mod2["main"], x, *[params2[p.name_hint]
                                               for p in mod2["main"].params[1:]]))
    np.testing.assert_array_equal(a, b)


def test_unsupported_quantized_ops_listed_in_one_error():
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant = torch.ao.quantization.QuantStub()
            self.up = nn.Conv3d(3, 3, 1)
            self.dequant = torch.ao.quantization.DeQuantStub()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(self.dequant(self.up(self.quant(x))).mean((2, 3, 4)))

    torch.backends.quantized.engine = "qnnpack"
    m = Model().eval()
    m.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ao.quantization.prepare(m, inplace=True)
        m(torch.randn(2, 3, 4, 5, 5))
        q = torch.ao.quantization.convert(m)
        q.fc = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(3, 3)),
                                                      {nn.Linear})[0]  # dynamic: unsupported
    with pytest.raises(OpNotImplemented) as e:
        relay.frontend.from_pytorch(q, [("x", [2, 3, 4, 5, 5])])
    msg = str(e.value)
    assert "2 operator type(s)" in msg, msg
    assert "Conv3d: up" in msg and "dynamic" in msg and ": fc" in msg, msg


def test_training_mode_and_arity_errors():
    q = quantize_fx(MLP, (3, 17), "qnnpack", seed=6)
    with pytest.raises(ValueError, match="input_infos has 2 entries"):
        relay.frontend.from_pytorch(q, [("x", [3, 17]), ("y", [3, 17])])
    with pytest.raises(ValueError, match="the input has 16 features, the weight 17"):
        relay.frontend.from_pytorch(q, [("x", [3, 16])])
    with pytest.raises(ValueError, match="input_infos .* are required"):
        relay.frontend.from_pytorch(q)
    q.train()
    with pytest.raises(ValueError, match="training mode"):
        relay.frontend.from_pytorch(q, [("x", [3, 17])])


def test_report_worst_agreement():
    """Prints the worst disagreement seen (in output steps) by the tests above."""
    print({k: round(v, 3) for k, v in WORST.items()})
