"""Dynamic batch on the GPU: the BERT encoder and ResNet-18 exported with a symbolic batch,
compiled ONCE with ``relay.vm.compile(target="cuda")`` and run by the VM at several batch sizes
in one session, next to a static ``relay.build`` of each batch (graph executor) and eager torch
(cuDNN/cuBLAS), every output checked against onnxruntime on the CPU.

    PYTHONPATH=. python bench/gpu_dynamic.py [--target cuda|opencl] [--batches 1,4,16]
        [--static-batches 1,16] [--models bert_encoder,resnet18] [--image 224] [--seq 128]
        [--number 10] [--repeat 5] [--json out.json]

Times (ms per call, median of ``repeat`` means of ``number`` calls, min-max), inputs already on
the device, outputs left there, the device synchronized before and after each repeat (same
clock for all three):

- ``vm``: ``vm.invoke("main", x)`` of the dynamic-batch executable. Per call: the input copied
  into the segment's storage for this batch (a device plan per batch, cached after the first
  call), the kernels (symbolic extents, launch sizes from the batch), the output copied into a
  pooled device array. ``vm first``: the first call at a batch (plan creation: device
  allocation, kernel binding).
- ``plain variant``: the same VM with dense/batch_matmul of a run-time row/batch count on the
  plain one-output-per-thread schedule (before the fixed-tile template schedules; which is
  faster on a GPU is what this column says; ``--no-plain`` skips it).
- ``static``: the graph executor of ``relay.build`` for that batch (constant shapes: the tuned
  templates where the strategies have them, here untuned fallbacks), ``g.run()``; only at
  ``--static-batches`` (a static ResNet-18 build for CUDA takes 15-40 s of host time).
- ``torch``: the same ONNX graph node by node in eager torch on the GPU (TF32 off).

Exit status 1 when any tvmpy output differs from onnxruntime's by more than 1e-3 of its
magnitude (or a side fails), after printing everything. On a machine without a GPU,
``--target opencl`` (PoCL) checks the same path (its times say nothing of a GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules, as every bench)
from gpu_common import cuda_target, device, fmt_stats, ratio, stats, time_torch  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.relay.testing import compare, onnx_models  # noqa: E402
from tvmpy.runtime.vm import VirtualMachine  # noqa: E402

TOL = 1e-3


def _time(fn, dev, number: int, repeat: int) -> dict:
    fn()
    dev.sync()
    times = []
    for _ in range(repeat):
        dev.sync()
        t = time.perf_counter()
        for _ in range(number):
            fn()
        dev.sync()
        times.append((time.perf_counter() - t) / number)
    return stats(times)


def _model(name: str, batch, args):
    if name == "resnet18":
        return onnx_models.resnet18(batch=batch, image=args.image)
    if name == "bert_encoder":
        return onnx_models.bert_encoder(batch=batch, seq=args.seq)
    raise ValueError(f"unknown model {name!r} (resnet18, bert_encoder)")


def _dims(name: str, batch: int) -> dict:
    return {"N": batch} if name == "resnet18" else {"B": batch}


def run_model(name: str, args, target: str, dev, on_gpu: bool, rows: list) -> None:
    dyn = _model(name, "N" if name == "resnet18" else "B", args)
    mod, params = compare.import_onnx(dyn)
    t0 = time.perf_counter()
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, target=target, params=params)
    vm_build = time.perf_counter() - t0
    vm = VirtualMachine(exe, dev)
    print(f"{name}: VM build {vm_build:.1f} s ({exe.stats})", flush=True)
    plain = None
    if args.plain:  # the variant: dense/batch_matmul with the plain one-output-per-thread
        from tvmpy.relay.op.strategy import gpu as gpu_strategy  # schedule

        saved = gpu_strategy._symbolic_rows, gpu_strategy._symbolic_batch
        gpu_strategy._symbolic_rows = gpu_strategy._symbolic_batch = lambda inputs: False
        try:
            with tvm.transform.PassContext(opt_level=3):
                plain = VirtualMachine(relay.vm.compile(mod, target=target, params=params), dev)
        finally:
            gpu_strategy._symbolic_rows, gpu_strategy._symbolic_batch = saved
    for batch in args.batches:
        row: dict = {"model": name, "batch": batch, "target": target, "vm_build_s": vm_build}
        rows.append(row)
        try:
            static = _model(name, batch, args)
            feeds = onnx_models.input_feeds(static, dims=_dims(name, batch))
            want = compare.ort_runner(static, threads=os.cpu_count() or 2)(feeds)[0]
            dfeeds = {k: tvm.nd.array(v, dev) for k, v in feeds.items()}
            # the VM: first call at this batch (plan creation), then timed
            dev.sync()
            t = time.perf_counter()
            out = vm.invoke("main", **dfeeds)
            dev.sync()
            row["vm_first_ms"] = (time.perf_counter() - t) * 1e3
            out = out[0] if isinstance(out, tuple) else out
            row["vm_rel_err"] = compare.errors(out.numpy(), want)[1]
            row["vm"] = _time(lambda f=dfeeds: vm.invoke("main", **f), dev, args.number,
                              args.repeat)
            if plain is not None:
                out = plain.invoke("main", **dfeeds)
                out = out[0] if isinstance(out, tuple) else out
                row["vm_plain_rel_err"] = compare.errors(out.numpy(), want)[1]
                row["vm_plain"] = _time(lambda f=dfeeds: plain.invoke("main", **f), dev,
                                        args.number, args.repeat)
            if on_gpu:
                try:
                    tt = time_torch(static, feeds, args.number, args.repeat)
                    row["torch_rel_err"] = compare.errors(tt.pop("output"), want)[1]
                    row["torch"] = tt
                except Exception as e:  # noqa: BLE001  (report, go on)
                    row["torch"] = f"{type(e).__name__}: {e}"
            if batch in args.static_batches:  # the static build of this batch
                smod, sparams = compare.import_onnx(static, {k: v.shape for k, v in feeds.items()})
                lib, row["static_build_s"] = compare.build(smod, sparams, opt_level=3,
                                                           target=target)
                g = graph_executor.GraphModule(lib["default"](dev))
                g.set_input(**feeds)
                g.run()
                row["static_rel_err"] = compare.errors(g.get_output(0).numpy(), want)[1]
                row["static"] = _time(g.run, dev, args.number, args.repeat)
        except Exception as e:  # noqa: BLE001  (one failing must not hide the others)
            row["error"] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        print(_line(row), flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)


def _fmt(v) -> str:
    if isinstance(v, dict):
        return fmt_stats(v)
    return "n/a" if v is None else str(v)[:60]


def _line(row: dict) -> str:
    if "error" in row:
        return f"| {row['model']} | {row['batch']} | ERROR {row['error'][:300]} |"
    vm, st, to = row.get("vm"), row.get("static"), row.get("torch")
    se = row.get("static_rel_err")
    return (f"| {row['model']} | {row['batch']} | {_fmt(vm)} | {_fmt(row.get('vm_plain'))} | "
            f"{row['vm_first_ms']:.1f} | "
            f"{_fmt(st)} | {_fmt(to)} | {ratio(vm, st)} | {ratio(vm, to)} | "
            f"{row['vm_rel_err']:.1e} / {'-' if se is None else f'{se:.1e}'} |")


def _bad(row: dict) -> bool:
    return "error" in row or not (row["vm_rel_err"] <= TOL
                                  and row.get("vm_plain_rel_err", 0.0) <= TOL
                                  and row.get("static_rel_err", 0.0) <= TOL
                                  and row.get("torch_rel_err", 0.0) <= TOL)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="cuda")
    p.add_argument("--batches", default="1,4,16")
    p.add_argument("--static-batches", default="1,16",
                   help="the batches also built static (graph executor)")
    p.add_argument("--models", default="bert_encoder,resnet18")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default="")
    p.add_argument("--no-plain", dest="plain", action="store_false",
                   help="skip the variant VM build whose dense/batch_matmul keep the plain "
                   "schedule (the tiled fixed-tile ones are the default)")
    args = p.parse_args()
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.static_batches = [int(b) for b in args.static_batches.split(",") if b]
    target = cuda_target(args.target)
    dev = device(args.target)
    if not dev.exist:
        print(f"no device {dev}: nothing to measure (try --target opencl)")
        return 2
    on_gpu = target.startswith(("cuda", "nvptx"))
    print(f"target {target!r}, device {dev}, image {args.image}, seq {args.seq}", flush=True)
    print("| model | batch | VM dynamic ms (min-max) | VM plain-matmul variant ms | "
          "VM first call ms | static graph ms | torch eager ms | VM / static | VM / torch | "
          "rel err vs ORT (VM / static) |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    rows: list[dict] = []
    for name in args.models.split(","):
        try:
            run_model(name, args, target, dev, on_gpu, rows)
        except Exception as e:  # noqa: BLE001
            rows.append({"model": name, "batch": "all", "error": f"{type(e).__name__}: {e}"})
            traceback.print_exc()
            print(_line(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    bad = [r for r in rows if _bad(r)]
    if bad:
        print(f"FAILED: {len(bad)} row(s) wrong or failed (tolerance {TOL} of the output's "
              "magnitude)")
        return 1
    print("all outputs within tolerance of onnxruntime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
