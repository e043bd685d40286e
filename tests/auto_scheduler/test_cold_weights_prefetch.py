"""The measurement the search optimizes is the model's, and the space holds the defaults'
weight prefetch (issue 28 point 4):

- ``extract_tasks`` marks each relay task's weight inputs (constants at every call in the model)
  and the model's weight bytes; ``LocalRunner(cold_weights=True)`` times a candidate with those
  inputs rotated through copies (checked against the reference as always), and the default
  schedules' timing uses the same rotation;
- ``prefetch$N`` pragma steps (a record round trip, ``InjectPrefetch``'s prefetches in the lowered
  program for N > 0, none for 0, numpy's result), sampled by the annotation on the innermost
  reduction loop of tiled reductions (never on a loop of one iteration), mutated by evolution,
  and offered by two analytic variants; the cost model's features see the distance.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from as_workloads import check_state, conv2d_bias_relu, make_task, matmul

import tvmpy as tvm
from tvmpy import auto_scheduler, relay
from tvmpy.auto_scheduler import evolution as evo
from tvmpy.auto_scheduler import relay_integration
from tvmpy.auto_scheduler import transform_step as ts
from tvmpy.auto_scheduler.analytic_init import (
    PREFETCH_BYTES,
    TileChoice,
    analytic_annotations,
    analytic_states,
)
from tvmpy.auto_scheduler.feature import FEATURE_NAMES, get_per_state_features
from tvmpy.auto_scheduler.measure import ProgramMeasurer
from tvmpy.auto_scheduler.sketch_policy import generate_sketches
from tvmpy.autotvm.measure.local_runner import (
    MAX_COLD_BYTES,
    MAX_COLD_COPIES,
    _time_cold,
    cold_span,
)


def _prefetch_steps(state):
    return [s for s in state.transform_steps
            if isinstance(s, ts.PragmaStep) and s.pragma_type.startswith("prefetch$")]


def _two_convs():
    """A 17x17 (prime) input through a 3x3 conv + relu and a 1x1 conv, weights as params."""
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 5, 17, 17))
    w1 = relay.var("w1", shape=(16, 5, 3, 3))
    w2 = relay.var("w2", shape=(7, 16, 1, 1))
    y = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1)))
    y = relay.nn.conv2d(y, w2)
    f = relay.Function([x, w1, w2], y)
    params = {"w1": rng.uniform(-1, 1, (16, 5, 3, 3)).astype("float32"),
              "w2": rng.uniform(-1, 1, (7, 16, 1, 1)).astype("float32")}
    return tvm.IRModule.from_expr(f), params


def test_extract_marks_the_weight_inputs():
    mod, params = _two_convs()
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    assert tasks
    weight_elems = {v.size for v in params.values()}
    for t in tasks:
        assert t.weight_inputs, t.desc
        assert t.model_weight_bytes >= sum(v.nbytes for v in params.values())
        tensors = t.compute_dag.tensors
        for i in t.weight_inputs:
            n = int(np.prod([int(d) for d in tensors[i].shape]))
            assert n in weight_elems  # a (re-laid-out) weight, not the activation
        acts = [i for i in range(len(tensors) - 1) if i not in t.weight_inputs]
        assert acts, "the activation input is not a weight"


def test_cold_span_bounds():
    assert cold_span(0, 1 << 30) == 1
    assert cold_span(1 << 20, 0) == 1
    assert cold_span(1 << 20, 3 << 20) == 3  # the model's weight bytes between two runs
    assert cold_span(3 << 20, 7 << 20) == 3  # rounded up
    assert cold_span(1, 1 << 40) == MAX_COLD_COPIES
    assert cold_span(MAX_COLD_BYTES // 2, 1 << 40) == 2  # at most MAX_COLD_BYTES of copies


def test_time_cold_rotates_and_computes_the_same():
    task = make_task(matmul, (13, 24, 17))
    st = auto_scheduler.sample_initial_population(task, 1, seed=0)[0]
    sch, args = task.compute_dag.apply_steps_from_state(st)
    mod = tvm.build(sch, args, "llvm")
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (13, 17)).astype("float32")
    b = rng.uniform(-1, 1, (17, 24)).astype("float32")
    data = [tvm.nd.array(a), tvm.nd.array(b), tvm.nd.empty((13, 24))]
    # 5 copies of B's bytes: rotated
    got = _time_cold(mod, data, (1,), 5 * b.nbytes, number=3, repeat=2, min_repeat_ms=0)
    assert got is not None and len(got) == 2 and all(c > 0 for c in got)
    np.testing.assert_allclose(data[2].numpy(), a @ b, rtol=1e-4, atol=1e-4)
    # nothing to rotate: None (the caller times as usual)
    assert _time_cold(mod, data, (1,), b.nbytes, 3, 1, 0) is None
    assert _time_cold(mod, data, (), 1 << 30, 3, 1, 0) is None


@pytest.mark.parametrize("cold,cpu", [(True, False), (False, True), (True, True)])
def test_cold_weights_runner_measures_and_checks(cold, cpu):
    task = make_task(matmul, (11, 32, 19))
    task.weight_inputs, task.model_weight_bytes = (1,), 1 << 24
    m = ProgramMeasurer(task, builder=auto_scheduler.LocalBuilder(n_parallel=1),
                        runner=auto_scheduler.LocalRunner(number=2, repeat=2, cold_weights=cold,
                                                          cpu_time=cpu))
    try:
        states = auto_scheduler.sample_initial_population(task, 3, seed=4)
        res = m.measure(None, states)
    finally:
        m.close()
    assert [r.error_no for r in res] == [0] * len(states)
    assert all(len(r.costs) == 2 and min(r.costs) > 0 for r in res)


def test_default_schedules_timed_cold(tmp_path):
    mod, params = _two_convs()
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    log = str(tmp_path / "log.json")
    got = relay_integration.measure_default_schedules(tasks, log, number=1, repeat=1,
                                                      min_repeat_ms=0, cold_weights=True,
                                                      cpu_time=True)
    assert set(got) == set(range(len(tasks))) and all(v > 0 for v in got.values())


def test_prefetch_pragma_round_trip_lowering_and_values():
    # B[k, j] is read as vectors along j: the streamed loads InjectPrefetch prefetches
    task = make_task(matmul, (12, 64, 40))
    states = analytic_states(task, generate_sketches(task))
    with_pf = [s for s in states if any(p.pragma_type == f"prefetch${PREFETCH_BYTES}"
                                        for p in _prefetch_steps(s))]
    without = [s for s in states if all(p.pragma_type == "prefetch$0"
                                        for p in _prefetch_steps(s))]
    assert with_pf and without
    for s, want in ((with_pf[0], True), (without[0], False)):
        recs = [x.to_record() for x in s.transform_steps]
        again = [ts.step_from_record(r).to_record() for r in recs]
        assert again == recs
        sch, args = task.compute_dag.apply_steps_from_state(s)
        ir = str(tvm.lower(sch, args, simple_mode=True))
        assert ("prefetch(" in ir) == want
        check_state(task, s, seed=3)
    # a conv's analytic states (its weights read as broadcast scalars in NCHW: nothing to
    # prefetch there) still replay and compute numpy's result with the pragma
    conv = make_task(conv2d_bias_relu, (1, 9, 9, 32, 16, 3, 3, 1, 1))
    pf = [s for s in analytic_states(conv, generate_sketches(conv))
          if any(p.pragma_type != "prefetch$0" for p in _prefetch_steps(s))]
    assert pf
    check_state(conv, pf[0], seed=5)


def test_annotation_samples_prefetch_on_a_loop_that_stays():
    task = make_task(matmul, (31, 48, 37))
    pop = auto_scheduler.sample_initial_population(task, 24, seed=0)
    seen = set()
    for s in pop:
        pf = _prefetch_steps(s)
        assert len(pf) == 1
        it = s[pf[0].stage_id].iters[pf[0].iter_id]
        assert it.iter_kind == 1 and (it.extent is None or it.extent > 1)
        seen.add(pf[0].pragma_type)
    assert len(seen) > 1
    checked = [s for s in pop if _prefetch_steps(s)[0].pragma_type != "prefetch$0"][:2]
    for k, s in enumerate(checked):
        check_state(task, s, seed=k)


def test_prefetch_mutation_and_feature():
    task = make_task(matmul, (24, 32, 40))
    rng = random.Random(0)
    s = auto_scheduler.sample_initial_population(task, 1, seed=2)[0]
    m = evo.mutate_prefetch(s, rng, task.hardware_params)
    assert m is not None
    before, after = _prefetch_steps(s)[0].pragma_type, _prefetch_steps(m)[0].pragma_type
    assert before != after
    col = FEATURE_NAMES.index("main.log_prefetch")
    f = get_per_state_features([s, m])
    want = [np.log2(1 + int(p.partition("$")[2])) for p in (before, after)]
    np.testing.assert_allclose(f[:, col], want)


def test_stationary_variant_tiles_around_the_largest_operand():
    # a 4x4 map, 48 output channels: the weights (48 x 32 x 2 x 2) are the largest operand and
    # depend on the channel axis only; the stationary tile leaves that axis out of the register
    # tile (its innermost length 1) and tiles the pixels
    task = make_task(conv2d_bias_relu, (1, 4, 4, 48, 32, 2, 2, 1, 1))
    hp = task.hardware_params
    got = []
    for sk in generate_sketches(task):
        got += analytic_annotations(sk, hp, [TileChoice(16, stationary=True, prefetch=1024)])
    assert got
    for st in got[:2]:
        chans = [s for s in st.transform_steps if isinstance(s, ts.SplitStep) and s.extent == 48
                 and st.ctx.stages[s.stage_id].op.reduce_axis]
        assert chans
        for s in chans:
            assert s.lengths[-1] == 1
        check_state(task, st, seed=7)
    # a compute whose largest operand depends on every tiled axis: no stationary tile
    ew = make_task(matmul, (1, 64, 40))  # B (40 x 64) depends on j only; the i axis is 1
    none = []
    for sk in generate_sketches(ew):
        none += analytic_annotations(sk, ew.hardware_params, [TileChoice(16, stationary=True)])
    assert none == []
