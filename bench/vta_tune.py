"""Issue 27 point 5(c): AutoTVM tuning of the VTA conv2d template (``conv2d_packed.vta``)
against the simulator's cycle count, XGB vs random, on ResNet-18 layers (224 network sizes).

Each tuner is seeded with the template's untuned default configuration (measured as trial 1
and fed to the tuner with ``tuner.update``, so the best found is never worse than the default
and XGB's model starts from it), then runs ``--trials - 1`` candidates (same seed per layer)
through ``VTABuilder`` + ``SimulatorRunner`` (in process; ``--tracker host:port`` measures on
the fleet's ``vta`` devices instead, as TVM does through RPC). XGB re-plans every
``--plan-size`` measurements (TVM's default 64 means a 20-30 trial budget never leaves its
random warm-up: XGB == random) on ``--feature`` features (``knob``: the tile sizes and thread
counts themselves; ``itervar``: TVM's loop features of the TE schedule, which do not see VTA's
buffers, DMA or micro-kernels, and cost one template instantiation per scored config).
Configurations whose tiles overflow a buffer are refused at instantiation (no build, no
simulation) and counted. Prints best cycles vs trials per tuner and the default's cycles;
writes bench/vta_tune_<layer>.png per layer.

Each tuner runs once per ``--seeds`` seed; the summary gives the speedup over the default as
mean ± standard deviation [min, max] over the seeds; the PNG shows the mean and the worst seed.

    PYTHONPATH=. python bench/vta_tune.py [--layers C8,C9] [--trials 30] [--seeds 0,1,2]
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
from tvmpy.autotvm.measure import MeasureInput  # noqa: E402
from tvmpy.autotvm.tuner import RandomTuner, XGBTuner  # noqa: E402
from tvmpy.vta.measure import (  # noqa: E402
    SimulatorRunner,
    VTABuilder,
    cycles,
    default_config_index,
    vta_measure_option,
)
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


def measure_default(task) -> tuple[int, MeasureInput, object]:
    """(index, input, result) of the untuned default configuration."""
    env = vta.get_env()
    index = default_config_index(task)
    inp = MeasureInput(env.target, task, task.config_space.get(index))
    b = VTABuilder()
    try:
        (res,) = SimulatorRunner().run([inp], b.build([inp]))
    finally:
        b.close()
    if res.error_no != 0:
        raise RuntimeError(res.costs[0])
    return index, inp, res


def tune(task, kind: str, trials: int, opt: dict, seed: int, seed_pair: tuple,
         plan_size: int, feature: str) -> tuple[list, int, float]:
    """(best cycles after each trial, trials refused at instantiation, wall seconds)."""
    np.random.seed(seed)
    tuner = (XGBTuner(task, plan_size=plan_size, feature_type=feature, seed=seed)
             if kind == "xgb" else RandomTuner(task, seed=seed))
    index, inp, res = seed_pair
    tuner.visited.add(index)
    tuner.update([inp], [res])
    curve: list[float] = [float(cycles(res))]
    refused = [0]
    t0 = time.perf_counter()

    def track(_t, inputs, results):
        for r in results:
            c = cycles(r) if r.error_no == 0 else float("inf")
            refused[0] += r.error_no == 1  # MeasureErrorNo.INSTANTIATION_ERROR
            curve.append(min(curve[-1], c))
    tuner.tune(n_trial=trials - 1, measure_option=opt, callbacks=[track])
    return curve, refused[0], time.perf_counter() - t0


def _stats(xs: list[float]) -> str:
    a = np.asarray(xs, dtype=float)
    return f"{a.mean():.2f} ± {a.std(ddof=1) if len(a) > 1 else 0.0:.2f} [{a.min():.2f}, {a.max():.2f}]"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="C8,C9")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated tuner seeds")
    ap.add_argument("--tuners", default="xgb,random", help="comma-separated: xgb, random")
    ap.add_argument("--plan-size", type=int, default=8)
    ap.add_argument("--feature", default="knob", choices=("knob", "itervar"))
    ap.add_argument("--tracker", default="")
    ap.add_argument("--png", default="bench/vta_tune_{layer}.png")
    args = ap.parse_args()
    env = vta.get_env()
    seeds = [int(x) for x in args.seeds.split(",")]
    tracker = None
    if args.tracker:
        host, port = args.tracker.rsplit(":", 1)
        tracker = (host, int(port))
    print(f"# VTA {env}; {args.trials} trials per tuner (trial 1 = the default), XGB plan size "
          f"{args.plan_size}, {args.feature} features, seeds {seeds}; measure: "
          f"{'fleet key vta at ' + args.tracker if tracker else 'in-process simulator'}")
    print("| layer | space | default cycles | tuner | seed | best after 5 / 10 / all trials | "
          "best vs default | refused | wall |")
    print("|---|---:|---:|---|---:|---|---:|---:|---:|")
    from vta_plot import plot

    summary = []
    for name in args.layers.split(","):
        wkl = W.RESNET18_CONVS[name]
        task = make_task(env, wkl)
        seed_pair = measure_default(task)
        base = cycles(seed_pair[2])
        series = []
        for kind in args.tuners.split(","):
            curves = []
            for seed in seeds:
                opt = vta_measure_option(tracker=tracker)
                curve, refused, wall = tune(task, kind, args.trials, opt, seed, seed_pair,
                                            args.plan_size, args.feature)
                curve = curve + [curve[-1]] * (args.trials - len(curve))
                curves.append(curve)
                pts = [curve[min(k, len(curve)) - 1] for k in (5, 10, len(curve))]
                print(f"| {name} | {len(task.config_space)} | {base:,} | {kind} | {seed} | "
                      f"{' / '.join(f'{p:,.0f}' for p in pts)} | {base / curve[-1]:.2f}x | "
                      f"{refused} | {wall:.0f} s |", flush=True)
            arr = np.asarray(curves, dtype=float)
            xs = list(range(1, arr.shape[1] + 1))
            summary.append((name, kind, [base / c[k - 1] for c in curves for k in (10,)],
                            [base / c[-1] for c in curves]))
            series.append((f"{name} {kind} mean of {len(seeds)} seeds", xs,
                           list(arr.mean(axis=0)), "line"))
            series.append((f"{name} {kind} worst seed", xs, list(arr.max(axis=0)), "line"))
        series.append((f"{name} untuned default", [1, args.trials], [base, base], "line"))
        png = args.png.format(layer=name)
        how = plot(png, series, f"AutoTVM on VTA conv2d {name}: best cycles vs trials "
                   f"(seeded with the default; {len(seeds)} seeds)", "trials",
                   "best cycles (simulator)")
        print(f"wrote {png} ({how})")
    print(f"\n| layer | tuner | speedup over the default after 10 trials, mean ± std [min, max] "
          f"| after {args.trials} trials |")
    print("|---|---|---|---|")
    for name, kind, at10, final in summary:
        print(f"| {name} | {kind} | {_stats(at10)} | {_stats(final)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
