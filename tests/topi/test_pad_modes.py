"""topi.nn.pad in edge / reflect / wrap modes against numpy.pad: 1-D..5-D, zero and
asymmetric pads, size-1 axes, pads larger than the axis (edge, wrap), empty tensors; the pads a
mode cannot fill (reflect >= size, any mode on an empty axis) are refused clearly."""

import numpy as np
import pytest

from tvmpy import te, topi

from .topi_util import rand, run

MODES = ["edge", "reflect", "wrap"]

# (shape, pad_width): one (before, after) pair per axis; every pad fits reflect too
CASES = [
    ((5,), [(2, 3)]),
    ((5,), [(0, 4)]),
    ((5,), [(4, 0)]),
    ((2, 7), [(1, 0), (0, 6)]),
    ((3, 1, 4), [(2, 2), (0, 0), (3, 1)]),
    ((2, 3, 4, 5), [(0, 0), (1, 2), (3, 0), (4, 4)]),
    ((1, 2, 3, 2, 4), [(0, 0), (1, 1), (2, 1), (1, 0), (3, 2)]),
    ((4, 6), [(0, 0), (0, 0)]),  # no padding at all
    ((1, 3, 1), [(0, 0), (2, 2), (0, 0)]),  # size-1 axes left alone
]


def _pad(a_shape, pw, mode, dtype="float32", target="llvm"):
    A = te.placeholder(a_shape, dtype, name="A")
    B = topi.nn.pad(A, [b for b, _ in pw], [a for _, a in pw], pad_mode=mode)
    a = rand(a_shape, dtype)
    (b,) = run([A], B, [a], target=target)
    return a, b


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pw", CASES)
def test_pad_mode_matches_numpy(mode, shape, pw):
    a, b = _pad(shape, pw, mode)
    np.testing.assert_array_equal(b, np.pad(a, pw, mode=mode))


@pytest.mark.parametrize("mode,shape,pw", [
    ("edge", (1,), [(3, 5)]),                  # edge of a size-1 axis: repeats it
    ("edge", (3, 2), [(9, 1), (0, 11)]),       # edge pads far beyond the size
    ("wrap", (3,), [(5, 7)]),                  # wrap pads over several periods (a modulo)
    ("wrap", (2, 3), [(2, 2), (3, 3)]),        # exactly one period on each side
    ("wrap", (1, 4), [(2, 1), (0, 0)]),        # wrap of a size-1 axis
    ("reflect", (2, 5), [(1, 1), (4, 4)]),     # the largest reflect pads (size - 1)
])
def test_pad_mode_extremes(mode, shape, pw):
    a, b = _pad(shape, pw, mode)
    np.testing.assert_array_equal(b, np.pad(a, pw, mode=mode))


@pytest.mark.parametrize("mode", MODES)
def test_pad_mode_int_dtype_and_c_target(mode):
    pw = [(1, 2), (2, 1)]
    a, b = _pad((3, 4), pw, mode, dtype="int32", target="c")
    assert b.dtype == np.int32
    np.testing.assert_array_equal(b, np.pad(a, pw, mode=mode))


@pytest.mark.parametrize("mode", MODES)
def test_pad_mode_empty_tensor(mode):
    """An axis of size 0 that is not padded: the result is empty too (reads nothing)."""
    a, b = _pad((0, 3), [(0, 0), (1, 2)], mode)
    assert b.shape == (0, 6)


@pytest.mark.parametrize("shape,pw,match", [
    ((1,), [(1, 0)], r"reflect pads \(1, 0\) of axis 0 must be smaller than its size 1"),
    ((3, 2), [(0, 0), (0, 2)], r"reflect pads \(0, 2\) of axis 1 must be smaller than its size 2"),
    ((4,), [(4, 4)], "must be smaller than its size 4"),
])
def test_reflect_pads_too_large(shape, pw, match):
    A = te.placeholder(shape, name="A")
    with pytest.raises(ValueError, match=match):
        topi.nn.pad(A, [b for b, _ in pw], [a for _, a in pw], pad_mode="reflect")


@pytest.mark.parametrize("mode", MODES)
def test_mode_pad_of_empty_axis_refused(mode):
    A = te.placeholder((2, 0), name="A")
    with pytest.raises(ValueError, match=f"cannot pad the empty axis 1 in {mode} mode"):
        topi.nn.pad(A, [0, 1], [0, 0], pad_mode=mode)


def test_bad_mode_and_symbolic_pads():
    A = te.placeholder((3,), name="A")
    with pytest.raises(ValueError, match="pad_mode must be one of constant, edge, reflect, wrap"):
        topi.nn.pad(A, [1], [1], pad_mode="symmetric")
    n = te.var("n")
    with pytest.raises(ValueError, match="edge padding needs constant pads"):
        topi.nn.pad(A, [n], [1], pad_mode="edge")
