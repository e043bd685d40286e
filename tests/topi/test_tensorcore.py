"""Tensor cores (wmma) on target "cuda": the four TVM intrinsics through tensorize, the
``dense_tensorcore.cuda`` / ``batch_matmul_tensorcore.cuda`` templates and their strategy.
Every kernel goes through NVRTC and ptxas for sm_80 and sm_90 (no spills), then runs on the
host emulation (tvmpy.testing.cuda_fake: a fragment holds its whole tile in each thread of the
warp) against numpy on random float16 inputs."""

import re
import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.codegen.gpu_source import GPUCodegenError
from tvmpy.runtime import cuda_module
from tvmpy.target import Target
from tvmpy.testing.cuda_fake import FakeDriver, HostKernels
from tvmpy.topi import cuda
from tvmpy.topi.cuda.tensor_intrin import (
    intrin_wmma_gemm,
    intrin_wmma_load_matrix_a,
    intrin_wmma_load_matrix_b,
    intrin_wmma_store_matrix,
)

RNG = np.random.default_rng(29)
CUDA = Target("cuda")


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float16")


def _run_emulated(mod, args, tmp_path):
    """Run a built cuda module on the host emulation; return the (written) arrays."""
    dev_mod = mod.imported_modules[0]
    for arch in ("sm_80", "sm_90"):
        for name, info in dev_mod.ptxas_info[arch].items():
            assert info.spill_stores == 0 and info.spill_loads == 0, (arch, name, info)
    host = HostKernels(dev_mod.get_source(), mod.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        mod(*args)
    finally:
        cuda_module.set_driver(prev)
    return args


def _check(got, ref, out_dtype):
    got = got.astype("float32")
    scale = max(1.0, float(np.abs(ref).max()))
    # float32 accumulation: near exact; float16 output: half an ulp of the largest value
    tol = 1e-5 * scale if out_dtype == "float32" else 2 ** -10 * scale
    np.testing.assert_allclose(got, ref, atol=tol, rtol=0)


def test_wmma_intrinsics_through_tensorize(tmp_path):
    """A hand schedule: one warp per 16x16 output tile, A/B staged in shared memory, the four
    intrinsics tensorized; the CUDA C declares fragments and calls nvcuda::wmma (no mma.h,
    which NVRTC lacks)."""
    m, n, k = 32, 48, 64
    a = te.placeholder((m, k), "float16", name="A")
    b = te.placeholder((n, k), "float16", name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r].astype("float32") * b[j, r].astype("float32"),
                                               axis=r), name="C")
    s = te.create_schedule(c.op)
    AS, BS = s.cache_read(a, "shared", [c]), s.cache_read(b, "shared", [c])
    AF, BF = s.cache_read(AS, "wmma.matrix_a", [c]), s.cache_read(BS, "wmma.matrix_b", [c])
    CF = s.cache_write(c, "wmma.accumulator")
    i, j = c.op.axis
    bi, ii = s[c].split(i, factor=16)
    bj, jj = s[c].split(j, factor=16)
    s[c].reorder(bi, bj, ii, jj)
    s[c].bind(bi, te.thread_axis("blockIdx.y"))
    s[c].bind(bj, te.thread_axis("blockIdx.x"))
    s[CF].compute_at(s[c], bj)
    ci, cj = CF.op.axis
    ko, ki = s[CF].split(CF.op.reduce_axis[0], factor=16)
    s[CF].reorder(ko, ci, cj, ki)
    for f in (AF, BF):
        s[f].compute_at(s[CF], ko)
    for sh in (AS, BS):
        s[sh].compute_at(s[CF], ko)
        _, tx = s[sh].split(s[sh].fuse(*s[sh].op.axis), factor=32)
        s[sh].bind(tx, te.thread_axis("threadIdx.x"))
    s[AF].tensorize(AF.op.axis[0], intrin_wmma_load_matrix_a())
    s[BF].tensorize(BF.op.axis[0], intrin_wmma_load_matrix_b())
    s[CF].tensorize(ci, intrin_wmma_gemm())
    s[c].tensorize(ii, intrin_wmma_store_matrix(scope_to="global"))
    mod = tvm.build(s, [a, b, c], target=CUDA)
    src = mod.imported_modules[0].get_source()
    assert "#include <mma.h>" not in src
    for frag in ("matrix_a, 16, 16, 16, _Float16, nvcuda::wmma::row_major",
                 "matrix_b, 16, 16, 16, _Float16, nvcuda::wmma::col_major",
                 "accumulator, 16, 16, 16, float>"):
        assert f"nvcuda::wmma::fragment<nvcuda::wmma::{frag}" in src
    for call in ("fill_fragment", "load_matrix_sync", "mma_sync", "store_matrix_sync"):
        assert f"nvcuda::wmma::{call}(" in src
    assert "wmma.mma.sync" in mod.imported_modules[0].get_source("ptx")
    av, bv = _rand(m, k), _rand(n, k)
    out = np.full((m, n), np.nan, "float32")
    _run_emulated(mod, [av, bv, out], tmp_path)
    _check(out, av.astype("float32") @ bv.astype("float32").T, "float32")


