"""GPU lowering (issue 14, point 1) checked against numpy with the interpreter's GPU semantics
(threads of a block run in a fixed order, switching at barriers; shared memory per block), so
that no GPU code generator is involved."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.driver import lower_gpu
from tvmpy.testing.gpu_schedules import row_reduce
from tvmpy.tir import expr as E
from tvmpy.tir import interpreter
from tvmpy.tir import stmt as S
from tvmpy.tir.analysis import verify_gpu_code
from tvmpy.tir.functor import post_order_visit
from tvmpy.tir.transform import split_host_device
from tvmpy.tir.transform.split_host_device import LAUNCH_OP, kernel_launches

RNG = np.random.default_rng(14)


def gpu_module(s, args, target="cuda", **ctx):
    with tvm.transform.PassContext(**ctx):
        f = tvm.lower(s, args, target=target)
    return lower_gpu([f], target)


def run(s, args, arrays, target="cuda", **ctx):
    mod = gpu_module(s, args, target, **ctx)
    interpreter.build(mod)["default_function"](*arrays)
    return mod


def nodes(node, pred):
    out = []
    post_order_visit(getattr(node, "body", node) if isinstance(node, tvm.tir.PrimFunc) else node,
                     lambda n: out.append(n) if pred(n) else None)
    return out


def syncs(func):
    return nodes(func, lambda n: isinstance(n, E.Call) and n.op == "tir.tvm_storage_sync")


def kernels(mod):
    return [f for f in mod.functions.values() if f.attrs.get("calling_conv") == "device_kernel"]


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


# ---------------------------------------------------------------------------------------------
def test_vector_add_symbolic_non_dividing():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=64)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    mod = gpu_module(s, [A, B, C])
    host = mod["default_function"]
    (k,) = kernels(mod)
    assert k.attrs["calling_conv"] == "device_kernel" and str(k.attrs["target"]) == "cuda"
    assert str(host.attrs["target"]) == "llvm"
    (launch,) = kernel_launches(host)
    assert launch.args[0].value == k.name == "default_function_kernel0"
    assert "n" in str(launch.args[1])  # grid x: (n + 63) // 64
    assert [a.value for a in launch.args[4:8]] == [64, 1, 1, 0]
    assert [p.name for p in k.params] == ["A", "B", "C", "n"]  # handles, then scalars
    assert nodes(k, lambda x: isinstance(x, E.Call) and x.op == "likely")  # the guard
    m = interpreter.build(mod)
    for size in (1, 100, 128):
        a, b, c = rand(size), rand(size), np.full(size, np.nan, "float32")
        m["default_function"](a, b, c)
        np.testing.assert_allclose(c, a + b, rtol=1e-6)


def _gemm(N, M, K, tile=8, ktile=4, vthread=False):
    A = te.placeholder((N, K), name="A")
    B = te.placeholder((K, M), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    bi, ii = s[C].split(i, factor=tile)
    bj, jj = s[C].split(j, factor=tile)
    if vthread:  # the paper's Figure 6: 2 virtual threads interleaved
        vi, ti = s[C].split(ii, nparts=2)
        s[C].reorder(bi, bj, vi, ti, jj)
        s[C].bind(vi, te.thread_axis("vthread", name="vy"))
    else:
        ti = ii
        s[C].reorder(bi, bj, ti, jj)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(ti, te.thread_axis("threadIdx.y"))
    s[C].bind(jj, te.thread_axis("threadIdx.x"))
    s[CL].compute_at(s[C], jj)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=ktile)
    s[AA].compute_at(s[CL], ko)
    s[BB].compute_at(s[CL], ko)
    ty_n = tile // 2 if vthread else tile
    for st in (AA, BB):  # cooperative fetching: the fetch loop split over the block's threads
        fused = s[st].fuse(*s[st].op.axis)
        fo, fi = s[st].split(fused, factor=tile)
        fy, fo2 = s[st].split(fo, nparts=ty_n)
        s[st].bind(fi, te.thread_axis("threadIdx.x"))
        s[st].bind(fy, te.thread_axis("threadIdx.y"))
    return s, A, B, C


@pytest.mark.parametrize("shape", [(16, 16, 16), (13, 10, 7)])
def test_gemm_shared_local_cooperative_fetch(shape):
    N, M, K = shape
    s, A, B, C = _gemm(N, M, K)
    a, b, c = rand(N, K), rand(K, M), np.full((N, M), np.nan, "float32")
    mod = run(s, [A, B, C], [a, b, c])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
    (k,) = kernels(mod)
    scopes = {a.buffer.name: a.buffer.scope for a in nodes(k, lambda n: isinstance(n, S.Allocate))}
    assert scopes == {"A.shared": "shared", "B.shared": "shared", "C.local": "local"}
    # shared at the kernel's top (one per block), after the thread attributes
    body = k.body
    tags = []
    while isinstance(body, S.AttrStmt):
        tags.append(body.node.thread_tag)
        body = body.body
    assert sorted(tags) == ["blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"]
    assert isinstance(body, S.Allocate) and body.buffer.scope == "shared"
    # one thread_extent per tag in the kernel
    assert len(nodes(k, lambda n: isinstance(n, S.AttrStmt) and n.attr_key == "thread_extent")) \
        == 4
    # the double sync of a tiled GEMM's k loop: after the fetch, and at the end of the body
    (ko,) = [lp for lp in nodes(k, lambda n: isinstance(n, S.For)) if syncs(lp)]
    seq = ko.body.seq
    is_sync = [isinstance(x, S.Evaluate) and isinstance(x.value, E.Call)
               and x.value.op == "tir.tvm_storage_sync" for x in seq]
    assert is_sync[-1] and sum(is_sync) == 2 and len(syncs(k)) == 2
    assert isinstance(seq[is_sync.index(True) + 1], S.For)  # the k.inner loop, after the fetch


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_missing_barriers_are_detected(order):
    from tvmpy.tir.interpreter_gpu import thread_order

    N, M, K = 16, 16, 16
    s, A, B, C = _gemm(N, M, K)
    a, b = rand(N, K), rand(K, M)
    with thread_order(order):
        c = np.zeros((N, M), "float32")
        run(s, [A, B, C], [a, b, c])
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
        c = np.zeros((N, M), "float32")
        run(s, [A, B, C], [a, b, c], disabled_pass=["ThreadSync"])
        assert not np.allclose(c, a @ b, rtol=1e-4, atol=1e-5)
    if order == "reverse":
        return

    # only the end-of-loop barrier removed: the next iteration's fetch overwrites tiles
    # that other threads still read
    def drop_last_sync(f):
        from tvmpy.tir.functor import Mutator

        class Drop(Mutator):
            def visit_For(self, lp):
                lp = self.generic_visit(lp)
                b = lp.body
                if isinstance(b, S.SeqStmt) and isinstance(b.seq[-1], S.Evaluate) and \
                        isinstance(b.seq[-1].value, E.Call) and \
                        b.seq[-1].value.op == "tir.tvm_storage_sync":
                    return S.For(lp.loop_var, lp.min, lp.extent, lp.kind, S.seq(*b.seq[:-1]))
                return lp

        return f.with_body(Drop().visit(f.body))

    f = tvm.lower(s, [A, B, C], target="cuda")
    f2 = drop_last_sync(f)
    assert len(syncs(f2)) == 1
    c2 = np.zeros((N, M), "float32")
    interpreter.build(lower_gpu([f2], "cuda"))["default_function"](a, b, c2)
    assert not np.allclose(c2, a @ b, rtol=1e-4, atol=1e-5)


def test_gemm_vthread_figure6():
    N = M = K = 16
    s, A, B, C = _gemm(N, M, K, vthread=True)
    a, b, c = rand(N, K), rand(K, M), np.full((N, M), np.nan, "float32")
    mod = run(s, [A, B, C], [a, b, c])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)
    (k,) = kernels(mod)
    assert not nodes(k, lambda n: isinstance(n, S.AttrStmt) and n.attr_key == "virtual_thread")
    # two interleaved accumulators per thread in local memory (Figure 6's C.local[2])
    local = [n for n in nodes(k, lambda n: isinstance(n, S.Allocate))
             if n.buffer.scope == "local"]
    assert local and int(local[0].buffer.shape[0].value) == 2
    # interleaved: the innermost k loop updates both accumulators from the shared tiles
    inner = [lp for lp in nodes(k, lambda n: isinstance(n, S.For))
             if not nodes(lp.body, lambda n: isinstance(n, S.For))
             and nodes(lp.body, lambda n: isinstance(n, S.BufferStore) and n.buffer.scope == "local")]
    (lp,) = [x for x in inner if x.loop_var.name.startswith("k")]
    stores = nodes(lp.body, lambda n: isinstance(n, S.BufferStore))
    assert sorted(int(st.indices[0].value) for st in stores) == [0, 1]
    assert all(ld.buffer.scope == "shared" for st in stores
               for ld in nodes(st.value, lambda n: isinstance(n, E.BufferLoad))
               if ld.buffer.name != "C.local")


def test_storage_rewrite_keeps_scopes_apart():
    # a local and a shared stage of the same dtype and size never share memory
    N = 16
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((N,), lambda i: B[i] + 1.0, name="C")
    D = te.compute((N,), lambda i: C[i] * C[i], name="D")
    s = te.create_schedule(D.op)
    bx, tx = s[D].split(D.op.axis[0], factor=8)
    s[D].bind(bx, te.thread_axis("blockIdx.x"))
    s[D].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].set_scope("shared")
    s[B].compute_at(s[D], bx)
    s[C].set_scope("local")
    s[C].compute_at(s[D], tx)
    a, d = rand(N), np.full(N, np.nan, "float32")
    mod = run(s, [A, D], [a, d])
    np.testing.assert_allclose(d, (a * 2 + 1) ** 2, rtol=1e-6)
    (k,) = kernels(mod)
    scopes = sorted(x.buffer.scope for x in nodes(k, lambda n: isinstance(n, S.Allocate)))
    assert scopes == ["local", "shared"]


def shuffles(func):
    return nodes(func, lambda n: isinstance(n, E.Call) and n.op == "tir.tvm_warp_shuffle_down")


@pytest.mark.parametrize("rfactor,m,reducer", [(True, 37, "sum"), (False, 13, "sum"),
                                                (False, 16, "max"), (True, 50, "max")])
def test_cross_thread_reduction_shared_tree(rfactor, m, reducer):
    # OpenCL (thread_warp_size 1): a tree in shared memory with barriers
    s, A, B = row_reduce(5, m, rfactor, reducer)
    a = rand(5, m)
    b = np.full(5, np.nan, "float32")
    mod = run(s, [A, B], [a, b], target="opencl")
    ref = a.sum(1) if reducer == "sum" else a.max(1)
    np.testing.assert_allclose(b, ref, rtol=1e-5, atol=1e-5)
    (k,) = kernels(mod)
    shared = [n for n in nodes(k, lambda n: isinstance(n, S.Allocate)) if n.buffer.scope == "shared"]
    assert len(shared) == 1 and syncs(k) and not shuffles(k)
    # without the barriers the tree reads partner values too early
    b2 = np.full(5, np.nan, "float32")
    run(s, [A, B], [a, b2], target="opencl", disabled_pass=["ThreadSync"])
    assert not np.allclose(b2, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rfactor,m,reducer,warp", [
    (True, 37, "sum", True), (False, 16, "max", True), (False, 13, "sum", False),
    (False, 64, "sum", False)])
def test_cross_thread_reduction_cuda_warp_shuffle(rfactor, m, reducer, warp):
    # CUDA: a power-of-two group within a warp reduces with shuffles, no shared memory;
    # 13 or 64 threads fall back to the shared-memory tree
    s, A, B = row_reduce(5, m, rfactor, reducer)
    a = rand(5, m)
    b = np.full(5, np.nan, "float32")
    mod = run(s, [A, B], [a, b], target="cuda")
    ref = a.sum(1) if reducer == "sum" else a.max(1)
    np.testing.assert_allclose(b, ref, rtol=1e-5, atol=1e-5)
    (k,) = kernels(mod)
    shared = [n for n in nodes(k, lambda n: isinstance(n, S.Allocate)) if n.buffer.scope == "shared"]
    if warp:
        assert len(shuffles(k)) == 4 and not shared and not syncs(k)
        assert nodes(k, lambda n: isinstance(n, E.Call) and n.op == "tir.tvm_warp_activemask")
        assert all(c.args[3].value == 16 and c.args[4].value == 32 for c in shuffles(k))
    else:
        assert shared and syncs(k) and not shuffles(k)


@pytest.mark.parametrize("m", [9, 8])
def test_cross_thread_reduction_with_thread_rows(m):
    # threadIdx.y: rows of a block, threadIdx.x: the reduction (one tree per row; with 8
    # lanes per row, CUDA's shuffles within 8-lane segments of a warp)
    n = 6
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    bo, bi = s[B].split(B.op.axis[0], factor=3)
    s[B].bind(bo, te.thread_axis("blockIdx.x"))
    s[B].bind(bi, te.thread_axis("threadIdx.y"))
    s[B].bind(B.op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    a, b = rand(n, m), np.full(n, np.nan, "float32")
    mod = run(s, [A, B], [a, b])
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-5)
    assert bool(shuffles(kernels(mod)[0])) == (m == 8)


def test_two_kernels_with_intermediate():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[n - 1 - i] + 1.0, name="C")  # reads other blocks' B
    s = te.create_schedule(C.op)
    for T, f in ((B, 8), (C, 4)):
        bx, tx = s[T].split(T.op.axis[0], factor=f)
        s[T].bind(bx, te.thread_axis("blockIdx.x"))
        s[T].bind(tx, te.thread_axis("threadIdx.x"))
    mod = gpu_module(s, [A, C])
    ks = kernels(mod)
    assert [k.name for k in ks] == ["default_function_kernel0", "default_function_kernel1"]
    host = mod["default_function"]
    launches = kernel_launches(host)
    assert [x.args[0].value for x in launches] == [k.name for k in ks]
    assert [x.args[4].value for x in launches] == [8, 4]
    allocs = nodes(host, lambda x: isinstance(x, S.Allocate))
    assert len(allocs) == 1 and allocs[0].buffer.scope == "global"
    assert [p.name for p in ks[0].params] == ["A", "B", "n"]
    assert [p.name for p in ks[1].params] == ["C", "B", "n"]
    m = interpreter.build(mod)
    for size in (5, 17):
        a, c = rand(size), np.full(size, np.nan, "float32")
        m["default_function"](a, c)
        np.testing.assert_allclose(c, (a * 2.0)[::-1] + 1.0, rtol=1e-6)


def test_unbound_loop_forgot_to_bind():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    f = tvm.lower(s, [A, B], target="opencl")
    with pytest.raises(ValueError, match="Did you forget to bind"):
        lower_gpu([f], "opencl")
    with pytest.raises(ValueError, match="Did you forget to bind"):
        split_host_device(f)


def test_too_many_threads_and_shared_memory():
    A = te.placeholder((4096,), name="A")
    B = te.compute((4096,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=512)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.lower(s, [A, B], target="opencl")["main"]
    with pytest.raises(ValueError, match="512 threads per block exceed max_threads_per_block=256"):
        lower_gpu([f], "opencl")
    lower_gpu([tvm.lower(s, [A, B], target="cuda")], "cuda")  # 1024 on CUDA: fine
    assert not verify_gpu_code(f, {"max_threads_per_block": 256})
    assert verify_gpu_code(f, {"max_threads_per_block": 512, "max_thread_x": 512})
    assert not verify_gpu_code(f, {"max_thread_x": 256})

    s, A, B, C = _gemm(64, 64, 64, tile=8, ktile=64)  # 2 * 8*64*4 bytes = 4 KiB of shared
    f = tvm.lower(s, [A, B, C], target="cuda -max_shared_memory_per_block=2048")["main"]
    with pytest.raises(ValueError, match="4096 bytes of shared memory per block exceed "
                                         "max_shared_memory_per_block=2048"):
        lower_gpu([f], "cuda -max_shared_memory_per_block=2048")
    assert verify_gpu_code(f, {"max_shared_memory_per_block": 4096})


def test_cuda_per_dimension_block_and_grid_limits():
    # threadIdx.z may not exceed 64 on CUDA even when the block has <= 1024 threads, and
    # blockIdx.y at most 65535: the launch would fail with CUDA_ERROR_INVALID_VALUE (seen on an
    # H100 while tuning conv2d_nchw.cuda), so lowering refuses it with the dimension named
    A = te.placeholder((128, 4), name="A")
    B = te.compute((128, 4), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.z"))
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match="threadIdx.z extent 128 exceeds max_thread_z=64"):
        lower_gpu([tvm.lower(s, [A, B], target="cuda")], "cuda")
    lower_gpu([tvm.lower(s, [A, B], target="opencl -max_num_threads=512")],
              "opencl -max_num_threads=512")  # OpenCL: the device's sizes, checked at launch
    C = te.placeholder((70000, 2), name="C")
    D = te.compute((70000, 2), lambda i, j: C[i, j] + 1.0, name="D")
    s = te.create_schedule(D.op)
    s[D].bind(D.op.axis[0], te.thread_axis("blockIdx.y"))
    s[D].bind(D.op.axis[1], te.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match="blockIdx.y extent 70000 exceeds max_grid_y=65535"):
        lower_gpu([tvm.lower(s, [C, D], target="nvptx")], "nvptx")
    s[D].bind(D.op.axis[0], te.thread_axis("blockIdx.x"))  # x allows 2^31 - 1
    lower_gpu([tvm.lower(s, [C, D], target="cuda")], "cuda")


def test_thread_tag_bound_with_smaller_extent_gets_guard():
    # the fetch binds threadIdx.x over 5 while the compute uses 8 threads
    N = 8
    A = te.placeholder((N + 2,), name="A")
    C = te.compute((N,), lambda i: A[i] + A[i + 1] + A[i + 2], name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    bx, tx = s[C].split(C.op.axis[0], factor=4)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[AA].compute_at(s[C], bx)
    fo, fi = s[AA].split(s[AA].op.axis[0], factor=3)
    s[AA].bind(fi, te.thread_axis("threadIdx.x"))
    a, c = rand(N + 2), np.full(N, np.nan, "float32")
    mod = run(s, [A, C], [a, c])
    np.testing.assert_allclose(c, a[:-2] + a[1:-1] + a[2:], rtol=1e-6)
    (k,) = kernels(mod)
    assert syncs(k)


def test_barrier_divergence_is_an_error():

    buf = tvm.tir.decl_buffer((4,), "float32", name="A")
    tx = te.thread_axis("threadIdx.x")
    sync = S.Evaluate(E.Call("int32", "tir.tvm_storage_sync", [E.StringImm("shared")]))
    body = S.AttrStmt(tx, "thread_extent", 4, S.seq(
        S.IfThenElse(tx.var < 2, sync), S.BufferStore(buf, E.const(1.0, "float32"), [tx.var])))
    f = tvm.tir.PrimFunc([buf.data], body, {buf.data: buf})
    with pytest.raises(RuntimeError, match="barrier divergence"):
        interpreter.run(f, [np.zeros(4, "float32")])
    ok = f.with_body(S.AttrStmt(tx, "thread_extent", 4, S.seq(
        sync, S.BufferStore(buf, E.const(1.0, "float32"), [tx.var]))))
    a = np.zeros(4, "float32")
    interpreter.run(ok, [a])
    assert (a == 1).all()


def test_cpu_lowering_unchanged_by_gpu_passes():
    # a CPU target never runs the GPU passes; the GPU IR differs only for GPU targets
    s, A, B, C = _gemm(16, 16, 16)
    text = str(tvm.lower(s, [A, B, C], target="llvm"))
    assert "tvm_storage_sync" not in text and "threadIdx.y_1" in text
    assert LAUNCH_OP not in text


def test_reduction_stage_with_fewer_threads_than_the_kernel():
    # B: a cross-thread reduction over 16 threads, attached in a kernel of 32 threads; its
    # barriers must stay outside the `threadIdx.x < 16` guard
    n = 3
    A = te.placeholder((n, 16), name="A")
    A2 = te.placeholder((n, 32), name="A2")
    k = te.reduce_axis((0, 16), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((n, 32), lambda i, j: A2[i, j] * B[i], name="C")
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[1], te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].bind(B.op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    a, a2, c = rand(n, 16), rand(n, 32), np.full((n, 32), np.nan, "float32")
    mod = run(s, [A, A2, C], [a, a2, c])
    np.testing.assert_allclose(c, a2 * a.sum(1)[:, None], rtol=1e-5, atol=1e-5)
    (kern,) = kernels(mod)
    bufs = {x.buffer.name: x.buffer.scope for x in nodes(kern, lambda x: isinstance(x, S.Allocate))}
    assert bufs["B"] == "shared"  # attached at a block axis: TVM's inferred scope


def test_barrier_in_thread_dependent_loop_is_an_error():
    from tvmpy.tir.transform import thread_sync_func

    sh = tvm.tir.decl_buffer((8,), "float32", name="sh", scope="shared")
    out = tvm.tir.decl_buffer((8,), "float32", name="out")
    tx = te.thread_axis("threadIdx.x")
    i = E.Var("i")
    body = S.For(i, 0, tx.var, S.ForKind.SERIAL, S.seq(
        S.BufferStore(sh, E.const(1.0, "float32"), [tx.var]),
        S.BufferStore(out, E.BufferLoad(sh, [7 - tx.var]), [tx.var])))
    f = tvm.tir.PrimFunc([out.data], S.AttrStmt(tx, "thread_extent", 8, S.Allocate(sh, body)),
                         {out.data: out})
    with pytest.raises(ValueError, match="thread-dependent control flow"):
        thread_sync_func(f)


def test_symbolic_batch_gemm_with_shared_tile():
    n = te.var("n")
    K, M = 12, 10
    A = te.placeholder((n, K), name="A")
    B = te.placeholder((K, M), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((n, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    bi, ti = s[C].split(i, factor=4)
    bj, tj = s[C].split(j, factor=4)
    s[C].reorder(bi, bj, ti, tj)
    s[C].bind(bi, te.thread_axis("blockIdx.y"))
    s[C].bind(bj, te.thread_axis("blockIdx.x"))
    s[C].bind(ti, te.thread_axis("threadIdx.y"))
    s[C].bind(tj, te.thread_axis("threadIdx.x"))
    s[CL].compute_at(s[C], tj)
    ko, _ = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
    s[AA].compute_at(s[CL], ko)
    y, x = s[AA].op.axis
    s[AA].bind(y, te.thread_axis("threadIdx.y"))
    s[AA].bind(x, te.thread_axis("threadIdx.x"))
    mod = gpu_module(s, [A, B, C], "opencl")
    (launch,) = kernel_launches(mod["default_function"])
    assert str(launch.args[2]) == "(n + 3) // 4" and [p.name for p in kernels(mod)[0].params][-1] \
        == "n"
    m = interpreter.build(mod)
    for nn in (1, 7, 9):
        a, b = rand(nn, K), rand(K, M)
        c = np.full((nn, M), np.nan, "float32")
        m["default_function"](a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


def test_global_buffer_inside_a_kernel_is_an_error():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((16,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=4)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].set_scope("global")
    s[B].compute_at(s[C], bx)
    with pytest.raises(ValueError, match="B of scope 'global' is allocated inside a GPU kernel"):
        gpu_module(s, [A, C])


def test_one_tag_for_two_loops_of_a_stage_is_refused():
    A = te.placeholder((4, 4), name="A")
    B = te.compute((4, 4), lambda i, j: A[i, j], name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match="threadIdx.x is already bound to i in stage B"):
        s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.y"))  # another tag: fine


def test_tvm_gemm_tutorial_schedule():
    # TVM's GPU GEMM example: reused thread axes with ranges, 2x2 virtual threads, shared and
    # local caches, an unrolled k loop and double buffering
    N, scale, num_thread = 32, 8, 4
    A = te.placeholder((N, N), name="A")
    B = te.placeholder((N, N), name="B")
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(A[k, i] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AA, "local", [C])
    BL = s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    block_factor = scale * num_thread
    thread_x = te.thread_axis((0, num_thread), "threadIdx.x")
    thread_y = te.thread_axis((0, num_thread), "threadIdx.y")
    thread_xz = te.thread_axis((0, 2), "vthread", name="vx")
    thread_yz = te.thread_axis((0, 2), "vthread", name="vy")
    by, yi = s[C].split(C.op.axis[0], factor=block_factor)
    bx, xi = s[C].split(C.op.axis[1], factor=block_factor)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].reorder(by, bx, yi, xi)
    tyz, yi = s[C].split(yi, nparts=2)
    ty, yi = s[C].split(yi, nparts=num_thread)
    txz, xi = s[C].split(xi, nparts=2)
    tx, xi = s[C].split(xi, nparts=num_thread)
    s[C].bind(tyz, thread_yz)
    s[C].bind(txz, thread_xz)
    s[C].bind(ty, thread_y)
    s[C].bind(tx, thread_x)
    s[C].reorder(tyz, txz, ty, tx, yi, xi)
    s[CC].compute_at(s[C], tx)
    yo, xo = CC.op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=4)
    kt, ki = s[CC].split(ki, factor=1)
    s[CC].reorder(ko, kt, ki, yo, xo)
    s[AA].compute_at(s[CC], ko)
    s[BB].compute_at(s[CC], ko)
    s[CC].unroll(kt)
    s[AL].compute_at(s[CC], kt)
    s[BL].compute_at(s[CC], kt)
    for st in (AA, BB):
        ty, xi = s[st].split(s[st].op.axis[0], nparts=num_thread)
        tx, xi = s[st].split(xi, nparts=num_thread)
        s[st].bind(ty, thread_y)
        s[st].bind(tx, thread_x)
        s[st].double_buffer()
    a, b, c = rand(N, N), rand(N, N), np.full((N, N), np.nan, "float32")
    mod = run(s, [A, B, C], [a, b, c])
    np.testing.assert_allclose(c, a.T @ b, rtol=1e-4, atol=1e-5)
    (kern,) = kernels(mod)
    assert syncs(kern)
    (launch,) = kernel_launches(mod["default_function"])
    assert [x.value for x in launch.args[1:8]] == [1, 1, 1, 4, 4, 1, 0]


@pytest.mark.parametrize("reduce_fn,target", [("argmax", "opencl"), ("argmin", "cuda")])
def test_tuple_reduction_over_threads(reduce_fn, target):
    """argmin/argmax (a tuple combiner) with the reduce axis on threadIdx: each thread's partial
    pair, then a shared tree of (index, value) pairs (37 threads) or shuffles of both values
    (cuda, 16 threads), in the interpreter's GPU semantics; ties go to the first index."""
    from tvmpy import topi

    A = te.placeholder((7, 64), name="A")
    B = getattr(topi, reduce_fn)(A, axis=1)
    R = B.op.input_tensors[0]
    s = te.create_schedule(B.op)
    s[R].bind(R.op.axis[0], te.thread_axis("blockIdx.x"))
    ko, _ = s[R].split(R.op.reduce_axis[0], nparts=37 if target == "opencl" else 16)
    s[R].bind(ko, te.thread_axis("threadIdx.x"))
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    a = np.random.default_rng(3).integers(-3, 3, (7, 64)).astype("float32")
    b = np.zeros(7, "int32")
    mod = run(s, [A, B], [a, b], target)
    np.testing.assert_array_equal(b, getattr(np, reduce_fn)(a, axis=1))
    shuffles = nodes(kernels(mod)[0], lambda n: isinstance(n, E.Call)
                     and n.op == "tir.tvm_warp_shuffle_down")
    assert len(shuffles) == (2 * 4 if target == "cuda" else 0)
