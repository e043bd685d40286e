"""``tir.call_packed`` from generated code (llvm and c targets), as TVM's docs use it with
``te.extern``: buffers arrive as NDArrays sharing the kernel's memory, scalars and strings as
Python values; one lookup per library, one call per execution; failures raise with the cause."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir
from tvmpy.runtime import packed_func

TARGETS = ["llvm", "c"]


@pytest.fixture
def rng():
    return np.random.default_rng(26)


def _extern_copy_scaled(name: str, shape, dtype="float32"):
    A = te.placeholder(shape, name="A", dtype=dtype)
    k = te.var("k", dtype="float32")
    B = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed(name, ins[0], outs[0], k,
                                                                   7, "tag"), name="B")
    C = te.compute(B.shape, lambda *i: B(*i) + te.const(1, dtype), name="C")
    return A, k, B, C


@pytest.mark.parametrize("target", [*TARGETS, "interp"])
@pytest.mark.parametrize("shape", [(1,), (37,), (5, 13), (3, 1, 7)])
def test_python_function_from_generated_code(target, shape, rng):
    seen = []

    def scale(x, y, k, seven, tag):
        seen.append((type(x), x.shape, y.shape, type(k), seven, tag))
        y.copyfrom(x.numpy() * k)  # writes the kernel's own buffer

    tvm.register_func("test.cp.scale", scale, override=True)
    A, k, _, C = _extern_copy_scaled("test.cp.scale", shape)
    f = tvm.build(te.create_schedule(C.op), [A, C, k], target)
    a = rng.uniform(-2, 2, shape).astype("float32")
    c = tvm.nd.empty(shape, "float32")
    f(tvm.nd.array(a), c, 2.5)
    tvm.testing.assert_allclose(c.numpy(), a * 2.5 + 1, rtol=1e-6)
    assert seen == [(tvm.nd.NDArray, shape, shape, float, 7, "tag")]  # one call per execution


@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_shape_and_return_value(target, rng):
    """The DLTensor carries the run-time extents; the function's return value is the call's."""
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")

    def total(x):
        return float(x.numpy().sum())

    tvm.register_func("test.cp.total", total, override=True)

    def body(ins, outs):
        ib = tir.ir_builder.create()
        out = ib.buffer_ptr(outs[0])
        s = ib.let("s", tir.call_packed("test.cp.total", ins[0], dtype="float32"))
        out[0] = s
        return ib.get()

    B = te.extern((1,), [A], body, name="B", dtype="float32")
    f = tvm.build(te.create_schedule(B.op), [A, B], target)
    for rows in (1, 11):
        a = rng.uniform(-1, 1, (rows, 3)).astype("float32")
        b = tvm.nd.empty((1,), "float32")
        f(tvm.nd.array(a), b)
        tvm.testing.assert_allclose(b.numpy()[0], a.sum(), rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_errors_raise_with_their_cause(target, rng):
    def boom(x, y):
        raise KeyError("no luck")

    tvm.register_func("test.cp.boom", boom, override=True)
    A = te.placeholder((4,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed("test.cp.boom", ins[0], outs[0]),
                  name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target)
    a, b = tvm.nd.array(np.ones(4, "float32")), tvm.nd.empty((4,), "float32")
    with pytest.raises(RuntimeError, match="test.cp.boom.*failed.*KeyError.*no luck") as info:
        f(a, b)
    assert isinstance(info.value.__cause__, KeyError)

    # an unknown name: a clear error at run time (and again on the next call), no crash
    B = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed("test.cp.unknown", ins[0],
                                                                   outs[0]), name="B")
    g = tvm.build(te.create_schedule(B.op), [A, B], target)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="test.cp.unknown.*no such global function.*"
                                               "register it with tvm.register_func"):
            g(a, b)
    # registered later: the same library finds it now
    tvm.register_func("test.cp.unknown", lambda x, y: y.copyfrom(x.numpy() * 3), override=True)
    try:
        g(a, b)
        tvm.testing.assert_allclose(b.numpy(), np.full(4, 3, "float32"))
    finally:
        tvm.runtime.remove_global_func("test.cp.unknown")
    with pytest.raises(RuntimeError, match="test.cp.unknown.*unregistered"):
        g(a, b)

    # a function returning something generated code cannot take
    tvm.register_func("test.cp.boom", lambda x, y: [1], override=True)
    with pytest.raises(RuntimeError, match="returned list"):
        f(a, b)


def test_lookup_once_per_library_and_override(monkeypatch, rng):
    """The hot path: after the first call the library calls the cached function pointer
    directly (no registry lookup); an override is seen through the same slot."""
    calls = []
    find = packed_func._find

    def counting_find(name):
        calls.append(name)
        return find(name)

    monkeypatch.setattr(packed_func, "_find", counting_find)
    tvm.register_func("test.cp.once", lambda x, y: y.copyfrom(x.numpy() + 1), override=True)
    A = te.placeholder((9,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed("test.cp.once", ins[0], outs[0]),
                  name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    a = rng.uniform(size=9).astype("float32")
    b = tvm.nd.empty((9,), "float32")
    for _ in range(5):
        f(tvm.nd.array(a), b)
    assert calls == ["test.cp.once"]
    tvm.register_func("test.cp.once", lambda x, y: y.copyfrom(x.numpy() - 1), override=True)
    f(tvm.nd.array(a), b)
    tvm.testing.assert_allclose(b.numpy(), a - 1, rtol=1e-6)
    assert calls == ["test.cp.once"]


def test_exported_library_calls_the_registry(tmp_path, rng):
    tvm.register_func("test.cp.neg", lambda x, y: y.copyfrom(-x.numpy()), override=True)
    A = te.placeholder((6, 5), name="A", dtype="float64")
    B = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed("test.cp.neg", ins[0], outs[0]),
                  name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    path = str(tmp_path / "neg.so")
    f.export_library(path)
    g = tvm.runtime.load_module(path)
    a = rng.uniform(-1, 1, (6, 5))
    b = tvm.nd.empty((6, 5), "float64")
    g(tvm.nd.array(a), b)
    tvm.testing.assert_allclose(b.numpy(), -a)


def test_call_packed_bad_arguments():
    A = te.placeholder((3,), name="A")
    with pytest.raises(TypeError, match="function's name"):
        tir.call_packed(1, A)
    with pytest.raises(TypeError, match="te.Tensor.*ins\\[i\\]"):
        tir.call_packed("x", A)
    with pytest.raises(TypeError, match="cannot be passed"):
        tir.call_packed("x", object())
    with pytest.raises(TypeError, match="result dtype"):
        tir.call_packed("x", dtype="handle")
    assert tvm.call_packed is tir.call_packed  # v0.6 spelling


@pytest.mark.parametrize("target", TARGETS)
def test_called_from_parallel_loop(target):
    """Worker threads of a parallel loop call a Python function (each takes the GIL for its
    call); every iteration runs once, and a failure in one iteration fails the kernel."""
    import threading

    lock = threading.Lock()
    seen: list[int] = []

    def record(i, x):
        with lock:
            seen.append(i)
        if x < 0:
            raise ValueError(f"negative at {i}")
        return i * 2

    tvm.register_func("test.cp.record", record, override=True)
    n = 61
    A = te.placeholder((n,), name="A")

    def body(ins, outs):
        ib = tir.ir_builder.create()
        a, out = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, kind="parallel", name="i") as i:
            out[i] = tir.call_packed("test.cp.record", i, a[i])
        return ib.get()

    B = te.extern((n,), [A], body, name="B", dtype="int32")
    f = tvm.build(te.create_schedule(B.op), [A, B], target)
    b = tvm.nd.empty((n,), "int32")
    f(tvm.nd.array(np.arange(n, dtype="float32")), b)
    assert sorted(seen) == list(range(n))
    np.testing.assert_array_equal(b.numpy(), np.arange(n) * 2)
    x = np.ones(n, "float32")
    x[17] = -1
    with pytest.raises(RuntimeError, match="negative at 17"):
        f(tvm.nd.array(x), b)


@pytest.mark.parametrize("target", TARGETS)
def test_strided_input_buffer(target, rng):
    """A buffer with symbolic strides reaches the function as a strided view (no copy)."""
    got = []

    def double(x, y):
        got.append((x.shape, x.strides))
        y.copyfrom(x.numpy() * 2)

    tvm.register_func("test.cp.strided", double, override=True)
    A = te.placeholder((3, 4), name="A")
    Ab = tir.decl_buffer(A.shape, A.dtype, name="Ab", strides=[te.var("s"), 1])
    B = te.extern(A.shape, [A], lambda ins, outs: tir.call_packed("test.cp.strided", ins[0],
                                                                   outs[0]),
                  in_buffers=[Ab], name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target, binds={A: Ab})
    big = rng.uniform(-1, 1, (3, 7)).astype("float32")
    b = tvm.nd.empty((3, 4), "float32")
    f(big[:, 1:5], b)
    tvm.testing.assert_allclose(b.numpy(), 2 * big[:, 1:5])
    assert got == [((3, 4), (7, 1))]
