"""Winograd in relay: AlterOpLayout rewrites eligible 3x3 stride-1 convolutions into
``nn.contrib_conv2d_winograd_nchwc`` with the weight transformed at compile time; the choice
(config, tuning records, default rule); task extraction lists the direct and the Winograd tasks
with the workloads the computes use; built modules and the interpreter agree with the
untransformed graph."""

from __future__ import annotations

import numpy as np
import pytest
from _pass_util import count_ops, random_inputs, run

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.autotvm.measure import MeasureInput, MeasureResult
from tvmpy.contrib import graph_executor
from tvmpy.relay import transform
from tvmpy.relay.op.strategy.x86_winograd import TILE_SIZES

WINO = "nn.contrib_conv2d_winograd_nchwc"
DIRECT = "nn.contrib_conv2d_NCHWc"


def _net(c=16, hw=16, oc=32, seed=0, stride=1, k=3):
    """conv3x3(+bias, relu) -> conv3x3 -> add residual-free output; constant weights."""
    rng = np.random.default_rng(seed)
    x = relay.var("x", shape=(1, c, hw, hw), dtype="float32")
    w1 = relay.const(rng.uniform(-0.5, 0.5, (oc, c, k, k)).astype("float32"))
    b1 = relay.const(rng.uniform(-0.5, 0.5, (oc,)).astype("float32"))
    w2 = relay.const(rng.uniform(-0.5, 0.5, (oc, oc, 3, 3)).astype("float32"))
    y = relay.nn.conv2d(x, w1, strides=(stride, stride), padding=(k // 2, k // 2))
    y = relay.nn.relu(relay.nn.bias_add(y, b1))
    y = relay.nn.conv2d(y, w2, padding=(1, 1))
    return relay.IRModule.from_expr(relay.Function([x], y))


def _alter(mod, config=None):
    mod = transform.InferType()(mod)
    with tvm.transform.PassContext(opt_level=3, config=config or {}):
        with tvm.target.Target("llvm"):
            return transform.AlterOpLayout()(mod)


def _build_run(mod, x, config=None):
    with tvm.transform.PassContext(opt_level=3, config=config or {}):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=x)
    m.run()
    return m.get_output(0).numpy()


def test_default_rule_rewrites_large_layers_only():
    big = _alter(_net(hw=8, c=32))  # 4 tiles of 4x4 per image
    assert count_ops(big["main"], WINO) == 2 and count_ops(big["main"], DIRECT) == 0
    small = _alter(_net(hw=4, c=32))  # 1 tile
    assert count_ops(small["main"], WINO) == 0 and count_ops(small["main"], DIRECT) == 2
    # fewer than MIN_CHANNELS_DEFAULT input channels: the first conv stays direct
    few = _alter(_net(hw=8, c=16))
    assert count_ops(few["main"], WINO) == 1 and count_ops(few["main"], DIRECT) == 1


def test_ineligible_convolutions_stay_direct():
    mod = _alter(_net(hw=16, stride=2))  # the first conv has stride 2
    assert count_ops(mod["main"], WINO) == 1 and count_ops(mod["main"], DIRECT) == 1
    mod = _alter(_net(hw=16, k=5))  # a 5x5 window
    assert count_ops(mod["main"], WINO) == 1 and count_ops(mod["main"], DIRECT) == 1


@pytest.mark.parametrize("config,wino,tile", [({"relay.x86.winograd": False}, 0, None),
                                               ({"relay.x86.winograd": 6}, 2, 6),
                                               ({"relay.x86.winograd": True}, 2, 4)])
def test_config_forces_the_choice(config, wino, tile):
    mod = _alter(_net(hw=4), config)
    assert count_ops(mod["main"], WINO) == wino
    if tile:
        tiles = []
        relay.post_order_visit(mod["main"].body, lambda e: tiles.append(e.attrs.tile_size) if (
            isinstance(e, relay.Call) and getattr(e.op, "name", "") == WINO) else None)
        assert tiles == [tile, tile]


def test_bad_config_is_an_error():
    with pytest.raises(ValueError, match="relay.x86.winograd"):
        _alter(_net(hw=4), {"relay.x86.winograd": 5.5})


def test_rewritten_graph_computes_the_same_in_the_interpreter():
    mod = _net(hw=13, c=8, oc=16)
    inputs = random_inputs(mod["main"], seed=4)
    want = run(mod, inputs)
    alt = _alter(mod, {"relay.x86.winograd": 4})
    assert count_ops(alt["main"], WINO) == 2
    np.testing.assert_allclose(run(alt, inputs), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile", [4, 6])
def test_built_module_matches_the_interpreter(tile):
    mod = _net(hw=19, c=16, oc=32, seed=2)
    x = np.random.default_rng(5).uniform(-1, 1, (1, 16, 19, 19)).astype("float32")
    want = np.asarray(run(mod, {"x": x}))
    got = _build_run(mod, x, {"relay.x86.winograd": tile})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_weight_that_is_a_parameter_is_transformed_once_bound():
    rng = np.random.default_rng(7)
    x = relay.var("x", shape=(1, 8, 12, 12), dtype="float32")
    w = relay.var("w", shape=(16, 8, 3, 3), dtype="float32")
    mod = relay.IRModule.from_expr(relay.Function([x, w], relay.nn.conv2d(x, w, padding=(1, 1))))
    alt = _alter(mod, {"relay.x86.winograd": 4})
    assert count_ops(alt["main"], "nn.contrib_conv2d_winograd_weight_transform") == 1
    wv = rng.uniform(-1, 1, (16, 8, 3, 3)).astype("float32")
    xv = rng.uniform(-1, 1, (1, 8, 12, 12)).astype("float32")
    with tvm.transform.PassContext(opt_level=3, config={"relay.x86.winograd": 4}):
        lib = relay.build(mod, target="llvm", params={"w": wv})
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=xv)
    m.run()
    want = np.asarray(run(mod, {"x": xv, "w": wv}))
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def _tasks(mod):
    with tvm.transform.PassContext(opt_level=3):
        return autotvm.task.extract_from_program(mod, None, "llvm")


def test_extraction_lists_direct_and_winograd_tasks_with_the_computes_workloads():
    tasks = _tasks(_net(hw=16))
    names = sorted(t.name for t in tasks)
    # per conv: the direct task and one Winograd task per tile size; a task added by the
    # choice but not by the compute it picked would show up twice if their workloads differed
    assert names.count("conv2d_NCHWc.x86") == 2
    assert names.count("conv2d_winograd_NCHWc.x86") == 2 * len(TILE_SIZES)
    alphas = sorted({t.args[1][1][0] for t in tasks if t.name == "conv2d_winograd_NCHWc.x86"})
    assert alphas == [m + 2 for m in TILE_SIZES]


def _record(task, cost):
    cfg = task.config_space.get(0)
    return (MeasureInput(task.target, task, cfg), MeasureResult((cost,), 0, 0.1, 0.0))


@pytest.mark.parametrize("fastest", ["direct", *TILE_SIZES])
def test_records_pick_the_fastest_implementation(fastest):
    mod = _net(hw=4)  # untuned, these would stay direct (one tile)
    tasks = _tasks(mod)
    recs = []
    for t in tasks:
        kind = "direct" if t.name == "conv2d_NCHWc.x86" else t.args[1][1][0] - 2
        recs.append(_record(t, 1e-4 if kind == fastest else 2e-4))
    with autotvm.apply_history_best(recs):
        alt = _alter(mod)
    tiles = []
    relay.post_order_visit(alt["main"].body, lambda e: tiles.append(e.attrs.tile_size) if (
        isinstance(e, relay.Call) and getattr(e.op, "name", "") == WINO) else None)
    if fastest == "direct":
        assert tiles == [] and count_ops(alt["main"], DIRECT) == 2
    else:
        assert tiles == [fastest, fastest]


def test_records_of_the_direct_convolution_alone_keep_it():
    mod = _net(hw=8, c=32)  # untuned these would become Winograd
    recs = [_record(t, 1e-3) for t in _tasks(mod) if t.name == "conv2d_NCHWc.x86"]
    with autotvm.apply_history_best(recs):
        alt = _alter(mod)
    assert count_ops(alt["main"], WINO) == 0


def test_type_errors_name_the_problem():
    x = relay.var("x", shape=(1, 1, 8, 8, 16), dtype="float32")
    u = relay.var("u", shape=(4, 4, 1, 16, 16), dtype="float32")
    mod = relay.IRModule.from_expr(relay.Function([x, u], relay.nn.contrib_conv2d_winograd_nchwc(
        x, u, tile_size=4, data_layout="NCHW16c", out_layout="NCHW16c")))
    with pytest.raises(Exception, match="tile_size=4 needs a weight transformed for 6x6"):
        transform.InferType()(mod)


def test_default_winograd_error_stays_near_the_direct_convolutions():
    """F(4x4, 3x3)'s rounding error grows with its interpolation points' magnitudes: with
    points 0, +-1, +-2 a 256-channel layer on ReLU outputs was 20x the direct convolution's
    error (1e-5 of the output's max), enough for a 94-conv Inception-v3 to leave the zoo's
    1e-4 norm against onnxruntime. Points 0, +-1, 1/2, -2 keep it at a few times the direct's
    (Barabasz et al. 2020, "Error analysis and improving the accuracy of Winograd convolution").
    """
    rng = np.random.default_rng(7)
    c = 256
    x = np.maximum(rng.standard_normal((1, c, 20, 20)), 0).astype("float32")
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype("float32")
    xv = relay.var("x", shape=x.shape, dtype="float32")
    mod = relay.IRModule.from_expr(relay.Function(
        [xv], relay.nn.conv2d(xv, relay.const(w), padding=(1, 1))))
    assert count_ops(_alter(mod)["main"], WINO) == 1
    # float64 reference: the nine shifted products summed
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("oc,chw->ohw", w[:, :, i, j].astype(np.float64),
                         xp[:, i:i + 20, j:j + 20]) for i in range(3) for j in range(3))
    scale = float(np.abs(want).max())
    wino = np.abs(_build_run(mod, x)[0] - want).max() / scale
    direct = np.abs(_build_run(mod, x, {"relay.x86.winograd": False})[0] - want).max() / scale
    assert wino < 6e-6, (wino, direct)  # points 0, +-1, +-2: 1.0e-5
    assert wino < 8 * max(direct, 5e-7), (wino, direct)


