"""topi.nn dense / matmul / batch_matmul and the x86 packed variants against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tvmpy import te, topi
from tvmpy.topi import nn, testing

from .nn_util import check


@pytest.mark.parametrize("m,n,k", [(1, 37, 19), (13, 70, 33), (2, 16, 1), (9, 5, 64)])
@pytest.mark.parametrize("packed", [False, True])
def test_dense(m, n, k, packed):
    A = te.placeholder((m, k), name="A")
    W = te.placeholder((n, k), name="W")
    B = te.placeholder((n,), name="bias")
    make = topi.x86.dense_pack if packed else nn.dense
    check([A, W, B], make(A, W, B), topi.x86.schedule_dense, testing.dense_python)


def test_dense_no_bias_c_target_and_fused_relu():
    A = te.placeholder((3, 11), name="A")
    W = te.placeholder((21, 11), name="W")
    check([A, W], topi.x86.dense_pack(A, W), topi.x86.schedule_dense_pack,
          testing.dense_python, target="c")
    check([A, W], topi.relu(nn.dense(A, W)), topi.x86.schedule_dense,
          lambda a, w: np.maximum(testing.dense_python(a, w), 0))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(ta, tb):
    m, n, k = 7, 19, 13
    A = te.placeholder((k, m) if ta else (m, k), name="A")
    B = te.placeholder((n, k) if tb else (k, n), name="B")
    bias = te.placeholder((n,), name="bias")
    out = nn.matmul(A, B, bias, transpose_a=ta, transpose_b=tb)
    check([A, B, bias], out, topi.x86.schedule_matmul,
          lambda a, b, c: testing.matmul_python(a, b, c, ta, tb))


@pytest.mark.parametrize("ba,bb,ta,tb", [
    (2, 2, False, True), (2, 1, False, True), (1, 3, False, False), (2, 2, True, False),
])
def test_batch_matmul(ba, bb, ta, tb):
    m, n, k = 7, 19, 9
    A = te.placeholder((ba, k, m) if ta else (ba, m, k), name="A")
    B = te.placeholder((bb, n, k) if tb else (bb, k, n), name="B")
    out = nn.batch_matmul(A, B, transpose_a=ta, transpose_b=tb)
    check([A, B], out, topi.x86.schedule_batch_matmul,
          lambda a, b: testing.batch_matmul_python(a, b, ta, tb))


@pytest.mark.parametrize("ba,bb,target", [(2, 2, "llvm"), (1, 3, "llvm"), (2, 1, "c")])
def test_batch_matmul_pack(ba, bb, target):
    A = te.placeholder((ba, 5, 12), name="A")
    B = te.placeholder((bb, 40, 12), name="B")
    check([A, B], topi.x86.batch_matmul_pack(A, B), topi.x86.schedule_batch_matmul,
          testing.batch_matmul_python, target=target)


def test_dense_errors():
    A = te.placeholder((4, 8), name="A")
    with pytest.raises(ValueError, match="data has 8 input features"):
        nn.dense(A, te.placeholder((5, 7), name="W"))
    with pytest.raises(ValueError, match="tensor_a must be 2-D"):
        nn.dense(te.placeholder((4,), name="x"), te.placeholder((5, 4), name="W"))
    with pytest.raises(ValueError, match="bias has 4 elements.*5 columns"):
        nn.dense(A, te.placeholder((5, 8), name="W"), te.placeholder((4,), name="b"))
    with pytest.raises(ValueError, match="reduction extents differ"):
        nn.matmul(A, te.placeholder((7, 3), name="B"))
    with pytest.raises(ValueError, match="batch sizes 2 and 3 differ"):
        nn.batch_matmul(te.placeholder((2, 4, 8)), te.placeholder((3, 5, 8)))
    with pytest.raises(ValueError, match="tensor_b must be 3-D"):
        nn.batch_matmul(te.placeholder((2, 4, 8)), te.placeholder((5, 8)))
    with pytest.raises(ValueError, match="weight .* expects 7"):
        topi.x86.dense_pack(A, te.placeholder((5, 7), name="W"))
    with pytest.raises(ValueError, match="no dense/matmul/batch_matmul stage"):
        topi.x86.schedule_dense([topi.relu(A)])
