"""Target "vulkan" end to end on lavapipe: SPIR-V from the GPU lowering (codegen/spirv_*.py,
codegen/vulkan.py), validated by spirv-val, run by runtime/vulkan_module.py, against numpy:
elementwise with symbolic sizes and guards, math, shared-memory tiled GEMM, cross-thread
reductions, the TOPI GPU templates (conv2d, dense), two-kernel plans, export/load,
time_evaluator and the clear errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from vkt_common import vulkan_device

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm.task.task import deserialize_args
from tvmpy.codegen import vulkan
from tvmpy.codegen.gpu_source import GPUCodegenError
from tvmpy.target import Target
from tvmpy.testing.gpu_schedules import row_reduce, tiled_gemm
from tvmpy.topi import testing


@pytest.fixture(scope="module")
def dev():
    return vulkan_device()


RNG = np.random.default_rng(31)


def _rand(shape, dtype="float32", lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def _bind_1d(s, stage, axis, factor):
    bx, tx = s[stage].split(axis, factor=factor)
    s[stage].bind(bx, te.thread_axis("blockIdx.x"))
    s[stage].bind(tx, te.thread_axis("threadIdx.x"))


@pytest.fixture(scope="module")
def add_exp():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.exp(A[i]) * B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    _bind_1d(s, C, C.op.axis[0], 64)  # 64 divides none of the sizes below: guards
    return tvm.build(s, [A, B, C], target="vulkan", name="add_exp")


def test_target_and_device():
    t = Target("vulkan")
    assert t.is_gpu and "gpu" in t.keys and "vulkan" in t.keys and t.host.kind == "llvm"
    d = tvm.vulkan(0)
    assert d.device_type == 7 and tvm.device("vulkan", 0) == d
    assert tvm.runtime.enabled("vulkan")


@pytest.mark.parametrize("n", [1, 63, 1000, 4099])
def test_elementwise_symbolic_guarded(add_exp, dev, n):
    a, b = _rand(n), _rand(n)
    c = tvm.nd.empty((n,), "float32", dev)
    add_exp(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), np.exp(a) * b + 1, rtol=1e-5, atol=1e-6)


def test_module_holds_spirv_that_validates(add_exp):
    dm = add_exp.imported_modules[0]
    spv = {k: v for k, v in dm.binaries.items() if k.startswith("spirv:")}
    assert list(spv) == ["spirv:add_exp_kernel0"]
    blob = spv["spirv:add_exp_kernel0"]
    assert blob[:4] == (0x07230203).to_bytes(4, "little")
    vulkan.validate(blob)
    with pytest.raises(vulkan.SpirvValidationError, match="spirv-val rejected"):
        vulkan.validate(blob[:-8])  # truncated: no OpFunctionEnd
    assert "LocalSize 64 1 1" in dm.get_source()


def test_host_numpy_arrays(add_exp):
    a, b = _rand(37), _rand(37)
    c = np.zeros(37, "float32")
    add_exp(a, b, c)  # copied in and back
    np.testing.assert_allclose(c, np.exp(a) * b + 1, rtol=1e-5, atol=1e-6)


def test_math_intrinsics(dev):
    n = 257
    A = te.placeholder((n,), name="A")
    fns = [("tanh", te.tanh, np.tanh), ("sigmoid", te.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
           ("erf", te.erf, None), ("sqrt_abs", lambda x: te.sqrt(te.abs(x)), lambda x: np.sqrt(np.abs(x))),
           ("log1p", lambda x: te.log(te.abs(x) + 1.0), lambda x: np.log(np.abs(x) + 1)),
           ("floor", te.floor, np.floor), ("pow", lambda x: te.power(te.abs(x), 1.5),
                                           lambda x: np.abs(x) ** 1.5)]
    import math

    def elementwise(f):
        return te.compute((n,), lambda i: f(A[i]), name="B")

    for name, f, ref in fns:
        B = elementwise(f)
        s = te.create_schedule(B.op)
        _bind_1d(s, B, B.op.axis[0], 32)
        mod = tvm.build(s, [A, B], target="vulkan")
        a = _rand(n, lo=-4, hi=4)
        a[:3] = [30.0, -30.0, 0.0]  # tanh must saturate, not overflow to NaN
        b = tvm.nd.empty((n,), "float32", dev)
        mod(tvm.nd.array(a, dev), b)
        want = ref(a) if ref is not None else np.array([math.erf(x) for x in a], "float32")
        np.testing.assert_allclose(b.numpy(), want, rtol=2e-5, atol=2e-6, err_msg=name)


@pytest.mark.parametrize("shape", [(37, 29, 53), (64, 64, 64), (1, 1, 1)])
def test_tiled_gemm_shared_memory(dev, shape):
    M, N, K = shape
    s, args = tiled_gemm(M, N, K)
    f = tvm.build(s, args, target="vulkan")
    a, b = _rand((M, K)), _rand((K, N))
    c = tvm.nd.empty((M, N), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rfactor,m,reducer", [(True, 37, "sum"), (False, 13, "max"),
                                                (False, 64, "sum")])
def test_cross_thread_reduction(dev, rfactor, m, reducer):
    n = 7
    s, A, B = row_reduce(n, m, rfactor, reducer)
    f = tvm.build(s, [A, B], target="vulkan")
    a = _rand((n, m))
    b = tvm.nd.array(np.full(n, 9.0, "float32"), dev)
    f(tvm.nd.array(a, dev), b)
    ref = a.sum(1) if reducer == "sum" else a.max(1)
    np.testing.assert_allclose(b.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_two_kernels_symbolic(dev):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    E_ = te.compute((n,), lambda i: te.exp(A[i]), name="E")
    B = te.compute((n,), lambda i: E_[i] / (E_[i] + 1.0), name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, E_, E_.op.axis[0], 32)
    _bind_1d(s, B, B.op.axis[0], 16)
    f = tvm.build(s, [A, B], target="vulkan")
    for size in (5, 333):
        a = _rand(size)
        b = tvm.nd.empty((size,), "float32", dev)
        f(tvm.nd.array(a, dev), b)
        np.testing.assert_allclose(b.numpy(), np.exp(a) / (np.exp(a) + 1), rtol=1e-5)


def test_int64_and_float64(dev):
    n = 45
    A = te.placeholder((n,), name="A", dtype="int64")
    X = te.placeholder((n,), name="X", dtype="float64")
    B = te.compute((n,), lambda i: A[i] * 3000000000 // 7 + te.floormod(A[i], 5), name="B")
    Y = te.compute((n,), lambda i: te.sqrt(te.abs(X[i])) * X[i], name="Y")
    s = te.create_schedule([B.op, Y.op])
    _bind_1d(s, B, B.op.axis[0], 16)
    _bind_1d(s, Y, Y.op.axis[0], 16)
    f = tvm.build(s, [A, X, B, Y], target="vulkan")
    a = RNG.integers(-10**6, 10**6, n).astype("int64")
    x = _rand(n, "float64", -5, 5)
    b, y = tvm.nd.empty((n,), "int64", dev), tvm.nd.empty((n,), "float64", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(x, dev), b, y)
    np.testing.assert_array_equal(b.numpy(), a * 3000000000 // 7 + a % 5)
    np.testing.assert_allclose(y.numpy(), np.sqrt(np.abs(x)) * x, rtol=1e-14)


def _template(dev, task_name, args, inputs, ref):
    target = Target("vulkan")
    task = autotvm.task.create(task_name, args, target=target)
    with target, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuned config: the fallback is what runs
        s, tensors = task.func(*deserialize_args(task.args))
    f = tvm.build(s, tensors, target=target)
    out_t = tensors[-1]
    out = tvm.nd.empty(tuple(int(d) for d in out_t.shape), out_t.dtype, dev)
    f(*[tvm.nd.array(x, dev) for x in inputs], out)
    tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(out.numpy(), ref, atol=tol, rtol=1e-4)


def _tensor(shape):
    return ("TENSOR", tuple(shape), "float32")


@pytest.mark.parametrize("n,c,h,w,oc,k,stride,pad", [(1, 3, 13, 11, 7, 3, 1, 1),
                                                     (2, 8, 9, 9, 16, 3, 2, 1)])
def test_topi_conv2d_template(dev, n, c, h, w, oc, k, stride, pad):
    a, wt = _rand((n, c, h, w)), _rand((oc, c, k, k))
    _template(dev, "conv2d_nchw.cuda", (_tensor(a.shape), _tensor(wt.shape), stride, pad, 1),
              [a, wt], testing.conv2d_nchw_python(a, wt, stride, pad))


@pytest.mark.parametrize("m,n,k", [(1, 10, 37), (17, 33, 65)])
def test_topi_dense_template(dev, m, n, k):
    a, wt = _rand((m, k)), _rand((n, k))
    _template(dev, "dense.cuda", (_tensor(a.shape), _tensor(wt.shape)), [a, wt], a @ wt.T)


def test_export_load_round_trip(add_exp, dev, tmp_path):
    path = str(tmp_path / "add_exp.so")
    add_exp.export_library(path)
    loaded = tvm.runtime.load_module(path)
    dm = loaded.imported_modules[0]
    assert {k for k in dm.binaries if k.startswith("spirv:")} == {"spirv:add_exp_kernel0"}
    a, b = _rand(99), _rand(99)
    c = tvm.nd.empty((99,), "float32", dev)
    loaded["add_exp"](tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), np.exp(a) * b + 1, rtol=1e-5, atol=1e-6)


def test_time_evaluator(add_exp, dev):
    a, b = _rand(512), _rand(512)
    c = tvm.nd.empty((512,), "float32", dev)
    res = add_exp.time_evaluator("add_exp", dev, number=3, repeat=2)(
        tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    assert len(res.results) == 2 and all(t > 0 for t in res.results)
    np.testing.assert_allclose(c.numpy(), np.exp(a) * b + 1, rtol=1e-5, atol=1e-6)


# ---- clear errors -----------------------------------------------------------------------------
def test_float16_and_int8_storage(dev):
    n = 29
    A = te.placeholder((n,), name="A", dtype="float16")
    Q = te.placeholder((n,), name="Q", dtype="int8")
    B = te.compute((n,), lambda i: A[i] * te.const(2, "float16") + Q[i].astype("float16"),
                   name="B")
    M = te.compute((n,), lambda i: Q[i] > 3, name="M")  # bool buffer: one byte per element
    s = te.create_schedule([B.op, M.op])
    _bind_1d(s, B, B.op.axis[0], 8)
    _bind_1d(s, M, M.op.axis[0], 8)
    f = tvm.build(s, [A, Q, B, M], target="vulkan")
    feats = f.imported_modules[0].binaries
    assert b"shaderFloat16" in feats["features:default_function_kernel0"] or \
        b"shaderFloat16" in feats["features:default_function_kernel1"]
    a = _rand(n, "float16", -3, 3)
    q = RNG.integers(-128, 127, n).astype("int8")
    b, m = tvm.nd.empty((n,), "float16", dev), tvm.nd.empty((n,), "bool", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(q, dev), b, m)
    np.testing.assert_allclose(b.numpy(), a * np.float16(2) + q.astype("float16"), rtol=1e-3)
    np.testing.assert_array_equal(m.numpy(), q > 3)


def test_symbolic_workgroup_size_refused():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(Exception, match="symbolic extent|workgroup size|threads"):
        tvm.build(s, [A, B], target="vulkan")


def test_float64_transcendental_refused():
    A = te.placeholder((8,), name="A", dtype="float64")
    B = te.compute((8,), lambda i: te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], 8)
    with pytest.raises(GPUCodegenError, match="exp on float64.*compute in float32"):
        tvm.build(s, [A, B], target="vulkan")


def test_missing_device_feature_is_a_clear_error(dev):
    from tvmpy.runtime.vulkan_module import VULKAN_API

    ctx = VULKAN_API.context(0)
    saved = dict(ctx.features)
    ctx.features["shaderInt64"] = False
    try:
        with pytest.raises(RuntimeError, match="64-bit integers.*lacks the shaderInt64"):
            VULKAN_API.load_binaries({"spirv:k": b"", "features:k": b"shaderInt64"}, 0)
    finally:
        ctx.features.update(saved)


def test_no_such_device():
    assert not tvm.vulkan(7).exist
    with pytest.raises(ValueError, match=r"no Vulkan device vulkan\(7\); devices: 0: "):
        tvm.nd.empty((3,), "float32", tvm.vulkan(7))


def test_grid_limit_is_a_clear_error(dev):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], 1)
    f = tvm.build(s, [A, B], target="vulkan")
    from tvmpy.runtime.vulkan_module import VULKAN_API

    limit = VULKAN_API.context(0).props.limits.maxComputeWorkGroupCount[0]
    if limit >= 1 << 24:  # a device without a small limit: nothing to check cheaply
        return
    big = limit + 1
    with pytest.raises(ValueError, match="maxComputeWorkGroupCount"):
        f(tvm.nd.empty((big,), "float32", dev), tvm.nd.empty((big,), "float32", dev))


def test_bound_launches_release_their_descriptor_sets(dev):
    """Each direct call binds its launch (a command buffer + a descriptor set) and drops it:
    600 calls stay in the first pool of 256 sets."""
    from tvmpy.runtime.vulkan_module import VULKAN_API

    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], target="vulkan")
    a = _rand(64)
    before = len(VULKAN_API.context(0).desc_pools)
    for _ in range(600):
        b = np.zeros(64, "float32")
        f(a, b)
    np.testing.assert_allclose(b, a + 1)
    assert len(VULKAN_API.context(0).desc_pools) <= max(before, 1)


def test_tvm_testing_knows_vulkan(monkeypatch):
    """Not in DEFAULT_TEST_TARGETS (the suite's parametrized tests stay on llvm/opencl);
    TVM_TEST_TARGETS=vulkan enables it, and requires_vulkan then runs."""
    monkeypatch.setenv("TVM_TEST_TARGETS", "llvm;vulkan")
    assert tvm.testing.device_enabled("vulkan")
    assert ("vulkan", tvm.vulkan(0)) in tvm.testing.enabled_targets()
    marks = tvm.testing.requires_vulkan()
    assert {m.name for m in marks} >= {"vulkan", "skipif", "gpu"}
    skip = [m for m in marks if m.name == "skipif"][0]
    assert not skip.args[0]  # runs here (lavapipe)


def test_every_build_runs_spirv_val_here(monkeypatch):
    """TVMPY_SPIRV_VALIDATE=1 (vkt_common): a shader spirv-val rejects fails the build."""
    from tvmpy.codegen import spirv_emit

    real = spirv_emit.emit_kernel

    def broken(func):
        info = real(func)
        info.spirv = info.spirv[:-8]  # no OpFunctionEnd
        return info

    monkeypatch.setattr(vulkan, "emit_kernel", broken)
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(vulkan.SpirvValidationError, match="spirv-val rejected"):
        tvm.build(s, [A, B], target="vulkan")


def test_device_module_save_says_use_export_library(add_exp, tmp_path):
    with pytest.raises(ValueError, match="not saved on its own.*export_library"):
        add_exp.imported_modules[0].save(str(tmp_path / "k.spv"))


def test_queued_launches_are_submitted_in_batches(dev):
    """Launches queue up until a sync or host copy (or 256 of them): 300 in-place increments
    of one array, queued then read back, all ran in order."""
    from tvmpy.runtime.vulkan_module import VULKAN_API

    A = te.placeholder((77,), name="A")
    B = te.compute((77,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], 32)
    f = tvm.build(s, [A, B], target="vulkan")
    a, b = tvm.nd.array(np.zeros(77, "float32"), dev), tvm.nd.empty((77,), "float32", dev)
    fa, fb = f.get_function("default_function"), f.get_function("default_function")
    state_ab, state_ba = fa.state([a, b]), fb.state([b, a])
    for _ in range(150):  # a -> b -> a: each launch reads what the previous one wrote
        fa.run(state_ab)
        fb.run(state_ba)
    ctx = VULKAN_API.context(0)
    assert len(ctx.batch) < 256  # flushed on the way
    np.testing.assert_array_equal(a.numpy(), np.full(77, 300.0, "float32"))
    assert not ctx.batch
