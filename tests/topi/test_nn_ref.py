"""The shared numpy references (``tvmpy.topi.testing``) against eager torch, so the operator
tests that compare with them compare with something right: grouped / dilated / strided /
asymmetrically padded convolution, pooling with padding and ceil mode, softmax, layer norm."""

from __future__ import annotations

import numpy as np
import pytest

from tvmpy.topi import testing

torch = pytest.importorskip("torch")
F = torch.nn.functional
RNG = np.random.default_rng(13)


def _t(a: np.ndarray):
    return torch.from_numpy(a.astype(np.float64))


# (N, C, H, W, OC, groups, KH, KW, stride, (top, left, bottom, right), dilation)
CONV_CASES = [
    (1, 6, 7, 11, 6, 2, 3, 3, 1, (1, 1, 1, 1), 1),
    (2, 9, 5, 13, 15, 3, 3, 3, 2, (2, 2, 2, 2), 2),
    (1, 10, 9, 9, 10, 5, 3, 3, 1, (3, 3, 3, 3), 3),
    (1, 10, 15, 7, 10, 10, 5, 7, 1, (2, 3, 2, 3), 1),  # depthwise, asymmetric window
    (1, 4, 8, 9, 6, 1, 2, 3, (2, 3), (0, 1, 2, 0), (2, 1)),  # uneven stride/dilation/pad
    (1, 3, 1, 1, 5, 1, 1, 1, 1, (0, 0, 0, 0), 1),  # size-1 map
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_group_conv2d_reference_matches_torch(case):
    n, c, h, w, oc, groups, kh, kw, stride, pad, dil = case
    x = RNG.uniform(-1, 1, (n, c, h, w)).astype("float32")
    wt = RNG.uniform(-1, 1, (oc, c // groups, kh, kw)).astype("float32")
    got = testing.group_conv2d_nchw_python(x, wt, stride, pad, dil, groups)
    pt, pl, pb, pr = pad
    want = F.conv2d(F.pad(_t(x), (pl, pr, pt, pb)), _t(wt), stride=stride, dilation=dil,
                    groups=groups).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,pad,ceil,include_pad", [
    (3, 2, (0, 0, 0, 0), False, True), (3, 2, (1, 1, 1, 1), True, False),
    (2, 3, (1, 0, 1, 0), True, True), (3, 1, (1, 1, 1, 1), False, True)])
def test_pool2d_reference_matches_torch(kind, k, s, pad, ceil, include_pad):
    x = RNG.standard_normal((2, 3, 11, 13)).astype("float32")
    got = testing.pool2d_python(x, k, s, 1, pad, kind, ceil, include_pad)
    pt, pl = pad[:2]  # torch pads symmetrically: these cases have top == bottom, left == right
    if kind == "max":
        want = F.max_pool2d(_t(x), k, s, (pt, pl), ceil_mode=ceil)
    else:
        want = F.avg_pool2d(_t(x), k, s, (pt, pl), ceil_mode=ceil,
                            count_include_pad=include_pad)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,axis", [((3, 37), -1), ((2, 5, 7), 1), ((4, 1), -1)])
def test_softmax_references_match_torch(shape, axis):
    x = (RNG.standard_normal(shape) * 4).astype("float32")
    np.testing.assert_allclose(testing.softmax_python(x, axis), F.softmax(_t(x), axis).numpy(),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(testing.log_softmax_python(x, axis),
                               F.log_softmax(_t(x), axis).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(3, 67), (2, 5, 1), (2, 12, 48)])
def test_layer_norm_reference_matches_torch(shape):
    x = RNG.standard_normal(shape).astype("float32")
    g, b = RNG.standard_normal(shape[-1:]).astype("float32"), RNG.standard_normal(
        shape[-1:]).astype("float32")
    want = F.layer_norm(_t(x), shape[-1:], _t(g), _t(b), eps=1e-5).numpy()
    np.testing.assert_allclose(testing.layer_norm_python(x, g, b, -1, 1e-5), want,
                               rtol=1e-4, atol=1e-5)
