"""Target "opencl" end to end on PoCL's CPU device: codegen (codegen/opencl.py, gpu_source.py),
the launch plan and the runtime (runtime/gpu_module.py, opencl_module.py), against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.testing.gpu_schedules import row_reduce, tiled_gemm

RNG = np.random.default_rng(14)


@pytest.fixture(scope="module")
def dev():
    d = tvm.opencl(0)
    assert d.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return d


def _bind_1d(s, stage, axis, factor):
    bx, tx = s[stage].split(axis, factor=factor)
    s[stage].bind(bx, te.thread_axis("blockIdx.x"))
    s[stage].bind(tx, te.thread_axis("threadIdx.x"))


def _rand(shape, dtype="float32", lo=0.1, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(dtype)


# ---- elementwise, symbolic sizes, guards ------------------------------------------------------
@pytest.fixture(scope="module")
def add_exp():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.exp(A[i]) * B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    _bind_1d(s, C, C.op.axis[0], 64)  # 64 does not divide the sizes below: guards
    return tvm.build(s, [A, B, C], target="opencl", name="add_exp")


@pytest.mark.parametrize("n", [1, 63, 1000])
def test_elementwise_symbolic_guarded(add_exp, dev, n):
    a, b = _rand(n), _rand(n)
    c = tvm.nd.empty((n,), "float32", dev)
    add_exp(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), np.exp(a) * b + 1.0, rtol=1e-5)


def test_source_and_modules(add_exp):
    assert add_exp.type_key == "gpu_host" and add_exp.entry_name == "add_exp"
    src = add_exp.imported_modules[0].get_source()
    assert "__kernel void __attribute__((reqd_work_group_size(64, 1, 1))) add_exp_kernel0(" in src
    assert "(__global float* restrict A, __global float* restrict B" in src
    assert "get_group_id(0)" in src and "get_local_id(0)" in src and "< n" in src
    assert add_exp.imported_modules[0].type_key == "opencl"


def test_host_numpy_arrays_are_copied(add_exp):
    a, b = _rand(77), _rand(77)
    c = np.full(77, 5.0, "float32")
    add_exp(a, b, c)  # host arrays: copied in, the written one copied back
    np.testing.assert_allclose(c, np.exp(a) * b + 1.0, rtol=1e-5)
    cn = tvm.nd.array(np.full(77, 5.0, "float32"))  # CPU NDArray: same
    add_exp(a, b, cn)
    np.testing.assert_allclose(cn.numpy(), np.exp(a) * b + 1.0, rtol=1e-5)


def test_argument_errors(add_exp, dev):
    a, b, c = (tvm.nd.array(_rand(10), dev) for _ in range(3))
    with pytest.raises(ValueError, match="argument B dim 0 is 11, but n=10"):
        add_exp(a, tvm.nd.array(_rand(11), dev), c)
    with pytest.raises(ValueError, match="argument C must have dtype float32, got float64"):
        add_exp(a, b, tvm.nd.array(np.ones(10), dev))
    with pytest.raises(TypeError, match="takes 3 argument"):
        add_exp(a, b)
    with pytest.raises(TypeError, match="argument A must be a tvm.nd.NDArray"):
        add_exp([1.0] * 10, b, c)
    with pytest.raises(ValueError, match="read-only"):
        ro = _rand(10)
        ro.flags.writeable = False
        add_exp(a, b, ro)


def test_device_array_on_cpu_function_is_refused(dev):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target="llvm")
    with pytest.raises(ValueError, match="argument A is on opencl\\(0\\), but .* runs on cpu\\(0\\)"):
        f(tvm.nd.array(_rand(8), dev), tvm.nd.empty((8,), "float32"))


# ---- NDArray on device memory ----------------------------------------------------------------
def test_ndarray_round_trips(dev):
    x = _rand((3, 5))
    d = tvm.nd.array(x, dev)
    assert d.device == dev and d.shape == (3, 5) and d.dtype == "float32"
    np.testing.assert_array_equal(d.numpy(), x)
    e = tvm.nd.empty((3, 5), "float32", dev)
    e.copyfrom(d)  # device to device
    np.testing.assert_array_equal(e.numpy(), x)
    h = d.copyto(tvm.cpu(0))  # device to host
    assert h.device == tvm.cpu(0)
    np.testing.assert_array_equal(h.numpy(), x)
    back = tvm.nd.array(h, dev)  # host NDArray to device
    np.testing.assert_array_equal(back.numpy(), x)
    e[1, 2] = 7.5
    assert e.numpy()[1, 2] == 7.5 and np.asarray(e).shape == (3, 5)
    z = tvm.nd.empty((0, 4), "int32", dev)
    assert z.numpy().shape == (0, 4)
    with pytest.raises(ValueError, match="shape mismatch"):
        e.copyfrom(np.ones((5, 3), "float32"))
    with pytest.raises(BufferError):
        d.__dlpack__()
    with pytest.raises(ValueError, match="no OpenCL device opencl\\(99\\)"):
        tvm.nd.empty((2,), "float32", tvm.opencl(99))
    assert not tvm.opencl(99).exist


# ---- math intrinsics, casts, select ----------------------------------------------------------
def test_math_intrinsics(dev):
    n = 203
    A = te.placeholder((n,), name="A")
    fns = {
        "exp": (lambda x: te.exp(x), np.exp),
        "tanh": (lambda x: te.tanh(x), np.tanh),
        "erf": (lambda x: te.erf(x), np.vectorize(math.erf)),
        "sqrt": (lambda x: te.sqrt(x), np.sqrt),
        "log": (lambda x: te.log(x), np.log),
        "pow": (lambda x: te.power(x, 1.7), lambda x: np.power(x, 1.7)),
        "sigmoid": (lambda x: te.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
        "rsqrt": (lambda x: te.rsqrt(x), lambda x: 1 / np.sqrt(x)),
        "floor": (lambda x: te.floor(x * 7.0), lambda x: np.floor(x * 7)),
        "round": (lambda x: te.round(x * 4.0), lambda x: np.round(x * 4)),
        "minmax": (lambda x: te.max(te.min(x, 0.6), 0.3), lambda x: np.clip(x, 0.3, 0.6)),
        "select": (lambda x: te.if_then_else(x > 0.5, x * 2.0, -x), lambda x: np.where(x > 0.5, 2 * x, -x)),
        "cast": (lambda x: (x * 100.0).astype("int32").astype("float32"),
                 lambda x: np.trunc(x * 100)),
        "fmod": (lambda x: te.fmod(x * 10.0, 0.7), lambda x: np.fmod(x * 10, 0.7)),
    }
    def out(name, fn):
        return te.compute((n,), lambda i: fn(A[i]), name=name)

    outs = [out(k, f) for k, (f, _) in fns.items()]
    s = te.create_schedule([o.op for o in outs])
    for o in outs:
        _bind_1d(s, o, o.op.axis[0], 32)
    f = tvm.build(s, [A, *outs], target="opencl")
    a = _rand(n, lo=0.05, hi=1.5)
    res = [tvm.nd.empty((n,), "float32", dev) for _ in outs]
    f(tvm.nd.array(a, dev), *res)
    for (name, (_, ref)), r in zip(fns.items(), res):
        np.testing.assert_allclose(r.numpy(), ref(a.astype("float64")).astype("float32"),
                                   rtol=2e-5, atol=2e-6, err_msg=name)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_int_types(dev, dtype):
    n = te.var("n", "int64" if dtype == "int64" else "int32")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: te.floordiv(A[i], B[i]) + te.floormod(A[i], B[i]) * A[i]
                   - te.max(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    _bind_1d(s, C, C.op.axis[0], 32)
    f = tvm.build(s, [A, B, C], target="opencl")
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    a = RNG.integers(lo, hi, 99).astype(dtype)
    b = RNG.integers(1, hi, 99).astype(dtype) * np.where(RNG.random(99) < 0.5, -1, 1).astype(dtype) \
        if info.min < 0 else RNG.integers(1, hi, 99).astype(dtype)
    c = tvm.nd.empty((99,), dtype, dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    with np.errstate(over="ignore"):
        want = (a // b + (a % b) * a - np.maximum(a, b)).astype(dtype)
    np.testing.assert_array_equal(c.numpy(), want)


# ---- shared memory, cooperative fetching, barriers ------------------------------------------
@pytest.mark.parametrize("shape", [(37, 29, 53), (64, 64, 64)])
def test_tiled_gemm_shared_memory(dev, shape):
    M, N, K = shape
    s, args = tiled_gemm(M, N, K)
    f = tvm.build(s, args, target="opencl")
    src = f.imported_modules[0].get_source()
    assert "__local float A_shared[64];" in src and "barrier(CLK_LOCAL_MEM_FENCE);" in src
    assert "float C_local[1];" in src
    a, b = _rand((M, K), lo=-1), _rand((K, N), lo=-1)
    c = tvm.nd.empty((M, N), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-5)


def test_vthread(dev):
    n = 256
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, x = s[B].split(B.op.axis[0], factor=64)
    vx, tx = s[B].split(x, nparts=4)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(vx, te.thread_axis("vthread"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], target="opencl")
    a = _rand(n)
    b = tvm.nd.empty((n,), "float32", dev)
    f(tvm.nd.array(a, dev), b)
    np.testing.assert_allclose(b.numpy(), a * 2 + 1, rtol=1e-6)


# ---- export / load, timing -------------------------------------------------------------------
def test_export_load_round_trip(add_exp, dev, tmp_path):
    path = str(tmp_path / "add_exp.so")
    add_exp.export_library(path)
    m = tvm.runtime.load_module(path)
    assert m.type_key == "gpu_host" and m.imported_modules[0].type_key == "opencl"
    assert m.imported_modules[0].get_source() == add_exp.imported_modules[0].get_source()
    a, b = _rand(130), _rand(130)
    c = tvm.nd.empty((130,), "float32", dev)
    m["add_exp"](tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), np.exp(a) * b + 1.0, rtol=1e-5)
    m.export_library(str(tmp_path / "again.so"))  # a loaded module exports itself again
    assert tvm.runtime.load_module(str(tmp_path / "again.so")).entry_name == "add_exp"


def test_time_evaluator(add_exp, dev):
    a, b = (tvm.nd.array(_rand(500), dev) for _ in range(2))
    c = tvm.nd.empty((500,), "float32", dev)
    res = add_exp.time_evaluator("add_exp", dev, number=3, repeat=2)(a, b, c)
    assert len(res.results) == 2 and res.mean > 0
    np.testing.assert_allclose(c.numpy(), np.exp(a.numpy()) * b.numpy() + 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="runs on opencl devices"):
        add_exp.time_evaluator("add_exp", tvm.cpu(0))


def test_float16_refused_clearly(dev):
    A = te.placeholder((64,), name="A", dtype="float16")
    B = te.compute((64,), lambda i: A[i] * A[i], name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], target="opencl")
    assert "half" in f.imported_modules[0].get_source()
    import tvmpy.runtime.gpu_module as gm

    cl_dev = gm.device_api(dev).context(dev.device_id)[2]
    a = _rand(64, "float16")
    b = tvm.nd.empty((64,), "float16", dev)
    if "cl_khr_fp16" in cl_dev.extensions:
        f(tvm.nd.array(a, dev), b)
        np.testing.assert_allclose(b.numpy(), a * a, rtol=1e-3)
    else:
        with pytest.raises(RuntimeError, match="cl_khr_fp16"):
            f(tvm.nd.array(a, dev), b)


def _tutorial_gemm(M, N, K):
    """The TVM GPU GEMM tutorial's schedule: 64x64 blocks, 8x8 threads, 2x2 virtual threads,
    shared + local caches, vectorized cooperative fetching, an unrolled k step."""
    A = te.placeholder((K, M), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda y, x: te.sum(A[k, y] * B[k, x], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    AL, BL = s.cache_read(AA, "local", [C]), s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    tx, ty = te.thread_axis((0, 8), "threadIdx.x"), te.thread_axis((0, 8), "threadIdx.y")
    by, yi = s[C].split(C.op.axis[0], factor=64)
    bx, xi = s[C].split(C.op.axis[1], factor=64)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].reorder(by, bx, yi, xi)
    tyz, yi = s[C].split(yi, nparts=2)
    ty_, yi = s[C].split(yi, nparts=8)
    txz, xi = s[C].split(xi, nparts=2)
    tx_, xi = s[C].split(xi, nparts=8)
    s[C].bind(tyz, te.thread_axis((0, 2), "vthread", name="vy"))
    s[C].bind(txz, te.thread_axis((0, 2), "vthread", name="vx"))
    s[C].bind(ty_, ty)
    s[C].bind(tx_, tx)
    s[C].reorder(tyz, txz, ty_, tx_, yi, xi)
    s[CC].compute_at(s[C], tx_)
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=8)
    kt, ki = s[CC].split(ki, factor=1)
    yo, xo = CC.op.axis
    s[CC].reorder(ko, kt, ki, yo, xo)
    s[AA].compute_at(s[CC], ko)
    s[BB].compute_at(s[CC], ko)
    s[CC].unroll(kt)
    s[AL].compute_at(s[CC], kt)
    s[BL].compute_at(s[CC], kt)
    for S in (AA, BB):
        x, y = s[S].op.axis
        t_y, xi = s[S].split(x, nparts=8)
        t_x, xi = s[S].split(y, nparts=8)
        _, xi = s[S].split(xi, factor=4)
        s[S].bind(t_y, ty)
        s[S].bind(t_x, tx)
        s[S].vectorize(xi)
    return s, [A, B, C]


def test_gemm_tutorial_schedule_vthread(dev):
    # dividing shapes: the vectorized cooperative fetch is one 4-wide vector load + store
    s, args = _tutorial_gemm(64, 64, 16)
    f = tvm.build(s, args, target="opencl")
    assert "vstore4(vload4(0, A + " in f.imported_modules[0].get_source()
    a, b = _rand((16, 64), lo=-1), _rand((16, 64), lo=-1)
    c = tvm.nd.empty((64, 64), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a.T @ b, rtol=1e-4, atol=1e-5)
    M, N, K = 100, 70, 37  # awkward shapes: guarded, scalar fetches
    s, args = _tutorial_gemm(M, N, K)
    f = tvm.build(s, args, target="opencl")
    a, b = _rand((K, M), lo=-1), _rand((K, N), lo=-1)
    c = tvm.nd.empty((M, N), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a.T @ b, rtol=1e-4, atol=1e-5)


# ---- cross-thread reduction ------------------------------------------------------------------
@pytest.mark.parametrize("rfactor,m,reducer", [(True, 37, "sum"), (False, 13, "max"),
                                                (False, 64, "sum")])
def test_cross_thread_reduction(dev, rfactor, m, reducer):
    n = 7
    s, A, B = row_reduce(n, m, rfactor, reducer)
    f = tvm.build(s, [A, B], target="opencl")
    assert "__local float" in f.imported_modules[0].get_source()
    a = _rand((n, m), lo=-1)
    b = tvm.nd.array(np.full(n, 9.0, "float32"), dev)
    f(tvm.nd.array(a, dev), b)
    ref = a.sum(1) if reducer == "sum" else a.max(1)
    np.testing.assert_allclose(b.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_two_kernels_softmax_like(dev):
    # two stages with their own threads: two kernels launched in order, E in between
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    E_ = te.compute((n,), lambda i: te.exp(A[i]), name="E")
    O = te.compute((n,), lambda i: E_[i] * 0.5 - A[i], name="O")
    s = te.create_schedule(O.op)
    _bind_1d(s, E_, E_.op.axis[0], 32)
    _bind_1d(s, O, O.op.axis[0], 16)
    f = tvm.build(s, [A, O], target="opencl")
    steps = f.plan["functions"][0]["steps"]
    assert [next(iter(st)) for st in steps if "let" not in st and "assert" not in st] == \
        ["alloc", "launch", "launch"]  # E lives in device memory between the kernels
    a = _rand(45)
    o = tvm.nd.empty((45,), "float32", dev)
    f(tvm.nd.array(a, dev), o)
    np.testing.assert_allclose(o.numpy(), np.exp(a) * 0.5 - a, rtol=1e-5)


def test_empty_launch_and_cpu_library_importing_gpu_module(add_exp, dev, tmp_path):
    z = tvm.nd.empty((0,), "float32", dev)
    add_exp(z, z, z)  # n = 0: an empty grid launches nothing
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 3.0, name="B")
    cpu = tvm.build(te.create_schedule(B.op), [A, B], target="llvm", name="cpu_triple")
    cpu.import_module(add_exp)  # one library: CPU code + the GPU module (plan + source)
    path = str(tmp_path / "mixed.so")
    cpu.export_library(path)
    m = tvm.runtime.load_module(path)
    assert m.imported_modules[0].type_key == "gpu_host"
    a = _rand(16)
    c = tvm.nd.empty((16,), "float32", dev)
    m["add_exp"](tvm.nd.array(a, dev), tvm.nd.array(a, dev), c)
    np.testing.assert_allclose(c.numpy(), np.exp(a) * a + 1.0, rtol=1e-5)
    h = tvm.nd.empty((16,), "float32")
    m["cpu_triple"](tvm.nd.array(a), h)
    np.testing.assert_allclose(h.numpy(), a * 3.0, rtol=1e-6)


def test_graph_executor_runs_a_gpu_library(add_exp):
    # the graph executor's prepared calls (prepare once, _cfunc per run) on a GPU module: the
    # entries live in host memory and are copied to the device and back by every run
    import json

    from tvmpy.runtime.graph_executor import GraphExecutor

    n = 50
    op = {"func_name": "add_exp", "num_inputs": "2", "num_outputs": "1"}
    graph = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                       {"op": "null", "name": "y", "inputs": []},
                       {"op": "tvm_op", "name": "n0", "inputs": [[0, 0, 0], [1, 0, 0]], "attrs": op},
                       {"op": "tvm_op", "name": "n1", "inputs": [[2, 0, 0], [1, 0, 0]], "attrs": op}],
             "arg_nodes": [0, 1], "heads": [[3, 0, 0]], "node_row_ptr": [0, 1, 2, 3, 4],
             "attrs": {"shape": ["list_shape", [[n]] * 4], "dltype": ["list_str", ["float32"] * 4]}}
    ex = GraphExecutor(json.dumps(graph), add_exp, tvm.cpu(0))
    x, y = _rand(n), _rand(n)
    for shift in (0.0, 0.5):  # inputs changed between runs are seen by the kernels
        ex.set_input("x", x + shift)
        ex.set_input("y", y)
        ex.run()
        first = np.exp(x + shift) * y + 1.0
        np.testing.assert_allclose(ex.get_output(0).numpy(), np.exp(first) * y + 1.0, rtol=1e-5)


def test_bool_buffers(dev):
    # bool tensors are bytes in device memory (a kernel cannot take bool*): compare in, select out
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    M = te.placeholder((n,), name="M", dtype="bool")
    B = te.compute((n,), lambda i: A[i] > 0.5, name="B")
    C = te.compute((n,), lambda i: te.if_then_else(M[i], A[i], -A[i]), name="C")
    s = te.create_schedule([B.op, C.op])
    _bind_1d(s, B, B.op.axis[0], 32)
    _bind_1d(s, C, C.op.axis[0], 32)
    f = tvm.build(s, [A, M, B, C], target="opencl")
    a, m = _rand(70), RNG.random(70) > 0.5
    b, c = tvm.nd.empty((70,), "bool", dev), tvm.nd.empty((70,), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(m, dev), b, c)
    np.testing.assert_array_equal(b.numpy(), a > 0.5)
    np.testing.assert_array_equal(c.numpy(), np.where(m, a, -a))


def test_three_dimensional_grid_symbolic(dev):
    # blockIdx.x/y/z and threadIdx.x/y/z all bound, symbolic extents, non-dividing factors
    a0, a1, a2 = te.var("a0"), te.var("a1"), te.var("a2")
    A = te.placeholder((a0, a1, a2), name="A")
    B = te.compute((a0, a1, a2), lambda i, j, k: A[i, j, k] * 3.0 - (i + j * 2 + k * 5).astype("float32"),
                   name="B")
    s = te.create_schedule(B.op)
    outer, inner = [], []
    for ax, f in zip(B.op.axis, (2, 3, 4)):
        o, i = s[B].split(ax, factor=f)
        outer.append(o)
        inner.append(i)
    s[B].reorder(*outer, *inner)
    for ax, tag in zip(outer, "zyx"):
        s[B].bind(ax, te.thread_axis(f"blockIdx.{tag}"))
    for ax, tag in zip(inner, "zyx"):
        s[B].bind(ax, te.thread_axis(f"threadIdx.{tag}"))
    f = tvm.build(s, [A, B], target="opencl")
    src = f.imported_modules[0].get_source()
    assert "get_group_id(2)" in src and "get_local_id(2)" in src
    for shape in ((3, 5, 7), (1, 1, 9)):
        a = _rand(shape)
        b = tvm.nd.empty(shape, "float32", dev)
        f(tvm.nd.array(a, dev), b)
        i, j, k = np.indices(shape)
        np.testing.assert_allclose(b.numpy(), a * 3 - (i + 2 * j + 5 * k), rtol=1e-5, atol=1e-5)


def test_keyword_tensor_names():
    """Tensors named like OpenCL words ("kernel", "local", "float4") still build and run."""
    A = te.placeholder((37,), name="kernel")
    B = te.placeholder((37,), name="local")
    C = te.compute((37,), lambda i: A[i] * 2.0 + B[i], name="float4")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B, C], target="opencl")
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(37).astype("float32") for _ in range(2))
    dev = tvm.opencl(0)
    c = tvm.nd.empty((37,), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a * 2 + b, rtol=1e-6)
