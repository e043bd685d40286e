"""te/topi kernels and small relay graphs built for ``-mtriple=aarch64-linux-gnu`` on the host,
exported with the cross toolchain and run in ONE AArch64 Python under qemu-user against numpy.

One case per schedule primitive / intrinsic family that matters for a CPU target: split,
reorder, tile, fuse; vectorize (divisible and not); parallel (tvmpy's pool under AArch64);
unroll; compute_at / compute_inline; cache_read / cache_write; rfactor; the math intrinsics
(per-lane libm on AArch64); integer and float16 casts; tensorize with the GEMM micro-kernel
(cross-compiled); pragma import_c; relay conv2d (NCHWc with 128-bit blocks, Winograd),
depthwise, dense, pooling, softmax; a library linked by ``zig cc``. Awkward (prime) shapes,
random inputs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te, tir

from .aarch64_util import TARGET, run_batch, save_graph, save_kernel

RNG = np.random.default_rng(7)
CASES: dict[str, Callable[[str], None]] = {}


def case(fn: Callable[[str], None]) -> Callable[[str], None]:
    CASES[fn.__name__] = fn
    return fn


def _u(*shape, lo=-1.0, hi=1.0, dtype="float32"):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def _build(s, args, name):
    return tvm.build(s, args, target=TARGET, name=name)


def _matmul(n, m, l):
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, k


def _mm_args(n, m, l):
    a, b = _u(n, l), _u(l, m)
    return [a, b, np.full((n, m), np.nan, "float32")], {2: (a.astype("float64") @ b).astype("float32")}


@case
def split_reorder_tile_fuse(d):
    n, m, l = 37, 29, 23
    A, B, C, k = _matmul(n, m, l)
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 4)
    ko, ki = s[C].split(k, factor=5)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    s[C].fuse(xo, yo)
    args, outs = _mm_args(n, m, l)
    save_kernel(d, "split_reorder_tile_fuse", _build(s, [A, B, C], "k_tile"), args, outs, 1e-5, 1e-5)


@case
def vectorize_tail(d):
    A = te.placeholder((7, 45), name="A")
    B = te.compute((7, 45), lambda i, j: A[i, j] * 2.5 - 1.0, name="B")
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=8)  # 45 = 5 * 8 + 5: a tail
    s[B].vectorize(ji)
    a = _u(7, 45)
    save_kernel(d, "vectorize_tail", _build(s, [A, B], "k_vec"), [a, np.zeros_like(a)],
                {1: a * 2.5 - 1.0})


@case
def symbolic_shape(d):
    n = te.var("n")
    A = te.placeholder((n, 6), name="A")
    B = te.compute((n, 6), lambda i, j: A[i, j] * A[i, 5 - j] - 0.5, name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    s[B].vectorize(B.op.axis[1])
    mod = _build(s, [A, B], "k_sym")
    for rows in (1, 23):
        a = _u(rows, 6)
        save_kernel(d, f"symbolic_shape_{rows}", mod, [a, np.zeros_like(a)],
                    {1: a * a[:, ::-1] - 0.5})


@case
def vectorize_whole_axis_float64(d):
    A = te.placeholder((5, 6), "float64", name="A")
    B = te.placeholder((6,), "float64", name="B")
    C = te.compute((5, 6), lambda i, j: A[i, j] * B[j] + A[i, 5 - j], name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    a, b = _u(5, 6, dtype="float64"), _u(6, dtype="float64")
    save_kernel(d, "vectorize_whole_axis_float64", _build(s, [A, B, C], "k_vec64"),
                [a, b, np.zeros((5, 6))], {2: a * b + a[:, ::-1]})


@case
def parallel_pool(d):
    n = 4099
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * A[i] + 3.0, name="B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=64)
    s[B].parallel(o)
    ii, iv = s[B].split(i, factor=4)
    s[B].vectorize(iv)
    a = _u(n)
    save_kernel(d, "parallel_pool", _build(s, [A, B], "k_par"), [a, np.zeros_like(a)], {1: a * a + 3})


@case
def unroll(d):
    n, m, l = 9, 11, 16
    A, B, C, k = _matmul(n, m, l)
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(C.op.axis[0], ko, C.op.axis[1], ki)
    s[C].unroll(ki)
    args, outs = _mm_args(n, m, l)
    save_kernel(d, "unroll", _build(s, [A, B, C], "k_unroll"), args, outs, 1e-5, 1e-5)


@case
def compute_at_inline(d):
    A = te.placeholder((13, 17), name="A")
    B = te.compute((13, 17), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((13, 17), lambda i, j: B[i, j] * 3.0, name="C")
    D = te.compute((13, 15), lambda i, j: C[i, j] + C[i, j + 1] + C[i, j + 2], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_at(s[D], D.op.axis[0])
    a = _u(13, 17)
    c = (a + 1) * 3
    save_kernel(d, "compute_at_inline", _build(s, [A, D], "k_at"), [a, np.zeros((13, 15), "float32")],
                {1: c[:, :15] + c[:, 1:16] + c[:, 2:17]})


@case
def cache_read_write(d):
    n, m, l = 19, 24, 31
    A, B, C, k = _matmul(n, m, l)
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    CC = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[CC].compute_at(s[C], yo)
    s[AA].compute_at(s[CC], s[CC].op.reduce_axis[0])
    s[C].vectorize(yi)
    args, outs = _mm_args(n, m, l)
    save_kernel(d, "cache_read_write", _build(s, [A, B, C], "k_cache"), args, outs, 1e-5, 1e-5)


@case
def rfactor_reduction(d):
    n = 1031
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=16)
    BF = s.rfactor(B, ki)
    s[BF].parallel(BF.op.axis[0])
    a = _u(n)
    save_kernel(d, "rfactor_reduction", _build(s, [A, B], "k_rf"), [a, np.zeros(1, "float32")],
                {1: np.array([a.astype("float64").sum()], "float32")}, 1e-5, 1e-4)


_INTRINSICS = {
    "exp": (te.exp, np.exp, -5, 5), "log": (te.log, np.log, 0.01, 50),
    "tanh": (te.tanh, np.tanh, -4, 4), "sqrt": (te.sqrt, np.sqrt, 0, 100),
    "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x)), -8, 8),
    "erf": (te.erf, None, -3, 3), "sin": (te.sin, np.sin, -6, 6), "cos": (te.cos, np.cos, -6, 6),
    "floor": (te.floor, np.floor, -9, 9), "abs": (te.abs, np.abs, -9, 9),
    "log2": (te.log2, np.log2, 0.01, 50), "rsqrt": (te.rsqrt, lambda x: 1 / np.sqrt(x), 0.1, 9),
}


def _unary(f, A):
    return lambda i: f(A[i])


@case
def intrinsics(d):
    import math

    for dtype in ("float32", "float64"):
        for name, (fte, fnp, lo, hi) in _INTRINSICS.items():
            A = te.placeholder((37,), dtype, name="A")
            B = te.compute((37,), _unary(fte, A), name="B")
            s = te.create_schedule(B.op)
            o, i = s[B].split(B.op.axis[0], factor=8)
            s[B].vectorize(i)
            a = _u(37, lo=lo, hi=hi, dtype=dtype)
            want = (np.vectorize(math.erf)(a.astype("float64")) if fnp is None
                    else fnp(a.astype("float64"))).astype(dtype)
            tol = 2e-6 if dtype == "float32" else 1e-12
            save_kernel(d, f"intrin_{name}_{dtype}", _build(s, [A, B], f"k_{name}"),
                        [a, np.zeros_like(a)], {1: want}, tol, tol)
    # pow with two operands
    A = te.placeholder((29,), name="A")
    B = te.compute((29,), lambda i: te.power(A[i], 1.7), name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].split(B.op.axis[0], factor=4)[1])
    a = _u(29, lo=0.1, hi=4)
    save_kernel(d, "intrin_pow", _build(s, [A, B], "k_pow"), [a, np.zeros_like(a)],
                {1: (a.astype("float64") ** 1.7).astype("float32")}, 2e-6, 2e-6)


@case
def int_casts_float16(d):
    A = te.placeholder((41,), "int8", name="A")
    B = te.placeholder((41,), "uint8", name="B")
    C = te.compute((41,), lambda i: A[i].astype("int32") * B[i].astype("int32")
                   + tir.floordiv(A[i].astype("int32"), 3) + tir.floormod(A[i].astype("int32"), 5),
                   name="C")
    H = te.placeholder((41,), "float16", name="H")
    F = te.compute((41,), lambda i: (H[i] * tvm.tir.const(1.5, "float16")).astype("float32")
                   + C[i].astype("float32"), name="F")
    s = te.create_schedule(F.op)
    s[F].vectorize(s[F].split(F.op.axis[0], factor=8)[1])
    a = RNG.integers(-128, 128, 41).astype("int8")
    b = RNG.integers(0, 256, 41).astype("uint8")
    h = _u(41, lo=-4, hi=4, dtype="float16")
    ai, bi = a.astype("int64"), b.astype("int64")
    c = ai * bi + np.floor_divide(ai, 3) + np.mod(ai, 5)
    want = (h * np.float16(1.5)).astype("float32") + c.astype("float32")
    save_kernel(d, "int_casts_float16", _build(s, [A, B, H, F], "k_cast"),
                [a, b, h, np.zeros(41, "float32")], {3: want}, 1e-6, 1e-6)


@case
def tensorize_microkernel(d):
    from tvmpy.contrib.microkernel import gemm_intrin

    A = te.placeholder((16, 24), name="A")
    B = te.placeholder((8, 24), name="B")
    k = te.reduce_axis((0, 24), name="k")
    C = te.compute((16, 8), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(xo, yo, ko, xi, yi, ki)
    s[C].tensorize(xi, gemm_intrin(8, 8, 8, "nk"))
    s[C].parallel(xo)
    a, b = _u(16, 24), _u(8, 24)
    save_kernel(d, "tensorize_microkernel", _build(s, [A, B, C], "k_tensorize"),
                [a, b, np.zeros((16, 8), "float32")], {2: a @ b.T}, 1e-5, 1e-5)


@case
def pragma_import_c(d):
    src = "float tvmpy_a64_twice(float x) { return 2.0f * x; }\n"
    X = te.placeholder((23,), name="X")
    Z = te.compute((23,), lambda i: tir.op.call_pure_extern("float32", "tvmpy_a64_twice", X[i])
                   + 1.0, name="Z")
    s = te.create_schedule(Z.op)
    s[Z].pragma(Z.op.axis[0], "import_c", src)
    x = _u(23)
    save_kernel(d, "pragma_import_c", _build(s, [X, Z], "k_import_c"),
                [x, np.zeros(23, "float32")], {1: 2 * x + 1}, 1e-6, 1e-6)


# ---- relay graphs (relay.build for the target, topi schedules with 128-bit blocks) ------------


def _relay_build(func, params):
    mod = tvm.IRModule.from_expr(func)
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target=tvm.target.arm_cpu("rasp4b"), params=params)


@case
def relay_conv_pool_dense_softmax(d):
    from tvmpy.topi.testing import conv2d_nchw_python, depthwise_conv2d_nchw_python

    x = relay.var("x", shape=(1, 12, 19, 19))
    w1 = _u(32, 12, 3, 3) * 0.3
    b1 = _u(32)
    w2 = _u(32, 1, 3, 3) * 0.5
    w3 = _u(16, 32 * 9 * 9) * 0.05
    y = relay.nn.conv2d(x, relay.const(w1), padding=(1, 1), channels=32, kernel_size=(3, 3))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b1)))
    y = relay.nn.conv2d(y, relay.const(w2), padding=(1, 1), groups=32, channels=32,
                        kernel_size=(3, 3))
    y = relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2))
    y = relay.nn.dense(relay.reshape(y, (1, -1)), relay.const(w3))
    y = relay.nn.softmax(y)
    lib = _relay_build(relay.Function([x], y), {})
    shapes = json.loads(lib.get_graph_json())["attrs"]["shape"][1]
    blocked = [sh for sh in shapes if len(sh) == 5]  # NCHW{c}c: one 128-bit NEON vector
    assert blocked and all(sh[-1] == 4 for sh in blocked), shapes
    xv = _u(1, 12, 19, 19)
    r = np.maximum(conv2d_nchw_python(xv.astype("float64"), w1, 1, 1) + b1[None, :, None, None], 0)
    r = depthwise_conv2d_nchw_python(r, w2, 1, 1)
    p = np.lib.stride_tricks.sliding_window_view(r, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    r = p.max(axis=(-1, -2)).reshape(1, -1) @ w3.T
    e = np.exp(r - r.max())
    save_graph(d, "relay_conv_pool_dense_softmax", lib, {"x": xv},
               [(e / e.sum()).astype("float32")], 1e-4, 1e-6)


@case
def relay_bitserial(d):
    """The paper's ARM experiment: 2-bit activations x 1-bit (unipolar) weights, NHWC conv and
    dense, constant weights packed at compile time."""
    from tvmpy.topi.testing import bitserial_conv2d_nhwc_python, bitserial_dense_python

    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, (1, 11, 11, 37)).astype("uint8")
    w = rng.integers(0, 2, (3, 3, 37, 19)).astype("uint8")
    wd = rng.integers(0, 2, (13, 6 * 6 * 19)).astype("uint8")  # the conv output: 6x6x19
    x = relay.var("x", shape=a.shape, dtype="uint8")
    y = relay.nn.bitserial_conv2d(x, relay.const(w), strides=(2, 2), padding=(1, 1),
                                  activation_bits=2, weight_bits=1, data_layout="NHWC",
                                  kernel_layout="HWIO", pack_dtype="uint32", out_dtype="int16")
    y = relay.clip(relay.right_shift(y, relay.const(np.int16(2))), 0, 3)
    y = relay.reshape(relay.cast(y, "uint8"), (1, -1))
    y = relay.nn.bitserial_dense(y, relay.const(wd), data_bits=2, weight_bits=1,
                                 pack_dtype="uint64", out_dtype="int32")
    lib = _relay_build(relay.Function([x], y), {})
    r = bitserial_conv2d_nhwc_python(a, w, 2, 1, 2, 1, "int16")
    r = np.clip(r >> 2, 0, 3).astype("uint8").reshape(1, -1)
    save_graph(d, "relay_bitserial", lib, {"x": a}, [bitserial_dense_python(r, wd, 2, 1, "int32")],
               0, 0)


@case
def relay_reduce_injective(d):
    x = relay.var("x", shape=(3, 7, 10))
    y = relay.transpose(x, (0, 2, 1))
    y = relay.concatenate([y, relay.exp(y)], axis=1)  # (3, 20, 7)
    m = relay.mean(y, axis=2, keepdims=True)
    a = relay.argmax(relay.strided_slice(y, (0, 1, 0), (3, 19, 7), (1, 2, 1)), axis=1)
    lib = _relay_build(relay.Function([x], relay.Tuple([y - m, a])), {})
    xv = _u(3, 7, 10)
    yv = np.transpose(xv, (0, 2, 1))
    yv = np.concatenate([yv, np.exp(yv)], axis=1)
    save_graph(d, "relay_reduce_injective", lib, {"x": xv},
               [(yv - yv.mean(axis=2, keepdims=True)).astype("float32"),
                np.argmax(yv[:, 1:19:2, :], axis=1).astype("int32")], 1e-5, 1e-6)


@case
def relay_winograd(d):
    from tvmpy.topi.testing import conv2d_nchw_python

    x = relay.var("x", shape=(1, 16, 28, 28))
    w = _u(16, 16, 3, 3) * 0.3
    y = relay.nn.conv2d(x, relay.const(w), padding=(1, 1), channels=16, kernel_size=(3, 3))
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    with tvm.transform.PassContext(opt_level=3, config={"relay.x86.winograd": 4}):
        lib = relay.build(mod, target=TARGET, params={})
    assert "winograd" in lib.get_graph_json()
    xv = _u(1, 16, 28, 28)
    save_graph(d, "relay_winograd", lib, {"x": xv},
               [conv2d_nchw_python(xv.astype("float64"), w, 1, 1).astype("float32")], 1e-4, 1e-6)


@case
def zig_cc_link(d):
    from tvmpy.contrib import cc

    A = te.placeholder((33,), name="A")
    B = te.compute((33,), lambda i: te.exp(A[i]) + A[i], name="B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=4)
    s[B].vectorize(i)
    s[B].parallel(o)
    mod = _build(s, [A, B], "k_zig")
    a = _u(33)
    save_kernel(d, "zig_cc_link", mod, [a, np.zeros_like(a)], {1: np.exp(a) + a}, 2e-6, 2e-6)
    # the same library, linked by zig cc instead of the Debian cross gcc
    mod.export_library(os.path.join(d, "zig_cc_link.so"),
                       cc.cross_compiler("zig cc -target aarch64-linux-gnu".replace(
                           "zig", f"{os.sys.executable} -m ziglang", 1)))


# ---- the batch: build everything here, run it all in one qemu process -------------------------

@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Every case built and exported here, then run in one AArch64 Python under qemu."""
    folder = str(tmp_path_factory.mktemp("aarch64_kernels"))
    errors = {}
    for name, fn in CASES.items():
        try:
            fn(folder)
        except Exception as e:  # reported by that case's test
            errors[name] = f"{type(e).__name__}: {e}"
    return {"build_errors": errors, "res": run_batch(folder)}


@pytest.mark.parametrize("name", list(CASES))
def test_case_on_aarch64(batch, name):
    st = batch
    assert name not in st["build_errors"], st["build_errors"].get(name)
    hits = {k: v for k, v in st["res"]["results"].items()
            if k == name or k.startswith("intrin_" if name == "intrinsics" else name + "_")}
    assert hits, f"{name}: nothing ran on the device"
    bad = {k: v for k, v in hits.items() if not v["ok"]}
    assert not bad, bad


def test_device_side_imports_only_runtime(batch):
    mods = batch["res"]["modules"]
    assert not [m for m in mods if m.split(".")[0] in ("llvmlite", "onnx", "torch")], mods
    assert "tvmpy.relay" not in mods and "tvmpy.te" not in mods, mods
