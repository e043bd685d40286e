"""FoldScaleAxis (per-channel multiply after conv2d folded into the weights), alone and in the
SimplifyInference + FoldConstant + FoldScaleAxis pipeline on ResNet-18 (every batch_norm gone)."""

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay import printer, testing, transform
from tvmpy.relay.transform import bind_params_by_name


def _rand(shape, seed, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype("float32")


def _conv_scale_mod(layout, groups, scale_shape, scale_first=False):
    cin, cout = 4, 6 if groups == 1 else 4
    if layout == "NCHW":
        x = relay.var("x", shape=(2, cin, 7, 5))
        wshape, klayout = (cout, cin // groups, 3, 3), "OIHW"
    else:
        x = relay.var("x", shape=(2, 7, 5, cin))
        wshape, klayout = (3, 3, cin // groups, cout), "HWIO"
    w = relay.const(_rand(wshape, 1))
    y = relay.nn.conv2d(x, w, padding=(1, 1), groups=groups, data_layout=layout,
                        kernel_layout=klayout)
    s = relay.const(_rand(scale_shape(cout), 2, 0.5, 2.0))
    y = relay.multiply(s, y) if scale_first else relay.multiply(y, s)
    y = relay.add(y, relay.const(_rand(scale_shape(cout), 3)))
    return relay.IRModule.from_expr(relay.Function([x], relay.nn.relu(y)))


@pytest.mark.parametrize("layout,groups,scale_shape,scale_first", [
    ("NCHW", 1, lambda c: (c, 1, 1), False),
    ("NCHW", 1, lambda c: (1, c, 1, 1), True),
    ("NCHW", 4, lambda c: (c, 1, 1), False),       # depthwise
    ("NCHW", 1, lambda c: (), False),              # scalar
    ("NHWC", 1, lambda c: (c,), False),
    ("NHWC", 2, lambda c: (1, 1, 1, c), True),     # grouped
])  # fmt: skip
def test_fold(layout, groups, scale_shape, scale_first):
    mod = _conv_scale_mod(layout, groups, scale_shape, scale_first)
    out = transform.FoldScaleAxis()(mod)
    body = out["main"].body
    assert count_ops(body, "multiply") == 0 and count_ops(body, "nn.conv2d") == 1
    assert count_ops(body, "add") == 1
    lines = [ln.strip() for ln in printer.astext(out["main"], show_types=False).splitlines()[1:-1]]
    assert lines[0].startswith("%0 = nn.conv2d(%x, meta[relay.Constant]")
    assert lines[1].startswith("%1 = add(%0, ") and lines[2] == "nn.relu(%1)"
    inputs = random_inputs(mod["main"])
    np.testing.assert_allclose(run(out, inputs), run(mod, inputs), rtol=1e-5, atol=1e-5)


def test_not_folded_when_invalid():
    x = relay.var("x", shape=(1, 3, 5, 5))
    wv = relay.var("w", shape=(4, 3, 3, 3))
    w = relay.const(_rand((4, 3, 3, 3), 0))
    cases = [
        relay.multiply(relay.nn.conv2d(x, wv), relay.const(_rand((4, 1, 1), 1))),  # weight var
        relay.multiply(relay.nn.conv2d(x, w), relay.const(_rand((1, 1, 3), 1))),  # along W
        relay.multiply(relay.nn.conv2d(x, w), relay.var("s", shape=(4, 1, 1))),  # not constant
    ]
    conv = relay.nn.conv2d(x, w)
    cases.append(relay.add(relay.multiply(conv, relay.const(_rand((4, 1, 1), 1))), conv))  # 2 uses
    for body in cases:
        f = relay.Function(relay.analysis.free_vars(body), body)
        out = transform.FoldScaleAxis()(relay.IRModule.from_expr(f))
        assert count_ops(out["main"].body, "multiply") == 1, body


def test_resnet18_bn_folded():
    mod, params = testing.resnet.get_workload(num_layers=18, image_shape=(3, 32, 32),
                                                   num_classes=10)
    n_bn = count_ops(mod["main"].body, "nn.batch_norm")
    assert n_bn > 0
    n_conv = count_ops(mod["main"].body, "nn.conv2d")
    bound = relay.IRModule.from_expr(bind_params_by_name(mod["main"], params))
    seq = transform.Sequential([transform.SimplifyInference(), transform.FoldConstant(),
                                transform.FoldScaleAxis(), transform.FoldConstant()])
    with tvm.transform.PassContext(opt_level=3):
        out = seq(bound)
    body = out["main"].body
    assert count_ops(body, "nn.batch_norm") == 0
    assert count_ops(body, "multiply") == 0 and count_ops(body, "sqrt") == 0
    assert count_ops(body, "nn.conv2d") == n_conv
    assert count_ops(body, "add") == n_bn + 8  # one shift per batch_norm + 8 residual adds
    x = _rand((1, 3, 32, 32), 11)
    want = run(mod, {"data": x, **params})
    got = run(out, {"data": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
