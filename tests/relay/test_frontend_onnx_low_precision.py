"""ONNX's low-precision element types through from_onnx, compiled (graph executor) and on
relay's interpreter (debug): bfloat16, float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), float4 (e2m1;
onnxruntime has no CPU Cast for it: reference only), int4/uint4, int2/uint2 in Cast, CastLike, QuantizeLinear (per tensor, per axis, blocked; saturate) and
DequantizeLinear, packed 4-/2-bit initializers, and other operators on bfloat16.

onnxruntime's Python API cannot feed or return these types, but runs them inside a model:
models with float32 inputs and outputs (the low-precision tensors in between) are compared with
onnxruntime; models whose outputs are low-precision with onnx's ReferenceEvaluator (which uses
ml_dtypes)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tvmpy.contrib.onnx_backend import TvmpyBackend  # noqa: E402

RNG = np.random.default_rng(11)
FLOAT8 = ["FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"]
SUBBYTE = ["INT4", "UINT4", "INT2", "UINT2"]
SHAPE = [3, 5, 7]  # odd element count: a packed 4-bit initializer ends in half a byte
EXECUTORS = ["graph", "debug"]


def _np(t):
    return np.dtype(helper.tensor_dtype_to_np_dtype(getattr(T, t) if isinstance(t, str) else t))


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _opset(t):
    return 25 if t in ("INT2", "UINT2") else 23 if t == "FLOAT4E2M1" else 21


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, getattr(T, t) if isinstance(t, str) else t, shape)


def _ours(model, feeds, executor):
    rep = TvmpyBackend.prepare(model, "CPU", executor=executor)
    return [np.asarray(o) for o in rep.run(list(feeds.values()))]


def _assert_same(got, want):
    """Equal values, NaN where NaN, same dtype (float8/bfloat16 compared as float32)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    g, w = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(g[~np.isnan(g)], w[~np.isnan(w)])


def _vs_ort(model, feeds, executor):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, w in zip(_ours(model, feeds, executor), sess.run(None, feeds)):
        _assert_same(g, w)


def _vs_reference(model, feeds, executor):
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(_ours(model, feeds, executor), want):
        _assert_same(g, w)


def _floats(scale):
    """Random values over the type's range and beyond, with NaN, +-inf, +-0 and ties."""
    x = (RNG.standard_normal(SHAPE) * scale).astype(np.float32)
    flat = x.reshape(-1)
    flat[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e9, 1e9]
    return x


_SCALE = {"BFLOAT16": 1e3, "FLOAT8E4M3FN": 300, "FLOAT8E4M3FNUZ": 150, "FLOAT8E5M2": 4e4,
          "FLOAT8E5M2FNUZ": 4e4, "FLOAT4E2M1": 5}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("t", ["BFLOAT16"] + FLOAT8)
