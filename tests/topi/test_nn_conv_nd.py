"""topi.nn N-d convolutions (1-D, 3-D, grouped, dilated, transposed) with the x86 schedule
against the numpy references (which are checked against the 2-D ones)."""

from __future__ import annotations

import numpy as np
import pytest

from tvmpy import te, topi
from tvmpy.topi import nn, testing

from .nn_util import check


def test_nd_references_agree_with_2d():
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (1, 4, 7, 8)).astype("float32")
    w = rng.uniform(-1, 1, (6, 2, 3, 3)).astype("float32")
    np.testing.assert_allclose(
        testing.conv_nd_python(a, w, [2, 1], [1, 0], [2, 1], [1, 2], 2),
        testing.group_conv2d_nchw_python(a, w, (2, 1), (1, 0, 2, 1), (1, 2), 2), rtol=1e-5)
    w2 = rng.uniform(-1, 1, (4, 3, 3, 4)).astype("float32")
    np.testing.assert_allclose(
        testing.conv_transpose_nd_python(a, w2, [2, 2], [1, 1], [0, 2], [1, 0]),
        testing.conv2d_transpose_nchw_python(a, w2, 2, (1, 1, 0, 2), (1, 0)), rtol=1e-5)


@pytest.mark.parametrize("groups,stride,pad,dil", [(1, 1, 0, 1), (2, 2, (1, 2), 2)])
def test_conv1d(groups, stride, pad, dil):
    A = te.placeholder((2, 4, 13), name="A")
    W = te.placeholder((6, 4 // groups, 3), name="W")
    out = nn.group_conv1d_ncw(A, W, stride, pad, dil, groups)
    before, after = (pad, pad) if isinstance(pad, int) else pad
    check([A, W], out, topi.x86.schedule_conv1d_ncw,
          lambda a, w: testing.conv_nd_python(a, w, [stride], [before], [after], [dil], groups))


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_conv3d(target):
    A = te.placeholder((1, 3, 5, 6, 7), name="A")
    W = te.placeholder((4, 3, 2, 3, 2), name="W")
    out = nn.conv3d_ncdhw(A, W, (1, 2, 1), (0, 1, 1, 1, 0, 1), 1)
    check([A, W], out, topi.x86.schedule_conv3d_ncdhw,
          lambda a, w: testing.conv_nd_python(a, w, [1, 2, 1], [0, 1, 1], [1, 0, 1], [1, 1, 1]),
          target=target)


def test_group_conv2d_transpose_dilated():
    A = te.placeholder((2, 4, 5, 6), name="A")
    W = te.placeholder((4, 3, 3, 2), name="W")
    out = nn.group_conv2d_transpose_nchw(A, W, (2, 1), (1, 0, 0, 1), None, (1, 0), 2, (1, 2))
    check([A, W], out, topi.x86.schedule_group_conv2d_transpose_nchw,
          lambda a, w: testing.conv_transpose_nd_python(a, w, [2, 1], [1, 0], [0, 1], [1, 0], 2,
                                                        [1, 2]))


def test_conv1d_conv3d_transpose():
    A = te.placeholder((1, 3, 7), name="A")
    W = te.placeholder((3, 2, 4), name="W")
    check([A, W], nn.conv1d_transpose_ncw(A, W, 3, 1, None, 2), topi.x86.schedule_conv_nd,
          lambda a, w: testing.conv_transpose_nd_python(a, w, [3], [1], [1], [2]))
    B = te.placeholder((1, 2, 3, 4, 3), name="B")
    V = te.placeholder((2, 3, 2, 2, 3), name="V")
    check([B, V], nn.conv3d_transpose_ncdhw(B, V, 2, 0, None, (1, 0, 1)),
          topi.x86.schedule_conv3d_transpose_ncdhw,
          lambda b, v: testing.conv_transpose_nd_python(b, v, [2, 2, 2], [0, 0, 0], [0, 0, 0],
                                                        [1, 0, 1]), target="c")


def test_conv_nd_errors():
    A = te.placeholder((1, 4, 9), name="A")
    with pytest.raises(ValueError, match="kernel expects 6 input channels"):
        nn.conv1d_ncw(A, te.placeholder((2, 6, 3)))
    with pytest.raises(ValueError, match="data must be 5-D"):
        nn.conv3d_ncdhw(A, te.placeholder((2, 4, 3, 3, 3)), 1, 0, 1)
    with pytest.raises(ValueError, match="padding must be >= 0 with 1, 1 or 2 values"):
        nn.conv1d_ncw(A, te.placeholder((2, 4, 3)), 1, (1, 2, 3))
    with pytest.raises(ValueError, match="output_padding .* must be smaller"):
        nn.conv1d_transpose_ncw(A, te.placeholder((4, 2, 3)), 1, 0, None, 1)
    with pytest.raises(ValueError, match="kernel has 3 input channels, data has 4"):
        nn.conv1d_transpose_ncw(A, te.placeholder((3, 2, 3)), 1, 0)
    with pytest.raises(ValueError, match="exceeds dilation"):
        nn.conv1d_transpose_ncw(A, te.placeholder((4, 2, 3)), 1, 3)
