"""x86 Legalize of ``nn.conv1d``: a strided, ungrouped NCW conv1d becomes a conv2d over a 1-row
image (relay/op/strategy/x86.py ``conv1d_as_conv2d``); results against numpy on awkward shapes,
with the weight a constant (AlterOpLayout packs it) and a graph input."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.op.strategy.x86 import conv1d_as_conv2d
from tvmpy.relay.type_infer import infer_type

RNG = np.random.default_rng(5)


def _ref(x, w, stride, pad, dil, groups):
    n, c, width = x.shape
    oc, icg, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pad)).astype(np.float64)
    ow = (width + sum(pad) - dil * (k - 1) - 1) // stride + 1
    out = np.zeros((n, oc, ow))
    ocg = oc // groups
    for o in range(oc):
        g = o // ocg
        for t in range(k):
            cols = xp[:, g * icg:(g + 1) * icg, t * dil: t * dil + stride * (ow - 1) + 1: stride]
            out[:, o] += np.einsum("ncw,c->nw", cols, w[o, :, t])
    return out


def _build_run(x, w, stride, pad, dil, groups, const_w, bias):
    xv = relay.var("x", shape=x.shape)
    wv = relay.const(w) if const_w else relay.var("w", shape=w.shape)
    y = relay.nn.conv1d(xv, wv, strides=stride, padding=pad, dilation=dil, groups=groups)
    if bias is not None:
        y = relay.nn.relu(relay.nn.bias_add(y, relay.const(bias)))
    params = [xv] if const_w else [xv, wv]
    mod = tvm.IRModule.from_expr(relay.Function(params, y))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    gm.set_input("x", x)
    if not const_w:
        gm.set_input("w", w)
    gm.run()
    return gm.get_output(0).numpy()


@pytest.mark.parametrize("n,c,oc,width,k,stride,pad,dil,groups", [
    (1, 16, 32, 40, 3, 2, (1, 1), 1, 1),   # whisper's second conv, small
    (2, 7, 5, 31, 4, 3, (2, 1), 1, 1),     # primes, even kernel, asymmetric padding
    (1, 3, 1, 17, 3, 2, (0, 0), 2, 1),     # one output channel, dilated
    (1, 1, 13, 9, 1, 5, (0, 3), 1, 1),     # one input channel, 1-tap kernel, padding only right
    (1, 13, 19, 64, 5, 2, (2, 2), 1, 1),
    (1, 6, 9, 23, 3, 1, (1, 1), 1, 1),     # stride 1, few channels: kept as conv1d
    (1, 19, 11, 37, 3, 1, (1, 1), 1, 1),   # stride 1, >= 16 channels: rewritten
    (2, 16, 8, 29, 5, 1, (2, 2), 2, 1),    # the same, dilated, batch 2
    (2, 6, 9, 23, 3, 2, (1, 1), 1, 3),     # grouped: kept as conv1d
])
@pytest.mark.parametrize("const_w", [True, False])
def test_conv1d_matches_numpy(n, c, oc, width, k, stride, pad, dil, groups, const_w):
    x = RNG.standard_normal((n, c, width)).astype(np.float32)
    w = RNG.standard_normal((oc, c // groups, k)).astype(np.float32)
    bias = RNG.standard_normal(oc).astype(np.float32) if const_w else None
    got = _build_run(x, w, stride, pad, dil, groups, const_w, bias)
    want = _ref(x, w, stride, pad, dil, groups)
    if bias is not None:
        want = np.maximum(want + bias[None, :, None], 0)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _call(stride, groups=1, channels=6):
    x = relay.var("x", shape=(1, channels, 20))
    w = relay.var("w", shape=(6, channels // groups, 3))
    call = relay.nn.conv1d(x, w, strides=stride, padding=1, groups=groups)
    return infer_type(relay.Function([x, w], call)).body


def test_rewrite_only_strided_ungrouped_ncw():
    c = _call(2)
    out = conv1d_as_conv2d(c.attrs, list(c.args), [a.checked_type for a in c.args])
    assert out is not None and out.op.name == "squeeze"
    assert out.args[0].op.name == "nn.conv2d"
    for stride, groups in ((1, 1), (2, 2)):
        c = _call(stride, groups)
        assert conv1d_as_conv2d(c.attrs, list(c.args), [a.checked_type for a in c.args]) is None
    # unstrided with enough input channels (CONV1D_AS_CONV2D_MIN_CHANNELS): rewritten
    c = _call(1, channels=16)
    out = conv1d_as_conv2d(c.attrs, list(c.args), [a.checked_type for a in c.args])
    assert out is not None and out.args[0].op.name == "nn.conv2d"
    c = _call(1, channels=15)
    assert conv1d_as_conv2d(c.attrs, list(c.args), [a.checked_type for a in c.args]) is None
