"""Storage scope "warp" (LowerWarpMemory, tvmpy/tir/transform/lower_warp_memory.py): memory shared
by the threadIdx.x lanes of a group. CUDA/nvptx: registers + warp shuffles (the CUDA C and the
nvptx IR run host-emulated with the lanes as OS threads; NVRTC + ptxas assemble the PTX);
OpenCL: shared memory per group, run on PoCL. All against numpy, awkward sizes."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.runtime import cuda_module
from tvmpy.testing.cuda_fake import FakeDriver, HostKernels
from tvmpy.tir.transform.lower_warp_memory import WarpMemoryError

RNG = np.random.default_rng(1414)


def _run(f, target, arrays, tmp_path):
    """Run built module ``f`` on ``arrays`` (numpy, outputs written back)."""
    if target == "opencl":
        dev = tvm.opencl(0)
        nd = [tvm.nd.array(a, dev) for a in arrays]
        f(*nd)
        for a, x in zip(arrays, nd):
            a[...] = x.numpy()
        return
    dm = f.imported_modules[0]
    if target == "cuda":
        host = HostKernels(dm.get_source(), f.plan["kernels"], str(tmp_path))
    else:
        host = HostKernels.from_nvptx(dm.get_source(), f.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        f(*arrays)
    finally:
        cuda_module.set_driver(prev)


def warp_gemm(M, N, K, lanes=32, step=1):
    """C = A @ B; each block's row of A is fetched into warp memory (``step`` consecutive
    elements per lane per round), every lane then reads all of it (a shuffle per k)."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AW = s.cache_read(A, "warp", [C])
    tx = te.thread_axis("threadIdx.x")
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=lanes)
    s[C].bind(i, te.thread_axis("blockIdx.y"))
    s[C].bind(jo, te.thread_axis("blockIdx.x"))
    s[C].bind(ji, tx)
    s[AW].compute_at(s[C], jo)
    ko, _ = s[AW].split(s[AW].op.axis[1], factor=step)
    _, ki = s[AW].split(ko, factor=lanes)
    s[AW].bind(ki, tx)
    return s, [A, B, C]


def neighbours(n, lanes, rows):
    """B[r, i] = 2 A[r, i] + A[r, first of i's chunk of ``lanes``] (+ A[r, the next in the chunk,
    cyclically] when ``lanes`` divides ``n``): a warp buffer per threadIdx.y row; each lane
    reads its own element, the chunk's first lane's (a broadcast) and its neighbour's."""
    A = te.placeholder((rows, n), name="A")

    def f(r, i):
        base = i // lanes * lanes
        v = A[r, i] * 2.0 + A[r, base]
        return v + A[r, base + (i + 1) % lanes] if n % lanes == 0 else v

    B = te.compute((rows, n), f, name="B")
    s = te.create_schedule(B.op)
    AW = s.cache_read(A, "warp", [B])
    tx, ty = te.thread_axis("threadIdx.x"), te.thread_axis("threadIdx.y")
    r, i = s[B].op.axis
    io, ii = s[B].split(i, factor=lanes)
    s[B].bind(r, ty)
    s[B].bind(ii, tx)
    s[AW].compute_at(s[B], r)
    _, at = s[AW].split(s[AW].op.axis[1], factor=lanes)
    s[AW].bind(at, tx)
    return s, [A, B]


@pytest.mark.parametrize("target", ["opencl", "cuda", "nvptx"])
@pytest.mark.parametrize("shape,lanes,step", [((5, 50, 45), 32, 1), ((1, 32, 1), 32, 1),
                                             ((3, 7, 67), 16, 3)])
def test_warp_cache_read_gemm(target, shape, lanes, step, tmp_path):
    """Guards on the reader (N not a multiple of the lanes: the shuffles stay outside them),
    a one-element row, 16 lanes with 3 elements per lane per round (threadIdx.x stride 3)."""
    M, N, K = shape
    s, args = warp_gemm(M, N, K, lanes, step)
    f = tvm.build(s, args, target=target)
    src = f.imported_modules[0].get_source()
    if target == "cuda":
        assert "__shfl_sync(__activemask(), A_warp[" in src and "__shared__" not in src
        assert "shfl.sync.idx.b32" in f.imported_modules[0].get_source("ptx")
    elif target == "nvptx":
        assert "@llvm.nvvm.shfl.sync.idx.f32(" in src
        assert "shfl.sync.idx.b32" in f.imported_modules[0].get_source("ptx")
    else:
        assert "__local float A_warp" in src and "barrier(CLK_LOCAL_MEM_FENCE)" in src
    a = RNG.uniform(-1, 1, (M, K)).astype("float32")
    b = RNG.uniform(-1, 1, (K, N)).astype("float32")
    c = np.zeros((M, N), "float32")
    _run(f, target, [a, b, c], tmp_path)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["opencl", "cuda", "nvptx"])
@pytest.mark.parametrize("n,lanes,rows", [(61, 16, 3), (64, 32, 2)])
def test_warp_neighbour_read_with_thread_rows(target, n, lanes, rows, tmp_path):
    """Lanes fewer than the warp (16: two groups per warp, shuffle width 16), several
    threadIdx.y groups, a length that is no multiple of anything."""
    s, args = neighbours(n, lanes, rows)
    low = tvm.lower(s, args, target=target)
    if target != "opencl":
        text = str(low)
        assert "'local'" in text and "'warp'" not in text and "tvm_warp_shuffle(" in text
    f = tvm.build(s, args, target=target)
    a = RNG.uniform(-1, 1, (rows, n)).astype("float32")
    b = np.zeros((rows, n), "float32")
    _run(f, target, [a, b], tmp_path)
    want = a * 2 + np.repeat(a[:, ::lanes], lanes, axis=1)[:, :n]
    if n % lanes == 0:
        want += np.roll(a.reshape(rows, -1, lanes), -1, axis=2).reshape(rows, n)
    np.testing.assert_allclose(b, want, rtol=1e-6, atol=1e-6)


