"""Whole models through ``relay.build(target="opencl")`` on PoCL's CPU device, against
onnxruntime (ResNet-18, MobileNetV2 at 32x32, a one-layer BERT encoder): max |diff| within
1e-4 of the output's magnitude; the same models through ``target="cuda"`` (NVRTC + ptxas, run
host-emulated), the device-resident graph executor, export/load and the CLI."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.contrib import graph_executor
from tvmpy.relay.testing import compare, onnx_models

MODELS = {
    "resnet18": lambda: onnx_models.resnet18(image=32, classes=10),
    "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=32, classes=10),
    "bert_encoder": lambda: onnx_models.bert_encoder(layers=1, hidden=64, heads=4, seq=16),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_on_opencl_matches_onnxruntime(name):
    m = MODELS[name]()
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target="opencl")
    g = graph_executor.GraphModule(lib["default"](tvm.opencl(0)))  # storage on the device
    for k, v in feeds.items():
        g.set_input(k, v)
    g.run()
    outs = [g.get_output(i) for i in range(g.get_num_outputs())]
    assert all(o.device == tvm.opencl(0) for o in outs)
    got = [o.numpy() for o in outs]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.abs(w).max() > 0
        _, rel = compare.errors(g, w)
        assert rel <= 1e-4, (name, rel)


def test_gpu_build_keeps_nchw_and_cpu_build_unchanged():
    """The GPU build has no NCHWc layout rewrite; the CPU build of the same model still has."""
    m = onnx_models.resnet18(image=32, classes=10)
    feeds = onnx_models.input_feeds(m)
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    gpu, _ = compare.build(mod, params, opt_level=3, target="opencl")
    cpu, _ = compare.build(mod, params, opt_level=3, target="llvm")
    assert "NCHWc" not in gpu.get_graph_json() and "layout_transform" not in gpu.get_graph_json()
    assert "NCHW" in cpu.get_graph_json() and "c" in cpu.get_graph_json()
    host = compare.tvm_runner(gpu)(feeds)  # a GPU library also runs from host storage
    assert np.isfinite(host[0]).all()
    src = gpu.get_lib().imported_modules[0].get_source()
    assert "__kernel" in src and "get_group_id" in src


def test_exported_gpu_model_runs_on_device(tmp_path):
    """export_library embeds the kernels and the launch plans; the loaded factory runs on
    tvm.opencl(0) with the same result."""
    m = onnx_models.mobilenet_v2(image=32, classes=10)
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)[0]
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target="opencl")
    path = str(tmp_path / "mnv2.so")
    lib.export_library(path)
    g = graph_executor.GraphModule(tvm.runtime.load_module(path)["default"](tvm.opencl(0)))
    g.set_input(**feeds)
    g.run()
    _, rel = compare.errors(g.get_output(0).numpy(), want)
    assert rel <= 1e-4


def test_tuned_implementation_hook_serves_gpu_strategies():
    """The one tuned-implementation hook: the "gpu" dense strategy asks it for ``dense.cuda``,
    whose implementation (plevel 20) replaces the plain schedule (plevel 10)."""
    from tvmpy import relay
    from tvmpy.relay.op import strategy
    from tvmpy.relay.op.strategy.generic import COMPUTES
    from tvmpy.topi import cuda

    used = []

    def sched(attrs, outs, target):
        used.append(target.kind)
        return cuda.schedule_fallback(outs, target)

    def tuned(attrs, inputs, out_type, target):
        return COMPUTES["nn.dense"], sched

    saved = strategy._TUNED["dense.cuda"]
    strategy._TUNED["dense.cuda"] = tuned
    try:
        x = relay.var("x", shape=(2, 3), dtype="float32")
        w = relay.var("w", shape=(4, 3), dtype="float32")
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x, w], relay.nn.dense(x, w))),
                          target="opencl")
        g = graph_executor.GraphModule(lib["default"](tvm.opencl(0)))
        a, b = np.random.rand(2, 3).astype("float32"), np.random.rand(4, 3).astype("float32")
        g.set_input(x=a, w=b)
        g.run()
        np.testing.assert_allclose(g.get_output(0).numpy(), a @ b.T, rtol=1e-5)
        assert used == ["opencl"]
    finally:
        strategy._TUNED["dense.cuda"] = saved


def test_cli_compile_opencl_and_run_on_device(tmp_path):
    """``tvmpy compile model.onnx --target opencl`` then ``tvmpy run --device opencl``."""
    import os
    import subprocess
    import sys

    import onnx

    m = onnx_models.resnet18(image=32, classes=10, seed=5)
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)[0]
    onnx.save(m, str(tmp_path / "r18.onnx"))
    (name, value), = feeds.items()
    np.save(tmp_path / "x.npy", value)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def cli(*args):
        r = subprocess.run([sys.executable, "-m", "tvmpy", *args], capture_output=True,
                           text=True, timeout=240, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return r.stdout

    cli("compile", "r18.onnx", "--target", "opencl", "-o", "r18.so")
    cli("run", "r18.so", "--input", f"{name}=x.npy", "--device", "opencl", "--output", "o.npz")
    got = np.load(tmp_path / "o.npz")["output0"]
    assert compare.errors(got, want)[1] <= 1e-4


def test_bert_for_cuda_runs_host_emulated(tmp_path):
    """relay.build(target="cuda"): CUDA C compiled by NVRTC and assembled by ptxas (no GPU
    here), then the kernels compiled for the host (testing.cuda_fake) run behind the graph
    executor on tvm.cuda(0) (storage in the fake device's memory): equal onnxruntime. (The
    CNNs' template kernels emulate slowly, a thread per OS thread: built only, below.)"""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    m = MODELS["bert_encoder"]()
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    # 64 threads per block: the emulation runs each thread of a barrier kernel as an OS thread
    lib, _ = compare.build(mod, params, opt_level=3, target="cuda -max_num_threads=64")
    glib = lib.get_lib()
    assert glib.imported_modules[0].ptxas_info  # ptxas accepted every kernel
    host = HostKernels(glib.imported_modules[0].get_source(), glib.plan["kernels"], str(tmp_path))
    drv = FakeDriver(host.kernels)
    prev = cuda_module.set_driver(drv)
    try:
        g = graph_executor.GraphModule(lib["default"](tvm.cuda(0)))
        g.set_input(**feeds)
        g.run()
        got = [g.get_output(i).numpy() for i in range(g.get_num_outputs())]
        for gv, w in zip(got, want):
            assert compare.errors(gv, w)[1] <= 1e-4
        # CUDA graphs (runtime/graph_executor/cuda_graph.py): the first run captures, later
        # runs replay the recorded launches; new inputs every run, same results as plain runs
        cg = graph_executor.GraphModule(lib["default"](tvm.cuda(0), use_cuda_graph=True))
        rng = np.random.default_rng(29)
        for _ in range(3):
            new = {k: rng.permutation(v.ravel()).reshape(v.shape) for k, v in feeds.items()}
            assert all(not np.array_equal(new[k], v) for k, v in feeds.items())
            cg.run(**new)
            g.run(**new)
            ref = compare.ort_runner(m)(new)
            for i, w in enumerate(ref):
                gv = cg.get_output(i).numpy()
                np.testing.assert_array_equal(gv, g.get_output(i).numpy())
                assert compare.errors(gv, w)[1] <= 1e-4
        info = cg.module.cuda_graph_info()
        assert len(info["graphs"]) == 1 and info["plain"] == [] and drv.graph_launches == 2
        assert drv.capture_errors == []
    finally:
        cuda_module.set_driver(prev)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_cnn_for_cuda_passes_ptxas(name):
    """The default CUDA target (1024 threads per block): every kernel assembles with ptxas."""
    m = MODELS[name]()
    feeds = onnx_models.input_feeds(m)
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target="cuda")
    dev_mod = lib.get_lib().imported_modules[0]
    assert dev_mod.ptxas_info and "__global__" in dev_mod.get_source()


