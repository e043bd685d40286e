"""TVM 0.7's ``relay.image.resize`` (0.8: ``resize2d``): 0.7's method names map onto resize2d;
run against torch's interpolate (bilinear, align_corners) on odd sizes."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay


def test_resize_is_resize2d_with_v07_names():
    x = relay.var("x", shape=(1, 2, 5, 7))
    for old, new in (("bilinear", "linear"), ("bicubic", "cubic"),
                     ("nearest_neighbor", "nearest_neighbor")):
        a = relay.image.resize(x, (9, 4), method=old, coordinate_transformation_mode="asymmetric")
        b = relay.image.resize2d(x, (9, 4), method=new,
                                 coordinate_transformation_mode="asymmetric")
        assert tvm.ir.structural_equal(a, b)
    with pytest.raises(ValueError, match="TVM 0.7's names"):
        relay.image.resize(x, (9, 4), method="linear")


def test_resize_bilinear_align_corners_matches_torch():
    torch = pytest.importorskip("torch")
    x = relay.var("x", shape=(2, 3, 5, 7))
    y = relay.image.resize(x, (11, 4), method="bilinear",
                           coordinate_transformation_mode="align_corners")
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    a = np.random.default_rng(4).standard_normal((2, 3, 5, 7)).astype("float32")
    out = relay.create_executor("graph", mod=mod, target="llvm").evaluate()(a).numpy()
    ref = torch.nn.functional.interpolate(torch.from_numpy(a), size=(11, 4), mode="bilinear",
                                          align_corners=True).numpy()
    tvm.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
