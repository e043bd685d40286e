"""Grouped convolutions on x86 (issue 25): AlterOpLayout puts a grouped conv2d whose
per-group output channels fill at least half a vector into NCHW{c}c
(``nn.contrib_conv2d_NCHWc`` with groups, blocks within groups; see
``x86_alter_op.grouped_blocks``); other grouped ones stay NCHW. Built at opt_level 3 and run by
the graph executor, compared with a direct numpy reference at awkward shapes."""

from __future__ import annotations

import numpy as np
import pytest
from _pass_util import count_ops

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay import transform
from tvmpy.relay.op.strategy.x86_alter_op import grouped_blocks
from tvmpy.topi.testing import group_conv2d_nchw_python

NCHWC = "nn.contrib_conv2d_NCHWc"


def _model(c, oc, groups, hw, k, stride, dil, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, c, hw, hw)).astype("float32")
    w = (rng.uniform(-1, 1, (oc, c // groups, k, k)) / np.sqrt(c // groups * k * k)).astype(
        "float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    pad = dil * (k // 2)
    xv = relay.var("x", shape=x.shape, dtype="float32")
    y = relay.nn.conv2d(xv, relay.const(w), strides=(stride, stride), padding=(pad,) * 4,
                        dilation=(dil, dil), groups=groups, channels=oc, kernel_size=(k, k))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))
    mod = tvm.IRModule.from_expr(relay.Function([xv], y))
    ref = np.maximum(group_conv2d_nchw_python(x, w, stride, pad, dil, groups)
                     + b[None, :, None, None], 0)
    return mod, x, ref


def _lanes():
    from tvmpy.relay.op.strategy.x86_alter_op import MAX_BLOCK

    with tvm.target.Target("llvm") as t:
        return min(MAX_BLOCK, t.vector_lanes("float32"))


def test_grouped_blocks_rule():
    assert grouped_blocks(512, 512, 32, 16) == (16, 16)    # 16 a group: whole vectors
    assert grouped_blocks(1024, 1024, 32, 16) == (16, 16)  # 32 a group: two blocks a group
    assert grouped_blocks(60, 64, 2, 16) == (15, 16)       # largest divisors within a group
    assert grouped_blocks(208, 208, 26, 16) is None        # 8 a group: half a vector, NCHW
    assert grouped_blocks(240, 240, 10, 16) is None        # 24 a group: block 12, NCHW
    assert grouped_blocks(256, 256, 32, 8) == (8, 8)       # AVX2: 8 a group fills a vector
    assert grouped_blocks(128, 128, 32, 8) is None         # 4 a group


# (C, OC, groups, HW, K, stride, dilation)
CASES = [
    (64, 64, 2, 9, 3, 1, 2),      # groups 2, dilation 2
    (96, 96, 3, 7, 3, 2, 1),      # odd groups, stride 2
    (75, 240, 5, 11, 3, 1, 3),    # prime groups, dilation 3, 15 inputs / 48 outputs a group
    (256, 256, 16, 1, 3, 1, 2),   # size-1 map
    (112, 56, 7, 13, 1, 1, 1),    # 1x1 grouped, 8 outputs a group
    (64, 64, 16, 10, 3, 1, 1),    # 4 a group: NCHW
    (60, 60, 4, 9, 5, 1, 2),      # 5x5, 15 a group (not vector-divisible)
    (64, 96, 2, 12, 5, 2, 2),     # 5x5, stride 2, dilation 2, 48 outputs a group
]


@pytest.mark.parametrize("case", CASES)
def test_grouped_conv_built_matches_numpy(case):
    c, oc, groups, hw, k, stride, dil = case
    mod, x, ref = _model(c, oc, groups, hw, k, stride, dil)
    blocks = grouped_blocks(c, oc, groups, _lanes())
    with tvm.transform.PassContext(opt_level=3):
        with tvm.target.Target("llvm"):
            altered = transform.AlterOpLayout()(transform.InferType()(mod))
    assert count_ops(altered["main"], NCHWC) == (1 if blocks else 0)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-4)
