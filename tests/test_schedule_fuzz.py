"""Property test of the whole operator-level compiler: random legal schedules on random
computations must compute what numpy computes.

A workload builds its tensors and a numpy reference; `apply_random_schedule` draws a sequence
of primitives (cache_read/cache_write first, then split, tile, fuse, reorder, compute_at,
compute_inline, vectorize, unroll, parallel), each chosen among those legal in the current
state of the schedule. Every example is built with the LLVM or the C backend and compared to
numpy.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import tvmpy as tvm
from tvmpy import te, tir

# --------------------------------------------------------------------------------------------
# workloads: (inputs, outputs, numpy reference)


def elementwise_chain(n, m):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = te.compute((n, m), lambda i, j: te.exp(B[i, j] * 0.1) - B[i, j], name="C")
    D = te.compute((n, m), lambda i, j: te.max(C[i, j], 0.5), name="D")
    return [A], [D], lambda a: np.maximum(np.exp((a * 2 + 1) * 0.1) - (a * 2 + 1), 0.5)


def broadcast_add(n, m):
    A = te.placeholder((n, m), name="A")
    b = te.placeholder((m,), name="b")
    C = te.compute((n, m), lambda i, j: A[i, j] + b[j], name="C")
    D = te.compute((n, m), lambda i, j: C[i, j] * C[i, j], name="D")
    return [A, b], [D], lambda a, bb: (a + bb) ** 2


def row_sum(n, m):
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 3.0, name="B")
    k = te.reduce_axis((0, m), name="k")
    C = te.compute((n,), lambda i: te.sum(B[i, k], axis=k), name="C")
    return [A], [C], lambda a: (a * 3).sum(axis=1)


def row_argmax(n, m):
    """A tuple reduction (topi's (index, value) comm_reducer) over the rows of 2A."""
    from tvmpy import topi

    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    return [A], [topi.argmax(B, axis=1)], lambda a: np.argmax(a * 2, axis=1).astype("int32")


def matmul(n, m):
    kk = max(2, (n + m) // 2)
    A = te.placeholder((n, kk), name="A")
    B = te.placeholder((kk, m), name="B")
    k = te.reduce_axis((0, kk), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B], [C], lambda a, b: a @ b


def conv2d(n, m):
    cin, cout, h, w = 3, 4, n + 2, m + 2
    X = te.placeholder((1, cin, h, w), name="X")
    W = te.placeholder((cout, cin, 3, 3), name="W")
    P = te.compute((1, cin, h + 2, w + 2),
                   lambda b, c, y, x: te.if_then_else(
                       tir.all(y >= 1, y <= h, x >= 1, x <= w), X[b, c, y - 1, x - 1], 0.0),
                   name="P")
    rc = te.reduce_axis((0, cin), name="rc")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    Y = te.compute((1, cout, h, w),
                   lambda b, f, y, x: te.sum(P[b, rc, y + ry, x + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]),
                   name="Y")

    def ref(x, wt):
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, cout, h, w), np.float32)
        for dy in range(3):
            for dx in range(3):
                out += np.einsum("bchw,fc->bfhw", xp[:, :, dy:dy + h, dx:dx + w], wt[:, :, dy, dx])
        return out

    return [X, W], [Y], ref


