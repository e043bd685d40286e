"""Target "cuda" without a GPU: the generated CUDA C, NVRTC -> PTX and ptxas -> cubin for sm_80 and
sm_90 (so syntax, register and shared-memory errors fail here), the launch plan driving a fake
driver (tvmpy/testing/cuda_fake.py), export/load, and the no-GPU errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir
from tvmpy.contrib import nvcc
from tvmpy.runtime import cuda_module
from tvmpy.testing.cuda_fake import FakeDriver, view
from tvmpy.testing.gpu_schedules import row_reduce, tiled_gemm
from tvmpy.tir import expr as E

RNG = np.random.default_rng(14)
ELF = b"\x7fELF"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _bind_1d(s, stage, axis, factor):
    bx, tx = s[stage].split(axis, factor=factor)
    s[stage].bind(bx, te.thread_axis("blockIdx.x"))
    s[stage].bind(tx, te.thread_axis("threadIdx.x"))


def _dev_module(f):
    return f.imported_modules[0]


@pytest.fixture(scope="module")
def add_exp():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.exp(A[i]) * B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    _bind_1d(s, C, C.op.axis[0], 64)  # 64 divides no size below: guards
    return tvm.build(s, [A, B, C], target="cuda", name="add_exp")


def test_elementwise_source_ptx_cubins(add_exp):
    dm = _dev_module(add_exp)
    src = dm.get_source()
    assert ('extern "C" __global__ void __launch_bounds__(64) add_exp_kernel0(float* __restrict__ A, '
            'float* __restrict__ B, float* __restrict__ C, int32_t n)') in src
    assert "blockIdx.x" in src and "threadIdx.x" in src and "expf(" in src
    assert "< n)" in src  # the guard of the partial last block
    ptx = dm.get_source("ptx")
    assert ".visible .entry add_exp_kernel0(" in ptx and ".target sm_80" in ptx
    assert set(dm.binaries) == {"ptx", "sm_80", "sm_90"}
    assert dm.binaries["sm_80"].startswith(ELF) and dm.binaries["sm_90"].startswith(ELF)
    for arch in ("sm_80", "sm_90"):
        info = dm.ptxas_info[arch]["add_exp_kernel0"]
        assert info.arch == arch and 0 < info.registers <= 255 and info.spill_stores == 0


def _emulate_add_exp(drv, grid, block, shared, a, b, c, n):
    assert grid == ((n + 63) // 64, 1, 1) and block == (64, 1, 1) and shared == 0
    view(c, n, "float32")[:] = np.exp(view(a, n, "float32")) * view(b, n, "float32") + 1.0


@pytest.fixture
def fake(add_exp):
    _dev_module(add_exp)._programs.clear()  # loaded through an earlier test's driver
    drv = FakeDriver({"add_exp_kernel0": (["handle"] * 3 + ["int32"], _emulate_add_exp)})
    prev = cuda_module.set_driver(drv)
    yield drv
    cuda_module.set_driver(prev)


@pytest.mark.parametrize("n", [1, 63, 1000])
def test_launch_plan_on_fake_driver(add_exp, fake, n):
    """The plan's grid for symbolic n, the argument order and packing, the cubin chosen."""
    a, b = RNG.uniform(0.1, 1, n).astype("float32"), RNG.uniform(0.1, 1, n).astype("float32")
    dev = tvm.cuda(0)
    c = tvm.nd.empty((n,), "float32", dev)
    add_exp(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), np.exp(a) * b + 1.0, rtol=1e-6)
    assert fake.loaded == [_dev_module(add_exp).binaries["sm_90"]]
    assert fake.launches[-1][4][3] == n
    host_c = np.zeros(n, "float32")  # host arrays: copied in and back
    add_exp(a, b, host_c)
    np.testing.assert_allclose(host_c, np.exp(a) * b + 1.0, rtol=1e-6)


