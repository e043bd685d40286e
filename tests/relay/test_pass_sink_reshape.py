"""SinkReshape (epilogues moved above a reshape) and reshape-only functions as "__nop" graph
nodes (their output aliases their input's storage): rewrites, the cases left alone, and the
built graphs' results against numpy, run several times with changing inputs."""

import json

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay import transform
from tvmpy.relay.transform.sink_reshape import bias_axis_through_reshape
from tvmpy.topi import testing


@pytest.mark.parametrize("src,dst,axis,want", [
    ((57, 169), (1, 57, 13, 13), 1, 0),
    ((57, 169), (1, 57, 13, 13), -3, 0),
    ((1, 57, 169), (1, 57, 13, 13), 1, 1),
    ((169, 57), (1, 13, 13, 57), 3, 1),
    ((169, 57), (1, 13, 13, 57), 1, None),   # 13 is not an axis of the source
    ((6, 4), (4, 6), 0, None),                # same extents, not the same elements
    ((3, 1), (1, 3, 1), 1, 0),
    ((5,), (1, 5), 7, None),
])
def test_bias_axis_through_reshape(src, dst, axis, want):
    assert bias_axis_through_reshape(src, dst, axis) == want


def _epilogue_module(src, dst, axis=1, extra_use=False):
    x = relay.var("x", shape=src)
    b = relay.var("b", shape=(dst[axis],))
    r = relay.reshape(relay.exp(x), dst)
    y = relay.nn.relu(relay.nn.bias_add(r, b, axis=axis))
    y = relay.clip(y, 0.0, 0.7)
    if extra_use:
        y = relay.Tuple([y, relay.sigmoid(r)])
    return relay.IRModule.from_expr(relay.Function([x, b], y))


def _np(v):
    return np.asarray(v.numpy() if hasattr(v, "numpy") else v)


def _check_same(mod, new):
    inputs = random_inputs(mod["main"], seed=3)
    want, got = run(mod, inputs), run(new, inputs)
    if not isinstance(want, (list, tuple)):
        want, got = [want], [got]
    for w, g in zip(want, got):
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6)


@pytest.mark.parametrize("src,dst", [((57, 169), (1, 57, 13, 13)), ((3, 17), (1, 3, 17, 1)),
                                     ((1, 24, 49), (1, 24, 7, 7))])
def test_epilogue_moves_above_the_reshape(src, dst):
    mod = _epilogue_module(src, dst)
    new = transform.SinkReshape()(mod)
    body = new["main"].body
    # reshape(clip(relu(bias_add(exp(x))))): one reshape, the outermost call
    assert body.op.name == "reshape" and count_ops(body, "reshape") == 1
    assert body.args[0].op.name == "clip"
    bias = body.args[0].args[0].args[0]
    assert bias.op.name == "nn.bias_add" and int(bias.attrs.axis) == len(src) - 2
    _check_same(mod, new)


def test_left_alone_when_the_reshape_has_another_use_or_the_axis_moves():
    for mod in (_epilogue_module((57, 169), (1, 57, 13, 13), extra_use=True),
                _epilogue_module((169, 57), (1, 13, 13, 57), axis=1)):
        new = transform.SinkReshape()(mod)
        assert count_ops(new["main"].body, "nn.bias_add") == 1
        assert new["main"].body is not None
        # the bias_add still reads the reshape
        found = []

        def f(e, found=found):
            if isinstance(e, relay.Call) and e.op.name == "nn.bias_add":
                found.append(e.args[0].op.name)

        relay.post_order_visit(new["main"].body, f)
        assert found == ["reshape"]
        _check_same(mod, new)


def _build(mod, params=None, opt_level=3):
    with tvm.transform.PassContext(opt_level=opt_level):
        return relay.build(mod, target="llvm", params=params)


def _nodes(lib):
    g = json.loads(lib.get_graph_json())
    return g, [n["attrs"]["func_name"] for n in g["nodes"] if n["op"] == "tvm_op"]


