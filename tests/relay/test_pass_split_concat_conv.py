"""SplitConcatConv: a convolution over a channel concatenation (used once) as the sum of
convolutions over the parts; results equal numpy / torch's convolution of the concatenation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.expr import Call
from tvmpy.relay.transform import SplitConcatConv, bind_params_by_name
from tvmpy.relay.visitor import post_order_visit

RNG = np.random.default_rng(11)


def _ops(mod: tvm.IRModule) -> list[str]:
    out: list[str] = []
    post_order_visit(mod["main"], lambda e: out.append(e.op.name) if isinstance(e, Call) and
                     hasattr(e.op, "name") else None)
    return out


def _graph(parts: list[tuple[int, ...]], oc: int, k: int, pad: tuple, strides: tuple,
           dilation: tuple, extra_use: bool = False) -> tuple:
    """relu(conv(concat(relu(x_i)))) (+ the concatenation's sum when ``extra_use``)."""
    xs = [relay.var(f"x{i}", shape=s) for i, s in enumerate(parts)]
    c = relay.concatenate([relay.nn.relu(x) for x in xs], axis=1)
    ic = sum(s[1] for s in parts)
    w = relay.var("w", shape=(oc, ic, k, k))
    y = relay.nn.relu(relay.nn.conv2d(c, w, padding=pad, strides=strides, dilation=dilation))
    outs = [y]
    if extra_use:
        outs.append(relay.sum(c))
    body = relay.Tuple(outs) if extra_use else y
    return tvm.IRModule.from_expr(relay.Function([*xs, w], body)), xs


CASES = [  # parts (NCHW), oc, kernel, padding, strides, dilation
    ([(1, 64, 55, 55), (1, 64, 55, 55)], 16, 1, (0, 0), (1, 1), (1, 1)),  # SqueezeNet's fire
    ([(1, 13, 11, 7), (1, 29, 11, 7), (1, 6, 11, 7)], 5, 3, (1, 2), (1, 1), (1, 1)),  # 3 parts
    ([(2, 24, 9, 13), (2, 8, 9, 13)], 7, 3, (2, 2), (2, 1), (2, 2)),  # stride, dilation, batch
    ([(1, 17, 1, 1), (1, 19, 1, 1)], 3, 1, (0, 0), (1, 1), (1, 1)),  # a 1x1 map
]


@pytest.mark.parametrize("parts,oc,k,pad,strides,dilation", CASES)
def test_split_concat_conv_matches_torch(parts, oc, k, pad, strides, dilation):
    mod, _ = _graph(parts, oc, k, pad, strides, dilation)
    ic = sum(s[1] for s in parts)
    w = RNG.standard_normal((oc, ic, k, k)).astype("float32")
    xs = [RNG.standard_normal(s).astype("float32") for s in parts]
    main = bind_params_by_name(mod["main"], {"w": w})
    with tvm.transform.PassContext(opt_level=3):
        new = SplitConcatConv()(tvm.IRModule.from_expr(main))
    assert "concatenate" not in _ops(new)
    assert _ops(new).count("nn.conv2d") == len(parts)
    cat = torch.relu(torch.cat([torch.tensor(x) for x in xs], 1))
    want = torch.relu(torch.nn.functional.conv2d(cat, torch.tensor(w), stride=strides,
                                                 padding=pad, dilation=dilation)).numpy()
    for lvl in (3, 2):
        with tvm.transform.PassContext(opt_level=lvl):
            lib = relay.build(mod, "llvm", params={"w": w})
        m = graph_executor.GraphModule(lib["default"](tvm.runtime.cpu(0)))
        for i, x in enumerate(xs):
            m.set_input(f"x{i}", x)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_left_alone_when_shared_or_not_shrinking():
    w = RNG.standard_normal((16, 128, 1, 1)).astype("float32")
    mod, _ = _graph([(1, 64, 5, 5), (1, 64, 5, 5)], 16, 1, (0, 0), (1, 1), (1, 1),
                    extra_use=True)
    with tvm.transform.PassContext(opt_level=3):
        new = SplitConcatConv()(tvm.IRModule.from_expr(bind_params_by_name(mod["main"],
                                                                           {"w": w})))
    assert _ops(new).count("nn.conv2d") == 1  # the concatenation has another user
    w = RNG.standard_normal((64, 128, 1, 1)).astype("float32")
    mod, _ = _graph([(1, 64, 5, 5), (1, 64, 5, 5)], 64, 1, (0, 0), (1, 1), (1, 1))
    with tvm.transform.PassContext(opt_level=3):
        new = SplitConcatConv()(tvm.IRModule.from_expr(bind_params_by_name(mod["main"],
                                                                           {"w": w})))
    assert _ops(new).count("nn.conv2d") == 1  # 128 -> 64 channels: the copy is kept
