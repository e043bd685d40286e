"""``topi.image.resize2d(data, roi, size, ...)`` with TVM's positional ``roi`` ([0.0] * 4, as
TVM's callers pass it): ignored outside tf_crop_and_resize (not supported); same result as
``roi=None``, checked against numpy nearest-neighbour upsampling."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi


def test_roi_zeros_is_accepted_and_ignored():
    A = te.placeholder((1, 2, 3, 5), name="A")
    B = topi.image.resize2d(A, [0.0] * 4, (6, 15), method="nearest_neighbor",
                            coordinate_transformation_mode="asymmetric")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    a = np.random.default_rng(2).standard_normal((1, 2, 3, 5)).astype("float32")
    out = tvm.nd.empty((1, 2, 6, 15), "float32")
    f(tvm.nd.array(a), out)
    tvm.testing.assert_allclose(out.numpy(), a.repeat(2, axis=2).repeat(3, axis=3))
    with pytest.raises(ValueError, match="roi must be 4 numbers"):
        topi.image.resize2d(A, [0.0] * 3, (6, 15))
