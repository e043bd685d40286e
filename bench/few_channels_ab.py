"""x86's few-output-channel convolutions in NCHW (``x86_alter_op.few_output_channels``, the
default) against the blocked NCHW{c}c form (``NCHW_MAX_OC_FRACTION = 0``) in ONE process,
interleaved, with onnxruntime, on a zoo model at its real size (dcgan: its 128 -> 3 phases).

    python bench/few_channels_ab.py --model dcgan [--rounds 11] [--node-rounds 8]

Printed: cold build time of each form, max abs error against onnxruntime, the whole model's
process CPU time at 1 thread (bench/common.interleaved_samples; medians [min-max] and the
median of per-round ratios to onnxruntime), then a per-kernel profile (thread CPU time of each
graph-executor call, the forms alternating in rounds of 5 runs; medians summed by kind, and
each kernel by output shape).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ensure_native_blas, interleaved_samples, machine_description  # noqa: E402

ensure_native_blas()


def _kind(name: str) -> str:
    return re.sub(r"_\d+$", "", re.sub(r"^(tvmgen_default_)?fused_", "", name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="dcgan")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--node-rounds", type=int, default=8)
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = "1"
    os.environ["TVMPY_CACHE"] = "0"
    import numpy as np

    import tvmpy.relay.op.strategy.x86_alter_op as xa
    from tvmpy.relay.testing import compare, zoo

    print(machine_description(), "1 thread", flush=True)
    spec = zoo.MODELS[args.model]("real")
    model = zoo.to_onnx(spec)
    feeds = spec.feeds(seed=1)
    built = {}
    default = xa.NCHW_MAX_OC_FRACTION
    for name, frac in (("nchw", default), ("blocked", 0)):
        xa.NCHW_MAX_OC_FRACTION = frac
        mod, params = zoo.from_onnx(model, spec)
        t0 = time.time()
        built[name] = zoo.build(mod, params)
        print(f"{name}: cold build {time.time() - t0:.1f} s", flush=True)
    xa.NCHW_MAX_OC_FRACTION = default
    ort = compare.ort_runner(model, threads=1)
    want = np.asarray(ort(feeds)[0])
    for name, b in built.items():
        got = np.asarray(b.run(feeds)[0])
        print(f"{name}: max abs error against onnxruntime {float(np.max(np.abs(got - want))):.2e}")
    sides = {k: (lambda b=b: b.run(feeds)) for k, b in built.items()}
    sides["ort"] = lambda: ort(feeds)
    s = interleaved_samples(sides, args.rounds, pause=0.2, target_s=0.1, clock=time.process_time)
    for k in built:
        r = sorted(a / o for a, o in zip(s[k], s["ort"]))
        print(f"{k}: {statistics.median(s[k]) * 1e3:.3f} ms [{min(s[k]) * 1e3:.3f}-"
              f"{max(s[k]) * 1e3:.3f}], /onnxruntime {statistics.median(r):.3f} "
              f"[{r[0]:.3f}-{r[-1]:.3f}]")
    print(f"onnxruntime: {statistics.median(s['ort']) * 1e3:.3f} ms")
    state = {}
    for k, b in built.items():
        gm = b._run.module.module  # noqa: SLF001  (the graph executor behind the runner)
        gm.run()
        state[k] = (gm, [[] for _ in gm._calls])  # noqa: SLF001
    for _ in range(args.node_rounds):
        for gm, times in state.values():
            for _ in range(5):
                for i, (cfunc, a) in enumerate(gm._calls):  # noqa: SLF001
                    t0 = time.thread_time()
                    cfunc(*a)
                    times[i].append(time.thread_time() - t0)
    for k, (gm, times) in state.items():
        kinds: dict[str, list[float]] = defaultdict(list)
        shapes: dict[tuple, list[float]] = defaultdict(list)
        for node, ts in zip(gm._call_nodes, times):  # noqa: SLF001
            kind = _kind(node.func_name or node.name)
            kinds[kind].append(statistics.median(ts))
            shape = tuple(gm._entries[node.outputs[0]].shape)  # noqa: SLF001
            shapes[(kind, shape)].append(statistics.median(ts) * 1e6)
        total = sum(sum(v) for v in kinds.values())
        print(f"== {k}: {len(times)} kernels, summed {total * 1e3:.3f} ms")
        for kind, ts in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {sum(ts) * 1e3:8.3f} ({len(ts):2d}) {kind}")
        for (kind, shape), us in shapes.items():
            print(f"      {kind} {shape}: " + " ".join(f"{u:.1f}" for u in us))


if __name__ == "__main__":
    main()
