"""AlterOpLayout: x86 conv2d to NCHW{c}c, the blocked layout propagated through layout-agnostic
ops, layout_transform only where producer and consumer disagree, constant weights transformed
at compile time. Each case: the rewritten graph's structure (which ops, how many transforms,
where), the interpreter's result unchanged on random data, and every call of the rewritten graph
compiled alone (lower_call with the x86 strategy, built with llvm) reproducing it.

Measured (single op: lower_call + tvm.build llvm + time_evaluator, rounds interleaved, min;
the shared 2-core znver5 dev machine, same run; NCHW schedule vs NCHW{c}c schedule):
2 threads at low load: ResNet-18 3x3 64x56x56 0.643 vs 0.580 ms, 128x28x28 0.659 vs 0.613 ms,
256x14x14 0.684 vs 0.609 ms (1.08-1.12x). 1 thread (OMP_NUM_THREADS=1, steadier under load),
two runs: ResNet-18 3x3 layers 1.18-3.1x, 7x7 stem 1.3-1.7x, 1x1 stride-2 1.36-1.40x;
MobileNetV2 stem 1.25x, 1x1 expand 1.14x, 1x1 project 2.8x, depthwise 144x56x56 1.9-2.1x,
384x14x14 2.5-2.6x. The blocked schedule was never slower, so the pass rewrites every plain
and depthwise conv2d (``relay.op.strategy.x86_alter_op.conv_blocks``). Whole models, relay.build at
opt_level 3 with vs without the pass (graph executor run(), same run, min of 12 rounds of 3):
1 thread: ResNet-18 224x224 23.6 vs 32.6 ms (1.38x), MobileNetV2 224x224 8.3 vs 15.7 ms
(1.88x); 2 threads under heavy load: 57 vs 82 ms and 39 vs 56 ms.
"""

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay import printer, testing, transform
from tvmpy.relay.backend import lower_call, placeholders_for
from tvmpy.relay.interpreter import evaluate
from tvmpy.relay.transform import bind_params_by_name
from tvmpy.relay.type_infer import infer_type

rng = np.random.default_rng(3)


def _w(*shape, lo=-1.0, hi=1.0):
    return relay.const(rng.uniform(lo, hi, shape).astype("float32"))


def _mod(params, body):
    return relay.IRModule.from_expr(relay.Function(params, body))


# the layouts below are stated for 16 float lanes (NCHW16c): the rewrite is made for an
# AVX-512 target whatever the host (a graph rewrite, nothing of it runs here); the AVX2 blocks
# have their own test (test_blocks_follow_the_target_vector_width)
WIDE = "llvm -mcpu=skylake-avx512"


def _alter(mod, target=WIDE, winograd=False, nchw_input=False):
    """AlterOpLayout; these tests are about the direct NCHWc layouts, so Winograd is off unless
    asked for (its rewrite has its own tests, tests/relay/test_conv_winograd.py), and so is the
    matmul form of 1x1 convolutions of NCHW inputs (tests/relay/test_conv_awkward_shapes.py)
    and, unless asked for, the NCHW input read in place by the first convolution (the
    structures below then show the input's transform; tests/relay/test_conv_nchw_input.py)."""
    with tvm.transform.PassContext(config={"relay.x86.winograd": "auto" if winograd else False,
                                           "relay.x86.pointwise_matmul": False,
                                           "relay.x86.conv_nchw_input": nchw_input}):
        with tvm.target.Target(target):
            return transform.AlterOpLayout()(mod)


def _lines(mod):
    return [ln.strip() for ln in printer.astext(mod["main"], show_types=False).splitlines()[1:-1]]


def _ops(mod):
    """Operator names of main in post order."""
    out = []

    def f(e):
        if isinstance(e, relay.Call) and hasattr(e.op, "name"):
            out.append(e.op.name)

    relay.post_order_visit(mod["main"].body, f)
    return out


