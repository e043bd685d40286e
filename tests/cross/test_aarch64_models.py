"""ResNet-18, MobileNetV2 and the BERT encoder (ONNX built from code, random weights; the sizes
of tests/e2e/test_models.py) compiled with relay.build for ``arm_cpu("rasp4b")`` (AArch64,
cortex-a72, NEON), exported with the cross toolchain, run in ONE AArch64 Python under qemu-user
by the graph executor, and compared with onnxruntime on the host:
``max|tvmpy - ort| <= 1e-4 * max|ort| + 1e-5`` (the norm of tests/e2e/test_models.py).

The per-model times the device reports (one run after a warm-up) are emulation times, printed
for bench/RESULTS.md; nothing here depends on them.
"""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")  # the registry packages of the e2e tests (in CI)
pytest.importorskip("onnxruntime")

import tvmpy as tvm  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402

from .aarch64_util import run_batch, save_graph  # noqa: E402

MODELS = {
    "resnet18": lambda: onnx_models.resnet18(image=64),
    "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=64),
    "bert_encoder": lambda: onnx_models.bert_encoder(layers=4, hidden=256, heads=4, seq=128),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("aarch64_models"))
    target = tvm.target.arm_cpu("rasp4b")
    for name, make in MODELS.items():
        m = make()
        feeds = onnx_models.input_feeds(m)
        want = compare.ort_runner(m)(feeds)
        mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
        with tvm.transform.PassContext(opt_level=3):
            lib = tvm.relay.build(mod, target=target, params=params)
        save_graph(folder, name, lib, feeds, list(want), 1e-4, 1e-5)
    return run_batch(folder, timeout=1200)["results"]


@pytest.mark.parametrize("name", list(MODELS))
def test_model_on_aarch64_matches_onnxruntime(results, name):
    r = results[name]
    print(f"{name}: max abs err {r['errs']}, qemu run {r['time'] * 1e3:.0f} ms")
    assert r["ok"], r
