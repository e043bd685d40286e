"""ONNX quantized operators (QOperator form, com.microsoft contrib ops included) imported into
relay.qnn, compiled (CanonicalizeOps -> integer kernels) and run by the interpreter, against
onnxruntime: integer outputs must be identical."""

import numpy as np
import pytest
from _qnn_util import build_run, rand_q

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper  # noqa: E402

from tvmpy import relay  # noqa: E402
from tvmpy.relay.interpreter import evaluate  # noqa: E402

rng = np.random.default_rng(11)
MS = "com.microsoft"


def _model(op, inputs, inits, out_types=None, domain="", **attrs):
    """One node; ``inputs``: graph inputs (name -> array), ``inits``: initializers;
    ``out_types``: the outputs' numpy dtypes (default: one, of the first input's type)."""
    names = list(inputs) + [k for k in inits]
    order = attrs.pop("_order", None) or names
    out_types = out_types or [next(iter(inputs.values())).dtype]
    n_out = len(out_types)
    node = helper.make_node(op, order, [f"y{i}" for i in range(n_out)], domain=domain, **attrs)
    gin = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in inputs.items()]
    init = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    outs = [helper.make_tensor_value_info(f"y{i}", helper.np_dtype_to_tensor_dtype(
        np.dtype(t)), None) for i, t in enumerate(out_types)]
    graph = helper.make_graph([node], "g", gin, outs, init)
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid(MS, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _check(model, inputs, exact=True, steps=0):
    """Outputs equal onnxruntime's (integers within ``steps`` quantization steps)."""
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expect = sess.run(None, inputs)
    mod, params = relay.frontend.from_onnx(model, {k: v.shape for k, v in inputs.items()})
    compiled = build_run(mod, inputs, params)
    main = mod["main"]
    args = [inputs[p.name_hint] if p.name_hint in inputs else params[p.name_hint]
            for p in main.params]
    interp = evaluate(main, *args)
    interp = [np.asarray(v) for v in (interp if isinstance(interp, (list, tuple)) else [interp])]
    for e, c, i in zip(expect, compiled, interp):
        for got in (c, i):
            assert got.dtype == e.dtype and got.shape == e.shape, (got.dtype, got.shape, e.shape)
            if steps and e.dtype.kind in "iu":
                diff = np.abs(got.astype(np.int64) - e)
                assert diff.max() <= steps and (diff == 0).mean() >= 0.95, diff.max()
            elif exact or e.dtype.kind != "f":
                np.testing.assert_array_equal(got, e)
            else:
                np.testing.assert_allclose(got, e, rtol=1e-6, atol=1e-6)


def _weights(shape, dtype, act):
    """Random ``dtype`` weights for ``act`` activations. int8 weights against uint8 activations
    keep 7 bits: without VNNI, onnxruntime's u8s8 kernels (vpmaddubsw) saturate pair sums
    beyond int16 (its documented reason for reduce_range), so on an AVX2 host its answers to
    full-range weights are not the exact reference (tvmpy's are: checked against int64 numpy
    in tests/relay/qnn)."""
    w = rand_q(rng, shape, dtype)
    return (w // 2).astype(dtype) if (act, dtype) == ("uint8", "int8") else w


def _s(*shape):
    return rng.uniform(0.005, 0.03, shape).astype("float32") if shape else \
        np.float32(rng.uniform(0.005, 0.03))


@pytest.mark.parametrize("dx,dw,per_channel,group,pads,strides", [
    ("uint8", "int8", True, 1, [1, 1, 1, 1], [1, 1]),
    ("uint8", "uint8", False, 1, [0, 1, 2, 1], [2, 1]),
    ("int8", "int8", True, 1, [1, 1, 1, 1], [2, 2]),
    ("uint8", "int8", True, 3, [1, 0, 1, 0], [1, 1]),
])
def test_qlinearconv(dx, dw, per_channel, group, pads, strides):
    o, cin = 6, 3 * (group if group > 1 else 1)
    x = rand_q(rng, (1, cin, 9, 7), dx)
    w = _weights((o, cin // group, 3, 3), dw, dx)
    zx = np.array(rng.integers(0, 50) if dx == "uint8" else rng.integers(-10, 10), dx)
    zw = (np.zeros(o, dw) if per_channel else np.array(128 if dw == "uint8" else 0, dw))
    if dw == "uint8" and per_channel:
        zw = rng.integers(100, 150, o).astype(dw)
    inits = {"sx": _s(), "zx": zx, "w": w, "sw": _s(o) if per_channel else _s(), "zw": zw,
             "sy": np.float32(0.5), "zy": np.array(100 if dx == "uint8" else -5, dx),
             "b": rng.integers(-1000, 1000, o).astype("int32")}
    model = _model("QLinearConv", {"x": x}, inits, pads=pads, strides=strides, group=group,
                   _order=["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"])
    _check(model, {"x": x})


@pytest.mark.parametrize("shape_a,shape_b,per_col,dtype", [
    ((5, 17), (17, 11), True, "uint8"), ((2, 4, 17), (17, 3), False, "int8"),
    ((2, 4, 9), (2, 9, 5), False, "uint8")])
def test_qlinearmatmul(shape_a, shape_b, per_col, dtype):
    a = rand_q(rng, shape_a, dtype)
    b = _weights(shape_b, "int8", dtype)
    n = shape_b[-1]
    inits = {"sa": _s(), "za": np.array(7 if dtype == "uint8" else -3, dtype), "b": b,
             "sb": _s(n) if per_col else _s(), "zb": np.zeros(n, "int8") if per_col else
             np.array(0, "int8"), "sy": np.float32(0.2), "zy": np.array(9, dtype)}
    model = _model("QLinearMatMul", {"a": a}, inits,
                   _order=["a", "sa", "za", "b", "sb", "zb", "sy", "zy"])
    _check(model, {"a": a})


def test_convinteger_and_matmulinteger():
    x = rand_q(rng, (1, 2, 6, 5), "uint8")
    w = rand_q(rng, (4, 2, 3, 3), "uint8")
    model = _model("ConvInteger", {"x": x}, {"w": w, "zx": np.array(11, "uint8"),
                                            "zw": np.array(130, "uint8")}, ["int32"],
                   pads=[1, 1, 1, 1],
                   _order=["x", "w", "zx", "zw"])
    _check(model, {"x": x})
    a = rand_q(rng, (3, 4, 13), "uint8")
    b = _weights((13, 6), "int8", "uint8")
    model = _model("MatMulInteger", {"a": a}, {"b": b, "za": np.array(12, "uint8"),
                                               "zb": np.array(-2, "int8")}, ["int32"],
                   _order=["a", "b", "za", "zb"])
    _check(model, {"a": a})


@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_dequantize_linear(per_axis):
    x = (rng.standard_normal((2, 4, 3)) * 3).astype("float32")
    s = _s(4) if per_axis else _s()
    z = rng.integers(100, 150, 4).astype("uint8") if per_axis else np.array(128, "uint8")
    _check(_model("QuantizeLinear", {"x": x}, {"s": s, "z": z}, ["uint8"], axis=1), {"x": x})
    q = rand_q(rng, (2, 4, 3), "int8")
    z8 = rng.integers(-9, 9, 4).astype("int8") if per_axis else np.array(-4, "int8")
    _check(_model("DequantizeLinear", {"q": q}, {"s": s, "z": z8}, ["float32"], axis=1),
           {"q": q})


def test_dynamicquantizelinear():
    x = (rng.standard_normal((3, 7)) * 2 + 0.5).astype("float32")
    model = _model("DynamicQuantizeLinear", {"x": x}, {}, ["uint8", "float32", "uint8"])
    _check(model, {"x": x})


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype,b_shape", [("uint8", (2, 5, 7)), ("int8", (1, 5, 7)),
                                           ("uint8", (7,))])
def test_qlinear_binary(op, dtype, b_shape):
    a, b = rand_q(rng, (2, 5, 7), dtype), rand_q(rng, b_shape, dtype)
    z = (lambda v: np.array(v, dtype))
    inits = {"sa": _s(), "za": z(3), "sb": _s(), "zb": z(120 if dtype == "uint8" else -7),
             "sc": _s(), "zc": z(90 if dtype == "uint8" else 2)}
    model = _model(op, {"a": a, "b": b}, inits, domain=MS,
                   _order=["a", "sa", "za", "b", "sb", "zb", "sc", "zc"])
    _check(model, {"a": a, "b": b})


def _rounding_sensitive_scales(dtype: str, count: int) -> list[tuple]:
    """``count`` (sa, za, sb, zb, sc, zc) sets for which the order of QLinearAdd's float32
    roundings decides some output: over all 256 x 256 input pairs, a*ra + b*rb + fixed
    evaluated fused a-first and fused b-first (float64 sums of exact products stand in for
    FMA) round differently, and so does the unfused evaluation."""
    f32, f64 = np.float32, np.float64
    lo = -128 if dtype == "int8" else 0
    q = np.arange(lo, lo + 256).astype(f32)
    a, b = np.meshgrid(q, q, indexing="ij")
    pick = np.random.default_rng(3)
    found = []
    while len(found) < count:
        sa, sb, sc = (f32(pick.uniform(0.002, 0.05)) for _ in range(3))
        za, zb, zc = (int(v) for v in pick.integers(lo, lo + 256, 3))
        ra, rb = f32(sa / sc), f32(sb / sc)
        fixed = f32(f32(zc) - f32(ra * f32(za) + f32(rb * f32(zb))))
        plain = f32(f32(fixed + f32(a * ra)) + f32(b * rb))
        a1 = f32(f64(b) * rb + f32(f64(a) * ra + fixed))
        b1 = f32(f64(a) * ra + f32(f64(b) * rb + fixed))
        p, x, y = (np.clip(np.rint(v), lo, lo + 255) for v in (plain, a1, b1))
        if not np.array_equal(x, y) and not (np.array_equal(p, x) or np.array_equal(p, y)):
            found.append((sa, np.array(za, dtype), sb, np.array(zb, dtype), sc,
                          np.array(zc, dtype)))
    return found


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("layout", ["full", "row", "column"])
def test_qlinear_add_rounding(dtype, layout):
    """QLinearAdd bit-exact with onnxruntime on every input pair, for scales where the order
    of the float32 roundings matters (x86: two FMAs, b's term first, with the operands'
    roles swapped where only b varies along the last axis). ``layout``: b as big as a, b one
    row broadcast down a, or a one column broadcast across b."""
    lo = -128 if dtype == "int8" else 0
    q = np.arange(lo, lo + 256).astype(dtype)
    if layout == "full":
        a, b = np.repeat(q[:, None], 256, 1), np.repeat(q[None, :], 256, 0)
    elif layout == "row":
        a, b = np.repeat(q[:, None], 256, 1), q
    else:
        a, b = q[:, None].copy(), np.repeat(q[None, :], 256, 0)
    for sa, za, sb, zb, sc, zc in _rounding_sensitive_scales(dtype, 2):
        inits = {"sa": sa, "za": za, "sb": sb, "zb": zb, "sc": sc, "zc": zc}
        model = _model("QLinearAdd", {"a": a, "b": b}, inits, domain=MS,
                       _order=["a", "sa", "za", "b", "sb", "zb", "sc", "zc"])
        _check(model, {"a": a, "b": b})


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qlinear_unary(op, dtype):
    x = rand_q(rng, (2, 3, 11), dtype)
    zx = np.array(128 if dtype == "uint8" else 0, dtype)
    zy = np.array(0 if dtype == "uint8" else -128, dtype)
    inits = {"sx": np.float32(0.05), "zx": zx, "sy": np.float32(1 / 256), "zy": zy}
    attrs = {"alpha": 0.1} if op == "QLinearLeakyRelu" else {}
    if op == "QLinearLeakyRelu":
        inits["sy"] = np.float32(0.04)
    model = _model(op, {"x": x}, inits, domain=MS, _order=["x", "sx", "zx", "sy", "zy"], **attrs)
    _check(model, {"x": x})


@pytest.mark.parametrize("op", ["QLinearGlobalAveragePool", "QLinearAveragePool"])
def test_qlinear_pools(op):
    x = rand_q(rng, (1, 5, 7, 9), "uint8")
    # scale ratio 1.5 (many exact ties): the float sum must be in onnxruntime's order
    inits = {"sx": np.float32(0.03), "zx": np.array(120, "uint8"), "sy": np.float32(0.02),
             "zy": np.array(125, "uint8")}
    attrs = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]} \
        if op == "QLinearAveragePool" else {}
    model = _model(op, {"x": x}, inits, domain=MS, _order=["x", "sx", "zx", "sy", "zy"],
                   **attrs)
    _check(model, {"x": x})


