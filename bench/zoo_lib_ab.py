"""Whole zoo models of two source trees in ONE process, interleaved: an A/B that a loaded
machine's drift between separate runs does not blur.

    # in each tree (PYTHONPATH=. from it): build the models, export their libraries
    python bench/zoo_lib_ab.py export /tmp/ab/base inception_v3,googlenet
    # then, from either tree: load both sets and onnxruntime, interleave rounds
    python bench/zoo_lib_ab.py run /tmp/ab/base,/tmp/ab/new inception_v3,googlenet [--rounds 11]
        [--threads 1]

``run`` checks every library's outputs against onnxruntime (relative max error < 1e-3), then
times the sides in interleaved rounds (bench/common.interleaved_samples; at 1 thread the
process's CPU time, else wall time) and prints each side's median [min-max], the median of
the per-round ratios to onnxruntime, and that of each later tree's per-round ratio to the
first. The library loaded first can run a little faster (placement of its weight buffers):
swap the order in a second run.

    # the same libraries' kernels inside the model, by kernel group (rnn_scan, dense, ...)
    python bench/zoo_lib_ab.py kernels /tmp/ab/base,/tmp/ab/new lstm_lm [--rounds 9]

A model name is a zoo name, or one of bench/auto_scheduler_models.py's models that is not in
the zoo (effnet_blocks, mobilenet_v2: issue 28's table).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    bench_threads,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    zoo_model,
)

ensure_native_blas()


def _model(name: str, relay: bool = True) -> tuple:
    """(ONNX model, feeds, relay module, params) of a zoo model, else of one of
    auto_scheduler_models' (module and params None unless ``relay``)."""
    from tvmpy.relay.testing import compare, zoo

    if name in zoo.MODELS:
        z = zoo_model(name, relay=relay)
        return z.model, z.feeds, z.mod, z.params
    import auto_scheduler_models

    model, feeds = auto_scheduler_models.MODELS[name]()
    if not relay:
        return model, feeds, None, None
    mod, params = compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})
    return model, feeds, mod, params


def export(out: str, models: list[str]) -> None:
    from tvmpy.relay.testing import compare

    os.makedirs(out, exist_ok=True)
    for name in models:
        _, _, mod, params = _model(name)
        lib, _ = compare.build(mod, params, opt_level=3)
        lib.export_library(os.path.join(out, name + ".so"))
        print("exported", name, flush=True)


def run(dirs: list[str], models: list[str], rounds: int, threads: int) -> None:
    import numpy as np

    import tvmpy
    from tvmpy.relay.testing import compare

    threads = bench_threads(threads)
    clock = bench_clock(threads == 1, threads)
    print(machine_description(), f"{threads} thread(s)", flush=True)
    for name in models:
        model, feeds, _, _ = _model(name, relay=False)
        ort = compare.ort_runner(model, threads=threads)
        ref = ort(feeds)
        sides = {}
        for d in dirs:
            r = compare.tvm_runner(tvmpy.runtime.load_module(os.path.join(d, name + ".so")))
            err = max(float(np.abs(a - b).max() / (np.abs(b).max() + 1e-9))
                      for a, b in zip(r(feeds), ref))
            if err >= 1e-3:
                raise AssertionError(f"{name} from {d}: relative error {err:.2e}")
            sides[os.path.basename(d.rstrip("/"))] = (lambda r=r, f=feeds: r(f))
        sides["ort"] = lambda o=ort, f=feeds: o(f)
        s = interleaved_samples(sides, rounds, pause=0.1, target_s=0.15, clock=clock)
        cols = "  ".join(f"{k} {statistics.median(v) * 1e3:.2f} ms [{min(v) * 1e3:.2f}-"
                         f"{max(v) * 1e3:.2f}]" for k, v in s.items())
        ratios = "  ".join(
            f"{k}/ort {statistics.median([a / b for a, b in zip(s[k], s['ort'])]):.3f}"
            for k in s if k != "ort")
        trees = [k for k in s if k != "ort"]
        ratios += "".join(  # each later tree against the first, per round
            f"  {k}/{trees[0]} {statistics.median([a / b for a, b in zip(s[k], s[trees[0]])]):.3f}"
            for k in trees[1:])
        print(f"{name:16s} load {os.getloadavg()[0]:.1f}  {cols} | {ratios}", flush=True)


def loaded_graph(d: str, name: str, feeds: dict) -> object:
    """The exported library ``d/name.so`` as a graph-executor module with ``feeds`` set and
    run once (its kernels loaded and warm); its ``_calls`` are the nodes in graph order."""
    import tvmpy
    from tvmpy.contrib import graph_executor

    lib = tvmpy.runtime.load_module(os.path.join(d, name + ".so"))
    gm = graph_executor.GraphModule(lib["default"](tvmpy.cpu())).module
    for k, v in feeds.items():
        gm.set_input(k, v)
    gm.run()
    return gm


def _kind(func_name: str) -> str:
    """A kernel's group in ``kernels``' table: the op that names it (rnn_scan, dense, conv2d,
    ...), else "other"."""
    for k in ("rnn_scan", "batch_matmul", "dense", "conv2d", "softmax", "pool"):
        if k in func_name:
            return k
    return "other"


def kernels(dirs: list[str], models: list[str], rounds: int, threads: int) -> None:
    """The sides' kernels inside the whole model: each library's graph nodes run in order, each
    timed (10 runs, median), sides alternating within every round; per kernel group (``_kind``)
    the median of the per-round sums [min-max]. At 1 thread the thread's CPU time."""
    import time


    threads = bench_threads(threads)
    clock = time.thread_time if threads == 1 else time.perf_counter
    print(machine_description(), f"{threads} thread(s)", flush=True)
    for name in models:
        feeds = _model(name, relay=False)[1]
        gms = {os.path.basename(d.rstrip("/")): loaded_graph(d, name, feeds) for d in dirs}
        sums: dict[str, dict[str, list[float]]] = {k: {} for k in gms}
        for _ in range(rounds):
            for side, gm in gms.items():
                calls = gm._calls  # noqa: SLF001
                per: list[list[float]] = [[] for _ in calls]
                for _ in range(10):
                    for j, (cf, args) in enumerate(calls):
                        t0 = clock()
                        cf(*args)
                        per[j].append(clock() - t0)
                groups: dict[str, float] = {}
                for node, ts in zip(gm._call_nodes, per):  # noqa: SLF001
                    g = _kind(node.func_name or "")
                    groups[g] = groups.get(g, 0.0) + statistics.median(ts)
                for g, t in groups.items():
                    sums[side].setdefault(g, []).append(t)
        cols = " | ".join(
            f"{side}: " + ", ".join(f"{g} {statistics.median(v) * 1e3:.3f} ms [{min(v) * 1e3:.3f}-"
                                    f"{max(v) * 1e3:.3f}]" for g, v in sorted(by_group.items()))
            for side, by_group in sums.items())
        print(f"{name:16s} load {os.getloadavg()[0]:.1f}  {cols}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["export", "run", "kernels"])
    ap.add_argument("dirs", help="export: the output folder; run: comma-separated folders")
    ap.add_argument("models", help="comma-separated zoo names")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.cmd == "export":
        export(a.dirs, a.models.split(","))
    elif a.cmd == "kernels":
        kernels(a.dirs.split(","), a.models.split(","), a.rounds, a.threads)
    else:
        run(a.dirs.split(","), a.models.split(","), a.rounds, a.threads)


if __name__ == "__main__":
    main()
