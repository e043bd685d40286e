"""relay.transform.ConvertLayout (TVM's usage: ``ConvertLayout({"nn.conv2d": ["NHWC",
"default"]})`` under ``PassContext(opt_level=3)``): the named operators take the desired
layouts, the layout flows through the agnostic ops after them, the function computes the same
values (checked against numpy and the unconverted model), and the converted model builds and
runs on llvm (relay.build's LegalizeLayouts computes NHWC convolutions and pools as NCHW)."""

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.topi.testing.nn_ref import conv2d_nchw_python, depthwise_conv2d_nchw_python

RNG = np.random.default_rng(7)


def _w(*shape):
    return RNG.uniform(-0.5, 0.5, shape).astype("float32")


def _calls(expr, name):
    out = []
    relay.post_order_visit(expr, lambda e: out.append(e) if isinstance(e, relay.Call)
                           and getattr(e.op, "name", None) == name else None)
    return out


def _nchw_net(batch=2, cin=3, hw=11, c1=5, bind=True):
    """conv+bias+relu -> max pool -> depthwise conv -> add per-channel -> concat with a conv
    -> global avg pool -> flatten -> dense: the layout flows, then leaves before the dense."""
    x = relay.var("x", shape=(batch, cin, hw, hw))
    p = {"w1": _w(c1, cin, 3, 3), "b1": _w(c1), "w2": _w(c1, 1, 3, 3), "s": _w(c1, 1, 1),
         "w3": _w(2, c1, 1, 1), "wd": _w(4, c1 + 2)}
    v = {k: relay.var(k, shape=a.shape) for k, a in p.items()}
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, v["w1"], padding=(1, 1)), v["b1"]))
    y = relay.nn.max_pool2d(y, (2, 2), strides=(2, 2))
    d = relay.nn.conv2d(y, v["w2"], padding=(1, 1), groups=c1, strides=(2, 2))
    d = relay.add(d, v["s"])
    e = relay.nn.conv2d(d, v["w3"])
    y = relay.concatenate([d, e], axis=1)
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.dense(y, v["wd"])
    mod = tvm.IRModule.from_expr(relay.Function([x] + list(v.values()), y))
    if bind:
        mod = relay.transform.InferType()(mod)
        mod["main"] = relay.transform.bind_params_by_name(mod["main"], p)
    return relay.transform.InferType()(mod), p


def _convert(mod, desired):
    with tvm.transform.PassContext(opt_level=3):
        return relay.transform.ConvertLayout(desired)(mod)


def test_nhwc_layouts_and_same_values():
    mod, _ = _nchw_net()
    out = _convert(mod, {"nn.conv2d": ["NHWC", "default"]})
    convs = _calls(out["main"], "nn.conv2d")
    assert len(convs) == 3
    assert all(c.attrs.data_layout == "NHWC" for c in convs)
    kernels = sorted(c.attrs.kernel_layout for c in convs)
    assert kernels == ["HWIO", "HWIO", "HWOI"]  # the depthwise one: HWOI, as TVM's default
    assert [p.attrs.layout for p in _calls(out["main"], "nn.max_pool2d")] == ["NHWC"]
    assert [p.attrs.layout for p in _calls(out["main"], "nn.global_avg_pool2d")] == ["NHWC"]
    assert [b.attrs.axis for b in _calls(out["main"], "nn.bias_add")] == [3]
    assert [c.attrs.axis for c in _calls(out["main"], "concatenate")] == [3]
    # one transform in (the input) and one out (before the flatten); weights are folded
    ts = _calls(out["main"], "layout_transform")
    assert sorted((t.attrs.src_layout, t.attrs.dst_layout) for t in ts) == [
        ("NCHW", "NHWC"), ("NHWC", "NCHW")]
    assert tvm.ir.structural_equal(out["main"].checked_type, mod["main"].checked_type)
    inputs = random_inputs(mod["main"])
    tvm.testing.assert_allclose(np.asarray(run(out, inputs)), np.asarray(run(mod, inputs)),
                                rtol=1e-5, atol=1e-5)


def test_converted_model_builds_and_matches_numpy():
    x = relay.var("x", shape=(2, 7, 9, 5))  # NCHW, prime extents
    w = _w(6, 7, 3, 3)
    dw = _w(6, 1, 3, 3)
    y = relay.nn.relu(relay.nn.conv2d(x, relay.const(w), padding=(1, 1), strides=(2, 1)))
    y = relay.nn.conv2d(y, relay.const(dw), padding=(1, 1), groups=6)
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], y)))
    conv = _convert(mod, {"nn.conv2d": ["NHWC", "default"]})
    assert {c.attrs.data_layout for c in _calls(conv["main"], "nn.conv2d")} == {"NHWC"}
    a = RNG.uniform(-1, 1, (2, 7, 9, 5)).astype("float32")
    ref = depthwise_conv2d_nchw_python(
        np.maximum(conv2d_nchw_python(a, w, (2, 1), (1, 1)), 0), dw, 1, 1)
    for level in (0, 3):
        with tvm.transform.PassContext(opt_level=level):
            lib = relay.build(conv, "llvm")
        m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        m.set_input("x", a)
        m.run()
        tvm.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-5)


