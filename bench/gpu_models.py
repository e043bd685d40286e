"""The three showcase models built for a GPU target, checked against onnxruntime and timed
next to PyTorch (cuDNN/cuBLAS) and onnxruntime's CUDA provider on the same device.

    PYTHONPATH=. python bench/gpu_models.py [--target opencl|cuda] [--batches 1,16]
        [--image 224] [--number 10] [--repeat 5] [--tune-log conv.log] [--json out.json]
        [--cuda-graph off|on|both] [--torch-compile default,reduce-overhead]
        [--winograd-pre default|on|off|both]

relay.build(target=...) (host code llvm; with --tune-log, under apply_history_best), the graph
executor on the target's device (storage, parameters and activations in device memory). The
output of one run is copied back and compared with onnxruntime on the CPU (max |diff| / max
|ref|). Times, all on device-resident inputs and excluding host copies: tvmpy
``gm.module.time_evaluator("run", dev)``; torch: the same ONNX graph executed node by node by
eager ``torch.nn.functional`` on the GPU (cuDNN with ``cudnn.benchmark``, TF32 off), timed with
CUDA events; onnxruntime's CUDAExecutionProvider with I/O binding when that provider is
installed (said so when it is not). Each figure: median over ``repeat`` of the mean of ``number``
runs, with min and max. On this machine the OpenCL device is PoCL on the CPU: its times say
nothing of a GPU (correctness is what counts).

``--cuda-graph both`` (a CUDA device): each model is timed with plain launches, then with the
executor's CUDA graphs (``set_use_cuda_graph(True)``: captured on the next run, replayed after),
one row each; the graph rows are checked after a replay with other inputs (against onnxruntime
on those) and again with the first ones. ``host issue``: the host's time for ``run()`` to
return (device idle before), median of 20: issue ~ run time means launch-bound.
``--torch-compile MODES``: torch.compile (inductor) of the same torch graph per mode
(``default``; ``reduce-overhead`` adds torch's own CUDA graphs), compile bounded by
``--torch-compile-timeout`` seconds per model and mode (skipped with the reason past it or on
any failure). The exit status is 1 when any tvmpy row is wrong (max |diff| / max |ref| > 1e-4)
or failed.

``--winograd-pre on|off``: build with PassContext ``relay.cuda.winograd_pre_transform`` set
(GPU Winograd weights transformed at build time by the AlterOpLayout, or inside the operator,
per call); ``both``: the A/B instead of the table above, per model and batch: both builds
(checked against onnxruntime), timed in alternating rounds (on-off, then off-on: both orders,
``repeat`` rounds of ``number`` runs each), plain launches and (a CUDA device) CUDA graphs,
with eager torch in the same run; each build's kernel count and weight-transform kernels.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules, as every bench)
from gpu_common import (
    cuda_event_times,
    cuda_target,
    device,
    fmt_stats,
    ratio,
    stats,
    time_torch,
    torch_no_tf32,
)

from tvmpy import autotvm
from tvmpy.contrib import graph_executor
from tvmpy.relay.testing import compare, onnx_models


def _time_ort_cuda(model, feeds: dict, number: int, repeat: int) -> dict | str:
    """onnxruntime's CUDA provider with inputs/outputs bound on the device; a string saying why
    not when the provider is missing."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return f"onnxruntime {ort.__version__} here has no CUDAExecutionProvider " \
               f"(providers: {', '.join(ort.get_available_providers())})"
    sess = ort.InferenceSession(model.SerializeToString(),
                                providers=[("CUDAExecutionProvider", {"use_tf32": 0}),
                                           "CPUExecutionProvider"])
    binding = sess.io_binding()
    for k, v in feeds.items():
        binding.bind_ortvalue_input(k, ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0))
    for o in sess.get_outputs():
        binding.bind_output(o.name, "cuda")
    for _ in range(3):
        sess.run_with_iobinding(binding)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            sess.run_with_iobinding(binding)
        binding.synchronize_outputs()
        times.append((time.perf_counter() - t) / number)
    return stats(times)


