"""GPU convolutions with a run-time batch (``relay.Any()``) through the VM: the direct
(``conv2d_nchw.gpu_symbolic_batch``) and depthwise (``depthwise_conv2d_nchw.gpu_symbolic_batch``)
templates' schedules with fixed tiles over the constant axes and the batch a block axis, instead
of the plain one-thread-per-output schedule. References: numpy (``testing.conv2d_nchw_python``)
at batches 1, 3 and 7 (no tile divides them), awkward channels and maps; OpenCL on PoCL, CUDA
through NVRTC + ptxas (sm_80 / sm_90: no spills, shared memory within 48 KB) and the host
emulation of the generated CUDA C (testing.cuda_fake)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.relay.op.strategy import _STRATEGIES
from tvmpy.runtime.vm import VirtualMachine
from tvmpy.target import Target
from tvmpy.topi import testing

rng = np.random.default_rng(2029)

# 64 threads per block on cuda: the host emulation runs each thread of a barrier kernel as an
# OS thread
TARGETS = {"opencl": ("opencl", tvm.opencl), "cuda": ("cuda -max_num_threads=64", tvm.cuda)}


def _rand(*shape):
    return rng.uniform(-1, 1, size=shape).astype("float32")


@contextlib.contextmanager
def _gpu_vm(mod, kind, params, tmp_path, config=None):
    target, device = TARGETS[kind]
    with tvm.transform.PassContext(opt_level=3, config=config or {}):
        exe = relay.vm.compile(mod, target=target, params=params)
    if kind != "cuda":
        yield exe, VirtualMachine(exe, device(0))
        return
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    dm = exe.lib.imported_modules[0]
    assert sorted(dm.ptxas_info) == ["sm_80", "sm_90"]
    for per_kernel in dm.ptxas_info.values():
        for info in per_kernel.values():
            assert info.spill_stores == 0 and info.spill_loads == 0, info
            assert info.shared_bytes <= 48 * 1024 and info.registers <= 255, info
    host = HostKernels(dm.get_source(), exe.lib.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        yield exe, VirtualMachine(exe, device(0))
    finally:
        cuda_module.set_driver(prev)


def _conv_ref(x, w, stride, pad, dil, groups):
    """numpy: grouped convolution as per-group conv2d_nchw_python (dilation by dilating the
    kernel with zeros)."""
    if dil > 1:
        kh, kw = w.shape[2:]
        wd = np.zeros(w.shape[:2] + ((kh - 1) * dil + 1, (kw - 1) * dil + 1), w.dtype)
        wd[:, :, ::dil, ::dil] = w
        w = wd
    cin, cout = x.shape[1] // groups, w.shape[0] // groups
    return np.concatenate([testing.conv2d_nchw_python(x[:, g * cin:(g + 1) * cin],
                                                      w[g * cout:(g + 1) * cout], stride, pad)
                           for g in range(groups)], axis=1)


# (in channels, map, out channels, kernel, stride, pad, dilation, groups)
CASES = {
    "prime3x3": (13, 17, 11, 3, 1, 1, 1, 1),
    "stride2": (7, 15, 19, 3, 2, 1, 1, 1),
    "1x1s2": (16, 14, 31, 1, 2, 0, 1, 1),
    "stem7x7": (3, 23, 8, 7, 2, 3, 1, 1),
    "dilated": (5, 13, 6, 3, 1, 2, 2, 1),
    "depthwise": (12, 11, 12, 3, 2, 1, 1, 12),
    "groups": (6, 9, 9, 3, 1, 1, 1, 3),
}
EXPECTED_IMPL = {"depthwise": "depthwise_conv2d_nchw.gpu_symbolic_batch",
                 "groups": "nn.conv2d.gpu"}  # group convs: the plain schedule (as static)


def _conv_module(case):
    c, h, oc, k, st, pd, dl, g = CASES[case]
    n = relay.Any()
    x = relay.var("x", shape=(n, c, h, h + 2))  # non-square maps
    w = relay.var("w", shape=(oc, c // g, k, k))
    b = relay.var("b", shape=(oc,))
    y = relay.nn.conv2d(x, w, strides=(st, st), padding=(pd, pd), dilation=(dl, dl), groups=g,
                        channels=oc, kernel_size=(k, k))
    y = relay.nn.relu(relay.nn.bias_add(y, b))  # the fused epilogue
    params = {"w": _rand(oc, c // g, k, k), "b": _rand(oc)}
    return tvm.IRModule.from_expr(relay.Function([x, w, b], y)), params


def _ref(case, x, params):
    c, h, oc, k, st, pd, dl, g = CASES[case]
    y = _conv_ref(x, params["w"], st, pd, dl, g) + params["b"][None, :, None, None]
    return np.maximum(y, 0)


def _impl_name(mod, kind, batch):
    """The implementation the GPU strategy picks for the module's conv2d at ``batch`` (None: a
    run-time batch)."""
    mod = relay.transform.InferType()(mod)
    call = mod["main"].body
    while call.op.name != "nn.conv2d":
        call = call.args[0]
    tgt = Target(TARGETS[kind][0])
    d, w = (a.checked_type for a in call.args)
    xs = te.placeholder((te.var("n") if batch is None else batch, *d.shape[1:]), name="x")
    ws = te.placeholder(tuple(w.shape), name="w")
    with tgt:
        return _STRATEGIES["nn.conv2d"].dispatch(tgt)(call.attrs, [xs, ws], call.checked_type,
                                                      tgt).best().name


@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_at_run_time_batch_matches_numpy_opencl(case, tmp_path):
    mod, params = _conv_module(case)
    want_impl = EXPECTED_IMPL.get(case, "conv2d_nchw.gpu_symbolic_batch")
    assert _impl_name(mod, "opencl", None) == want_impl
    if case != "groups":  # a static batch keeps the tunable template
        assert _impl_name(mod, "opencl", 3).endswith(".cuda")
    with _gpu_vm(mod, "opencl", params, tmp_path) as (exe, vm):
        if case != "groups":
            assert "__local float" in exe.lib.imported_modules[0].get_source()  # shared tiles
        c, h = CASES[case][:2]
        for batch in (1, 3, 7, 1):
            x = _rand(batch, c, h, h + 2)
            np.testing.assert_allclose(vm.invoke("main", x).numpy(), _ref(case, x, params),
                                       rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["prime3x3", "stem7x7", "depthwise"])
def test_conv_at_run_time_batch_cuda_ptxas_and_emulation(case, tmp_path):
    """CUDA C of the symbolic-batch kernels: ptxas for sm_80/sm_90 within limits (checked in
    _gpu_vm), then run on the host at batches 1 and 3."""
    mod, params = _conv_module(case)
    assert _impl_name(mod, "cuda", None).endswith(".gpu_symbolic_batch")
    with _gpu_vm(mod, "cuda", params, tmp_path) as (exe, vm):
        assert "__shared__" in exe.lib.imported_modules[0].get_source()
        c, h = CASES[case][:2]
        for batch in (1, 3):
            x = _rand(batch, c, h, h + 2)
            np.testing.assert_allclose(vm.invoke("main", x).numpy(), _ref(case, x, params),
                                       rtol=1e-4, atol=1e-4)


def _winograd_module(c, h, oc):
    n = relay.Any()
    x = relay.var("x", shape=(n, c, h, h + 1))
    w, b = relay.var("w", shape=(oc, c, 3, 3)), relay.var("b", shape=(oc,))
    y = relay.nn.conv2d(x, w, padding=(1, 1), channels=oc, kernel_size=(3, 3))
    y = relay.nn.relu(relay.nn.bias_add(y, b) + relay.const(0.5))
    params = {"w": _rand(oc, c, 3, 3), "b": _rand(oc)}
    return tvm.IRModule.from_expr(relay.Function([x, w, b], y)), params


def _winograd_ref(x, params):
    y = testing.conv2d_nchw_python(x, params["w"], 1, 1) + params["b"][None, :, None, None]
    return np.maximum(y + 0.5, 0)


@pytest.mark.parametrize("kind", ["opencl", "cuda"])
@pytest.mark.parametrize("c,h,oc,hint", [(13, 9, 11, 1), (13, 9, 11, 3), (8, 14, 16, 1)])
def test_winograd_at_run_time_batch(kind, c, h, oc, hint, tmp_path):
    """3x3 stride-1 convs with a run-time batch on Winograd (forced by PassContext): the tile
    axis (batch x tiles per image) tiled for the hint batch, guarded where the tiles do not
    divide it; F(2x2) (9x10 maps) and F(4x4) (14x15); equal to numpy at batches 1, 3, 7 (cuda:
    ptxas within limits, then the host emulation at 1 and 3)."""
    mod, params = _winograd_module(c, h, oc)
    config = {"relay.cuda.winograd": True, "relay.gpu.symbolic_batch_hint": hint}
    with tvm.transform.PassContext(config=config):
        assert _impl_name(mod, kind, None) == "conv2d_nchw_winograd.gpu_symbolic_batch"
        assert _impl_name(mod, kind, 2) == "conv2d_nchw_winograd.cuda"
    with _gpu_vm(mod, kind, params, tmp_path, config) as (exe, vm):
        assert "winograd" in exe.lib.imported_modules[0].get_source()
        for batch in (1, 3, 7) if kind == "opencl" else (1, 3):
            x = _rand(batch, c, h, h + 1)
            np.testing.assert_allclose(vm.invoke("main", x).numpy(), _winograd_ref(x, params),
                                       rtol=1e-4, atol=1e-4)


def test_winograd_rule_applies_to_run_time_batch():
    """Untuned ("auto"): a run-time batch follows the static rule (64+ channels, 7+ maps:
    Winograd above the direct schedule; fewer channels: the direct one)."""
    for c, want in ((64, "conv2d_nchw_winograd.gpu_symbolic_batch"),
                    (32, "conv2d_nchw.gpu_symbolic_batch")):
        mod, _ = _winograd_module(c, 8, 64)
        assert _impl_name(mod, "cuda", None) == want


def test_batch_hint_sets_the_tiles():
    """The tiles of a run-time batch are the untuned rule's at the hint batch: a small map with
    many channels shrinks its per-thread tile to fill the grid at batch 1, not at batch 16;
    PassContext relay.gpu.symbolic_batch_hint chooses; a bad hint is an error."""
    from tvmpy.relay.op.strategy import gpu as gpu_strategy
    from tvmpy.topi import nn
    from tvmpy.topi.cuda import conv2d_direct

    d = te.placeholder((te.var("n"), 256, 7, 7), name="d")
    k = te.placeholder((256, 256, 3, 3), name="k")
    conv = nn.conv2d_nchw(d, k, 1, 1, 1, "float32")

    def per_thread(hint):
        cfg = gpu_strategy._FixedTiles({})
        with Target("cuda"):
            conv2d_direct.fallback_entities(cfg, conv, hint)
        assert cfg["tile_n"].size == [-1, 1, 1, 1]  # one image per block: no batch guard
        return cfg["tile_f"].size[3] * cfg["tile_y"].size[3] * cfg["tile_x"].size[1]

    assert per_thread(16) > per_thread(1)
    assert gpu_strategy.symbolic_batch_hint() == gpu_strategy.SYMBOLIC_BATCH_HINT
    with tvm.transform.PassContext(config={"relay.gpu.symbolic_batch_hint": 16}):
        assert gpu_strategy.symbolic_batch_hint() == 16
    with tvm.transform.PassContext(config={"relay.gpu.symbolic_batch_hint": 0}), \
            pytest.raises(ValueError, match="symbolic_batch_hint"):
        gpu_strategy.symbolic_batch_hint()


def test_hint_changes_the_kernel_not_the_result(tmp_path):
    """Built with hint 1 and hint 16, the same symbolic-batch conv gives different kernels
    (launch shapes) and the same outputs at batches 1 and 5."""
    n = relay.Any()
    x = relay.var("x", shape=(n, 64, 7, 7))
    w = relay.var("w", shape=(64, 64, 3, 3))
    mod = tvm.IRModule.from_expr(relay.Function(
        [x, w], relay.nn.conv2d(x, w, padding=(1, 1), channels=64, kernel_size=(3, 3))))
    params = {"w": _rand(64, 64, 3, 3)}
    xs = {b: _rand(b, 64, 7, 7) for b in (1, 5)}
    srcs, outs = [], []
    for hint in (1, 16):
        with _gpu_vm(mod, "opencl", params, tmp_path,
                     {"relay.gpu.symbolic_batch_hint": hint}) as (exe, vm):
            srcs.append(exe.lib.imported_modules[0].get_source())
            outs.append({b: vm.invoke("main", v).numpy() for b, v in xs.items()})
    assert srcs[0] != srcs[1]
    for b, v in xs.items():
        want = testing.conv2d_nchw_python(v, params["w"], 1, 1)
        for o in outs:
            np.testing.assert_allclose(o[b], want, rtol=1e-4, atol=1e-4)


def _resnet_like():
    """A ResNet-18-like graph at a run-time batch: 7x7/2 stem + BN-like scale/shift + relu,
    3x3/2 max pool, a basic block, a strided block with a 1x1/2 downsample, global average
    pool, dense + bias, softmax."""
    n = relay.Any()
    x = relay.var("x", shape=(n, 3, 29, 29))
    params: dict = {}

    def var(name, *shape):
        params[name] = _rand(*shape) * (0.5 if len(shape) == 4 else 1.0)
        return relay.var(name, shape=shape)

    def conv(y, name, cin, cout, k, s):
        return relay.nn.conv2d(y, var(name, cout, cin, k, k), strides=(s, s),
                               padding=(k // 2, k // 2), channels=cout, kernel_size=(k, k))

    def bias(y, name, c):
        return relay.nn.bias_add(y, var(name, c))

    y = relay.nn.relu(bias(conv(x, "w0", 3, 8, 7, 2), "b0", 8) * var("s0", 8, 1, 1))
    y = relay.nn.max_pool2d(y, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    h = relay.nn.relu(bias(conv(y, "w1", 8, 8, 3, 1), "b1", 8))
    y = relay.nn.relu(bias(conv(h, "w2", 8, 8, 3, 1), "b2", 8) + y)
    h = relay.nn.relu(bias(conv(y, "w3", 8, 13, 3, 2), "b3", 13))
    y = relay.nn.relu(bias(conv(h, "w4", 13, 13, 3, 1), "b4", 13)
                      + bias(conv(y, "w5", 8, 13, 1, 2), "b5", 13))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(y, var("fc", 10, 13)), var("fcb", 10)))
    fn = relay.Function(relay.analysis.free_vars(y), y)
    return tvm.IRModule.from_expr(fn), params


@pytest.mark.parametrize("kind,winograd", [("opencl", "auto"), ("opencl", True),
                                           ("cuda", "auto")])
def test_resnet_like_graph_at_run_time_batch(kind, winograd, tmp_path):
    """The whole graph through the GPU VM at batches 1, 3, 7 (cuda's emulation: 1, 3) against
    the CPU VM of the same module (llvm), every conv on a symbolic-batch template (the 3x3
    stride-1 ones on Winograd where forced)."""
    mod, params = _resnet_like()
    with tvm.transform.PassContext(opt_level=3):
        cpu = VirtualMachine(relay.vm.compile(mod, target="llvm", params=params), tvm.cpu())
    with _gpu_vm(mod, kind, params, tmp_path, {"relay.cuda.winograd": winograd}) as (exe, vm):
        assert ("winograd" in exe.lib.imported_modules[0].get_source()) == (winograd is True)
        src = exe.lib.imported_modules[0].get_source()
        assert src.count("__shared__" if kind == "cuda" else "__local float") >= 2 * 6
        for batch in (1, 3, 7) if kind == "opencl" else (1, 3):
            xv = _rand(batch, 3, 29, 29)
            np.testing.assert_allclose(vm.invoke("main", xv).numpy(),
                                       cpu.invoke("main", xv).numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_dense_run_time_rows_as_virtual_threads(kind, tmp_path, monkeypatch):
    """SYMBOLIC_ROWS_VTHREADS 4 (bench/gpu_dynamic.py's variant rows64): 64-row blocks, each
    thread 4 guarded rows as virtual threads; equal to numpy at row counts around the block
    (1, 15, 17, 64, 65, 130); cuda: no stack, no spills (checked in _gpu_vm)."""
    from tvmpy.relay.op.strategy import gpu as gpu_strategy

    monkeypatch.setattr(gpu_strategy, "SYMBOLIC_ROWS_VTHREADS", 4)
    x = relay.var("x", shape=(relay.Any(), 96))
    w, b = relay.var("w", shape=(67, 96)), relay.var("b", shape=(67,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))
    mod = tvm.IRModule.from_expr(relay.Function([x, w, b], y))
    params = {"w": _rand(67, 96), "b": _rand(67)}
    with _gpu_vm(mod, kind, params, tmp_path) as (exe, vm):
        if kind == "cuda":
            for per_kernel in exe.lib.imported_modules[0].ptxas_info.values():
                assert all(i.stack_bytes == 0 for i in per_kernel.values()), per_kernel
        for m in (1, 15, 17, 64, 65, 130) if kind == "opencl" else (1, 17, 65):
            xv = _rand(m, 96)
            want = np.maximum(xv @ params["w"].T + params["b"], 0)
            np.testing.assert_allclose(vm.invoke("main", xv).numpy(), want, rtol=1e-5,
                                       atol=1e-5)
