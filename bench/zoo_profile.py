"""Kernel-level profile of one zoo model at its real size: tvmpy's graph executor per-node
profile next to onnxruntime's session profiler, same process, same thread count.

    python bench/zoo_profile.py --model efficientnet_b0 [--threads 1] [--top 25] [--number 20]
        [--rounds 5] [--cpu-time]

Printed: the whole model's time on both sides (``--rounds`` interleaved rounds, inputs fed and
outputs fetched, as bench/zoo.py; with ``--cpu-time`` at 1 thread the process's CPU time, which
a loaded machine's preemption does not inflate), both sides' summed kernel time (each from its
own profiler, so without per-call overheads; tvmpy's per-node times with the same clock),
tvmpy's kernels grouped by kind (the fused function's name with its shape-free
suffix removed), onnxruntime's nodes grouped by op type, and tvmpy's ``--top`` slowest kernels
with their output shapes (their lowered IR: ``tvm.lower`` of the fused function, or
bench/kernel_hashes.py ``--dump``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import statistics  # noqa: E402

from common import (  # noqa: E402
    bench_clock,
    bench_threads,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    zoo_model,
)

ensure_native_blas()


def _kind(func_name: str) -> str:
    """``tvmgen_default_fused_nn_conv2d_add_sigmoid_multiply_3`` -> ``conv2d_add_sigmoid_multiply``."""
    name = re.sub(r"^(tvmgen_default_)?fused_", "", func_name)
    name = re.sub(r"_\d+$", "", name)
    return re.sub(r"\bnn_|contrib_", "", name)


def _node_times(gm: object, number: int, clock: object) -> list[dict]:
    """The graph executor's nodes timed one by one in graph order, ``number`` runs (after one
    warm-up), median per node, with ``clock`` (GraphExecutor.profile's loop, another clock)."""
    calls = gm._calls  # noqa: SLF001
    times: list[list[float]] = [[] for _ in calls]
    gm.run()
    for _ in range(number):
        for k, (cfunc, a) in enumerate(calls):
            t0 = clock()
            cfunc(*a)
            times[k].append(clock() - t0)
    rows = []
    for node, ts in zip(gm._call_nodes, times):  # noqa: SLF001
        out = gm._entries[node.outputs[0]]  # noqa: SLF001
        rows.append({"node": node.name, "func_name": node.func_name,
                     "time": statistics.median(ts), "shape": out.shape})
    return rows


def _pair_convs(rows: list[dict], on: list[tuple[str, float]]) -> None:
    """The i-th convolution kernel of each side side by side (both run the convolutions in
    graph order), onnxruntime's with the activation node that follows it (its SiLU is a
    separate QuickGelu/Sigmoid node; tvmpy fuses it): where the two sides' times differ most."""
    # 1x1 convolutions on NCHW inputs may run as a matmul over the pixels
    tv = [r for r in rows if re.search(r"conv2d|_matmul", r["func_name"] or "")]
    ort: list[list] = []
    for op, t in on:
        if op in ("Conv", "FusedConv"):
            ort.append([op, t])
        elif ort and op in ("QuickGelu", "Sigmoid", "HardSigmoid", "HardSwish", "Relu", "Clip"):
            ort[-1][0] += "+" + op
            ort[-1][1] += t
    if len(tv) != len(ort):
        print(f"\n(convolutions: tvmpy {len(tv)}, onnxruntime {len(ort)}: not paired)")
        return
    print("\nconvolutions in graph order: tvmpy us / onnxruntime us = ratio; by output shape")
    by_shape: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r, (_op, t) in zip(tv, ort):
        key = f"{str(tuple(r['shape'])):<24} {_kind(r['func_name'])}"
        by_shape[key][0] += r["time"]
        by_shape[key][1] += t
        by_shape[key][2] += 1
    for key, (a, b, n) in sorted(by_shape.items(), key=lambda kv: -(kv[1][0] - kv[1][1])):
        print(f"  {a * 1e6:8.1f} / {b * 1e6:8.1f} = {a / b:5.2f}  x{n}  {key}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true")
    args = ap.parse_args()
    threads = bench_threads(args.threads)
    from ops import ort_node_times

    from tvmpy.relay.testing import zoo

    print(machine_description(), f"{threads} thread(s)", flush=True)
    z = zoo_model(args.model)
    model, feeds = z.model, z.feeds
    built = zoo.build(z.mod, z.params)
    built.run(feeds)
    clock = bench_clock(args.cpu_time, threads)
    from tvmpy.relay.testing import compare

    ort = compare.ort_runner(model, threads=threads)
    samples = interleaved_samples({"tvmpy": lambda: built.run(feeds), "ort": lambda: ort(feeds)},
                                  args.rounds, pause=0.3, target_s=0.1, clock=clock)
    ratios = sorted(a / b for a, b in zip(samples["tvmpy"], samples["ort"]))
    tv, on_best = min(samples["tvmpy"]), min(samples["ort"])
    print(f"whole model ({'CPU' if args.cpu_time else 'wall'} time, best of {args.rounds}): "
          f"tvmpy {tv * 1e3:.2f} ms, onnxruntime {on_best * 1e3:.2f} ms, ratio {tv / on_best:.2f} "
          f"(median {ratios[len(ratios) // 2]:.2f}, {ratios[0]:.2f}-{ratios[-1]:.2f})")
    gm = built._run.module.module  # noqa: SLF001  (the graph executor behind the runner)
    rows = _node_times(gm, args.number, clock)
    on = ort_node_times(model, feeds, args.number, threads)
    tv_total = sum(r["time"] for r in rows)
    ort_total = sum(t for _, t in on)
    print(f"summed kernel time (medians): tvmpy {tv_total * 1e3:.2f} ms ({len(rows)} kernels), "
          f"onnxruntime {ort_total * 1e3:.2f} ms ({len(on)} nodes, its profiler: wall time), "
          f"ratio {tv_total / ort_total:.2f}")
    by_kind: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_kind[_kind(r["func_name"] or r["node"])].append(r["time"])
    print("\ntvmpy by kernel kind: ms (count)")
    for k, ts in sorted(by_kind.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {sum(ts) * 1e3:8.3f}  ({len(ts):3d})  {k}")
    by_op: dict[str, list[float]] = defaultdict(list)
    for op, t in on:
        by_op[op].append(t)
    print("\nonnxruntime by op type: ms (count)")
    for k, ts in sorted(by_op.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {sum(ts) * 1e3:8.3f}  ({len(ts):3d})  {k}")
    _pair_convs(rows, on)
    print(f"\ntvmpy top {args.top} kernels")
    for r in sorted(rows, key=lambda r: -r["time"])[:args.top]:
        print(f"  {r['time'] * 1e3:8.3f} ms  {str(tuple(r['shape'])):<24} {r['func_name']}")


if __name__ == "__main__":
    main()
