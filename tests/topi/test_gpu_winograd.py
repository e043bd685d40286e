"""GPU Winograd (``conv2d_nchw_winograd.cuda``) and the shape-derived direct-conv fallback
against numpy: on OpenCL (PoCL) on awkward shapes (odd maps, prime channel counts, no padding,
batch > 1, both tile sizes, pre-transformed weights, random configs of the tuning space), through
NVRTC + ptxas (sm_80 / sm_90: no spills, shared memory within 48 KB) and the host emulation of
the generated CUDA C, and through relay (the strategy's choice, the PassContext switch, a fused
bias + relu + residual epilogue)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay, te
from tvmpy.autotvm.measure.local_builder import gpu_limits
from tvmpy.autotvm.task.task import deserialize_args
from tvmpy.target import Target
from tvmpy.tir.analysis import gpu_code_errors
from tvmpy.topi import cuda, testing
from tvmpy.topi.cuda import conv2d_direct
from tvmpy.topi.nn.winograd import winograd_matrices

RNG = np.random.default_rng(29)
OPENCL = Target("opencl")


@pytest.fixture(scope="module")
def dev():
    d = tvm.opencl(0)
    assert d.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return d


def _rand(*shape):
    return RNG.uniform(-1.0, 1.0, size=shape).astype("float32")


def _u_np(w, m):
    """numpy ``G g G^T`` as ``[alpha, alpha, CI, CO]``."""
    _, _, g = winograd_matrices(m)
    return np.einsum("ek,oikl,nl->enio", g, w.astype(np.float64), g).astype("float32")


def _build_run(dev, target, fcompute, fschedule, a, w, args):
    d = te.placeholder(a.shape, name="d")
    k = te.placeholder(w.shape, name="k")
    with target, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no tuned config"
        out = fcompute(d, k, *args)
        s = fschedule([out])
    f = tvm.build(s, [d, k, out], target=target)
    o = tvm.nd.empty(tuple(int(x) for x in out.shape), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(w, dev), o)
    return o.numpy()


def _assert_close(got, ref, rel=1e-5):
    err = float(np.abs(got - ref).max()) / float(np.abs(ref).max())
    assert err <= rel, err


@pytest.mark.parametrize("n,c,h,w,oc,pad,m", [
    (1, 5, 9, 7, 6, 1, 0),      # odd map, default tile (F(2x2): 9x7 wastes F(4x4) tiles)
    (2, 7, 13, 11, 3, 1, 4),    # batch 2, primes, F(4x4) with partial tiles
    (1, 3, 5, 5, 4, 0, 2),      # no padding
    (1, 13, 8, 8, 17, 1, 4),
    (3, 31, 7, 7, 37, 1, 0),    # the 7x7 map of ResNet's last stage, prime channels
    (1, 1, 1, 1, 1, 1, 2),      # one pixel, one channel
])
def test_winograd_matches_numpy(dev, n, c, h, w, oc, pad, m):
    a, wt = _rand(n, c, h, w), _rand(oc, c, 3, 3)
    ref = testing.conv2d_nchw_python(a, wt, 1, pad)
    got = _build_run(dev, OPENCL, cuda.conv2d_nchw_winograd, cuda.schedule_conv2d_nchw_winograd,
                     a, wt, (1, pad, 1, "float32", m))
    _assert_close(got, ref)


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_pre_computed_weight(dev, m):
    a, wt = _rand(2, 11, 10, 9), _rand(5, 11, 3, 3)
    ref = testing.conv2d_nchw_python(a, wt, 1, 1)
    got = _build_run(dev, OPENCL, cuda.conv2d_nchw_winograd, cuda.schedule_conv2d_nchw_winograd,
                     a, _u_np(wt, m), (1, 1, 1, "float32", m, True))
    _assert_close(got, ref)


def test_winograd_random_configs(dev):
    """Random valid configs of the product's tuning space (not only the fallback)."""
    a, wt = _rand(1, 12, 10, 10), _rand(20, 12, 3, 3)
    ref = testing.conv2d_nchw_python(a, wt, 1, 1)
    args = (("TENSOR", a.shape, "float32"), ("TENSOR", wt.shape, "float32"), 1, 1, 1)
    task = autotvm.task.create("conv2d_nchw_winograd.cuda", args, target=OPENCL)
    space, done = task.config_space, 0
    for _ in range(200):
        cfg = space.get(int(RNG.integers(len(space))))
        if cfg["auto_unroll_max_step"].val > 512:
            continue
        s, tensors = task.instantiate(cfg)
        if gpu_code_errors(tvm.lower(s, tensors, target=OPENCL), gpu_limits(OPENCL)):
            continue
        f = tvm.build(s, tensors, target=OPENCL)
        o = tvm.nd.empty(ref.shape, "float32", dev)
        f(tvm.nd.array(a, dev), tvm.nd.array(wt, dev), o)
        _assert_close(o.numpy(), ref)
        done += 1
        if done == 2:
            return
    raise AssertionError("fewer than 2 valid configs in 200 samples")


