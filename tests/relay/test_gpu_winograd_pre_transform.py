"""GPU Winograd with the weight transformed at build time (``relay/op/strategy/gpu_alter_op.py``):
the GPU AlterOpLayout rewrites a conv2d the strategy runs as ``conv2d_nchw_winograd.cuda`` into
``nn.contrib_conv2d_winograd_weight_transform`` + ``reshape`` +
``nn.contrib_conv2d_winograd_without_weight_transform``, and FoldConstant folds the transform of
a bound weight. Checked against numpy through ``relay.build(target="opencl")`` on PoCL (no
weight-transform kernel with bound weights, one with a weight given at run time; odd maps,
prime channel counts, batch > 1, both tile sizes; bias + residual + relu fused), through
``target="cuda"`` (NVRTC + ptxas, then the generated CUDA C run host-emulated), with a tuned
record of the original task (its config applies), task extraction, ToMixedPrecision, the
interpreter and a CPU build of the new operator."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.autotvm.measure.local_builder import gpu_limits
from tvmpy.autotvm.measure.measure import MeasureInput, MeasureResult
from tvmpy.contrib import graph_executor
from tvmpy.target import Target
from tvmpy.tir.analysis import gpu_code_errors
from tvmpy.topi import testing
from tvmpy.topi.cuda import winograd_tile_size

RNG = np.random.default_rng(2912)
OPENCL = Target("opencl")
PRE = "relay.cuda.winograd_pre_transform"
CONV_OP = "nn.contrib_conv2d_winograd_without_weight_transform"
WT_OP = "nn.contrib_conv2d_winograd_weight_transform"


@pytest.fixture(scope="module")
def dev():
    d = tvm.opencl(0)
    assert d.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return d


def _rand(*shape):
    return RNG.uniform(-1.0, 1.0, size=shape).astype("float32")


def _block(n, c, h, w, oc, pad, bias=False, residual=False, relu=False):
    """conv2d (3x3, stride 1) [+ bias] [+ residual x] [+ relu] of x [n, c, h, w] and w."""
    x = relay.var("x", shape=(n, c, h, w))
    wt = relay.var("w", shape=(oc, c, 3, 3))
    y = relay.nn.conv2d(x, wt, padding=(pad, pad), channels=oc, kernel_size=(3, 3))
    if bias:
        y = relay.nn.bias_add(y, relay.var("b", shape=(oc,)))
    if residual:
        y = relay.add(y, x)
    if relu:
        y = relay.nn.relu(y)
    return tvm.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))


def _ref(xa, wa, pad, ba=None, residual=False, relu=False):
    y = testing.conv2d_nchw_python(xa, wa, 1, pad)
    if ba is not None:
        y = y + ba[None, :, None, None]
    if residual:
        y = y + xa
    return np.maximum(y, 0) if relu else y


def _build(mod, params, target="opencl", winograd=True, pre=True, ctx=None):
    cfg = {"relay.cuda.winograd": winograd, PRE: pre}
    with tvm.transform.PassContext(opt_level=3, config=cfg), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no tuned config"
        if ctx is None:
            return relay.build(mod, target=target, params=params)
        with ctx:
            return relay.build(mod, target=target, params=params)


def _funcs(lib):
    """The graph's kernel calls (fused function names, in order)."""
    gj = json.loads(lib.get_graph_json())
    return [n["attrs"]["func_name"] for n in gj["nodes"] if n["op"] == "tvm_op"]


def _run(lib, dev, **inputs):
    g = graph_executor.GraphModule(lib["default"](dev))
    for k, v in inputs.items():
        g.set_input(k, v)
    g.run()
    return g.get_output(0).numpy()


def _assert_close(got, ref, rel=1e-5):
    err = float(np.abs(got - ref).max()) / float(np.abs(ref).max())
    assert err <= rel, err