def _profile(g, dev, top: int) -> dict:
    """Where a run's time goes: each node's time with the device synchronized around it (its
    kernels plus its launch), the run without those syncs, and the host's time to issue a run
    (``run()`` returning, before the device finishes): issue ~ run means launch-bound."""
    rep = g.module.profile(number=5)
    issue = []
    for _ in range(5):
        dev.sync()
        t = time.perf_counter()
        g.run()
        issue.append(time.perf_counter() - t)
        dev.sync()
    rows = rep.sorted_rows()
    out = {"nodes": len(rows), "sum_nodes_ms": sum(r["time"] for r in rows) * 1e3,
           "run_ms": rep.total * 1e3, "host_issue_ms": float(np.median(issue)) * 1e3,
           "top": [{"node": r["node"], "us": r["time"] * 1e6, "shape": list(r["shape"])}
                   for r in rows[:top]]}
    print(f"  profile: {out['nodes']} nodes, sum {out['sum_nodes_ms']:.3f} ms (synced), run "
          f"{out['run_ms']:.3f} ms, host issue {out['host_issue_ms']:.3f} ms; top: "
          + "; ".join(f"{r['node'][:40]} {r['us']:.0f} us" for r in out["top"]), flush=True)
    return out


def _time_torch_compile(model, feeds: dict, number: int, repeat: int, mode: str,
                        timeout: int) -> dict:
    """torch.compile (inductor) of the eager torch graph, ``mode`` (default, reduce-overhead,
    max-autotune...); the first calls (compile, and for reduce-overhead the CUDA graph
    recording) bounded by ``timeout`` seconds (SIGALRM)."""
    import signal

    import torch

    from tvmpy.relay.testing.onnx_torch import torch_runner

    torch_no_tf32(cudnn_benchmark=False)
    torch._dynamo.reset()  # one code object serves every model: no recompile limit reached
    run = torch_runner(model, device="cuda")
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in feeds.items()}

    def expired(*_):
        raise TimeoutError(f"torch.compile(mode={mode!r}) took over {timeout} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(int(timeout))
    t0 = time.perf_counter()
    try:
        fn = torch.compile(run.forward, mode=mode, dynamic=False)
        for _ in range(3):
            out = fn(tensors)
        torch.cuda.synchronize()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    compile_s = time.perf_counter() - t0
    res = stats(cuda_event_times(lambda: fn(tensors), number, repeat))
    res["compile_s"] = compile_s
    res["output"] = out[0].clone().cpu().numpy()
    return res


def _issue_ms(g, dev, n: int = 20) -> float:
    """Median host time for ``run()`` to return, the device idle before each."""
    issue = []
    for _ in range(n):
        dev.sync()
        t = time.perf_counter()
        g.run()
        issue.append(time.perf_counter() - t)
    dev.sync()
    return float(np.median(issue)) * 1e3


def _graph_row(g, dev, row: dict, m, feeds: dict, want, args) -> dict:
    """The same executor with CUDA graphs: captured on the next run; checked after a replay on
    other inputs and after one on the first inputs; timed like the plain row."""
    gr = {k: row[k] for k in ("model", "batch", "target", "build_s")}
    gr["cuda_graph"] = True
    g.module.set_use_cuda_graph(True)
    g.run()  # the capture (after one plain run of the nodes)
    rng = np.random.default_rng(1)
    other = {k: (rng.standard_normal(v.shape) * (np.abs(v).max() or 1)).astype(v.dtype)
             if v.dtype.kind == "f" else rng.permutation(v.ravel()).reshape(v.shape)
             for k, v in feeds.items()}  # (token ids: the same ones, in another order)
    want2 = compare.ort_runner(m, threads=os.cpu_count() or 2)(other)[0]
    g.set_input(**other)
    g.run()
    err2 = compare.errors(g.get_output(0).numpy(), want2)[1]
    g.set_input(**feeds)
    g.run()
    gr["rel_err"] = max(err2, compare.errors(g.get_output(0).numpy(), want)[1])
    tm = g.module.time_evaluator("run", dev, number=args.number, repeat=args.repeat)()
    gr["tvmpy"] = stats(list(tm.results))
    gr["host_issue_ms"] = _issue_ms(g, dev)
    gr["graph_info"] = g.module.cuda_graph_info()
    g.module.set_use_cuda_graph(False)
    return gr


PRE_KEY = "relay.cuda.winograd_pre_transform"


def _wt_kernels(lib) -> int:
    """Weight-transform kernel launches per run: the graph's calls of functions with a kernel
    that writes ``winograd_U`` and reads neither input tiles (``winograd_V``) nor products
    (``winograd_M``): a Winograd operator that transforms inside (per call), or the separate
    transform of a weight known at run time; none when the weights were transformed at build
    time."""
    import re

    src = lib.get_lib().imported_modules[0].get_source()
    sigs = re.findall(r"(?:__global__|__kernel)[^{]*?(\w+)_kernel\d+\(([^)]*)\)", src)
    funcs = {f for f, a in sigs if "winograd_U" in a and "winograd_V" not in a
             and "winograd_M" not in a}
    graph = json.loads(lib.get_graph_json())
    return sum(1 for n in graph["nodes"] if n["op"] == "tvm_op"
               and n["attrs"]["func_name"] in funcs)


def _winograd_ab(name: str, batch: int, m, feeds: dict, want, mod, params, target: str, dev,
                 on_gpu: bool, args) -> list[dict]:
    """``--winograd-pre both``: the two builds of one model, A/B-timed in alternating rounds
    (see the module docstring); one row per build and launch mode."""
    builds = {}
    for pre in (True, False):
        ctx = (autotvm.apply_history_best(args.tune_log) if args.tune_log
               else contextlib.nullcontext())
        with ctx:
            lib, build_s = compare.build(mod, params, opt_level=3, target=target,
                                         config={PRE_KEY: pre})
        g = graph_executor.GraphModule(lib["default"](dev))
        g.set_input(**feeds)
        g.run()
        err = compare.errors(g.get_output(0).numpy(), want)[1]
        summary = compare.graph_summary(lib)
        builds[pre] = {"g": g, "build_s": build_s, "rel_err": err,
                       "kernels": summary["kernels"], "weight_transform_kernels": _wt_kernels(lib)}
    modes = [False, True] if on_gpu and args.cuda_graph != "off" else [False]
    rows = []
    torch_t: dict | str | None = None
    if on_gpu:
        try:
            torch_t = time_torch(m, feeds, args.number, args.repeat)
            torch_t["rel_err"] = compare.errors(torch_t.pop("output"), want)[1]
        except Exception as e:  # noqa: BLE001  (report, go on)
            torch_t = f"{type(e).__name__}: {e}"
    for graph in modes:
        per = {True: [], False: []}
        for b in builds.values():
            if on_gpu:
                b["g"].module.set_use_cuda_graph(graph)
            b["g"].run()  # (CUDA graphs: the capture)
            b["g"].run()
        for r in range(args.repeat):
            order = (True, False) if r % 2 == 0 else (False, True)
            for pre in order:
                tm = builds[pre]["g"].module.time_evaluator("run", dev, number=args.number,
                                                            repeat=1)()
                per[pre].extend(tm.results)
        for pre in (True, False):
            b = builds[pre]
            b["g"].set_input(**feeds)
            b["g"].run()
            err = max(b["rel_err"], compare.errors(b["g"].get_output(0).numpy(), want)[1])
            rows.append({"model": name, "batch": batch, "target": target,
                         "winograd_pre": pre, "cuda_graph": graph, "build_s": b["build_s"],
                         "kernels": b["kernels"],
                         "weight_transform_kernels": b["weight_transform_kernels"],
                         "rel_err": err, "tvmpy": stats(per[pre]), "torch": torch_t})
        on, off = rows[-2]["tvmpy"], rows[-1]["tvmpy"]
        rows[-2]["on_over_off"] = on["median_ms"] / off["median_ms"]
        for b in builds.values():
            if on_gpu:
                b["g"].module.set_use_cuda_graph(False)
    return rows


def _ab_line(r: dict) -> str:
    if "error" in r:
        return f"| {r['model']} | {r['batch']} | ERROR {r['error'][:200]} |"
    how = "CUDA graph" if r.get("cuda_graph") else "plain"
    pre = "build time" if r["winograd_pre"] else "in operator"
    tv, to = r["tvmpy"], r.get("torch")
    ab = f"{r['on_over_off']:.3f}" if "on_over_off" in r else ""
    return (f"| {r['model']} | {r['batch']} | {how} | {pre} | {r['kernels']} | "
            f"{r['weight_transform_kernels']} | {r['build_s']:.1f} | {_fmt(tv)} | {ab} | "
            f"{_fmt(to) if isinstance(to, dict) else 'n/a'} | {ratio(tv, to)} | "
            f"{r['rel_err']:.1e} |")


def _makers(batch: int, image: int) -> dict:
    return {"resnet18": lambda: onnx_models.resnet18(batch=batch, image=image),
            "mobilenet_v2": lambda: onnx_models.mobilenet_v2(batch=batch, image=image),
            "bert_encoder": lambda: onnx_models.bert_encoder(batch=batch)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="opencl")
    p.add_argument("--batches", default="1")
    p.add_argument("--models", default="resnet18,mobilenet_v2,bert_encoder")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--tune-log", default="", help="apply these AutoTVM records (apply_history_best)")
    p.add_argument("--json", default="", help="also write the rows here (rewritten per model)")
    p.add_argument("--profile", type=int, default=0, help="profile each model: show the N "
                   "slowest nodes, the synced sum and the host's time to issue a run")
    p.add_argument("--cuda-graph", default="off", choices=["off", "on", "both"],
                   help="time tvmpy with plain launches (off), CUDA graphs (on) or both rows")
    p.add_argument("--torch-compile", default="", help="also time torch.compile (inductor) "
                   "with these modes, e.g. default,reduce-overhead")
    p.add_argument("--torch-compile-timeout", type=int, default=60,
                   help="seconds allowed for each compile (skipped past it)")
    p.add_argument("--torch-compile-budget", type=float, default=150,
                   help="seconds of torch.compile in all; the compiles after are skipped")
    p.add_argument("--winograd-pre", default="default", choices=["default", "on", "off", "both"],
                   help="GPU Winograd weights transformed at build time (on), inside the "
                   "operator (off), or the A/B of both (see the module docstring)")
    args = p.parse_args()
    target = cuda_target(args.target)
    dev = device(args.target)
    if args.tune_log and not os.path.exists(args.tune_log):
        print(f"--tune-log {args.tune_log}: no such file; fallback configurations")
        args.tune_log = ""
    on_gpu = target.startswith(("cuda", "nvptx")) and dev.exist
    print(f"target {target!r}, device {dev}, image {args.image}", flush=True)
    if args.winograd_pre == "both":
        sys.exit(_main_ab(args, target, dev, on_gpu))
    modes = [x for x in args.torch_compile.split(",") if x]
    build_config = {} if args.winograd_pre == "default" else {PRE_KEY: args.winograd_pre == "on"}
    print("| model | batch | launches | build (s) | tvmpy ms (min-max) | host issue ms | "
          "torch eager GPU ms | " + "".join(f"torch.compile {x} ms | " for x in modes)
          + "ORT CUDA ms | tvmpy / torch | max abs err / max abs ref (vs ORT CPU) |")
    print("|---|---|---|---|---|---|---|" + "---|" * len(modes) + "---|---|---|", flush=True)
    rows: list[dict] = []
    compile_spent = 0.0
    for batch in (int(b) for b in args.batches.split(",") if b):
        makers = _makers(batch, args.image)
        for name in args.models.split(","):
            row: dict = {"model": name, "batch": batch, "target": target,
                         "cuda_graph": args.cuda_graph == "on"}
            rows.append(row)
            extra: list[dict] = []
            try:
                m = makers[name]()
                feeds = onnx_models.input_feeds(m)
                want = compare.ort_runner(m, threads=os.cpu_count() or 2)(feeds)[0]
                mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
                ctx = (autotvm.apply_history_best(args.tune_log) if args.tune_log
                       else contextlib.nullcontext())
                with ctx:
                    lib, row["build_s"] = compare.build(mod, params, opt_level=3, target=target,
                                                        config=build_config)
                g = graph_executor.GraphModule(lib["default"](
                    dev, use_cuda_graph=args.cuda_graph == "on" if on_gpu else None))
                g.set_input(**feeds)
                g.run()
                g.run()  # (with CUDA graphs on: the replay's output is checked)
                out = g.get_output(0).numpy()
                row["rel_err"] = compare.errors(out, want)[1]
                tm = g.module.time_evaluator("run", dev, number=args.number, repeat=args.repeat)()
                row["tvmpy"] = stats(list(tm.results))
                if on_gpu:
                    row["host_issue_ms"] = _issue_ms(g, dev)
                if args.profile:
                    row["profile"] = _profile(g, dev, args.profile)
                if on_gpu and args.cuda_graph == "both":
                    try:
                        extra.append(_graph_row(g, dev, row, m, feeds, want, args))
                    except Exception as e:  # noqa: BLE001  (report, go on)
                        extra.append({**{k: row[k] for k in ("model", "batch", "target")},
                                      "cuda_graph": True, "error": f"{type(e).__name__}: {e}"})
                        traceback.print_exc()
                if on_gpu:
                    try:
                        t = time_torch(m, feeds, args.number, args.repeat)
                        row["torch_rel_err"] = compare.errors(t.pop("output"), want)[1]
                        row["torch"] = t
                    except Exception as e:  # noqa: BLE001  (report, go on)
                        row["torch"] = f"{type(e).__name__}: {e}"
                    for mode in modes:
                        key = f"torch_compile_{mode}"
                        left = args.torch_compile_budget - compile_spent
                        if left < 5:
                            row[key] = f"skipped: --torch-compile-budget " \
                                       f"{args.torch_compile_budget:.0f} s spent"
                            continue
                        t_c = time.perf_counter()
                        try:
                            t = _time_torch_compile(m, feeds, args.number, args.repeat, mode,
                                                    int(min(args.torch_compile_timeout, left)))
                            t["rel_err"] = compare.errors(t.pop("output"), want)[1]
                            row[key] = t
                        except Exception as e:  # noqa: BLE001  (skipped, with the reason)
                            row[key] = f"{type(e).__name__}: {str(e)[:300]}"
                            print(f"  torch.compile {mode}: skipped: {row[key]}", flush=True)
                        compile_spent += time.perf_counter() - t_c
                    try:
                        row["ort_cuda"] = _time_ort_cuda(m, feeds, args.number, args.repeat)
                    except Exception as e:  # noqa: BLE001
                        row["ort_cuda"] = f"{type(e).__name__}: {e}"
            except Exception as e:  # noqa: BLE001  (one model failing must not hide the others)
                row["error"] = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            for r in [row] + extra:
                for k in ["torch", "ort_cuda"] + [f"torch_compile_{x}" for x in modes]:
                    if k in row and r is not row:
                        r[k] = row[k]
                print(_line(r, modes), flush=True)
                if r is not row:
                    rows.append(r)
            if args.json:
                with open(args.json, "w") as fh:
                    json.dump(rows, fh, indent=1)
    bad = [r for r in rows if "error" in r or not r.get("rel_err", 1.0) <= 1e-4]
    for r in bad:
        print(f"WRONG OR FAILED: {r['model']} batch {r['batch']} cuda_graph "
              f"{r.get('cuda_graph')}: {r.get('error') or r.get('rel_err')}", flush=True)
    if bad:
        sys.exit(1)


def _main_ab(args, target: str, dev, on_gpu: bool) -> int:
    """``--winograd-pre both``: the A/B table; returns the exit status (1: a wrong or failed
    build)."""
    print("| model | batch | launches | Winograd weights | kernels | weight-transform kernels | "
          "build (s) | tvmpy ms (min-max) | build time / in operator | torch eager GPU ms | "
          "tvmpy / torch | max abs err / max abs ref (vs ORT CPU) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    rows: list[dict] = []
    for batch in (int(b) for b in args.batches.split(",") if b):
        makers = _makers(batch, args.image)
        for name in args.models.split(","):
            try:
                m = makers[name]()
                feeds = onnx_models.input_feeds(m)
                want = compare.ort_runner(m, threads=os.cpu_count() or 2)(feeds)[0]
                mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
                new = _winograd_ab(name, batch, m, feeds, want, mod, params, target, dev,
                                   on_gpu, args)
            except Exception as e:  # noqa: BLE001  (one model failing must not hide the others)
                new = [{"model": name, "batch": batch, "error": f"{type(e).__name__}: {e}"}]
                traceback.print_exc()
            for r in new:
                print(_ab_line(r), flush=True)
            rows.extend(new)
            if args.json:
                with open(args.json, "w") as fh:
                    json.dump(rows, fh, indent=1)
    bad = [r for r in rows if "error" in r or not r.get("rel_err", 1.0) <= 1e-4]
    for r in bad:
        print(f"WRONG OR FAILED: {r['model']} batch {r['batch']}: "
              f"{r.get('error') or r.get('rel_err')}", flush=True)
    return 1 if bad else 0


def _fmt(v) -> str:
    if isinstance(v, dict):
        return fmt_stats(v)
    return "n/a" if v is None else "see json"


def _line(row: dict, modes: tuple | list = ()) -> str:
    how = "CUDA graph" if row.get("cuda_graph") else "plain"
    if "error" in row:
        return f"| {row['model']} | {row['batch']} | {how} | ERROR {row['error'][:200]} |"
    tv, to = row.get("tvmpy"), row.get("torch")
    issue = row.get("host_issue_ms")
    tc = "".join(f"{_fmt(row.get(f'torch_compile_{x}'))} | " for x in modes)
    return (f"| {row['model']} | {row['batch']} | {how} | {row['build_s']:.1f} | {_fmt(tv)} | "
            f"{'n/a' if issue is None else f'{issue:.3f}'} | {_fmt(to)} | {tc}"
            f"{_fmt(row.get('ort_cuda'))} | {ratio(tv, to)} | {row['rel_err']:.1e} |")


if __name__ == "__main__":
    main()
