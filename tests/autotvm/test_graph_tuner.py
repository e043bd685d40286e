"""autotvm.graph_tuner (DPTuner, PBQPTuner) and apply_graph_best, used as TVM documents them:
``DPTuner(graph, {input: shape}, records, [relay.op.get("nn.conv2d")], target)``,
``benchmark_layout_transform``, ``run``, ``write_opt_sch2record_file`` and
``autotvm.apply_graph_best(path)`` around ``relay.build``.

The kernel records are made here with chosen costs (the graph tuner reads costs, it does not
measure kernels), so the optimum is known; the layout transforms are timed for real."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.autotvm.graph_tuner import DPTuner, PBQPTuner, layout_tasks
from tvmpy.autotvm.graph_tuner.solver import solve, total_cost
from tvmpy.autotvm.measure import MeasureInput, MeasureResult
from tvmpy.contrib import graph_executor
from tvmpy.relay.build_module import optimize

CONV = [relay.op.get("nn.conv2d")]
SHAPE = (1, 3, 10, 10)


def _net(residual: bool = False):
    x = relay.var("data", shape=SHAPE)
    w1 = relay.var("w1", shape=(8, 3, 3, 3))
    w2 = relay.var("w2", shape=(8, 8, 3, 3))
    w3 = relay.var("w3", shape=(8, 1, 3, 3))
    a = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1), channels=8, kernel_size=(3, 3)))
    b = relay.nn.relu(relay.nn.conv2d(a, w2, padding=(1, 1), channels=8, kernel_size=(3, 3)))
    if residual:
        b = relay.add(a, b)
    y = relay.nn.conv2d(b, w3, padding=(1, 1), channels=8, kernel_size=(3, 3), groups=8)
    y = relay.nn.batch_flatten(y)
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
    rng = np.random.default_rng(3)
    params = {k: rng.standard_normal(v, dtype="float32") for k, v in
              {"w1": (8, 3, 3, 3), "w2": (8, 8, 3, 3), "w3": (8, 1, 3, 3)}.items()}
    return mod, params


def _records(mod, params, cost_of):
    """One record per blocking (1, 2, 4, 8) of each convolution task, cost ``cost_of(task)``."""
    tasks = autotvm.task.extract_from_program(mod["main"], target="llvm", params=params,
                                              ops=CONV)
    recs = []
    for t in tasks:
        if "winograd" in t.name:
            continue
        for v in layout_tasks(t, blocks=(1, 2, 4, 8)):
            res = MeasureResult((cost_of(v),), 0, 0.1, 1.0)
            recs.append((MeasureInput(v.target, v, v.config_space.get(0)), res))
    return recs


def _blocks(rec):
    k = rec[0].task.args[1][1]
    return (k[4], k[5]) if rec[0].task.name.startswith("conv2d") else (k[5], k[5])


def _run(mod, params, ctx, data):
    with ctx, tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("data", data)
    m.run()
    return m.get_output(0).numpy()


def _layouts(mod, params, ctx):
    with ctx, tvm.transform.PassContext(opt_level=3):
        text = str(optimize(mod, params, "llvm")["main"])
    return set(re.findall(r'out_layout="?(NCHW\d+c)', text))


def test_solver_is_exact_on_random_problems():
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(1, 6))
        sizes = [int(rng.integers(1, 4)) for _ in range(n)]
        unary = {i: rng.random(sizes[i]) for i in range(n)}
        pair = {(i, j): rng.random((sizes[i], sizes[j]))
                for i in range(n) for j in range(n) if i != j and rng.random() < 0.4}
        choice, cost = solve(sizes, unary, pair)
        brute = min(total_cost(c, unary, pair)
                    for c in itertools.product(*[range(s) for s in sizes]))
        assert cost == pytest.approx(brute) and total_cost(choice, unary, pair) == \
            pytest.approx(brute)


@pytest.mark.parametrize("tuner_cls", [DPTuner, PBQPTuner])
def test_graph_tuner_prefers_matching_layouts_and_build_uses_them(tmp_path, tuner_cls):
    mod, params = _net()
    # every kernel is a little cheaper with output block 2: the optimum is a chain in that
    # block, no transform in between (the input block of the first one is 1 or 3: it reads
    # the graph input in NCHW)
    def cost(t):
        ib, ob = _blocks((MeasureInput(t.target, t, None), None))
        return 1e-4 - (5e-6 if ob == 2 else 0.0)

    recs = _records(mod, params, cost)
    ex = tuner_cls(mod["main"], {"data": SHAPE}, recs, CONV, "llvm", max_sch_num=16)
    ex.benchmark_layout_transform(min_exec_num=3, infer_layout=True)
    ex.run()
    best = ex.get_optimal_records()
    assert len(best) == 3
    chain = [_blocks(r) for r in best]
    assert chain[0][1] == 2 and chain[1] == (2, 2) and chain[2] == (2, 2), chain
    # exact: no other choice is cheaper under the tuner's own cost model
    sizes, unary, pair = ex._problem()
    brute = min(total_cost(c, unary, pair) for c in itertools.product(*[range(s) for s in sizes]))
    assert ex.best_cost == pytest.approx(brute)

    path = tmp_path / "graph_opt.log"
    ex.write_opt_sch2record_file(str(path))
    assert len(autotvm.record.load_from_file(str(path))) == 3
    assert _layouts(mod, params, autotvm.apply_graph_best(str(path))) == {"NCHW2c"}
    assert _layouts(mod, params, autotvm.FallbackContext()) == {"NCHW8c"}  # the default policy
    data = np.random.default_rng(5).standard_normal(SHAPE, dtype="float32")
    autotvm.task.clear_fallback_cache()
    out = _run(mod, params, autotvm.apply_graph_best(str(path)), data)
    untuned = [w for _, w in autotvm.task.dispatcher.FALLBACK.fallback_workloads
               if w and "conv2d_NCHWc" in str(w[0])]
    assert untuned == [], "a chosen record was not applied"
    ref = _run(mod, params, autotvm.FallbackContext(), data)
    tvm.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_graph_tuner_pays_a_transform_when_the_kernel_saves_more(tmp_path):
    mod, params = _net(residual=True)

    def cost(t):  # the depthwise convolution is 10x faster in block 4
        ib, ob = _blocks((MeasureInput(t.target, t, None), None))
        dw = t.name.startswith("depthwise")
        return 1e-5 if dw and ob == 4 else (1e-4 if dw else 2e-5 - (1e-6 if ob == 8 else 0))

    recs = _records(mod, params, cost)
    ex = DPTuner(mod, {"data": SHAPE}, str(_write(tmp_path, recs)), CONV, "llvm")
    ex.benchmark_layout_transform(min_exec_num=3, infer_layout=True)
    ex.run()
    chain = [_blocks(r) for r in ex.get_optimal_records()]
    assert chain[2] == (4, 4), chain
    path = tmp_path / "opt.log"
    ex.write_opt_sch2record_file(str(path))
    data = np.random.default_rng(6).standard_normal(SHAPE, dtype="float32")
    out = _run(mod, params, autotvm.apply_graph_best(str(path)), data)
    ref = _run(mod, params, autotvm.FallbackContext(), data)
    tvm.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def _write(tmp_path, recs):
    p = tmp_path / "kernels.log"
    autotvm.record.save_to_file(recs, str(p), mode="w")
    return p


def test_graph_tuner_errors():
    mod, params = _net()
    with pytest.raises(ValueError, match="nn.conv2d"):
        DPTuner(mod, {"data": SHAPE}, [], [relay.op.get("nn.dense")], "llvm")
    with pytest.raises(ValueError, match="input 'x'"):
        DPTuner(mod, {"x": SHAPE}, [], CONV, "llvm")
    with pytest.raises(RuntimeError, match="no nn.conv2d .* tuning record"):
        DPTuner(mod, {"data": SHAPE}, [], CONV, "llvm")
    ex = DPTuner(mod, {"data": SHAPE}, _records(mod, params, lambda t: 1e-5), CONV, "llvm")
    with pytest.raises(RuntimeError, match="run"):
        ex.get_optimal_records()


def test_graph_tuner_is_reachable_as_autotvm_attribute():
    assert autotvm.graph_tuner.DPTuner is DPTuner


def test_apply_history_best_takes_the_fastest_blocking():
    """TVM's apply_history_best takes the layout of the best config (its tile_ic/tile_oc);
    here: of the fastest of the tuned blockings of each convolution."""
    mod, params = _net()

    def cost(t):
        ib, ob = _blocks((MeasureInput(t.target, t, None), None))
        return 1e-5 if ob == 4 else 2e-5

    recs = _records(mod, params, cost)
    ctx = autotvm.apply_history_best(recs)
    assert _layouts(mod, params, ctx) == {"NCHW4c"}
    data = np.random.default_rng(7).standard_normal(SHAPE, dtype="float32")
    out = _run(mod, params, autotvm.apply_history_best(recs), data)
    ref = _run(mod, params, autotvm.FallbackContext(), data)
    tvm.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    # one blocking per convolution (a log of extracted tasks only): the policy's layout stays
    from tvmpy.autotvm.task.conv_layout import conv_record_layout

    one = list({conv_record_layout(r[0].task.workload)[0]: r for r in recs
                if _blocks(r)[1] == 4}.values())
    assert len(one) == 3
    assert _layouts(mod, params, autotvm.apply_history_best(one)) == {"NCHW8c"}


@pytest.mark.parametrize("middle,carried", [
    ("batch_norm", True),   # folded into multiply/add before AlterOpLayout: layout carried
    ("relu", True),
    ("softmax", False),     # no layout rule: AlterOpLayout goes back to NCHW, so must the tuner
    ("prelu", None),        # whatever its rule says AlterOpLayout does
])
def test_graph_tuner_edges_follow_the_layout_rules(middle, carried):
    """The tuner's model of which ops carry a blocked layout between two convolutions is the
    op's layout rule (the one AlterOpLayout applies), not a list of its own."""
    x = relay.var("data", shape=SHAPE)
    w1 = relay.var("w1", shape=(8, 3, 3, 3))
    w2 = relay.var("w2", shape=(8, 8, 3, 3))
    a = relay.nn.conv2d(x, w1, padding=(1, 1), channels=8, kernel_size=(3, 3))
    if middle == "batch_norm":
        g, b, m, v = (relay.var(n, shape=(8,)) for n in ("g", "b", "m", "v"))
        a = relay.nn.batch_norm(a, g, b, m, v)[0]
    elif middle == "relu":
        a = relay.nn.relu(a)
    elif middle == "prelu":
        a = relay.nn.prelu(a, relay.var("alpha", shape=(8,)))
    else:
        a = relay.nn.softmax(a, axis=1)
    y = relay.nn.conv2d(a, w2, padding=(1, 1), channels=8, kernel_size=(3, 3))
    mod = tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
    rng = np.random.default_rng(5)
    params = {"w1": rng.standard_normal((8, 3, 3, 3), dtype="float32"),
              "w2": rng.standard_normal((8, 8, 3, 3), dtype="float32")}
    ex = DPTuner(mod, {"data": SHAPE}, _records(mod, params, lambda t: 1e-5), CONV, "llvm")
    assert len(ex._nodes) == 2
    if carried is None:  # the build's own answer: is a transform back to NCHW before conv 2?
        with tvm.transform.PassContext(opt_level=3):
            text = str(optimize(mod, params, "llvm")["main"])
        carried = text.count("layout_transform") <= 2  # only into conv 1 and out of conv 2
    assert ((0, 1) in ex._edges) == carried
