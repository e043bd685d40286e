"""float16 accumulation (issue 30, point 2): the one per-operator attribute
(``TFloat16Accumulation``) and the one pass (``relay.transform.WidenFloat16Accumulation``) that
both frontends run. float16 models through ONNX and PyTorch against onnxruntime and eager torch,
with reductions of hundreds of terms, where a float16 accumulator drifts by percents."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay.op.registry import FLOAT16_ACCUMULATION, register_float16_accumulation
from tvmpy.relay.testing import compare
from tvmpy.relay.transform import InferType, WidenFloat16Accumulation

F16 = "float16"


def _typed(params: list, body: relay.Expr) -> tvm.IRModule:
    return InferType()(tvm.IRModule.from_expr(relay.Function(params, body)))


def _run(mod: tvm.IRModule, params: dict, feeds: dict) -> list[np.ndarray]:
    lib, _ = compare.build(mod, params, 3, "llvm")
    return compare.tvm_runner(lib)(feeds)


def _import_twice(load) -> tuple:
    """``load()`` (a frontend call) as it is, and without the pass (float16 accumulators)."""
    widened = load()
    with tvm.transform.PassContext(disabled_pass=["WidenFloat16Accumulation"]):
        plain = load()
    return widened, plain


def _check_against(want: np.ndarray, widened: tuple, plain: tuple, feeds: dict) -> None:
    """The widened module's result is ``want`` within one float16 rounding; the module without
    the pass (float16 accumulators) is not: the case drifts, the test can fail."""
    (mod, params), (mod16, params16) = widened, plain
    assert "float32" in str(mod) and "float32" not in str(mod16)
    (got,) = _run(mod, params, feeds)
    (drifted,) = _run(mod16, params16, feeds)
    assert got.dtype == np.float16 and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    tol = 2.0 ** -10 * np.maximum(np.abs(w), 2.0 ** -10 * np.abs(w).max())
    assert np.all(np.abs(g - w) <= tol), np.abs(g - w).max()
    print("drift / tolerance:", (np.abs(drifted.astype(np.float64) - w) / tol).max())
    assert np.any(np.abs(drifted.astype(np.float64) - w) > 2 * tol), "the case does not drift"


# ---- the pass on a small function ---------------------------------------------------------------
def test_pass_widens_registered_calls_and_the_bias_epilogue():
    x = relay.var("x", shape=(1, 8, 5, 5), dtype=F16)
    w = relay.var("w", shape=(4, 8, 3, 3), dtype=F16)
    b = relay.var("b", shape=(4,), dtype=F16)
    y = relay.nn.bias_add(relay.nn.conv2d(x, w), b)
    before = _typed([x, w, b], relay.add(relay.sum(y, axis=[1]), relay.max(y, axis=[1])))
    after = WidenFloat16Accumulation()(before)
    print(before, after, sep="\n")

    def f32(e):
        return relay.cast(e, "float32")

    y32 = relay.cast(relay.nn.bias_add(relay.nn.conv2d(f32(x), f32(w)), f32(b)), F16)
    want = _typed([x, w, b], relay.add(relay.cast(relay.sum(f32(y32), axis=[1]), F16),
                                       relay.max(y32, axis=[1])))  # max is exact: kept
    tvm.ir.assert_structural_equal(after["main"], want["main"])


def test_pass_leaves_float32_explicit_out_dtype_and_plain_bias_alone():
    x = relay.var("x", shape=(3, 40))
    mod = _typed([x], relay.sum(relay.nn.dense(x, x)))
    assert WidenFloat16Accumulation()(mod) is mod  # float32: the same module, kernels unchanged
    h = relay.var("h", shape=(3, 40), dtype=F16)
    b = relay.var("b", shape=(3,), dtype=F16)
    mixed = _typed([h, b], relay.nn.bias_add(relay.nn.dense(h, h, out_dtype="float32"),
                                             relay.cast(b, "float32"), axis=1))
    assert WidenFloat16Accumulation()(mixed) is mixed  # its accumulator is chosen already
    plain = _typed([h, b], relay.nn.bias_add(h, b, axis=0))
    assert WidenFloat16Accumulation()(plain) is plain  # an epilogue only after a widened call


def test_registration_checks_its_kind():
    assert relay.op.get("nn.conv2d").get_attr(FLOAT16_ACCUMULATION) == "accumulate"
    assert relay.op.get("nn.bias_add").get_attr(FLOAT16_ACCUMULATION) == "epilogue"
    assert relay.op.get("max").get_attr(FLOAT16_ACCUMULATION) is None
    with pytest.raises(ValueError, match="kind must be one of"):
        register_float16_accumulation("nn.conv2d", "always")


@pytest.mark.parametrize("op", ["sum", "mean", "prod"])
@pytest.mark.parametrize("shape,axis", [((7, 129), None), ((3, 1000), 1), ((517, 3), 0)])
def test_relay_float16_reductions_accumulate_in_float32(op, shape, axis):
    # found by the fuzzer (seed 10096): a float16 sum of a few hundred terms accumulated in
    # float16 was 3% off (529.5 vs 546); float32 accumulation rounds once, like onnxruntime
    lo, hi = (0.995, 1.005) if op == "prod" else (0.0, 3.0)
    a = np.random.default_rng(30).uniform(lo, hi, shape).astype(F16)
    x = relay.var("x", shape=shape, dtype=F16)
    mod = WidenFloat16Accumulation()(_typed([x], getattr(relay, op)(x, axis=axis)))
    (b,) = _run(mod, {}, {"x": a})
    assert b.dtype == np.float16
    e = getattr(np, op)(a.astype("float64"), axis=axis)
    # one rounding to float16 (half an ulp), nothing accumulated
    np.testing.assert_allclose(b.astype("float64"), e, rtol=2 ** -11 + 1e-6)


# ---- ONNX vs onnxruntime ------------------------------------------------------------------------
def _onnx_case(name: str):
    from onnx import TensorProto, helper

    H = TensorProto.FLOAT16
    rng = np.random.default_rng(30)
    r = lambda *s: rng.uniform(0.0, 1.0, s).astype(F16)  # noqa: E731  non-zero, all positive
    inits: dict[str, np.ndarray] = {}
    if name == "conv_bias":  # 128 * 3 * 3 = 1152 terms
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 1, 0])]
        feeds, inits = {"x": r(1, 128, 5, 7)}, {"w": r(3, 128, 3, 3), "b": r(3)}
    elif name == "gemm":
        nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)]
        feeds, inits = {"x": r(5, 997)}, {"w": r(3, 997), "c": r(3)}
    elif name == "batch_matmul":
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
        feeds, inits = {"x": r(2, 3, 611)}, {"w": r(2, 611, 4)}
    elif name == "conv_transpose":  # 300 input channels summed per output
        nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2])]
        feeds, inits = {"x": r(1, 300, 3, 3)}, {"w": r(300, 2, 2, 2), "b": r(2)}
    elif name == "reduce_sum":
        nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)]
        feeds, inits = {"x": r(4099, 3)}, {"axes": np.array([0], np.int64)}
    elif name == "reduce_mean":
        nodes = [helper.make_node("ReduceMean", ["x"], ["y"], axes=[0], keepdims=1)]  # < 18
        feeds = {"x": r(4099, 5)}
    else:  # log_softmax over a long column
        nodes = [helper.make_node("LogSoftmax", ["x"], ["y"], axis=0)]
        feeds = {"x": r(4099, 4)}
    opset = 13
    tensors = [helper.make_tensor(k, H if v.dtype == np.float16 else TensorProto.INT64,
                                  v.shape, v.flatten().tolist()) for k, v in inits.items()]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(k, H, v.shape)
                                        for k, v in feeds.items()],
                          [helper.make_tensor_value_info("y", H, None)], tensors)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), feeds, inits


@pytest.mark.parametrize("name", ["conv_bias", "gemm", "batch_matmul", "conv_transpose",
                                  "reduce_sum", "reduce_mean", "log_softmax"])
def test_onnx_float16_models_match_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    from tvmpy.relay.frontend import from_onnx

    model, feeds, _ = _onnx_case(name)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    _check_against(want, *_import_twice(lambda: from_onnx(model)), feeds)


# ---- PyTorch vs eager torch ---------------------------------------------------------------------
_TORCH_CASES = {
    "conv_bias": ([(1, 128, 5, 7)], "conv"),
    "linear": ([(5, 997)], "linear"),
    "bmm": ([(2, 3, 611), (2, 611, 4)], lambda a, b: a @ b),
    "sum": ([(4099, 3)], lambda a: a.sum(0)),
    "mean": ([(4099, 5)], lambda a: a.mean(0)),
    "var": ([(4099, 3)], lambda a: a.var(0)),
    "log_softmax": ([(4099, 4)], lambda a: a.log_softmax(0)),
    "softmax": ([(4099, 4)], lambda a: a.softmax(0) * 4096),
}


@pytest.mark.parametrize("name", sorted(_TORCH_CASES))
def test_pytorch_float16_models_match_eager_torch(name):
    torch = pytest.importorskip("torch")
    from tvmpy.relay.frontend import from_pytorch

    shapes, fn = _TORCH_CASES[name]
    torch.manual_seed(30)
    if fn == "conv":
        mod_t = torch.nn.Conv2d(128, 3, 3, padding=(1, 0)).half()
    elif fn == "linear":
        mod_t = torch.nn.Linear(997, 3).half()
    else:
        class M(torch.nn.Module):
            def forward(self, *xs):
                return fn(*xs)
        mod_t = M()
    if isinstance(mod_t, (torch.nn.Conv2d, torch.nn.Linear)):
        with torch.no_grad():
            for p in mod_t.parameters():
                p.uniform_(0.0, 1.0)
    rng = np.random.default_rng(30)
    xs = [rng.uniform(0.0, 1.0, s).astype(F16) for s in shapes]
    ts = tuple(torch.from_numpy(x) for x in xs)
    with torch.no_grad():
        want = mod_t(*ts).numpy()
    ep = torch.export.export(mod_t.eval(), ts)
    names = [f"x{i}" for i in range(len(xs))]
    infos = [(n, (list(x.shape), F16)) for n, x in zip(names, xs)]
    _check_against(want, *_import_twice(lambda: from_pytorch(ep, infos)), dict(zip(names, xs)))
