"""Stacked bidirectional LSTM / GRU models (``nn.rnn_scan``: the "cpu" strategy's kernel on
every llvm target) built for AArch64 (``arm_cpu("rasp4b")``, run under qemu-user) and for
WebAssembly with SIMD (run by wasmtime), against onnxruntime on the host."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tvmpy as tvm  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402

from .aarch64_util import run_batch, save_graph  # noqa: E402

CASES = {"lstm": ("LSTM", {}), "gru": ("GRU", {}),
         "gru_lbr": ("GRU", {"linear_before_reset": 1})}


def _case(name):
    kind, extra = CASES[name]
    m = onnx_models.recurrent(kind, 4, 3, 5, 11, "bidirectional", True, 2, **extra)
    feeds = onnx_models.input_feeds(m)
    mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
    return mod, params, feeds, compare.ort_runner(m)(feeds)


def _scan_kernels(lib):
    return sum("rnn_scan" in n["attrs"]["func_name"]
               for n in json.loads(lib.get_graph_json())["nodes"] if n["op"] == "tvm_op")


def test_rnn_models_on_aarch64_match_onnxruntime(tmp_path):
    for name in CASES:
        mod, params, feeds, want = _case(name)
        lib, _ = compare.build(mod, params, opt_level=3, target=tvm.target.arm_cpu("rasp4b"))
        assert _scan_kernels(lib) == 4  # 2 layers x 2 directions
        save_graph(str(tmp_path), name, lib, feeds, list(want), 1e-4, 2e-5)
    results = run_batch(str(tmp_path), timeout=600)["results"]
    assert sorted(results) == sorted(CASES)
    assert all(r["ok"] for r in results.values()), results


@pytest.mark.parametrize("name", sorted(CASES))
def test_rnn_models_on_wasm_match_onnxruntime(name):
    mod, params, feeds, want = _case(name)
    lib, _ = compare.build(mod, params, opt_level=3,
                           target="llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128")
    assert _scan_kernels(lib) == 4
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    g.set_input(**feeds)
    g.run()
    assert g.get_num_outputs() == len(want)
    for i, w in enumerate(want):
        np.testing.assert_allclose(g.get_output(i).numpy(), w, rtol=1e-4, atol=2e-5)