def softmax(n, m):
    A = te.placeholder((n, m), name="A")
    k1 = te.reduce_axis((0, m), name="k1")
    M = te.compute((n,), lambda i: te.max(A[i, k1], axis=k1), name="M")
    E = te.compute((n, m), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, m), name="k2")
    S = te.compute((n,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    O = te.compute((n, m), lambda i, j: E[i, j] / S[i], name="O")

    def ref(a):
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return [A], [O], ref


def broadcast_mid(n, m):
    # a size-1 axis between two kept axes (attention biases, per-channel-per-position scales):
    # once the loops are fused and split, b's index is f // p * q + f % r
    A = te.placeholder((2, n, 3, m), name="A")
    b = te.placeholder((1, n, 1, m), name="b")
    C = te.compute((2, n, 3, m), lambda w, x, y, z: A[w, x, y, z] + b[0, x, 0, z], name="C")
    D = te.compute((2, n, 3, m), lambda w, x, y, z: te.max(C[w, x, y, z], b[0, x, 0, z]),
                   name="D")
    return [A, b], [D], lambda a, bb: np.maximum(a + bb, bb)


def transpose_add(n, m):
    # a transposed read (a gather once the output's loops are vectorized)
    A = te.placeholder((n, m), name="A")
    B = te.placeholder((m, n), name="B")
    C = te.compute((n, m), lambda i, j: A[i, j] * B[j, i], name="C")
    return [A, B], [C], lambda a, b: a * b.T


WORKLOADS = [elementwise_chain, broadcast_add, row_sum, matmul, conv2d, softmax, broadcast_mid,
             transpose_add]

# --------------------------------------------------------------------------------------------


def _compute_stages(s, outputs):
    """Non-placeholder stages of the schedule, in the schedule's order."""
    return [st_ for st_ in s.stages if isinstance(st_.op, te.ComputeOp)]


def _consumers(s, stage):
    out = []
    for other in s.stages:
        if isinstance(other.op, te.ComputeOp):
            if any(t.op is stage.op for t in other.op.input_tensors):
                out.append(other)
    return out


def apply_random_schedule(draw, s, inputs, outputs, log):
    # 1. cache stages (must come before loop transformations of the cached stage)
    if draw(st.booleans()):
        readers = [stg for stg in _compute_stages(s, outputs)
                   if any(t.op is inputs[0].op for t in stg.op.input_tensors)]
        if readers:
            reader = draw(st.sampled_from(readers))
            s.cache_read(inputs[0], "local", [reader.op])
            log.append(f"cache_read({inputs[0].op.name}, local, [{reader.op.name}])")
    if draw(st.booleans()):
        s.cache_write(outputs[0], "local")
        log.append(f"cache_write({outputs[0].op.name})")
    out_ops = {s[t].op for t in outputs}  # after cache_write, the output stage has a new op

    inlined: set = set()
    attached: set = set()
    for _ in range(draw(st.integers(0, 6))):
        stages = [stg for stg in _compute_stages(s, outputs) if stg.op not in inlined]
        stage = draw(st.sampled_from(stages))
        leaves = list(stage.leaf_iter_vars)
        spatial = [iv for iv in leaves if iv.iter_type == tir.IterVar.DataPar]
        prim = draw(st.sampled_from(["split", "tile", "fuse", "fuse_all", "reorder",
                                     "compute_at", "inline", "vectorize", "unroll", "parallel"]))
        if prim == "split" and leaves:
            iv = draw(st.sampled_from(leaves))
            f = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 16, 32]))
            if draw(st.booleans()):
                stage.split(iv, factor=f)
            else:
                stage.split(iv, nparts=f)
            log.append(f"{stage.op.name}.split({iv.var.name}, {f})")
        elif prim == "tile":
            pairs = [(a, b) for a, b in zip(leaves, leaves[1:])
                     if a.iter_type == b.iter_type == tir.IterVar.DataPar]
            if pairs:
                a, b = draw(st.sampled_from(pairs))
                fa, fb = draw(st.integers(1, 6)), draw(st.integers(1, 6))
                stage.tile(a, b, fa, fb)
                log.append(f"{stage.op.name}.tile({a.var.name}, {b.var.name}, {fa}, {fb})")
        elif prim == "fuse":
            pairs = [(a, b) for a, b in zip(leaves, leaves[1:]) if a.iter_type == b.iter_type]
            if pairs:
                a, b = draw(st.sampled_from(pairs))
                stage.fuse(a, b)
                log.append(f"{stage.op.name}.fuse({a.var.name}, {b.var.name})")
        elif prim == "fuse_all" and len(spatial) > 1 and spatial == leaves[:len(spatial)]:
            # all spatial loops in one (the x86 injective schedule starts this way)
            stage.fuse(*spatial)
            log.append(f"{stage.op.name}.fuse({', '.join(iv.var.name for iv in spatial)})")
        elif prim == "reorder" and len(leaves) > 1:
            perm = draw(st.permutations(leaves))
            stage.reorder(*perm)
            log.append(f"{stage.op.name}.reorder({', '.join(iv.var.name for iv in perm)})")
        elif prim == "compute_at" and stage.op not in out_ops and stage.op not in attached:
            consumers = [c for c in _consumers(s, stage) if c.op not in inlined]
            if len(consumers) == 1:
                target = consumers[0]
                ivs = list(target.leaf_iter_vars)
                if ivs:
                    iv = draw(st.sampled_from(ivs))
                    stage.compute_at(target, iv)
                    attached.add(stage.op)
                    log.append(f"{stage.op.name}.compute_at({target.op.name}, {iv.var.name})")
        elif prim == "inline" and stage.op not in out_ops and not stage.op.reduce_axis \
                and stage.op not in attached:
            stage.compute_inline()
            inlined.add(stage.op)
            log.append(f"{stage.op.name}.compute_inline()")
        elif prim == "vectorize" and leaves and leaves[-1].iter_type == tir.IterVar.DataPar \
                and _annotatable(stage, leaves[-1], tir.IterVar.Vectorized):
            stage.vectorize(leaves[-1])
            log.append(f"{stage.op.name}.vectorize({leaves[-1].var.name})")
        elif prim == "unroll" and leaves:
            iv = draw(st.sampled_from(leaves))
            if not _annotatable(stage, iv, tir.IterVar.Unrolled):
                continue
            stage.unroll(iv)
            log.append(f"{stage.op.name}.unroll({iv.var.name})")
        elif prim == "parallel" and spatial and leaves[0] is spatial[0] and stage.op not in attached \
                and _annotatable(stage, leaves[0], tir.IterVar.Parallelized):
            stage.parallel(leaves[0])
            log.append(f"{stage.op.name}.parallel({leaves[0].var.name})")