def test_winograd_rejects_stride_and_other_kernels():
    d = te.placeholder((1, 4, 8, 8), name="d")
    with OPENCL, pytest.raises(ValueError, match="stride"):
        cuda.conv2d_nchw_winograd(d, te.placeholder((4, 4, 3, 3), name="k"), 2, 1, 1)
    with OPENCL, pytest.raises(ValueError, match="3x3"):
        cuda.conv2d_nchw_winograd(d, te.placeholder((4, 4, 5, 5), name="k"), 1, 2, 1)


@pytest.mark.parametrize("n,c,h,w,oc,k,stride,pad", [
    (1, 3, 23, 19, 8, 7, 2, 3),    # a stem: 7x7 stride 2, odd map
    (2, 17, 14, 14, 64, 3, 1, 1),  # batch folded into the grid
    (1, 64, 7, 7, 96, 3, 1, 1),    # small map: the grid-filling shrink
    (1, 13, 9, 11, 10, 1, 2, 0),   # 1x1 stride 2
    (1, 6, 12, 12, 5, 3, 1, 2),    # wider padding than the kernel needs
])
def test_shape_fallback_matches_numpy(dev, n, c, h, w, oc, k, stride, pad):
    a, wt = _rand(n, c, h, w), _rand(oc, c, k, k)
    ref = testing.conv2d_nchw_python(a, wt, stride, pad)
    got = _build_run(dev, OPENCL, cuda.conv2d_nchw, cuda.schedule_conv2d_nchw, a, wt,
                     (stride, pad, 1, "float32"))
    _assert_close(got, ref)


def test_dilated_conv_fallback_fits(dev):
    """The shared-memory estimate covers a dilated window (the compute keeps no dilation)."""
    a, wt = _rand(1, 8, 15, 15), _rand(8, 8, 3, 3)
    ref = testing.conv2d_nchw_python(a, wt, 1, 2, dilation=2) \
        if "dilation" in testing.conv2d_nchw_python.__code__.co_varnames else None
    got = _build_run(dev, OPENCL, cuda.conv2d_nchw, cuda.schedule_conv2d_nchw, a, wt,
                     (1, 2, 2, "float32"))
    if ref is None:  # numpy reference: dilate the kernel with zeros
        wd = np.zeros((8, 8, 5, 5), "float32")
        wd[:, :, ::2, ::2] = wt
        ref = testing.conv2d_nchw_python(a, wd, 1, 2)
    _assert_close(got, ref)


RESNET_LAYERS = [(3, 224, 64, 7, 2, 3), (64, 56, 64, 3, 1, 1), (64, 56, 128, 3, 2, 1),
                 (64, 56, 128, 1, 2, 0), (128, 28, 128, 3, 1, 1), (256, 14, 256, 3, 1, 1),
                 (512, 7, 512, 3, 1, 1)]


@pytest.mark.parametrize("batch", [1, 16])
def test_fallbacks_fit_the_gpu(batch):
    """Every ResNet-18 conv shape at batch 1 and 16: the direct fallback and Winograd pass
    verify_gpu_code for CUDA (threads, shared memory <= 48 KB) -- ptxas is checked in
    test_cuda_ptxas_and_host_emulation on smaller shapes, bench/gpu_conv_defaults.py
    --compile-only on these."""
    tgt = Target("cuda")
    for c, h, oc, k, s, p in RESNET_LAYERS:
        d = te.placeholder((batch, c, h, h), name="d")
        wt = te.placeholder((oc, c, k, k), name="k")
        impls = [(cuda.conv2d_nchw, cuda.schedule_conv2d_nchw)]
        if k == 3 and s == 1:
            impls.append((cuda.conv2d_nchw_winograd, cuda.schedule_conv2d_nchw_winograd))
        for fc, fs in impls:
            with tgt, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fc(d, wt, s, p, 1, "float32")
                sch = fs([out])
            func = tvm.lower(sch, [d, wt, out], target=tgt)
            assert gpu_code_errors(func, gpu_limits(tgt)) == [], (c, h, oc, k, fc)


