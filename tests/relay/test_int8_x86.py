"""relay int8 on x86: uint8 x int8 -> int32 conv2d / dense / batch_matmul (what QNN
canonicalization emits) followed by a requantize chain (cast, multiply, round, add, clip, cast)
build to the int8 kernels of this CPU's best instruction set (VNNI where it has it;
AlterOpLayout's packed layouts at opt_level 3, the in-kernel packing otherwise), with the
requantize fused into the anchor, exactly equal to numpy int64 references; other integer
combinations take the generic path, also exact. Only code for this machine runs."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tests.topi.int8_util import (
    HOST,
    INTRINSIC,
    IR_TARGETS,
    host_isa,
    isa_target,
)
from tests.topi.int8_util import build as _build
from tests.topi.int8_util import requant as _requant
from tests.topi.int8_util import requant_np as _requant_np
from tests.topi.int8_util import run as _run
from tests.topi.int8_util import s8 as _s8
from tests.topi.int8_util import u8 as _u8
from tvmpy import relay
from tvmpy.topi import testing

RNG = np.random.default_rng(11)


def _uses_host_kernel(ll: str) -> bool:
    """The LLVM IR calls the int8 micro-kernel of this CPU's instruction set (and no other)."""
    want = INTRINSIC[host_isa()]
    others = {v for v in INTRINSIC.values() if v and v != want}
    return (want is None or want in ll) and not any(o in ll for o in others)


def _conv_np(x, w, stride, pad):
    return testing.group_conv2d_nchw_python(x.astype(np.int64), w.astype(np.int64),
                                            (stride, stride), (pad, pad, pad, pad), (1, 1), 1)


def _conv_graph(x_shape, w, stride, pad, bias):
    X = relay.var("x", shape=x_shape, dtype="uint8")
    y = relay.nn.conv2d(X, relay.const(w), strides=(stride, stride), padding=(pad, pad),
                        kernel_size=w.shape[2:], channels=w.shape[0], out_dtype="int32")
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(bias)))
    return relay.Function([X], _requant(y, 0.004, 3, "uint8"))


@pytest.mark.parametrize("opt_level", [3, 2])
@pytest.mark.parametrize("n,ic,h,oc,k,stride,pad", [
    (1, 3, 9, 57, 3, 2, 1), (2, 64, 14, 64, 1, 1, 0), (1, 1, 5, 1, 1, 1, 0),
    (1, 16, 7, 32, 3, 1, 1)])
def test_conv2d_int8_requantize(opt_level, n, ic, h, oc, k, stride, pad):
    x, w = _u8(n, ic, h, h + 2), _s8(oc, ic, k, k)
    bias = RNG.integers(-3000, 3000, oc).astype("int32")
    lib = _build(_conv_graph(x.shape, w, stride, pad, bias), opt_level=opt_level)
    ref = _conv_np(x, w, stride, pad) + bias[None, :, None, None]
    np.testing.assert_array_equal(_run(lib, x=x), _requant_np(np.maximum(ref, 0), 0.004, 3,
                                                              "uint8"))


@pytest.mark.parametrize("target", [HOST, IR_TARGETS["vnni"]])
def test_conv2d_int8_uses_vnni_and_fuses_the_requantize(target):
    """(For this machine: its own int8 kernel; for a VNNI CPU: vpdpbusd, the IR only.)"""
    x, w = _u8(1, 32, 8, 8), _s8(32, 32, 3, 3)
    bias = RNG.integers(-3000, 3000, 32).astype("int32")
    lib = _build(_conv_graph(x.shape, w, 1, 1, bias), target=target)
    ll = lib.get_lib().get_source("ll")
    assert _uses_host_kernel(ll) if target == HOST else "llvm.x86.avx512.vpdpbusd.512" in ll
    names = [ln.split("@")[1].split("(")[0] for ln in ll.splitlines()
             if ln.startswith("define i32 @fused")]
    conv = [nm for nm in names if "conv2d_NCHWc_int8" in nm]
    assert conv and all("clip_cast" in nm for nm in conv), names


def test_two_int8_convs_stay_blocked():
    """The requantized uint8 output of one int8 conv feeds the next in NCHW16c: no layout
    transform between them."""
    x, w1, w2 = _u8(1, 16, 10, 10), _s8(32, 16, 3, 3), _s8(16, 32, 3, 3)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    y = relay.nn.conv2d(X, relay.const(w1), padding=(1, 1), out_dtype="int32")
    y = _requant(y, 0.002, 128, "uint8")
    y = relay.nn.conv2d(y, relay.const(w2), padding=(1, 1), out_dtype="int32")
    lib = _build(relay.Function([X], _requant(y, 0.003, -2, "int8")))
    ll = lib.get_lib().get_source("ll")
    transforms = [ln for ln in ll.splitlines() if ln.startswith("define i32 @fused_layout")]
    assert len(transforms) == 2, transforms  # in and out of the blocked region only
    r1 = _requant_np(_conv_np(x, w1, 1, 1), 0.002, 128, "uint8")
    ref = _requant_np(_conv_np(r1, w2, 1, 1), 0.003, -2, "int8")
    np.testing.assert_array_equal(_run(lib, x=x), ref)


@pytest.mark.parametrize("opt_level", [3, 2])
@pytest.mark.parametrize("m,n,k", [(128, 96, 64), (1, 1000, 512), (7, 17, 13)])
def test_dense_int8_requantize(opt_level, m, n, k):
    x, w = _u8(m, k), _s8(n, k)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    y = _requant(relay.nn.dense(X, relay.const(w), out_dtype="int32"), 0.0007, -5, "int8")
    lib = _build(relay.Function([X], y), opt_level=opt_level)
    assert _uses_host_kernel(lib.get_lib().get_source("ll"))
    ref = _requant_np(x.astype(np.int64) @ w.astype(np.int64).T, 0.0007, -5, "int8")
    np.testing.assert_array_equal(_run(lib, x=x), ref)


