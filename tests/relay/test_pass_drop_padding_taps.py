"""DropPaddingTaps: conv2d taps that read only padding are dropped (dilations as large as the
map: DeepLabV3's ASPP), partly dead windows are split into output bands; results equal eager
torch's convolution."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.expr import Call
from tvmpy.relay.transform import DropPaddingTaps, bind_params_by_name
from tvmpy.relay.transform.drop_padding_taps import bands, kept_taps
from tvmpy.relay.visitor import post_order_visit

RNG = np.random.default_rng(7)


def _conv_mod(xshape: tuple, wshape: tuple, layout: str = "NCHW", **kw: object) -> tuple:
    x = relay.var("x", shape=xshape)
    w = relay.var("w", shape=wshape)
    klayout = "HWIO" if layout == "NHWC" else "OIHW"
    y = relay.nn.relu(relay.nn.conv2d(x, w, data_layout=layout, kernel_layout=klayout, **kw))
    return tvm.IRModule.from_expr(relay.Function([x, w], y))


def _torch(x: np.ndarray, w: np.ndarray, strides: tuple, padding: tuple, dilation: tuple,
           groups: int = 1) -> np.ndarray:
    t, left, b, r = padding
    xp = torch.nn.functional.pad(torch.tensor(x), (left, r, t, b))
    y = torch.nn.functional.conv2d(xp, torch.tensor(w), stride=strides, dilation=dilation,
                                   groups=groups)
    return torch.relu(y).numpy()


def _run(mod: tvm.IRModule, w: np.ndarray, x: np.ndarray, opt_level: int = 3) -> np.ndarray:
    with tvm.transform.PassContext(opt_level=opt_level):
        lib = relay.build(mod, "llvm", params={"w": w})
    m = graph_executor.GraphModule(lib["default"](tvm.runtime.cpu(0)))
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


def _convs(mod: tvm.IRModule) -> list[Call]:
    out: list[Call] = []
    post_order_visit(mod["main"], lambda e: out.append(e) if isinstance(e, Call) and getattr(
        e.op, "name", "") == "nn.conv2d" else None)
    return out


def _rewritten(mod: tvm.IRModule, w: np.ndarray) -> tvm.IRModule:
    main = bind_params_by_name(mod["main"], {"w": w})
    with tvm.transform.PassContext(opt_level=3):
        return DropPaddingTaps()(tvm.IRModule.from_expr(main))


CASES = [  # x (NCHW), oc, kernel (kh, kw), strides, padding (t, l, b, r), dilation, groups
    ((1, 5, 16, 16), 7, (3, 3), (1, 1), (24, 24, 24, 24), (24, 24), 1),  # every outer tap dead
    ((1, 5, 16, 16), 7, (3, 3), (1, 1), (12, 12, 12, 12), (12, 12), 1),  # 3 x 3 bands
    ((1, 3, 13, 11), 4, (3, 3), (1, 1), (36, 36, 36, 36), (36, 36), 1),  # dilation > map
    ((2, 3, 7, 5), 4, (3, 3), (2, 2), (6, 6, 6, 6), (6, 6), 1),           # stride 2
    ((1, 4, 9, 9), 6, (3, 3), (1, 1), (5, 2, 7, 3), (5, 3), 2),           # asymmetric, groups
    ((1, 3, 1, 1), 5, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),           # a 1x1 map
    ((1, 2, 11, 17), 3, (5, 3), (1, 1), (8, 4, 8, 4), (4, 9), 1),         # 5x3, rectangular
    ((1, 3, 8, 8), 2, (3, 3), (1, 1), (1, 1, 1, 1), (2, 2), 1),           # nothing dead
    ((1, 3, 12, 12), 2, (3, 3), (1, 1), (0, 0, 0, 0), (5, 5), 1),         # no padding at all
]


@pytest.mark.parametrize("xs,oc,k,strides,padding,dilation,groups", CASES)
def test_drop_padding_taps_matches_torch(xs, oc, k, strides, padding, dilation, groups):
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal((oc, xs[1] // groups, *k)).astype("float32")
    mod = _conv_mod(xs, w.shape, strides=strides, padding=padding, dilation=dilation,
                    groups=groups)
    want = _torch(x, w, strides, padding, dilation, groups)
    for lvl in (3, 2):
        np.testing.assert_allclose(_run(mod, w, x, lvl), want, rtol=1e-4, atol=1e-4)


def test_nhwc_layout_matches_torch():
    """NHWC/HWIO (no x86 compute of its own: the rewritten graph runs on the reference
    interpreter)."""
    x = RNG.standard_normal((1, 16, 13, 5)).astype("float32")
    w = RNG.standard_normal((7, 5, 3, 3)).astype("float32")
    for d in (12, 24):
        mod = _conv_mod(x.shape, (3, 3, 5, 7), layout="NHWC", padding=(d, d), dilation=(d, d))
        new = _rewritten(mod, w.transpose(2, 3, 1, 0).copy())
        got = np.asarray(relay.create_executor("debug", mod=new).evaluate()(x))
        want = _torch(x.transpose(0, 3, 1, 2), w, (1, 1), (d,) * 4, (d, d))
        np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
        assert all(tuple(c.attrs.padding) == (0, 0, 0, 0) for c in _convs(new))


def test_aspp_dilation_24_becomes_a_1x1_convolution():
    """On a 16x16 map with dilation 24 only the centre tap reads data: one 1x1 conv, no
    padding (before, 9 taps were multiplied over a 64x64 padded map)."""
    w = RNG.standard_normal((8, 6, 3, 3)).astype("float32")
    mod = _rewritten(_conv_mod((1, 6, 16, 16), w.shape, padding=(24, 24), dilation=(24, 24)),
                     w)
    (conv,) = _convs(mod)
    assert tuple(conv.attrs.padding) == (0, 0, 0, 0)
    assert tuple(conv.args[1].checked_type.shape[2:]) == (1, 1)
    assert tuple(conv.attrs.dilation) == (1, 1)


def test_dilation_12_is_split_into_bands_without_padding():
    w = RNG.standard_normal((8, 6, 3, 3)).astype("float32")
    mod = _rewritten(_conv_mod((1, 6, 16, 16), w.shape, padding=(12, 12), dilation=(12, 12)),
                     w)
    convs = _convs(mod)
    assert len(convs) == 9
    assert all(tuple(c.attrs.padding) == (0, 0, 0, 0) for c in convs)
    macs = sum(int(np.prod(c.checked_type.shape)) * int(np.prod(c.args[1].checked_type.shape[2:]))
               for c in convs)
    assert macs == 8 * 16 * 16 * 9 // 4  # a quarter of the taps read data


def test_ordinary_convolutions_are_left_alone():
    w = RNG.standard_normal((8, 6, 3, 3)).astype("float32")
    for pad, dil in (((1, 1), (1, 1)), ((2, 2), (2, 2))):
        mod = _rewritten(_conv_mod((1, 6, 32, 32), w.shape, padding=pad, dilation=dil), w)
        (conv,) = _convs(mod)
        assert tuple(conv.attrs.padding) == (*pad, *pad)
        assert tuple(conv.args[1].checked_type.shape[2:]) == (3, 3)


def test_tap_ranges():
    # 16 rows, 3 taps, dilation 12, padding 12: tap 0 reads rows 12-15 only, tap 2 rows 0-3
    assert kept_taps(16, 3, 1, 12, 12, 12) == (0, 2)
    assert kept_taps(16, 3, 1, 24, 24, 24) == (1, 1)
    assert kept_taps(1, 2, 1, 10, 5, 5) is None  # no tap reads the single row
    assert bands(16, 3, 1, 12, 12, 12) == [(0, 4, 1, 2), (4, 12, 1, 1), (12, 16, 0, 1)]
    assert bands(5, 3, 1, 1, 1, 1) == [(0, 1, 1, 2), (1, 4, 0, 2), (4, 5, 0, 1)]


def test_batch_norm_folds_before_the_split():
    """DeepLabV3's ASPP branch (conv without bias -> batch norm -> relu): the batch norm's
    scale folds into the whole convolution's weights first (FoldScaleAxis), then the
    convolution is split into bands; no multiply is left, and the values are torch's."""
    from tvmpy.relay.build_module import optimize

    x = RNG.standard_normal((1, 6, 16, 16)).astype("float32")
    w = RNG.standard_normal((8, 6, 3, 3)).astype("float32")
    g, b, mu = (RNG.uniform(0.5, 1.5, 8).astype("float32") for _ in range(3))
    var = RNG.uniform(0.5, 2, 8).astype("float32")
    xv, wv = relay.var("x", shape=x.shape), relay.var("w", shape=w.shape)
    y = relay.nn.conv2d(xv, wv, padding=(12, 12), dilation=(12, 12))
    y = relay.nn.relu(relay.nn.batch_norm(y, *(relay.const(v) for v in (g, b, mu, var)))[0])
    mod = tvm.IRModule.from_expr(relay.Function([xv, wv], y))
    with tvm.transform.PassContext(opt_level=3):
        opt = optimize(mod, {"w": w})
    n_mul = [0]
    post_order_visit(opt["main"], lambda e: n_mul.__setitem__(0, n_mul[0] + (
        isinstance(e, Call) and getattr(e.op, "name", "") == "multiply")))
    assert n_mul[0] == 0
    conv = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=12, dilation=12)
    bn = torch.nn.functional.batch_norm(conv, torch.tensor(mu), torch.tensor(var),
                                        torch.tensor(g), torch.tensor(b), eps=1e-5)
    np.testing.assert_allclose(_run(mod, w, x), torch.relu(bn).numpy(), rtol=1e-4, atol=1e-4)