def test_shape_fallback_fills_the_grid():
    """The rule's aims, on ResNet-18's 512x7x7 layer at batch 1 (25,088 outputs) and 64x56x56
    at batch 16: at least MIN_BLOCKS blocks where the shape allows, at least MIN_THREADS
    threads per block, more outputs per thread when blocks are plentiful."""
    def cfg_of(shape_d, shape_w):
        args = (("TENSOR", shape_d, "float32"), ("TENSOR", shape_w, "float32"), 1, 1, 1,
                "float32")
        task = autotvm.task.create("conv2d_nchw.cuda", args, target="cuda")
        with Target("cuda"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            task.func(*deserialize_args(task.args))
            return autotvm.task.DispatchContext.current.query(Target("cuda"), task.workload)

    small = cfg_of((1, 512, 7, 7), (512, 512, 3, 3))
    f, y, x = (small[k].size for k in ("tile_f", "tile_y", "tile_x"))
    threads = f[2] * y[2] * x[2]
    blocks = (512 // (f[1] * f[2] * f[3])) * (7 // (y[1] * y[2] * y[3])) * \
        (7 // (x[1] * x[2] * x[3]))
    assert threads >= conv2d_direct.MIN_THREADS
    # MIN_BLOCKS reached, or one output per thread and no fewer threads without going under
    # MIN_THREADS (here: 98 threads, 256 blocks)
    per_thread = f[3] * y[3] * x[1]
    assert blocks >= conv2d_direct.MIN_BLOCKS or (
        per_thread == 1 and threads // 2 < conv2d_direct.MIN_THREADS), (blocks, threads)
    big = cfg_of((16, 64, 56, 56), (64, 64, 3, 3))
    per_thread = big["tile_f"].size[3] * big["tile_y"].size[3] * big["tile_x"].size[1]
    assert per_thread >= 8
    assert big["tile_ry"].size[1] == 3 and big["tile_rc"].size[1] >= 8


@pytest.mark.parametrize("op", ["winograd", "direct"])
def test_cuda_ptxas_and_host_emulation(op, tmp_path):
    """target "cuda": NVRTC + ptxas for sm_80 and sm_90 (no spills, shared within 48 KB), then
    the generated CUDA C run on the host (tvmpy.testing.cuda_fake) against numpy."""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    tgt = Target("cuda")
    a, wt = _rand(1, 6, 9, 7), _rand(5, 6, 3, 3)
    d = te.placeholder(a.shape, name="d")
    k = te.placeholder(wt.shape, name="k")
    with tgt, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if op == "winograd":
            out = cuda.conv2d_nchw_winograd(d, k, 1, 1, 1, "float32", 4)
            s = cuda.schedule_conv2d_nchw_winograd([out])
        else:
            out = cuda.conv2d_nchw(d, k, 1, 1, 1, "float32")
            s = cuda.schedule_conv2d_nchw([out])
    mod = tvm.build(s, [d, k, out], target=tgt)
    dev_mod = mod.imported_modules[0]
    assert sorted(dev_mod.ptxas_info) == ["sm_80", "sm_90"]
    for per_kernel in dev_mod.ptxas_info.values():
        for info in per_kernel.values():
            assert info.spill_stores == 0 and info.spill_loads == 0, info
            assert info.shared_bytes <= 48 * 1024, info
    got = np.zeros(tuple(int(x) for x in out.shape), "float32")
    host = HostKernels(dev_mod.get_source(), mod.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        mod(a, wt, got)
    finally:
        cuda_module.set_driver(prev)
    _assert_close(got, testing.conv2d_nchw_python(a, wt, 1, 1))


def _relay_conv_block(c, h, oc, with_residual):
    x = relay.var("x", shape=(1, c, h, h))
    w = relay.var("w", shape=(oc, c, 3, 3))
    b = relay.var("b", shape=(oc,))
    y = relay.nn.bias_add(relay.nn.conv2d(x, w, padding=(1, 1), channels=oc,
                                          kernel_size=(3, 3)), b)
    if with_residual:
        y = relay.add(y, x)
    y = relay.nn.relu(y)
    return relay.Function(relay.analysis.free_vars(y), y)


@pytest.mark.parametrize("mode", ["auto", True, False])
def test_relay_winograd_choice_and_epilogue(dev, mode):
    """relay.build for opencl: the Winograd implementation where the rule (or the PassContext
    switch) picks it, with bias + residual add + relu fused into its output kernel."""
    from tvmpy.contrib import graph_executor

    c = 64
    func = _relay_conv_block(c, 9, c, with_residual=True)
    mod = tvm.IRModule.from_expr(func)
    xa, wa, ba = _rand(1, c, 9, 9), _rand(c, c, 3, 3), _rand(c)
    params = {"w": wa, "b": ba}
    with tvm.transform.PassContext(opt_level=3, config={"relay.cuda.winograd": mode}):
        lib = relay.build(mod, target="opencl", params=params)
    src = lib.get_lib().imported_modules[0].get_source()
    assert ("winograd" in src) == (mode is not False)  # auto: 64 channels, 9x9 map
    g = graph_executor.GraphModule(lib["default"](dev))
    g.set_input("x", xa)
    g.run()
    ref = np.maximum(testing.conv2d_nchw_python(xa, wa, 1, 1) + ba[None, :, None, None] + xa, 0)
    _assert_close(g.get_output(0).numpy(), ref)


def test_relay_rule_keeps_small_layers_direct():
    """The untuned rule: fewer than WINOGRAD_MIN_CHANNELS channels -> direct."""
    func = _relay_conv_block(16, 9, 16, with_residual=False)
    mod = tvm.IRModule.from_expr(func)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="opencl",
                          params={"w": _rand(16, 16, 3, 3), "b": _rand(16)})
    assert "winograd" not in lib.get_lib().imported_modules[0].get_source()


def test_task_extraction_lists_both_algorithms():
    """A 3x3 stride-1 conv gives the direct and the Winograd task (tuning measures both; the
    build then takes the faster measured one)."""
    func = _relay_conv_block(64, 9, 64, with_residual=False)
    mod = tvm.IRModule.from_expr(func)
    params = {"w": _rand(64, 64, 3, 3), "b": _rand(64)}
    tasks = autotvm.task.extract_from_program(mod["main"], target="opencl", params=params)
    names = sorted(t.name for t in tasks)
    assert names == ["conv2d_nchw.cuda", "conv2d_nchw_winograd.cuda"], names
    for t in tasks:
        assert len(t.config_space) > 1


class _Costs(autotvm.task.DispatchContext):
    """A dispatch context that knows only measured costs per task name (configs: the
    enclosing fallback)."""

    def __init__(self, costs):
        super().__init__()
        self.costs = costs

    def _cost_inside(self, target, workload):
        return self.costs.get(workload[0])

    def _query_inside(self, target, workload):
        return None


@pytest.mark.parametrize("costs,want", [
    ({"conv2d_nchw.cuda": 1e-3, "conv2d_nchw_winograd.cuda": 2e-3}, False),
    ({"conv2d_nchw.cuda": 2e-3, "conv2d_nchw_winograd.cuda": 1e-3}, True),
    ({"conv2d_nchw.cuda": 1e-3}, False),   # only direct measured: it wins over the rule
    ({"conv2d_nchw_winograd.cuda": 1e-3}, True),
])
def test_winograd_choice_follows_records(costs, want):
    """Records decide over the rule (here the rule alone would pick Winograd for 64 channels on
    a 9x9 map, and direct for 16 channels)."""
    from tvmpy.relay.op.strategy.gpu import winograd_choice

    for c in (64, 16):
        func = _relay_conv_block(c, 9, c, with_residual=False)
        mod = relay.transform.InferType()(tvm.IRModule.from_expr(func))
        call = mod["main"].body.args[0].args[0]  # relu(bias_add(conv)) -> conv
        assert call.op.name == "nn.conv2d"
        d = te.placeholder((1, c, 9, 9), name="d")
        w = te.placeholder((c, c, 3, 3), name="w")
        with _Costs(costs):
            got = winograd_choice(call.attrs, [d, w], call.checked_type, OPENCL)
        assert got is want
