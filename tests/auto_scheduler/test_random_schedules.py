"""Property: a random sketch of a random compute, randomly annotated (tile sizes that need not
divide the extents, parallel, vectorize, unroll), computes what numpy computes; so does such a
state after a chain of the evolutionary search's mutations, over more compute kinds (transposed
conv, relay's dense and batch_matmul, a max reduction)."""

from __future__ import annotations

import random

from as_workloads import (
    batch_matmul,
    check_state,
    conv2d_bias_relu,
    conv2d_transpose,
    dense_bias_tanh,
    depthwise_conv,
    depthwise_nchwc_silu,
    elementwise,
    layer_norm,
    make_task,
    matmul,
    matmul_relu,
    pool_mean,
    row_max,
    row_sum,
    softmax,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvmpy.auto_scheduler import generate_sketches
from tvmpy.auto_scheduler.evolution import mutate
from tvmpy.auto_scheduler.sketch_policy import annotate

dims = st.sampled_from([1, 2, 3, 5, 7, 8, 13, 16, 31])


@st.composite
def computes(draw):
    kind = draw(st.sampled_from(["matmul", "matmul_relu", "conv", "depthwise", "depthwise_nchwc",
                                 "elementwise",
                                 "row_sum", "pool_mean", "softmax", "layer_norm"]))
    if kind in ("matmul", "matmul_relu"):
        f = matmul if kind == "matmul" else matmul_relu
        return f, (draw(dims), draw(dims), draw(dims))
    if kind == "conv":
        k = draw(st.sampled_from([1, 3]))
        return conv2d_bias_relu, (draw(st.sampled_from([1, 2])), draw(st.integers(k, 9)),
                                  draw(st.integers(k, 9)), draw(dims), draw(st.sampled_from([1, 3, 4])),
                                  k, k, draw(st.sampled_from([1, 2])), draw(st.sampled_from([0, 1])))
    if kind == "depthwise":
        k = draw(st.sampled_from([1, 3]))
        return depthwise_conv, (1, draw(dims), draw(st.integers(k, 9)), draw(st.integers(k, 9)),
                                k, draw(st.sampled_from([0, 1])))
    if kind == "depthwise_nchwc":  # blocked layout, stride, bias + SiLU epilogue
        k = draw(st.sampled_from([1, 3, 5]))
        return depthwise_nchwc_silu, (1, draw(st.sampled_from([1, 2, 3])), draw(st.integers(k, 9)),
                                      draw(st.integers(k, 9)), k, draw(st.sampled_from([1, 2])),
                                      draw(st.sampled_from([0, k // 2])),
                                      draw(st.sampled_from([1, 3, 4, 8])))
    if kind == "row_sum":
        return row_sum, (draw(dims), draw(st.sampled_from([1, 7, 64, 257])))
    if kind == "pool_mean":
        return pool_mean, (draw(st.sampled_from([1, 2])), draw(dims), draw(st.sampled_from([1, 3, 7])),
                           draw(st.sampled_from([1, 5, 7])), draw(st.sampled_from([1, 5, 8, 16])))
    f = {"elementwise": elementwise, "softmax": softmax, "layer_norm": layer_norm}[kind]
    return f, (draw(dims), draw(dims))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(computes(), st.integers(0, 63), st.integers(0, 2 ** 20))
def test_random_sketch_and_annotation_match_numpy(compute, pick, seed):
    func, args = compute
    task = make_task(func, args)
    sketches = generate_sketches(task)
    state = annotate(sketches[pick % len(sketches)], random.Random(seed), task.hardware_params)
    check_state(task, state, seed=seed)


@st.composite
def more_computes(draw):
    kind = draw(st.sampled_from(["conv_transpose", "dense", "batch_matmul", "row_max", "any"]))
    if kind == "conv_transpose":
        k = draw(st.sampled_from([1, 2, 3, 4]))
        return conv2d_transpose, (1, draw(dims), draw(st.integers(1, 6)), draw(st.integers(1, 6)),
                                  draw(dims), k, draw(st.sampled_from([1, 2, 3])))
    if kind == "dense":
        return dense_bias_tanh, (draw(dims), draw(dims), draw(dims))
    if kind == "batch_matmul":
        return batch_matmul, (draw(st.sampled_from([1, 2, 3])), draw(dims), draw(dims), draw(dims))
    if kind == "row_max":
        return row_max, (draw(dims), draw(st.sampled_from([1, 7, 64, 257])))
    return draw(computes())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(more_computes(), st.integers(0, 63), st.integers(0, 2 ** 20), st.integers(0, 3))
def test_random_states_and_their_mutants_match_numpy(compute, pick, seed, n_mutations):
    func, args = compute
    task = make_task(func, args)
    sketches = generate_sketches(task)
    rng = random.Random(seed)
    state = annotate(sketches[pick % len(sketches)], rng, task.hardware_params)
    for _ in range(n_mutations):
        state = mutate(state, rng, task.hardware_params) or state
    check_state(task, state, seed=seed)