def _run_compiled(mod, inputs, target="llvm"):
    """Evaluate main with every operator call compiled alone (x86 strategy, llvm)."""
    func = infer_type(mod["main"])
    env = {id(p): inputs[p.name_hint] for p in func.params}
    cache = {}

    def ev(e):
        if id(e) in env:
            return env[id(e)]
        if isinstance(e, relay.Constant):
            v = e.data.numpy()
        elif isinstance(e, relay.Tuple):
            v = [ev(f) for f in e.fields]
        elif isinstance(e, relay.TupleGetItem):
            v = ev(e.tuple_value)[e.index]
        elif isinstance(e, relay.Call):
            args = []
            for a in e.args:
                x = ev(a)
                args.extend(x if isinstance(x, list) else [x])
            key = (e.op.name, str(e.attrs), tuple((a.shape, str(a.dtype)) for a in args))
            if key not in cache:
                ins = placeholders_for(e)
                outs, sched = lower_call(e, ins, target)
                cache[key] = (tvm.build(sched(outs), [*ins, *outs], target), outs)
            lib, outs = cache[key]
            shapes = [_static(o.shape) for o in outs]
            if None in shapes:  # a symbolic batch: the shapes of the interpreter's result
                vs = [relay.var(f"a{i}", shape=a.shape, dtype=str(a.dtype))
                      for i, a in enumerate(args)]
                ref = evaluate(relay.Function(vs, relay.Call(e.op, _regroup(e, vs), e.attrs)),
                               *args)
                shapes = [np.shape(r) for r in (ref if isinstance(ref, list) else [ref])]
            res = [tvm.nd.array(np.zeros(sh, o.dtype)) for sh, o in zip(shapes, outs)]
            lib(*[np.array(a, order="C") for a in args], *res)
            v = res[0].numpy() if len(res) == 1 else [r.numpy() for r in res]
        else:
            raise TypeError(type(e))
        env[id(e)] = v
        return v

    return ev(func.body)


def _static(shape):
    try:
        return [int(d) for d in shape]
    except TypeError:
        return None


def _regroup(call, flat):
    """``flat`` (one var per tensor) grouped back into the call's (tuple) arguments."""
    out, i = [], 0
    for a in call.args:
        if isinstance(a, relay.Tuple):
            out.append(relay.Tuple(flat[i:i + len(a.fields)]))
            i += len(a.fields)
        else:
            out.append(flat[i])
            i += 1
    return out


def _close(got, want, tol):
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w, tol)
        return
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _check(mod, new, compiled=True, rtol=1e-5):
    """Same result as ``mod`` on random inputs: interpreted, and with compiled operators."""
    inputs = random_inputs(mod["main"])
    want = run(mod, inputs)
    _close(run(new, inputs), want, rtol)
    if compiled:
        _close(_run_compiled(new, inputs), want, 10 * rtol)


def test_conv_relu_conv_one_transform_in_one_out():
    x = relay.var("x", shape=(1, 16, 9, 7))
    y = relay.nn.conv2d(x, _w(32, 16, 3, 3), padding=(1, 1))
    y = relay.nn.conv2d(relay.nn.relu(y), _w(16, 32, 1, 1))
    mod = _mod([x], relay.nn.relu(y))
    new = _alter(mod)
    assert _ops(new) == ["layout_transform", "nn.contrib_conv2d_NCHWc", "nn.relu",
                         "nn.contrib_conv2d_NCHWc", "nn.relu", "layout_transform"]
    assert _lines(new) == [
        '%0 = layout_transform(%x, src_layout="NCHW", dst_layout="NCHW16c");',
        '%1 = nn.contrib_conv2d_NCHWc(%0, meta[relay.Constant][0], padding=[1, 1, 1, 1], '
        'data_layout="NCHW16c", kernel_layout="OIHW16i16o", out_layout="NCHW16c");',
        "%2 = nn.relu(%1);",
        '%3 = nn.contrib_conv2d_NCHWc(%2, meta[relay.Constant][1], data_layout="NCHW16c", '
        'kernel_layout="OIHW16i16o", out_layout="NCHW16c");',
        "%4 = nn.relu(%3);",
        'layout_transform(%4, src_layout="NCHW16c", dst_layout="NCHW")',
    ]
    # the weights are constants already in the blocked layout (no transform left for them)
    convs = [c for c in _calls(new) if c.op.name == "nn.contrib_conv2d_NCHWc"]
    assert [tuple(c.args[1].data.shape) for c in convs] == [(2, 1, 3, 3, 16, 16),
                                                          (1, 2, 1, 1, 16, 16)]
    assert str(new["main"].checked_type) == str(mod["main"].checked_type)
    _check(mod, new)


def _calls(mod):
    out = []
    relay.post_order_visit(mod["main"].body,
                           lambda e: out.append(e) if isinstance(e, relay.Call) else None)
    return out