TAP_SUM_CASES = CASES[1:2] + CASES[3:5] + CASES[6:7] + [
    ((1, 24, 14, 14), 20, (3, 3), (1, 1), (12, 12, 12, 12), (12, 12), 1),  # ASPP-like
    ((1, 6, 13, 11), 5, (3, 3), (1, 1), (10, 7, 9, 8), (10, 9), 1),         # asymmetric, prime
    ((2, 8, 17, 13), 6, (3, 3), (2, 3), (12, 11, 12, 13), (12, 11), 2),     # strides, groups
    ((1, 5, 3, 2), 4, (3, 3), (1, 1), (7, 5, 7, 5), (7, 5), 1),             # tiny map
]


@pytest.mark.parametrize("xs,oc,k,strides,padding,dilation,groups", TAP_SUM_CASES)
def test_tap_sum_matches_torch(xs, oc, k, strides, padding, dilation, groups, monkeypatch):
    """The per-tap sum forced (its byte model set to always pay): one single-tap conv per live
    tap, zero-padded and summed, equals torch's convolution."""
    from tvmpy.relay.transform import drop_padding_taps as dpt

    monkeypatch.setattr(dpt, "TAP_SUM_ADD_COST", 0)
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal((oc, xs[1] // groups, *k)).astype("float32")
    mod = _conv_mod(xs, w.shape, strides=strides, padding=padding, dilation=dilation,
                    groups=groups)
    convs = _convs(_rewritten(mod, w))
    if len(convs) > 1:  # split: every piece one tap, unpadded
        assert all(tuple(c.args[1].checked_type.shape[2:]) == (1, 1) for c in convs)
        assert all(tuple(c.attrs.padding) == (0, 0, 0, 0) for c in convs)
    want = _torch(x, w, strides, padding, dilation, groups)
    for lvl in (3, 2):
        np.testing.assert_allclose(_run(mod, w, x, lvl), want, rtol=1e-4, atol=1e-4)


def test_aspp_dilation_12_wide_channels_takes_the_tap_sum():
    """960 -> 256 (DeepLabV3's ASPP) at dilation 12 on 14x14: the bands would read the taps'
    weights 25 times (0.98 MB each), the per-tap sum 9 times: 9 single-tap convs; the padded
    tap weights (live output spans) as tap_spans says."""
    from tvmpy.relay.transform.drop_padding_taps import tap_spans

    assert tap_spans(14, 3, 1, 12, 12, 12) == [(0, (12, 14)), (1, (0, 14)), (2, (0, 2))]
    assert tap_spans(16, 3, 1, 24, 24, 24) == [(1, (0, 16))]
    w = RNG.standard_normal((256, 960, 3, 3)).astype("float32")
    mod = _rewritten(_conv_mod((1, 960, 14, 14), w.shape, padding=(12, 12), dilation=(12, 12)),
                     w)
    convs = _convs(mod)
    assert len(convs) == 9
    assert all(tuple(c.args[1].checked_type.shape[2:]) == (1, 1) for c in convs)
    assert sum(int(np.prod(c.checked_type.shape[2:])) for c in convs) == 196 + 4 * 28 + 4 * 4


def test_narrow_layers_keep_the_bands():
    """64 -> 128 at dilation 12 on 14x14: the weights are small against the output the sum
    would pad and add eight times: output bands (corner pieces with 2x2 taps)."""
    w = RNG.standard_normal((128, 64, 3, 3)).astype("float32")
    mod = _rewritten(_conv_mod((1, 64, 14, 14), w.shape, padding=(12, 12), dilation=(12, 12)),
                     w)
    taps = sorted(int(np.prod(c.args[1].checked_type.shape[2:])) for c in _convs(mod))
    assert taps == [1, 2, 2, 2, 2, 4, 4, 4, 4]