@pytest.mark.parametrize("ic,oc,hw", [(57, 57, 13), (57, 128, 17), (3, 5, 11), (24, 57, 8)])
def test_pointwise_conv_is_one_kernel(ic, oc, hw):
    """A 1x1 conv + bias + relu of an NCHW graph input (x86: a matmul between two reshapes):
    one kernel, the reshapes are views; right on changing inputs."""
    rng = np.random.default_rng(ic * oc + hw)
    w = rng.uniform(-1, 1, (oc, ic, 1, 1)).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    x = relay.var("x", shape=(1, ic, hw, hw))
    y = relay.nn.conv2d(x, relay.const(w), channels=oc, kernel_size=(1, 1))
    y = relay.nn.relu(relay.nn.bias_add(y, relay.const(b)))
    lib = _build(relay.IRModule.from_expr(relay.Function([x], y)))
    g, funcs = _nodes(lib)
    assert len([f for f in funcs if f != "__nop"]) == 1, funcs
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for _ in range(3):
        xa = rng.uniform(-1, 1, (1, ic, hw, hw)).astype("float32")
        m.set_input("x", xa)
        m.run()
        want = np.maximum(np.einsum("oc,chw->ohw", w[:, :, 0, 0], xa[0]) + b[:, None, None], 0)
        np.testing.assert_allclose(m.get_output(0).numpy()[0], want, rtol=1e-4, atol=1e-5)


def _silu(y):
    return relay.multiply(y, relay.sigmoid(y))


def _hswish(y):  # as the ONNX importer emits HardSwish
    c = relay.const
    return relay.multiply(y, relay.clip(relay.add(relay.multiply(y, c(1 / 6)), c(0.5)), 0.0, 1.0))


@pytest.mark.parametrize("act", ["silu", "hswish"])
@pytest.mark.parametrize("ic,oc,hw", [(16, 96, 13), (57, 24, 7), (3, 5, 1)])
def test_pointwise_conv_with_silu_or_hardswish_is_one_kernel(act, ic, oc, hw):
    """The activation reads the conv's output twice (``x * sigmoid(x)``): it still fuses into
    the 1x1 conv's kernel (x86: a matmul between reshapes, where it was a kernel of its own
    after the reshape; or an NCHWc conv, then with a layout_transform at the graph's end)."""
    rng = np.random.default_rng(ic + oc + hw)
    w = rng.uniform(-1, 1, (oc, ic, 1, 1)).astype("float32")
    b = rng.uniform(-1, 1, oc).astype("float32")
    x = relay.var("x", shape=(1, ic, hw, hw))
    y = relay.nn.bias_add(relay.nn.conv2d(x, relay.const(w), channels=oc, kernel_size=(1, 1)),
                          relay.const(b))
    y = _silu(y) if act == "silu" else _hswish(y)
    lib = _build(relay.IRModule.from_expr(relay.Function([x], y)))
    _, funcs = _nodes(lib)
    kernels = [f for f in funcs if f != "__nop" and "layout_transform" not in f]
    assert len(kernels) == 1 and "multiply" in kernels[0], funcs
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for _ in range(2):
        xa = rng.uniform(-4, 4, (1, ic, hw, hw)).astype("float32")
        m.set_input("x", xa)
        m.run()
        c = np.einsum("oc,chw->ohw", w[:, :, 0, 0].astype(np.float64), xa[0]) + b[:, None, None]
        want = c / (1 + np.exp(-c)) if act == "silu" else c * np.clip(c / 6 + 0.5, 0, 1)
        np.testing.assert_allclose(m.get_output(0).numpy()[0], want, rtol=1e-4, atol=1e-5)


def test_binary_epilogue_left_alone_unless_both_sides_reshape_alike():
    """``f(reshape(a), b)`` moves above the reshape only when ``b`` is a reshape of the same
    shapes or a scalar: a per-channel tensor broadcasts against the reshaped axes."""
    x = relay.var("x", shape=(57, 169))
    r = relay.reshape(relay.exp(x), (1, 57, 13, 13))
    per_channel = relay.var("s", shape=(1, 57, 1, 1))
    other = relay.reshape(relay.var("z", shape=(57 * 13, 13)), (1, 57, 13, 13))
    for y, sunk in ((relay.multiply(r, per_channel), False), (relay.add(r, other), False),
                    (relay.multiply(r, relay.const(2.0)), True),
                    (relay.multiply(relay.const(2.0), r), True), (_silu(r), True)):
        mod = relay.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
        new = transform.SinkReshape()(mod)
        assert (new["main"].body.op.name == "reshape") == sunk, y
        _check_same(mod, new)


