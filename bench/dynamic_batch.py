"""A dynamic-shape model compiled once vs static builds of each size (issue 11).

``--model resnet18`` (or ``mobilenet_v2``): ResNet-18 (224x224, random weights) exported with a symbolic batch
(``dim_param "N"``) is compiled once (``relay.Any`` batch: kernels with a symbolic batch extent)
and run at each batch; the same model with the batch fixed is compiled once per batch.
``--model bert``: the BERT encoder (4 layers, hidden 256, 4 heads, batch 1, hidden states in)
with a symbolic sequence length, run at each length against static builds of each.
onnxruntime (the same thread count as tvmpy: common.bench_threads) runs the dynamic model as the reference. Same process, interleaved rounds (each round times ``number``
calls of every side, set_input + run + get_output each); reported: median and spread (min-max)
of the per-call time over the rounds, and the dynamic/static ratio of medians.

    python bench/dynamic_batch.py [--model resnet18|mobilenet_v2|bert] [--sizes 1,8] [--rounds 7]
                                  [--image 224]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import bench_threads, ensure_native_blas, machine_description  # noqa: E402

ensure_native_blas()

import numpy as np  # noqa: E402

from tvmpy.relay.testing import compare, onnx_models  # noqa: E402


def _rounds(runners: dict, feeds: dict, rounds: int, target_s: float = 0.3
            ) -> dict[str, list[float]]:
    number = {}
    for name, fn in runners.items():
        fn(feeds)
        t = time.perf_counter()
        fn(feeds)
        number[name] = max(1, min(50, int(target_s / max(time.perf_counter() - t, 1e-6))))
    out: dict[str, list[float]] = {k: [] for k in runners}
    for _ in range(rounds):
        for name, fn in runners.items():
            time.sleep(0.2)
            t = time.perf_counter()
            for _ in range(number[name]):
                fn(feeds)
            out[name].append((time.perf_counter() - t) / number[name])
    return out


def _models(model: str, image: int) -> tuple[Any, str, Callable[[int], Any]]:
    """(the dynamic model, its dim_param, size -> the static model)."""
    if model == "resnet18":
        return (onnx_models.resnet18(batch="N", image=image), "N",
                lambda b: onnx_models.resnet18(batch=b, image=image))
    if model == "mobilenet_v2":  # depthwise convs, Relu6 clips: another kind of CNN
        return (onnx_models.mobilenet_v2(batch="N", image=image), "N",
                lambda b: onnx_models.mobilenet_v2(batch=b, image=image))
    if model == "bert":
        return (onnx_models.bert_encoder(seq="S", embeddings=False), "S",
                lambda n: onnx_models.bert_encoder(seq=n, embeddings=False))
    raise SystemExit(f"unknown --model {model!r} (resnet18, mobilenet_v2, bert)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--sizes", default=None, help="batches (resnet18, mobilenet_v2: 1,8) or sequence lengths "
                    "(bert: 32,128,384)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--image", type=int, default=224)
    args = ap.parse_args()
    threads = bench_threads()  # before tvmpy's pool starts; onnxruntime gets the same
    default = "32,128,384" if args.model == "bert" else "1,8"
    sizes = [int(b) for b in (args.sizes or default).split(",")]
    print(machine_description())
    dyn_model, dim, static_of = _models(args.model, args.image)
    dyn_lib, dyn_secs = compare.build(*compare.import_onnx(dyn_model), opt_level=3)
    print(f"{args.model}: dynamic build ({dim} symbolic): {dyn_secs:.1f} s, "
          f"{len(dyn_lib.lowered_funcs)} functions")
    dyn = compare.tvm_runner(dyn_lib)
    ort = compare.ort_runner(dyn_model, threads=threads)
    for b in sizes:
        static_lib, secs = compare.build(*compare.import_onnx(static_of(b)), opt_level=3)
        print(f"\n{dim}={b}: static build {secs:.1f} s, {len(static_lib.lowered_funcs)} "
              "functions")
        static = compare.tvm_runner(static_lib)
        feeds = onnx_models.input_feeds(dyn_model, seed=b, dims={dim: b})
        t = time.perf_counter()
        got = dyn(feeds)[0]
        print(f"  dynamic: first run at {dim}={b} (plans storage, prepares calls) "
              f"{(time.perf_counter() - t) * 1e3:.1f} ms")
        want = ort(feeds)[0]
        err_d = compare.errors(got, want)[0]
        err_s = compare.errors(static(feeds)[0], want)[0]
        print(f"  max abs error vs onnxruntime: dynamic {err_d:.2e}, static {err_s:.2e} "
              f"(max |out| {np.abs(want).max():.2f})")
        times = _rounds({"static": static, "dynamic": dyn, "onnxruntime": ort}, feeds,
                        args.rounds)
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, v in times.items():
            print(f"  {k:<12} median {med[k] * 1e3:8.2f} ms  (min {min(v) * 1e3:8.2f}, max "
                  f"{max(v) * 1e3:8.2f}; {len(v)} rounds)")
        print(f"  dynamic / static: {med['dynamic'] / med['static']:.2f} (medians), "
              f"{min(times['dynamic']) / min(times['static']):.2f} (best rounds); "
              f"dynamic / onnxruntime: {med['dynamic'] / med['onnxruntime']:.2f}")


if __name__ == "__main__":
    main()
