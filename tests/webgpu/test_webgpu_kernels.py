"""Kernels of target webgpu (WGSL on wgpu-py; lavapipe in CI) against numpy: elementwise with
symbolic and awkward sizes, cross-thread reductions, a shared-memory tiled matmul, the TOPI GPU
conv2d schedule, float16 with shader-f16, int64 tensors, time_evaluator; and the clear errors
for what WGSL/WebGPU cannot do."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.codegen.gpu_source import GPUCodegenError

DEV = tvm.webgpu(0)


def _elementwise(dtype="float32", factor=64):
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: A[i] * A[i] - B[i] / (B[i] + tvm.tir.const(3, dtype)), name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=factor)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


@pytest.mark.parametrize("size", [1, 7, 64, 1031])
def test_elementwise_symbolic_size(size):
    s, args = _elementwise()
    f = tvm.build(s, args, "webgpu")
    rng = np.random.default_rng(size)
    a, b = (rng.uniform(0.5, 2, size).astype("float32") for _ in range(2))
    c = tvm.nd.empty((size,), "float32", DEV)
    f(tvm.nd.array(a, DEV), tvm.nd.array(b, DEV), c)
    np.testing.assert_allclose(c.numpy(), a * a - b / (b + 3), rtol=1e-6)
    out = np.zeros(size, "float32")  # host numpy arrays are copied in and out
    f(a, b, out)
    np.testing.assert_allclose(out, a * a - b / (b + 3), rtol=1e-6)


def test_int32_floor_division_of_negative_values():
    n = 37
    A = te.placeholder((n,), name="A", dtype="int32")
    B = te.compute((n,), lambda i: te.floordiv(A[i], 5) * 100 + te.floormod(A[i], 5), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], "webgpu")
    a = np.arange(-18, 19, dtype="int32")
    out = np.zeros(n, "int32")
    f(a, out)
    np.testing.assert_array_equal(out, (a // 5) * 100 + a % 5)


@pytest.mark.parametrize("rows,cols", [(1, 37), (13, 100), (5, 1)])
def test_cross_thread_reduction(rows, cols):
    n = te.var("n")
    A = te.placeholder((n, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    M = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="M")
    s = te.create_schedule([B.op, M.op])
    for T in (B, M):
        ko, ki = s[T].split(T.op.reduce_axis[0], factor=16)
        s[T].bind(ki, te.thread_axis("threadIdx.x"))
        s[T].bind(T.op.axis[0], te.thread_axis("blockIdx.x"))
    f = tvm.build(s, [A, B, M], "webgpu")
    src = f.imported_modules[0].get_source("wgsl")
    assert src.count("@compute") == 2
    assert "workgroupBarrier()" in src and "var<workgroup>" in src
    a = np.random.default_rng(0).standard_normal((rows, cols)).astype("float32")
    b, m = np.zeros(rows, "float32"), np.zeros(rows, "float32")
    f(a, b, m)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m, a.max(1))


@pytest.mark.parametrize("shape", [(32, 32, 32), (37, 29, 53)])
def test_shared_memory_tiled_matmul(shape):
    M, N, K = shape
    tile = 8
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    BS = s.cache_read(B, "shared", [C])
    i, j = s[C].op.axis
    bi, ti = s[C].split(i, factor=tile)
    bj, tj = s[C].split(j, factor=tile)
    s[C].reorder(bi, bj, ti, tj)
    ko, ki = s[C].split(s[C].op.reduce_axis[0], factor=tile)
    s[C].reorder(bi, bj, ko, ti, tj, ki)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(ti, te.thread_axis("threadIdx.y"))
    s[C].bind(tj, te.thread_axis("threadIdx.x"))
    for S in (AS, BS):
        s[S].compute_at(s[C], ko)
        x, y = s[S].op.axis
        s[S].bind(x, te.thread_axis("threadIdx.y"))
        s[S].bind(y, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B, C], "webgpu")
    src = f.imported_modules[0].get_source()
    assert "var<workgroup>" in src and "workgroupBarrier()" in src
    rng = np.random.default_rng(1)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = tvm.nd.empty((M, N), "float32", DEV)
    f(tvm.nd.array(a, DEV), tvm.nd.array(b, DEV), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_topi_gpu_conv2d_schedule():
    """topi.cuda's conv2d schedule (the GPU strategy relay picks for webgpu) on WGSL."""
    from tvmpy.topi.testing import conv2d_nchw_python

    data = te.placeholder((1, 5, 11, 13), name="data")
    kern = te.placeholder((7, 5, 3, 3), name="kernel")
    with tvm.target.Target("webgpu"):
        out = topi.cuda.conv2d_nchw(data, kern, (1, 1), (1, 1), (1, 1), "float32")
        s = topi.cuda.schedule_conv2d_nchw([out])
    f = tvm.build(s, [data, kern, out], "webgpu")
    rng = np.random.default_rng(2)
    d = rng.standard_normal((1, 5, 11, 13)).astype("float32")
    w = rng.standard_normal((7, 5, 3, 3)).astype("float32")
    o = np.zeros([int(x) for x in out.shape], "float32")
    f(d, w, o)
    np.testing.assert_allclose(o, conv2d_nchw_python(d, w, 1, 1), rtol=1e-4, atol=1e-4)


