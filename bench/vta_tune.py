"""Issue 27 point 5(c): AutoTVM tuning of the VTA conv2d template (``conv2d_packed.vta``)
against the simulator's cycle count, XGB vs random, on ResNet-18 layers (224 network sizes).

Each tuner runs ``--trials`` candidates (same seed set per layer) through ``VTABuilder`` +
``SimulatorRunner`` (in process; ``--tracker host:port`` measures on the fleet's ``vta``
devices instead, as TVM does through RPC). Prints best cycles vs trials for each tuner, the
untuned default's cycles, and writes bench/vta_tune.png.

    PYTHONPATH=. python bench/vta_tune.py [--layers C8,C11] [--trials 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tvmpy.vta as vta  # noqa: E402
from tvmpy import autotvm, te  # noqa: E402
from tvmpy.autotvm.tuner import RandomTuner, XGBTuner  # noqa: E402
from tvmpy.vta.measure import cycles, vta_measure_option  # noqa: E402
from tvmpy.vta.top import workloads as W  # noqa: E402


def make_task(env, wkl):
    data = te.placeholder((1, wkl.in_filter // env.BLOCK_IN, wkl.height, wkl.width, env.BATCH,
                           env.BLOCK_IN), dtype=env.inp_dtype, name="data")
    kernel = te.placeholder((wkl.out_filter // env.BLOCK_OUT, wkl.in_filter // env.BLOCK_IN,
                             wkl.hkernel, wkl.wkernel, env.BLOCK_OUT, env.BLOCK_IN),
                            dtype=env.wgt_dtype, name="kernel")
    return autotvm.task.create(
        "conv2d_packed.vta", (data, kernel, (wkl.hstride, wkl.wstride), (wkl.hpad, wkl.wpad),
                              (1, 1), f"NCHW{env.BATCH}n{env.BLOCK_IN}c", "int32"),
        target=env.target)


def default_cycles(task) -> int:
    """Cycles of the untuned default configuration (the fallback tiles)."""
    from tvmpy.autotvm.measure import MeasureInput
    from tvmpy.vta.measure import SimulatorRunner, VTABuilder

    env = vta.get_env()
    b = VTABuilder()
    try:
        from tvmpy.autotvm.space import FallbackConfigEntity

        inp = [MeasureInput(env.target, task, FallbackConfigEntity())]
        (res,) = SimulatorRunner().run(inp, b.build(inp))
    finally:
        b.close()
    if res.error_no != 0:
        raise RuntimeError(res.costs[0])
    return cycles(res)


def tune(task, kind: str, trials: int, opt: dict, seed: int) -> tuple[list, float]:
    np.random.seed(seed)
    tuner = XGBTuner(task) if kind == "xgb" else RandomTuner(task)
    curve: list[float] = []
    t0 = time.perf_counter()

    def track(_t, inputs, results):
        for r in results:
            c = cycles(r) if r.error_no == 0 else float("inf")
            curve.append(min(curve[-1], c) if curve else c)
    tuner.tune(n_trial=trials, measure_option=opt, callbacks=[track])
    return curve, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="C8,C11")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tracker", default="")
    ap.add_argument("--png", default="bench/vta_tune.png")
    args = ap.parse_args()
    env = vta.get_env()
    tracker = None
    if args.tracker:
        host, port = args.tracker.rsplit(":", 1)
        tracker = (host, int(port))
    series = []
    print(f"# VTA {env}; {args.trials} trials per tuner; measure: "
          f"{'fleet key vta at ' + args.tracker if tracker else 'in-process simulator'}")
    print("| layer | space | default cycles | tuner | best after 5 / 10 / all trials | "
          "best vs default | wall |")
    print("|---|---:|---:|---|---|---:|---:|")
    for name in args.layers.split(","):
        wkl = W.RESNET18_CONVS[name]
        task = make_task(env, wkl)
        base = default_cycles(task)
        for kind in ("xgb", "random"):
            opt = vta_measure_option(tracker=tracker)
            curve, wall = tune(task, kind, args.trials, opt, args.seed)
            pts = [curve[min(k, len(curve)) - 1] for k in (5, 10, len(curve))]
            print(f"| {name} | {len(task.config_space)} | {base:,} | {kind} | "
                  f"{' / '.join(f'{p:,.0f}' for p in pts)} | {base / curve[-1]:.2f}x | "
                  f"{wall:.0f} s |", flush=True)
            series.append((f"{name} {kind}", list(range(1, len(curve) + 1)),
                           [c if c != float("inf") else np.nan for c in curve], "line"))
        series.append((f"{name} default", [1, args.trials], [base, base], "line"))
    from vta_plot import plot

    clean = [(lab, [x for x, y in zip(xs, ys) if y == y], [y for y in ys if y == y], k)
             for lab, xs, ys, k in series]
    how = plot(args.png, clean, "AutoTVM on VTA conv2d: best cycles vs trials",
               "trials", "best cycles (simulator)", logy=True)
    print(f"wrote {args.png} ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
