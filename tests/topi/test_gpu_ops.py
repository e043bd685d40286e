"""GPU operator schedules (``topi.cuda`` through the "gpu" strategies) on PoCL against numpy,
on awkward shapes (primes, size-1 axes): each a one-op relay graph built for "opencl"."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.topi import testing

RNG = np.random.default_rng(7)


def _run(make, shapes, ref, rtol=1e-5):
    xs = [relay.var(f"x{i}", shape=s, dtype="float32") for i, s in enumerate(shapes)]
    mod = tvm.IRModule.from_expr(relay.Function(xs, make(*xs)))
    lib = relay.build(mod, target="opencl")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    arrs = [RNG.standard_normal(s).astype("float32") for s in shapes]
    for i, a in enumerate(arrs):
        m.set_input(f"x{i}", a)
    m.run()
    got, want = m.get_output(0).numpy(), ref(*arrs)
    assert got.shape == want.shape
    assert np.abs(want).max() > 0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("shape", [(1,), (7, 1, 13), (3, 257)])
def test_fused_injective_chain(shape):
    _run(lambda x, y: relay.tanh(relay.nn.relu(x * y) + relay.const(0.5)) - y,
         [shape, shape], lambda a, b: np.tanh(np.maximum(a * b, 0) + 0.5) - b)


@pytest.mark.parametrize("op,npop", [("sum", np.sum), ("max", np.max), ("mean", np.mean)])
@pytest.mark.parametrize("shape,axis", [((5, 131), [1]), ((3, 7, 11), [0, 2]), ((1, 1), [1]),
                                        ((2, 300, 3), [1])])
def test_reductions(op, npop, shape, axis):
    _run(lambda x: getattr(relay, op)(x, axis=axis), [shape],
         lambda a: npop(a, axis=tuple(axis)))


@pytest.mark.parametrize("shape,axis", [((3, 37), -1), ((2, 5, 7), 1), ((4, 1), -1),
                                        ((2, 211), 1)])
def test_softmax(shape, axis):
    _run(lambda x: relay.nn.softmax(x, axis=axis), [shape],
         lambda a: testing.softmax_python(a, axis))


@pytest.mark.parametrize("shape", [(3, 67), (2, 5, 1), (1, 40)])
def test_layer_norm(shape):
    n = shape[-1]
    _run(lambda x, g, b: relay.nn.layer_norm(x, g, b, axis=-1, epsilon=1e-5),
         [shape, (n,), (n,)], lambda a, g, b: testing.layer_norm_python(a, g, b, -1, 1e-5),
         rtol=1e-4)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool2d(kind):
    f = relay.nn.max_pool2d if kind == "max" else relay.nn.avg_pool2d
    _run(lambda x: f(x, pool_size=(3, 3), strides=(2, 2)), [(1, 3, 11, 13)],
         lambda a: testing.pool2d_python(a, 3, 2, 1, 0, kind))


@pytest.mark.parametrize("hw", [(1, 1), (7, 5), (9, 11)])
def test_global_avg_pool(hw):
    _run(lambda x: relay.nn.global_avg_pool2d(x), [(2, 3, *hw)],
         lambda a: a.mean((2, 3), keepdims=True))


def test_conv2d_bias_relu():
    def ref(a, w, b):
        return np.maximum(testing.conv2d_nchw_python(a, w, 1, 1) + b[None, :, None, None], 0)

    _run(lambda x, w, b: relay.nn.relu(relay.nn.bias_add(
        relay.nn.conv2d(x, w, padding=(1, 1)), b)), [(1, 3, 7, 5), (5, 3, 3, 3), (5,)], ref,
        rtol=1e-4)


def test_depthwise_conv2d():
    _run(lambda x, w: relay.nn.conv2d(x, w, padding=(1, 1), groups=5), [(1, 5, 7, 3),
         (5, 1, 3, 3)], lambda a, w: testing.group_conv2d_nchw_python(a, w, 1, 1, 1, 5),
         rtol=1e-4)


def test_dense_and_batch_matmul():
    _run(lambda x, w: relay.nn.dense(x, w), [(3, 37), (11, 37)], lambda a, w: a @ w.T, rtol=1e-4)
    _run(lambda x, y: relay.nn.batch_matmul(x, y), [(2, 5, 13), (2, 7, 13)],
         lambda a, b: a @ b.transpose(0, 2, 1), rtol=1e-4)


@pytest.mark.parametrize("make,ref", [
    (lambda x: relay.sum(x), lambda a: np.sum(a)),
    (lambda x: relay.mean(x), lambda a: np.mean(a)),
    (lambda x: relay.max(x) * relay.const(2.0), lambda a: np.max(a) * 2),
])
def test_full_reduction_to_scalar(make, ref):
    """0-d outputs: the reduction across one block, its init and scalar stores one thread."""
    _run(make, [(13, 17)], ref, rtol=1e-4)
    _run(make, [(3,)], ref, rtol=1e-4)


def test_conv2d_alone_strided_prime_shapes():
    """A conv2d output (accumulated in a local, stored once) with a stride, primes, size 1."""
    _run(lambda x, w: relay.nn.conv2d(x, w, strides=(2, 2), padding=(1, 1)),
         [(2, 3, 13, 1), (7, 3, 3, 3)], lambda a, w: testing.conv2d_nchw_python(a, w, 2, 1),
         rtol=1e-4)


@pytest.mark.parametrize("shape,axis", [((3, 67), 1), ((40, 3), 0), ((2, 3), None)])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin(op, shape, axis):
    """Tuple (value, index) reductions: across the threads of a block for long axes (67; the
    0-d case), one thread per output for short ones."""
    kw = {} if axis is None else {"axis": [axis]}
    # indices + 1: an index of 0 is a right answer, but _run insists on a non-zero reference
    _run(lambda x: getattr(relay, op)(x, **kw).astype("float32") + relay.const(1.0), [shape],
         lambda a: getattr(np, op)(a, axis=axis).astype("float32") + 1.0)
