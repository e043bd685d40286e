"""The cost model's state features (feature.py, feature_access.py): one fixed length whatever
the DAG, finite; the per buffer access quantities are what the loop nest does (checked on
hand-made matmul schedules against counts done by hand); states that differ in vectorization,
tiling or parallelism get different vectors, renaming tensors or replaying again does not; the
per-DAG analysis of the compute is done once, not per state."""

from __future__ import annotations

import numpy as np
import pytest
from as_workloads import (
    conv2d_bias_relu,
    conv2d_transpose,
    depthwise_conv,
    elementwise,
    layer_norm,
    make_task,
    matmul,
    matmul_relu,
    pool_mean,
    softmax,
)

from tvmpy import auto_scheduler, te
from tvmpy.auto_scheduler import feature_access
from tvmpy.auto_scheduler.feature import (
    FEATURE_NAMES,
    N_FEATURES,
    OLD_FEATURES,
    get_per_state_features,
    state_features,
)
from tvmpy.auto_scheduler.loop_state import State

COL = {n: i for i, n in enumerate(FEATURE_NAMES)}


def f(state, name):
    return state_features(state)[COL[name]]


@pytest.mark.parametrize("func,args", [
    (matmul, (13, 7, 5)), (matmul_relu, (16, 9, 8)), (softmax, (6, 10)),
    (conv2d_bias_relu, (1, 7, 7, 8, 3, 3, 3, 1, 1)), (depthwise_conv, (1, 5, 9, 9, 3, 1)),
    (conv2d_transpose, (1, 3, 5, 5, 4, 3, 2)), (layer_norm, (5, 17)), (pool_mean, (1, 2, 5, 5, 8)),
    (elementwise, (1, 1))])
def test_fixed_length_finite_for_any_dag(func, args):
    task = make_task(func, args)
    pop = auto_scheduler.sample_initial_population(task, 6, seed=0)
    states = [task.compute_dag.init_state(), *pop]
    x = get_per_state_features(states)
    assert x.shape == (len(states), N_FEATURES) == (len(states), len(FEATURE_NAMES))
    assert np.isfinite(x).all()


def test_the_old_columns_are_the_loop_structure_features():
    task = make_task(conv2d_bias_relu, (1, 9, 9, 8, 4, 3, 3, 1, 1))
    for s in auto_scheduler.sample_initial_population(task, 6, seed=3):
        np.testing.assert_array_equal(state_features(s)[OLD_FEATURES], state_features(s, access=False))


def _mm(n=64, m=48, k=32):
    task = make_task(matmul, (n, m, k))
    return task, task.compute_dag.init_state()


def test_access_counts_of_the_plain_loop_nest():
    # C[i, j] += A[i, k] * B[k, j], loops i(64) j(48) k(32), float32, no schedule
    _, s = _mm()
    assert f(s, "main.log_flops") == pytest.approx(np.log2(2 * 64 * 48 * 32))
    # the three reads/writes in the order of the cache lines they touch: A 64x32 (8 KiB),
    # B 32x48 (6 KiB); each read once per inner-loop iteration
    assert f(s, "main.read0.log_unique_bytes") == pytest.approx(np.log2(64 * 32 * 4))
    assert f(s, "main.read0.log_lines") == pytest.approx(np.log2(64 * 2))  # 128 B rows
    assert f(s, "main.read1.log_unique_bytes") == pytest.approx(np.log2(32 * 48 * 4))
    assert f(s, "main.read0.log_bytes") == pytest.approx(np.log2(64 * 48 * 32 * 4))
    # A[i, k] does not depend on j: reused 48 times, 32 iterations (of k) apart
    assert f(s, "main.read0.has_loop_reuse") == 1
    assert f(s, "main.read0.log_reuse_ct") == pytest.approx(np.log2(48))
    assert f(s, "main.read0.log_reuse_dis_iter") == pytest.approx(np.log2(32))
    # B[k, j] does not depend on i: reused 64 times, across the j and k loops
    assert f(s, "main.read1.log_reuse_ct") == pytest.approx(np.log2(64))
    # the innermost loop k walks A with stride 1 and B with stride 48
    assert f(s, "main.read0.log_stride") == pytest.approx(np.log2(2))
    assert f(s, "main.read1.log_stride") == pytest.approx(np.log2(49))
    # the write C[i, j] is reused across k (the accumulation)
    assert f(s, "main.write0.log_reuse_ct") == pytest.approx(np.log2(32))
    assert f(s, "main.write0.log_unique_bytes") == pytest.approx(np.log2(64 * 48 * 4))