def test_conv_bias_relu_bias_becomes_blocked_constant():
    x = relay.var("x", shape=(2, 6, 8, 8))
    b = rng.uniform(-1, 1, 48).astype("float32")
    y = relay.nn.bias_add(relay.nn.conv2d(x, _w(48, 6, 3, 3), padding=(1, 1)), relay.const(b))
    mod = _mod([x], relay.nn.relu(y))
    new = _alter(mod)
    assert _ops(new) == ["layout_transform", "nn.contrib_conv2d_NCHWc", "add", "nn.relu",
                         "layout_transform"]
    conv, add = [c for c in _calls(new) if c.op.name in ("nn.contrib_conv2d_NCHWc", "add")]
    assert conv.attrs.data_layout == "NCHW6c" and conv.attrs.out_layout == "NCHW16c"
    bias = add.args[1].data.numpy()
    assert bias.shape == (3, 1, 1, 16)
    np.testing.assert_array_equal(bias[1, 0, 0, 5], b[21])
    _check(mod, new)


def test_per_channel_multiply_and_scalar_and_full_tensor_operands():
    x = relay.var("x", shape=(1, 8, 5, 5))
    r = relay.var("r", shape=(1, 16, 5, 5))  # a full-size non-blocked operand: transformed in
    s = relay.var("s", shape=(16, 1, 1))  # a per-channel vector that is not constant: reshaped
    y = relay.nn.conv2d(x, _w(16, 8, 3, 3), padding=(1, 1))
    y = relay.multiply(y, _w(16, 1, 1))
    y = relay.add(relay.const(np.float32(0.5)), y)
    y = relay.subtract(y, r)
    y = relay.divide(y, relay.add(relay.abs(s), relay.const(np.float32(1.0))))
    y = relay.add(y, _w(1, 1, 5))  # varies along W only: a unit channel block
    y = relay.clip(y, -0.5, 0.7)
    mod = _mod([x, r, s], relay.nn.conv2d(y, _w(8, 16, 1, 1)))
    new = _alter(mod)
    ops = _ops(new)
    assert ops.count("layout_transform") == 4  # x in, r in, s (per channel) in, result out
    assert "nn.conv2d" not in ops and ops.count("nn.contrib_conv2d_NCHWc") == 2
    consts = {tuple(c.args[1].data.shape) for c in _calls(new)
              if c.op.name in ("multiply", "add") and isinstance(c.args[1], relay.Constant)}
    assert (1, 1, 1, 16) in consts and (1, 1, 5, 1) in consts
    _check(mod, new)


def test_residual_block_stays_blocked():
    x = relay.var("x", shape=(1, 16, 6, 6))
    y = relay.nn.relu(relay.nn.conv2d(x, _w(16, 16, 3, 3), padding=(1, 1)))
    y = relay.nn.conv2d(y, _w(16, 16, 3, 3), padding=(1, 1))
    y = relay.nn.relu(relay.add(y, x))  # skip from the input: shares the input's transform
    z = relay.nn.conv2d(y, _w(32, 16, 1, 1), strides=(2, 2))  # downsample branch
    y2 = relay.nn.conv2d(y, _w(32, 16, 3, 3), strides=(2, 2), padding=(1, 1))
    mod = _mod([x], relay.nn.relu(relay.add(y2, z)))
    new = _alter(mod)
    ops = _ops(new)
    assert ops.count("layout_transform") == 2 and ops[0] == "layout_transform"
    assert ops[-1] == "layout_transform" and ops.count("nn.contrib_conv2d_NCHWc") == 4
    _check(mod, new)


@pytest.mark.parametrize("pool", ["max", "avg", "global_avg", "global_max", "adaptive", "pad"])
def test_pool_between_convs(pool):
    x = relay.var("x", shape=(1, 4, 9, 9))
    y = relay.nn.relu(relay.nn.conv2d(x, _w(32, 4, 3, 3)))
    if pool == "adaptive":  # to 1x1: the blocked global pool
        y = relay.nn.adaptive_avg_pool2d(y, (1, 1))
    elif pool == "pad":
        y = relay.nn.max_pool2d(relay.nn.pad(y, ((0, 0), (0, 0), (1, 2), (0, 1)), 0.5), (2, 2))
    elif pool == "max":
        y = relay.nn.max_pool2d(y, (3, 3), (2, 2), padding=(1, 1))
    elif pool == "avg":
        y = relay.nn.avg_pool2d(y, (2, 2), (2, 2), ceil_mode=True, count_include_pad=False)
    else:
        y = getattr(relay.nn, f"{pool}_pool2d")(y)
    y = relay.nn.conv2d(y, _w(16, 32, 1, 1))
    mod = _mod([x], y)
    new = _alter(mod)
    ops = _ops(new)
    assert ops.count("layout_transform") == 2
    (p,) = [c for c in _calls(new) if "pool" in c.op.name]
    assert p.attrs.layout == "NCHW16c"
    if pool == "adaptive":
        assert p.op.name == "nn.global_avg_pool2d"
    if pool == "pad":
        (pad,) = [c for c in _calls(new) if c.op.name == "nn.pad"]
        assert tuple(pad.checked_type.shape) == (1, 2, 10, 8, 16)
    _check(mod, new)


