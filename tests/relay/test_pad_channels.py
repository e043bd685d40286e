"""PadChannels (relay/transform/pad_channels.py): half-vector channel counts of conv chains
padded to whole vectors; the built models against numpy, and the components it must leave."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay.testing import compare
from tvmpy.relay.transform.pad_channels import PadChannels, padded_channels
from tvmpy.topi import testing

RNG = np.random.default_rng(7)
AMX = "llvm -mcpu=sapphirerapids"  # two 512-bit FMA units; only transformed here, never run


def _w(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype("float32")


def _typed(body: relay.Expr, x: relay.Var) -> tvm.IRModule:
    return relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], body)))


def _channels(mod: tvm.IRModule) -> list[int]:
    """Output channels of every nn.conv2d of ``mod``, in graph order."""
    out: list[int] = []

    def visit(e):
        if isinstance(e, relay.Call) and getattr(e.op, "name", "") == "nn.conv2d":
            out.append(int(e.checked_type.shape[1]))

    relay.analysis.post_order_visit(mod["main"], visit)
    return out


def _block(x, c_in, c_mid, c_out, h_stride, *, k=3, dil=1, act="relu", residual=True):
    """An inverted-residual block in numpy and relay: 1x1 expand + bias + act, depthwise kxk
    (stride, dilation) + act, 1x1 project + bias (+ the input when shapes allow)."""
    w1, b1 = _w(c_mid, c_in, 1, 1), _w(c_mid)
    wd = _w(c_mid, 1, k, k)
    w2, b2 = _w(c_out, c_mid, 1, 1), _w(c_out)
    pad = dil * (k // 2)

    def act_r(e):
        return relay.nn.relu(e) if act == "relu" else relay.clip(e, 0.0, 6.0)

    def act_n(a):
        return np.maximum(a, 0) if act == "relu" else np.clip(a, 0, 6)

    def rel(e):
        y = act_r(relay.nn.bias_add(relay.nn.conv2d(e, relay.const(w1)), relay.const(b1)))
        y = act_r(relay.nn.conv2d(y, relay.const(wd), strides=(h_stride, h_stride),
                                  padding=(pad, pad), dilation=(dil, dil), groups=c_mid,
                                  channels=c_mid, kernel_size=(k, k)))
        y = relay.nn.bias_add(relay.nn.conv2d(y, relay.const(w2)), relay.const(b2))
        return relay.add(y, e) if residual else y

    def ref(a):
        y = act_n(testing.conv2d_nchw_python(a, w1, 1, 0) + b1[None, :, None, None])
        y = act_n(testing.group_conv2d_nchw_python(y, wd, h_stride, pad, dil, c_mid))
        y = testing.conv2d_nchw_python(y, w2, 1, 0) + b2[None, :, None, None]
        return y + a if residual else y

    return rel, ref


CASES = [
    # (input channels, stem out, blocks [(mid, out, stride, k, dilation, act, residual)], H, W)
    (3, 24, [(72, 24, 1, 3, 1, "relu", True), (72, 40, 2, 5, 1, "relu", False),
             (120, 40, 1, 5, 1, "clip", True)], 13, 11),
    (5, 40, [(120, 40, 1, 3, 2, "relu", True), (240, 48, 2, 3, 1, "clip", False)], 7, 17),
    (8, 24, [(72, 24, 1, 3, 1, "relu", True)], 1, 5),
]


@pytest.mark.parametrize("case", CASES)
def test_padded_chains_match_numpy(case):
    """Inverted-residual chains of 24 / 40 / 72 / 120 channels (stride 2, 5x5, dilation,
    clip, a 1-row map, prime widths): the pass's result for a two-FMA-unit target (its
    convolutions' channels whole 16-lane vectors) built on this host, and the original built
    with the pass (default) and without, all equal numpy."""
    cin, stem, blocks, h, w = case
    x = relay.var("x", shape=(1, cin, h, w), dtype="float32")
    ws = _w(stem, cin, 3, 3)
    e = relay.nn.relu(relay.nn.conv2d(x, relay.const(ws), padding=(1, 1)))
    refs = []
    c = stem
    for mid, out, stride, k, dil, act, res in blocks:
        rel, ref = _block(None, c, mid, out, stride, k=k, dil=dil, act=act,
                          residual=res and out == c and stride == 1)
        e = rel(e)
        refs.append(ref)
        c = out
    wl = _w(16, c, 1, 1)
    e = relay.nn.conv2d(e, relay.const(wl))  # a whole-vector consumer: the chain ends padded
    a = RNG.uniform(-1, 1, (1, cin, h, w)).astype("float32")
    want = np.maximum(testing.conv2d_nchw_python(a, ws, 1, 1), 0)
    for ref in refs:
        want = ref(want)
    want = testing.conv2d_nchw_python(want, wl, 1, 0)
    mod = _typed(e, x)
    with tvm.target.Target(AMX):
        padded = relay.transform.InferType()(PadChannels()(mod))
    assert all(ch % 16 == 0 for ch in _channels(padded)), _channels(padded)
    # the padded module itself on this host (whatever its FMA units: the pass's result is
    # checked even where relay.build would not pad), and the original with and without the pass
    for m, flag in ((padded, False), (mod, True), (mod, False)):
        lib, _ = compare.build(m, {}, config={"relay.x86.pad_channels": flag})
        got = compare.tvm_runner(lib)({"x": a})[0]
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def _chain(consumer):
    x = relay.var("x", shape=(1, 16, 9, 7), dtype="float32")
    a = relay.nn.bias_add(relay.nn.conv2d(x, relay.const(_w(24, 16, 1, 1))), relay.const(_w(24)))
    b = relay.nn.relu(relay.nn.conv2d(a, relay.const(_w(72, 24, 1, 1))))
    return _typed(consumer(a, b), x)


@pytest.mark.parametrize("consumer", [
    lambda a, b: relay.nn.global_avg_pool2d(b),  # a pool reads the 72 channels
    lambda a, b: relay.Tuple([b, a]),  # graph outputs
    lambda a, b: relay.concatenate([b, b], axis=1),
    lambda a, b: relay.multiply(b, relay.nn.global_avg_pool2d(b)),  # an SE-like scale
    lambda a, b: relay.nn.conv2d(b, relay.const(_w(16, 72, 3, 3)), padding=(1, 1)),  # 3x3
])
def test_components_with_other_consumers_are_left(consumer):
    """A component read by anything but a plain convolution or one of its own members keeps
    its channels (no crop is ever added); the other components are still padded."""
    mod = _chain(consumer)
    new = relay.transform.InferType()(PadChannels(16)(mod))
    assert _channels(new)[1] == 72
    assert "strided_slice" not in str(new)


def test_component_from_a_graph_input_is_left():
    """A residual add with a graph input: its producer is no convolution, nothing is padded."""
    x = relay.var("x", shape=(1, 24, 5, 5), dtype="float32")
    a = relay.add(relay.nn.conv2d(x, relay.const(_w(24, 24, 1, 1))), x)
    mod = _typed(relay.nn.conv2d(a, relay.const(_w(16, 24, 1, 1))), x)
    new = relay.transform.InferType()(PadChannels(16)(mod))
    assert _channels(new) == [24, 16]


def test_padded_channels_rule():
    assert [padded_channels(c, 16) for c in (8, 24, 40, 72, 120, 16, 48, 12, 20, 57)] == \
        [16, 32, 48, 80, 128, 16, 48, 12, 20, 57]
    assert padded_channels(24, 8) == 24 and padded_channels(12, 8) == 16


def test_no_cpu_target_no_padding():
    """Without a CPU target with two 512-bit FMA units (no target, Zen 4, Skylake-SP, AVX2) or
    with pad_channels False the pass does nothing."""
    mod = _chain(lambda a, b: relay.nn.conv2d(b, relay.const(_w(16, 72, 1, 1))))
    assert _channels(relay.transform.InferType()(PadChannels()(mod))) == [24, 72, 16]
    for other in ("llvm -mcpu=znver4", "llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell"):
        with tvm.target.Target(other):
            assert _channels(relay.transform.InferType()(PadChannels()(mod))) == [24, 72, 16]
    with tvm.target.Target(AMX):
        assert _channels(relay.transform.InferType()(PadChannels()(mod))) == [32, 80, 16]
        with tvm.transform.PassContext(config={"relay.x86.pad_channels": False}):
            assert _channels(relay.transform.InferType()(PadChannels()(mod))) == [24, 72, 16]