def _lanes_read_different_registers():
    A = te.placeholder((64,), name="A")
    B = te.compute((32,), lambda i: A[i * 2], name="B")
    s = te.create_schedule(B.op)
    AW = s.cache_read(A, "warp", [B])
    tx = te.thread_axis("threadIdx.x")
    bx, t = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(t, tx)
    s[AW].compute_at(s[B], bx)
    _, ai = s[AW].split(s[AW].op.axis[0], factor=32)
    s[AW].bind(ai, tx)
    # lane t reads element 2t: register (2t) // 32 of lane (2t) % 32 depends on t
    return s, [A, B]


def test_lanes_reading_different_registers_refused_on_cuda_run_on_opencl():
    s, args = _lanes_read_different_registers()
    for target in ("cuda", "nvptx"):
        with pytest.raises(WarpMemoryError, match="lanes would read different registers"):
            tvm.lower(s, args, target=target)
    f = tvm.build(s, args, target="opencl")  # shared memory has no such restriction
    a = RNG.uniform(-1, 1, 64).astype("float32")
    b = np.zeros(32, "float32")
    _run(f, "opencl", [a, b], None)
    np.testing.assert_array_equal(b, a[::2])


@pytest.mark.parametrize("lanes", [24, 64])
def test_lanes_not_a_warp_segment_refused(lanes):
    """threadIdx.x of 24 (not a power of two) or 64 (more than a warp) cannot share registers
    through shuffles: a clear error on CUDA, while OpenCL (shared memory) runs it."""
    s, args = warp_gemm(3, lanes, 29, lanes=lanes)
    with pytest.raises(WarpMemoryError, match="power-of-two extent dividing the warp size 32"):
        tvm.build(s, args, target="cuda")
    f = tvm.build(s, args, target="opencl")
    a = RNG.uniform(-1, 1, (3, 29)).astype("float32")
    b = RNG.uniform(-1, 1, (29, lanes)).astype("float32")
    c = np.zeros((3, lanes), "float32")
    _run(f, "opencl", [a, b, c], None)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_store_of_another_lanes_element_refused():
    """Lane tx storing element tx + 1, which lives in lane tx + 1's registers."""
    from tvmpy.tir import expr as E
    from tvmpy.tir import stmt as S
    from tvmpy.tir.buffer import decl_buffer
    from tvmpy.tir.transform import lower_warp_memory_func

    tx = te.thread_axis("threadIdx.x")
    A = decl_buffer((32,), "float32", "A")
    W = decl_buffer((64,), "float32", "W", scope="warp")
    one = E.const(1, "int32")
    body = S.Allocate(W, S.seq(S.BufferStore(W, E.BufferLoad(A, [tx.var]),
                                             [tx.var + one]),
                               S.BufferStore(A, E.BufferLoad(W, [tx.var]), [tx.var])))
    func = tvm.tir.PrimFunc([A.data], S.AttrStmt(tx, "thread_extent", E.const(32, "int32"), body),
                            buffer_map={A.data: A})
    with pytest.raises(WarpMemoryError, match="writes the element of lane"):
        lower_warp_memory_func(func, tvm.target.Target("cuda"))


def test_interpreter_runs_lowered_shuffles():
    """The TIR interpreter's GPU semantics (tvm_warp_shuffle as a block-wide exchange) give the
    same numbers for the CUDA-lowered IR (16-lane segments, 3 threadIdx.y groups)."""
    from tvmpy.driver import lower_gpu
    from tvmpy.tir import interpreter

    n, lanes, rows = 40, 16, 3
    s, args = neighbours(n, lanes, rows)
    mod = lower_gpu([tvm.lower(s, args, target="cuda")], "cuda")
    a = RNG.uniform(-1, 1, (rows, n)).astype("float32")
    b = np.zeros((rows, n), "float32")
    interpreter.build(mod)["default_function"](a, b)
    want = a * 2 + np.repeat(a[:, ::lanes], lanes, axis=1)[:, :n]
    np.testing.assert_allclose(b, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("target", ["cuda", "nvptx"])
def test_shuffle_inside_a_lazy_select(target, tmp_path):
    """A warp read in one arm of if_then_else on the lane (a lazy ``?:``): the shuffle is
    computed before the statement, so every lane takes part in it."""
    n, lanes = 32, 32
    A = te.placeholder((1, n), name="A")
    B = te.compute((1, n), lambda r, i: tvm.tir.if_then_else(
        i % 3 == 0, A[r, (i + 5) % lanes], A[r, i] * 2.0), name="B")
    s = te.create_schedule(B.op)
    AW = s.cache_read(A, "warp", [B])
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(s[B].op.axis[1], tx)
    s[AW].compute_at(s[B], s[B].op.axis[0])
    s[AW].bind(s[AW].op.axis[1], tx)
    f = tvm.build(s, [A, B], target=target)
    a = RNG.uniform(-1, 1, (1, n)).astype("float32")
    b = np.zeros((1, n), "float32")
    _run(f, target, [a, b], tmp_path)
    i = np.arange(n)
    np.testing.assert_allclose(b[0], np.where(i % 3 == 0, a[0, (i + 5) % lanes], a[0] * 2))