def test_adaptive_pool_and_channel_pad_leave_the_blocked_layout():
    x = relay.var("x", shape=(1, 4, 9, 9))
    y = relay.nn.relu(relay.nn.conv2d(x, _w(32, 4, 3, 3)))
    a = relay.nn.adaptive_avg_pool2d(y, (2, 3))
    b = relay.nn.pad(y, ((0, 0), (1, 0), (0, 0), (0, 0)))
    mod = _mod([x], relay.Tuple([a, b]))
    new = _alter(mod)
    assert _ops(new) == ["layout_transform", "nn.contrib_conv2d_NCHWc", "nn.relu",
                         "layout_transform", "nn.adaptive_avg_pool2d", "nn.pad"]
    _check(mod, new)


def test_pool_then_flatten_dense_transforms_back_once():
    x = relay.var("x", shape=(1, 3, 8, 8))
    y = relay.nn.relu(relay.nn.conv2d(x, _w(24, 3, 3, 3), padding=(1, 1)))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    mod = _mod([x], relay.nn.dense(y, _w(10, 24)))
    new = _alter(mod)
    assert _ops(new) == ["layout_transform", "nn.contrib_conv2d_NCHWc", "nn.relu",
                         "nn.global_avg_pool2d", "layout_transform", "nn.batch_flatten",
                         "reshape", "transpose", "nn.contrib_dense_pack"]  # (weight packing:
    # folded by FoldConstant)
    conv = _calls(new)[1]
    assert conv.attrs.data_layout == "NCHW3c" and conv.attrs.out_layout == "NCHW8c"
    _check(mod, new)


@pytest.mark.parametrize("c1,c2", [(32, 16), (16, 24), (5, 16)])
def test_concatenate_of_conv_outputs(c1, c2):
    x = relay.var("x", shape=(1, 8, 6, 6))
    a = relay.nn.conv2d(x, _w(c1, 8, 3, 3), padding=(1, 1))
    b = relay.nn.relu(relay.nn.conv2d(x, _w(c2, 8, 1, 1)))
    y = relay.concatenate([a, b], axis=1)
    mod = _mod([x], relay.nn.conv2d(y, _w(16, c1 + c2, 1, 1)))
    new = _alter(mod)
    ops = _ops(new)
    (cat,) = [c for c in _calls(new) if c.op.name == "concatenate"]
    # output blocks 16 and 16 share one block; 16 and 8 (24 channels) concatenate in block 8,
    # the next conv's input block (40 -> 8); 5 and 16 in 1, converted to the next conv's input
    # block (21 -> 7) after
    want, n_transforms = {(32, 16): (16, 2), (16, 24): (8, 3), (5, 16): (1, 5)}[(c1, c2)]
    assert tuple(cat.checked_type.shape)[-1] == want and len(cat.checked_type.shape) == 5
    assert ops.count("layout_transform") == n_transforms
    _check(mod, new)


@pytest.mark.parametrize("then_conv", [False, True])
def test_concatenate_with_an_nchw_input(then_conv):
    x = relay.var("x", shape=(1, 8, 4, 4))
    y = relay.concatenate([relay.nn.conv2d(x, _w(16, 8, 1, 1)), x], axis=1)
    mod = _mod([x], relay.nn.conv2d(y, _w(8, 24, 1, 1)) if then_conv else relay.nn.relu(y))
    new = _alter(mod)
    ops = _ops(new)
    (cat,) = [c for c in _calls(new) if c.op.name == "concatenate"]
    if then_conv:  # x joins in block 8 (the transform shared with the first conv's input),
        # the 16-block conv output is converted to 8; 24 channels -> the next conv reads 8
        assert tuple(cat.checked_type.shape) == (1, 3, 4, 4, 8)
        assert ops.count("layout_transform") == 3
    else:  # nothing after it wants blocks: the conv's result goes back, the concat in NCHW
        assert tuple(cat.checked_type.shape) == (1, 24, 4, 4)
        assert ops.count("layout_transform") == 2
    _check(mod, new)