def test_ptx_loaded_on_other_arch(add_exp, fake):
    fake.arch = (8, 9)  # no sm_89 cubin: the PTX (compute_80) is JIT-compiled by the driver
    a = tvm.nd.array(np.ones(5, "float32"), tvm.cuda(0))
    add_exp(a, a, a)
    assert fake.loaded == [_dev_module(add_exp).binaries["ptx"]]


def test_no_gpu_errors(add_exp):
    prev = cuda_module.set_driver(None)
    try:
        if cuda_module.CUDA_API.exist(0):
            pytest.skip("a CUDA device is present")
        assert not tvm.cuda(0).exist
        with pytest.raises(RuntimeError, match="no CUDA device"):
            add_exp(np.ones(3, "float32"), np.ones(3, "float32"), np.ones(3, "float32"))
    finally:
        cuda_module.set_driver(prev)


def test_export_load_round_trip(add_exp, fake, tmp_path):
    path = str(tmp_path / "add_exp.so")
    add_exp.export_library(path)
    m = tvm.runtime.load_module(path)
    dm = _dev_module(m)
    assert dm.binaries == _dev_module(add_exp).binaries  # PTX and cubins embedded
    assert dm.get_source() == _dev_module(add_exp).get_source()
    assert ".entry add_exp_kernel0" in dm.get_source("ptx")
    x = RNG.uniform(0.1, 1, 70).astype("float32")
    c = tvm.nd.empty((70,), "float32", tvm.cuda(0))
    m(tvm.nd.array(x, tvm.cuda(0)), tvm.nd.array(x, tvm.cuda(0)), c)
    np.testing.assert_allclose(c.numpy(), np.exp(x) * x + 1.0, rtol=1e-6)


def test_tiled_gemm_shared_memory_and_barriers():
    s, args = tiled_gemm(37, 29, 53)
    f = tvm.build(s, args, target="cuda")
    dm = _dev_module(f)
    src = dm.get_source()
    assert "__launch_bounds__(64)" in src
    assert "__shared__ float A_shared[64];" in src and "__shared__ float B_shared[64];" in src
    assert src.count("__syncthreads();") >= 2  # before reading the tiles, before overwriting
    assert "threadIdx.y" in src and "blockIdx.y" in src
    import re

    declared = sum(4 * int(m) for m in re.findall(r"__shared__ float \w+\[(\d+)\];", src))
    for arch in ("sm_80", "sm_90"):
        info = next(iter(dm.ptxas_info[arch].values()))
        assert info.shared_bytes == declared >= 2 * 64 * 4  # as ptxas counts the tiles


def test_vthread():
    n = 256
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, x = s[B].split(B.op.axis[0], factor=64)
    vx, tx = s[B].split(x, nparts=4)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(vx, te.thread_axis("vthread"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], target="cuda")
    src = _dev_module(f).get_source()
    assert "vthread" not in src and "__launch_bounds__(16)" in src
    assert src.count("B[") == 4  # four virtual threads, interleaved into one thread's code


def test_warp_shuffles():
    n = 128
    A = te.placeholder((n,), name="A")
    mask = E.Call("int32", "tir.tvm_warp_activemask", [])
    B = te.compute((n,), lambda i: E.Call("float32", "tir.tvm_warp_shuffle_down",
                                          [tir.const(-1, "int32"), A[i], 16, 32, 32])
                   + E.Call("float32", "tir.tvm_warp_shuffle", [mask, A[i], 3, 32, 32]), name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], 32)
    f = tvm.build(s, [A, B], target="cuda")
    src = _dev_module(f).get_source()
    assert "__shfl_down_sync(-1, A[" in src and "__shfl_sync(__activemask(), A[" in src
    assert "shfl.sync.down.b32" in _dev_module(f).get_source("ptx")


