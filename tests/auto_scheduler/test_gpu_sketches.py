"""Ansor's GPU sketch rules (sketch_rules_gpu.py): sketches and random annotations of matmul,
conv2d + bias + relu, depthwise convolution, softmax, layer norm and a small-spatial reduction
(cross-thread), built for opencl and run on PoCL's OpenCL device against numpy; the CUDA C of
the same states compiled by NVRTC; the target's limits kept; a random search on opencl whose
records replay."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from as_workloads import (
    conv2d_bias_relu,
    conv2d_transpose,
    depthwise_conv,
    elementwise,
    layer_norm,
    matmul,
    matmul_relu,
    reference,
    row_sum,
    softmax,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvmpy as tvm
from tvmpy import auto_scheduler
from tvmpy.auto_scheduler import generate_sketches, sample_initial_population
from tvmpy.auto_scheduler.loop_state import State
from tvmpy.auto_scheduler.sketch_policy import policy_for_target
from tvmpy.auto_scheduler.sketch_rules_gpu import (
    GPUParams,
    annotate_gpu,
    reference_state,
    shared_memory_bytes,
)
from tvmpy.auto_scheduler.transform_step import AnnotationStep, step_from_record


def _opencl():
    """PoCL's OpenCL device: installed wherever the suite runs (README), so its absence fails."""
    dev = tvm.cl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return dev


def _task(func, args, target="opencl"):
    return auto_scheduler.SearchTask(func=func, args=args, target=target)


def _codes(state):
    return [s.to_record() for s in state.transform_steps]


def check_gpu_state(task, state, seed=0, rtol=1e-4):
    """Build ``state`` for opencl, run it on PoCL with random inputs, compare with numpy."""
    sch, args = task.compute_dag.apply_steps_from_state(state)
    f = tvm.build(sch, args, task.target)  # the build refuses a kernel beyond the target's limits
    dev = _opencl()
    rng = np.random.default_rng(seed)
    ins = [rng.uniform(-1, 1, size=[int(d) for d in t.shape]).astype("float32") for t in args[:-1]]
    out = tvm.nd.array(np.full([int(d) for d in args[-1].shape], np.nan, "float32"), dev)
    f(*[tvm.nd.array(x, dev) for x in ins], out)
    ref = reference(task, [x.astype("float64") for x in ins])
    np.testing.assert_allclose(out.numpy(), ref, rtol=rtol, atol=rtol)
    return f


def _thread_extents(task, state):
    sch, args = task.compute_dag.apply_steps_from_state(state)
    text = str(tvm.lower(sch, args, simple_mode=True))
    out: dict[str, int] = {}
    for tag, ext in re.findall(r"'(threadIdx\.\w|blockIdx\.\w)'\), 'thread_extent', (\d+)", text):
        out[tag] = max(out.get(tag, 0), int(ext))
    return out


CASES = {
    "matmul": (matmul, (32, 48, 64)),
    "matmul_relu": (matmul_relu, (13, 7, 31)),
    "conv2d_bias_relu": (conv2d_bias_relu, (1, 9, 9, 8, 4, 3, 3, 1, 1)),
    "depthwise_conv": (depthwise_conv, (1, 8, 9, 9, 3, 1)),
    "softmax": (softmax, (5, 33)),
    "layer_norm": (layer_norm, (6, 40)),
    "row_sum": (row_sum, (3, 257)),
}


def test_rules_are_chosen_by_target_kind():
    gpu = policy_for_target(tvm.target.Target("opencl"))
    assert policy_for_target(tvm.target.Target("cuda")) is gpu
    assert policy_for_target(tvm.target.Target("llvm")).SKETCH_RULES[0][0] == "always_inline"
    with pytest.raises(ValueError, match="no sketch rules for target kind 'ext_dev'"):
        policy_for_target(tvm.target.Target("ext_dev"))
    assert [r[0] for r in gpu.SKETCH_RULES] == ["always_inline", "cross_thread_reduction",
                                                "add_cache_write", "multi_level_tiling_with_fusion",
                                                "skip"]
    cpu = generate_sketches(_task(matmul, (32, 48, 64), "llvm"))
    assert not any(r[0] == "CHR" for s in cpu for r in _codes(s))