def _annotatable(stage, iv, kind) -> bool:
    """A loop takes one of vectorize/unroll/parallel (a second, different one is refused)."""
    a = stage.iter_var_attrs.get(iv)
    return a is None or a.kind in (tir.IterVar.DataPar, kind)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_schedules_match_numpy(data):
    workload = data.draw(st.sampled_from(WORKLOADS), label="workload")
    n = data.draw(st.sampled_from([1, 2, 5, 7, 8, 13]), label="n")
    m = data.draw(st.sampled_from([1, 3, 4, 8, 11, 16]), label="m")
    inputs, outputs, ref = workload(n, m)
    s = te.create_schedule([t.op for t in outputs])
    log: list[str] = []
    apply_random_schedule(data.draw, s, inputs, outputs, log)
    rng = np.random.default_rng(0)
    args_np = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype) for t in inputs]
    expected = ref(*args_np)
    target = data.draw(st.sampled_from(["llvm", "llvm", "c"]), label="target")
    f = tvm.build(s, inputs + outputs, target=target)
    out = tvm.nd.empty([int(d) for d in outputs[0].shape], outputs[0].dtype)
    f(*[tvm.nd.array(a) for a in args_np], out)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5,
                               err_msg=f"{target}: schedule: " + "; ".join(log))


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: w.__name__)
def test_default_schedule_of_every_workload(workload):
    inputs, outputs, ref = workload(7, 11)
    s = te.create_schedule([t.op for t in outputs])
    rng = np.random.default_rng(1)
    args_np = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype) for t in inputs]
    for target in ("llvm", "c"):
        f = tvm.build(s, inputs + outputs, target=target)
        out = tvm.nd.empty([int(d) for d in outputs[0].shape], outputs[0].dtype)
        f(*[tvm.nd.array(a) for a in args_np], out)
        np.testing.assert_allclose(out.numpy(), ref(*args_np), rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------------
# GPU: random bindings (blockIdx/threadIdx/vthread, cross-thread reductions), shared/local
# cache stages attached in the kernels, run by the interpreter's GPU semantics (threads of a
# block in turn between barriers) after the GPU lowering and the host/device split


def _bind_root(draw, stage, log):
    """Bind a stage that is its own kernel: its spatial loops fused, split over blocks and
    threads (optionally with 2 virtual threads), or a reduction across threadIdx.x."""
    leaves = list(stage.leaf_iter_vars)
    spatial = [iv for iv in leaves if iv.iter_type == tir.IterVar.DataPar]
    fused = stage.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    reduce = [iv for iv in stage.leaf_iter_vars if iv.iter_type == tir.IterVar.CommReduce]
    modes = ["threads", "threads", "vthread", "blocks"] + (["allreduce"] * 2 if reduce else [])
    mode = draw(st.sampled_from(modes))
    f = draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    name = stage.op.name
    if mode == "blocks":
        stage.bind(fused, te.thread_axis("blockIdx.x"))
    elif mode == "allreduce":
        stage.bind(fused, te.thread_axis("blockIdx.x"))
        ko, ki = stage.split(reduce[0], factor=f)
        if draw(st.booleans()):
            stage.reorder(fused, ki, ko)
        stage.bind(ki, te.thread_axis("threadIdx.x"))
    else:
        bo, bi = stage.split(fused, factor=f)
        stage.bind(bo, te.thread_axis("blockIdx.x"))
        if mode == "vthread":
            vo, vi = stage.split(bi, nparts=2)
            stage.bind(vo, te.thread_axis("vthread"))
            stage.bind(vi, te.thread_axis("threadIdx.x"))
        else:
            stage.bind(bi, te.thread_axis("threadIdx.x"))
    log.append(f"{name}: bind {mode} factor {f}")


def apply_random_gpu_schedule(draw, s, inputs, outputs, log):
    must_attach = set()
    if draw(st.booleans()):
        readers = [stg for stg in _compute_stages(s, outputs)
                   if any(t.op is inputs[0].op for t in stg.op.input_tensors)]
        if readers:
            reader = draw(st.sampled_from(readers))
            scope = draw(st.sampled_from(["shared", "local", "warp"]))
            must_attach.add(s.cache_read(inputs[0], scope, [reader.op]).op)
            log.append(f"cache_read({inputs[0].op.name}, {scope}, [{reader.op.name}])")
    if draw(st.booleans()):
        must_attach.add(s.cache_write(outputs[0], "local").op)
        log.append(f"cache_write({outputs[0].op.name}, local)")
    out_ops = {s[t].op for t in outputs}
    inlined = set()
    for stage in _compute_stages(s, outputs):
        reads_cache = any(t.op in must_attach for t in stage.op.input_tensors)
        if stage.op not in out_ops and stage.op not in must_attach and not stage.op.reduce_axis \
                and not reads_cache and draw(st.integers(0, 3)) == 0:
            stage.compute_inline()
            inlined.add(stage.op)
            log.append(f"{stage.op.name}.compute_inline()")
    for stage in reversed(_compute_stages(s, outputs)):  # consumers before producers
        if stage.op in inlined:
            continue
        consumers = [c for c in _consumers(s, stage) if c.op not in inlined]
        attach = stage.op in must_attach or (
            stage.op not in out_ops and len(consumers) == 1 and draw(st.booleans()))
        if attach and len(consumers) == 1:
            target = consumers[0]
            ivs = list(target.leaf_iter_vars)
            k = draw(st.integers(0, len(ivs) - 1))
            stage.compute_at(target, ivs[k])
            log.append(f"{stage.op.name}.compute_at({target.op.name}, {ivs[k].var.name})")
            bound = target.iter_var_attrs.get(ivs[k])
            at_block = bound is not None and bound.bind_thread is not None and \
                bound.bind_thread.thread_tag == "blockIdx.x"
            spatial = [iv for iv in stage.leaf_iter_vars if iv.iter_type == tir.IterVar.DataPar]
            if at_block and spatial and stage.op.reduce_axis == [] and draw(st.booleans()):
                # cooperative fetching: the stage's loops split over the block's threads
                fused = stage.fuse(*spatial) if len(spatial) > 1 else spatial[0]
                f = draw(st.sampled_from([2, 4, 8]))
                _, fi = stage.split(fused, factor=f)
                stage.bind(fi, te.thread_axis("threadIdx.x"))
                log.append(f"{stage.op.name}: cooperative fetch over {f} threads")
        else:
            _bind_root(draw, stage, log)


GPU_WORKLOADS = [elementwise_chain, broadcast_add, row_sum, matmul, softmax, transpose_add,
                 row_argmax]


@settings(max_examples=int(os.environ.get("GPU_FUZZ_EXAMPLES", "100")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_gpu_schedules_match_numpy(data):
    from tvmpy.driver import lower_gpu
    from tvmpy.tir import interpreter
    from tvmpy.tir.interpreter_gpu import thread_order
    from tvmpy.tir.transform.lower_warp_memory import WarpMemoryError

    workload = data.draw(st.sampled_from(GPU_WORKLOADS), label="workload")
    n = data.draw(st.sampled_from([1, 2, 5, 7]), label="n")
    m = data.draw(st.sampled_from([1, 3, 4, 8, 11]), label="m")
    inputs, outputs, ref = workload(n, m)
    s = te.create_schedule([t.op for t in outputs])
    log: list[str] = []
    apply_random_gpu_schedule(data.draw, s, inputs, outputs, log)
    rng = np.random.default_rng(0)
    args_np = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype) for t in inputs]
    expected = ref(*args_np)
    target = data.draw(st.sampled_from(["cuda", "opencl"]), label="target")
    order = data.draw(st.sampled_from(["forward", "reverse"]), label="thread order")
    try:
        mod = lower_gpu([tvm.lower(s, inputs + outputs, target=target)], target)
    except WarpMemoryError:  # warp memory whose lanes CUDA's shuffles cannot serve: refused
        assert target == "cuda" and any("warp" in x for x in log)
        reject()
    fill = np.nan if "float" in outputs[0].dtype else -7
    out = np.full([int(d) for d in outputs[0].shape], fill, outputs[0].dtype)
    with thread_order(order):
        interpreter.build(mod)["default_function"](*args_np, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5,
                               err_msg=f"{target}: schedule: " + "; ".join(log))
