"""Convolutions padded on one edge only (left, right, top, bottom; TF "SAME" at stride 2 pads
right/bottom only): values against numpy at awkward sizes, and the property the speed of the
inlined padding relies on: the width tests are ``likely`` hints, so LoopPartition gives the
register tile a guard-free main part on either padded edge (before, a right edge's guarded
column stayed inside the one tile loop; bench/pad_edge.py)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir, topi
from tvmpy.tir.functor import post_order_visit
from tvmpy.topi import nn, testing

from .nn_util import check

conv2d_module = importlib.import_module("tvmpy.topi.nn.conv2d")  # nn.conv2d is the op

# (top, left, bottom, right)
EDGES = {"left": (0, 1, 0, 0), "right": (0, 0, 0, 1), "top": (1, 0, 0, 0),
         "bottom": (0, 0, 1, 0), "same_s2": (0, 0, 1, 1), "right2": (1, 0, 1, 2),
         "left2_right1": (0, 2, 0, 1)}


@pytest.mark.parametrize("k,stride,hw", [(2, 1, (7, 13)), (3, 1, (5, 11)), (3, 2, (9, 17)),
                                         (2, 1, (3, 1))])
@pytest.mark.parametrize("edge", list(EDGES))
def test_one_edge_padded_conv_nchwc(edge, k, stride, hw):
    """conv2d_NCHWc reading the plain NCHW input (as relay's x86 path does), the x86 default
    schedule (padding inlined), + ReLU, against numpy."""
    pad = EDGES[edge]
    h, w = hw
    if (w + pad[1] + pad[3] - k) < 0 or (h + pad[0] + pad[2] - k) < 0:
        pytest.skip("window larger than the padded input")
    c, oc, icb, ocb = 12, 16, 4, 8
    A = te.placeholder((1, c, h, w), name="A")
    W = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="W")
    out = topi.nn.relu(nn.conv2d_NCHWc(A, W, stride, pad, 1, layout="NCHW"))
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c, k, k)).astype("float32")

    def ref(_a, _w):
        y = np.maximum(testing.conv2d_nchw_python(a, wt, stride, pad), 0)
        return testing.nchw_to_nchwc(y, ocb)

    with tvm.target.Target("llvm"):
        check([A, W], out, topi.x86.schedule_conv2d_NCHWc, ref,
              arrays=[a, testing.oihw_to_kcrsck(wt, icb, ocb)])


@pytest.mark.parametrize("edge", ["left", "right", "same_s2", "left2_right1"])
def test_one_edge_padded_depthwise_nchwc(edge):
    """Depthwise NCHWc (padding inlined) padded on one edge, against numpy."""
    pad, c, h, w, cb = EDGES[edge], 8, 6, 13, 4
    A = te.placeholder((1, c // cb, h, w, cb), name="A")
    F = te.placeholder((c // cb, 1, 3, 3, 1, cb), name="F")
    stride = 2 if edge == "same_s2" else 1
    out = nn.depthwise_conv2d_NCHWc(A, F, stride, pad, 1)

    def ref(a, fb):
        f_nchw = fb.transpose(0, 5, 1, 4, 2, 3).reshape(c, 1, 3, 3)
        return testing.nchw_to_nchwc(testing.depthwise_conv2d_nchw_python(
            testing.nchwc_to_nchw(a), f_nchw, stride, pad), cb)

    with tvm.target.Target("llvm"):
        check([A, F], out, topi.x86.schedule_conv2d_NCHWc, ref)


def _lowered_conv(pad, stride=1, w=16):
    A = te.placeholder((1, 32, 8, w), name="A")
    W = te.placeholder((2, 2, 2, 2, 16, 16), name="W")
    out = nn.conv2d_NCHWc(A, W, stride, pad, 1, layout="NCHW")
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_conv2d_NCHWc([out])
        return tvm.lower(s, [A, W, out])


def _reduction_loops(f):
    """``(loops over the input lanes, those with no guard inside)`` of the lowered function."""
    loops = []
    post_order_visit(f.body, lambda n: loops.append(n) if isinstance(n, tir.For)
                     and n.loop_var.name.startswith("ici") else None)

    def guarded(loop):
        found = []
        post_order_visit(loop.body, lambda n: found.append(n) if isinstance(n, tir.Call)
                         and n.op in ("if_then_else", "likely") else None)
        return bool(found)

    return loops, [lp for lp in loops if not guarded(lp)]


@pytest.mark.parametrize("edge,stride,w", [("right", 1, 16), ("left2_right1", 1, 16),
                                           ("right", 2, 31)])
def test_width_padding_partitions_the_tile(edge, stride, w):
    """Padding after W: the register tile's main part has no bounds test for that edge (its
    last columns run in separate copies), and no ``likely`` is left for codegen."""
    f = _lowered_conv(EDGES[edge], stride, w)
    loops, clean = _reduction_loops(f)
    assert len(loops) > 1 and clean, str(f)
    assert "likely" not in str(f)


def test_width_padding_unhinted_keeps_the_guard(monkeypatch):
    """The property above comes from the hint: without it the right edge's tile stays one loop
    with the guarded column inside (what LLVM compiled slowly)."""
    monkeypatch.setattr(conv2d_module, "PAD_LIKELY_W", "none")
    loops, clean = _reduction_loops(_lowered_conv(EDGES["right"]))
    assert len(loops) == 1 and not clean
    monkeypatch.setattr(conv2d_module, "PAD_LIKELY_W", True)
    with pytest.raises(ValueError, match="PAD_LIKELY_W"):
        _lowered_conv(EDGES["right"])


@pytest.mark.parametrize("before,after,hints", [((3,), (3,), 2), ((), (3, 2), 2), ((1,), (), 1)])
def test_pad_likely_hints_values_and_errors(before, after, hints):
    """``likely_before`` / ``likely_after`` mark only those axes' lower / upper tests, leave
    the values alone (the padding stage at root, its loops partitioned), and reject an axis
    out of range."""
    A = te.placeholder((2, 3, 5, 7), name="A")
    P = nn.pad(A, [0, 1, 2, 3], [1, 0, 1, 2], pad_value=-2.0, likely_before=before,
               likely_after=after)
    text = str(P.op.body)
    assert text.count("likely") == hints
    a = np.random.default_rng(1).uniform(-1, 1, (2, 3, 5, 7)).astype("float32")
    with tvm.target.Target("llvm"):
        check([A], P, lambda outs: topi.x86.schedule_injective(outs),
              lambda x: np.pad(x, [(0, 1), (1, 0), (2, 1), (3, 2)], constant_values=-2.0),
              arrays=[a])
    with pytest.raises(ValueError, match="likely_after"):
        nn.pad(A, [0, 0, 1, 1], likely_after=(4,))


@pytest.mark.parametrize("pad,stride", [((0, 0, 1, 1), 2), ((1, 0, 0, 1), 1), ((0, 2, 1, 0), 1)])
def test_relay_conv_one_edge_padding(pad, stride):
    """The same through relay at opt_level 3 (AlterOpLayout to NCHWc, fused bias + ReLU)."""
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (1, 24, 11, 13)).astype("float32")
    w = rng.uniform(-1, 1, (32, 24, 3, 3)).astype("float32")
    b = rng.uniform(-1, 1, (32,)).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.conv2d(xv, relay.const(w), strides=(stride, stride), padding=pad, channels=32,
                        kernel_size=(3, 3))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([xv], y)), target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", x)
    m.run()
    ref = np.maximum(testing.conv2d_nchw_python(x, w, stride, pad) + b[:, None, None], 0)
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)
