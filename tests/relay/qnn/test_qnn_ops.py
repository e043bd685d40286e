"""Every QNN operator against a numpy formula written here (onnxruntime's definitions): the
interpreter on the QNN op, the interpreter after CanonicalizeOps and the compiled module must all
give the same integers. Random data over the whole 8-bit ranges, asymmetric zero points,
per-tensor and per-channel parameters, uint8/int8 data and weights, padding, strides, dilation,
groups and awkward (prime, size-1) shapes."""

import numpy as np
import pytest
from _qnn_util import assert_all_equal, rand_q, run_three

from tvmpy import relay
from tvmpy.relay import qnn
from tvmpy.relay.expr import RelayTypeError
from tvmpy.topi.testing import group_conv2d_nchw_python

rng = np.random.default_rng(10)


def _sat(v, dtype):
    info = np.iinfo(np.dtype(dtype))
    return np.clip(v, info.min, info.max).astype(dtype)


def _zp(dtype, channels=None):
    lo, hi = (-20, 20) if dtype == "int8" else (100, 150)
    if channels is None:
        return np.int32(rng.integers(lo, hi))
    return rng.integers(lo, hi, channels).astype("int32")


CONV_CASES = [  # (data dtype, weight dtype, x shape, w shape, strides, padding, dilation, groups,
    #              per-channel weight params)
    ("uint8", "int8", (1, 3, 7, 11), (5, 3, 3, 3), 1, (1, 1), 1, 1, True),
    ("int8", "int8", (2, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 2, 0, 1), 1, 2, True),
    ("uint8", "uint8", (1, 5, 6, 13), (7, 5, 1, 1), 1, 0, 1, 1, False),
    ("int8", "uint8", (1, 6, 10, 10), (6, 1, 3, 3), 2, (1, 1), 1, 6, True),
    ("uint8", "int8", (1, 3, 11, 9), (4, 3, 3, 3), 1, (2, 2), 2, 1, False),
    ("int8", "int8", (1, 1, 1, 1), (3, 1, 1, 1), 1, 0, 1, 1, True),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[f"{c[0]}x{c[1]}-{i}" for i, c in
                                                    enumerate(CONV_CASES)])
def test_conv2d(case):
    dx, dw, xs, ws, strides, padding, dilation, groups, per_channel = case
    x, w = rand_q(rng, xs, dx), rand_q(rng, ws, dw)
    zx = _zp(dx)
    zw = _zp(dw, ws[0] if per_channel else None)
    sw = rng.uniform(0.01, 0.02, ws[0]).astype("float32") if per_channel else np.float32(0.01)
    xv = relay.var("x", shape=xs, dtype=dx)
    y = qnn.op.conv2d(xv, relay.const(w), relay.const(zx), relay.const(zw), relay.const(0.05),
                      relay.const(sw), kernel_size=ws[2:], strides=strides, padding=padding,
                      dilation=dilation, groups=groups)
    wz = w.astype(np.int64) - (zw.reshape(-1, 1, 1, 1) if per_channel else zw)
    pad = padding if isinstance(padding, tuple) else (padding,) * 2
    expect = group_conv2d_nchw_python(x.astype(np.int64) - zx, wz, strides, pad, dilation,
                                      groups).astype(np.int64).astype("int32")
    assert_all_equal(expect, *run_three(relay.Function([xv], y), x))


@pytest.mark.parametrize("dx,dw,per_channel", [("uint8", "int8", True), ("int8", "int8", False),
                                               ("uint8", "uint8", True), ("int8", "uint8", False)])
def test_dense(dx, dw, per_channel):
    m, k, n = 3, 37, 13
    x, w = rand_q(rng, (m, k), dx), rand_q(rng, (n, k), dw)
    zx, zw = _zp(dx), _zp(dw, n if per_channel else None)
    xv = relay.var("x", shape=(m, k), dtype=dx)
    y = qnn.op.dense(xv, relay.const(w), relay.const(zx), relay.const(zw), relay.const(0.1),
                     relay.const(np.full(n, 0.2, "float32") if per_channel else np.float32(0.2)))
    expect = ((x.astype(np.int64) - zx) @ (w.astype(np.int64) - np.reshape(zw, (-1, 1))).T)
    expect = expect.astype("int32")
    assert_all_equal(expect, *run_three(relay.Function([xv], y), x))


