"""The ABI records which buffers a kernel writes; a read-only array passed for one is refused
(instead of the result silently landing in a scratch copy)."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.codegen.abi import signature


def _add_one():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    return s, [A, B]


def test_signature_marks_written_buffers():
    s, args = _add_one()
    sig = signature(tvm.lower(s, args))
    assert [p.written for p in sig.params] == [False, True]


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_read_only_input_ok_read_only_output_refused(target):
    s, args = _add_one()
    f = tvm.build(s, args, target=target)
    a = np.random.default_rng(0).standard_normal(8).astype("float32")
    a.flags.writeable = False
    b = np.empty(8, np.float32)
    f(a, b)
    np.testing.assert_allclose(b, a + 1.0)
    b.flags.writeable = False
    with pytest.raises(ValueError, match="argument B is written by the kernel"):
        f(a, b)


# ---- aliasing: an output sharing memory with another argument ----------------------------------
RNG = np.random.default_rng(24)


def _rand(*shape):
    """Random float32 data, |x| in [0.5, 2], both signs (never zero)."""
    return (RNG.uniform(0.5, 2, shape) * RNG.choice([-1, 1], shape)).astype("float32")


def _transpose(n):
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[j, i], name="B")
    return tvm.build(te.create_schedule(B.op), [A, B], target="llvm")


@pytest.mark.parametrize("target", ["llvm", "c", "interp"])
@pytest.mark.parametrize("kind", ["ndarray", "numpy"])
def test_output_aliasing_its_input_gets_the_right_result(target, kind):
    """f(x, x) with a transpose: the output is computed apart and copied back (as numpy's
    out=), so x becomes x.T instead of a half-overwritten mix."""
    n = 37  # odd, not a multiple of any vector width
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[j, i] * 2.0, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target=target)
    x0 = _rand(n, n)
    x = tvm.nd.array(x0) if kind == "ndarray" else x0.copy()
    f(x, x)
    got = x.numpy() if kind == "ndarray" else x
    np.testing.assert_array_equal(got, 2 * x0.T)


def test_overlapping_views_with_offsets():
    """The output is a view of the input's buffer shifted by a few elements (both ways), and
    the input a strided view: every result equals numpy's on the values before the call."""
    n = 61
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[(i + 1) % n] - A[i], name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target="llvm")
    for shift in (1, 3, -2, -16):
        buf = _rand(n + 40)
        ref = buf.copy()
        a, b = buf[20:20 + n], buf[20 + shift:20 + shift + n]
        want = np.roll(ref[20:20 + n], -1) - ref[20:20 + n]
        f(a, b)
        np.testing.assert_array_equal(b, want)
        outside = np.ones(n + 40, bool)
        outside[20 + shift:20 + shift + n] = False
        np.testing.assert_array_equal(buf[outside], ref[outside])  # nothing else touched
    big = _rand(2 * n)
    ref = big.copy()
    a, b = big[::2], big[1:n + 1]  # a strided input, overlapping the output
    f(a, b)
    np.testing.assert_array_equal(b, np.roll(ref[::2], -1) - ref[::2])


@pytest.mark.parametrize("target", ["llvm", "interp"])
def test_inputs_read_twice_and_in_place_elementwise_still_work(target):
    """add(x, x, out), and add(x, x, x) (the output aliasing both inputs)."""
    n = 50
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i] * 3.0, name="C")
    f = tvm.build(te.create_schedule(C.op), [A, B, C], target=target)
    x0 = _rand(n)
    x, out = tvm.nd.array(x0), tvm.nd.empty((n,))
    f(x, x, out)
    np.testing.assert_allclose(out.numpy(), 4 * x0, rtol=1e-6)
    np.testing.assert_array_equal(x.numpy(), x0)  # only read
    f(x, x, x)
    np.testing.assert_allclose(x.numpy(), 4 * x0, rtol=1e-6)


@pytest.mark.parametrize("target", ["llvm", "interp"])
def test_two_outputs_sharing_memory_are_refused_naming_both(target):
    n = 16
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0, name="C")
    s = te.create_schedule([B.op, C.op])
    f = tvm.build(s, [A, B, C], target=target)
    a = _rand(n)
    out = tvm.nd.empty((n,))
    with pytest.raises(ValueError, match=r"arguments B and C share memory.*writes both"):
        f(a, out, out)
    buf = np.zeros(n + 4, "float32")
    with pytest.raises(ValueError, match=r"arguments B and C share memory"):
        f(a, buf[:n], buf[4:])
    # views of one buffer whose elements are disjoint (interleaved) are two separate outputs
    inter = np.zeros(2 * n, "float32")
    f(a, inter[::2], inter[1::2])
    np.testing.assert_allclose(inter[::2], a + 1, rtol=1e-6)
    np.testing.assert_allclose(inter[1::2], a * 2, rtol=1e-6)


def test_no_copy_without_aliasing(monkeypatch):
    """Distinct aligned NDArrays go to the kernel as they are: the check adds no scratch."""
    from tvmpy.runtime import function

    f = _transpose(8)
    made = []
    real = function.aligned_empty
    monkeypatch.setattr(function, "aligned_empty",
                        lambda shape, dtype: made.append(shape) or real(shape, dtype))
    x, y = tvm.nd.array(_rand(8, 8)), tvm.nd.empty((8, 8))
    f(x, y)
    np.testing.assert_array_equal(y.numpy(), x.numpy().T)
    assert made == []
    f(x, x)
    assert len(made) == 1  # the output's own scratch