def test_weight_var_transformed_in_graph_then_folded_when_bound():
    x = relay.var("x", shape=(1, 16, 5, 5))
    w = relay.var("w", shape=(16, 16, 3, 3))
    mod = _mod([x, w], relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1))))
    new = _alter(mod)
    assert _ops(new).count("layout_transform") == 3  # x in, w in, result out
    _check(mod, new)
    wv = rng.uniform(-1, 1, (16, 16, 3, 3)).astype("float32")
    bound = relay.IRModule.from_expr(bind_params_by_name(mod["main"], {"w": wv}))
    folded = transform.FoldConstant()(_alter(bound))
    assert _ops(folded).count("layout_transform") == 2


def test_left_alone():
    x = relay.var("x", shape=(1, 8, 6, 6))
    dw = relay.nn.conv2d(x, _w(16, 1, 3, 3), padding=(1, 1), groups=8)  # multiplier 2
    dw = relay.nn.conv2d(dw, _w(16, 4, 3, 3), padding=(1, 1), groups=4)  # grouped
    nhwc = relay.var("y", shape=(1, 6, 6, 8))
    c2 = relay.nn.conv2d(nhwc, _w(3, 3, 8, 4), data_layout="NHWC", kernel_layout="HWIO")
    mod = _mod([x, nhwc], relay.Tuple([dw, c2]))
    new = _alter(mod)
    assert _ops(new) == _ops(mod)
    _check(mod, new, compiled=False)
    # not an x86 target: nothing changes
    x = relay.var("x", shape=(1, 8, 6, 6))
    mod = _mod([x], relay.nn.conv2d(x, _w(8, 8, 3, 3)))
    assert _ops(_alter(mod, "interp")) == ["nn.conv2d"]


def test_consumers_that_need_nchw_share_one_transform():
    x = relay.var("x", shape=(1, 8, 4, 4))
    y = relay.nn.relu(relay.nn.conv2d(x, _w(16, 8, 1, 1)))
    a = relay.nn.softmax(y, axis=1)
    b = relay.reshape(y, (1, 16, 16))
    c = relay.nn.conv2d(y, _w(8, 16, 1, 1))
    mod = _mod([x], relay.Tuple([a, b, c, y]))
    new = _alter(mod)
    ops = _ops(new)
    # x in; y out (shared by softmax, reshape and the result); c out
    assert ops.count("layout_transform") == 3
    out = run(new, random_inputs(mod["main"]))
    assert [o.shape for o in out] == [(1, 16, 4, 4), (1, 16, 16), (1, 8, 4, 4), (1, 16, 4, 4)]
    _check(mod, new)


def test_depthwise_keeps_the_block():
    x = relay.var("x", shape=(1, 8, 7, 7))
    y = relay.clip(relay.nn.conv2d(x, _w(48, 8, 1, 1)), 0.0, 6.0)  # 48 channels: block 16
    y = relay.nn.conv2d(y, _w(48, 1, 3, 3), strides=(2, 2), padding=(1, 1), groups=48)
    y = relay.nn.conv2d(relay.clip(y, 0.0, 6.0), _w(8, 48, 1, 1))
    mod = _mod([x], y)
    new = _alter(mod)
    assert _ops(new).count("layout_transform") == 2
    dw = [c for c in _calls(new) if c.op.name == "nn.contrib_conv2d_NCHWc"][1]
    assert (dw.attrs.groups, dw.attrs.data_layout, dw.attrs.kernel_layout) == (
        48, "NCHW16c", "OIHW1i16o")
    assert tuple(dw.args[1].data.shape) == (3, 1, 3, 3, 1, 16)
    _check(mod, new)
    # a depthwise conv whose input is blocked by a block that divides its channels keeps it
    # (8 + 40 channels concatenated in block 8; 48 alone would take block 16)
    x = relay.var("x", shape=(1, 8, 5, 5))
    y = relay.concatenate([relay.nn.conv2d(x, _w(8, 8, 1, 1)),
                           relay.nn.conv2d(x, _w(40, 8, 1, 1))], axis=1)
    y = relay.nn.conv2d(relay.nn.relu(y), _w(48, 1, 3, 3), padding=(1, 1), groups=48)
    mod = _mod([x], y)
    new = _alter(mod)
    assert _ops(new).count("layout_transform") == 2
    assert [c.attrs.out_layout for c in _calls(new) if "conv" in c.op.name] == ["NCHW8c"] * 3
    _check(mod, new)


