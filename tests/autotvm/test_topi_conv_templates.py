"""The x86 NCHWc convolutions as AutoTVM templates (``conv2d_NCHWc.x86``,
``depthwise_conv2d_NCHWc.x86``): the space holds today's default schedule, the fallback config
lowers to exactly the IR of the default schedule (kept below as a verbatim copy, the
performance guard), random configs compute the convolution, relay's x86 strategy goes through
the templates (task extraction on ResNet-18 and MobileNetV2), and a short real tuning run drives
relay.build under ``apply_history_best``."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay, te, topi
from tvmpy.autotvm.tuner import RandomTuner
from tvmpy.target import Target
from tvmpy.target.cpu_features import CacheSizes
from tvmpy.topi import nn, testing
from tvmpy.topi.x86 import conv2d_nchwc
from tvmpy.topi.x86.conv2d import _find, _outputs, _schedule_pad, anchor
from tvmpy.topi.x86.conv2d_nchwc import (
    _divisor_tile,
    _nchwc_tile,
    default_inline_pad,
    default_ow_tile,
    default_row_tile,
)

CONV = "conv2d_NCHWc.x86"
DW = "depthwise_conv2d_NCHWc.x86"
KNOBS = ("tile_ow", "tile_oc", "unroll_kw", "inline_pad", "tile_oh", "kernel_outer", "k_block",
         "tile_rh")


def reference_schedule_conv2d_NCHWc(outs, reg_n=None, oc_tile=None, inline_pad=True):
    """Verbatim copy of ``topi.x86.schedule_conv2d_NCHWc`` before it became a template."""
    outs = _outputs(outs)
    s, conv = _find(outs, "conv2d_NCHWc")
    depthwise = False
    if conv is None:
        s, conv = _find(outs, "depthwise_conv2d_NCHWc")
        depthwise = True
    if conv is None:
        raise ValueError("schedule_conv2d_NCHWc: no conv2d_NCHWc stage found")
    out = anchor(conv, outs[0])
    kh, kw = (int(d) for d in conv.op.input_tensors[1].shape[2:4])
    for t in conv.op.input_tensors:
        if inline_pad and kh * kw <= 9 and t.op in s and "pad" in t.op.tag:
            s[t].compute_inline()
        else:
            _schedule_pad(s, t)
    oc_chunk, ow = int(conv.shape[1]), int(conv.shape[3])
    d_oc, d_reg = _nchwc_tile(oc_chunk, depthwise, kh * kw)
    oc_tile = d_oc if oc_tile is None else max(1, min(oc_tile, oc_chunk))
    reg_n = default_ow_tile(ow, d_reg) if reg_n is None else _divisor_tile(ow, reg_n)
    if conv.op is out.op:
        CC = s.cache_write(conv, "local")
    else:
        s[conv].set_scope("local")
        CC = conv
    n, oco, y, x, oci = s[out].op.axis
    coo, coi = s[out].split(oco, factor=oc_tile)
    xo, xi = s[out].split(x, factor=reg_n)
    s[out].reorder(n, coo, y, xo, coi, xi, oci)
    s[out].vectorize(oci)
    task = s[out].fuse(n, coo, y)
    s[out].parallel(task)
    s[CC].compute_at(s[out], xo)
    _, cco, _, cx, coci = s[CC].op.axis
    s[CC].reorder(*s[CC].op.reduce_axis, cco, cx, coci)
    if oc_tile > 1:
        s[CC].unroll(cco)
    s[CC].unroll(cx)
    s[CC].vectorize(coci)
    return s


# (C, H, W, OC, K, stride, pad, ic_bn, oc_bn): ResNet-18 layers with the blocks AlterOpLayout
# picks (56x56x64 3x3, 28x28x128 3x3 stride 1 and 2, the 7x7 stem, 1x1 stride 2), and an odd
# chunk count with a row that no tile divides (17)
LAYERS = [
    (64, 56, 56, 64, 3, 1, 1, 16, 16),
    (128, 28, 28, 128, 3, 1, 1, 16, 16),
    (64, 56, 56, 128, 3, 2, 1, 16, 16),
    (3, 224, 224, 64, 7, 2, 3, 3, 16),
    (64, 56, 56, 128, 1, 2, 0, 16, 16),
    (8, 9, 17, 24, 3, 1, 1, 4, 8),
]
# (C, H, W, K, stride, bn): MobileNetV2 depthwise layers
DW_LAYERS = [(144, 56, 56, 3, 1, 16), (96, 112, 112, 3, 2, 16), (24, 9, 13, 3, 2, 8)]


def _conv_args(c, h, w, oc, k, stride, pad, icb, ocb):
    A = te.placeholder((1, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="W")
    return (A, W, (stride, stride), (pad, pad, pad, pad), (1, 1), f"NCHW{icb}c", f"NCHW{ocb}c",
            "float32")


def _dw_args(c, h, w, k, stride, bn):
    A = te.placeholder((1, c // bn, h, w, bn), name="A")
    W = te.placeholder((c // bn, 1, k, k, 1, bn), name="W")
    return (A, W, (stride, stride), (1, 1, 1, 1), (1, 1), f"NCHW{bn}c", f"NCHW{bn}c", "float32")


def _default_knobs(args, depthwise):
    out = (nn.depthwise_conv2d_NCHWc if depthwise else nn.conv2d_NCHWc)(*args)
    kh, kw = (int(d) for d in args[1].shape[2:4])
    oc_chunk, ow = int(out.shape[1]), int(out.shape[3])
    d_oc, d_reg = _nchwc_tile(oc_chunk, depthwise, kh * kw)
    d_rh, d_oc2 = default_row_tile(out, depthwise)
    return {"tile_ow": default_ow_tile(ow, d_reg), "tile_oc": d_oc2, "unroll_kw": False,
            "inline_pad": default_inline_pad(out, depthwise), "tile_oh": 1,
            "kernel_outer": False, "k_block": 0, "tile_rh": d_rh}


def _knobs(cfg):
    return {k: cfg[k].val for k in KNOBS}


def _ref_ir(args, depthwise, epilogue=None):
    out = (nn.depthwise_conv2d_NCHWc if depthwise else nn.conv2d_NCHWc)(*args)
    if epilogue is not None:
        out = epilogue(out)
    s = reference_schedule_conv2d_NCHWc([out])
    return str(tvm.lower(s, [args[0], args[1], out]))


def _template_ir(args, depthwise, epilogue=None):
    comp = conv2d_nchwc.depthwise_conv2d_NCHWc if depthwise else conv2d_nchwc.conv2d_NCHWc
    sched = (conv2d_nchwc.schedule_depthwise_conv2d_NCHWc_autotvm if depthwise
             else conv2d_nchwc.schedule_conv2d_NCHWc_autotvm)
    ctx = autotvm.task.FallbackContext()
    ctx.silent = True
    with ctx, Target("llvm"):
        out = comp(*args)
        if epilogue is not None:
            out = epilogue(out)
        s = sched([out])
    return str(tvm.lower(s, [args[0], args[1], out]))


@pytest.mark.parametrize("layer", LAYERS, ids=[str(c[:7]) for c in LAYERS])
def test_fallback_is_todays_default_schedule(layer, monkeypatch):
    # the reference is the one-FMA-unit default: the template runs under the host target,
    # whose two-unit tiles (four chunks on 28-wide 1x1 maps, tests/topi/test_nn_conv2d_kblock.py)
    # the verbatim copy does not know
    monkeypatch.setattr(conv2d_nchwc, "_fma_units", lambda: 1)
    # and a host whose L2 holds every layer's weights twice over: on a 1 MiB L2 (Zen 4) the
    # 576 KiB of the 128 -> 128 3x3 take half of it, and the template reads a padded copy
    # (conv2d_nchwc.streams_weights), which the verbatim copy predates
    monkeypatch.setattr(conv2d_nchwc, "_caches",
                        lambda: CacheSizes(l1d=48 * 1024, l2=2 * 1024 * 1024))
    # and AVX-512's 32 registers with folded broadcasts (the copy predates AVX2's smaller
    # tiles, conv2d_nchwc.max_tile_columns; tests/topi/test_x86_tiles.py checks those)
    monkeypatch.setattr(conv2d_nchwc, "_registers", lambda: (32, True))
    args = _conv_args(*layer)
    assert _template_ir(args, False) == _ref_ir(args, False)
    # a fused epilogue runs on the register tile in both
    assert _template_ir(args, False, topi.nn.relu) == _ref_ir(args, False, topi.nn.relu)


@pytest.mark.parametrize("layer", DW_LAYERS, ids=[str(c) for c in DW_LAYERS])
def test_depthwise_fallback_is_todays_default_schedule(layer):
    args = _dw_args(*layer)
    assert _template_ir(args, True) == _ref_ir(args, True)
    assert _template_ir(args, True, topi.nn.relu) == _ref_ir(args, True, topi.nn.relu)


def test_plain_schedule_is_unchanged():
    """``topi.x86.schedule_conv2d_NCHWc`` (refactored onto the shared tile) with overrides."""
    args = _conv_args(*LAYERS[5])
    for kw in ({}, {"reg_n": 5, "oc_tile": 3}, {"inline_pad": False}, {"reg_n": 16}):
        outs = []
        for f in (topi.x86.schedule_conv2d_NCHWc, reference_schedule_conv2d_NCHWc):
            out = nn.conv2d_NCHWc(*args)
            outs.append(str(tvm.lower(f([out], **kw), [args[0], args[1], out])))
        assert outs[0] == outs[1], kw


@pytest.mark.parametrize("name,args", [(CONV, _conv_args(*LAYERS[0])),
                                       (CONV, _conv_args(*LAYERS[3])),
                                       (CONV, _conv_args(*LAYERS[5])),
                                       (DW, _dw_args(*DW_LAYERS[0]))])
def test_space_contains_default(name, args, monkeypatch):
    monkeypatch.setattr(conv2d_nchwc, "_registers", lambda: (32, True))  # as the verbatim copy
    task = autotvm.task.create(name, args, "llvm")
    space = task.config_space
    assert set(space.space_map) == set(KNOBS)
    assert len(space) > 4
    want = _default_knobs(args, name == DW)
    found = [i for i in range(len(space)) if _knobs(space.get(i)) == want]
    assert len(found) == 1
    # instantiating that config is the default schedule
    s, targs = task.instantiate(space.get(found[0]))
    got = str(tvm.lower(s, targs))
    ref = _ref_ir(autotvm.task.task.deserialize_args(task.args), name == DW)
    assert _normalize(got) == _normalize(ref)
    n, _, oh, ow, ocb = (int(d) for d in targs[-1].shape)
    w = targs[1].shape
    per_out = int(w[2]) * int(w[3]) * (1 if name == DW else int(w[1]) * int(w[4]))
    assert task.flop == 2 * n * int(targs[-1].shape[1]) * oh * ow * ocb * per_out


def _normalize(ir: str) -> str:
    import re

    return re.sub(r"\b(A|W|placeholder)(_\d+)?\b", "T", ir)


def _run_conv(task, cfg, rng):
    s, targs = task.instantiate(cfg)
    f = tvm.build(s, targs, "llvm")
    A, W, out = targs
    a = rng.uniform(-1, 1, [int(d) for d in A.shape]).astype("float32")
    w = rng.uniform(-1, 1, [int(d) for d in W.shape]).astype("float32")
    res = tvm.nd.array(np.full([int(d) for d in out.shape], np.nan, "float32"))
    f(tvm.nd.array(a), tvm.nd.array(w), res)
    return a, w, res.numpy()


@pytest.mark.parametrize("layer", [(8, 9, 17, 24, 3, 1, 1, 4, 8), (6, 11, 13, 16, 3, 2, 1, 3, 4),
                                   (3, 15, 15, 16, 7, 2, 3, 3, 8), (8, 6, 10, 16, 1, 2, 0, 8, 4)])
def test_random_configs_compute_the_convolution(layer):
    stride, pad = layer[5], layer[6]
    task = autotvm.task.create(CONV, _conv_args(*layer), "llvm")
    rng = np.random.default_rng(sum(layer[:7]))
    idx = rng.choice(len(task.config_space), size=min(4, len(task.config_space)), replace=False)
    for i in idx:
        a, w, got = _run_conv(task, task.config_space.get(int(i)), rng)
        want = testing.conv2d_NCHWc_python(a, w, stride, pad)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layer", [(24, 9, 13, 3, 2, 8), (32, 7, 11, 3, 1, 16)])
def test_random_depthwise_configs_compute_the_convolution(layer):
    c, _, _, k, stride, bn = layer
    task = autotvm.task.create(DW, _dw_args(*layer), "llvm")
    rng = np.random.default_rng(c + k)
    idx = rng.choice(len(task.config_space), size=min(4, len(task.config_space)), replace=False)
    for i in idx:
        a, w, got = _run_conv(task, task.config_space.get(int(i)), rng)
        w_nchw = w.transpose(0, 5, 1, 4, 2, 3).reshape(c, 1, k, k)
        want = testing.depthwise_conv2d_nchw_python(testing.nchwc_to_nchw(a), w_nchw, stride, 1)
        np.testing.assert_allclose(testing.nchwc_to_nchw(got), want, rtol=1e-4, atol=1e-4)


def _extract(model, image):
    from tvmpy.relay.testing import onnx_models

    onnx_model = getattr(onnx_models, model)(image=image)
    mod, params = relay.frontend.from_onnx(onnx_model, {"input": (1, 3, image, image)})
    with tvm.transform.PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(mod, params, "llvm")
    return [t for t in tasks if t.name in (CONV, DW)]


def test_extract_resnet18_conv_tasks():
    tasks = _extract("resnet18", 224)
    # the stem, 56x56 3x3, and per stage 2..4: 3x3 stride 2, 3x3, 1x1 stride 2 downsample
    assert len(tasks) == 11
    assert {t.name for t in tasks} == {CONV}
    assert len({t.workload for t in tasks}) == 11
    shapes = {(t.args[0][1], t.args[1][1], t.args[2]) for t in tasks}
    # the stem reads the NCHW image in place (data_layout NCHW)
    lanes = tvm.target.Target("llvm").vector_lanes("float32")  # the block: 16 AVX-512, 8 AVX2
    b = 64 // lanes
    assert ((1, 3, 224, 224), (b, 1, 7, 7, 3, lanes), (2, 2)) in shapes
    assert ((1, b, 56, 56, lanes), (b, b, 3, 3, lanes, lanes), (1, 1)) in shapes
    assert all(len(t.config_space) > 1 and t.flop > 0 for t in tasks)


def test_extract_mobilenet_v2_depthwise_tasks():
    tasks = _extract("mobilenet_v2", 64)
    dw = [t for t in tasks if t.name == DW]
    assert len(dw) >= 5
    assert all(t.args[1][1][1] == 1 and t.args[1][1][4] == 1 for t in dw)
    assert any(t.name == CONV for t in tasks)


def _small_net():
    x = relay.var("x", shape=(1, 16, 10, 12))
    w = relay.var("w", shape=(32, 16, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), kernel_size=(3, 3), channels=32))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    rng = np.random.default_rng(7)
    params = {"w": rng.uniform(-1, 1, (32, 16, 3, 3)).astype("float32")}
    return mod, params, rng.uniform(-1, 1, (1, 16, 10, 12)).astype("float32")


def test_tune_conv_task_then_build_with_history_best(tmp_path, monkeypatch):
    mod, params, x = _small_net()
    with tvm.transform.PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(mod, params, "llvm")
    tasks = [t for t in tasks if t.name in (CONV, DW)]
    assert [t.name for t in tasks] == [CONV]
    task = tasks[0]
    log = tmp_path / "conv.log"
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2),
                                    runner=autotvm.LocalRunner(number=2, repeat=1))
    tuner = RandomTuner(task, seed=1)
    tuner.tune(6, option, callbacks=[autotvm.callback.log_to_file(str(log))])
    recs = autotvm.record.load_from_file(str(log))
    assert len(recs) == 6
    ok = [(inp, res) for inp, res in recs if res.error_no == 0]
    assert ok, [res for _, res in recs]
    best = min(ok, key=lambda r: np.mean(r[1].costs))[0].config

    seen = []
    real = conv2d_nchwc.schedule_nchwc_tile

    def spy(s, conv, out, oc_tile, reg_n, inline_pad, unroll_kw=False, tile_oh=1,
            kernel_outer=False, k_block=0, reg_h=1):
        seen.append({"tile_ow": reg_n, "tile_oc": oc_tile, "unroll_kw": unroll_kw,
                     "inline_pad": inline_pad, "tile_oh": tile_oh, "kernel_outer": kernel_outer,
                     "k_block": k_block, "tile_rh": reg_h})
        return real(s, conv, out, oc_tile, reg_n, inline_pad, unroll_kw, tile_oh, kernel_outer,
                    k_block, reg_h)

    monkeypatch.setattr(conv2d_nchwc, "schedule_nchwc_tile", spy)
    with autotvm.apply_history_best(str(log)):
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target="llvm", params=params)
    assert seen == [_knobs(best)]
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=x)
    m.run()
    want = np.asarray(relay.create_executor("debug", mod).evaluate()(x, **params))
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,args", [(CONV, _conv_args(6, 7, 9, 16, 3, 1, 1, 3, 8)),
                                       (DW, _dw_args(16, 7, 9, 3, 1, 8))])
def test_every_knob_changes_the_program_and_keeps_the_result(name, args):
    """Each knob, flipped alone from the default, changes the lowered IR (it is not dead) and
    the kernel still computes the convolution."""
    task = autotvm.task.create(name, args, "llvm")
    space = task.config_space
    configs = [space.get(i) for i in range(len(space))]
    default = _default_knobs(autotvm.task.task.deserialize_args(task.args), name == DW)
    base = next(c for c in configs if _knobs(c) == default)
    base_ir = str(tvm.lower(*task.instantiate(base)))
    rng = np.random.default_rng(5)
    _, _, want = _run_conv(task, base, np.random.default_rng(5))
    for knob in default:
        if len(space.space_map[knob]) == 1:  # (kernel_outer of a depthwise conv: one order)
            continue
        other = [c for c in configs if _knobs(c) == {**default, knob: _knobs(c)[knob]}
                 and _knobs(c)[knob] != default[knob]]
        assert other, knob
        assert str(tvm.lower(*task.instantiate(other[0]))) != base_ir, knob
        rng = np.random.default_rng(5)
        _, _, got = _run_conv(task, other[0], rng)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layer", [(64, 5, 5, 64, 2, 1, 0, 16, 16), (48, 4, 3, 32, 3, 1, 1, 16, 8)])
def test_small_map_fallback_is_the_row_tile(layer):
    """On a map of at most 4 columns the fallback config stacks rows (``tile_rh``) as the
    default schedule does, and the space offers other row counts; a tuned one computes right."""
    args = _conv_args(*layer)
    task = autotvm.task.create(CONV, args, "llvm")
    space = task.config_space
    assert len(space.space_map["tile_rh"].entities) > 1
    want = _default_knobs(args, False)
    assert want["tile_rh"] > 1
    found = [i for i in range(len(space)) if _knobs(space.get(i)) == want]
    assert len(found) == 1
    s, targs = task.instantiate(space.get(found[0]))
    out = nn.conv2d_NCHWc(*args)
    ref = str(tvm.lower(topi.x86.schedule_conv2d_NCHWc([out]), [args[0], args[1], out]))
    assert _normalize(str(tvm.lower(s, targs))) == _normalize(ref)
    rng = np.random.default_rng(5)
    other = dict(want, tile_rh=1)
    idx = [i for i in range(len(space)) if _knobs(space.get(i)) == other]
    for cfg in (space.get(found[0]), space.get(idx[0])):
        a, w, res = _run_conv(task, cfg, rng)
        np.testing.assert_allclose(res, testing.conv2d_NCHWc_python(a, w, layer[5], layer[6]),
                                   rtol=1e-4, atol=1e-4)
