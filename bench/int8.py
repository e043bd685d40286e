"""Int8 models end to end (issue 10, point 5): ResNet-18, MobileNetV2 and the BERT encoder
quantized by ``onnxruntime.quantization.quantize_static`` (QDQ, per-channel int8 weights, uint8
activations, min/max calibration on 8 random inputs), compiled by tvmpy (relay.build opt_level 3,
"llvm", graph executor) vs the same quantized model in onnxruntime (its int8 kernels), plus both
sides' float32 builds of the original model, same run, 2 threads.

Timing: ``bench/common.interleaved_samples`` (every side the same number of rounds, interleaved,
a pause before each side); each call feeds the inputs and fetches the outputs as numpy arrays on
both sides (``set_input``/``run``/``get_output`` vs ``InferenceSession.run``). Printed: median
and best per side, and tvmpy int8 / onnxruntime int8 (target <= 0.8) and tvmpy fp32 / tvmpy int8
(the int8 speed-up, aim >= 2 on ResNet-18).

Agreement: ``--samples`` random inputs (default 200) through tvmpy int8 and onnxruntime int8:
top-1 of the logits identical (the last axis' argmax; per token for BERT's hidden states), and the
largest difference in output quantization steps (the scale of the DequantizeLinear that makes the
output, when there is one).

    python bench/int8.py [--models resnet18,mobilenet_v2,bert_encoder] [--rounds 10]
                         [--samples 200] [--image 224]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ensure_native_blas, interleaved_samples, machine_description, quartiles  # noqa: E402

ensure_native_blas()

import numpy as np  # noqa: E402

from tvmpy.relay.testing import compare, onnx_models  # noqa: E402
from tvmpy.relay.testing import quantized_models as qm  # noqa: E402


def _models(image: int) -> dict:
    return {
        "resnet18": lambda: onnx_models.resnet18(batch=1, image=image),
        "mobilenet_v2": lambda: onnx_models.mobilenet_v2(batch=1, image=image),
        "bert_encoder": lambda: onnx_models.bert_encoder(layers=4, hidden=256, heads=4, seq=128),
    }


def output_step(model) -> float | None:
    """The quantization step of the model's (first) output: its DequantizeLinear's scale."""
    from onnx import numpy_helper

    out = model.graph.output[0].name
    inits = {i.name: i for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    while out in producer:
        n = producer[out]
        if n.op_type == "DequantizeLinear" and n.input[1] in inits:
            return float(np.max(numpy_helper.to_array(inits[n.input[1]])))
        if n.op_type not in ("Identity", "Reshape", "Flatten"):  # value-preserving: look through
            return None
        out = n.input[0]
    return None


def tvm_build(model) -> tuple:
    mod, params = compare.import_onnx(model)
    lib, secs = compare.build(mod, params, opt_level=3)
    return compare.tvm_runner(lib), secs


def agreement(tvm_run, ort_run, model, samples: int, step: float | None) -> str:
    same = total = 0
    worst = 0.0
    for i in range(samples):
        feeds = onnx_models.input_feeds(model, seed=1000 + i)
        a, b = tvm_run(feeds)[0], ort_run(feeds)[0]
        same += int(np.sum(a.argmax(-1) == b.argmax(-1)))
        total += a.argmax(-1).size
        worst = max(worst, float(np.abs(a.astype(np.float64) - b).max()))
    steps = f", {worst / step:.1f} quantization steps" if step else ""
    return (f"top-1 identical on {same}/{total} ({100 * same / total:.1f}%); max |diff| "
            f"{worst:.4g}{steps}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,bert_encoder")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--image", type=int, default=224)
    args = ap.parse_args()
    print(f"# {machine_description()}; {args.rounds} interleaved rounds; median (best) ms")
    for name in args.models.split(","):
        model = _models(args.image)[name]()
        t0 = time.perf_counter()
        qmodel = qm.quantize_static(model)
        qsecs = time.perf_counter() - t0
        feeds = onnx_models.input_feeds(model)
        tq, bq = tvm_build(qmodel)
        tf, bf = tvm_build(model)
        oq, of = compare.ort_runner(qmodel), compare.ort_runner(model)
        print(f"{name}: quantize_static {qsecs:.1f} s; relay.build int8 {bq:.1f} s, fp32 {bf:.1f} s")
        print("  " + agreement(tq, oq, model, args.samples, output_step(qmodel)), flush=True)
        sides = {"tvmpy int8": tq, "onnxruntime int8": oq, "tvmpy fp32": tf,
                 "onnxruntime fp32": of}
        t = interleaved_samples({k: (lambda f=f, x=feeds: f(x)) for k, f in sides.items()},
                                args.rounds, pause=0.3, target_s=0.1)
        med = {k: quartiles(v)[1] for k, v in t.items()}
        for k, v in t.items():
            q1, m, q3 = quartiles(v)
            print(f"  {k:18s} {m * 1e3:8.2f} ms (best {min(v) * 1e3:7.2f}, IQR {q1 * 1e3:.2f}-"
                  f"{q3 * 1e3:.2f})")
        print(f"  tvmpy int8 / onnxruntime int8: {med['tvmpy int8'] / med['onnxruntime int8']:.2f} "
              f"(best {min(t['tvmpy int8']) / min(t['onnxruntime int8']):.2f}); "
              f"int8 speed-up over tvmpy fp32: {med['tvmpy fp32'] / med['tvmpy int8']:.2f}; "
              f"onnxruntime's own: {med['onnxruntime fp32'] / med['onnxruntime int8']:.2f}",
              flush=True)


if __name__ == "__main__":
    main()
