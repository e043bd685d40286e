"""The steps of TVM's tutorial "Working with Operators Using Tensor Expression" on tvmpy: a
vector add defined in TE, built for llvm naive / parallel / vectorized and timed, the GPU version
as generated source (CUDA C through NVRTC; OpenCL run on PoCL), the compiled module
saved and loaded back, and the matrix multiply of its second half under the tutorial's
schedules. Small sizes, checked against numpy."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
import tvmpy.testing
from tvmpy import te
from tvmpy.contrib import cc, utils

RNG = np.random.default_rng(2608)


def _opencl():
    """PoCL's OpenCL device: installed wherever the suite runs (README), so its absence fails."""
    dev = tvm.cl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return dev
HOST = tvm.target.Target(target="llvm", host="llvm")


def _loops(func):
    """(loop var name, ForKind) of every loop of a lowered function, outermost first."""
    out = []
    # pre-order: a loop before the loops inside it, siblings in program order
    tvm.tir.stmt_functor.ir_transform(
        func.body, lambda s: out.append((s.loop_var.name, s.kind)), None, ["tir.For"])
    return out


def _vector_add():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    return A, B, C


def _run_add(func, dev, n):
    a = tvm.nd.array(RNG.uniform(size=n).astype("float32"), dev)
    b = tvm.nd.array(RNG.uniform(size=n).astype("float32"), dev)
    c = tvm.nd.array(np.zeros(n, dtype="float32"), dev)
    func(a, b, c)
    tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    return a, b, c


def test_vector_add_naive_parallel_vectorized():
    A, B, C = _vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], HOST, name="myadd")
    dev = tvm.device(HOST.kind.name, 0)
    assert dev == tvm.cpu(0)
    for n in (1024, 1, 131):
        a, b, c = _run_add(fadd, dev, n)
    log = [("naive", fadd.time_evaluator(fadd.entry_name, dev, number=3)(a, b, c).mean)]

    s[C].parallel(C.op.axis[0])
    assert _loops(tvm.lower(s, [A, B, C], simple_mode=True)) == [("i", tvm.tir.ForKind.PARALLEL)]
    fadd_parallel = tvm.build(s, [A, B, C], HOST, name="myadd_parallel")
    for n in (1024, 1, 131):
        a, b, c = _run_add(fadd_parallel, dev, n)
    log.append(("parallel", fadd_parallel.time_evaluator(fadd_parallel.entry_name, dev,
                                                          number=3)(a, b, c).mean))

    A, B, C = _vector_add()
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    lowered = tvm.lower(s, [A, B, C], simple_mode=True)
    assert _loops(lowered)[0] == ("i.outer", tvm.tir.ForKind.PARALLEL)
    assert "ramp(" in str(lowered)  # the inner 4 lanes became vector accesses
    fadd_vector = tvm.build(s, [A, B, C], HOST, name="myadd_vector")
    for n in (1024, 4, 3, 131):  # whole vectors, one, and remainders
        a, b, c = _run_add(fadd_vector, dev, n)
    log.append(("vector", fadd_vector.time_evaluator(fadd_vector.entry_name, dev,
                                                      number=3)(a, b, c).mean))
    assert all(t > 0 for _, t in log)


def _gpu_add_schedule():
    A, B, C = _vector_add()
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def test_vector_add_cuda_source():
    s, args = _gpu_add_schedule()
    fadd = tvm.build(s, args, target=tvm.target.Target(target="cuda", host="llvm"), name="myadd")
    dev_module = fadd.imported_modules[0]
    src = dev_module.get_source()
    assert "__global__" in src and "blockIdx.x" in src and "threadIdx.x" in src
    assert ".entry myadd_kernel0(" in dev_module.get_source("ptx")  # NVRTC compiled it


def test_vector_add_opencl_runs():
    s, args = _gpu_add_schedule()
    fadd_cl = tvm.build(s, args, tvm.target.Target(target="opencl", host="llvm"), name="myadd")
    assert "__kernel" in fadd_cl.imported_modules[0].get_source()
    for n in (1024, 67):
        _run_add(fadd_cl, _opencl(), n)