def test_vector_contiguity_of_each_access():
    task, s = _mm()
    jo, ji = s.split(2, 1, [16])
    s.reorder(2, [0, jo, 3, ji])  # i, j.outer, k, j.inner
    s.vectorize(2, ji)
    assert f(s, "main.log_vec_lanes_total") == pytest.approx(4)
    # along j: B[k, j] and C[i, j] contiguous, A[i, k] broadcast
    assert f(s, "main.frac_reads_vec_contig") == pytest.approx(0.5)
    assert f(s, "main.write0.vec_contiguous") == 1
    t = task.compute_dag.init_state()
    io, ii = t.split(2, 0, [16])
    t.reorder(2, [io, 2, 3, ii])  # i.outer, j, k, i.inner
    t.vectorize(2, ii)
    # along i: A[i, k] and C[i, j] strided, B broadcast
    assert f(t, "main.frac_reads_vec_contig") == 0
    assert f(t, "main.write0.vec_strided") == 1 and f(t, "main.write0.vec_contiguous") == 0
    assert f(t, "main.log_vec_lanes_total") == pytest.approx(4)


def test_register_tile_footprint_and_reuse_distance():
    task, s = _mm()
    io, ii = s.split(2, 0, [4])
    jo, ji = s.split(2, 2, [16])
    s.reorder(2, [io, jo, 4, ii, ji])  # i.o j.o k i.i j.i: a 4x16 tile of C per k step
    # inside k: 4 rows of A (one element each), a 16-wide row of B, the 4x16 tile of C
    inner2 = 4 * 16 * 4 + 16 * 4 + 4 * 4
    assert f(s, "main.log_inner2_bytes_all") == pytest.approx(np.log2(inner2))
    assert f(s, "main.write0.log_unique_bytes") == pytest.approx(np.log2(64 * 48 * 4))
    # C's tile is reused across k: 32 times, 64 iterations apart
    assert f(s, "main.write0.log_reuse_ct") == pytest.approx(np.log2(32))
    assert f(s, "main.write0.log_reuse_dis_iter") == pytest.approx(np.log2(64))


def test_cache_write_stage_is_bounded_by_its_attach_point():
    # C.local computed at C's tile loop: its loops, after bound inference, cover one tile
    task, s = _mm()
    s.cache_write(2, "local")  # stage 2: C.local, stage 3: C
    io, ii = s.split(3, 0, [8])
    jo, ji = s.split(3, 2, [16])
    s.reorder(3, [io, jo, ii, ji])
    s.compute_at(2, 3, jo)
    assert f(s, "main.log_alloc_bytes") == pytest.approx(np.log2(8 * 16 * 4))
    assert f(s, "main.log_flops") == pytest.approx(np.log2(2 * 64 * 48 * 32))
    assert f(s, "main.log_recompute") == pytest.approx(np.log2(8 * 3))


def test_states_that_differ_in_annotations_or_tiles_differ():
    task = make_task(conv2d_bias_relu, (1, 9, 9, 8, 4, 3, 3, 1, 1))
    pop = auto_scheduler.sample_initial_population(task, 24, seed=0)
    x = get_per_state_features(pop)
    keys = {repr([st.to_record() for st in s.transform_steps]) for s in pop}
    assert len({tuple(r) for r in x}) == len(keys)
    # one loop more or less in the parallel loop, a tile size moved: the access part changes
    import random

    from tvmpy.auto_scheduler import evolution as evo

    rng = random.Random(0)
    acc_cols = np.setdiff1d(np.arange(N_FEATURES), OLD_FEATURES)
    changed = {"tile": 0, "parallel": 0}
    for s in pop:
        for name, rule in (("tile", evo.mutate_tile_size), ("parallel", evo.mutate_parallel)):
            m = rule(s, rng, task.hardware_params)
            if m is not None and evo.state_key(m) != evo.state_key(s):
                a, b = state_features(s), state_features(m)
                changed[name] += int(not np.array_equal(a[acc_cols], b[acc_cols]))
    assert changed["tile"] >= 10 and changed["parallel"] >= 1


def test_invariant_to_names_replay_and_evaluation_order():
    def named(prefix):
        A = te.placeholder((24, 16), name=prefix + "A")
        B = te.placeholder((16, 20), name=prefix + "B")
        k = te.reduce_axis((0, 16), name=prefix + "k")
        C = te.compute((24, 20), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=prefix + "C")
        return auto_scheduler.ComputeDAG([A, B, C])

    d1, d2 = named("x"), named("other_")
    pop = auto_scheduler.sample_initial_population(make_task(matmul, (24, 20, 16)), 8, seed=5)
    steps = [p.transform_steps for p in pop]
    a = get_per_state_features([State(d1, st) for st in steps])
    b = get_per_state_features([State(d2, st) for st in reversed(steps)])[::-1]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, get_per_state_features([State(d1, st) for st in steps]))


def test_the_compute_is_analysed_once_per_dag(monkeypatch):
    task = make_task(conv2d_bias_relu, (1, 9, 9, 8, 4, 3, 3, 1, 1))
    pop = auto_scheduler.sample_initial_population(task, 16, seed=1)
    get_per_state_features(pop[:1])
    built = []
    real = feature_access._stack
    monkeypatch.setattr(feature_access, "_stack", lambda *a, **k: built.append(1) or real(*a, **k))
    x = get_per_state_features(pop)
    # at most a few variants (which stages are inlined) per operation, never one per state
    assert len(built) < len(pop) // 2
    feature_access._CACHE.clear()
    np.testing.assert_array_equal(x, get_per_state_features(pop))  # cold cache: same values
