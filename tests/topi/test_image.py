"""topi.image.resize2d against a numpy reference: nearest and linear, ONNX coordinate modes,
up- and down-sampling, NCHW and NHWC, bad arguments."""

import numpy as np
import pytest

from tvmpy import te, topi
from tvmpy.topi.testing import common_ref as ref

from .topi_util import rand, run

MODES = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("in_hw,out_hw", [((5, 7), (11, 3)), ((4, 6), (8, 12)), ((6, 9), (3, 1))])
def test_linear(mode, in_hw, out_hw):
    shape = (2, 3, *in_hw)
    A = te.placeholder(shape, "float32", name="A")
    a = rand(shape)
    B = topi.image.resize2d(A, None, out_hw, method="linear", coordinate_transformation_mode=mode)
    (b,) = run([A], B, [a])
    np.testing.assert_allclose(b, ref.resize2d_ref(a, out_hw, method="linear",
                                                   coordinate_transformation_mode=mode),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,rounding", [("half_pixel", "round_prefer_floor"),
                                           ("asymmetric", "floor"),
                                           ("align_corners", "round"),
                                           ("half_pixel", "round_prefer_ceil"),
                                           ("asymmetric", "ceil")])
@pytest.mark.parametrize("in_hw,out_hw", [((5, 7), (10, 3)), ((4, 6), (8, 12)), ((8, 8), (4, 4))])
def test_nearest(mode, rounding, in_hw, out_hw):
    shape = (1, 2, *in_hw)
    A = te.placeholder(shape, "float32", name="A")
    a = rand(shape)
    B = topi.image.resize2d(A, size=out_hw, method="nearest_neighbor",
                            coordinate_transformation_mode=mode, rounding_method=rounding)
    (b,) = run([A], B, [a])
    np.testing.assert_array_equal(b, ref.resize2d_ref(a, out_hw, method="nearest",
                                                      coordinate_transformation_mode=mode,
                                                      rounding_method=rounding))


def test_nhwc_int8_nearest_and_c_target():
    A = te.placeholder((1, 5, 6, 3), "int8", name="A")
    a = rand((1, 5, 6, 3), "int8")
    B = topi.image.resize2d(A, size=(10, 4), layout="NHWC", method="nearest",
                            coordinate_transformation_mode="asymmetric")
    (b,) = run([A], B, [a], target="c")
    np.testing.assert_array_equal(b, ref.resize2d_ref(a, (10, 4), layout="NHWC", method="nearest",
                                                      coordinate_transformation_mode="asymmetric",
                                                      rounding_method="floor"))


def test_bad_arguments():
    A = te.placeholder((1, 2, 3, 4), name="A")
    with pytest.raises(ValueError, match="method must be"):
        topi.image.resize2d(A, size=(2, 2), method="cubic")
    with pytest.raises(ValueError, match="coordinate_transformation_mode 'bogus'"):
        topi.image.resize2d(A, size=(2, 2), coordinate_transformation_mode="bogus")
    with pytest.raises(ValueError, match="needs a 4-D tensor"):
        topi.image.resize2d(te.placeholder((2, 3), name="B"), size=(2, 2))
    with pytest.raises(ValueError, match="size must be"):
        topi.image.resize2d(A, size=(2,))
