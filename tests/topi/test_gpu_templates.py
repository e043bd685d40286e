"""The GPU AutoTVM templates of topi/cuda (conv2d_nchw.cuda, depthwise_conv2d_nchw.cuda,
dense.cuda, batch_matmul.cuda) on OpenCL (PoCL here) against numpy: the fallback config and
random valid configs of each space, on awkward shapes (primes, stride 2, padding, channel
multipliers, batch 1, broadcast batch)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm.measure.local_builder import gpu_limits
from tvmpy.autotvm.task.task import deserialize_args
from tvmpy.target import Target
from tvmpy.tir.analysis import gpu_code_errors
from tvmpy.topi import cuda, testing

RNG = np.random.default_rng(2026)
TARGET = Target("opencl")


@pytest.fixture(scope="module")
def dev():
    d = tvm.opencl(0)
    assert d.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return d


def _rand(*shape):
    return RNG.uniform(-1.0, 1.0, size=shape).astype("float32")


def _run(dev, s, tensors, inputs):
    f = tvm.build(s, tensors, target=TARGET)
    out_t = tensors[-1]
    out = tvm.nd.empty(tuple(int(d) for d in out_t.shape), out_t.dtype, dev)
    f(*[tvm.nd.array(x, dev) for x in inputs], out)
    return out.numpy()


def _random_valid_configs(task, n, max_tries=400):
    """``n`` random configs of ``task``'s space that pass verify_gpu_code for the target."""
    space, found = task.config_space, []
    for _ in range(max_tries):
        cfg = space.get(int(RNG.integers(len(space))))
        if cfg["auto_unroll_max_step"].val > 512:  # keep the test's compile time small
            continue
        s, args = task.instantiate(cfg)
        if not gpu_code_errors(tvm.lower(s, args, target=TARGET), gpu_limits(TARGET)):
            found.append(cfg)
            if len(found) == n:
                return found
    raise AssertionError(f"fewer than {n} valid configs in {max_tries} samples of {task}")


def _check(dev, task_name, args, inputs, ref, n_random=2):
    """Fallback config and ``n_random`` random valid configs of the task against ``ref``."""
    task = autotvm.task.create(task_name, args, target=TARGET)
    with TARGET, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no tuned config": the fallback is what we test
        s, tensors = task.func(*deserialize_args(task.args))
    got = _run(dev, s, tensors, inputs)
    tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, atol=tol, rtol=1e-4, err_msg="fallback config")
    for cfg in _random_valid_configs(task, n_random):
        s, tensors = task.instantiate(cfg)
        got = _run(dev, s, tensors, inputs)
        np.testing.assert_allclose(got, ref, atol=tol, rtol=1e-4, err_msg=str(cfg))


def _tensor(shape):
    return ("TENSOR", tuple(shape), "float32")


@pytest.mark.parametrize("n,c,h,w,oc,k,stride,pad", [
    (1, 3, 13, 11, 7, 3, 1, 1),   # primes everywhere
    (2, 16, 14, 14, 32, 3, 2, 1),  # stride 2, batch 2
    (1, 5, 9, 9, 12, 1, 1, 0),    # 1x1
])
def test_conv2d_nchw_cuda(dev, n, c, h, w, oc, k, stride, pad):
    a, wt = _rand(n, c, h, w), _rand(oc, c, k, k)
    ref = testing.conv2d_nchw_python(a, wt, stride, pad)
    _check(dev, "conv2d_nchw.cuda", (_tensor(a.shape), _tensor(wt.shape), stride, pad, 1),
           [a, wt], ref)


@pytest.mark.parametrize("n,c,h,w,mult,k,stride,pad", [
    (1, 7, 11, 11, 1, 5, 1, 2),
    (2, 5, 13, 17, 2, 3, 2, 1),  # channel multiplier 2, stride 2
])
def test_depthwise_conv2d_nchw_cuda(dev, n, c, h, w, mult, k, stride, pad):
    a, wt = _rand(n, c, h, w), _rand(c, mult, k, k)
    ref = testing.depthwise_conv2d_nchw_python(a, wt, stride, pad)
    _check(dev, "depthwise_conv2d_nchw.cuda", (_tensor(a.shape), _tensor(wt.shape), stride, pad, 1),
           [a, wt], ref)