@pytest.mark.parametrize("transpose_b", [True, False])
def test_batch_matmul_int8(transpose_b):
    a, b = _u8(2, 13, 21), _s8(2, 19, 21)
    if not transpose_b:
        b = np.ascontiguousarray(b.transpose(0, 2, 1))
    A = relay.var("a", shape=a.shape, dtype="uint8")
    B = relay.var("b", shape=b.shape, dtype="int8")
    y = relay.nn.batch_matmul(A, B, out_dtype="int32", transpose_b=transpose_b)
    lib = _build(relay.Function([A, B], y))
    assert _uses_host_kernel(lib.get_lib().get_source("ll"))
    bt = b if transpose_b else b.transpose(0, 2, 1)
    ref = np.einsum("bmk,bnk->bmn", a.astype(np.int64), bt.astype(np.int64))
    np.testing.assert_array_equal(_run(lib, a=a, b=b), ref)


@pytest.mark.parametrize("isa", ["avx512bw", "avx2", "generic"])
def test_fallback_isas(isa):
    """Built for this machine with the better instruction sets taken away (-mattr), and run."""
    x, w = _u8(1, 8, 6, 6), _s8(16, 8, 3, 3)
    bias = RNG.integers(-3000, 3000, 16).astype("int32")
    lib = _build(_conv_graph(x.shape, w, 1, 1, bias), target=isa_target(isa))
    ll = lib.get_lib().get_source("ll")
    needle = INTRINSIC[isa]
    assert "vpdpbusd" not in ll and (needle is None or needle in ll)
    ref = _conv_np(x, w, 1, 1) + bias[None, :, None, None]
    np.testing.assert_array_equal(_run(lib, x=x), _requant_np(np.maximum(ref, 0), 0.004, 3,
                                                              "uint8"))


@pytest.mark.parametrize("dd,wd", [("int8", "int8"), ("uint8", "uint8"), ("int8", "uint8")])
def test_other_int_combinations_take_the_generic_path(dd, wd):
    lo, hi = (-128, 128) if dd == "int8" else (0, 256)
    x = RNG.integers(lo, hi, (1, 8, 6, 6)).astype(dd)
    lo, hi = (-128, 128) if wd == "int8" else (0, 256)
    w = RNG.integers(lo, hi, (16, 8, 3, 3)).astype(wd)
    X = relay.var("x", shape=x.shape, dtype=dd)
    y = relay.nn.conv2d(X, relay.const(w), padding=(1, 1), out_dtype="int32")
    lib = _build(relay.Function([X], y))
    assert "vpdpbusd" not in lib.get_lib().get_source("ll")
    np.testing.assert_array_equal(_run(lib, x=x), _conv_np(x, w, 1, 1))


def test_depthwise_int8_nchw_exact():
    """(the blocked depthwise kernel: tests/relay/test_int8_depthwise_x86.py)"""
    x, w = _u8(1, 16, 6, 6), _s8(16, 1, 3, 3)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    y = relay.nn.conv2d(X, relay.const(w), padding=(1, 1), groups=16, out_dtype="int32")
    lib = _build(relay.Function([X], y))
    ref = testing.group_conv2d_nchw_python(x.astype(np.int64), w.astype(np.int64), (1, 1),
                                           (1, 1, 1, 1), (1, 1), 16)
    np.testing.assert_array_equal(_run(lib, x=x), ref)


def test_int8_ops_in_the_interpreter():
    """The altered graph (packed int8 ops) evaluates in the reference interpreter too."""
    x, w = _u8(1, 3, 6, 6), _s8(20, 3, 3, 3)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    y = relay.nn.conv2d(X, relay.const(w), padding=(1, 1), out_dtype="int32")
    mod = tvm.IRModule.from_expr(relay.Function([X], y))
    with tvm.target.Target(HOST), tvm.transform.PassContext(opt_level=3):
        mod = relay.transform.InferType()(mod)
        mod = relay.transform.AlterOpLayout()(mod)
    assert "contrib_conv2d_NCHWc_int8" in str(mod)
    out = relay.create_executor("debug", mod=mod).evaluate()(x)
    np.testing.assert_array_equal(np.asarray(getattr(out, "numpy", lambda: out)()),
                                  _conv_np(x, w, 1, 1))


@pytest.mark.parametrize("opt_level", [3, 2])
@pytest.mark.parametrize("const_weight", [True, False])
def test_dense_int8_nd_data(opt_level, const_weight):
    """[batch, seq, K] data (a transformer's dense): one product over the flattened rows."""
    x, w = _u8(2, 9, 40), _s8(24, 40)
    X = relay.var("x", shape=x.shape, dtype="uint8")
    W = relay.const(w) if const_weight else relay.var("w", shape=w.shape, dtype="int8")
    y = _requant(relay.nn.dense(X, W, out_dtype="int32"), 0.001, 1, "int8")
    lib = _build(relay.Function([X] if const_weight else [X, W], y), opt_level=opt_level)
    assert _uses_host_kernel(lib.get_lib().get_source("ll"))
    inputs = {"x": x} if const_weight else {"x": x, "w": w}
    ref = _requant_np(x.astype(np.int64) @ w.astype(np.int64).T, 0.001, 1, "int8")
    np.testing.assert_array_equal(_run(lib, **inputs), ref)