def test_kernels_without_fragments_are_unchanged():
    """No tensor-core definitions in a kernel that does not use them."""
    a = te.placeholder((64,), "float16", name="A")
    c = te.compute((64,), lambda i: a[i] * 2, name="C")
    s = te.create_schedule(c.op)
    bx, tx = s[c].split(c.op.axis[0], factor=32)
    s[c].bind(bx, te.thread_axis("blockIdx.x"))
    s[c].bind(tx, te.thread_axis("threadIdx.x"))
    src = tvm.build(s, [a, c], target=CUDA).imported_modules[0].get_source()
    assert "wmma" not in src and "__align__(32)" not in src


def _dense(m, n, k, bias=False, out_dtype=None, tmp_path=None, target=CUDA):
    a = te.placeholder((m, k), "float16", name="A")
    w = te.placeholder((n, k), "float16", name="W")
    bt = te.placeholder((n,), "float16", name="bias") if bias else None
    with target, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuned config: the fallback is what is tested
        out = cuda.dense_tensorcore(a, w, bt, out_dtype)
        s = cuda.schedule_dense_tensorcore([out])
    args = [a, w] + ([bt] if bias else []) + [out]
    mod = tvm.build(s, args, target=target)
    av, wv = _rand(m, k), _rand(n, k)
    ins = [av, wv] + ([_rand(n)] if bias else [])
    got = np.full((m, n), np.nan, out.dtype)
    _run_emulated(mod, ins + [got], tmp_path)
    ref = av.astype("float32") @ wv.astype("float32").T
    if bias:
        ref = ref + ins[2].astype("float32")
    return mod, got, ref, out.dtype


@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (128, 256, 96), (96, 48, 80), (32, 64, 16),
                                   (256, 128, 64), (64, 40, 32), (40, 64, 48)])
def test_dense_tensorcore_fallback(m, n, k, tmp_path):
    """Fallback tiles for square, non-square, several-block and 32x8 / 8x32 wmma shapes."""
    mod, got, ref, odt = _dense(m, n, k, tmp_path=tmp_path)
    _check(got, ref, odt)
    src = mod.imported_modules[0].get_source()
    # vector copies into shared memory (16 bytes when the tile splits into 8 per thread)
    assert "*(uint4*)(" in src or (m * n < 64 * 64 and "*(uint2*)(" in src)
    body = src[src.index("__global__"):]
    if "for (int32_t k_" in body:  # several k chunks: double buffered, one barrier per chunk
        loop = body[body.index("for (int32_t k_"):]
        assert loop.count("__syncthreads();") == 1
        # and one after the first chunk's copies, before the loop reads them
        assert body.count("__syncthreads();") == 2


def test_dense_tensorcore_wmma_shapes():
    """M, N multiples of 32 x 8 / 8 x 32 only: the matching wmma shape."""
    assert cuda.tensorcore_shape(64, 40, 32) == (32, 8, 16)
    assert cuda.tensorcore_shape(40, 64, 48) == (8, 32, 16)
    assert cuda.tensorcore_shape(64, 64, 48) == (16, 16, 16)
    assert cuda.tensorcore_shape(64, 64, 40) is None
    assert cuda.tensorcore_shape(12, 64, 32) is None


@pytest.mark.parametrize("bias,out_dtype", [(True, None), (True, "float16"), (False, "float16")])
def test_dense_tensorcore_epilogue(bias, out_dtype, tmp_path):
    """A fused bias and/or a float16 output: the accumulators go through shared memory."""
    mod, got, ref, odt = _dense(64, 128, 64, bias, out_dtype, tmp_path)
    _check(got, ref, odt)
    assert odt == (out_dtype or "float32")