@pytest.mark.parametrize("n,c,h,w,oc,pad", [
    (1, 5, 9, 7, 6, 1),       # odd map: F(2x2) (4x4 tiles waste too much of 9x7)
    (1, 7, 16, 16, 11, 1),    # 16 tiles of 4x4: F(4x4), prime channels
    (3, 13, 7, 7, 17, 1),     # batch 3, the 7x7 map (12 tiles of F(4x4)... F(2x2) by the rule)
    (2, 3, 13, 11, 5, 0),     # no padding, batch 2, partial tiles
    (1, 1, 1, 1, 1, 1),       # one pixel, one channel
])
def test_constant_weight_transformed_at_build(dev, n, c, h, w, oc, pad):
    """Bound weights: the deployed graph holds the transformed weight ([alpha, alpha, CI, CO])
    and no weight-transform kernel; the result equals numpy and the in-operator transform's."""
    xa, wa = _rand(n, c, h, w), _rand(oc, c, 3, 3)
    mod = _block(n, c, h, w, oc, pad)
    ref = _ref(xa, wa, pad)
    lib = _build(mod, {"w": wa})
    funcs = _funcs(lib)
    assert funcs and all("weight_transform" not in f or "without" in f for f in funcs), funcs
    assert any("without_weight_transform" in f for f in funcs), funcs
    oh, ow = ref.shape[2:]
    alpha = winograd_tile_size(oh, ow, n) + 2
    shapes = [tuple(v.shape) for v in lib.get_params().values()]
    assert (alpha, alpha, c, oc) in shapes and (oc, c, 3, 3) not in shapes, shapes
    _assert_close(_run(lib, dev, x=xa), ref)
    # off: the transform inside the operator (its first kernel), the same numbers
    off = _build(mod, {"w": wa}, pre=False)
    assert not any("without_weight_transform" in f for f in _funcs(off))
    assert "winograd_U" in off.get_lib().imported_modules[0].get_source()
    _assert_close(_run(off, dev, x=xa), ref)


@pytest.mark.parametrize("n,c,h,w,oc", [(1, 6, 9, 7, 5), (2, 7, 16, 16, 3)])
def test_weight_given_at_run_time(dev, n, c, h, w, oc):
    """A weight that is a graph input: the transform runs as its own kernel (one, before the
    convolution) on the weight given at each run."""
    mod = _block(n, c, h, w, oc, 1, bias=True)
    ba = _rand(oc)
    lib = _build(mod, {"b": ba})
    funcs = _funcs(lib)
    wt_calls = [f for f in funcs if "weight_transform" in f and "without" not in f]
    assert len(wt_calls) == 1, funcs
    assert funcs.index(wt_calls[0]) < next(i for i, f in enumerate(funcs) if "without" in f)
    src = lib.get_lib().imported_modules[0].get_source()
    assert len(re.findall(r"winograd_weight_transform_kernel\d+\(", src)) == 1  # one kernel
    g = graph_executor.GraphModule(lib["default"](dev))
    xa = _rand(n, c, h, w)
    for _ in range(2):  # a new weight each run: transformed again
        wa = _rand(oc, c, 3, 3)
        g.set_input("x", xa)
        g.set_input("w", wa)
        g.run()
        _assert_close(g.get_output(0).numpy(), _ref(xa, wa, 1, ba))


@pytest.mark.parametrize("h", [9, 16])
def test_fused_bias_residual_relu_epilogue(dev, h):
    """bias + residual add + relu fused into the pre-transformed Winograd's output kernel: one
    fused function, three kernels (input transform, products, output transform + epilogue)."""
    c = 64
    xa, wa, ba = _rand(1, c, h, h), _rand(c, c, 3, 3), _rand(c)
    mod = _block(1, c, h, h, c, 1, bias=True, residual=True, relu=True)
    lib = _build(mod, {"w": wa, "b": ba}, winograd="auto")  # the rule: 64 channels, map >= 7
    funcs = _funcs(lib)
    assert len(funcs) == 1 and "without_weight_transform" in funcs[0] \
        and "bias_add_add_nn_rel" in funcs[0], funcs  # (names are cut at 80 characters)
    src = lib.get_lib().imported_modules[0].get_source()
    assert len(re.findall(r"^__kernel void .* (\w+_kernel\d+)\(", src, re.M)) == 3
    _assert_close(_run(lib, dev, x=xa), _ref(xa, wa, 1, ba, residual=True, relu=True))


def test_rule_keeps_small_layers_direct():
    """Untuned, fewer than 64 channels: the direct template, nothing rewritten."""
    mod = _block(1, 16, 9, 9, 16, 1)
    lib = _build(mod, {"w": _rand(16, 16, 3, 3)}, winograd="auto")
    assert not any("winograd" in f for f in _funcs(lib))