def test_float16_and_math():
    n = 100
    H = te.placeholder((n,), name="H", dtype="float16")
    X = te.placeholder((n,), name="X")
    G = te.compute((n,), lambda i: H[i] * H[i] + tir.const(1.0, "float16"), name="G")
    Y = te.compute((n,), lambda i: te.tanh(X[i]) + te.erf(X[i]) + te.sqrt(X[i]), name="Y")
    s = te.create_schedule([G.op, Y.op])
    _bind_1d(s, G, G.op.axis[0], 32)
    _bind_1d(s, Y, Y.op.axis[0], 32)
    f = tvm.build(s, [H, X, G, Y], target="cuda")
    src = _dev_module(f).get_source()
    assert "tvmpy_half" in src and "cvt.rn.f16.f32" in src
    assert "tanhf(" in src and "erff(" in src and "sqrtf(" in src


def test_fast_math_option():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], 32)
    precise = _dev_module(tvm.build(s, [A, B], target="cuda")).get_source("ptx")
    with tvm.transform.PassContext(config={"cuda.fast_math": True}):
        fast = _dev_module(tvm.build(s, [A, B], target="cuda")).get_source("ptx")
    assert "ex2.approx.ftz.f32" in fast and fast != precise


def test_target_arch_option():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], 32)
    dm = _dev_module(tvm.build(s, [A, B], target="cuda -arch=sm_86"))
    assert set(dm.binaries) == {"ptx", "sm_86"} and ".target sm_86" in dm.get_source("ptx")


# ---- toolchain errors --------------------------------------------------------------------------
_KERNEL = """extern "C" __global__ void k(float* __restrict__ a) {
  __shared__ float s[SIZE];
  s[threadIdx.x] = a[threadIdx.x];
  __syncthreads();
  a[threadIdx.x] = s[SIZE - 1 - threadIdx.x];
}
"""


def test_nvrtc_error_has_log_and_excerpt():
    with pytest.raises(nvcc.CompileError) as err:
        nvcc.compile_cuda(_KERNEL.replace("SIZE", "32").replace("float* __r", "flot* __r"))
    msg = str(err.value)
    assert "NVRTC could not compile" in msg and 'identifier "flot" is undefined' in msg
    assert '>    1 | extern "C" __global__ void k(flot*' in msg


def test_ptxas_rejects_shared_memory_overuse():
    ptx = nvcc.compile_cuda(_KERNEL.replace("SIZE", str(64 * 1024)), arch="sm_80")  # 256 KiB
    with pytest.raises(nvcc.CompileError, match="too much shared data"):
        nvcc.ptxas(ptx, "sm_80")
    cubin, info = nvcc.ptxas(nvcc.compile_cuda(_KERNEL.replace("SIZE", "1024"), arch="sm_80"),
                             "sm_90")
    assert cubin.startswith(ELF) and info["k"].shared_bytes == 4096


def test_ptxas_rejects_newer_ptx_target():
    ptx = nvcc.compile_cuda(_KERNEL.replace("SIZE", "32"), arch="sm_90")
    with pytest.raises(nvcc.CompileError, match="newer than the requested sm_80"):
        nvcc.ptxas(ptx, "sm_80")


def test_compile_cuda_arguments():
    code = _KERNEL.replace("SIZE", "32")
    assert nvcc.compile_cuda(code, "cubin", "sm_80").startswith(ELF)
    with pytest.raises(ValueError, match="target_format"):
        nvcc.compile_cuda(code, "fatbin")
    with pytest.raises(ValueError, match="invalid CUDA arch"):
        nvcc.compile_cuda(code, "ptx", "volta")
    assert nvcc.get_target_compute_version("sm_90") == "9.0"