def test_nop_storage_cases():
    """Reshape-only functions: of a graph input (aliased), producing a graph output (aliased,
    the source storage kept), of a graph output (a copy), and an alias kept alive while a later
    kernel would otherwise reuse its storage."""
    x = relay.var("x", shape=(6, 8))
    z = relay.var("z", shape=(4, 12))
    def sm(a):  # a kernel of its own (cumsum is opaque; softmax now fuses its producers)
        return relay.cumsum(a, axis=-1)
    r = relay.reshape(sm(x), (4, 12))             # view of a kernel's output
    c = sm(r)
    d = sm(relay.reshape(z, (48,)))               # view of graph input z
    e = sm(relay.add(c, relay.reshape(d, (4, 12))))
    late = sm(relay.multiply(e, r))               # r's storage still live here
    out_view = relay.reshape(late, (2, 24))       # a graph output through a view
    head = relay.negative(x)
    head_view = relay.reshape(head, (48,))        # of a graph output: a copy
    mod = relay.IRModule.from_expr(relay.Function([x, z], relay.Tuple(
        [out_view, head, head_view])))
    lib = _build(mod)
    g, funcs = _nodes(lib)

    def smx(a):
        return np.cumsum(a.astype(np.float64), axis=-1)

    assert funcs.count("__nop") == 3, funcs  # r, z's reshape, out_view (d's fuses into the add)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    rng = np.random.default_rng(0)
    for _ in range(3):
        xa = rng.uniform(-1, 1, (6, 8)).astype("float32")
        za = rng.uniform(-1, 1, (4, 12)).astype("float32")
        m.set_input("x", xa)
        m.set_input("z", za)
        m.run()
        rr = smx(xa).reshape(4, 12)
        ee = smx(smx(rr) + smx(za.reshape(48)).reshape(4, 12))
        want = smx(ee * rr).reshape(2, 24)
        np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-5,
                                   atol=1e-5 * np.abs(want).max())
        np.testing.assert_allclose(m.get_output(1).numpy(), -xa, rtol=1e-6)
        np.testing.assert_allclose(m.get_output(2).numpy(), -xa.reshape(48), rtol=1e-6)
    # the three outputs own distinct storages
    sid = g["attrs"]["storage_id"][1]
    rp = g["node_row_ptr"]
    heads = [sid[rp[h[0]] + h[1]] for h in g["heads"]]
    assert len(set(heads)) == 3


def test_no_nop_below_opt_level_3_is_still_correct():
    x = relay.var("x", shape=(1, 5, 3, 3))
    y = relay.nn.relu(relay.reshape(relay.exp(x), (5, 9)))
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    xa = np.random.default_rng(1).uniform(-1, 1, (1, 5, 3, 3)).astype("float32")
    for level in (0, 3):
        m = graph_executor.GraphModule(_build(mod, opt_level=level)["default"](tvm.cpu(0)))
        m.set_input("x", xa)
        m.run()
        np.testing.assert_allclose(m.get_output(0).numpy(),
                                   np.maximum(np.exp(xa).reshape(5, 9), 0), rtol=1e-6)


