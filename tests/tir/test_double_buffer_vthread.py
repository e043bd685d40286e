"""InjectDoubleBuffer with virtual threads: a shared tile that has a virtual-thread dimension
is copied by one ``double_buffer_scope`` attribute per virtual thread after
InjectVirtualThread (as in TVM). Every copy must write the next half in the loop (and fill
half 0 before it); before the fix only the first one did, the others overwrote the half being
read in the same k step without a barrier: a silent wrong answer on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.target import Target
from tvmpy.tir import expr as E
from tvmpy.tir import stmt as S
from tvmpy.tir.functor import post_order_visit

RNG = np.random.default_rng(20261130)


def _gemm(m, n, k, vy=2, vx=2, ty=4, tx=4, ry=2, rx=2, kt=4, vc=2, db=True):
    """C = A @ B, TVM's 2x2 virtual-thread tiles; each shared copy split across a vthread."""
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    s = te.create_schedule(c.op)
    aa, bb = s.cache_read(a, "shared", [c]), s.cache_read(b, "shared", [c])
    cl = s.cache_write(c, "local")
    by, yi = s[c].split(c.op.axis[0], factor=vy * ty * ry)
    bx, xi = s[c].split(c.op.axis[1], factor=vx * tx * rx)
    vyo, yi = s[c].split(yi, nparts=vy)
    tyo, yi = s[c].split(yi, nparts=ty)
    vxo, xi = s[c].split(xi, nparts=vx)
    txo, xi = s[c].split(xi, nparts=tx)
    s[c].reorder(by, bx, vyo, vxo, tyo, txo, yi, xi)
    s[c].bind(by, te.thread_axis("blockIdx.y"))
    s[c].bind(bx, te.thread_axis("blockIdx.x"))
    s[c].bind(vyo, te.thread_axis("vthread", name="vy"))
    s[c].bind(vxo, te.thread_axis("vthread", name="vx"))
    s[c].bind(tyo, te.thread_axis("threadIdx.y"))
    s[c].bind(txo, te.thread_axis("threadIdx.x"))
    s[cl].compute_at(s[c], txo)
    ko, ki = s[cl].split(cl.op.reduce_axis[0], factor=kt)
    s[cl].reorder(ko, ki, *cl.op.axis)
    for t in (aa, bb):
        s[t].compute_at(s[cl], ko)
        f = s[t].fuse(*s[t].op.axis)
        fo, f1 = s[t].split(f, factor=tx)
        fo, f2 = s[t].split(fo, factor=ty)
        s[t].bind(f1, te.thread_axis("threadIdx.x"))
        s[t].bind(f2, te.thread_axis("threadIdx.y"))
        if vc > 1:  # the cooperative copy itself split across a virtual thread
            _, fv = s[t].split(fo, factor=vc)
            s[t].bind(fv, te.thread_axis("vthread", name="vc"))
        if db:
            s[t].double_buffer()
    return s, [a, b, c]


def _shared_stores_in_loop(func):
    """(stores to a shared buffer inside the k loop, those inside a double_buffer_write)."""
    loops = []
    post_order_visit(func.body, lambda x: loops.append(x) if isinstance(x, S.For)
                     and x.loop_var.name.startswith("r") and ".outer" in x.loop_var.name
                     else None)
    (loop,) = loops
    total, guarded = [], []

    def walk(st, inside):
        if isinstance(st, S.BufferStore) and (st.buffer.scope or "").startswith("shared"):
            total.append(st)
            if inside:
                guarded.append(st)
        if isinstance(st, S.AttrStmt) and st.attr_key == "double_buffer_write":
            inside = True
        for child in (getattr(st, "seq", None) or [getattr(st, "body", None),
                                                    getattr(st, "then_case", None),
                                                    getattr(st, "else_case", None)]):
            if isinstance(child, S.Stmt):
                walk(child, inside)

    walk(loop.body, False)
    syncs = []
    post_order_visit(loop.body, lambda x: syncs.append(x) if isinstance(x, E.Call)
                     and x.op.endswith("tvm_storage_sync") else None)
    return total, guarded, len(syncs)


@pytest.mark.parametrize("vc", [1, 2])
def test_every_vthread_copy_is_double_buffered(vc):
    s, args = _gemm(64, 48, 40, vc=vc)
    func = tvm.lower(s, args, target=Target("cuda"))
    total, guarded, syncs = _shared_stores_in_loop(func)
    # A and B: 2x2 / 2 virtual threads' parts of each tile, each writes the next half only
    # (before the fix: half of them wrote the current half, then a second barrier per k step)
    assert len(total) >= 4 and len(guarded) == len(total)
    assert syncs == 1  # one barrier per k step, at its end


def _run_emulated(s, args, inputs, tmp_path):
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    mod = tvm.build(s, args, target="cuda")
    src = mod.imported_modules[0].get_source()
    out = np.full(tuple(int(d) for d in args[-1].shape), np.nan, "float32")
    host = HostKernels(src, mod.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        mod(*inputs, out)
    finally:
        cuda_module.set_driver(prev)
    return src, out


@pytest.mark.parametrize("m,n,k,vc", [(64, 48, 40, 2), (32, 32, 8, 2), (64, 32, 24, 1),
                                      (37, 29, 13, 2)])
def test_gemm_vthread_double_buffer_host_emulated(m, n, k, vc, tmp_path):
    """Generated CUDA C on the host emulation (threads of a block as OS threads, barriers
    honoured) against numpy; the prime shape has bound checks (single-buffered then)."""
    s, args = _gemm(m, n, k, vc=vc)
    a = RNG.uniform(-1, 1, (m, k)).astype("float32")
    b = RNG.uniform(-1, 1, (k, n)).astype("float32")
    src, got = _run_emulated(s, args, [a, b], tmp_path)
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,n,k,vc", [(64, 48, 40, 2), (64, 32, 24, 1), (37, 29, 13, 2)])
def test_gemm_vthread_double_buffer_opencl(m, n, k, vc):
    dev = tvm.opencl(0)
    if not dev.exist:
        pytest.skip("no OpenCL device")
    s, args = _gemm(m, n, k, vc=vc)
    f = tvm.build(s, args, target="opencl")
    a = RNG.uniform(-1, 1, (m, k)).astype("float32")
    b = RNG.uniform(-1, 1, (k, n)).astype("float32")
    out = tvm.nd.empty((m, n), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)
