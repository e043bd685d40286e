"""ToMixedPrecision("float16") on zoo models of four kinds (a GPT-2 decoder, EfficientNet-B0's
SE blocks and SiLU, an LSTM language model (the recurrence stays float32: nn.rnn_scan is
NEVER), Swin's shifted-window attention with its masks): through ONNX at the small size,
compiled for llvm, against onnxruntime in float32 within the float16 bound of
tests/relay/test_mixed_precision.py (max |diff| <= 1e-2 of max |ref|). The whole zoo's figures:
bench/mixed_precision_accuracy.py --zoo all (bench/RESULTS.md)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
if importlib.util.find_spec("torchvision") is None:
    pytest.skip("torchvision is not installed (pip install -e '.[zoo]')", allow_module_level=True)

from tvmpy import relay  # noqa: E402
from tvmpy.relay.testing import compare, zoo  # noqa: E402

pytest.importorskip("transformers")
pytest.importorskip("timm")


@pytest.mark.parametrize("name", ["gpt2", "efficientnet_b0", "lstm_lm", "swin"])
def test_zoo_model_in_float16(name):
    spec = zoo.MODELS[name]("small")
    m = zoo.to_onnx(spec)
    mod, params = zoo.from_onnx(m, spec)
    feeds = spec.feeds(seed=1)
    want = compare.ort_runner(m, threads=1)(feeds)
    out = relay.transform.ToMixedPrecision("float16")(mod)
    text = str(out)
    assert "float16" in text and 'out_dtype="float32"' in text
    got = zoo.build(out, params).run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.isfinite(g).all()
        rel = compare.errors(g, w)[1]
        print(name, "relative error", rel)
        assert rel <= 1e-2