def test_let_batch_norm_and_dropout_get_nchw():
    """Without SimplifyInference: batch_norm / dropout (tuple results) read NCHW; a Let-bound
    value is kept in its declared layout."""
    x = relay.var("x", shape=(1, 4, 6, 6))
    y = relay.nn.conv2d(x, _w(16, 4, 3, 3), padding=(1, 1))
    bn = relay.nn.batch_norm(y, _w(16), _w(16), _w(16), _w(16, lo=0.5, hi=1.5))[0]
    v = relay.var("v", shape=(1, 16, 6, 6))
    body = relay.add(relay.nn.dropout(v, 0.3), relay.nn.conv2d(v, _w(16, 16, 1, 1)))
    body = relay.nn.relu(body)
    mod = _mod([x], relay.Let(v, relay.nn.relu(bn), body))
    new = _alter(mod)
    ops = _ops(new)
    # x in, conv out to batch_norm, v in, the second conv's result out to the add (nothing
    # after the add wants the blocked layout, see test_whole_tensor_operand_follows_demand)
    assert ops.count("nn.contrib_conv2d_NCHWc") == 2 and ops.count("layout_transform") == 4
    _check(mod, new, compiled=False)


@pytest.mark.parametrize("then_conv", [False, True])
def test_whole_tensor_operand_follows_demand(then_conv):
    """add(blocked conv output, NCHW tensor): one of them is transformed either way; the add
    stays blocked only when something after it wants the blocked layout (a conv)."""
    x = relay.var("x", shape=(1, 8, 5, 5))
    r = relay.var("r", shape=(1, 16, 5, 5))
    y = relay.nn.relu(relay.add(relay.nn.conv2d(x, _w(16, 8, 1, 1)), r))
    if then_conv:
        y = relay.nn.conv2d(y, _w(16, 16, 3, 3))
    mod = _mod([x, r], y)
    new = _alter(mod)
    if then_conv:  # x in, r in, the result out
        assert _ops(new) == ["layout_transform", "nn.contrib_conv2d_NCHWc", "layout_transform",
                             "add", "nn.relu", "nn.contrib_conv2d_NCHWc", "layout_transform"]
    else:  # x in, the conv's result out
        assert _ops(new) == ["layout_transform", "nn.contrib_conv2d_NCHWc", "layout_transform",
                             "add", "nn.relu"]
    _check(mod, new)


@pytest.mark.parametrize("nchw_input", [False, True])
def test_symbolic_batch(nchw_input):
    n = tvm.te.var("n")
    x = relay.var("x", shape=(n, 8, 9, 9))  # rows of 8+ columns: read in place (nchw_input)
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, _w(16, 8, 3, 3)), _w(16)))
    y = relay.nn.max_pool2d(y, (2, 2), (2, 2), ceil_mode=True)
    y = relay.nn.conv2d(y, _w(16, 1, 3, 3), padding=(1, 1), groups=16)
    mod = _mod([x], relay.nn.global_avg_pool2d(y))
    new = _alter(mod, nchw_input=nchw_input)
    ops = _ops(new)
    # the first convolution reads the NCHW input in place when nchw_input
    assert ops.count("layout_transform") == 2 - nchw_input
    assert ops.count("nn.contrib_conv2d_NCHWc") == 2
    assert str(new["main"].checked_type) == str(mod["main"].checked_type)
    for batch in (1, 3):
        inputs = {"x": rng.uniform(-1, 1, (batch, 8, 9, 9)).astype("float32")}
        want = run(mod, inputs)
        _close(run(new, inputs), want, 1e-5)
        _close(_run_compiled(new, inputs), want, 1e-4)


def test_symbolic_batch_padded_output_channels():
    """57 output channels (block 3) are padded to 64 and cropped, with a symbolic batch."""
    n = tvm.te.var("n")
    x = relay.var("x", shape=(n, 8, 6, 6))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, _w(57, 8, 3, 3), padding=(1, 1)),
                                        _w(57)))
    mod = _mod([x], y)
    new = _alter(mod)
    assert _ops(new).count("strided_slice") == 1
    assert str(new["main"].checked_type) == str(mod["main"].checked_type)
    for batch in (1, 2):
        inputs = {"x": rng.uniform(-1, 1, (batch, 8, 6, 6)).astype("float32")}
        want = run(mod, inputs)
        _close(run(new, inputs), want, 1e-5)
        _close(_run_compiled(new, inputs), want, 1e-4)