def test_float16_with_shader_f16():
    s, args = _elementwise("float16")
    f = tvm.build(s, args, "webgpu")
    src = f.imported_modules[0].get_source()
    assert "enable f16;" in src and "shader-f16" in src
    a = np.linspace(0.5, 2, 77).astype("float16")
    b = np.linspace(1, 3, 77).astype("float16")
    out = np.zeros(77, "float16")
    f(a, b, out)
    want = (a.astype("float32") ** 2 - b.astype("float32") / (b.astype("float32") + 3))
    np.testing.assert_allclose(out.astype("float32"), want, rtol=2e-3, atol=2e-3)


def test_float16_without_shader_f16_is_a_clear_error():
    from tvmpy.runtime import webgpu_module

    s, args = _elementwise("float16")
    source = tvm.build(s, args, "webgpu").imported_modules[0].source
    dev = webgpu_module.WEBGPU_API.context(0)
    saved = dev.features
    dev.features = set()  # an adapter without shader-f16
    try:
        with pytest.raises(RuntimeError, match="shader-f16"):
            webgpu_module.WEBGPU_API.load(source, 0)
    finally:
        dev.features = saved


def test_int64_tensors_computed_in_32_bits():
    n = 19
    A = te.placeholder((n,), name="A", dtype="int64")
    B = te.compute((n,), lambda i: A[i] * 3 - 7, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], "webgpu")
    a = np.arange(-9, 10, dtype="int64") * 1000
    out = np.zeros(n, "int64")
    f(a, out)
    np.testing.assert_array_equal(out, a * 3 - 7)
    with pytest.raises(ValueError, match="outside the int32 range"):
        f(a + 2**33, out)


def test_time_evaluator_and_batched_launches():
    s, args = _elementwise()
    f = tvm.build(s, args, "webgpu")
    a = tvm.nd.array(np.ones(1000, "float32"), DEV)
    c = tvm.nd.empty((1000,), "float32", DEV)
    res = f.time_evaluator(f.entry_name, DEV, number=3, repeat=2)(a, a, c)
    assert len(res.results) == 2 and all(r > 0 for r in res.results)
    np.testing.assert_allclose(c.numpy(), np.full(1000, 0.75, "float32"))


# ---- what WGSL / WebGPU cannot do: clear errors ------------------------------------------------
def test_float64_is_refused_at_build():
    s, args = _elementwise("float64")
    with pytest.raises(GPUCodegenError, match="float64"):
        tvm.build(s, args, "webgpu")


def _bind_1d(T, factor=16):
    s = te.create_schedule(T.op)
    bx, tx = s[T].split(T.op.axis[0], factor=factor)
    s[T].bind(bx, te.thread_axis("blockIdx.x"))
    s[T].bind(tx, te.thread_axis("threadIdx.x"))
    return s


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
def test_narrow_integer_buffers_packed_in_words(dtype):
    """8/16-bit tensors live packed in u32 words (threads of one word store concurrently);
    results wrap as in numpy; odd sizes (not a multiple of the word)."""
    n = 37
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: A[i] + B[i] * tvm.tir.const(3, dtype), name="C")
    f = tvm.build(_bind_1d(C), [A, B, C], "webgpu")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    a = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    out = np.zeros(n, dtype)
    f(a, b, out)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a + b * np.array(3, dtype))