def test_nhwc_model_builds_on_llvm():
    """An NHWC graph as written (conv2d HWIO, bias on axis 3, NHWC pool) builds: relay.build
    runs LegalizeLayouts (ConvertLayout to NCHW) first."""
    x = relay.var("x", shape=(1, 8, 6, 3))
    w, b = _w(3, 3, 3, 4), _w(4)
    y = relay.nn.conv2d(x, relay.const(w), padding=(1, 1), data_layout="NHWC",
                        kernel_layout="HWIO")
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b), axis=3))
    y = relay.nn.avg_pool2d(y, (2, 2), strides=(2, 2), layout="NHWC")
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    a = RNG.uniform(-1, 1, (1, 8, 6, 3)).astype("float32")
    c = np.maximum(conv2d_nchw_python(a.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), 1, 1)
                   + b[:, None, None], 0)
    ref = c.reshape(1, 4, 4, 2, 3, 2).mean(axis=(3, 5)).transpose(0, 2, 3, 1)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, "llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", a)
    m.run()
    tvm.testing.assert_allclose(m.get_output(0).numpy(), ref, rtol=1e-4, atol=1e-5)
    # the legalized graph: NCHW inside, one transform in and one out
    legal = relay.transform.LegalizeLayouts()(relay.transform.InferType()(mod))
    assert [c.attrs.data_layout for c in _calls(legal["main"], "nn.conv2d")] == ["NCHW"]
    assert len(_calls(legal["main"], "layout_transform")) == 2


def test_back_to_nchw_and_roundtrip_cancels():
    mod, _ = _nchw_net(bind=False)  # weights are inputs: transformed in the graph
    nhwc = _convert(mod, {"nn.conv2d": ["NHWC", "HWIO"]})
    kl = sorted(c.attrs.kernel_layout for c in _calls(nhwc["main"], "nn.conv2d"))
    assert kl == ["HWIO"] * 3
    assert count_ops(nhwc["main"], "layout_transform") > 2  # the three weights
    back = _convert(nhwc, {"nn.conv2d": ["NCHW", "default"]})
    assert {(c.attrs.data_layout, c.attrs.kernel_layout)
            for c in _calls(back["main"], "nn.conv2d")} == {("NCHW", "OIHW")}
    # every transform pair cancelled: the graph is NCHW again with no transform at all
    assert count_ops(back["main"], "layout_transform") == 0
    inputs = random_inputs(mod["main"])
    tvm.testing.assert_allclose(np.asarray(run(back, inputs)), np.asarray(run(mod, inputs)),
                                rtol=1e-5, atol=1e-5)


def test_nothing_to_convert_is_unchanged():
    mod, _ = _nchw_net()
    out = _convert(mod, {"nn.conv2d": ["NCHW", "default"]})
    assert tvm.ir.structural_equal(out["main"], mod["main"])
    assert count_ops(out["main"], "layout_transform") == 0


def test_pool_desired_layout_and_opt_level_gate():
    x = relay.var("x", shape=(1, 3, 6, 6))
    y = relay.nn.max_pool2d(relay.nn.relu(x), (3, 3), padding=(1, 1))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], y)))
    p = relay.transform.ConvertLayout({"nn.max_pool2d": ["NHWC"]})
    assert p.info.opt_level == 3
    with tvm.transform.PassContext(opt_level=2):
        same = tvm.transform.Sequential([p])(mod)
    assert count_ops(same["main"], "layout_transform") == 0
    out = _convert(mod, {"nn.max_pool2d": ["NHWC"]})
    assert [c.attrs.layout for c in _calls(out["main"], "nn.max_pool2d")] == ["NHWC"]
    inputs = random_inputs(mod["main"])
    tvm.testing.assert_allclose(np.asarray(run(out, inputs)), np.asarray(run(mod, inputs)))


@pytest.mark.parametrize("desired,match", [
    ({"nn.dense": ["NC"]}, "no layout conversion for 'nn.dense'"),
    ({"nn.conv2d": ["NCHW16c", "default"]}, "AlterOpLayout"),
    ({"nn.conv2d": ["NHWC", "IOHW"]}, "kernel layout"),
    ({"nn.conv2d": "NHWC"}, "must be a list"),
])
def test_bad_desired_layouts(desired, match):
    with pytest.raises((ValueError, TypeError), match=match):
        relay.transform.ConvertLayout(desired)


def test_documented_pipeline_with_remove_unused_functions():
    """TVM's ConvertLayout usage: Sequential([RemoveUnusedFunctions(), ConvertLayout(...)])
    under opt_level 3; a helper main calls stays, an unreferenced function goes."""
    mod, _ = _nchw_net()
    y = relay.var("y", shape=(3,))
    helper = relay.Function([y], relay.negative(y))
    dead = relay.Function([y], relay.exp(y))
    mod = mod.copy()
    mod["dead"] = dead
    gv = relay.GlobalVar("helper")
    mod[gv] = helper
    main = mod["main"]
    mod["main"] = relay.Function(main.params, relay.Tuple([main.body, relay.Call(gv, [relay.const(
        np.ones(3, "float32"))])]))
    seq = tvm.transform.Sequential([relay.transform.RemoveUnusedFunctions(),
                                    relay.transform.ConvertLayout({"nn.conv2d": ["NHWC",
                                                                                 "default"]})])
    with tvm.transform.PassContext(opt_level=3):
        out = seq(relay.transform.InferType()(mod))
    assert sorted(g.name_hint for g in out.get_global_vars()) == ["helper", "main"]
    assert {c.attrs.data_layout for c in _calls(out["main"], "nn.conv2d")} == {"NHWC"}
    with tvm.transform.PassContext(opt_level=0):  # both passes are gated by opt_level
        same = seq(relay.transform.InferType()(mod))
    assert len(same.get_global_vars()) == 3
    # a module with no entry function is left as it is
    solo = tvm.IRModule({"f": dead})
    assert relay.transform.RemoveUnusedFunctions()(solo) is solo
    kept = relay.transform.RemoveUnusedFunctions(entry_functions=["f"])(
        tvm.IRModule({"f": dead, "g": helper}))
    assert [g.name_hint for g in kept.get_global_vars()] == ["f"]
