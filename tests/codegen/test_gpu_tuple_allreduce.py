"""Cross-thread reductions with a tuple combiner (topi argmax/argmin: an (index, value) pair)
with the reduction axis on threadIdx.x: the shared-memory tree on OpenCL (PoCL) and for groups
that are no power of two, warp shuffles of both values on CUDA/nvptx (run host-emulated, the
lanes as OS threads; the PTX assembled by ptxas). Ties: the first index wins, as in numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.runtime import cuda_module
from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

RNG = np.random.default_rng(2024)


def argreduce(fn, rows, k, threads=None):
    """``fn`` over the rows of a (rows, k) tensor, a block per row; the reduction axis bound to
    threadIdx.x (``threads``: split into that many parts first, each thread a serial share)."""
    A = te.placeholder((rows, k), name="A")
    B = getattr(topi, fn)(A, axis=1)
    R = B.op.input_tensors[0]
    s = te.create_schedule(B.op)
    tx = te.thread_axis("threadIdx.x")
    s[R].bind(R.op.axis[0], te.thread_axis("blockIdx.x"))
    if threads is None:
        s[R].bind(R.op.reduce_axis[0], tx)
    else:
        ko, _ = s[R].split(R.op.reduce_axis[0], nparts=threads)
        s[R].bind(ko, tx)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    return s, [A, B]


def _run(f, target, a, out, tmp_path):
    if target == "opencl":
        dev = tvm.opencl(0)
        o = tvm.nd.array(out, dev)
        f(tvm.nd.array(a, dev), o)
        out[...] = o.numpy()
        return
    dm = f.imported_modules[0]
    host = (HostKernels(dm.get_source(), f.plan["kernels"], str(tmp_path)) if target == "cuda"
            else HostKernels.from_nvptx(dm.get_source(), f.plan["kernels"], str(tmp_path)))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        f(a, out)
    finally:
        cuda_module.set_driver(prev)


CASES = [("argmax", 1, None), ("argmin", 13, None), ("argmax", 37, None), ("argmin", 32, None),
         ("argmax", 100, 16), ("argmin", 61, 24)]


@pytest.mark.parametrize("target", ["opencl", "cuda", "nvptx"])
@pytest.mark.parametrize("fn,k,threads", CASES)
def test_argreduce_over_threads(target, fn, k, threads, tmp_path):
    rows = 5
    s, args = argreduce(fn, rows, k, threads)
    f = tvm.build(s, args, target=target)
    group = threads or k
    warp = target != "opencl" and group in (16, 32)
    if target == "cuda":
        src = f.imported_modules[0].get_source()
        assert ("__shfl_down_sync" in src) == warp
        assert src.count("__shfl_down_sync") == (2 * int(np.log2(group)) if warp else 0)
        assert ("__shared__" in src) == (not warp and group > 1)
    ties = RNG.integers(-2, 2, (rows, k)).astype("float32")  # many equal values per row
    for a in (RNG.standard_normal((rows, k)).astype("float32"), ties):
        out = np.full(rows, -7, "int32")
        _run(f, target, a, out, tmp_path)
        np.testing.assert_array_equal(out, getattr(np, fn)(a, axis=1))


def test_argmax_ptx_assembles_for_both_forms():
    """Both forms through NVRTC -> PTX -> ptxas (cubins for the configured archs)."""
    for threads in (32, 24):
        s, args = argreduce("argmax", 3, 50, threads)
        dm = tvm.build(s, args, target="cuda").imported_modules[0]
        ptx = dm.get_source("ptx")
        assert ("shfl.sync.down.b32" in ptx) == (threads == 32)
        assert dm.ptxas_info and all(dm.ptxas_info.values())
        ptx = tvm.build(s, args, target="nvptx").imported_modules[0].get_source("ptx")
        assert ("shfl.sync.down.b32" in ptx) == (threads == 32)


@pytest.mark.parametrize("target", ["opencl", "cuda"])
def test_rfactor_argmin_across_threads(target, tmp_path):
    """TVM's rfactor form: 32 partial (index, value) pairs per row (each a serial share of the
    101 columns) computed at the thread, then combined across threadIdx.x (shuffles on CUDA)."""
    A = te.placeholder((5, 101), name="A")
    B = topi.argmin(A, axis=1)
    red = B.op.input_tensors[0]
    s = te.create_schedule(B.op)
    ko, _ = s[red].split(red.op.reduce_axis[0], nparts=32)
    rf = s.rfactor(red, ko)
    s[red].bind(s[red].op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    s[rf[0]].compute_at(s[red], s[red].op.reduce_axis[0])
    s[red].bind(s[red].op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    f = tvm.build(s, [A, B], target=target)
    if target == "cuda":
        assert f.imported_modules[0].get_source().count("__shfl_down_sync") == 10
    a = RNG.integers(-3, 3, (5, 101)).astype("float32")
    out = np.zeros(5, "int32")
    _run(f, target, a, out, tmp_path)
    np.testing.assert_array_equal(out, np.argmin(a, axis=1))
