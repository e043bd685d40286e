"""Accuracy of ``relay.transform.ToMixedPrecision`` against the float32 model, on the CPU (llvm:
float16 / bfloat16 storage, float32 accumulation in conv/dense/batch_matmul).

    PYTHONPATH=. python bench/mixed_precision_accuracy.py [--models resnet18,mobilenet_v2,
        bert_encoder] [--types float16,bfloat16] [--seeds 3] [--zoo [names]] [--json out.json]

Showcase models at full size (ResNet-18 and MobileNetV2 at 224x224, 1000 classes; the BERT
encoder with 4 layers, hidden 256, sequence 128), batch 1, ``--seeds`` random inputs each
(onnx_models.input_feeds): per type the max |mixed - float32|, that over max |float32| (the
bound the tests hold: float16 1e-2, bfloat16 4e-2), the rms error over the rms output and, for
the classifiers, whether the top-1 class agrees. The float32 reference is onnxruntime (CPU).
``--zoo``: the model zoo at its small size through ONNX (tvmpy.relay.testing.zoo), the same
figures against onnxruntime, a failure reported per model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules, as every bench)

BOUND = {"float16": 1e-2, "bfloat16": 4e-2}


def _figures(got: list, want: list) -> dict:
    """Worst over the float outputs: max abs error, that over max |ref|, rms error / rms ref."""
    out = {"max_abs": 0.0, "rel": 0.0, "rms_rel": 0.0, "finite": True}
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if w.dtype.kind not in "fc" or not w.size:
            out["ints_equal"] = out.get("ints_equal", True) and bool(np.array_equal(g, w))
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        out["finite"] = out["finite"] and bool(np.isfinite(g64).all())
        err = np.abs(g64 - w64)
        out["max_abs"] = max(out["max_abs"], float(err.max()))
        out["rel"] = max(out["rel"], float(err.max() / max(np.abs(w64).max(), 1e-30)))
        out["rms_rel"] = max(out["rms_rel"], float(np.sqrt((err ** 2).mean()
                                                           / max((w64 ** 2).mean(), 1e-60))))
    return out


def showcase(args, rows: list) -> None:
    from tvmpy import relay
    from tvmpy.relay.testing import compare, onnx_models

    makers = {"resnet18": onnx_models.resnet18, "mobilenet_v2": onnx_models.mobilenet_v2,
              "bert_encoder": onnx_models.bert_encoder}
    print("| model | type | max abs err | max abs err / max abs ref | rms err / rms ref | "
          "top-1 agrees | build (s) |")
    print("|---|---|---|---|---|---|---|", flush=True)
    for name in args.models.split(","):
        m = makers[name]()
        feeds0 = onnx_models.input_feeds(m)
        mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds0.items()})
        ort = compare.ort_runner(m)
        for mp in args.types.split(","):
            row: dict = {"model": name, "type": mp, "seeds": args.seeds}
            try:
                t0 = time.perf_counter()
                lib, _ = compare.build(relay.transform.ToMixedPrecision(mp)(mod), params)
                row["build_s"] = time.perf_counter() - t0
                run = compare.tvm_runner(lib)
                figs, agree = [], []
                for seed in range(1, args.seeds + 1):
                    feeds = onnx_models.input_feeds(m, seed=seed)
                    got, want = run(feeds), ort(feeds)
                    figs.append(_figures(got, want))
                    if name != "bert_encoder":
                        agree.append(bool((got[0].argmax(-1) == want[0].argmax(-1)).all()))
                for k in ("max_abs", "rel", "rms_rel"):
                    row[k] = max(f[k] for f in figs)
                row["top1_agrees"] = f"{sum(agree)}/{len(agree)}" if agree else "n/a"
                row["within_bound"] = row["rel"] <= BOUND[mp]
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            rows.append(row)
            print(_line(row), flush=True)
            _dump(args, rows)


def zoo(args, rows: list) -> None:
    from tvmpy import relay
    from tvmpy.relay.testing import compare
    from tvmpy.relay.testing import zoo as z

    names = sorted(z.MODELS) if args.zoo == "all" else args.zoo.split(",")
    print("\n| zoo model | type | max abs err / max abs ref | rms err / rms ref | "
          "casts | note |")
    print("|---|---|---|---|---|---|", flush=True)
    for name in names:
        try:
            spec = z.MODELS[name]("small")
            m = z.to_onnx(spec)
            if z.MODELS[name].vm:
                m = z.append_onnx_nms(m)
            ort = compare.ort_runner(m, threads=1)
            mod, params = z.from_onnx(m, spec)
            feeds = spec.feeds(seed=1)
            want = ort(feeds)
        except Exception as e:  # noqa: BLE001
            rows.append({"zoo": name, "error": f"reference: {type(e).__name__}: {e}"})
            print(f"| {name} | - | reference failed: {e} |")
            continue
        for mp in args.types.split(","):
            row: dict = {"zoo": name, "type": mp}
            try:
                out = relay.transform.ToMixedPrecision(mp)(mod)
                row["casts"] = str(out).count("cast(")
                got = z.build(out, params, vm=z.MODELS[name].vm).run(feeds)
                row.update(_figures(got, want))
                row["within_bound"] = row["rel"] <= BOUND[mp] and row["finite"]
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                traceback.print_exc()
            rows.append(row)
            note = row.get("error", "") or ("" if row.get("within_bound") else "ABOVE BOUND")
            if "ints_equal" in row:
                note += f" integer outputs equal: {row['ints_equal']}"
            print(f"| {name} | {mp} | {row.get('rel', float('nan')):.1e} | "
                  f"{row.get('rms_rel', float('nan')):.1e} | {row.get('casts', '-')} | "
                  f"{note[:120]} |", flush=True)
            _dump(args, rows)


def _line(row: dict) -> str:
    if "error" in row:
        return f"| {row['model']} | {row['type']} | ERROR {row['error'][:200]} |"
    return (f"| {row['model']} | {row['type']} | {row['max_abs']:.2e} | {row['rel']:.1e} | "
            f"{row['rms_rel']:.1e} | {row['top1_agrees']} | {row['build_s']:.0f} |")


def _dump(args, rows: list) -> None:
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet18,mobilenet_v2,bert_encoder")
    p.add_argument("--types", default="float16,bfloat16")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--zoo", default="", help="'all' or zoo model names (comma separated)")
    p.add_argument("--json", default="")
    args = p.parse_args()
    rows: list = []
    if args.models:
        showcase(args, rows)
    if args.zoo:
        zoo(args, rows)
    bad = [r for r in rows if "error" in r or not r.get("within_bound", True)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
