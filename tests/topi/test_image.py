"""topi.image.resize2d against a numpy reference: nearest and linear, ONNX coordinate modes,
up- and down-sampling, NCHW and NHWC, bad arguments."""

import numpy as np
import pytest

import tvmpy as tvm
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


ROUNDINGS = ["floor", "ceil", "round", "round_prefer_floor", "round_prefer_ceil"]


@pytest.mark.parametrize("target", ["llvm", "c"])
@pytest.mark.parametrize("mode", [*MODES, "tf_half_pixel_for_nn"])
def test_nearest_exact_ties(mode, target):
    """Sizes whose source coordinates fall exactly on .5 or on integers (2 -> 7 at half_pixel:
    (3 + 0.5) * 2/7 - 0.5 == 0.5): every rounding mode decides them as defined, also under the
    x86 injective schedule (vectorized; float arithmetic there would see 0.50000004 after a
    fused multiply-add)."""
    sizes = [((2, 2), (7, 7)), ((3, 4), (5, 10)), ((7, 6), (2, 4)), ((1, 5), (4, 3)),
             ((4, 3), (7, 9))]
    for in_hw, out_hw in sizes:
        shape = (1, 3, *in_hw)
        a = rand(shape)
        for how in ROUNDINGS:
            A = te.placeholder(shape, "float32", name="A")
            B = topi.image.resize2d(A, size=out_hw, method="nearest_neighbor",
                                    coordinate_transformation_mode=mode, rounding_method=how)
            (b,) = run([A], B, [a], target=target)
            want = ref.resize2d_ref(a, out_hw, method="nearest",
                                    coordinate_transformation_mode=mode, rounding_method=how)
            np.testing.assert_array_equal(b, want, err_msg=f"{in_hw}->{out_hw} {how}")


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


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout,shape,out_hw,dtype", [
    ("NCHW", (1, 21, 16, 16), (256, 256), "float32"),  # DeepLabV3's final upsample
    ("NCHW", (2, 3, 5, 7), (11, 3), "float32"),         # up in H, down in W
    ("NCHW", (1, 2, 1, 1), (13, 17), "float32"),        # a 1x1 map
    ("NHWC", (1, 7, 5, 3), (29, 31), "float32"),
    ("NCHW", (1, 2, 6, 4), (12, 9), "uint8"),           # integer image: rounded
])
def test_separable_linear_matches_one_pass(mode, layout, shape, out_hw, dtype):
    """The x86 form of a linear resize (a width pass into ``resize2d_rows``, then a height
    pass over two rows: no 4-pixel gathers) gives the one-pass compute's values (the same
    operations in the same order; FMA contraction may differ by an ulp) and is scheduled (its
    rows stage vectorized, not left as a scalar loop)."""
    A = te.placeholder(shape, dtype, name="A")
    a = rand(shape, dtype, low=0, high=9) if dtype == "uint8" else rand(shape)
    kw = dict(size=out_hw, layout=layout, method="linear", coordinate_transformation_mode=mode)
    one = topi.image.resize2d(A, **kw)
    two = topi.image.resize2d(A, **kw, separable=True)
    assert any(t.op.tag == "resize2d_rows" for t in two.op.input_tensors)
    (b1,) = run([A], one, [a])
    (b2,) = run([A], two, [a])
    if dtype == "uint8":
        assert np.abs(b2.astype(int) - b1.astype(int)).max() <= 1
    else:
        np.testing.assert_allclose(b2, b1, rtol=1e-6, atol=1e-6)
    if layout == "NCHW" and out_hw[1] >= 16:  # rows of a vector or more: vector stores
        s = topi.x86.schedule_injective([two])
        text = str(tvm.lower(s, [A, two], simple_mode=True))
        assert "resize2d_rows[ramp(" in text, text
