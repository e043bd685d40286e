"""Whole models through ``relay.build(mod, target="vulkan")`` on lavapipe against onnxruntime
(MobileNetV2 at 32x32, a one-layer BERT encoder: conv2d/depthwise/dense/batch_matmul templates,
softmax and layer-norm reductions, erf/tanh), the device-resident graph executor, single GPU
ops on awkward shapes, and the exported library run after load_module."""

from __future__ import annotations

import numpy as np
import pytest
from vkt_common import vulkan_device

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.testing import compare, onnx_models
from tvmpy.topi import testing


@pytest.fixture(scope="module")
def dev():
    return vulkan_device()


MODELS = {
    "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=32, classes=10),
    "bert_encoder": lambda: onnx_models.bert_encoder(layers=1, hidden=64, heads=4, seq=16),
}
RNG = np.random.default_rng(5)


def _build(name):
    m = MODELS[name]()
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    lib, _ = compare.build(mod, params, opt_level=3, target="vulkan")
    return lib, feeds, want


def _check(g, feeds, want):
    for k, v in feeds.items():
        g.set_input(k, v)
    g.run()
    got = [g.get_output(i) for i in range(g.get_num_outputs())]
    assert len(got) == len(want)
    for o, w in zip(got, want):
        assert np.abs(w).max() > 0
        _, rel = compare.errors(o.numpy(), w)
        assert rel <= 1e-4, rel
    return got


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_on_vulkan_matches_onnxruntime(name, dev):
    lib, feeds, want = _build(name)
    g = graph_executor.GraphModule(lib["default"](dev))  # storage on the device
    outs = _check(g, feeds, want)
    assert all(o.device == dev for o in outs)


def test_exported_model_runs_after_load(dev, tmp_path):
    lib, feeds, want = _build("bert_encoder")
    path = str(tmp_path / "bert.so")
    lib.export_library(path)
    loaded = tvm.runtime.load_module(path)
    g = graph_executor.GraphModule(loaded["default"](dev))
    _check(g, feeds, want)
    res = g.module.time_evaluator("run", dev, number=2, repeat=2)()  # waits for the queue
    assert len(res.results) == 2 and min(res.results) > 0


def _one_op(dev, make, shapes, ref, rtol=1e-5):
    xs = [relay.var(f"x{i}", shape=s, dtype="float32") for i, s in enumerate(shapes)]
    mod = tvm.IRModule.from_expr(relay.Function(xs, make(*xs)))
    lib = relay.build(mod, target="vulkan")
    m = graph_executor.GraphModule(lib["default"](dev))
    arrs = [RNG.standard_normal(s).astype("float32") for s in shapes]
    for i, a in enumerate(arrs):
        m.set_input(f"x{i}", a)
    m.run()
    got, want = m.get_output(0).numpy(), ref(*arrs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("shape,axis", [((3, 37), -1), ((2, 211), 1), ((4, 1), -1)])
def test_softmax(dev, shape, axis):
    _one_op(dev, lambda x: relay.nn.softmax(x, axis=axis), [shape],
            lambda a: testing.softmax_python(a, axis))


@pytest.mark.parametrize("shape,axis", [((5, 131), [1]), ((3, 7, 11), [0, 2]), ((2, 300, 3), [1])])
def test_reductions(dev, shape, axis):
    for op, npop in (("sum", np.sum), ("max", np.max)):
        _one_op(dev, lambda x, op=op: getattr(relay, op)(x, axis=axis), [shape],
                lambda a, npop=npop: npop(a, axis=tuple(axis)), rtol=1e-4)


def test_pool_and_conv(dev):
    _one_op(dev, lambda x: relay.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2)),
            [(1, 3, 11, 13)], lambda a: testing.pool2d_python(a, 3, 2, 1, 0, "max"))

    def ref(a, w, b):
        return np.maximum(testing.conv2d_nchw_python(a, w, 1, 1) + b[None, :, None, None], 0)

    _one_op(dev, lambda x, w, b: relay.nn.relu(relay.nn.bias_add(
        relay.nn.conv2d(x, w, padding=(1, 1)), b)), [(1, 3, 7, 5), (5, 3, 3, 3), (5,)], ref,
        rtol=1e-4)


def test_cli_compile_vulkan_and_run_on_device(tmp_path):
    """``tvmpy compile model.onnx --target vulkan`` then ``tvmpy run --device vulkan``."""
    import os
    import subprocess
    import sys

    import onnx

    m = onnx_models.bert_encoder(layers=1, hidden=32, heads=2, seq=8)
    feeds = onnx_models.input_feeds(m)
    want = compare.ort_runner(m)(feeds)[0]
    onnx.save(m, str(tmp_path / "bert.onnx"))
    args = []
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={name}.npy"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def cli(*argv):
        r = subprocess.run([sys.executable, "-m", "tvmpy", *argv], capture_output=True,
                           text=True, timeout=240, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        return r.stdout

    cli("compile", "bert.onnx", "--target", "vulkan", "-o", "bert.so")
    cli("run", "bert.so", *args, "--device", "vulkan", "--output", "o.npz")
    got = np.load(tmp_path / "o.npz")["output0"]
    assert compare.errors(got, want)[1] <= 1e-4