def test_bool_buffers():
    n = 29
    X = te.placeholder((n,), name="X")
    Y = te.placeholder((n,), name="Y")
    M = te.compute((n,), lambda i: X[i] > Y[i], name="M")
    f = tvm.build(_bind_1d(M), [X, Y, M], "webgpu")
    mask_in = te.placeholder((n,), name="mask", dtype="bool")
    W = te.compute((n,), lambda i: te.if_then_else(mask_in[i], X[i], Y[i] * 2.0), name="W")
    g = tvm.build(_bind_1d(W), [mask_in, X, Y, W], "webgpu")
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
    m = np.zeros(n, "bool")
    f(x, y, m)
    np.testing.assert_array_equal(m, x > y)
    w = np.zeros(n, "float32")
    g(m, x, y, w)
    np.testing.assert_array_equal(w, np.where(x > y, x, y * 2))


def test_uint64_buffer_is_refused_at_build():
    s, args = _elementwise("uint64")
    with pytest.raises(GPUCodegenError, match="uint64"):
        tvm.build(s, args, "webgpu")


def test_array_beyond_32_bit_indexing_is_refused():
    A = te.placeholder((2**31 + 64,), name="A")
    B = te.compute(A.shape, lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    with pytest.raises(GPUCodegenError, match="32-bit indexing"):
        tvm.build(s, [A, B], "webgpu")


def test_too_many_storage_buffers_is_a_clear_error():
    from tvmpy.runtime import webgpu_module

    limit = webgpu_module.WEBGPU_API.limits(0)["max-storage-buffers-per-shader-stage"]
    ins = [te.placeholder((4,), name=f"x{i}") for i in range(limit + 1)]

    def body(i):
        acc = ins[0][i]
        for t in ins[1:]:
            acc = acc + t[i]
        return acc

    out = te.compute((4,), body, name="out")
    s = te.create_schedule(out.op)
    s[out].bind(out.op.axis[0], te.thread_axis("threadIdx.x"))
    f = tvm.build(s, ins + [out], "webgpu")
    arrays = [np.ones(4, "float32") for _ in ins]
    with pytest.raises(RuntimeError, match="max-storage-buffers-per-shader-stage"):
        f(*arrays, np.zeros(4, "float32"))


def test_too_many_workgroups_is_a_clear_error():
    s, args = _elementwise(factor=1)
    f = tvm.build(s, args, "webgpu")
    n = 70000
    with pytest.raises(ValueError, match="max-compute-workgroups-per-dimension"):
        f(np.ones(n, "float32"), np.ones(n, "float32"), np.zeros(n, "float32"))


def test_target_and_device():
    t = tvm.target.Target("webgpu")
    assert t.is_gpu and t.keys == ["webgpu", "gpu"] and t.max_num_threads == 256
    assert tvm.webgpu(0).device_type == 15 and str(tvm.webgpu(0)) == "webgpu(0)"
    assert tvm.device("webgpu", 0) == tvm.webgpu(0)
    assert tvm.webgpu(0).exist


def _barrier_kernel(under_thread_condition: bool):
    from tvmpy import tir

    ib = tir.ir_builder.create()
    buf = tir.decl_buffer((64,), "float32", name="A")
    A = ib.buffer_ptr(buf)
    tx = te.thread_axis("threadIdx.x")
    ib.scope_attr(tx, "thread_extent", 64)
    cond = tx < 4 if under_thread_condition else tvm.tir.const(1, "int32") < 4
    with ib.if_scope(cond):
        A[tx] = 1.0
        ib.emit(tir.Evaluate(tir.Call("int32", "tir.tvm_storage_sync", [tir.StringImm("shared")])))
    return tir.PrimFunc([buf.data], ib.get(), attrs={"calling_conv": "device_kernel",
                                                      "global_symbol": "k"})


def test_barrier_in_non_uniform_control_flow_is_refused():
    from tvmpy.codegen.wgsl import emit_wgsl

    assert "workgroupBarrier();" in emit_wgsl([_barrier_kernel(False)])["k"].wgsl
    with pytest.raises(GPUCodegenError, match="uniform control flow"):
        emit_wgsl([_barrier_kernel(True)])


def test_vectorized_inner_loop_is_scalarized():
    n = 4 * 37
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    o, v = s[B].split(B.op.axis[0], factor=4)
    bx, tx = s[B].split(o, factor=16)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].vectorize(v)
    f = tvm.build(s, [A, B], "webgpu")
    a = np.random.default_rng(4).standard_normal(n).astype("float32")
    out = np.zeros(n, "float32")
    f(a, out)
    np.testing.assert_allclose(out, a * 3 + 1, rtol=1e-6)
