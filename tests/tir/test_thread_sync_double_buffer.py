"""ThreadSync with double buffers and access pointers (issue 29: tensor-core kernels).

- the copy of a double buffer's next half (``double_buffer_write`` inside the loop) does not
  conflict with the reads of the current half in the same iteration: one barrier per
  iteration (at its end), one after the prologue's copy;
- ``tvm_access_ptr`` counts by its access mask (1 read, 2 write) and only for buffers of the
  synced scope: reads through pointers need no barrier between them, global pointers none.
"""

import numpy as np

import tvmpy as tvm
from tvmpy import te
from tvmpy.tir import expr as E
from tvmpy.tir import stmt as S
from tvmpy.tir.transform.thread_sync import _accesses


def _double_buffered(n=32, k=64, kt=8):
    a = te.placeholder((k, n), name="A")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((n,), lambda i: te.sum(a[r, i], axis=r), name="C")
    s = te.create_schedule(c.op)
    aa = s.cache_read(a, "shared", [c])
    cl = s.cache_write(c, "local")
    tx = te.thread_axis("threadIdx.x")
    s[c].bind(c.op.axis[0], tx)
    s[cl].compute_at(s[c], c.op.axis[0])
    ko, ki = s[cl].split(cl.op.reduce_axis[0], factor=kt)
    s[aa].compute_at(s[cl], ko)
    # each thread copies a row of the chunk for the others: a real cross-thread dependence
    f = s[aa].fuse(*s[aa].op.axis)
    _, fx = s[aa].split(f, factor=n)
    s[aa].bind(fx, tx)
    s[aa].double_buffer()
    return s, [a, c]


def test_double_buffer_one_barrier_per_iteration(tmp_path):
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    s, args = _double_buffered()
    mod = tvm.build(s, args, target="cuda")
    src = mod.imported_modules[0].get_source()
    body = src[src.index("__global__"):]
    loop = body[body.index("for (int32_t r_"):]
    assert loop.count("__syncthreads();") == 1 and body.count("__syncthreads();") == 2, body
    a = np.random.default_rng(3).standard_normal((64, 32)).astype("float32")
    got = np.full(32, np.nan, "float32")
    host = HostKernels(src, mod.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        mod(a, got)
    finally:
        cuda_module.set_driver(prev)
    np.testing.assert_allclose(got, a.sum(0), rtol=1e-5, atol=1e-5)


def test_access_ptr_counts_by_mask_and_scope():
    sh = E.Var("sh", "handle")
    gl = E.Var("gl", "handle")

    def ptr(data, mask):
        ann = E.Call("handle", "type_annotation", [E.const(0.0, "float32")])
        return S.Evaluate(E.Call("handle", "tvm_access_ptr",
                                 [ann, data, E.const(0, "int32"), E.const(16, "int32"),
                                  E.const(mask, "int32")]))

    scoped = {id(sh)}
    assert _accesses(ptr(sh, 1), "shared", scoped) == ({id(sh)}, set())
    assert _accesses(ptr(sh, 2), "shared", scoped) == (set(), {id(sh)})
    assert _accesses(ptr(sh, 3), "shared", scoped) == ({id(sh)}, {id(sh)})
    assert _accesses(ptr(gl, 3), "shared", scoped) == (set(), set())
    assert _accesses(ptr(gl, 1), "shared") == ({id(gl)}, set())  # no scope set: every pointer


def _staged_sum(threads):
    """C[i] = sum over r of A[r, i], A staged through shared memory per chunk of r, with
    ``threads`` threads per block (1: every threadIdx extent is 1)."""
    n, k = 12, 40
    a = te.placeholder((k, n), name="A")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((n,), lambda i: te.sum(a[r, i], axis=r), name="C")
    s = te.create_schedule(c.op)
    aa = s.cache_read(a, "shared", [c])
    cl = s.cache_write(c, "local")
    bo, bi = s[c].split(c.op.axis[0], factor=threads)
    s[c].bind(bo, te.thread_axis("blockIdx.x"))
    s[c].bind(bi, te.thread_axis("threadIdx.x"))
    s[cl].compute_at(s[c], bi)
    ko, _ = s[cl].split(cl.op.reduce_axis[0], factor=8)
    s[aa].compute_at(s[cl], ko)
    return s, [a, c]


def test_one_thread_blocks_get_no_barrier_and_stay_right():
    """A block of one thread needs no barrier (nothing to order): none is inserted, while a
    block of four threads gets them; both equal numpy on the OpenCL device (PoCL 3.1's
    work-group compiler aborted the process on a one-thread kernel with barriers in a loop)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (40, 12)).astype("float32")
    dev = tvm.opencl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    for threads, barriers in ((1, False), (4, True)):
        s, args = _staged_sum(threads)
        text = str(tvm.lower(s, args, target="opencl"))
        assert ("tvm_storage_sync" in text) == barriers, text
        f = tvm.build(s, args, target="opencl")
        out = tvm.nd.empty((12,), "float32", dev)
        f(tvm.nd.array(x, dev), out)
        np.testing.assert_allclose(out.numpy(), x.sum(0), rtol=1e-5, atol=1e-5)