def test_qlinear_concat():
    a, b = rand_q(rng, (1, 2, 3), "uint8"), rand_q(rng, (1, 4, 3), "uint8")
    inits = {"sy": np.float32(0.05), "zy": np.array(128, "uint8"), "sa": np.float32(0.02),
             "za": np.array(100, "uint8"), "sb": np.float32(0.05), "zb": np.array(128, "uint8")}
    model = _model("QLinearConcat", {"a": a, "b": b}, inits, domain=MS, axis=1,
                   _order=["sy", "zy", "a", "sa", "za", "b", "sb", "zb"])
    _check(model, {"a": a, "b": b})


@pytest.mark.parametrize("with_y", [True, False])
def test_qgemm(with_y):
    a = rand_q(rng, (3, 10), "uint8")
    b = _weights((6, 10), "int8", "uint8")
    inits = {"sa": _s(), "za": np.array(17, "uint8"), "b": b, "sb": _s(6),
             "zb": np.zeros(6, "int8"), "c": rng.integers(-500, 500, 6).astype("int32")}
    order = ["a", "sa", "za", "b", "sb", "zb", "c"]
    if with_y:
        inits.update(sy=np.float32(0.1), zy=np.array(100, "uint8"))
        order += ["sy", "zy"]
    model = _model("QGemm", {"a": a}, inits, ["uint8" if with_y else "float32"], domain=MS,
                   transB=1, _order=order)
    _check(model, {"a": a}, exact=with_y)


@pytest.mark.parametrize("dtype,shape,opset,axis", [("uint8", (2, 3, 17), 13, -1),
                                                    ("int8", (2, 5, 7), 13, 1),
                                                    ("uint8", (3, 4, 5), 12, 1)])
def test_qlinear_softmax(dtype, shape, opset, axis):
    x = rand_q(rng, shape, dtype)
    zy = np.array(0 if dtype == "uint8" else -128, dtype)
    inits = {"sx": np.float32(0.07), "zx": np.array(3, dtype), "sy": np.float32(1 / 256),
             "zy": zy}
    model = _model("QLinearSoftmax", {"x": x}, inits, domain=MS, opset=opset, axis=axis,
                   _order=["x", "sx", "zx", "sy", "zy"])
    _check(model, {"x": x})