@pytest.mark.parametrize("rfactor,reducer", [(True, "sum"), (False, "max")])
def test_cross_thread_reduction_compiles(rfactor, reducer):
    """A reduction axis bound to threadIdx.x, through NVRTC and ptxas: 16 threads (a power of
    two within a warp) reduce with warp shuffles, 37 threads with the shared-memory tree."""
    s, A, B = row_reduce(7, 37, rfactor, reducer)
    dm = _dev_module(tvm.build(s, [A, B], target="cuda"))
    src, ptx = dm.get_source(), dm.get_source("ptx")
    if rfactor:
        assert "__shfl_down_sync(" in src and "__activemask()" in src
        assert "shfl.sync.down.b32" in ptx and "__shared__" not in src
    else:
        assert "__shared__ float" in src and "__syncthreads();" in src and "bar.sync" in ptx
        assert all(i.shared_bytes > 0 for i in dm.ptxas_info["sm_90"].values())


def test_special_float_constants_and_int_types():
    A = te.placeholder((64,), name="A")
    I = te.placeholder((64,), name="I", dtype="int64")
    U = te.placeholder((64,), name="U", dtype="uint8")
    B = te.compute((64,), lambda i: te.max(A[i], tir.const(float("-inf"), "float32"))
                   + tir.const(float("nan"), "float64").astype("float32")
                   + (I[i] // 3 + U[i].astype("int64") % 5).astype("float32"), name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], 32)
    src = _dev_module(tvm.build(s, [A, I, U, B], target="cuda")).get_source()
    assert "INFINITY" in src and "NAN" in src and "int64_t* __restrict__ I" in src


def test_gpu_check_script_builds_without_gpu(tmp_path):
    """bench/gpu_check.py (the check a lent GPU machine runs) keeps building: without a GPU it
    compiles every kernel through NVRTC/LLVM + ptxas and exits 0."""
    import json
    import subprocess
    import sys

    root = ROOT
    out = tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=root)
    proc = subprocess.run([sys.executable, os.path.join(root, "bench", "gpu_check.py"),
                           "--sizes", "256", "--out", str(out)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    if not report["ran"]:
        assert "nothing ran" in proc.stdout
        assert {k.split(" [")[1] for k in report["gemm"]} == {"cuda]", "nvptx]"}


@pytest.mark.parametrize("n", [1, 64, 1000])
def test_generated_kernels_run_host_emulated(n, tmp_path):
    """The generated CUDA C of barrier-free kernels (symbolic n with guards; vthread), compiled
    for the host and run thread by thread through the real plans: results against numpy."""
    from tvmpy.testing.cuda_fake import HostKernels

    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: te.exp(A[i]) * 0.5 + te.tanh(A[i]), name="B")
    s = te.create_schedule(B.op)
    _bind_1d(s, B, B.op.axis[0], 64)
    V = te.compute((256,), lambda i: A[i] * 2.0 + 1.0, name="V")
    sv = te.create_schedule(V.op)
    bx, x = sv[V].split(V.op.axis[0], factor=64)
    vx, tx = sv[V].split(x, nparts=4)
    sv[V].bind(bx, te.thread_axis("blockIdx.x"))
    sv[V].bind(vx, te.thread_axis("vthread"))
    sv[V].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], target="cuda", name="ew")
    fv = tvm.build(sv, [A, V], target="cuda", name="vt")
    x = RNG.standard_normal(max(n, 256)).astype("float32")
    for mod, k in ((f, n), (fv, 256)):
        host = HostKernels(_dev_module(mod).get_source(), mod.plan["kernels"], str(tmp_path))
        prev = cuda_module.set_driver(FakeDriver(host.kernels))
        try:
            out = np.zeros(k, "float32")
            mod(x[:k], out)
        finally:
            cuda_module.set_driver(prev)
        want = np.exp(x[:k]) * 0.5 + np.tanh(x[:k]) if mod is f else x[:k] * 2 + 1
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def _host_run(mod, args, tmp_path):
    from tvmpy.testing.cuda_fake import HostKernels

    host = HostKernels(_dev_module(mod).get_source(), mod.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        mod(*args)
    finally:
        cuda_module.set_driver(prev)


def test_gemm_with_barriers_host_emulated(tmp_path):
    """Shared-memory tiles, cooperative fetching and __syncthreads, each thread of a block an
    OS thread: the tiled GEMM (awkward sizes) and the TVM tutorial schedule with vthreads."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", os.path.join(ROOT, "bench",
                                                                           "gpu_check.py"))
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    gemm_schedule = gpu_check.gemm_schedule

    for (M, N, K), build_args in (((37, 29, 53), None), ((70, 36, 19), {"threads": 8,
                                                                         "vthreads": True})):
        if build_args is None:
            s, args = tiled_gemm(M, N, K)
        else:
            s, args = gemm_schedule(M, N, K, block=32, **build_args)
        f = tvm.build(s, args, target="cuda")
        a = RNG.uniform(-1, 1, (M, K)).astype("float32")
        b = RNG.uniform(-1, 1, (K, N)).astype("float32")
        c = np.zeros((M, N), "float32")
        _host_run(f, (a, b, c), tmp_path)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("threads,reducer", [(32, "sum"), (16, "max"), (37, "sum")])
def test_cross_thread_reduction_host_emulated(threads, reducer, tmp_path):
    """Warp shuffles (32, 16 threads) and the shared-memory tree (37) give numpy's result."""
    A = te.placeholder((5, 101), name="A")
    k = te.reduce_axis((0, 101), name="k")
    fn = te.sum if reducer == "sum" else te.max
    B = te.compute((5,), lambda i: fn(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    tx = te.thread_axis("threadIdx.x")
    ko, _ = s[B].split(B.op.reduce_axis[0], nparts=threads)
    BF = s.rfactor(B, ko)
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
    f = tvm.build(s, [A, B], target="cuda")
    assert ("__shfl_down_sync" in _dev_module(f).get_source()) == (threads != 37)
    a = RNG.uniform(-1, 1, (5, 101)).astype("float32")
    out = np.zeros(5, "float32")
    _host_run(f, (a, out), tmp_path)
    np.testing.assert_allclose(out, a.sum(1) if reducer == "sum" else a.max(1), rtol=1e-5,
                               atol=1e-5)


def test_shared_memory_over_the_hardware_limit_fails_at_build():
    """A 64 KiB static shared tile: refused by the target's limit (48 KiB) before codegen, and
    by ptxas when the target's limit is raised past what the hardware allows statically."""
    m = 16384
    A = te.placeholder((4, m), name="A")
    B = te.compute((4, m), lambda i, j: A[i, j] + A[i, m - 1 - j], name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    i, j = s[B].op.axis
    s[B].bind(i, te.thread_axis("blockIdx.x"))
    _, ji = s[B].split(j, factor=256)
    s[B].bind(ji, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[B], i)
    _, t = s[AA].split(s[AA].op.axis[1], factor=256)
    s[AA].bind(t, te.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match="65536 bytes of shared memory per block exceed"):
        tvm.build(s, [A, B], target="cuda")
    with pytest.raises(nvcc.CompileError, match="too much shared data"):
        tvm.build(s, [A, B], target="cuda -max_shared_memory_per_block=100000")


def test_keyword_tensor_names_compile():
    """Tensors named like C++/CUDA words ("new", "this", "threadIdx") get other identifiers:
    NVRTC and ptxas accept the kernel."""
    A = te.placeholder((37,), name="this")
    B = te.placeholder((37,), name="threadIdx")
    C = te.compute((37,), lambda i: A[i] * 2.0 + B[i], name="new")
    s = te.create_schedule(C.op)
    _bind_1d(s, C, C.op.axis[0], 16)
    dm = _dev_module(tvm.build(s, [A, B, C], target="cuda", name="kw"))
    head = dm.get_source().split("kw_kernel0(", 1)[1].split(")", 1)[0]
    assert "this_" in head and "threadIdx_" in head and "new_" in head
    assert dm.binaries["sm_80"].startswith(ELF)