@pytest.mark.parametrize("m,n,k", [(1, 67, 31), (37, 29, 53), (64, 48, 96)])
def test_dense_cuda(dev, m, n, k):
    a, wt = _rand(m, k), _rand(n, k)
    _check(dev, "dense.cuda", (_tensor(a.shape), _tensor(wt.shape)), [a, wt], a @ wt.T)


@pytest.mark.parametrize("ba,bb,m,n,k", [(3, 3, 17, 19, 23), (1, 4, 8, 24, 16)])
def test_batch_matmul_cuda(dev, ba, bb, m, n, k):
    a, b = _rand(ba, m, k), _rand(bb, n, k)
    ref = np.matmul(a, b.transpose(0, 2, 1))
    _check(dev, "batch_matmul.cuda", (_tensor(a.shape), _tensor(b.shape)), [a, b], ref)


def test_conv2d_fused_relu_and_bias(dev):
    """An elementwise tail (bias + relu, as relay fuses it) is the tiled output; the conv
    becomes the local accumulator stage."""
    a, wt, bias = _rand(1, 6, 10, 10), _rand(8, 6, 3, 3), _rand(8)
    data = te.placeholder(a.shape, name="data")
    weight = te.placeholder(wt.shape, name="weight")
    b = te.placeholder(bias.shape, name="bias")
    with TARGET, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conv = cuda.conv2d_nchw(data, weight, 1, 1, 1)
        out = te.compute(conv.shape, lambda i, j, y, x: te.max(conv[i, j, y, x] + b[j], 0.0),
                         name="relu", tag="elemwise")
        s = cuda.schedule_conv2d_nchw([out])
    got = _run(dev, s, [data, weight, b, out], [a, wt, bias])
    ref = np.maximum(testing.conv2d_nchw_python(a, wt, 1, 1) + bias[None, :, None, None], 0)
    np.testing.assert_allclose(got, ref, atol=1e-4, rtol=1e-4)


def test_fallback_respects_target_thread_limit():
    """The fallback tiles fit the current target's threads per block (here a 64-thread
    OpenCL device) and pass verify_gpu_code."""
    small = Target("opencl -max_num_threads=64")
    data = te.placeholder((1, 64, 56, 56), name="data")
    weight = te.placeholder((64, 64, 3, 3), name="weight")
    with small, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cuda.conv2d_nchw(data, weight, 1, 1, 1)
        s = cuda.schedule_conv2d_nchw([out])
    func = tvm.lower(s, [data, weight, out], target=small)
    assert gpu_code_errors(func, gpu_limits(small)) == []
    assert "threadIdx.x" in str(func) and ".shared" in str(func)


def test_symbolic_shape_is_a_clear_error():
    n = te.var("n")
    a = te.placeholder((n, 16), name="a")
    w = te.placeholder((8, 16), name="w")
    with TARGET, pytest.raises((TypeError, ValueError), match="Var|not a constant"):
        cuda.dense(a, w)