@pytest.mark.parametrize("dx,dy,transpose_b", [("uint8", "int8", True), ("int8", "uint8", False),
                                               ("int8", "int8", True)])
def test_batch_matmul(dx, dy, transpose_b):
    b, m, k, n = 2, 5, 19, 7
    x = rand_q(rng, (b, m, k), dx)
    y = rand_q(rng, (b, n, k) if transpose_b else (b, k, n), dy)
    zx, zy = _zp(dx), _zp(dy)
    xv = relay.var("x", shape=x.shape, dtype=dx)
    yv = relay.var("y", shape=y.shape, dtype=dy)  # both operands at run time (attention)
    out = qnn.op.batch_matmul(xv, yv, relay.const(zx), relay.const(zy), relay.const(0.1),
                              relay.const(0.2), transpose_b=transpose_b)
    ys = y.astype(np.int64) - zy
    expect = np.matmul(x.astype(np.int64) - zx, ys.transpose(0, 2, 1) if transpose_b else ys)
    assert_all_equal(expect.astype("int32"), *run_three(relay.Function([xv, yv], out), x, y))


@pytest.mark.parametrize("out_dtype,per_channel", [("uint8", False), ("int8", True),
                                                   ("int16", False), ("uint16", True)])
def test_quantize(out_dtype, per_channel):
    x = (rng.standard_normal((2, 3, 5)) * 4).astype("float32")
    x[0, 0, :4] = [0.5, 1.5, -0.5, -2.5]  # ties: half to even
    s = rng.uniform(0.01, 0.05, 3).astype("float32") if per_channel else np.float32(0.5)
    z = _zp(out_dtype if out_dtype.startswith("int") else "uint8", 3 if per_channel else None)
    xv = relay.var("x", shape=x.shape)
    y = qnn.op.quantize(xv, relay.const(s), relay.const(z), axis=1, out_dtype=out_dtype)
    sh = (1, 3, 1) if per_channel else ()
    expect = _sat(np.rint(x / np.reshape(s, sh)) + np.reshape(z, sh), out_dtype)
    assert_all_equal(expect, *run_three(relay.Function([xv], y), x))


@pytest.mark.parametrize("dtype,per_channel", [("uint8", True), ("int8", False),
                                               ("int32", False)])
def test_dequantize(dtype, per_channel):
    x = rand_q(rng, (4, 3), dtype)
    s = rng.uniform(0.01, 0.05, 3).astype("float32") if per_channel else np.float32(0.03)
    z = np.int32(0) if dtype == "int32" else _zp(dtype, 3 if per_channel else None)
    xv = relay.var("x", shape=x.shape, dtype=dtype)
    y = qnn.op.dequantize(xv, relay.const(s), relay.const(z), axis=1)
    expect = ((x.astype(np.int64) - z).astype("float32") * s).astype("float32")
    assert_all_equal(expect, *run_three(relay.Function([xv], y), x))


def _fixed_point_ref(d, mult, rounding):
    """Round(d * mult) with ties away from zero (TONEAREST) or toward +inf (UPWARD), exactly,
    on the Q31 multiplier."""
    mant, exp = np.frexp(mult.astype(np.float64))
    sig = np.rint(mant * 2.0**31).astype(np.int64)
    shift = 31 - exp
    from fractions import Fraction

    out = np.empty(d.shape, np.int64)
    for idx in np.ndindex(d.shape):
        c = idx[1] if np.ndim(sig) else ()
        v = Fraction(int(d[idx]) * int(np.reshape(sig, -1)[c if c != () else 0]),
                     2 ** int(np.reshape(shift, -1)[c if c != () else 0]))
        fl = v.numerator // v.denominator
        frac = v - fl
        if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and (rounding == "UPWARD" or v > 0)):
            fl += 1
        out[idx] = fl
    return out


