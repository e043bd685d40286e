"""Whole models through ``relay.build(target="webgpu")`` on wgpu-py (lavapipe in CI), against
onnxruntime: a small CNN (MobileNetV2 at 32x32, ResNet-18 at 32x32), a one-layer BERT
encoder, an LSTM and a GRU; the exported web artefact (with its wasm32 CPU fallback) loads back and runs."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.contrib import graph_executor
from tvmpy.relay.testing import compare, onnx_models

MODELS = {
    "resnet18": lambda: onnx_models.resnet18(image=32, classes=10),
    "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=32, classes=10),
    "bert_encoder": lambda: onnx_models.bert_encoder(layers=1, hidden=64, heads=4, seq=16),
    "lstm": lambda: onnx_models.recurrent("LSTM"),  # the plan's loop steps (scan time steps)
    "gru": lambda: onnx_models.recurrent("GRU"),
}


def _run(factory, dev, feeds):
    g = graph_executor.GraphModule(factory["default"](dev))
    for k, v in feeds.items():
        g.set_input(k, v)
    g.run()
    return [g.get_output(i) for i in range(g.get_num_outputs())]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_on_webgpu_matches_onnxruntime(name):
    m = MODELS[name]()
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target="webgpu")
    outs = _run(lib, tvm.webgpu(0), feeds)
    assert all(o.device == tvm.webgpu(0) for o in outs)  # storage on the device
    got = [o.numpy() for o in outs]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.abs(w).max() > 0
        _, rel = compare.errors(g, w)
        assert rel <= 1e-4, (name, rel)


def test_webgpu_build_uses_gpu_strategies():
    """The TOPI GPU schedules (shared memory tiles, cross-thread reductions) reach WGSL."""
    m = onnx_models.bert_encoder(layers=1, hidden=64, heads=4, seq=16)
    feeds = onnx_models.input_feeds(m)
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target="webgpu")
    src = lib.get_lib().imported_modules[0].get_source()
    assert "var<workgroup>" in src and "workgroupBarrier()" in src
    assert "NCHWc" not in lib.get_graph_json()


def test_exported_artefact_round_trip_with_wasm_fallback(tmp_path):
    """export_library("x.wasm", fallback=<wasm32 build>) writes one file; load_module runs its
    WebGPU side on tvm.webgpu(0), load_fallback its wasm32 side on the CPU: both match
    onnxruntime."""
    from tvmpy.runtime import wasm, webgpu_artefact

    m = onnx_models.mobilenet_v2(image=32, classes=10)
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)[0]
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target="webgpu")
    fb, _ = compare.build(mod, params, opt_level=3,
                          target="llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128")
    path = str(tmp_path / "mnv2.wasm")
    lib.export_library(path, fallback=fb)
    with open(path, "rb") as f:
        sections = wasm.read_custom_sections(f.read())
    assert {"tvmpy.webgpu", "tvmpy.webgpu.params", "tvmpy.metadata", "tvmpy.params"} <= set(sections)
    gpu = _run(tvm.runtime.load_module(path), tvm.webgpu(0), feeds)[0].numpy()
    cpu = _run(webgpu_artefact.load_fallback(path), tvm.cpu(0), feeds)[0].numpy()
    for got in (gpu, cpu):
        _, rel = compare.errors(got, want)
        assert rel <= 1e-4


def test_artefact_without_fallback_says_so(tmp_path):
    from tvmpy import relay
    from tvmpy.runtime import webgpu_artefact

    x = relay.var("x", shape=(3, 5))
    lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x))),
                      target="webgpu")
    path = str(tmp_path / "relu.wasm")
    lib.export_library(path)
    a = np.random.randn(3, 5).astype("float32")
    out = _run(tvm.runtime.load_module(path), tvm.webgpu(0), {"x": a})[0].numpy()
    np.testing.assert_array_equal(out, np.maximum(a, 0))
    with pytest.raises(ValueError, match="no wasm32 CPU fallback"):
        webgpu_artefact.load_fallback(path)
    with pytest.raises(ValueError, match="one .wasm web artefact"):
        lib.export_library(str(tmp_path / "relu.so"))


def test_node_runs_the_artefacts_wasm_fallback_and_reads_its_webgpu_section(tmp_path):
    """The artefact stays a valid tvmpy .wasm for web/tvmpy_wasm.mjs (node): its fallback runs
    with the same result as the WebGPU side in Python, and its tvmpy.webgpu section parses."""
    import json
    import os
    import subprocess

    from tvmpy import relay

    x = relay.var("x", shape=(1, 3, 9, 7))
    w = relay.var("w", shape=(5, 3, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    rng = np.random.default_rng(3)
    params = {"w": rng.standard_normal((5, 3, 3, 3)).astype("float32")}
    lib = relay.build(mod, target="webgpu", params=params)
    fb = relay.build(mod, target="llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128",
                     params=params)
    path = str(tmp_path / "conv.wasm")
    lib.export_library(path, fallback=fb)
    xi = rng.standard_normal((1, 3, 9, 7)).astype("float32")
    want = _run(tvm.runtime.load_module(path), tvm.webgpu(0), {"x": xi})[0].numpy()
    loader = os.path.join(os.path.dirname(__file__), "..", "..", "web", "tvmpy_wasm.mjs")
    script = tmp_path / "run.mjs"
    script.write_text(f"""
import {{ loadTvmpyWasm }} from {json.dumps(os.path.abspath(loader))};
import {{ readFileSync }} from "fs";
const bytes = readFileSync({json.dumps(path)});
const g = (await loadTvmpyWasm(bytes)).createGraphExecutor();
g.setInput("x", new Float32Array({json.dumps(xi.ravel().tolist())}));
g.run();
const m = await WebAssembly.compile(bytes);
const prog = JSON.parse(new TextDecoder().decode(
  WebAssembly.Module.customSections(m, "tvmpy.webgpu")[0]));
console.log(JSON.stringify({{out: Array.from(g.getOutput(0)), format: prog.format,
  kernels: Object.keys(prog.kernels).length}}));
""")
    res = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["format"] == "tvmpy-webgpu" and got["kernels"] >= 1
    np.testing.assert_allclose(np.array(got["out"], "float32").reshape(want.shape), want,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["distilbert", "gpt2"])
def test_zoo_transformer_on_webgpu_matches_onnxruntime(name):
    """Real transformer architectures (transformers' code, random weights, small sizes;
    gpt2 with its causal mask) through relay.build(target="webgpu")."""
    from tvmpy.relay.testing import zoo

    spec = zoo.MODELS[name]("small")
    m = zoo.to_onnx(spec)
    feeds = spec.feeds()
    want = compare.ort_runner(m)(feeds)
    mod, params = zoo.from_onnx(m, spec)
    lib, _ = compare.build(mod, params, opt_level=3, target="webgpu")
    got = [o.numpy() for o in _run(lib, tvm.webgpu(0), feeds)]
    zoo.assert_close(got, want, name)