@pytest.mark.parametrize("weight_bound", [True, False])
def test_cuda_ptxas_and_host_emulation(tmp_path, weight_bound):
    """target "cuda": every kernel through NVRTC + ptxas for sm_80 and sm_90 (no spills, shared
    memory within 48 KB), then the generated CUDA C run host-emulated behind the graph
    executor: equal to numpy, with the weight bound (folded) and given at run time (the
    transform kernel)."""
    n, c, h, w, oc = 2, 5, 9, 7, 6
    xa, wa, ba = _rand(n, c, h, w), _rand(oc, c, 3, 3), _rand(oc)
    mod = _block(n, c, h, w, oc, 1, bias=True, relu=True)
    params = {"w": wa, "b": ba} if weight_bound else {"b": ba}
    lib = _build(mod, params, target="cuda -max_num_threads=64")
    funcs = _funcs(lib)
    assert any("without_weight_transform" in f for f in funcs)
    assert any("weight_transform" in f and "without" not in f for f in funcs) != weight_bound
    glib = lib.get_lib()
    dev_mod = glib.imported_modules[0]
    assert sorted(dev_mod.ptxas_info) == ["sm_80", "sm_90"]
    for per_kernel in dev_mod.ptxas_info.values():
        for info in per_kernel.values():
            assert info.spill_stores == 0 and info.spill_loads == 0, info
            assert info.shared_bytes <= 48 * 1024, info
    inputs = {"x": xa} if weight_bound else {"x": xa, "w": wa}
    got = _run_cuda(lib, str(tmp_path), **inputs)
    _assert_close(got, _ref(xa, wa, 1, ba, relu=True))


class _Recorder(autotvm.task.DispatchContext):
    """Records the workloads queried; answers from ``best`` (workload -> config)."""

    def __init__(self, best):
        super().__init__()
        self.best, self.queried = best, []

    def _query_inside(self, target, workload):
        self.queried.append(workload)
        return self.best.get(workload)

    def _cost_inside(self, target, workload):
        return 1e-4 if workload in self.best else None


def test_tuned_config_of_the_original_task_applies(dev):
    """A record of ``conv2d_nchw_winograd.cuda`` for the original conv2d (weight OIHW) is the
    config of the pre-transformed build: the product kernel's work-group size is the record's
    (not the fallback's), with the transform on and off; the record also decides the Winograd
    choice (a conv with 16 channels, which the untuned rule keeps direct)."""
    n, c, h, oc = 1, 16, 10, 16
    xa, wa = _rand(n, c, h, h), _rand(oc, c, 3, 3)
    args = (("TENSOR", (n, c, h, h), "float32"), ("TENSOR", (oc, c, 3, 3), "float32"),
            (1, 1), (1, 1, 1, 1), (1, 1), "float32")
    task = autotvm.task.create("conv2d_nchw_winograd.cuda", args, target=OPENCL)
    mod = _block(n, c, h, h, oc, 1)
    fallback = re.search(r"reqd_work_group_size\((\d+), (\d+), 1\)\)\) \w+winograd\w+_kernel1\(",
                         _build(mod, {"w": wa}).get_lib().imported_modules[0].get_source())
    assert fallback is not None
    chosen = None
    for idx in RNG.permutation(len(task.config_space))[:200]:
        cfg = task.config_space.get(int(idx))
        if cfg["auto_unroll_max_step"].val > 512:
            continue
        s, tensors = task.instantiate(cfg)
        if gpu_code_errors(tvm.lower(s, tensors, target=OPENCL), gpu_limits(OPENCL)):
            continue
        if (cfg["tile_x"].size[2], cfg["tile_y"].size[2]) != tuple(
                int(v) for v in fallback.groups()):
            chosen = cfg
            break
    assert chosen is not None
    want = f"reqd_work_group_size({chosen['tile_x'].size[2]}, {chosen['tile_y'].size[2]}, 1)"
    rec = (MeasureInput(OPENCL, task, chosen), MeasureResult((1e-4,), 0, 0.1, 1.0))
    for pre in (True, False):
        ctx = autotvm.apply_history_best([rec])
        lib = _build(mod, {"w": wa}, winograd="auto", pre=pre, ctx=ctx)
        funcs = _funcs(lib)
        assert any(("without_weight_transform" in f) == pre and "winograd" in f for f in funcs) \
            or (not pre and any("conv2d" in f for f in funcs)), funcs
        src = lib.get_lib().imported_modules[0].get_source()
        assert "winograd_M" in src and want in src, (pre, want)
        _assert_close(_run(lib, dev, x=xa), _ref(xa, wa, 1))
    # the workload queried for the pre-transformed operator is the original task's
    rec_ctx = _Recorder({task.workload: chosen})
    _build(mod, {"w": wa}, winograd="auto", ctx=rec_ctx)
    assert task.workload in rec_ctx.queried
    assert all(wk[0] in ("conv2d_nchw.cuda", "conv2d_nchw_winograd.cuda")
               for wk in rec_ctx.queried), rec_ctx.queried


