"""How closely int8 implementations of one QDQ model agree (issue 10 point 5; issue 24 point 7):
tvmpy int8 and onnxruntime's optimized int8 run, each against the same QDQ graph run literally
(onnxruntime with graph optimizations off), and onnxruntime int8 against onnxruntime fp32, on
random inputs. The model is pre-processed (``quant_pre_process``) and quantized as bench/int8.py
does (``--no-pre-process``: quantized as it is).

Per output element, in output quantization steps: max, mean and the share within one step
(bench/common.Agreement). Top-1 (a fixed random 10-class head on BERT's first token, the logits
of the CNNs) only where the float32 model's top-1 varies over the inputs; with the random-weight
CNNs it does not (every random input gives the same class), and the script says so.

    python bench/int8_agreement.py [--model bert_encoder|resnet18|mobilenet_v2] [--samples 200]
                                   [--threads 2] [--no-pre-process]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import Agreement, ort_session, output_step  # noqa: E402

from tvmpy.cli.bench import bench_threads  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402
from tvmpy.relay.testing import quantized_models as qm  # noqa: E402

MODELS = {"bert_encoder": lambda: onnx_models.bert_encoder(layers=4, hidden=256, heads=4, seq=128),
          "resnet18": lambda: onnx_models.resnet18(batch=1, image=224),
          "mobilenet_v2": lambda: onnx_models.mobilenet_v2(batch=1, image=224)}


def main() -> None:
    import onnxruntime as rt

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="bert_encoder", choices=list(MODELS))
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-pre-process", dest="pre_process", action="store_false")
    args = ap.parse_args()
    threads = bench_threads(args.threads)
    m = MODELS[args.model]()
    q = qm.quantize_static(qm.pre_process(m) if args.pre_process else m,
                           qm.calibration_feeds(m))
    step = output_step(q)
    if step is None:
        raise SystemExit("the QDQ model's output is not made by a DequantizeLinear")
    mod, params = compare.import_onnx(q)
    lib, _ = compare.build(mod, params, opt_level=3)
    so = rt.SessionOptions()
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    literal = rt.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
    opt_q, fp32 = ort_session(q, threads), ort_session(m, threads)
    sides = {"tvmpy int8": compare.tvm_runner(lib),
             "onnxruntime int8": lambda f: opt_q.run(None, dict(f)),
             "onnxruntime fp32": lambda f: fp32.run(None, dict(f)),
             "literal QDQ": lambda f: literal.run(None, dict(f))}
    head = np.random.default_rng(5).standard_normal((256, 10)).astype("float32")

    def top1(y: np.ndarray) -> int:
        return int((y[0, 0] @ head).argmax()) if y.ndim == 3 else int(y.reshape(-1).argmax())

    pairs = [("tvmpy int8", "onnxruntime int8"), ("tvmpy int8", "literal QDQ"),
             ("onnxruntime int8", "literal QDQ"), ("onnxruntime int8", "onnxruntime fp32"),
             ("tvmpy int8", "onnxruntime fp32")]
    acc = {p: Agreement(step) for p in pairs}
    tops: dict = {k: [] for k in sides}
    for i in range(args.samples):
        feeds = onnx_models.input_feeds(m, seed=1000 + i)
        out = {k: np.asarray(f(feeds)[0], np.float64) for k, f in sides.items()}
        for a, b in pairs:
            acc[(a, b)].add(out[a], out[b])
        for k, y in out.items():
            tops[k].append(top1(y))
    print(f"# {args.model}, {args.samples} random inputs (seeds 1000..), {threads} thread(s), "
          f"quant_pre_process {'on' if args.pre_process else 'OFF'}, output step {step:.4g}")
    classes = len(set(tops["onnxruntime fp32"]))
    head_note = "10-class head on the first token" if out["tvmpy int8"].ndim == 3 else "logits"
    for a, b in pairs:
        line = f"{a:>16} vs {b:<16}: {acc[(a, b)]}"
        if classes > 1:
            same = sum(int(x == y) for x, y in zip(tops[a], tops[b]))
            line += f"; top-1 ({head_note}) {same}/{args.samples}"
        print(line)
    if classes == 1:
        print(f"top-1 not reported: the fp32 model's top-1 ({head_note}) is class "
              f"{tops['onnxruntime fp32'][0]} for every input, so agreement on it says nothing")
    else:
        print(f"fp32 top-1 ({head_note}): {classes} distinct classes over the inputs")


if __name__ == "__main__":
    main()