@pytest.mark.parametrize("compute_dtype,rounding", [("float32", "TONEAREST"),
                                                    ("int64", "TONEAREST"), ("int64", "UPWARD")])
@pytest.mark.parametrize("per_channel", [False, True])
def test_requantize(compute_dtype, rounding, per_channel):
    acc = rng.integers(-200000, 200000, (3, 4)).astype("int32")
    acc[0, :4] = [-8, 8, -24, 24]  # exact ties at multiplier 1/16
    s_in = np.array([0.25, 0.5, 1.0, 2.0], "float32") * 0.25 if per_channel else np.float32(0.25)
    s_out, z_in, z_out = np.float32(4.0), np.int32(0), np.int32(-3)
    av = relay.var("a", shape=acc.shape, dtype="int32")
    y = qnn.op.requantize(av, relay.const(s_in), relay.const(z_in), relay.const(s_out),
                          relay.const(z_out), axis=1, rounding=rounding,
                          compute_dtype=compute_dtype, out_dtype="int8")
    mult = (np.asarray(s_in, "float32") / s_out).reshape((1, -1) if per_channel else ())
    d = acc.astype(np.int64) - z_in
    if compute_dtype == "float32":
        r = np.rint(d.astype("float32") * mult)
    else:
        r = _fixed_point_ref(d, mult.reshape(-1) if per_channel else mult, rounding)
    assert_all_equal(_sat(r + z_out, "int8"), *run_three(relay.Function([av], y), acc))


def test_requantize_fixed_point_rounding_modes_differ_on_negative_ties():
    acc = np.array([[-8, -24, 8, 24]], "int32")  # times 1/16: -0.5, -1.5, 0.5, 1.5
    av = relay.var("a", shape=acc.shape, dtype="int32")
    outs = {}
    for rounding in ("TONEAREST", "UPWARD"):
        y = qnn.op.requantize(av, relay.const(0.25), relay.const(0, "int32"), relay.const(4.0),
                              relay.const(0, "int32"), rounding=rounding, compute_dtype="int64")
        outs[rounding] = run_three(relay.Function([av], y), acc)[2]
    np.testing.assert_array_equal(outs["TONEAREST"], [[-1, -2, 1, 2]])
    np.testing.assert_array_equal(outs["UPWARD"], [[0, -1, 1, 2]])


def _params(dtype, k):
    return [(np.float32(rng.uniform(0.02, 0.08)), _zp(dtype)) for _ in range(k)]