def test_dense_tensorcore_respects_thread_limit(tmp_path):
    mod, got, ref, odt = _dense(128, 128, 64, tmp_path=tmp_path,
                                target=Target("cuda -max_num_threads=64"))
    _check(got, ref, odt)
    assert "__launch_bounds__(64)" in mod.imported_modules[0].get_source()


def test_dense_tensorcore_random_configs(tmp_path):
    """Valid random configurations of the AutoTVM space give numpy's result."""
    m, n, k = 64, 64, 64
    args = (("TENSOR", (m, k), "float16"), ("TENSOR", (n, k), "float16"), None, "float32")
    task = autotvm.task.create("dense_tensorcore.cuda", args, target=CUDA)
    space = task.config_space
    av, wv = _rand(m, k), _rand(n, k)
    ref = av.astype("float32") @ wv.astype("float32").T
    tried = 0
    for idx in RNG.permutation(len(space))[:200]:
        cfg = space.get(int(idx))
        try:
            with CUDA:
                s, tensors = task.instantiate(cfg)
        except autotvm.space.InstantiationError:
            continue
        mod = tvm.build(s, tensors, target=CUDA)
        got = np.full((m, n), np.nan, "float32")
        _run_emulated(mod, [av, wv, got], tmp_path)
        _check(got, ref, "float32")
        tried += 1
        if tried == 3:
            break
    assert tried == 3


def test_batch_matmul_tensorcore(tmp_path):
    for (bx, by) in ((3, 3), (1, 2)):
        m, n, k = 32, 48, 32
        x = te.placeholder((bx, m, k), "float16", name="x")
        y = te.placeholder((by, n, k), "float16", name="y")
        with CUDA, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = cuda.batch_matmul_tensorcore(x, y)
            s = cuda.schedule_batch_matmul_tensorcore([out])
        mod = tvm.build(s, [x, y, out], target=CUDA)
        xv, yv = _rand(bx, m, k), _rand(by, n, k)
        got = np.full((max(bx, by), m, n), np.nan, "float32")
        _run_emulated(mod, [xv, yv, got], tmp_path)
        ref = np.matmul(xv.astype("float32"), yv.astype("float32").transpose(0, 2, 1))
        _check(got, ref, "float32")


def test_tensorcore_refusals():
    a = te.placeholder((64, 64), "float32", name="A")
    with CUDA, pytest.raises(ValueError, match="float16"):
        cuda.dense_tensorcore(a, a)
    h = te.placeholder((64, 40), "float16", name="H")
    with CUDA, pytest.raises(ValueError, match="multiples"):
        cuda.dense_tensorcore(h, h)


def test_nvptx_refuses_wmma():
    m = n = k = 32
    a = te.placeholder((m, k), "float16", name="A")
    w = te.placeholder((n, k), "float16", name="W")
    with CUDA, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cuda.dense_tensorcore(a, w)
        s = cuda.schedule_dense_tensorcore([out])
    with pytest.raises(GPUCodegenError, match="tensor cores.*target 'cuda'"):
        tvm.build(s, [a, w, out], target="nvptx")


def test_fragment_without_wmma_calls_is_a_clear_error():
    """A wmma.* buffer accessed element by element (not through the intrinsics) cannot be
    declared as a fragment."""
    a = te.placeholder((16, 16), "float16", name="A")
    c = te.compute((16, 16), lambda i, j: a[i, j] + a[j, i], name="C")
    s = te.create_schedule(c.op)
    AF = s.cache_read(a, "wmma.matrix_a", [c])
    s[c].bind(c.op.axis[0], te.thread_axis("threadIdx.x"))
    s[AF].compute_at(s[c], c.op.axis[0])
    with pytest.raises(GPUCodegenError, match="never filled, loaded or stored"):
        tvm.build(s, [a, c], target=CUDA)


def _dense_relay(m, n, k, dtype="float16"):
    from tvmpy import relay

    x = relay.var("x", shape=(m, k), dtype=dtype)
    w = relay.var("w", shape=(n, k), dtype=dtype)
    return x, w, relay.nn.dense(x, w)