def test_bert_for_nvptx_runs_host_emulated(tmp_path):
    """target "nvptx" (LLVM's NVPTX back end through llvmlite): the BERT encoder's kernels, their
    LLVM IR JIT-compiled for the host, equal onnxruntime."""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    m = MODELS["bert_encoder"]()
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)[0]
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target="nvptx -max_num_threads=64")
    glib = lib.get_lib()
    assert ".entry" in glib.imported_modules[0].get_source("ptx")
    host = HostKernels.from_nvptx(glib.imported_modules[0].get_source(), glib.plan["kernels"],
                                  str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        g = graph_executor.GraphModule(lib["default"](tvm.cuda(0)))
        g.set_input(**feeds)
        g.run()
        got = g.get_output(0).numpy()
    finally:
        cuda_module.set_driver(prev)
    assert compare.errors(got, want)[1] <= 1e-4


def test_target_host_checked():
    from tvmpy import relay

    x = relay.var("x", shape=(3, 4))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x)))
    lib = relay.build(mod, target="opencl", target_host="llvm")
    g = graph_executor.GraphModule(lib["default"](tvm.opencl(0)))
    a = np.random.rand(3, 4).astype("float32")
    g.set_input("x", a)
    g.run()
    np.testing.assert_allclose(g.get_output(0).numpy(), np.exp(a), rtol=1e-6)
    with pytest.raises(ValueError, match="target_host .* is not a CPU target"):
        relay.build(mod, target="opencl", target_host="opencl")