@pytest.mark.parametrize("name", ["add", "mul", "subtract"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_binary(name, dtype):
    a, b = rand_q(rng, (2, 3, 5), dtype), rand_q(rng, (3, 1), dtype)  # broadcasting
    (sa, za), (sb, zb), (sc, zc) = _params(dtype, 3)
    av = relay.var("a", shape=a.shape, dtype=dtype)
    bv = relay.var("b", shape=b.shape, dtype=dtype)
    fn = getattr(qnn.op, name)
    c = relay.const
    y = fn(av, bv, c(sa), c(za), c(sb), c(zb), c(sc), c(zc))
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    if name == "add":  # ORT's formula: float32, fixed part first, on the raw values
        ra, rb = sa / sc, sb / sc
        v = (np.float32(zc) - (ra * np.float32(za) + rb * np.float32(zb)) + fa * ra) + fb * rb
        expect = _sat(np.rint(v), dtype)
    elif name == "mul":
        prod = (a.astype(np.int64) - za) * (b.astype(np.int64) - zb)
        expect = _sat(np.rint(prod.astype(np.float32) * (sa * sb / sc)) + zc, dtype)
    else:
        v = (fa - np.float32(za)) * sa - (fb - np.float32(zb)) * sb
        expect = _sat(np.rint(v / sc) + zc, dtype)
    assert_all_equal(expect, *run_three(relay.Function([av, bv], y), a, b))


def test_concatenate_requantizes_differing_inputs():
    a, b = rand_q(rng, (1, 2, 3), "uint8"), rand_q(rng, (1, 5, 3), "uint8")
    (sa, za), (sc, zc) = _params("uint8", 2)
    av = relay.var("a", shape=a.shape, dtype="uint8")
    bv = relay.var("b", shape=b.shape, dtype="uint8")
    c = relay.const
    y = qnn.op.concatenate([av, bv], [c(sa), c(sc)], [c(za), c(zc)], c(sc), c(zc), axis=1)
    ra = _sat(np.rint(((a.astype(np.int32) - za).astype(np.float32) * sa) / sc) + zc, "uint8")
    expect = np.concatenate([ra, b], axis=1)  # b already has the output's parameters
    assert_all_equal(expect, *run_three(relay.Function([av, bv], y), a, b))


@pytest.mark.parametrize("name", ["sigmoid", "leaky_relu", "avg_pool2d", "global_avg_pool2d"])
def test_unary(name):
    dtype = "int8" if name == "leaky_relu" else "uint8"
    x = rand_q(rng, (1, 3, 7, 5), dtype)
    (s, z), (so, zo) = _params(dtype, 2)
    if name == "sigmoid":
        so, zo = np.float32(1 / 256), np.int32(0)
    xv = relay.var("x", shape=x.shape, dtype=dtype)
    c = relay.const
    f = (x.astype(np.int32) - z).astype(np.float32) * s
    if name == "sigmoid":
        y = qnn.op.sigmoid(xv, c(s), c(z), c(so), c(zo))
        v = 1 / (1 + np.exp(-f))
    elif name == "leaky_relu":
        y = qnn.op.leaky_relu(xv, 0.125, c(s), c(z), c(so), c(zo))
        v = np.where(f >= 0, f, f * np.float32(0.125))
    elif name == "avg_pool2d":
        y = qnn.op.avg_pool2d(xv, c(s), c(z), c(so), c(zo), (2, 3), strides=(2, 1))
        acc = np.zeros((1, 3, 3, 3), np.float32)  # float32 sums in ORT's order: rows, columns
        for dy in range(2):
            for dx in range(3):
                acc = acc + f[:, :, dy:dy + 5:2, dx:dx + 3]
        v = acc / np.float32(6)
    else:
        y = qnn.op.global_avg_pool2d(xv, c(s), c(z), c(so), c(zo))
        acc = x.astype(np.int64).sum(axis=(2, 3), keepdims=True) - z * 35
        expect = _sat(np.rint(acc.astype(np.float32) * (s / (so * np.float32(35)))) + zo, dtype)
    if name == "avg_pool2d":  # ORT's pool quantization adds the zero point before rounding
        expect = _sat(np.rint(v.astype(np.float32) / so + np.float32(zo)), dtype)
    elif name != "global_avg_pool2d":
        expect = _sat(np.rint(v.astype(np.float32) / so) + zo, dtype)
    got = run_three(relay.Function([xv], y), x)
    if name == "sigmoid":  # exp differs by an ulp between numpy and the compiled code
        for g in got:
            assert np.abs(g.astype(int) - expect).max() <= 1
    else:
        assert_all_equal(expect, *got)


@pytest.mark.parametrize("build,match", [
    (lambda: qnn.op.quantize(relay.var("x", shape=(2, 3), dtype="int32"), relay.const(0.1),
                             relay.const(0, "int32")), "data must be float"),
    (lambda: qnn.op.dequantize(relay.var("x", shape=(2, 3)), relay.const(0.1),
                               relay.const(0, "int32")), "must be int8/uint8"),
    (lambda: qnn.op.dequantize(relay.var("x", shape=(2, 3), dtype="int8"),
                               relay.const(np.ones(4, "float32")), relay.const(0, "int32"),
                               axis=1), "has 4 values but axis 1"),
    (lambda: qnn.op.quantize(relay.var("x", shape=(2, 3)), relay.const(1, "int32"),
                             relay.const(0, "int32")), "must be a float tensor"),
    (lambda: qnn.op.conv2d(relay.var("x", shape=(1, 3, 5, 5), dtype="int16"),
                           relay.const(np.ones((2, 3, 3, 3), "int8")), relay.const(0, "int32"),
                           relay.const(0, "int32"), relay.const(0.1), relay.const(0.1)),
     "must be int8/uint8"),
    (lambda: qnn.op.dense(relay.var("x", shape=(2, 4), dtype="uint8"),
                          relay.const(np.ones((3, 5), "int8")), relay.const(0, "int32"),
                          relay.const(0, "int32"), relay.const(0.1), relay.const(0.1)),
     "input features"),
    (lambda: qnn.op.requantize(relay.var("x", shape=(2,), dtype="int32"), relay.const(0.1),
                               relay.const(0, "int32"), relay.const(0.1),
                               relay.const(0, "int32"), rounding="DOWN"), "rounding"),
])
def test_bad_inputs_raise_type_errors(build, match):
    with pytest.raises(RelayTypeError, match=match):
        relay.transform.infer_type(build())


def test_printing_is_readable():
    xv = relay.var("x", shape=(1, 4), dtype="uint8")
    y = qnn.op.dense(xv, relay.const(np.ones((2, 4), "int8")), relay.const(3, "int32"),
                     relay.const(0, "int32"), relay.const(0.5), relay.const(0.25), units=2)
    text = str(relay.Function([xv], y))
    assert "qnn.dense(%x" in text and "units=2" in text


def test_kernel_friendly_form_uint8_data_int8_weight():
    """int8 data is shifted to uint8 and uint8 weights to int8 before nn.conv2d / nn.dense."""
    import tvmpy as tvm
    from tvmpy.relay.qnn.transform import CanonicalizeOps

    for dx, dw in [("int8", "uint8"), ("int8", "int8"), ("uint8", "uint8")]:
        xv = relay.var("x", shape=(1, 3, 5, 5), dtype=dx)
        y = qnn.op.conv2d(xv, relay.const(np.ones((2, 3, 3, 3), dw)), relay.const(1, "int32"),
                          relay.const(2, "int32"), relay.const(0.1), relay.const(0.1),
                          padding=1, kernel_size=3)
        mod = CanonicalizeOps()(tvm.IRModule.from_expr(relay.Function([xv], y)))
        calls = []
        relay.post_order_visit(mod["main"].body, calls.append)
        convs = [e for e in calls if isinstance(e, relay.Call)
                 and getattr(e.op, "name", "") == "nn.conv2d" and e.attrs.out_dtype == "int32"
                 and e.args[1].checked_type.dtype != "int32"]
        assert len(convs) == 1
        assert convs[0].args[0].checked_type.dtype == "uint8"
        assert convs[0].args[1].checked_type.dtype == "int8"
        pad = convs[0].args[0]
        assert pad.op.name == "nn.pad" and pad.attrs.pad_value == (129.0 if dx == "int8" else 1.0)


def test_quantize_to_int32_saturates_at_both_ends():
    """2**31 - 1 is no float32: values from 2**31 on must still give INT32_MAX."""
    x = np.array([1e6, -1e6, 3.5, 2147.48352], "float32")
    xv = relay.var("x", shape=x.shape)
    y = qnn.op.quantize(xv, relay.const(1e-6), relay.const(0, "int32"), out_dtype="int32")
    expect = np.array([2**31 - 1, -(2**31), 3500000, np.rint(np.float32(2147.48352) /
                                                              np.float32(1e-6))], "int64")
    expect = np.clip(expect, -(2**31), 2**31 - 1).astype("int32")
    assert_all_equal(expect, *run_three(relay.Function([xv], y), x))
