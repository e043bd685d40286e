"""te.Tensor arithmetic (``a + b``, ``2 * a``, ``e / 2.0``: topi's broadcast operators, as TVM binds
them), ``topi.elemwise_sum``, and the schedules of a full reduction (``topi.sum(x)``: every axis
reduced) for GPU targets (run on PoCL, compiled with NVRTC for CUDA) and llvm."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.contrib import nvcc
from tvmpy.te import tensor as te_tensor

RNG = np.random.default_rng(26)


def _rand(*shape):
    return RNG.uniform(0.5, 2.0, shape).astype("float32")  # non-zero: divisions are defined


def _run_llvm(inputs, outs, arrays):
    s = te.create_schedule([o.op for o in outs])
    f = tvm.build(s, [*inputs, *outs], "llvm")
    res = [tvm.nd.empty(tuple(int(d) for d in o.shape), o.dtype) for o in outs]
    f(*[tvm.nd.array(a) for a in arrays], *res)
    return [r.numpy() for r in res]


def test_tensor_operators_broadcast_and_scalars():
    a = te.placeholder((3, 1, 7), name="a")
    b = te.placeholder((5, 1), name="b")
    n = te.var("n")
    outs = [a + b, a - b, a * b, a / b, 2.0 - a, 3 * a, a / 2.0, 1.5 / a, -a,
            np.float32(2.5) * a, a * np.float32(0.5)]
    assert outs[0].op.tag == topi.tag.BROADCAST and outs[5].op.tag == topi.tag.ELEMWISE
    x, y = _rand(3, 1, 7), _rand(5, 1)
    got = _run_llvm([a, b], outs, [x, y])
    want = [x + y, x - y, x * y, x / y, 2 - x, 3 * x, x / 2, 1.5 / x, -x, 2.5 * x, x * 0.5]
    for g, w in zip(got, want):
        tvm.testing.assert_allclose(g, w, rtol=1e-6)
    sym = n + a  # a symbolic scalar on the left
    assert isinstance(sym, te.Tensor) and tuple(int(d) for d in sym.shape) == (3, 1, 7)


def test_tensor_int_arith_keeps_dtype():
    a = te.placeholder((4, 3), "int32", name="a")
    c = a * 3 + a
    assert c.dtype == "int32"
    x = RNG.integers(-9, 9, (4, 3)).astype("int32")
    (got,) = _run_llvm([a], [c], [x])
    np.testing.assert_array_equal(got, 4 * x)


def test_tensor_arith_errors(monkeypatch):
    a = te.placeholder((3, 4), name="a")
    with pytest.raises(ValueError, match="broadcast"):
        _ = a + te.placeholder((5,), name="b")
    with pytest.raises(TypeError, match="operands must be"):
        _ = a + "x"
    monkeypatch.setattr(te_tensor, "_TENSOR_ARITH", {})
    with pytest.raises(TypeError, match="import tvmpy.topi"):
        _ = a + a


def test_elemwise_sum():
    xs = [te.placeholder((2, 11), name=f"x{i}") for i in range(3)]
    e = topi.elemwise_sum(xs)
    assert e.op.tag == topi.tag.ELEMWISE
    arrays = [_rand(2, 11) for _ in xs]
    (got,) = _run_llvm(xs, [e], arrays)
    tvm.testing.assert_allclose(got, sum(arrays), rtol=1e-6)
    (one,) = _run_llvm(xs[:1], [topi.elemwise_sum(xs[:1])], arrays[:1])
    tvm.testing.assert_allclose(one, arrays[0])
    with pytest.raises(ValueError, match="shape and dtype"):
        topi.elemwise_sum([xs[0], te.placeholder((2, 10), name="y")])
    with pytest.raises(TypeError, match="non-empty list"):
        topi.elemwise_sum(xs[0])
    with pytest.raises(TypeError, match="non-empty list"):
        topi.elemwise_sum([])


def _full_sum():
    a = te.placeholder((37, 5, 3), name="a")  # 555 elements: not a multiple of the threads
    b = te.placeholder((5, 3), name="b")
    g = topi.sum(topi.elemwise_sum([a + b, a * b]) / 2.0)
    return a, b, g


@pytest.mark.parametrize("shape", [(37, 5, 3), (1,), (7, 1, 13), (4099,)])
def test_cuda_schedule_reduce_full_sum_runs_on_opencl(shape):
    a = te.placeholder(shape, name="a")
    g = topi.sum(a * 2.0)
    with tvm.target.Target("opencl"):
        s = topi.cuda.schedule_reduce(g)
        f = tvm.build(s, [a, g], "opencl")
    x = _rand(*shape)
    out = tvm.nd.empty((), "float32")
    f(tvm.nd.array(x), out)
    tvm.testing.assert_allclose(out.numpy(), 2 * x.sum(dtype="float64"), rtol=1e-5)


def test_cuda_schedule_reduce_full_sum_compiles():
    a, b, g = _full_sum()
    with tvm.target.Target("cuda"):
        s = topi.cuda.schedule_reduce(g)
        f = tvm.build(s, [a, b, g], "cuda")
    src = f.imported_modules[0].get_source()
    assert "threadIdx" in src and nvcc.compile_cuda(src)


@pytest.mark.parametrize("sched", ["generic", "x86"])
def test_full_sum_cpu_schedules(sched):
    a, b, g = _full_sum()
    with tvm.target.Target("llvm"):
        s = getattr(topi, sched).schedule_reduce(g)
        f = tvm.build(s, [a, b, g], "llvm")
    x, y = _rand(37, 5, 3), _rand(5, 3)
    out = tvm.nd.empty((), "float32")
    f(tvm.nd.array(x), tvm.nd.array(y), out)
    tvm.testing.assert_allclose(out.numpy(), ((x + y + x * y) / 2).sum(), rtol=1e-5)
