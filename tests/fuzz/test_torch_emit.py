"""The fuzzer's ONNX -> torch emitter (torch_emit.to_torch) against onnxruntime, and the
"pytorch" oracle (the emitted module through torch.export and relay.frontend.from_pytorch)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvmpy.testing.fuzz import oracles  # noqa: E402
from tvmpy.testing.fuzz.generator import generate  # noqa: E402
from tvmpy.testing.fuzz.torch_emit import EMITTERS, explain, to_torch  # noqa: E402


def _eager(module, model, feeds):
    args = [torch.from_numpy(np.array(feeds[n], copy=True)) for n in module.input_names]
    with torch.no_grad():
        return [o.numpy() for o in module(*args)]


def _generated(seeds, max_nodes):
    for seed in seeds:
        try:
            case = generate(seed, max_nodes=max_nodes)
            want = oracles.run_reference(case.model, case.feeds)
        except Exception:  # noqa: BLE001 - the generator's or onnxruntime's refusal
            continue
        yield case, want


def test_emitted_modules_agree_with_onnxruntime():
    """Eager torch on the translation of generated models matches onnxruntime (an independent
    reference for the emitter); most models translate; the translations cover many op types."""
    models, converted, agreeing = 0, 0, collections.Counter()
    disagree = []
    for case, want in _generated(range(300), 6):
        models += 1
        module = to_torch(case.model)
        if module is None:
            continue
        converted += 1
        low = oracles.uses_float16(case.model)
        diff = oracles.compare(_eager(module, case.model, case.feeds), want, case.ops, low)
        if diff is None:
            agreeing.update(set(case.ops))
        else:
            disagree.append((case.seed, case.ops, diff))
    assert models >= 250
    assert converted >= 0.9 * models, (converted, models)
    # a disagreement is an emitter bug, or now and then a model the generator let through
    # whose reference is itself rounding noise: at most 1%
    assert len(disagree) <= max(1, converted // 100), disagree
    assert len(agreeing) >= 100, sorted(agreeing)
    assert len(EMITTERS) >= 120


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)  # fills the outputs' shapes
    onnx.checker.check_model(m, full_check=True)
    return m


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _single(op, x, inits=(), out_dtype=None, extra_inputs=(), n_out=1, **attrs):
    """A one-node model of ``op`` on input ``x`` (a numpy array) and initializers (output
    shapes left to shape inference; a second output is int64)."""
    dt = helper.np_dtype_to_tensor_dtype(x.dtype)
    outs = ["y", "i"][:n_out]
    node = helper.make_node(op, ["x", *extra_inputs], outs, **attrs)
    types = [out_dtype or dt, TensorProto.INT64]
    return _model([node], [_vi("x", dt, list(x.shape))],
                  [_vi(o, t, None) for o, t in zip(outs, types)], inits), {"x": x}


def _init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


RNG = np.random.default_rng(0)
X4 = RNG.uniform(-3, 3, (2, 3, 7, 6)).astype("float32")
XI = RNG.integers(-20, 20, (4, 5)).astype("int64")
DI = np.where(RNG.integers(0, 2, (4, 5)) > 0, 1, -1) * RNG.integers(1, 7, (4, 5))


def _cases():
    """(id, model, feeds) of single operators whose translation is easy to get wrong."""
    w = RNG.uniform(-1, 1, (4, 3, 3, 2)).astype("float32")
    wt = RNG.uniform(-1, 1, (3, 2, 3, 2)).astype("float32")
    c = []
    for fmod in (0, 1):  # fmod=0: the divisor's sign; fmod=1: the dividend's
        m, f = _single("Mod", XI, [_init("d", DI)], extra_inputs=["d"], fmod=fmod)
        c.append((f"mod-fmod{fmod}", m, f))
    m, f = _single("Div", XI, [_init("d", DI)], extra_inputs=["d"])
    c.append(("int-div-truncates", m, f))
    slc = [_init("s", [-1, 1]), _init("e", [-2 ** 62, 100]), _init("a", [3, -2]),
           _init("st", [-2, 3])]
    m, f = _single("Slice", X4, slc, extra_inputs=["s", "e", "a", "st"])
    c.append(("slice-negative-step-clamped", m, f))
    m, f = _single("Conv", X4, [_init("w", w)], extra_inputs=["w"],
                   pads=[0, 1, 2, 0], strides=[2, 2], dilations=[2, 1])
    c.append(("conv-asymmetric-pads", m, f))
    m, f = _single("Conv", X4, [_init("w", w)], extra_inputs=["w"],
                   auto_pad="SAME_LOWER", strides=[2, 3])
    c.append(("conv-same-lower", m, f))
    m, f = _single("ConvTranspose", X4, [_init("w", wt)], extra_inputs=["w"],
                   strides=[2, 2], pads=[0, 1, 1, 0], output_padding=[1, 0])
    c.append(("conv-transpose-asymmetric", m, f))
    m, f = _single("MaxPool", X4, kernel_shape=[2, 3], strides=[2, 2],
                   pads=[0, 1, 1, 0], ceil_mode=1)
    c.append(("maxpool-ceil-asymmetric", m, f))
    m, f = _single("AveragePool", X4, kernel_shape=[3, 3], strides=[2, 2],
                   pads=[1, 0, 0, 1], ceil_mode=1)
    c.append(("avgpool-ceil-exclude-pad", m, f))
    m, f = _single("Pad", X4, [_init("p", [0, 1, 2, 0, 0, 1, 0, 1])],
                   extra_inputs=["p"], mode="reflect")
    c.append(("pad-reflect-channels", m, f))
    m, f = _single("Resize", X4,
                   [_init("sz", np.array([2, 3, 11, 9], np.int64))], extra_inputs=["", "", "sz"],
                   mode="nearest", coordinate_transformation_mode="half_pixel",
                   nearest_mode="round_prefer_floor")
    c.append(("resize-nearest-half-pixel", m, f))
    m, f = _single("Resize", X4, [_init("sc", np.array([1, 1, 2, 2], "f4"))],
                   extra_inputs=["", "sc"], mode="linear",
                   coordinate_transformation_mode="asymmetric")
    c.append(("resize-linear-asymmetric", m, f))
    m, f = _single("TopK", XI % 4, [_init("k", np.array([3], np.int64))],
                   extra_inputs=["k"], n_out=2, axis=1, largest=0)
    c.append(("topk-integer-ties", m, f))
    m, f = _single("ArgMax", XI % 3, out_dtype=TensorProto.INT64, axis=1, keepdims=0,
                   select_last_index=1)
    c.append(("argmax-last-index", m, f))
    m, f = _single("CumSum", XI.astype("int32"), [_init("ax", np.int32(-1))],
                   extra_inputs=["ax"], exclusive=1, reverse=1)
    c.append(("cumsum-exclusive-reverse-int32", m, f))
    m, f = _single("Reshape", X4, [_init("s", np.array([0, -1, 6], np.int64))],
                   extra_inputs=["s"])
    c.append(("reshape-zero-and-minus-one", m, f))
    return c


@pytest.mark.parametrize("name,model,feeds", _cases(), ids=[c[0] for c in _cases()])
def test_single_operator_translation(name, model, feeds):
    module = to_torch(model)
    assert module is not None, explain(model)
    want = oracles.run_reference(model, feeds)
    assert oracles.compare(_eager(module, model, feeds), want, ["Conv"]) is None


def test_unfaithful_attributes_are_refused():
    m, _ = _single("LRN", X4, size=2)
    assert to_torch(m) is None and "even size" in explain(m)
    m, _ = _single("ConvTranspose", X4,
                   [_init("w", np.ones((3, 2, 3, 2), "float32"))], extra_inputs=["w"],
                   strides=[2, 2], output_shape=[15, 13])
    assert to_torch(m) is None and "output_shape" in explain(m)
    m, _ = _single("Resize", X4, [_init("sc", np.array([1, 1, 2, 2], "f4"))],
                   extra_inputs=["", "sc"], mode="cubic",
                   coordinate_transformation_mode="asymmetric")
    assert to_torch(m) is None and "cubic" in explain(m)


def test_pytorch_config_is_a_default_oracle():
    assert "pytorch" in oracles.DEFAULT_CONFIGS
    assert oracles.CONFIGS["pytorch"].needs == "torch"


# generated models with convolutions, pooling, resize, gathers, reductions, normalizations,
# casts, slicing ... that go through the whole PyTorch path without a finding
PYTORCH_SEEDS = [4, 9, 25, 52, 56, 99, 133, 240, 337, 343]


@pytest.mark.parametrize("seed", PYTORCH_SEEDS)
def test_pytorch_oracle_on_generated_models(seed):
    case = generate(seed, max_nodes=6)
    skipped: list[str] = []
    assert to_torch(case.model) is not None, explain(case.model)
    findings = oracles.check_model(case.model, case.feeds, configs=("pytorch",),
                                   skipped=skipped)
    assert not skipped, skipped  # eager torch agrees: tvmpy was really checked
    assert findings == [], findings


def test_pytorch_oracle_inverse_trigonometry_and_nan_tests():
    """Ops the PyTorch frontend converts since the fuzzer's pytorch oracle asked for them."""
    x = RNG.uniform(-0.9, 0.9, (3, 5)).astype("float32")
    ops = ["Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh", "IsNaN", "IsInf"]
    nodes = [helper.make_node(op, ["x"], [f"y{k}"]) for k, op in enumerate(ops)]
    nodes += [helper.make_node("Abs", ["x"], ["a"]),
              helper.make_node("Add", ["a", "one"], ["b"]),
              helper.make_node("Acosh", ["b"], ["y_acosh"])]
    outs = [_vi(f"y{k}", TensorProto.BOOL if op.startswith("Is") else TensorProto.FLOAT,
                [3, 5]) for k, op in enumerate(ops)] + [_vi("y_acosh", TensorProto.FLOAT, [3, 5])]
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [3, 5])], outs,
               [_init("one", np.float32(1.1))])
    skipped: list[str] = []
    assert oracles.check_model(m, {"x": x}, configs=("pytorch",), skipped=skipped) == []
    assert not skipped