def test_blocks_follow_the_target_vector_width():
    x = relay.var("x", shape=(1, 32, 5, 5))
    mod = _mod([x], relay.nn.conv2d(x, _w(48, 32, 3, 3)))
    conv = [c for c in _calls(_alter(mod, "llvm -mcpu=haswell")) if "conv" in c.op.name][0]
    assert (conv.attrs.data_layout, conv.attrs.out_layout) == ("NCHW8c", "NCHW8c")  # AVX2
    conv = [c for c in _calls(_alter(mod, "llvm -mcpu=znver4")) if "conv" in c.op.name][0]
    assert (conv.attrs.data_layout, conv.attrs.out_layout) == ("NCHW16c", "NCHW16c")  # AVX-512


def test_in_sequential_gated_by_opt_level():
    x = relay.var("x", shape=(1, 8, 4, 4))
    mod = _mod([x], relay.nn.conv2d(x, _w(8, 8, 3, 3)))
    seq = transform.Sequential([transform.AlterOpLayout(), transform.FoldConstant()])
    with tvm.transform.PassContext(opt_level=2):
        assert _ops(seq(mod)) == ["nn.conv2d"]
    with tvm.transform.PassContext(opt_level=3):
        assert "nn.contrib_conv2d_NCHWc" in _ops(seq(mod))