@pytest.mark.parametrize("weight_bound", [True, False])
def test_task_extraction_lists_the_original_tasks(weight_bound):
    """Extraction lowers with the rewrite: still the original call's two tasks (direct and
    Winograd, weight OIHW), nothing for the weight transform."""
    c = 64
    mod = _block(1, c, 9, 9, c, 1, bias=True)
    params = {"w": _rand(c, c, 3, 3), "b": _rand(c)} if weight_bound else {"b": _rand(c)}
    with tvm.transform.PassContext(config={PRE: True}):
        tasks = autotvm.task.extract_from_program(mod["main"], target="opencl", params=params)
    assert sorted(t.name for t in tasks) == ["conv2d_nchw.cuda", "conv2d_nchw_winograd.cuda"]
    for t in tasks:
        assert t.args[1] == ("TENSOR", (c, c, 3, 3), "float32"), t.args
    tasks = autotvm.task.extract_from_program(mod["main"], target="opencl", params=params,
                                              ops=(relay.op.get("nn.conv2d"),))
    assert len(tasks) == 2


def _altered(mod, params):
    """The module after the build's passes up to the AlterOpLayout (and FoldConstant)."""
    mod = relay.transform.InferType()(mod)
    if params:
        mod = relay.transform.InferType()(relay.transform.BindParams(params)(mod))
    with OPENCL, tvm.transform.PassContext(opt_level=3, config={"relay.cuda.winograd": True}):
        mod = relay.transform.AlterOpLayout()(mod)
        mod = relay.transform.FoldConstant()(mod)
    return relay.transform.InferType()(mod)


def _calls(mod):
    calls = []
    relay.analysis.post_order_visit(
        mod["main"].body, lambda e: calls.append(e) if isinstance(e, relay.Call) else None)
    return calls


def _ops(mod):
    return [e.op.name for e in _calls(mod) if hasattr(e.op, "name")]


def _run_cuda(lib, workdir, **inputs):
    """The generated CUDA C run host-emulated behind the graph executor on tvm.cuda(0)."""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    glib = lib.get_lib()
    host = HostKernels(glib.imported_modules[0].get_source(), glib.plan["kernels"], workdir)
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        return _run(lib, tvm.cuda(0), **inputs)
    finally:
        cuda_module.set_driver(prev)


def test_mixed_precision_keeps_the_pre_transformed_winograd_in_float32(tmp_path):
    """ToMixedPrecision("float16") after the rewrite: the Winograd stays float32 (its operands
    cast back), the relu after it runs in float16; the CUDA build (ptxas, host emulation: PoCL
    here has no float16) is correct to float16's rounding. Before the rewrite (the usual
    order): the float16 conv2d is not rewritten."""
    n, c, h, oc = 1, 8, 9, 8
    xa, wa, w2 = _rand(n, c, h, h), _rand(oc, c, 3, 3), _rand(5, oc, 1, 1)
    x = relay.var("x", shape=(n, c, h, h))
    w = relay.var("w", shape=(oc, c, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1), channels=oc, kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, relay.const(w2), channels=5, kernel_size=(1, 1))  # float16
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    ref = testing.conv2d_nchw_python(_ref(xa, wa, 1, relu=True), w2, 1, 0)
    for params in ({"w": wa}, None):
        alt = _altered(mod, params)
        assert CONV_OP in _ops(alt) and (WT_OP in _ops(alt)) == (params is None)
        mp = relay.transform.InferType()(relay.transform.ToMixedPrecision("float16")(alt))
        calls = _calls(mp)
        conv = [e for e in calls if getattr(e.op, "name", "") == CONV_OP]
        assert len(conv) == 1 and conv[0].checked_type.dtype == "float32"
        assert all(a.checked_type.dtype == "float32" for a in conv[0].args)
        pointwise = [e for e in calls if getattr(e.op, "name", "") == "nn.conv2d"]
        assert [e.args[0].checked_type.dtype for e in pointwise] == ["float16"]
        lib = _build(mp, None, target="cuda -max_num_threads=64")
        inputs = {"x": xa} if params else {"x": xa, "w": wa}
        got = _run_cuda(lib, str(tmp_path), **inputs)
        _assert_close(got, ref, rel=3e-3)
    mp = relay.transform.ToMixedPrecision("float16")(relay.transform.InferType()(mod))
    lib = _build(mp, {"w": wa}, target="cuda")
    assert not any("winograd" in f for f in _funcs(lib))  # float16: not Winograd-eligible