def test_several_views_of_one_input():
    """Two reshape views of the same graph input and a view of a view (the executor's storage
    check and the planner accept them; results right)."""
    x = relay.var("x", shape=(4, 6))
    sm = relay.nn.softmax
    a = sm(relay.reshape(x, (6, 4)))
    b = sm(relay.reshape(x, (3, 8)))
    c = sm(relay.reshape(relay.reshape(sm(x), (24,)), (2, 12)))
    y = relay.Tuple([a, b, c])
    lib = _build(relay.IRModule.from_expr(relay.Function([x], y)))
    _, funcs = _nodes(lib)
    assert funcs.count("__nop") >= 2, funcs
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    xa = np.random.default_rng(5).uniform(-1, 1, (4, 6)).astype("float32")
    m.set_input("x", xa)
    m.run()

    smx = testing.softmax_python
    for i, want in enumerate([smx(xa.reshape(6, 4)), smx(xa.reshape(3, 8)),
                              smx(smx(xa).reshape(2, 12))]):
        np.testing.assert_allclose(m.get_output(i).numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("op", ["multiply", "divide", "add", "subtract"])
@pytest.mark.parametrize("const_first", [False, True])
@pytest.mark.parametrize("cshape", [(), (1,), (1, 1, 1, 1)])
def test_scalar_operand_moves_above_the_reshape(op, const_first, cshape):
    """Attention scores ``Reshape(MatMul(q, k^T)) * c`` (a constant of one element, either
    operand): the scale goes into the batch_matmul's epilogue (one kernel fewer, a pass over
    the scores saved); a non-scalar or non-constant operand stays below the reshape."""
    q = relay.var("q", shape=(6, 13, 5))
    k = relay.var("k", shape=(6, 11, 5))
    s = relay.reshape(relay.nn.batch_matmul(q, k), (1, 6, 13, 11))
    c = relay.const(np.full(cshape, 0.37, "float32"))
    f = getattr(relay, op)
    y = relay.nn.softmax(f(c, s) if const_first else f(s, c))
    mod = relay.IRModule.from_expr(relay.Function([q, k], y))
    new = transform.SinkReshape()(mod)
    sm_arg = new["main"].body.args[0]
    assert sm_arg.op.name == "reshape" and sm_arg.args[0].op.name == op
    _check_same(mod, new)
    lib = _build(mod)
    assert len([n for n in _nodes(lib)[1] if n != "__nop"]) == 2  # bmm+op, softmax


def test_non_scalar_operand_stays_a_scalar_variable_moves():
    """A per-key mask broadcasts against the reshaped axes: it stays below the reshape. A 0-d
    variable is a scalar like a constant: it moves (computed values unchanged)."""
    q = relay.var("q", shape=(6, 13, 5))
    k = relay.var("k", shape=(6, 11, 5))
    v = relay.var("v", shape=())
    s = relay.reshape(relay.nn.batch_matmul(q, k), (1, 6, 13, 11))
    mask = relay.const(np.random.default_rng(4).uniform(-1, 1, (1, 1, 1, 11)).astype("float32"))
    for other, moves in ((mask, False), (v, True)):
        mod = relay.IRModule.from_expr(relay.Function(
            [q, k, v], relay.nn.softmax(relay.add(s, other))))
        new = transform.SinkReshape()(mod)
        arg = new["main"].body.args[0]
        assert arg.op.name == ("reshape" if moves else "add")
        assert arg.args[0].op.name == ("add" if moves else "reshape")
        _check_same(mod, new)


def test_sinking_over_a_rewritten_source_does_not_duplicate_it():
    """A reshape whose source was itself rewritten (an epilogue sunk below it) is sunk over with
    the rewritten source: taking the original source instead kept both copies of the graph
    above (BERT's layers were computed twice after the attention scale moved)."""
    x = relay.var("x", shape=(2, 3, 4))
    u = relay.nn.relu(relay.reshape(relay.exp(x), (6, 4)))  # relu sinks: reshape(relu(exp))
    v = relay.multiply(relay.reshape(u, (24,)), relay.const(2.0))  # then the scalar multiply
    mod = relay.IRModule.from_expr(relay.Function([x], relay.Tuple([v, u])))
    new = transform.InferType()(transform.SinkReshape()(mod))
    calls = []
    relay.analysis.post_order_visit(
        new["main"].body, lambda e: calls.append(e.op.name)
        if isinstance(e, relay.Call) and hasattr(e.op, "name") else None)
    assert calls.count("exp") == 1 and calls.count("nn.relu") == 1, calls
    _check_same(mod, new)


@pytest.mark.parametrize("bshape,moves", [((10,), True), ((1, 10), True), ((7, 10), True),
                                          ((1, 1, 10), False), ((7, 1), False)])
def test_linear_bias_moves_above_the_reshape(bshape, moves):
    """A Linear over a 3-D input as ONNX exports it: ``reshape(dense(x, W)) + b``. A bias over
    the kept last axis (of no higher rank than the dense's output) goes into the dense's
    epilogue: one kernel, not a second pass over the output; other shapes stay below."""
    x = relay.var("x", shape=(7, 6))
    w = relay.var("w", shape=(10, 6))
    b = relay.var("b", shape=bshape)
    y = relay.add(relay.reshape(relay.nn.dense(x, w), (1, 7, 10)), b)
    mod = relay.IRModule.from_expr(relay.Function([x, w, b], y))
    new = transform.SinkReshape()(mod)
    assert (new["main"].body.op.name == "reshape") == moves
    _check_same(mod, new)
    if moves:
        lib = _build(mod)
        assert len([n for n in _nodes(lib)[1] if n != "__nop"]) == 1  # dense + bias


@pytest.mark.parametrize("src,dst,oshape", [((1, 1, 7), (1, 7), (1, 1, 7)),   # fuzzer 400483
                                            ((2, 3), (6,), (1, 1)),
                                            ((4, 5), (20,), (3, 1))])
def test_operand_that_broadcasts_beyond_the_reshape_keeps_it_below(src, dst, oshape):
    """``f(reshape(x), y)`` where ``y`` raises the result's rank (or extends an axis) is not
    ``reshape(f(x, y), dst)``: the result has the broadcast shape, not the reshape's."""
    x = relay.var("x", shape=src)
    y = relay.var("y", shape=oshape)
    z = relay.minimum(relay.reshape(relay.exp(x), dst), y)
    mod = relay.IRModule.from_expr(relay.Function([x, y], z))
    new = transform.InferType()(transform.SinkReshape()(mod))
    assert new["main"].body.op.name == "minimum"
    assert tuple(new["main"].body.checked_type.shape) == np.broadcast_shapes(dst, oshape)
    _check_same(mod, new)
