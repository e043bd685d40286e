"""x86 int8 kernels (uint8 x int8 -> int32 on the tensorized 16x4 micro-kernel) against numpy
int64 references, exactly: each instruction set (VNNI, AVX-512BW and AVX2 via vpmaddwd, generic;
each one this CPU has is run, built for this machine with the better ones taken away by -mattr;
every one is compiled and its IR checked), the whole value range (255 x -128 products: vpmaddubsw would
saturate), awkward shapes (channels 1, 3, 57; K not a multiple of 4; N not a multiple of 16;
primes), strides, padding, dilation, a fused requantize-like epilogue."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tests.topi.int8_util import (
    HOST,
    INTRINSIC,
    IR_TARGETS,
    isa_target,
)
from tests.topi.int8_util import s8 as _s8
from tests.topi.int8_util import u8 as _u8
from tvmpy import te
from tvmpy.target import Target
from tvmpy.topi import testing
from tvmpy.topi.x86 import conv2d_int8 as C
from tvmpy.topi.x86 import dense_int8 as D
from tvmpy.topi.x86.int8_intrin import int8_isa

RNG = np.random.default_rng(10)
ISAS = list(IR_TARGETS)


def _epilogue(t):
    """A requantize-like int32 -> int8 epilogue (fused into the anchor's tile)."""
    return te.compute(t.shape, lambda *i: (t[i] >> 7).astype("int8"), name="requant",
                      tag="elemwise")


def _np_epilogue(x):
    return (x >> 7).astype("int8")


@pytest.mark.parametrize("isa,target", list(IR_TARGETS.items()))
def test_int8_isa_selection(isa, target):
    assert int8_isa(Target(target)) == isa


def test_int8_isa_selection_other_targets():
    """The choice follows the CPU's features as LLVM defines them (no list of CPU names: CPUs
    newer than the code choose right) and -mattr with LLVM's implications."""
    assert int8_isa(Target("llvm -mcpu=graniterapids")) == "vnni"
    assert int8_isa(Target("llvm -mcpu=x86-64-v4")) == "avx512bw"
    assert int8_isa(Target("llvm -mcpu=alderlake")) == "avx2"  # AVX-VNNI is not AVX-512 VNNI
    assert int8_isa(Target("llvm -mcpu=znver4")) == "vnni"
    assert int8_isa(Target("llvm -mcpu=znver4 -mattr=-avx512vnni")) == "avx512bw"
    assert int8_isa(Target("llvm -mcpu=znver4 -mattr=-avx512f")) == "avx2"
    assert int8_isa(Target("llvm -mcpu=haswell -mattr=+avx512bw,+avx512vnni")) == "vnni"
    assert int8_isa(Target("llvm -mtriple=x86_64-linux-gnu -mattr=+avx512vnni")) == "vnni"
    assert int8_isa(Target("llvm -mtriple=x86_64-linux-gnu")) == "generic"
    assert int8_isa(Target("llvm -mtriple=aarch64-linux-gnu")) == "generic"
    assert int8_isa(Target("c")) == "generic"
    assert int8_isa(None) == "generic"


def _run_dense(target, m, n, k, epilogue=True):
    a, w = _u8(m, k), _s8(n, k)
    A = te.placeholder((m, k), "uint8", name="A")
    W = te.placeholder(D.pack_weight_int8_np(w).shape, "int8", name="W")
    with Target(target):
        out = D.dense_int8(A, W, n)
        if epilogue:
            out = _epilogue(out)
        f = tvm.build(D.schedule_dense_int8([out]), [A, W, out], target=target)
    o = tvm.nd.array(np.zeros((m, n), out.dtype))
    f(tvm.nd.array(a), tvm.nd.array(D.pack_weight_int8_np(w)), o)
    ref = a.astype(np.int64) @ w.astype(np.int64).T
    np.testing.assert_array_equal(o.numpy(), _np_epilogue(ref) if epilogue else ref)


@pytest.mark.parametrize("isa", ISAS)
def test_dense_int8_each_isa(isa):
    _run_dense(isa_target(isa), 13, 37, 23)


@pytest.mark.parametrize("m,n,k", [(1, 1000, 512), (37, 57, 13), (1, 1, 1), (16, 32, 64),
                                   (9, 16, 5)])
def test_dense_int8_shapes(m, n, k):
    _run_dense(HOST, m, n, k, epilogue=(m, n) != (16, 32))


def test_dense_int8_extreme_values_do_not_saturate():
    m, n, k = 4, 16, 64
    A = te.placeholder((m, k), "uint8", name="A")
    W = te.placeholder((1, k // 4, 16, 4), "int8", name="W")
    a = np.full((m, k), 255, "uint8")
    w = np.full((n, k), -128, "int8")
    targets = []
    for isa in ISAS:
        try:
            targets.append(isa_target(isa))
        except pytest.skip.Exception:
            pass  # an instruction set this CPU lacks
    for target in targets:
        with Target(target):
            out = D.dense_int8(A, W, n)
            f = tvm.build(D.schedule_dense_int8([out]), [A, W, out], target=target)
        o = tvm.nd.array(np.zeros((m, n), "int32"))
        f(tvm.nd.array(a), tvm.nd.array(D.pack_weight_int8_np(w)), o)
        assert (o.numpy() == 255 * -128 * k).all(), target


@pytest.mark.parametrize("isa", ["vnni", "avx2"])
def test_batch_matmul_int8(isa):
    b, m, n, k = 3, 13, 19, 21
    a, w = _u8(b, m, k), _s8(1, k, n)  # B [1, K, N]: broadcast, not transposed
    A = te.placeholder(a.shape, "uint8", name="A")
    B = te.placeholder(w.shape, "int8", name="B")
    target = isa_target(isa)
    with Target(target):
        out = D.batch_matmul_int8(A, B, "int32", False)
        f = tvm.build(D.schedule_batch_matmul_int8([out]), [A, B, out], target=target)
    o = tvm.nd.array(np.zeros((b, m, n), "int32"))
    f(tvm.nd.array(a), tvm.nd.array(w), o)
    np.testing.assert_array_equal(o.numpy(), a.astype(np.int64) @ w[0].astype(np.int64))


def test_int8_kernels_reject_other_dtypes():
    A = te.placeholder((4, 8), "int8", name="A")
    W = te.placeholder((1, 2, 16, 4), "int8", name="W")
    with pytest.raises(ValueError, match="uint8 data"):
        D.dense_int8(A, W, 16)
    A = te.placeholder((4, 8), "uint8", name="A")
    with pytest.raises(ValueError, match="do not match"):
        D.dense_int8(A, te.placeholder((1, 3, 16, 4), "int8", name="W"), 16)


def _run_conv(target, n, ic, h, w, oc, k, stride, pad, dil):
    x, wt = _u8(n, ic, h, w), _s8(oc, ic, k, k)
    icb, icp = C.int8_ic_block(ic)
    xp = np.zeros((n, icp, h, w), "uint8")
    xp[:, :ic] = x
    xb = np.ascontiguousarray(xp.reshape(n, icp // icb, icb, h, w).transpose(0, 1, 3, 4, 2))
    kp = C.pack_kernel_int8_np(wt, icb)
    X = te.placeholder(xb.shape, "uint8", name="X")
    K = te.placeholder(kp.shape, "int8", name="K")
    with Target(target):
        out = _epilogue(C.conv2d_NCHWc_int8(X, K, (stride, stride), (pad, pad), (dil, dil),
                                            f"NCHW{icb}c", "NCHW16c", "int32"))
        f = tvm.build(C.schedule_conv2d_NCHWc_int8([out]), [X, K, out], target=target)
    o = tvm.nd.array(np.zeros([int(d) for d in out.shape], "int8"))
    f(tvm.nd.array(xb), tvm.nd.array(kp), o)
    r = o.numpy()
    r = r.transpose(0, 1, 4, 2, 3).reshape(n, -1, r.shape[2], r.shape[3])[:, :oc]
    ref = testing.group_conv2d_nchw_python(x.astype(np.int64), wt.astype(np.int64),
                                           (stride, stride), (pad, pad, pad, pad), (dil, dil), 1)
    np.testing.assert_array_equal(r, _np_epilogue(ref))


@pytest.mark.parametrize("isa", ISAS)
def test_conv2d_int8_each_isa(isa):
    _run_conv(isa_target(isa), 1, 20, 9, 11, 32, 3, 1, 1, 1)


@pytest.mark.parametrize("n,ic,h,w,oc,k,stride,pad,dil", [
    (2, 3, 9, 11, 57, 3, 2, 1, 1),    # 3 input channels (padded to 4), 57 outputs
    (1, 1, 7, 5, 1, 1, 1, 0, 1),      # one channel in and out
    (1, 8, 10, 13, 16, 3, 1, 2, 2),   # dilation, prime width
    (1, 64, 17, 17, 32, 1, 2, 0, 1),  # strided 1x1
    (1, 12, 6, 6, 48, 5, 1, 2, 1),    # 5x5, block of 12 input channels
])
def test_conv2d_int8_shapes(n, ic, h, w, oc, k, stride, pad, dil):
    _run_conv(HOST, n, ic, h, w, oc, k, stride, pad, dil)


def test_conv2d_nchw_int8_packs_inside_the_kernel():
    x, wt = _u8(1, 5, 8, 9), _s8(19, 5, 3, 3)
    X = te.placeholder(x.shape, "uint8", name="X")
    Wt = te.placeholder(wt.shape, "int8", name="W")
    target = HOST
    with Target(target):
        out = C.conv2d_nchw_int8(X, Wt, (1, 1), (1, 1), (1, 1))
        f = tvm.build(C.schedule_conv2d_nchw_int8([out]), [X, Wt, out], target=target)
    o = tvm.nd.array(np.zeros([int(d) for d in out.shape], "int32"))
    f(tvm.nd.array(x), tvm.nd.array(wt), o)
    ref = testing.group_conv2d_nchw_python(x.astype(np.int64), wt.astype(np.int64), (1, 1),
                                           (1, 1, 1, 1), (1, 1), 1)
    np.testing.assert_array_equal(o.numpy(), ref)


@pytest.mark.parametrize("isa", ["vnni", "avx512bw", "avx2"])
def test_generated_ir_uses_the_isa(isa):
    """Every instruction set is compiled (for a CPU that has it: the IR only, never run here)."""
    A = te.placeholder((8, 32), "uint8", name="A")
    W = te.placeholder((2, 8, 16, 4), "int8", name="W")
    target = IR_TARGETS[isa]
    with Target(target):
        out = D.dense_int8(A, W, 32)
        f = tvm.build(D.schedule_dense_int8([out]), [A, W, out], target=target)
    ll = f.get_source("ll")
    needle = INTRINSIC[isa]
    assert needle in ll
    others = {v for v in INTRINSIC.values() if v} - {needle}
    assert not any(o in ll for o in others)
    assert "pmaddubs" not in ll  # the saturating u8 x s8 -> i16 form is never used