@pytest.mark.parametrize("name", ["matmul", "conv2d_bias_relu", "depthwise_conv"])
def test_tiled_sketch_structure(name):
    """Cache-write into local (or the elementwise consumer fused), the consumer split in block /
    vthread / thread / inner levels, every input of the tiled stage read through shared."""
    func, args = CASES[name]
    task = _task(func, args)
    (sk,) = generate_sketches(task)
    codes = _codes(sk)
    shared = [r for r in codes if r[0] == "CHR"]
    assert shared and all(r[2] == "shared" for r in shared)
    assert len(shared) == 2  # both operands (the padding is inlined into its shared copy)
    assert ("CHW" in [r[0] for r in codes]) == (name != "conv2d_bias_relu")
    stages = {st.op_name: st for st in sk.stages}
    want = {"A.shared", "B.shared"} if name == "matmul" else {"pad.shared", "W.shared"}
    assert want <= set(stages)
    for s in want:  # at the tiled stage's outer reduction tile, fetched by the block's threads
        assert stages[s].compute_at == 2
    if name != "matmul":
        assert stages["pad"].compute_at == 1  # inlined (GPU: every injective non-output)


def test_cross_thread_reduction_sketch():
    task = _task(row_sum, (3, 257))
    (sk,) = generate_sketches(task)
    codes = _codes(sk)
    assert [r[0] for r in codes] == ["SP", "RE"] and codes[0][4] == [None]
    state = annotate_gpu(sk, random.Random(3), GPUParams.for_target(task.target))
    bound = [r for r in _codes(state) if r[0] == "AN"]
    assert [r[3] for r in bound] == [5, 6]  # rows on blockIdx.x, the reduction on threadIdx.x
    assert bound[1][2] == 1  # the thread loop outside the serial one: a single allreduce
    f = check_gpu_state(task, state)
    src = f.imported_modules[0].get_source()
    assert src.count("barrier(") >= 2 and "__local float red_buf" in src  # the tree across threads


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_annotations_match_numpy_on_opencl(name):
    func, args = CASES[name]
    task = _task(func, args)
    states = sample_initial_population(task, 3, seed=7)
    assert states
    for k, state in enumerate(states):
        assert any(r[0] == "AN" and r[3] == 6 for r in _codes(state))  # threadIdx.x bound
        check_gpu_state(task, state, seed=k)


@pytest.mark.parametrize("name", ["matmul_relu", "softmax", "conv2d_bias_relu"])
def test_reference_state_matches_numpy(name):
    """The plain schedule a GPU measurement can check candidates against."""
    func, args = CASES[name]
    task = _task(func, args)
    state = reference_state(task)
    assert not any(r[0] in ("CI", "CHR", "CHW") for r in _codes(state))
    check_gpu_state(task, state)


def test_cuda_source_compiles_with_nvrtc():
    for name in ("matmul", "conv2d_bias_relu", "softmax", "row_sum"):
        func, args = CASES[name]
        task = _task(func, args, "cuda")
        (state,) = sample_initial_population(task, 1, seed=2)
        f = tvm.build(*task.compute_dag.apply_steps_from_state(state), "cuda")
        dev_mod = f.imported_modules[0]
        assert "threadIdx.x" in dev_mod.get_source()
        assert ".entry" in dev_mod.get_source("ptx")
        if name in ("matmul", "conv2d_bias_relu"):
            assert "__shared__" in dev_mod.get_source()


@pytest.mark.parametrize("func, args", [(matmul, (64, 96, 128)), (depthwise_conv, (1, 32, 14, 14, 3, 1))])
def test_annotation_keeps_the_target_limits(func, args):
    """Threads per block and shared memory (a copy per virtual thread) within what the target
    declares: the build checks both and refuses a kernel beyond them."""
    task = _task(func, args, "opencl -max_num_threads=32 -max_shared_memory_per_block=4096")
    gp = GPUParams.for_target(task.target)
    assert (gp.max_threads_per_block, gp.max_shared_memory_per_block) == (32, 4096)
    states = sample_initial_population(task, 6, seed=11)
    for state in states:
        assert _thread_extents(task, state).get("threadIdx.x", 1) <= 32
        assert shared_memory_bytes(state) <= 4096
        tvm.build(*task.compute_dag.apply_steps_from_state(state), task.target)
    check_gpu_state(task, states[0])


