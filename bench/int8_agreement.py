"""How closely int8 implementations of one QDQ model agree (issue 10, point 5): tvmpy int8 and
onnxruntime's optimized int8 run, each against the same QDQ graph run literally (onnxruntime
with graph optimizations off), and onnxruntime int8 against onnxruntime fp32, on random inputs.
Top-1 through a fixed random 10-class head on the first token (BERT's output is hidden states)
or of the logits, and the largest output difference.

    python bench/int8_agreement.py [--model bert_encoder|resnet18|mobilenet_v2] [--samples 200]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

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
    args = ap.parse_args()
    m = MODELS[args.model]()
    q = qm.quantize_static(m)
    mod, params = compare.import_onnx(q)
    lib, _ = compare.build(mod, params, opt_level=3)
    so = rt.SessionOptions()
    so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    literal = rt.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
    sides = {"tvmpy int8": compare.tvm_runner(lib), "onnxruntime int8": compare.ort_runner(q),
             "onnxruntime fp32": compare.ort_runner(m),
             "literal QDQ": lambda f: literal.run(None, dict(f))}
    head = np.random.default_rng(5).standard_normal((256, 10)).astype("float32")

    def top1(y: np.ndarray) -> int:
        return int((y[0, 0] @ head).argmax()) if y.ndim == 3 else int(y.reshape(-1).argmax())

    pairs = [("tvmpy int8", "onnxruntime int8"), ("tvmpy int8", "literal QDQ"),
             ("onnxruntime int8", "literal QDQ"), ("onnxruntime int8", "onnxruntime fp32")]
    same = dict.fromkeys(pairs, 0)
    diff: dict = {p: [] for p in pairs}
    for i in range(args.samples):
        feeds = onnx_models.input_feeds(m, seed=1000 + i)
        out = {k: np.asarray(f(feeds)[0], np.float64) for k, f in sides.items()}
        for a, b in pairs:
            same[(a, b)] += int(top1(out[a]) == top1(out[b]))
            diff[(a, b)].append(float(np.abs(out[a] - out[b]).max()))
    print(f"# {args.model}, {args.samples} random inputs (seeds 1000..)")
    for a, b in pairs:
        d = diff[(a, b)]
        print(f"{a:>16} vs {b:<16}: top-1 {same[(a, b)]}/{args.samples}; max |diff| "
              f"{max(d):.4f} (median over inputs {np.median(d):.4f})")


if __name__ == "__main__":
    main()
