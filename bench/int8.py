"""Int8 models end to end (issue 10 point 5, re-done for issue 24 point 7): ResNet-18,
MobileNetV2 and the BERT encoder quantized by onnxruntime's own pipeline, tvmpy int8 vs
onnxruntime int8 in both of onnxruntime's formats, plus both sides' float32 builds, same run.

Quantization, as onnxruntime's quantization guide does it: ``quant_pre_process`` (symbolic shape
inference, BatchNormalization folded into the convolutions, constants folded), then
``quantize_static`` in QDQ and in QOperator format (per-channel int8 weights, uint8
activations, min/max calibration on the same 8 random inputs). ``--no-pre-process`` skips the
first step, as this script did before issue 24: onnxruntime then runs every BatchNormalization
in float between its QLinearConvs, with layout Transposes around each (the graph onnxruntime
runs is summarized per model, so the difference shows). ``--reduce-range`` (default ``auto``:
on where the host has neither AVX-512 VNNI nor AVX-VNNI) quantizes the weights to 7 bits, as
onnxruntime's guide advises for x86 without VNNI: there its u8s8 kernels add pairs of products
in int16 with saturation, so with 8-bit weights its int8 output is not the exact integer result
(several output steps off) and the agreement below would measure that, not tvmpy.

Sides, every one on ``--threads`` threads (tvmpy: TVM_NUM_THREADS; onnxruntime:
intra_op_num_threads, inter_op_num_threads 1, ORT_ENABLE_ALL): tvmpy int8 (relay.build
opt_level 3, "llvm", graph executor, of the QDQ model), onnxruntime int8 QDQ, onnxruntime int8
QOperator, tvmpy fp32 and onnxruntime fp32 (the float model). Every call feeds the inputs and
fetches the outputs as numpy arrays on every side (``set_input``/``run``/``get_output`` vs
``InferenceSession.run``). Timing: ``bench/common.interleaved_samples`` (every side the same
number of rounds, interleaved, a pause before each side); printed: median, min and max per side
and the ratios of medians (best: of the fastest rounds).

Agreement on ``--samples`` random inputs (seeds 1000..), per output element, in output
quantization steps (the scale of the DequantizeLinear that makes the output): max, mean, and the
share of elements within one step; tvmpy int8 against onnxruntime int8 (both formats) and
against the float32 model (onnxruntime fp32), and onnxruntime int8 against float32 (what the
quantization itself costs). For scale: how far the float32 output moves between inputs, in
steps. Top-1 is printed only where the float32 model's top-1 class varies over the inputs: the
random-weight CNNs give the same class for every random input, so a top-1 agreement would say
nothing (the script says so instead).

    python bench/int8.py [--models resnet18,mobilenet_v2,bert_encoder] [--rounds 10]
                         [--samples 200] [--threads 2] [--image 224] [--no-pre-process]
                         [--reduce-range auto|on|off]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    Agreement,
    bench_clock,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    ort_session,
    output_step,
    quartiles,
)

ensure_native_blas()

import numpy as np  # noqa: E402

from tvmpy.cli.bench import bench_threads  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402
from tvmpy.relay.testing import quantized_models as qm  # noqa: E402
from tvmpy.target import Target  # noqa: E402


def _models(image: int) -> dict:
    return {
        "resnet18": lambda: onnx_models.resnet18(batch=1, image=image),
        "mobilenet_v2": lambda: onnx_models.mobilenet_v2(batch=1, image=image),
        "bert_encoder": lambda: onnx_models.bert_encoder(layers=4, hidden=256, heads=4, seq=128),
    }


def ort_graph(model, threads: int) -> str:
    """The graph onnxruntime runs after its optimizations: node count and the commonest ops."""
    import tempfile

    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as d:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        opts.optimized_model_filepath = os.path.join(d, "optimized.onnx")
        opts.log_severity_level = 3  # not the "hardware specific optimizations" notice
        ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        ops = Counter(n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node)
    common = ", ".join(f"{k} {v}" for k, v in ops.most_common(6))
    floats = {k: ops[k] for k in ("BatchNormalization", "Transpose") if ops[k]}
    return f"{sum(ops.values())} nodes ({common}); float BatchNormalization / Transpose: " + (
        ", ".join(f"{k} {v}" for k, v in floats.items()) or "none")


def ort_runner(model, threads: int):
    sess = ort_session(model, threads)
    return lambda feeds: sess.run(None, dict(feeds))


def agreement(sides: dict, model, samples: int, step: float) -> list[str]:
    pairs = [("tvmpy int8", "onnxruntime int8 QDQ"), ("tvmpy int8", "onnxruntime int8 QOperator"),
             ("tvmpy int8", "fp32"), ("onnxruntime int8 QDQ", "fp32"),
             ("onnxruntime int8 QOperator", "fp32")]
    acc = {p: Agreement(step) for p in pairs}
    fp32_outs, tops = [], {k: [] for k in sides}
    for i in range(samples):
        feeds = onnx_models.input_feeds(model, seed=1000 + i)
        out = {k: f(feeds)[0] for k, f in sides.items()}
        for a, b in pairs:
            acc[(a, b)].add(out[a], out[b])
        fp32_outs.append(out["fp32"])
        if out["fp32"].ndim == 2:  # logits: a class per input
            for k, y in out.items():
                tops[k].append(int(y.argmax()))
    lines = [f"{a} vs {b}: {acc[(a, b)]}" for a, b in pairs]
    stack = np.stack(fp32_outs).astype(np.float64)
    moved = (stack.max(0) - stack.min(0)) / step
    lines.append(f"fp32 output across the {samples} inputs: each element moves by median "
                 f"{np.median(moved):.1f}, max {moved.max():.1f} steps (min-max over inputs)")
    if tops["fp32"]:
        classes = Counter(tops["fp32"])
        if len(classes) == 1:
            lines.append(f"top-1 not reported: the fp32 model gives class {tops['fp32'][0]} for "
                         f"all {samples} random inputs (random weights), so every side agrees "
                         "trivially")
        else:
            for k in sides:
                if k != "fp32":
                    same = sum(int(x == y) for x, y in zip(tops[k], tops["fp32"]))
                    lines.append(f"top-1 of {k} = fp32's on {same}/{samples} "
                                 f"({len(classes)} distinct fp32 classes)")
    else:
        lines.append("top-1 not reported: the output is hidden states, not class logits")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,bert_encoder")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2,
                    help="threads of every side (tvmpy TVM_NUM_THREADS, onnxruntime "
                         "intra_op_num_threads; default 2)")
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--cpu-time", action="store_true",
                    help="time rounds in process CPU time (needs --threads 1)")
    ap.add_argument("--no-pre-process", dest="pre_process", action="store_false",
                    help="quantize the float model as it is (no quant_pre_process)")
    ap.add_argument("--reduce-range", choices=("auto", "on", "off"), default="auto",
                    help="7-bit weights (quantize_static reduce_range); auto: on where the "
                         "host has no VNNI")
    args = ap.parse_args()
    reduce_range = (args.reduce_range == "on" or args.reduce_range == "auto"
                    and not {"avx512vnni", "avxvnni"} & Target("llvm").isa_features)
    clock = bench_clock(args.cpu_time, args.threads)
    threads = bench_threads(args.threads)  # before any tvmpy library runs
    models = _models(args.image)
    bad = [n for n in args.models.split(",") if n not in models]
    if bad:
        ap.error(f"unknown models {bad}; choose from {list(models)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; {threads} thread(s) "
          f"every side; {args.rounds} interleaved rounds ("
          f"{'process CPU time' if args.cpu_time else 'wall time'}); quant_pre_process "
          f"{'on' if args.pre_process else 'OFF'}; reduce_range "
          f"{'on (7-bit weights)' if reduce_range else 'off'}; load average {os.getloadavg()[0]:.2f}")
    for name in args.models.split(","):
        model = models[name]()
        t0 = time.perf_counter()
        src = qm.pre_process(model) if args.pre_process else model
        calib = qm.calibration_feeds(model)
        q = {fmt: qm.quantize_static(src, calib, fmt=fmt, reduce_range=reduce_range)
             for fmt in ("QDQ", "QOperator")}
        qsecs = time.perf_counter() - t0
        step = output_step(q["QDQ"])
        if step is None:
            raise SystemExit(f"{name}: the QDQ model's output is not made by a DequantizeLinear")
        step_qop = output_step(q["QOperator"])
        qop_note = ("the QOperator model's output is float (its last operator is not "
                    "quantized): every difference is counted in the QDQ model's steps"
                    if step_qop is None else f"QOperator output step {step_qop:.4g}")
        mod, params = compare.import_onnx(q["QDQ"])
        lib_q, bq = compare.build(mod, params, opt_level=3)
        mod, params = compare.import_onnx(model)
        lib_f, bf = compare.build(mod, params, opt_level=3)
        sides = {"tvmpy int8": compare.tvm_runner(lib_q),
                 "onnxruntime int8 QDQ": ort_runner(q["QDQ"], threads),
                 "onnxruntime int8 QOperator": ort_runner(q["QOperator"], threads),
                 "tvmpy fp32": compare.tvm_runner(lib_f),
                 "onnxruntime fp32": ort_runner(model, threads)}
        print(f"{name}: pre-process + quantize_static x2 {qsecs:.1f} s; relay.build int8 "
              f"{bq:.1f} s, fp32 {bf:.1f} s; output step {step:.4g} ({qop_note})")
        for fmt in ("QDQ", "QOperator"):
            print(f"  onnxruntime runs the {fmt} model as {ort_graph(q[fmt], threads)}")
        checked = {k: sides[k] for k in ("tvmpy int8", "onnxruntime int8 QDQ",
                                          "onnxruntime int8 QOperator")}
        checked["fp32"] = sides["onnxruntime fp32"]
        for line in agreement(checked, model, args.samples, step):
            print("  " + line, flush=True)
        feeds = onnx_models.input_feeds(model)
        load0 = os.getloadavg()[0]
        t = interleaved_samples({k: (lambda f=f, x=feeds: f(x)) for k, f in sides.items()},
                                args.rounds, pause=0.3, target_s=0.1, clock=clock)
        med = {k: quartiles(v)[1] for k, v in t.items()}
        for k, v in t.items():
            print(f"  {k:27s} median {med[k] * 1e3:7.2f} ms (min {min(v) * 1e3:7.2f}, max "
                  f"{max(v) * 1e3:7.2f})")
        for ref in ("onnxruntime int8 QDQ", "onnxruntime int8 QOperator"):
            print(f"  tvmpy int8 / {ref}: {med['tvmpy int8'] / med[ref]:.2f} (best "
                  f"{min(t['tvmpy int8']) / min(t[ref]):.2f})")
        print(f"  int8 speed-up over fp32: tvmpy {med['tvmpy fp32'] / med['tvmpy int8']:.2f}, "
              f"onnxruntime QDQ {med['onnxruntime fp32'] / med['onnxruntime int8 QDQ']:.2f}, "
              f"QOperator {med['onnxruntime fp32'] / med['onnxruntime int8 QOperator']:.2f}; "
              f"tvmpy fp32 / onnxruntime fp32 {med['tvmpy fp32'] / med['onnxruntime fp32']:.2f}; "
              f"load average {load0:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