def test_cast_float_round_trip_vs_onnxruntime(t, saturate, executor):
    attrs = {"saturate": saturate} if t in FLOAT8 else {}
    m = _model([helper.make_node("Cast", ["x"], ["z"], to=getattr(T, t), **attrs),
                helper.make_node("Cast", ["z"], ["y"], to=T.FLOAT)],
               [_vi("x", "FLOAT", SHAPE)], [_vi("y", "FLOAT", SHAPE)])
    x = _floats(_SCALE[t])
    if t in FLOAT8 and not saturate:
        # onnxruntime 1.2x differs from ONNX's table (and its reference) for finite values
        # beyond the largest float8: e4m3fn 480 -> 448, e5m2 61440 -> NaN (ONNX: NaN, inf);
        # test_cast_outputs_and_inputs_vs_reference covers them
        m8 = float(ml_dtypes.finfo(_np(t)).max)
        x[np.isfinite(x) & (np.abs(x) > m8)] = 1.5
    _vs_ort(m, {"x": x}, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("t", SUBBYTE)
def test_cast_int_round_trip_vs_onnxruntime(t, executor):
    lo, hi = (int(v) for v in (ml_dtypes.iinfo(_np(t)).min, ml_dtypes.iinfo(_np(t)).max))
    # integer values in range: onnxruntime rounds a fraction (2.5 -> 3) where ONNX's reference
    # (ml_dtypes) truncates (2.5 -> 2), as tvmpy; the reference test covers fractions
    x = RNG.integers(lo, hi + 1, SHAPE).astype(np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["z"], to=getattr(T, t)),
                helper.make_node("Cast", ["z"], ["y"], to=T.FLOAT)],
               [_vi("x", "FLOAT", SHAPE)], [_vi("y", "FLOAT", SHAPE)], opset=_opset(t))
    _vs_ort(m, {"x": x}, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("t", ["BFLOAT16"] + FLOAT8 + ["FLOAT4E2M1"] + SUBBYTE)
def test_cast_outputs_and_inputs_vs_reference(t, saturate, executor):
    """float16 -> t -> float16 (the low-precision tensor itself is an output; CastLike for the
    second cast)."""
    if saturate == 0 and t not in FLOAT8:
        pytest.skip("saturate applies to float8 only")
    with np.errstate(over="ignore"):
        x = _floats(_SCALE.get(t, 3.0)).astype(np.float16)
    if t in SUBBYTE:
        x = np.abs(x) if t.startswith("U") else x
        # in the type's range: a float beyond it has no defined integer (ml_dtypes >= 0.7
        # gives 0 with "invalid value", C's conversion is undefined)
        info = ml_dtypes.iinfo(_np(t))
        x = np.nan_to_num(np.clip(x, int(info.min), int(info.max) + 0.875), nan=0.0,
                          posinf=0.0, neginf=0.0).astype(np.float16)
    like = numpy_helper.from_array(np.zeros(1, np.float16), "like")
    attrs = {"saturate": saturate} if t in FLOAT8 else {}
    m = _model([helper.make_node("Cast", ["x"], ["z"], to=getattr(T, t), **attrs),
                helper.make_node("CastLike", ["z", "like"], ["y"])],
               [_vi("x", "FLOAT16", SHAPE)], [_vi("z", t, SHAPE), _vi("y", "FLOAT16", SHAPE)],
               [like], opset=_opset(t))
    _vs_reference(m, {"x": x}, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("t", FLOAT8 + SUBBYTE)
def test_quantize_dequantize_per_axis_vs_onnxruntime(t, executor):
    x = _floats(3.0)
    x.reshape(-1)[:3] = [0.0, 1.0, -1.0]  # onnxruntime's int QDQ has no NaN/inf semantics
    scale = RNG.uniform(0.02, 0.5, SHAPE[1]).astype(np.float32)
    zp = np.zeros(SHAPE[1], np.float32) if t in FLOAT8 else \
        RNG.integers(0, 2, SHAPE[1]).astype(np.float32)
    inits = [numpy_helper.from_array(scale, "s"),
             numpy_helper.from_array(zp.astype(_np(t)), "zp")]
    m = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=1),
                helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=1)],
               [_vi("x", "FLOAT", SHAPE)], [_vi("y", "FLOAT", SHAPE)], inits, _opset(t))
    _vs_ort(m, {"x": x}, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("t", ["INT4", "UINT4"])
def test_blocked_quantization_int4_vs_onnxruntime(t, executor):
    """block_size 3 along axis 2 (7 = 3 + 3 + 1: a partial last block)."""
    x = (RNG.standard_normal(SHAPE) * 2).astype(np.float32)
    blocks = [SHAPE[0], SHAPE[1], 3]
    scale = RNG.uniform(0.1, 0.6, blocks).astype(np.float32)
    zp = RNG.integers(0, 3, blocks).astype(np.float32).astype(_np(t))
    inits = [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "zp")]
    m = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=2,
                                 block_size=3),
                helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=2,
                                 block_size=3)],
               [_vi("x", "FLOAT", SHAPE)], [_vi("y", "FLOAT", SHAPE)], inits)
    _vs_ort(m, {"x": x}, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("t", SUBBYTE + ["FLOAT8E4M3FN", "FLOAT8E5M2"])
def test_packed_initializer_dequantized_vs_onnxruntime(t, executor):
    """A weight stored as a (packed, for 4/2 bits) initializer of odd size, dequantized."""
    info = ml_dtypes.iinfo(_np(t)) if t in SUBBYTE else None
    if info is not None:
        w = RNG.integers(int(info.min), int(info.max) + 1, SHAPE).astype(np.float32)
    else:
        w = _floats(100.0)
        w.reshape(-1)[:3] = [1.0, -2.0, 0.5]
    w = w.astype(_np(t))
    init = numpy_helper.from_array(w, "w")
    assert t not in SUBBYTE or len(init.raw_data) < w.size  # packed
    s = numpy_helper.from_array(np.array(0.25, np.float32), "s")
    m = _model([helper.make_node("DequantizeLinear", ["w", "s"], ["d"]),
                helper.make_node("Add", ["d", "x"], ["y"])],
               [_vi("x", "FLOAT", SHAPE)], [_vi("y", "FLOAT", SHAPE)], [init, s], _opset(t))
    _vs_ort(m, {"x": _floats(1.0)}, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("t", FLOAT8 + ["FLOAT4E2M1"])
def test_quantize_float8_output_vs_reference(t, saturate, executor):
    if saturate == 0 and t == "FLOAT4E2M1":
        pytest.skip("float4 has no inf/NaN: it always saturates")
    x = _floats(_SCALE[t])
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    zp = numpy_helper.from_array(np.zeros(1, np.float32).astype(_np(t)).reshape(()), "zp")
    m = _model([helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["y"],
                                 saturate=saturate)],
               [_vi("x", "FLOAT", SHAPE)], [_vi("y", t, SHAPE)], [scale, zp], _opset(t))
    _vs_reference(m, {"x": x}, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bfloat16_graph_computes_in_float32(executor):
    """Operators on bfloat16 tensors (no bfloat16 kernels in onnxruntime's CPU provider):
    each computes in float32 and rounds its output, as the reference does."""
    x = (RNG.standard_normal([4, 6]) * 3).astype(ml_dtypes.bfloat16)
    w = (RNG.standard_normal([6, 5])).astype(ml_dtypes.bfloat16)
    m = _model([helper.make_node("MatMul", ["x", "w"], ["a"]),
                helper.make_node("Relu", ["a"], ["r"]),
                helper.make_node("Mul", ["r", "r"], ["y"]),
                helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0)],
               [_vi("x", "BFLOAT16", [4, 6])], [_vi("y", "BFLOAT16", [4, 5]),
                                              _vi("s", "BFLOAT16", [])],
               [numpy_helper.from_array(w, "w")])
    ours = _ours(m, {"x": x}, executor)
    want = ReferenceEvaluator(m).run(None, {"x": x})
    for g, r in zip(ours, want):
        assert g.dtype == np.dtype(ml_dtypes.bfloat16)
        # the reference multiplies/sums in bfloat16 numpy (rounding each step): ~1e-2 apart
        np.testing.assert_allclose(g.astype(np.float32), r.astype(np.float32), rtol=3e-2,
                                   atol=3e-2)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("src", ["INT32", "FLOAT8E5M2", "BFLOAT16", "INT4"])
def test_cast_to_float8_from_other_types_vs_reference(src, saturate, executor):
    """Integers, wider float8 and bfloat16 to e4m3fn: saturate clamps them too (ONNX's
    reference clips every source type)."""
    vals = {"INT32": [1, -3, 447, 465, 1000, -100000, 70000, 2**30],
            "FLOAT8E5M2": [1, 500, -61440, 57344, np.inf, np.nan, -0.0, 0.001],
            "BFLOAT16": [1.5, 1e30, -3e38, np.nan, 449, 465, -2.0**-10, 2.0**-9],
            "INT4": [-8, -1, 0, 3, 7, 5, -2, 6]}[src]
    x = np.array(vals, np.float64).astype(_np(src))
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT8E4M3FN, saturate=saturate)],
               [_vi("x", src, [x.size])], [_vi("y", "FLOAT8E4M3FN", [x.size])])
    with np.errstate(all="ignore"):
        _vs_reference(m, {"x": x}, executor)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
def test_cast_to_e8m0_round_modes_vs_reference(round_mode, saturate, executor):
    """FLOAT8E8M0 (power-of-two scales): Cast's round_mode and saturate as
    onnx.numpy_helper.to_float8e8m0, on random float32 bit patterns (denormals, NaN, inf,
    negative values: the sign is ignored) and the rounding edges."""
    bits = RNG.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0, 0x80000000, 0x400000, 0x400001, 0x3FFFFF, 1, 0x800000, 0x3FC00000,
                      0x3FBFFFFF, 0x3FC00001, 0x7F000000, 0x7F000001, 0x7F400000, 0x7F7FFFFF,
                      0x7F800000, 0x7FC00000, 0xBFC00000], np.uint32)
    x = np.concatenate([bits, edges]).view(np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT8E8M0, saturate=saturate,
                                 round_mode=round_mode)],
               [_vi("x", "FLOAT", [x.size])], [_vi("y", "FLOAT8E8M0", [x.size])], opset=24)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    with np.errstate(all="ignore"):
        got = _ours(m, {"x": x}, executor)[0]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
