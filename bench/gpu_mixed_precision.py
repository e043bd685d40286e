"""ToMixedPrecision on the GPU: the three showcase models in float32 and through
``relay.transform.ToMixedPrecision("float16")`` (float32 accumulation in conv/dense/batch_matmul),
next to eager torch in float32 and under ``torch.autocast(dtype=float16)``, on one device, with
each variant's error against the float32 model (onnxruntime on the CPU).

    PYTHONPATH=. python bench/gpu_mixed_precision.py [--batches 1,16] [--models ...]
        [--types float16[,bfloat16]] [--number 10] [--repeat 5] [--workers 12]
        [--json out.json] [--emulate]

Builds run first, in parallel worker processes (spawned; each exports its library), so that
twelve builds cost about one build's wall time; then each model is loaded on ``cuda(0)`` and
timed with ``time_evaluator("run")`` (inputs on the device, no host copies); torch runs the same
ONNX graph node by node (``onnx_torch.torch_runner``; cuDNN with ``cudnn.benchmark``, TF32 off),
timed with CUDA events, in float32 and under autocast. Each figure: median of ``repeat`` means of
``number`` runs (min-max beside it). Error: max |out - ref| / max |ref| against onnxruntime
(float32, CPU). Exit status 1 when a tvmpy result is wrong: float32 above 1e-4, a mixed
precision one above the accepted bound (float16 1e-2, bfloat16 4e-2: tests/relay/
test_mixed_precision.py, bench/RESULTS.md). ``--emulate`` (no GPU here): small models, target
``cuda -max_num_threads=64``, the kernels run by the host emulation (tvmpy/testing/cuda_fake.py):
errors only, no times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules, as every bench)
from gpu_common import cuda_target, fmt_stats, ratio, stats, time_torch  # noqa: E402

BOUND = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 4e-2}


def _model(name: str, batch: int, small: bool):
    from tvmpy.relay.testing import onnx_models

    if small:
        return {"resnet18": lambda: onnx_models.resnet18(batch=batch, image=32, classes=10),
                "mobilenet_v2": lambda: onnx_models.mobilenet_v2(batch=batch, image=32,
                                                                 classes=10),
                "bert_encoder": lambda: onnx_models.bert_encoder(batch=batch, layers=1,
                                                                 hidden=64, heads=4, seq=16),
                }[name]()
    return {"resnet18": lambda: onnx_models.resnet18(batch=batch),
            "mobilenet_v2": lambda: onnx_models.mobilenet_v2(batch=batch),
            "bert_encoder": lambda: onnx_models.bert_encoder(batch=batch)}[name]()


def _build(job: dict) -> dict:
    """One build in a worker process: import, ToMixedPrecision (unless float32), relay.build,
    export_library. Returns the library path, build seconds and the kernels' ptxas figures."""
    from tvmpy import relay
    from tvmpy.relay.testing import compare, onnx_models

    out = dict(job)
    try:
        m = _model(job["model"], job["batch"], job["small"])
        feeds = onnx_models.input_feeds(m)
        mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
        t0 = time.perf_counter()
        if job["precision"] != "float32":
            mod = relay.transform.ToMixedPrecision(job["precision"])(mod)
        lib, _ = compare.build(mod, params, opt_level=3, target=job["target"])
        out["build_s"] = time.perf_counter() - t0
        vals, stack = [], [getattr(lib.get_lib().imported_modules[0], "ptxas_info", None)]
        while stack:  # {arch: {kernel: PtxasInfo}}
            v = stack.pop()
            if isinstance(v, dict):
                stack.extend(v.values())
            elif hasattr(v, "registers"):
                vals.append(v)
        out["kernels"] = len(vals)
        out["max_registers"] = max((i.registers for i in vals), default=0)
        out["spill_bytes"] = sum(i.spill_stores + i.spill_loads for i in vals)
        out["casts"] = str(mod).count("cast(")
        lib.export_library(job["path"])
    except Exception as e:  # noqa: BLE001  (reported per variant)
        out["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    return out


def _run_tvmpy(path: str, feeds: dict, emulate: bool, number: int, repeat: int,
               workdir: str) -> tuple[np.ndarray, dict | None]:
    import tvmpy as tvm
    from tvmpy.contrib import graph_executor

    factory = tvm.runtime.load_module(path)
    prev = None
    if emulate:
        from tvmpy.runtime import cuda_module
        from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

        glib = factory.get_lib()
        host = HostKernels(glib.imported_modules[0].get_source(), glib.plan["kernels"], workdir)
        prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        dev = tvm.cuda(0)
        g = graph_executor.GraphModule(factory["default"](dev))
        g.set_input(**feeds)
        g.run()
        out = g.get_output(0).numpy()
        if emulate:
            return out, None
        tm = g.module.time_evaluator("run", dev, number=number, repeat=repeat)()
        return out, stats(list(tm.results))
    finally:
        if emulate:
            from tvmpy.runtime import cuda_module

            cuda_module.set_driver(prev)


def _fmt(v) -> str:
    return fmt_stats(v) if isinstance(v, dict) else "n/a"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", default="1,16")
    p.add_argument("--models", default="resnet18,mobilenet_v2,bert_encoder")
    p.add_argument("--types", default="float16", help="mixed precision types besides float32")
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 2))
    p.add_argument("--json", default="")
    p.add_argument("--emulate", action="store_true",
                   help="no GPU: small models on the host emulation of the CUDA kernels")
    args = p.parse_args()
    t_start = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="gpu_mp_")
    target = "cuda -max_num_threads=64" if args.emulate else "cuda"
    if not args.emulate:
        import tvmpy as tvm

        if not tvm.cuda(0).exist:
            print("no CUDA device: run with --emulate for the correctness part")
            return 2
        target = cuda_target("cuda")
    precisions = ["float32"] + [t for t in args.types.split(",") if t]
    batches = [int(b) for b in args.batches.split(",") if b]
    models = [m for m in args.models.split(",") if m]
    jobs = [{"model": m, "batch": b, "precision": pr, "target": target, "small": args.emulate,
             "path": os.path.join(workdir, f"{m}_b{b}_{pr}.so")}
            for b in batches for m in models for pr in precisions]
    print(f"target {target!r}; {len(jobs)} builds on {args.workers} workers", flush=True)
    import multiprocessing as mp

    with ProcessPoolExecutor(args.workers, mp_context=mp.get_context("spawn")) as pool:
        built = list(pool.map(_build, jobs))
    t_built = time.perf_counter()
    print(f"builds done in {t_built - t_start:.1f} s (wall)", flush=True)
    for b in built:
        if "error" in b:
            print(f"  BUILD ERROR {b['model']} b{b['batch']} {b['precision']}: {b['error'][:300]}")
        else:
            print(f"  {b['model']} b{b['batch']} {b['precision']}: build {b['build_s']:.1f} s, "
                  f"{b['kernels']} kernels, max {b['max_registers']} registers, "
                  f"{b['spill_bytes']} spill bytes, {b['casts']} casts", flush=True)

    from tvmpy.relay.testing import compare, onnx_models

    cols = " | ".join(f"tvmpy {pr} ms" for pr in precisions)
    errs = " | ".join(f"err {pr}" for pr in precisions)
    print(f"\n| model | batch | {cols} | torch fp32 ms | torch autocast fp16 ms | "
          f"tvmpy fp16 / fp32 | tvmpy fp16 / torch autocast | {errs} | err torch autocast |")
    print("|---" * (7 + 2 * len(precisions)) + "|", flush=True)
    rows, bad = [], []
    for b in batches:
        for name in models:
            row: dict = {"model": name, "batch": b, "target": target}
            rows.append(row)
            try:
                m = _model(name, b, args.emulate)
                feeds = onnx_models.input_feeds(m)
                ref = compare.ort_runner(m, threads=os.cpu_count() or 2)(feeds)[0]
                for job in built:
                    if job["model"] != name or job["batch"] != b:
                        continue
                    pr = job["precision"]
                    row[f"build_{pr}"] = {k: job.get(k) for k in (
                        "build_s", "kernels", "max_registers", "spill_bytes", "casts", "error")}
                    if "error" in job:
                        bad.append(f"{name} b{b} {pr}: build failed")
                        continue
                    out, st = _run_tvmpy(job["path"], feeds, args.emulate, args.number,
                                         args.repeat, workdir)
                    rel = compare.errors(out, ref)[1]
                    row[f"tvmpy_{pr}"], row[f"err_{pr}"] = st, rel
                    if not (rel <= BOUND[pr]) or out.dtype != ref.dtype:
                        bad.append(f"{name} b{b} {pr}: error {rel:.2e} > {BOUND[pr]:.0e}")
                if not args.emulate:
                    for key, auto in (("torch_fp32", False), ("torch_autocast_fp16", True)):
                        try:
                            st = time_torch(m, feeds, args.number, args.repeat, autocast=auto)
                            out = st.pop("output")
                            row[key], row[f"err_{key}"] = st, compare.errors(out, ref)[1]
                        except Exception as e:  # noqa: BLE001  (report, go on)
                            row[key] = f"{type(e).__name__}: {e}"
            except Exception as e:  # noqa: BLE001  (one model failing must not hide the others)
                row["error"] = f"{type(e).__name__}: {e}"
                bad.append(f"{name} b{b}: {row['error'][:200]}")
                traceback.print_exc()
            print(_line(row, precisions), flush=True)
            if args.json:
                with open(args.json, "w") as fh:
                    json.dump({"rows": rows, "wall_s": time.perf_counter() - t_start,
                               "build_wall_s": t_built - t_start}, fh, indent=1)
    print(f"\ntotal {time.perf_counter() - t_start:.1f} s (builds {t_built - t_start:.1f} s)")
    for line in bad:
        print("WRONG:", line)
    return 1 if bad else 0


def _line(row: dict, precisions: list[str]) -> str:
    if "error" in row:
        return f"| {row['model']} | {row['batch']} | ERROR {row['error'][:200]} |"
    tv = [row.get(f"tvmpy_{pr}") for pr in precisions]
    t32, tac = row.get("torch_fp32"), row.get("torch_autocast_fp16")
    f16 = row.get("tvmpy_float16")

    def err(k: str) -> str:
        v = row.get(k)
        return f"{v:.1e}" if isinstance(v, float) else "n/a"

    return (f"| {row['model']} | {row['batch']} | " + " | ".join(_fmt(v) for v in tv)
            + f" | {_fmt(t32)} | {_fmt(tac)} | {ratio(f16, tv[0])} | {ratio(f16, tac)} | "
            + " | ".join(err(f"err_{pr}") for pr in precisions)
            + f" | {err('err_torch_autocast_fp16')} |")


if __name__ == "__main__":
    sys.exit(main())