def test_interpreter_and_cpu_build_of_the_new_operator():
    """The rewritten module's numpy meaning (relay's interpreter: numpy_impl) and a CPU build
    of it (the generic strategy) equal the direct convolution."""
    n, c, h, w, oc = 2, 5, 9, 7, 3
    xa, wa = _rand(n, c, h, w), _rand(oc, c, 3, 3)
    ref = _ref(xa, wa, 1)
    for params in ({"w": wa}, None):
        alt = _altered(_block(n, c, h, w, oc, 1), params)
        assert CONV_OP in _ops(alt)
        inputs = {"x": xa} if params else {"x": xa, "w": wa}
        got = relay.create_executor("debug", mod=alt).evaluate()(**inputs)
        _assert_close(got.numpy(), ref)
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(alt, target="llvm")
        _assert_close(_run(lib, tvm.cpu(0), **inputs), ref)


def test_type_relation_checks_the_transformed_weight():
    x = relay.var("x", shape=(1, 4, 8, 8))
    u = relay.var("u", shape=(6, 6, 4, 5))
    ok = relay.nn.contrib_conv2d_winograd_without_weight_transform(x, u, 4, padding=(1, 1))
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x, u], ok)))
    assert tuple(mod["main"].body.checked_type.shape) == (1, 5, 8, 8)
    for bad in (relay.nn.contrib_conv2d_winograd_without_weight_transform(x, u, 2),
                relay.nn.contrib_conv2d_winograd_without_weight_transform(
                    relay.var("y", shape=(1, 3, 8, 8)), u, 4)):
        with pytest.raises(Exception, match="winograd_without_weight_transform"):
            relay.transform.InferType()(tvm.IRModule.from_expr(
                relay.Function(relay.analysis.free_vars(bad), bad)))
    with pytest.raises(ValueError, match="PassContext config"):
        with tvm.transform.PassContext(opt_level=3, config={PRE: "yes"}):
            relay.build(_block(1, 64, 9, 9, 64, 1), target="opencl",
                        params={"w": _rand(64, 64, 3, 3)})


@pytest.mark.parametrize("weight_bound", [True, False])
def test_vm_on_opencl(dev, weight_bound):
    """relay.vm.compile runs the same passes: the VM on PoCL computes the pre-transformed
    Winograd (the weight folded, or transformed by its own kernel) equal to numpy."""
    from tvmpy.runtime.vm import VirtualMachine

    n, c, h, w, oc = 2, 7, 9, 7, 5
    xa, wa, ba = _rand(n, c, h, w), _rand(oc, c, 3, 3), _rand(oc)
    mod = _block(n, c, h, w, oc, 1, bias=True, relu=True)
    params = {"w": wa, "b": ba} if weight_bound else {"b": ba}
    with tvm.transform.PassContext(opt_level=3, config={"relay.cuda.winograd": True}), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exe = relay.vm.compile(mod, target="opencl", params=params)
    funcs = [n["attrs"]["func_name"] for seg in exe.segments
             for n in json.loads(seg.graph_json)["nodes"] if n["op"] == "tvm_op"]
    assert any("without_weight_transform" in f for f in funcs), funcs
    assert any("weight_transform" in f and "without" not in f for f in funcs) != weight_bound
    vm = VirtualMachine(exe, dev)
    args = [xa] if weight_bound else [xa, wa]
    got = vm.invoke("main", *[tvm.nd.array(a, dev) for a in args])
    _assert_close(got.numpy(), _ref(xa, wa, 1, ba, relu=True))
