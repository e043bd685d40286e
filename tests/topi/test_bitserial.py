"""Bit-serial operators (topi.nn.bitserial, relay nn.bitpack / nn.bitserial_dense /
nn.bitserial_conv2d) against numpy references written from the integer arithmetic, on every
pack word size, unipolar and not, 1-3 bit operands, ragged channel counts (not a multiple of
the word), strides and padding, generic and x86 schedules, and relay builds at opt 0 and 3
(opt 3 packs a constant weight at compile time)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te, topi
from tvmpy.contrib import graph_executor
from tvmpy.topi.testing import (
    bitpack_python,
    bitserial_conv2d_nchw_python,
    bitserial_conv2d_nhwc_python,
    bitserial_dense_python,
    bitunpack_python,
)
from tvmpy.topi.x86 import bitserial as x86

RNG = np.random.default_rng(11)


def _ints(bits: int, shape: tuple, dtype: str = "int32", full: bool = False) -> np.ndarray:
    """Random values of ``bits`` bits; ``full``: the whole dtype range (only the low bits count)."""
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max + 1) if full else (0, 1 << bits)
    return RNG.integers(lo, hi, shape).astype(dtype)


def _run(s, args, inputs, out_shape, out_dtype):
    f = tvm.build(s, args, "llvm")
    out = tvm.nd.empty(out_shape, out_dtype)
    f(*[tvm.nd.array(x) for x in inputs], out)
    return out.numpy()


@pytest.mark.parametrize("pack", ["uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("shape,pack_axis,bit_axis", [((3, 37, 5), 1, 2), ((70,), 0, 1),
                                                      ((2, 5, 64), 2, 0), ((4, 9), -1, 2)])
def test_bitpack_matches_numpy_and_round_trips(pack, shape, pack_axis, bit_axis):
    x = _ints(3, shape, "int16", full=True)  # high bits set too: only the low 3 are packed
    X = te.placeholder(shape, "int16", name="x")
    P = topi.nn.bitpack(X, 3, pack_axis, bit_axis, pack)
    s = x86.schedule_bitpack([P])
    out = _run(s, [X, P], [x], [int(d) for d in P.shape], pack)
    ref = bitpack_python(x, 3, pack_axis, bit_axis, pack)
    np.testing.assert_array_equal(out, ref)
    ax = pack_axis % len(shape)
    np.testing.assert_array_equal(bitunpack_python(out, ax, bit_axis, shape[ax]), x & 7)


DENSE_CASES = [  # m, n, k, data_bits, weight_bits, unipolar, pack
    (3, 10, 37, 2, 1, True, "uint32"),
    (1, 17, 130, 1, 2, False, "uint64"),
    (8, 33, 64, 2, 2, True, "uint8"),
    (5, 1, 1, 3, 3, False, "uint16"),
    (2, 16, 257, 1, 1, True, "uint64"),
]


@pytest.mark.parametrize("case", DENSE_CASES)
@pytest.mark.parametrize("sched", ["generic", "x86"])
def test_bitserial_dense(case, sched):
    m, n, k, db, wb, uni, pack = case
    a, w = _ints(db, (m, k), full=True), _ints(wb, (n, k), full=True)
    A, W = te.placeholder(a.shape, "int32"), te.placeholder(w.shape, "int32")
    C = topi.nn.bitserial_dense(A, W, db, wb, pack, "int32", uni)
    s = te.create_schedule(C.op) if sched == "generic" else x86.schedule_bitserial_dense([C])
    out = _run(s, [A, W, C], [a, w], (m, n), "int32")
    np.testing.assert_array_equal(out, bitserial_dense_python(a, w, db, wb, "int32", uni))


CONV_CASES = [  # c, o, h, k, stride, pad, act_bits, weight_bits, unipolar, pack
    (3, 4, 9, 3, 1, 1, 2, 1, True, "uint32"),
    (40, 5, 7, 3, 2, 1, 1, 2, False, "uint8"),
    (70, 17, 6, 1, 1, 0, 2, 2, True, "uint64"),
    (1, 3, 13, 5, 2, 2, 3, 1, False, "uint16"),
    (64, 32, 10, 3, 1, 1, 1, 1, True, "uint32"),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("sched", ["generic", "x86"])
def test_bitserial_conv2d(case, layout, sched):
    c, o, h, k, st, pd, ab, wb, uni, pack = case
    a = _ints(ab, (2, c, h, h + 2), "int8", full=True)
    w = _ints(wb, (o, c, k, k), "int8", full=True)
    ref = bitserial_conv2d_nchw_python(a, w, st, pd, ab, wb, "int16", uni)
    if layout == "NHWC":
        a, w, ref = a.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy(), \
            ref.transpose(0, 2, 3, 1)
        np.testing.assert_array_equal(
            bitserial_conv2d_nhwc_python(a, w, st, pd, ab, wb, "int16", uni), ref)
    A, W = te.placeholder(a.shape, "int8"), te.placeholder(w.shape, "int8")
    fn = topi.nn.bitserial_conv2d_nchw if layout == "NCHW" else topi.nn.bitserial_conv2d_nhwc
    C = fn(A, W, st, pd, ab, wb, pack, "int16", uni)
    if sched == "generic":
        s = te.create_schedule(C.op)
    else:
        s = (x86.schedule_bitserial_conv2d_nchw if layout == "NCHW"
             else x86.schedule_bitserial_conv2d_nhwc)([C])
    out = _run(s, [A, W, C], [a, w], ref.shape, "int16")
    np.testing.assert_array_equal(out, ref)


def test_prepacked_weight_gives_the_same_result():
    a, w = _ints(2, (4, 45)), _ints(1, (6, 45))
    A = te.placeholder(a.shape, "int32")
    wq = bitpack_python(w, 1, 1, 1, "uint32")
    WQ = te.placeholder(wq.shape, "uint32")
    C = topi.nn.bitserial_dense(A, WQ, 2, 1, "uint32", "int32")
    out = _run(x86.schedule_bitserial_dense([C]), [A, WQ, C], [a, wq], (4, 6), "int32")
    np.testing.assert_array_equal(out, bitserial_dense_python(a, w, 2, 1, "int32"))


# ---- relay -------------------------------------------------------------------------------------
def _relay_run(func, inputs, opt):
    mod = tvm.IRModule.from_expr(func)
    with tvm.transform.PassContext(opt_level=opt):
        lib = relay.build(mod, target="llvm", params={})
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return m.get_output(0).numpy(), lib


@pytest.mark.parametrize("const_weight", [True, False])
@pytest.mark.parametrize("opt", [0, 3])
def test_relay_bitserial_dense_with_epilogue(const_weight, opt):
    a, w = _ints(2, (3, 100), "int8"), _ints(1, (21, 100), "int8")
    x = relay.var("x", shape=a.shape, dtype="int8")
    wv = relay.const(w) if const_weight else relay.var("w", shape=w.shape, dtype="int8")
    y = relay.nn.bitserial_dense(x, wv, data_bits=2, weight_bits=1, pack_dtype="uint64",
                                 out_dtype="int32")
    y = relay.nn.relu(relay.add(y, relay.const(np.int32(5))))
    func = relay.Function(relay.analysis.free_vars(y), y)
    inputs = {"x": a} if const_weight else {"x": a, "w": w}
    out, lib = _relay_run(func, inputs, opt)
    ref = np.maximum(bitserial_dense_python(a, w, 2, 1, "int32") + 5, 0)
    np.testing.assert_array_equal(out, ref)
    ev = relay.create_executor("debug", mod=tvm.IRModule.from_expr(func)).evaluate()
    np.testing.assert_array_equal(ev(*inputs.values()), ref)
    if const_weight and opt == 3:  # packed at compile time: a uint64 [21, 1, 2] parameter
        shapes = json.loads(lib.get_graph_json())["attrs"]["shape"][1]
        assert [21, 1, 2] in shapes, shapes
        assert all(p.dtype == "uint64" for p in lib.get_params().values())


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("opt", [0, 3])
def test_relay_bitserial_conv2d(layout, opt):
    a, w = _ints(2, (1, 35, 12, 9), "uint8"), _ints(2, (8, 35, 3, 3), "uint8")
    ref = bitserial_conv2d_nchw_python(a, w, (2, 1), (1, 0, 2, 1), 2, 2, "int16", False)
    kl = "OIHW"
    if layout == "NHWC":
        a, w, ref, kl = a.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy(), \
            ref.transpose(0, 2, 3, 1), "HWIO"
    x = relay.var("x", shape=a.shape, dtype="uint8")
    y = relay.nn.bitserial_conv2d(x, relay.const(w), strides=(2, 1), padding=(1, 0, 2, 1),
                                  activation_bits=2, weight_bits=2, data_layout=layout,
                                  kernel_layout=kl, unipolar=False)
    out, _ = _relay_run(relay.Function([x], y), {"x": a}, opt)
    np.testing.assert_array_equal(out, ref)


def test_relay_explicit_bitpack_of_a_weight():
    """A weight packed by the user with relay.nn.bitpack (the op's own axes) is taken as packed."""
    a, w = _ints(1, (2, 7, 7, 33), "uint8"), _ints(1, (3, 3, 33, 4), "uint8")
    x = relay.var("x", shape=a.shape, dtype="uint8")
    wq = relay.nn.bitpack(relay.const(w), bits=1, pack_axis=2, bit_axis=4, pack_type="uint32")
    y = relay.nn.bitserial_conv2d(x, wq, padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO")
    out, _ = _relay_run(relay.Function([x], y), {"x": a}, 3)
    np.testing.assert_array_equal(out, bitserial_conv2d_nhwc_python(a, w, 1, 1, 1, 1, "int16"))


def _type_error(expr):
    with pytest.raises(Exception) as e:
        relay.transform.InferType()(tvm.IRModule.from_expr(
            relay.Function(relay.analysis.free_vars(expr), expr)))
    return str(e.value)


def test_bad_input_gives_clear_errors():
    x = relay.var("x", shape=(2, 40), dtype="int8")
    assert "data_bits must be an int in 1..8" in _type_error(
        relay.nn.bitserial_dense(x, relay.var("w", shape=(3, 40), dtype="int8"), data_bits=9))
    assert "pack_dtype must be one of" in _type_error(
        relay.nn.bitserial_dense(x, relay.var("w", shape=(3, 40), dtype="int8"),
                                 pack_dtype="float32"))
    assert "input features" in _type_error(
        relay.nn.bitserial_dense(x, relay.var("w", shape=(3, 41), dtype="int8")))
    xf = relay.var("xf", shape=(2, 40), dtype="float32")
    assert "must be integers" in _type_error(
        relay.nn.bitserial_dense(xf, relay.var("w", shape=(3, 40), dtype="int8")))
    xc = relay.var("xc", shape=(1, 5, 8, 8), dtype="uint8")
    assert "needs kernel_layout OIHW" in _type_error(
        relay.nn.bitserial_conv2d(xc, relay.var("w", shape=(3, 3, 5, 4), dtype="uint8"),
                                  kernel_layout="HWIO"))
    assert "has 5 channels" in _type_error(
        relay.nn.bitserial_conv2d(xc, relay.var("w", shape=(4, 6, 3, 3), dtype="uint8")))
    assert "packed weight" in _type_error(
        relay.nn.bitserial_dense(x, relay.var("w", shape=(3, 2, 2), dtype="uint32")))
    A = te.placeholder((2, 40), "int32")
    with pytest.raises(ValueError, match="weight_bits must be an int in 1..8"):
        topi.nn.bitserial_dense(A, te.placeholder((3, 40), "int32"), 1, 0)
    with pytest.raises(ValueError, match="reduction extents differ"):
        topi.nn.bitserial_dense(A, te.placeholder((3, 70), "int32"), 1, 1)
    with pytest.raises(ValueError, match="data must be integers"):
        topi.nn.bitpack(te.placeholder((4,), "float32"), 1, 0, 1, "uint8")