def test_pytorch_oracle_skips_when_eager_torch_disagrees(monkeypatch):
    """A wrong translation is the emitter's fault: counted as skipped, never a finding."""
    m, feeds = _single("Relu", X4)

    class Wrong(torch.nn.Module):
        def forward(self, x):
            return (x + 1,)

    monkeypatch.setattr(oracles, "_torch_module", lambda model: Wrong())
    before = sum(oracles.SKIPPED.values())
    skipped: list[str] = []
    assert oracles.check_model(m, feeds, configs=("pytorch",), skipped=skipped) == []
    assert len(skipped) == 1 and "eager torch disagrees" in skipped[0]
    assert sum(oracles.SKIPPED.values()) == before + 1
    monkeypatch.setattr(oracles, "_torch_module", lambda model: None)  # no translation
    assert oracles.check_model(m, feeds, configs=("pytorch",), skipped=skipped) == []
    assert len(skipped) == 1


def test_pytorch_oracle_empty_slice():
    """An empty Slice (and ops on the empty result): from_pytorch used to refuse [3:1]."""
    s = [_init("s", [3]), _init("e", [1]), _init("a", [1])]
    m, feeds = _single("Slice", X4[0, 0], s, extra_inputs=["s", "e", "a"])
    m.graph.node.append(helper.make_node("Relu", ["y"], ["r"]))
    m.graph.output.append(_vi("r", TensorProto.FLOAT, [7, 0]))
    skipped: list[str] = []
    assert oracles.check_model(m, feeds, configs=("pytorch", "llvm-O3"), skipped=skipped) == []
    assert not skipped