@pytest.mark.parametrize("op", ["conv2d", "depthwise", "dense", "batch_matmul"])
def test_templates_compile_for_cuda_and_run_host_emulated(op, tmp_path):
    """target "cuda": the fallback schedules go through NVRTC + ptxas (no GPU needed), then
    the generated CUDA C runs on the host (tvmpy.testing.cuda_fake: threads of a block as OS
    threads, __syncthreads honoured) against numpy."""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    cuda_t = Target("cuda")
    if op == "conv2d":
        shapes, fc, fs = ((1, 5, 9, 7), (6, 5, 3, 3)), cuda.conv2d_nchw, cuda.schedule_conv2d_nchw
        extra = (2, 1, 1)
        ref = lambda a, w: testing.conv2d_nchw_python(a, w, 2, 1)  # noqa: E731
    elif op == "depthwise":
        shapes, fc = ((1, 6, 10, 10), (6, 1, 3, 3)), cuda.depthwise_conv2d_nchw
        fs, extra = cuda.schedule_depthwise_conv2d_nchw, (1, 1, 1)
        ref = lambda a, w: testing.depthwise_conv2d_nchw_python(a, w, 1, 1)  # noqa: E731
    elif op == "dense":
        shapes, fc, fs, extra = ((5, 19), (13, 19)), cuda.dense, cuda.schedule_dense, ()
        ref = lambda a, w: a @ w.T  # noqa: E731
    else:
        shapes, fc, fs, extra = ((2, 5, 7), (2, 6, 7)), cuda.batch_matmul, \
            cuda.schedule_batch_matmul, ()
        ref = lambda a, b: np.matmul(a, b.transpose(0, 2, 1))  # noqa: E731
    a_t = te.placeholder(shapes[0], name="a")
    b_t = te.placeholder(shapes[1], name="b")
    with cuda_t, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fc(a_t, b_t, *extra)
        s = fs([out])
    mod = tvm.build(s, [a_t, b_t, out], target=cuda_t)
    dev_mod = mod.imported_modules[0]
    assert dev_mod.ptxas_info  # ptxas accepted the PTX for every arch
    a, b = _rand(*shapes[0]), _rand(*shapes[1])
    got = np.zeros(tuple(int(d) for d in out.shape), "float32")
    host = HostKernels(dev_mod.get_source(), mod.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        mod(a, b, got)
    finally:
        cuda_module.set_driver(prev)
    np.testing.assert_allclose(got, ref(a, b), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("m,n,k,vec", [(128, 64, 32, "float4"), (96, 128, 18, "float2"),
                                       (64, 64, 40, "float4")])
def test_dense_cuda_vectorized_fallback_host_emulated(m, n, k, vec, tmp_path):
    """The SIMT GEMM fallback of dense.cuda on exactly tiled shapes: float4 (float2 where the
    rows only allow 8-byte alignment) global loads stored transposed into k-major shared
    tiles, vector shared -> register loads, ptxas without spills, then run on the host
    emulation against numpy."""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    cuda_t = Target("cuda")
    a_t, w_t = te.placeholder((m, k), name="a"), te.placeholder((n, k), name="w")
    with cuda_t, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cuda.dense(a_t, w_t)
        s = cuda.schedule_dense([out])
    mod = tvm.build(s, [a_t, w_t, out], target=cuda_t)
    dev_mod = mod.imported_modules[0]
    src = dev_mod.get_source()
    assert f"const {vec} " in src  # a wide global load, stored lane by lane (transposed)
    for arch in ("sm_80", "sm_90"):
        (info,) = dev_mod.ptxas_info[arch].values()
        assert info.spill_stores == 0 and info.registers <= 128
    a, w = _rand(m, k), _rand(n, k)
    got = np.zeros((m, n), "float32")
    host = HostKernels(src, mod.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        mod(a, w, got)
    finally:
        cuda_module.set_driver(prev)
    np.testing.assert_allclose(got, a @ w.T, atol=1e-4, rtol=1e-4)


def _dense_vthread_double_buffer_configs(task, k, n, rng):
    """``n`` random configs of ``task`` with double_buffer on and more than one virtual
    thread, that pass verify_gpu_code for the target."""
    space, found = task.config_space, []
    for _ in range(600):
        cfg = space.get(int(rng.integers(len(space))))
        if (not cfg["double_buffer"].val or cfg["auto_unroll_max_step"].val > 64
                or cfg["tile_y"].size[1] * cfg["tile_x"].size[1] == 1
                or k // cfg["tile_k"].size[-1] < 2):
            continue
        s, args = task.instantiate(cfg)
        if not gpu_code_errors(tvm.lower(s, args, target=TARGET), gpu_limits(TARGET)):
            found.append(cfg)
            if len(found) == n:
                return found
    raise AssertionError(f"fewer than {n} such configs in 600 samples of {task}")


@pytest.mark.parametrize("m,n,k,seed", [(64, 32, 48, 0), (32, 64, 36, 1), (24, 40, 30, 2)])
def test_dense_cuda_double_buffer_with_vthreads(dev, m, n, k, seed, tmp_path):
    """Random dense.cuda configs with double_buffer and 2+ virtual threads (each vthread's
    copy of a tile double-buffered: InjectDoubleBuffer takes them together) on OpenCL and as
    CUDA C on the host emulation, against numpy."""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    rng = np.random.default_rng(seed)
    a, w = rng.uniform(-1, 1, (m, k)).astype("float32"), rng.uniform(-1, 1, (n, k)).astype(
        "float32")
    ref = a @ w.T
    task = autotvm.task.create("dense.cuda", (_tensor((m, k)), _tensor((n, k))), target=TARGET)
    for i, cfg in enumerate(_dense_vthread_double_buffer_configs(task, k, 2, rng)):
        s, tensors = task.instantiate(cfg)
        np.testing.assert_allclose(_run(dev, s, tensors, [a, w]), ref, atol=1e-4, rtol=1e-4,
                                   err_msg=str(cfg))
        if i:  # NVRTC + ptxas + the host compiler: one config per shape
            continue
        with Target("cuda"):
            s, tensors = task.instantiate(cfg)
        mod = tvm.build(s, tensors, target="cuda")
        got = np.full((m, n), np.nan, "float32")
        host = HostKernels(mod.imported_modules[0].get_source(), mod.plan["kernels"],
                           str(tmp_path))
        prev = cuda_module.set_driver(FakeDriver(host.kernels))
        try:
            mod(a, w, got)
        finally:
            cuda_module.set_driver(prev)
        np.testing.assert_allclose(got, ref, atol=1e-4, rtol=1e-4, err_msg="cuda " + str(cfg))


@pytest.mark.parametrize("m,n,k,vy,vx,kt", [(256, 128, 48, 2, 2, 16), (128, 256, 40, 2, 2, 8),
                                            (128, 128, 64, 1, 2, 16)])
def test_dense_cuda_vthread_tiles_double_buffered_host_emulated(m, n, k, vy, vx, kt, tmp_path):
    """The SIMT GEMM tiles of bench/gpu_gemm.py (16x16 threads, vthreads of 4x4 outputs,
    float4 copies) with double_buffer: one barrier per k step (every vthread's copy writes
    the next half), run on the host emulation against numpy."""
    from tvmpy.autotvm.space import OtherOptionEntity, SplitEntity
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    task = autotvm.task.create("dense.cuda", (_tensor((m, k)), _tensor((n, k))), target="cuda")
    cfg = task.config_space.get(0)
    for key, val in (("tile_y", SplitEntity([-1, vy, 16, 4])),
                     ("tile_x", SplitEntity([-1, vx, 16, 4])), ("tile_k", SplitEntity([-1, kt])), ("vectorize", OtherOptionEntity(1)),
                     ("double_buffer", OtherOptionEntity(1)),
                     ("auto_unroll_max_step", OtherOptionEntity(512)),
                     ("unroll_explicit", OtherOptionEntity(1))):
        cfg._entity_map[key] = val
    with Target("cuda"):
        s, tensors = task.instantiate(cfg)
    mod = tvm.build(s, tensors, target="cuda")
    src = mod.imported_modules[0].get_source()
    loop = src[src.index("for (int32_t k_c_outer"):]
    assert src.count("__syncthreads();") == 2 and loop.count("__syncthreads();") == 1, src
    a, w = _rand(m, k), _rand(n, k)
    got = np.full((m, n), np.nan, "float32")
    host = HostKernels(src, mod.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        mod(a, w, got)
    finally:
        cuda_module.set_driver(prev)
    np.testing.assert_allclose(got, a @ w.T, atol=1e-4, rtol=1e-4)
