"""Cross-thread reductions with no spatial axis bound (TVM's documented idiom: split or rfactor
the reduction, bind its inner part to threadIdx.x, ``set_store_predicate(tx.var.equal(0))``,
nothing on blockIdx): one block, whose thread 0 stores the allreduce's result. Run on OpenCL
(PoCL) and CUDA (NVRTC source, host-emulated launch) against numpy, with prime lengths, length
1 and non-divisible splits."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.runtime import cuda_module
from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

RNG = np.random.default_rng(26)


def full_sum(n: int, form: str, predicate: bool, scalar: bool):
    """sum(A) into a 0-d tensor (``scalar``) or a (1, 1) one, the reduction on threadIdx.x:
    ``direct`` binds it whole; ``split`` binds the inner part of a factor-16 split (each thread
    a serial share); ``rfactor`` / ``rfactor_global`` factor out the inner part, computed at
    the thread (local) or as its own stage (global)."""
    if scalar:
        A = te.placeholder((n,), name="A")
        k = te.reduce_axis((0, n), name="k")
        B = te.compute((), lambda: te.sum(A[k], axis=k), name="B")
    else:
        A = te.placeholder((1, n), name="A")
        k = te.reduce_axis((0, n), name="k")
        B = te.compute((1, 1), lambda i, j: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    tx = te.thread_axis("threadIdx.x")
    if form == "direct":
        s[B].bind(k, tx)
    elif form == "split":
        _, ki = s[B].split(k, factor=16)
        s[B].bind(ki, tx)
    else:
        _, ki = s[B].split(k, factor=16)
        BF = s.rfactor(B, ki)
        s[B].bind(s[B].op.reduce_axis[0], tx)
        if form == "rfactor":
            s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
        else:  # B.rf of its own: one thread per partial, then the allreduce reads them
            s[BF].bind(s[BF].op.axis[0], te.thread_axis("threadIdx.x"))
    if predicate:
        s[B].set_store_predicate(tx.var.equal(0))
    return s, [A, B]


def _run(f, target, a, out_shape, tmp_path):
    out = np.full(out_shape, -7.0, "float32")
    if target == "opencl":
        dev = tvm.opencl(0)
        o = tvm.nd.array(out, dev)
        f(tvm.nd.array(a, dev), o)
        return o.numpy()
    dm = f.imported_modules[0]
    host = HostKernels(dm.get_source(), f.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        f(a, out)
    finally:
        cuda_module.set_driver(prev)
    return out


@pytest.mark.parametrize("target", ["opencl", "cuda"])
@pytest.mark.parametrize("form", ["direct", "split", "rfactor", "rfactor_global"])
@pytest.mark.parametrize("n", [1, 13, 37])
@pytest.mark.parametrize("predicate", [True, False])
def test_full_sum_over_threads_no_block(target, form, n, predicate, tmp_path):
    scalar = n == 13  # one length as a 0-d output
    s, args = full_sum(n, form, predicate, scalar)
    f = tvm.build(s, args, target=target)
    shape = (n,) if scalar else (1, n)
    a = RNG.standard_normal(shape).astype("float32")
    out = _run(f, target, a, () if scalar else (1, 1), tmp_path)
    tvm.testing.assert_allclose(out, np.sum(a, dtype="float64").reshape(out.shape), rtol=1e-5,
                                atol=1e-5)


def test_store_predicate_does_not_specialise_the_update():
    """``if tx == 0`` must not let the reads be specialised to thread 0 (A[tx] -> A[0]) before
    the allreduce is formed: the lowered update reads every thread's element."""
    s, args = full_sum(37, "direct", True, False)
    text = str(tvm.lower(s, args, simple_mode=True))
    assert "A[threadIdx.x]" in text and "A[0]" not in text