@pytest.mark.parametrize("mcpu, wino", [("znver4", 2), ("sapphirerapids", 0)])
def test_default_rule_counts_fma_units_when_the_transformed_weight_streams(mcpu, wino):
    """512 -> 512 channels on a 7x7 map (4 tiles, 49 pixels; a 37.7 MB transformed weight,
    above L2): Winograd for a core with one 512-bit FMA unit (znver4's features), direct with
    two (AMX: sapphirerapids); 128 -> 128 on 7x7 (2.4 MB, above the foreign targets' 1 MiB L2
    too) the same; a 64-channel one (0.6 MB, within L2) and an 8x8 map (64 pixels) Winograd on
    both. Layout pass only: nothing is run for the named CPUs."""
    for c, hw, want in ((512, 7, wino), (128, 7, wino), (64, 7, 2), (128, 8, 2)):
        mod = transform.InferType()(_net(hw=hw, c=c, oc=c))
        with tvm.transform.PassContext(opt_level=3):
            with tvm.target.Target(f"llvm -mcpu={mcpu}"):
                got = transform.AlterOpLayout()(mod)
        assert count_ops(got["main"], WINO) == want, (c, hw, mcpu)
        assert count_ops(got["main"], DIRECT) == 2 - want


def test_direct_and_winograd_agree_on_a_7x7_map():
    """Both algorithms on ResNet's last-stage shape class (awkward 7x7 map, more channels than
    the default rule's threshold) against numpy, whichever the host's rule picks."""
    mod = _net(hw=7, c=64, oc=96, seed=5)
    x = np.random.default_rng(5).uniform(-1, 1, (1, 64, 7, 7)).astype("float32")
    ref = _build_run(mod, x, {"relay.x86.winograd": False})
    for config in ({"relay.x86.winograd": 4}, {}):
        # F(4x4)'s error: ~1e-5 of the output's magnitude (here up to ~50)
        np.testing.assert_allclose(_build_run(mod, x, config), ref, rtol=1e-4,
                                   atol=2e-5 * float(np.abs(ref).max()))