def _random_graph(seed):
    """A random conv network over awkward channel counts (primes, 1, 12, 20 ...), mixing every
    rule of the pass: convs (plain, depthwise, grouped, strided), elementwise and broadcast ops
    with scalar / per-channel / full-tensor operands, pools, pads, concats and residual adds."""
    r = np.random.default_rng(seed)
    pick = lambda xs: xs[int(r.integers(len(xs)))]  # noqa: E731
    c0 = pick([1, 3, 5, 8, 12])
    x = relay.var("x", shape=(pick([1, 2]), c0, pick([7, 9]), pick([6, 8])))
    params, vals = [x], [x]
    for _ in range(int(r.integers(4, 9))):
        y = pick(vals[-2:])
        shape = [int(d) for d in infer_type(relay.Function(params, y)).body.checked_type.shape]
        c = shape[1]
        kind = pick(["conv", "conv", "dw", "group", "unary", "chan", "full", "pool", "pad",
                     "concat", "residual"])
        if kind == "conv":
            oc, k = pick([1, 4, 7, 12, 16, 20, 32]), pick([1, 3])
            y = relay.nn.conv2d(y, _w(oc, c, k, k), strides=pick([1, 2]), padding=k // 2)
        elif kind == "dw" and c > 1:
            y = relay.nn.conv2d(y, _w(c, 1, 3, 3), padding=(1, 1), groups=c)
        elif kind == "group" and c % 2 == 0 and c > 2:
            y = relay.nn.conv2d(y, _w(c, c // 2, 1, 1), groups=2)
        elif kind == "unary":
            y = pick([relay.nn.relu, relay.sigmoid, lambda t: relay.clip(t, -0.5, 0.5)])(y)
        elif kind == "chan":
            y = pick([relay.add, relay.multiply, relay.maximum])(y, _w(c, 1, 1))
            y = relay.nn.bias_add(y, _w(c)) if r.random() < 0.5 else relay.add(
                y, relay.const(np.float32(0.25)))
        elif kind == "full":
            v = relay.var(f"v{len(params)}", shape=shape)
            params.append(v)
            y = relay.subtract(y, v)
        elif kind == "pool" and min(shape[2:]) >= 2:
            y = pick([relay.nn.max_pool2d, relay.nn.avg_pool2d])(y, (2, 2), (2, 2),
                                                                padding=(0, 0, 1, 1))
        elif kind == "pad":
            y = relay.nn.pad(y, ((0, 0), (0, 0), (1, 0), (0, 1)))
        elif kind == "concat":
            z = relay.nn.conv2d(y, _w(pick([4, 5, 16]), c, 1, 1))
            y = relay.concatenate([y, relay.nn.relu(z)], axis=1)
        elif kind == "residual":
            y = relay.add(y, relay.nn.conv2d(y, _w(c, c, 3, 3), padding=(1, 1)))
        vals.append(y)
    out = vals[-1]
    if r.random() < 0.5:
        out = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(out))
    return _mod(params, out)


@pytest.mark.parametrize("seed", range(12))
def test_random_graphs(seed):
    mod = _random_graph(seed)
    new = _alter(mod)
    ops = _ops(new)
    assert str(new["main"].checked_type) == str(mod["main"].checked_type)
    convs = [c for c in _calls(mod) if c.op.name == "nn.conv2d"]
    left = [c for c in _calls(new) if c.op.name == "nn.conv2d"]
    assert len(left) == sum(1 for c in convs if c.attrs.groups not in (1, c.args[0].checked_type
                                                                       .shape[1]))
    assert ops.count("layout_transform") <= 2 * len(convs) + len(mod["main"].params)
    _check(mod, new, compiled=seed < 3)


def _prepared(mod, params):
    bound = relay.IRModule.from_expr(bind_params_by_name(mod["main"], params))
    seq = transform.Sequential([transform.SimplifyInference(), transform.FoldConstant(),
                                transform.FoldScaleAxis(), transform.FoldConstant()])
    with tvm.transform.PassContext(opt_level=3):
        return seq(bound)


def test_resnet18():
    mod, params = testing.resnet.get_workload(num_layers=18, image_shape=(3, 32, 32),
                                              num_classes=10)
    ref = _prepared(mod, params)
    n_conv = count_ops(ref["main"].body, "nn.conv2d")
    new = transform.FoldConstant()(_alter(ref))
    ops = _ops(new)
    assert ops.count("nn.contrib_conv2d_NCHWc") == n_conv and "nn.conv2d" not in ops
    assert ops.count("layout_transform") == 2  # the image in, before batch_flatten out
    x = {"data": rng.uniform(-1, 1, (1, 3, 32, 32)).astype("float32")}
    want = run(ref, x)
    tol = 1e-4 * np.abs(want).max()
    np.testing.assert_allclose(run(new, x), want, rtol=1e-4, atol=tol)
    np.testing.assert_allclose(_run_compiled(new, x), want, rtol=1e-4, atol=tol)
    # with Winograd (untuned rule): the 3x3 stride-1 convs change algorithm, not layout
    wino = transform.FoldConstant()(_alter(ref, winograd=True))
    ops = _ops(wino)
    n_wino = ops.count("nn.contrib_conv2d_winograd_nchwc")
    assert n_wino >= 4 and n_wino + ops.count("nn.contrib_conv2d_NCHWc") == n_conv
    assert ops.count("layout_transform") == 2
    np.testing.assert_allclose(_run_compiled(wino, x), want, rtol=1e-4, atol=tol)


def test_mobilenet_v2():
    mod, params = testing.mobilenet_v2.get_workload(image_shape=(3, 32, 32), num_classes=10,
                                                    width_mult=0.5)
    ref = _prepared(mod, params)
    new = transform.FoldConstant()(_alter(ref))
    ops = _ops(new)
    assert "nn.conv2d" not in ops  # the depthwise ones too
    assert ops.count("layout_transform") == 2  # the image in, before batch_flatten out
    x = {"data": rng.uniform(-1, 1, (1, 3, 32, 32)).astype("float32")}
    want = run(ref, x)
    tol = 1e-4 * np.abs(want).max()
    np.testing.assert_allclose(run(new, x), want, rtol=1e-4, atol=tol)
    np.testing.assert_allclose(_run_compiled(new, x), want, rtol=1e-4, atol=tol)


def test_bad_input():
    with pytest.raises(ValueError, match="unknown target kind"):
        transform.AlterOpLayout(target="cuda9")
    x = relay.var("x", shape=(1, 8, 4, 4))
    with pytest.raises(TypeError, match="IRModule"):
        transform.AlterOpLayout()(relay.nn.conv2d(x, _w(8, 8, 3, 3)))
    # an explicit target wins over the current one
    mod = _mod([x], relay.nn.conv2d(x, _w(8, 8, 3, 3)))
    with tvm.target.Target("interp"):
        assert "nn.contrib_conv2d_NCHWc" in _ops(transform.AlterOpLayout("llvm")(mod))
        assert _ops(transform.AlterOpLayout()(mod)) == ["nn.conv2d"]


def test_blocked_pool_type_errors():
    x = relay.var("x", shape=(1, 2, 6, 6, 8))
    bad = [relay.nn.max_pool2d(x, (2, 2), layout="NCHW16c"),  # block 8 is not 16
           relay.nn.global_avg_pool2d(relay.var("y", shape=(1, 16, 6, 6)), layout="NCHW16c"),
           relay.nn.adaptive_avg_pool2d(x, (1, 1), layout="NCHW8c")]  # no blocked compute
    for e in bad:
        with pytest.raises(relay.RelayTypeError, match=r"NCHW"):
            infer_type(relay.Function(relay.analysis.free_vars(e), e))
    ok = infer_type(relay.Function([x], relay.nn.avg_pool2d(x, (3, 3), (2, 2), layout="NCHW8c")))
    assert tuple(ok.body.checked_type.shape) == (1, 2, 2, 2, 8)