def test_export_library_and_load(tmp_path):
    temp = utils.tempdir(str(tmp_path))
    A, B, C = _vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], HOST, name="myadd")
    fadd.export_library(temp.relpath("myadd_pack.so"))
    fadd2 = tvm.runtime.load_module(temp.relpath("myadd_pack.so"))
    _run_add(fadd2, tvm.cpu(0), 77)
    # host code and the OpenCL kernel in one library
    gs, args = _gpu_add_schedule()
    fcl = tvm.build(gs, args, tvm.target.Target("opencl", host="llvm"), name="myadd")
    fcl.export_library(temp.relpath("myadd_cl.so"))
    _run_add(tvm.runtime.load_module(temp.relpath("myadd_cl.so")), _opencl(), 77)


def test_save_object_create_shared_load(tmp_path):
    temp = utils.tempdir(str(tmp_path))
    A, B, C = _vector_add()
    s = te.create_schedule(C.op)
    fadd = tvm.build(s, [A, B, C], HOST, name="myadd")
    fadd.save(temp.relpath("myadd.o"))
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    assert sorted(temp.listdir()) == ["myadd.o", "myadd.so"]
    fadd1 = tvm.runtime.load_module(temp.relpath("myadd.so"))
    _run_add(fadd1, tvm.cpu(0), 77)


def test_save_host_and_device_code_then_import(tmp_path):
    temp = utils.tempdir(str(tmp_path))
    s, args = _gpu_add_schedule()
    fadd = tvm.build(s, args, tvm.target.Target("opencl", host="llvm"), name="myadd")
    fadd.imported_modules[0].save(temp.relpath("myadd.cl"))
    fadd.save(temp.relpath("myadd.o"))
    cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
    fadd1 = tvm.runtime.load_module(temp.relpath("myadd.so"))
    fadd1.import_module(tvm.runtime.load_module(temp.relpath("myadd.cl")))
    _run_add(fadd1, _opencl(), 77)


# ---- second half: matrix multiply under the tutorial's schedules -------------------------------
M, K, N, BN = 70, 37, 64, 32  # M, K not multiples of the tiles; N divides into packed blocks


def _matmul_schedules():
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    yield "none", te.create_schedule(C.op), [A, B, C]

    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=4)
    s[C].reorder(xo, yo, ko, ki, xi, yi)
    yield "blocking", s, [A, B, C]
    s[C].vectorize(yi)
    yield "vectorization", s, [A, B, C]

    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    ko, ki = s[C].split(s[C].op.reduce_axis[0], factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    s[C].vectorize(yi)
    yield "loop permutation", s, [A, B, C]

    k = te.reduce_axis((0, K), "k")
    packedB = te.compute((N // BN, K, BN), lambda x, y, z: B[y, x * BN + z], name="packedB")
    C = te.compute((M, N), lambda x, y: te.sum(
        A[x, k] * packedB[y // BN, k, tvm.tir.indexmod(y, BN)], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    ko, ki = s[C].split(s[C].op.reduce_axis[0], factor=4)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    s[C].vectorize(yi)
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    yield "array packing", s, [A, B, C]

    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], BN, BN)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=4)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    yield "block caching", s, [A, B, C]
    s[C].parallel(xo)
    yield "parallelization", s, [A, B, C]


def test_matmul_schedules_match_numpy():
    dev = tvm.device(HOST.kind.name, 0)
    a = tvm.nd.array(RNG.uniform(size=(M, K)).astype("float32"), dev)
    b = tvm.nd.array(RNG.uniform(size=(K, N)).astype("float32"), dev)
    answer = a.numpy() @ b.numpy()
    names = []
    for name, s, args in _matmul_schedules():
        func = tvm.build(s, args, target=HOST, name="mmult")
        c = tvm.nd.array(np.full((M, N), np.nan, dtype="float32"), dev)
        func(a, b, c)
        tvm.testing.assert_allclose(c.numpy(), answer, rtol=1e-5)
        assert func.time_evaluator(func.entry_name, dev, number=1)(a, b, c).mean > 0
        names.append(name)
    assert len(names) == 7
