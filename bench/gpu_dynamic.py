"""Dynamic batch on the GPU: the BERT encoder and ResNet-18 exported with a symbolic batch,
compiled ONCE with ``relay.vm.compile(target="cuda")`` and run by the VM at several batch sizes
in one session, next to a static ``relay.build`` of each batch (graph executor) and eager torch
(cuDNN/cuBLAS), every output checked against onnxruntime on the CPU.

    PYTHONPATH=. python bench/gpu_dynamic.py [--target cuda|opencl] [--batches 1,4,16]
        [--static-batches 1,16] [--models bert_encoder,resnet18] [--image 224] [--seq 128]
        [--variants plain,direct,hint16] [--number 10] [--repeat 5] [--json out.json]

Times (ms per call, median of ``repeat`` means of ``number`` calls, min-max), inputs already on
the device, outputs left there, the device synchronized before and after each repeat (same
clock for all three):

- ``vm``: ``vm.invoke("main", x)`` of the dynamic-batch executable. Per call: the input copied
  into the segment's storage for this batch (a device plan per batch, cached after the first
  call), the kernels (symbolic extents, launch sizes from the batch), the output copied into a
  pooled device array. ``vm first``: the first call at a batch (plan creation: device
  allocation, kernel binding).
- variants (``--variants``, a column each; each one more VM build of the same model):
  ``plain``: every operator with a run-time batch on the plain one-output-per-thread schedule
  (conv2d, dense, batch_matmul: what session 6 measured on the H200, ResNet-18 5.98 / 10.10 /
  34.23 ms); ``direct``: no Winograd for a run-time batch (``relay.cuda.winograd`` False: every
  conv on the direct template's symbolic-batch schedule); ``hint16``: the conv tiles chosen
  for a batch of 16 instead of 1 (``relay.gpu.symbolic_batch_hint``); ``rows64``: dense with
  run-time rows in 64-row blocks, 4 rows a thread (``SYMBOLIC_ROWS_VTHREADS`` 4, not 1).
  Each model gets those that change it (:data:`MODEL_VARIANTS`; ResNet-18's one dense layer
  is left out of ``rows64``). ``--variants ""`` skips them.
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
VARIANTS = ("plain", "direct", "hint16", "rows64")
MODEL_VARIANTS = {"resnet18": ("plain", "direct", "hint16"), "bert_encoder": ("plain", "rows64")}
"""The variants that change something in each model (convs; the dense layers)."""


def _variant_vm(variant: str, mod, params, target: str, dev) -> VirtualMachine:
    """The VM of one variant build (see the module docstring)."""
    from tvmpy.relay.op.strategy import gpu as gpu_strategy

    config = {"direct": {"relay.cuda.winograd": False},
              "hint16": {"relay.gpu.symbolic_batch_hint": 16}}.get(variant, {})
    names = ("_symbolic_rows", "_symbolic_batch", "_conv_symbolic_batch")
    saved = [getattr(gpu_strategy, n) for n in names]
    rows = gpu_strategy.SYMBOLIC_ROWS_VTHREADS
    if variant == "plain":  # every run-time-batch template off: the plain schedule
        for n in names:
            setattr(gpu_strategy, n, lambda *a: False)
    elif variant == "rows64":  # dense with run-time rows: 64-row blocks (4 rows a thread)
        gpu_strategy.SYMBOLIC_ROWS_VTHREADS = 4
    elif variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r} ({', '.join(VARIANTS)})")
    try:
        with tvm.transform.PassContext(opt_level=3, config=config):
            return VirtualMachine(relay.vm.compile(mod, target=target, params=params), dev)
    finally:
        for n, f in zip(names, saved):
            setattr(gpu_strategy, n, f)
        gpu_strategy.SYMBOLIC_ROWS_VTHREADS = rows


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
    variants = {}
    for v in args.variants:
        if v not in MODEL_VARIANTS.get(name, VARIANTS):
            continue
        t0 = time.perf_counter()
        variants[v] = _variant_vm(v, mod, params, target, dev)
        print(f"{name}: variant {v} VM build {time.perf_counter() - t0:.1f} s", flush=True)
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
            for v, vvm in variants.items():
                out = vvm.invoke("main", **dfeeds)
                out = out[0] if isinstance(out, tuple) else out
                row[f"vm_{v}_rel_err"] = compare.errors(out.numpy(), want)[1]
                row[f"vm_{v}"] = _time(lambda f=dfeeds, m=vvm: m.invoke("main", **f), dev,
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
        print(_line(row, args.variants), flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)


def _fmt(v) -> str:
    if isinstance(v, dict):
        return fmt_stats(v)
    return "n/a" if v is None else str(v)[:60]


def _line(row: dict, variants: list) -> str:
    if "error" in row:
        return f"| {row['model']} | {row['batch']} | ERROR {row['error'][:300]} |"
    vm, st, to = row.get("vm"), row.get("static"), row.get("torch")
    se = row.get("static_rel_err")
    cols = "".join(f"{_fmt(row.get(f'vm_{v}'))} | " for v in variants)
    return (f"| {row['model']} | {row['batch']} | {_fmt(vm)} | {cols}"
            f"{row['vm_first_ms']:.1f} | "
            f"{_fmt(st)} | {_fmt(to)} | {ratio(vm, st)} | {ratio(vm, to)} | "
            f"{row['vm_rel_err']:.1e} / {'-' if se is None else f'{se:.1e}'} |")


def _bad(row: dict) -> bool:
    return "error" in row or not (row["vm_rel_err"] <= TOL
                                  and all(v <= TOL for k, v in row.items()
                                          if k.startswith("vm_") and k.endswith("_rel_err"))
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
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="extra VM builds timed beside the default one (plain: every op on the "
                   "plain schedule; direct: no Winograd; hint16: conv tiles for batch 16; "
                   "rows64: dense with 64-row blocks); empty: none")
    args = p.parse_args()
    args.batches = [int(b) for b in args.batches.split(",") if b]
    args.static_batches = [int(b) for b in args.static_batches.split(",") if b]
    args.variants = [v for v in args.variants.split(",") if v]
    for v in args.variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r} ({', '.join(VARIANTS)})")
    target = cuda_target(args.target)
    dev = device(args.target)
    if not dev.exist:
        print(f"no device {dev}: nothing to measure (try --target opencl)")
        return 2
    on_gpu = target.startswith(("cuda", "nvptx"))
    print(f"target {target!r}, device {dev}, image {args.image}, seq {args.seq}", flush=True)
    print("| model | batch | VM dynamic ms (min-max) | "
          + "".join(f"VM {v} ms | " for v in args.variants)
          + "VM first call ms | static graph ms | torch eager ms | VM / static | VM / torch | "
          "rel err vs ORT (VM / static) |")
    print("|---|---|---|" + "---|" * len(args.variants) + "---|---|---|---|---|---|",
          flush=True)
    rows: list[dict] = []
    for name in args.models.split(","):
        try:
            run_model(name, args, target, dev, on_gpu, rows)
        except Exception as e:  # noqa: BLE001
            rows.append({"model": name, "batch": "all", "error": f"{type(e).__name__}: {e}"})
            traceback.print_exc()
            print(_line(rows[-1], args.variants), flush=True)
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