@pytest.mark.parametrize("shape,dtype,target,want", [
    ((64, 64, 64), "float16", "cuda", "dense_tensorcore.cuda"),
    ((32, 8, 16), "float16", "cuda", "dense_tensorcore.cuda"),
    ((64, 64, 40), "float16", "cuda", "dense.cuda"),  # K not a multiple of 16
    ((64, 64, 64), "float32", "cuda", "dense.cuda"),
    ((64, 64, 64), "float16", "opencl", "dense.cuda"),
    ((64, 64, 64), "float16", "cuda -arch=sm_61", "dense.cuda"),
])
def test_strategy_selects_tensorcore(shape, dtype, target, want):
    from tvmpy import relay
    from tvmpy.relay.op import strategy

    x, w, y = _dense_relay(*shape, dtype)
    tgt = Target(target)
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    mod = relay.transform.InferType()(mod)
    call = mod["main"].body
    ins = [te.placeholder(tuple(int(d) for d in a.checked_type.shape), dtype) for a in call.args]
    impl = strategy.select_implementation(call.op, call.attrs, ins, call.checked_type, tgt)
    assert impl.name == want


def test_relay_fp16_dense_model_on_tensor_cores(tmp_path):
    """relay.build of an fp16 dense -> relu -> dense model for "cuda": the denses run on
    tensor cores (float16 outputs from float32 accumulators), equal numpy in float32 within
    float16 rounding."""
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    m, k, h, n = 32, 64, 48, 16
    x = relay.var("x", shape=(m, k), dtype="float16")
    w1 = relay.var("w1", shape=(h, k), dtype="float16")
    w2 = relay.var("w2", shape=(n, h), dtype="float16")
    y = relay.nn.dense(relay.nn.relu(relay.nn.dense(x, w1)), w2)
    mod = tvm.IRModule.from_expr(relay.Function([x, w1, w2], y))
    xv, w1v, w2v = _rand(m, k), (_rand(h, k) / 8).astype("float16"), _rand(n, h)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = relay.build(mod, target="cuda", params={"w1": w1v, "w2": w2v})
    glib = lib.get_lib()
    src = glib.imported_modules[0].get_source()
    assert src.count("nvcuda::wmma::mma_sync(") >= 2
    host = HostKernels(src, glib.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        g = graph_executor.GraphModule(lib["default"](tvm.cuda(0)))
        g.set_input(x=xv)
        g.run()
        got = g.get_output(0).numpy()
    finally:
        cuda_module.set_driver(prev)
    assert got.dtype == np.float16
    hid = np.maximum(xv.astype("float32") @ w1v.astype("float32").T, 0).astype("float16")
    ref = hid.astype("float32") @ w2v.astype("float32").T
    _check(got, ref, "float16")
    assert re.search(r"__launch_bounds__\(\d+\)", src)


def test_async_copy_option(tmp_path):
    """PassContext config "cuda.async_copy": the 16-byte global -> shared copies become
    cp.async (in the PTX), each barrier waits for them first; the emulation (synchronous
    copies) gives numpy's result."""
    m, n, k = 64, 64, 96
    a = te.placeholder((m, k), "float16", name="A")
    w = te.placeholder((n, k), "float16", name="W")
    with CUDA, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cuda.dense_tensorcore(a, w)
        s = cuda.schedule_dense_tensorcore([out])
    with tvm.transform.PassContext(config={"cuda.async_copy": True}):
        mod = tvm.build(s, [a, w, out], target=CUDA)
    dev_mod = mod.imported_modules[0]
    src = dev_mod.get_source()
    assert "tvmpy_cp_async16(" in src and "cp.async.cg.shared.global" in dev_mod.get_source("ptx")
    body = src[src.index("__global__"):]
    assert body.count("__syncthreads();") == body.count("tvmpy_cp_async_wait();\n  __syncthreads();") \
        + body.count("tvmpy_cp_async_wait();\n    __syncthreads();")
    av, wv = _rand(m, k), _rand(n, k)
    got = np.full((m, n), np.nan, "float32")
    _run_emulated(mod, [av, wv, got], tmp_path)
    _check(got, av.astype("float32") @ wv.astype("float32").T, "float32")
    # off by default
    assert "cp_async" not in tvm.build(s, [a, w, out], target=CUDA).imported_modules[0].get_source()


def test_dense_tensorcore_bfloat16(tmp_path):
    """bfloat16 inputs (their bits as uint16 after LegalizeStorageDtypes; bf16 fragments,
    sm_80+), float32 accumulation, against numpy on the bf16-rounded inputs."""
    import ml_dtypes

    m, n, k = 64, 32, 48
    a = te.placeholder((m, k), "bfloat16", name="A")
    w = te.placeholder((n, k), "bfloat16", name="W")
    with CUDA, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cuda.dense_tensorcore(a, w)
        s = cuda.schedule_dense_tensorcore([out])
    mod = tvm.build(s, [a, w, out], target=CUDA)
    src = mod.imported_modules[0].get_source()
    assert "tvmpy_bf16_tag, nvcuda::wmma::row_major>" in src
    assert ".bf16" in mod.imported_modules[0].get_source("ptx")
    av = RNG.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    wv = RNG.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    got = np.full((m, n), np.nan, "float32")
    _run_emulated(mod, [av, wv, got], tmp_path)
    _check(got, av.astype("float32") @ wv.astype("float32").T, "float32")


def test_strategy_bfloat16_needs_sm80():
    from tvmpy import relay
    from tvmpy.relay.op import strategy

    for target, want in (("cuda", "dense_tensorcore.cuda"), ("cuda -arch=sm_75", "dense.cuda")):
        x, w, y = _dense_relay(64, 64, 64, "bfloat16")
        mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, w], y)))
        call = mod["main"].body
        ins = [te.placeholder((64, 64), "bfloat16") for _ in call.args]
        impl = strategy.select_implementation(call.op, call.attrs, ins, call.checked_type,
                                              Target(target))
        assert impl.name == want