def test_thread_annotation_record_round_trip_and_errors():
    step = AnnotationStep(2, 1, 6)
    assert step.to_record() == ["AN", 2, 1, 6]
    assert step_from_record(["AN", 2, 1, 6]) == step
    task = _task(matmul, (8, 8, 8))
    state = State(task.compute_dag)
    with pytest.raises(ValueError, match="unknown thread axis"):
        state.bind(2, 0, "threadIdx.w")
    with pytest.raises(ValueError, match="not an annotation"):
        state.add_step(AnnotationStep(2, 0, 12))
    state = State(task.compute_dag)
    it = state.bind(2, 0, "blockIdx.x")
    assert it.annotation == 5 and "blockIdx.x" in str(state)
    with pytest.raises(ValueError, match="no GPU limits"):
        GPUParams.for_target(tvm.target.Target("llvm"))


dims = st.sampled_from([1, 2, 3, 5, 7, 13, 16, 31])


@st.composite
def gpu_computes(draw):
    kind = draw(st.sampled_from(["matmul", "matmul_relu", "conv", "depthwise", "row_sum",
                                 "softmax", "layer_norm", "conv_transpose", "elementwise"]))
    if kind in ("matmul", "matmul_relu"):
        f = matmul if kind == "matmul" else matmul_relu
        return f, (draw(dims), draw(dims), draw(dims))
    if kind == "conv":
        k = draw(st.sampled_from([1, 3]))
        return conv2d_bias_relu, (1, draw(st.integers(k, 7)), draw(st.integers(k, 7)), draw(dims),
                                  draw(st.sampled_from([1, 3])), k, k, draw(st.sampled_from([1, 2])),
                                  draw(st.sampled_from([0, 1])))
    if kind == "depthwise":
        k = draw(st.sampled_from([1, 3]))
        return depthwise_conv, (1, draw(dims), draw(st.integers(k, 7)), draw(st.integers(k, 7)),
                                k, draw(st.sampled_from([0, 1])))
    if kind == "row_sum":
        return row_sum, (draw(dims), draw(st.sampled_from([1, 7, 64, 257])))
    if kind == "conv_transpose":
        return conv2d_transpose, (1, draw(st.sampled_from([1, 3])), draw(st.integers(1, 5)),
                                  draw(st.integers(1, 5)), draw(dims), draw(st.sampled_from([1, 3])),
                                  draw(st.sampled_from([1, 2])))
    return ({"softmax": softmax, "layer_norm": layer_norm, "elementwise": elementwise}[kind],
            (draw(dims), draw(dims)))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu_computes(), st.integers(0, 63), st.integers(0, 2 ** 20))
def test_random_gpu_sketch_and_annotation_match_numpy(compute, pick, seed):
    func, args = compute
    task = _task(func, args)
    sketches = generate_sketches(task)
    state = annotate_gpu(sketches[pick % len(sketches)], random.Random(seed),
                         GPUParams.for_target(task.target))
    check_gpu_state(task, state, seed=seed)


def test_random_search_on_opencl_records_replay(tmp_path):
    task = _task(matmul, (33, 20, 17))
    log = str(tmp_path / "gpu.json")
    search = auto_scheduler.RandomSearch(task, seed=1, verbose=0)
    search.search(auto_scheduler.TuningOptions(
        num_measure_trials=4, num_measures_per_round=2, verbose=0,
        measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    recs = [json.loads(line) for line in open(log)]
    assert len(recs) == 4
    assert sum(r["r"][1] == 0 for r in recs) >= 1, [r["r"] for r in recs]
    steps = recs[0]["i"][1][1]
    assert any(s[0] == "AN" and s[3] == 6 for s in steps) and any(s[0] == "CHR" for s in steps)
    inp, _ = auto_scheduler.load_best_record(log, task.workload_key, "opencl")
    check_gpu_state(task, inp.state)
    sch, args = task.apply_best(log)
    assert tvm.build(sch, args, "opencl") is not None
