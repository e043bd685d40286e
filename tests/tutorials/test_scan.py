"""The steps of TVM's tutorial "Scan and Recurrent Kernel" on tvmpy: a cumulative sum written
with te.scan over symbolic sizes, its init and update bound to GPU threads (CUDA C through NVRTC,
the same schedule run on PoCL's OpenCL device), built for llvm; a scan whose update has two
stages (one computed at a split loop of the other); a scan carrying two states. Every step is
checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.testing
from tvmpy import te

RNG = np.random.default_rng(2626)
SIZES = [(1, 1), (6, 300), (23, 5)]


def _data(m: int, n: int) -> np.ndarray:
    return RNG.uniform(0.1, 1.0, (m, n)).astype("float32")


def _cumsum_scan():
    rows, cols = te.var("m"), te.var("n")
    X = te.placeholder((rows, cols), name="X")
    prev = te.placeholder((rows, cols), name="prev")
    first = te.compute((1, cols), lambda _, j: X[0, j], name="first")
    step = te.compute((rows, cols), lambda t, j: prev[t - 1, j] + X[t, j], name="step")
    return X, first, step, te.scan(first, step, prev, inputs=[X])


def _check(f, args_shapes, out_shapes, ref, dev=None):
    dev = dev or tvm.cpu(0)
    ins = [_data(*s) for s in args_shapes]
    outs = [tvm.nd.array(np.zeros(s, "float32"), dev) for s in out_shapes]
    f(*[tvm.nd.array(x, dev) for x in ins], *outs)
    for got, want in zip(outs, ref(*ins)):
        tvm.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


def test_cumsum_on_cpu():
    X, _, _, res = _cumsum_scan()
    assert tuple(res.shape) == tuple(X.shape)
    s = te.create_schedule(res.op)
    f = tvm.build(s, [X, res], "llvm")
    for m, n in SIZES:
        _check(f, [(m, n)], [(m, n)], lambda x: [np.cumsum(x, axis=0)])


def _gpu_schedule(threads: int = 256):
    X, first, step, res = _cumsum_scan()
    s = te.create_schedule(res.op)
    for stage in (first, step):
        outer, inner = s[stage].split(stage.op.axis[1], factor=threads)
        s[stage].bind(outer, te.thread_axis("blockIdx.x"))
        s[stage].bind(inner, te.thread_axis("threadIdx.x"))
    return s, X, res


def test_cumsum_gpu_schedule_lowered():
    s, X, res = _gpu_schedule()
    text = str(tvm.lower(s, [X, res], simple_mode=True))
    loop = text.index("for scan.idx")
    # the init's kernel comes before the time loop, the update's inside it
    assert text.count("'blockIdx.x'), 'thread_extent'") == 2
    assert text.index("thread_extent") < loop < text.rindex("thread_extent")


def test_cumsum_cuda_codegen():
    s, X, res = _gpu_schedule()
    f = tvm.build(s, [X, res], "cuda")
    dev_mod = f.imported_modules[0]
    src = dev_mod.get_source()
    assert src.count("__global__ void __launch_bounds__(256)") == 2
    assert dev_mod.binaries["sm_80"][:4] == b"\x7fELF"  # NVRTC + ptxas accepted it


def test_cumsum_opencl_runs():
    dev = tvm.opencl(0)
    if not dev.exist:
        pytest.skip("no OpenCL device")
    s, X, res = _gpu_schedule(threads=64)
    f = tvm.build(s, [X, res], "opencl")
    for m, n in SIZES:
        _check(f, [(m, n)], [(m, n)], lambda x: [np.cumsum(x, axis=0)], dev)


def test_multi_stage_scan():
    rows, cols = te.var("m"), te.var("n")
    X = te.placeholder((rows, cols), name="X")
    prev = te.placeholder((rows, cols), name="prev")
    first = te.compute((1, cols), lambda _, j: X[0, j], name="first")
    doubled = te.compute((rows, cols), lambda t, j: prev[t - 1, j] * 2.0, name="doubled")
    step = te.compute((rows, cols), lambda t, j: doubled[t, j] + X[t, j], name="step")
    res = te.scan(first, step, prev, inputs=[X])
    s = te.create_schedule(res.op)
    outer, _ = s[step].split(step.op.axis[1], factor=32)
    s[doubled].compute_at(s[step], outer)
    text = str(tvm.lower(s, [X, res], simple_mode=True))
    assert text.index("for scan.idx") < text.index("doubled[")
    f = tvm.build(s, [X, res], "llvm")

    def ref(x):
        out = x.copy()
        for t in range(1, len(x)):
            out[t] = out[t - 1] * 2.0 + x[t]
        return [out]

    for m, n in [(1, 1), (9, 70), (4, 32)]:
        _check(f, [(m, n)], [(m, n)], ref)


def test_two_states():
    rows, c1, c2 = te.var("m"), te.var("n"), te.var("l")
    X = te.placeholder((rows, c1), name="X")
    prev1 = te.placeholder((rows, c1), name="prev1")
    prev2 = te.placeholder((rows, c2), name="prev2")
    first1 = te.compute((1, c1), lambda _, j: X[0, j], name="first1")
    first2 = te.compute((1, c2), lambda _, j: te.const(0.0, "float32"), name="first2")
    step1 = te.compute((rows, c1), lambda t, j: prev1[t - 1, j] + X[t, j], name="step1")
    step2 = te.compute((rows, c2), lambda t, j: prev2[t - 1, j] + prev1[t - 1, 0], name="step2")
    res1, res2 = te.scan([first1, first2], [step1, step2], [prev1, prev2])
    s = te.create_schedule(res1.op)
    f = tvm.build(s, [X, res1, res2], "llvm")

    def ref(x, width2):
        a = np.cumsum(x, axis=0)
        b = np.zeros((len(x), width2), "float32")
        for t in range(1, len(x)):
            b[t] = b[t - 1] + a[t - 1, 0]
        return [a, b]

    for m, n, k in [(1, 1, 1), (7, 3, 5), (12, 10, 2)]:
        _check(f, [(m, n)], [(m, n), (m, k)], lambda x, k=k: ref(x, k))