def test_dense_tensorcore_swizzled_grid(tmp_path):
    """The knob swizzle: one grid axis, G block rows fastest; same result; refused when G does
    not divide the block rows."""
    m, n, k = 256, 64, 32
    args = (("TENSOR", (m, k), "float16"), ("TENSOR", (n, k), "float16"), None, "float32")
    task = autotvm.task.create("dense_tensorcore.cuda", args, target=CUDA)
    space = task.config_space
    want = dict(block_row_warps=1, block_col_warps=2, warp_row_tiles=2, warp_col_tiles=1,
                chunk=2, offset=8, offsetCS=8, vec=8, wmma_m=16)
    av, wv = _rand(m, k), _rand(n, k)
    ref = av.astype("float32") @ wv.astype("float32").T
    for swz, ok in ((4, True), (16, False)):  # 256 / 32 = 8 block rows
        vals = dict(want, swizzle=swz)
        idx = [[e.val for e in sp.entities].index(vals[name])
               for name, sp in space.space_map.items()]
        cfg = space.get(space.knob2point(idx))
        if not ok:
            with CUDA, pytest.raises(autotvm.space.InstantiationError, match="swizzle"):
                task.instantiate(cfg)
            continue
        with CUDA:
            s, tensors = task.instantiate(cfg)
        mod = tvm.build(s, tensors, target=CUDA)
        assert "blockIdx.y" not in mod.imported_modules[0].get_source()
        got = np.full((m, n), np.nan, "float32")
        _run_emulated(mod, [av, wv, got], tmp_path)
        _check(got, ref, "float32")


def test_strategy_batch_matmul_tensorcore():
    from tvmpy import relay
    from tvmpy.relay.op import strategy

    for shape_b, want in (((2, 48, 32), "batch_matmul_tensorcore.cuda"),
                          ((2, 48, 24), "batch_matmul.cuda")):  # K = 24: not a multiple of 16
        k = shape_b[2]
        x = relay.var("x", shape=(2, 32, k), dtype="float16")
        y = relay.var("y", shape=shape_b, dtype="float16")
        body = relay.nn.batch_matmul(x, y)
        mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, y], body)))
        call = mod["main"].body
        ins = [te.placeholder(tuple(int(d) for d in a.checked_type.shape), "float16")
               for a in call.args]
        impl = strategy.select_implementation(call.op, call.attrs, ins, call.checked_type, CUDA)
        assert impl.name == want


def test_autotvm_extracts_tensorcore_task():
    """An fp16 dense of a wmma shape is a dense_tensorcore.cuda tuning task."""
    from tvmpy import relay

    x, w, y = _dense_relay(64, 256, 128)
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tasks = autotvm.task.extract_from_program(mod["main"], target="cuda", params={})
    assert "dense_tensorcore.cuda" in [t.name for t in tasks]
