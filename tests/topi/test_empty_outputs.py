"""topi computes whose output has no elements build no index arithmetic over empty axes (tile's
``i % 0``, reshape's unravel): they read nothing. Against numpy."""

import numpy as np
import pytest

from tvmpy import te, topi
from tvmpy.topi.utils import compute_unless_empty, is_empty_shape

from .topi_util import run


@pytest.mark.parametrize("shape,reps", [
    ((1, 0, 1, 1), (2, 1, 3, 1)),   # the fuzzer's ONNX Tile
    ((0,), (3,)),
    ((2, 0), (0, 4)),
    ((0, 3), (2, 1, 2)),             # reps longer than the rank
    ((2, 3), (1, 0)),                # a zero repeat of a non-empty tensor
])
def test_tile_empty(shape, reps):
    A = te.placeholder(shape, name="A")
    a = np.zeros(shape, "float32")
    (b,) = run([A], topi.tile(A, reps), [a])
    assert b.shape == np.tile(a, reps).shape


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_empty_outputs_among_other_outputs(target):
    """Empty tiles, repeats, reshapes and takes next to a non-empty tile in one kernel."""
    A = te.placeholder((0, 3), name="A")
    B = te.placeholder((2, 3), name="B")
    idx = te.placeholder((0,), "int32", name="idx")
    outs = [topi.tile(A, (2, 2)), topi.repeat(A, 2, 1), topi.reshape(A, (3, 0), allowzero=True),
            topi.take(A, idx, axis=0, mode="wrap"), topi.tile(B, (2, 1))]
    b = np.arange(6, dtype="float32").reshape(2, 3)
    got = run([A, B, idx], outs, [np.zeros((0, 3), "float32"), b, np.zeros((0,), "int32")],
              target=target)
    assert [g.shape for g in got] == [(0, 6), (0, 6), (3, 0), (0, 3), (4, 3)]
    np.testing.assert_array_equal(got[-1], np.tile(b, (2, 1)))


def test_take_from_an_empty_axis_refused():
    A = te.placeholder((0, 3), name="A")
    idx = te.placeholder((2,), "int32", name="idx")
    for mode in ("clip", "wrap"):
        with pytest.raises(ValueError, match="cannot take elements from the empty axis 0"):
            topi.take(A, idx, axis=0, mode=mode)


def test_compute_unless_empty():
    assert is_empty_shape((2, 0)) and not is_empty_shape((2, 1)) and not is_empty_shape(())
    n = te.var("n")
    assert not is_empty_shape((n, 3))
    A = te.placeholder((0, 4), name="A")

    def f(i, j):
        raise AssertionError("an empty output must not build its body")

    out = compute_unless_empty((3, 0), f, A.dtype, "empty")
    assert out.dtype == "float32" and [int(s) for s in out.shape] == [3, 0]


@pytest.mark.parametrize("shape,axis,want", [
    ((3, 0), 2, (0, 1)), ((0, 3), 0, (1, 0)), ((2, 0, 3), 1, (2, 0)), ((2, 3, 0), 1, (2, 0)),
])
def test_flatten_empty(shape, axis, want):
    """A zero product is a literal 0, not reshape's 'copy this dimension'."""
    A = te.placeholder(shape, name="A")
    out = topi.flatten(A, axis)
    assert tuple(int(s) for s in out.shape) == want
    (b,) = run([A], out, [np.zeros(shape, "float32")])
    assert b.shape == want
