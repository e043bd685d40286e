"""Tuner convergence (the paper's Figure 12) from a pre-measured table: best GFLOP/s found vs
number of trials for the Random, GA and XGB tuners on the 1024^3 GEMM template (``gemm.x86``)
and three ResNet-18 convolutions (``conv2d_NCHWc.x86``, the layouts AlterOpLayout gives them),
several seeds each; then transfer learning (XGB warmed with the records of the *other* conv
layers, whose spaces differ from the target's) and the best GEMM against numpy.

    python bench/autotvm_curves.py                       # everything (resumes where it stopped)
    python bench/autotvm_curves.py --phase build         # compile the sample (no timing)
    flock /tmp/tvmpy-bench.lock python bench/autotvm_curves.py --phase measure \\
        --max-measure-seconds 200                        # timing, in chunks: rerun until done
    python bench/autotvm_curves.py --phase tune          # tuners against the table, plot
    python bench/autotvm_curves.py --phase plot          # the plot again (needs matplotlib)

Method (``tvmpy/testing/tuning_table.py``):

1. Sample: per workload a fixed random sample of ``--sample`` configurations of its space
   (seed ``--sample-seed``; the whole space when it is smaller).
2. Measure, up front, before any tuner runs: each sampled config is compiled once
   (LocalBuilder; the ``.so`` is kept in the cache) and timed ``--repeats`` times in rounds:
   round r times every config once, in a shuffled order of its own (LocalRunner: output
   checked against the reference, then ``time_evaluator(number=1, repeat=1,
   min_repeat_ms=20)``), so drift of the machine hits every config alike. Every measurement is
   appended to ``<cache>/<workload>.jsonl`` and flushed: a killed run resumes, and
   ``--max-measure-seconds`` stops cleanly between measurements (rerun to go on).
   Noise = per config ``(max - min) / median`` of its repeats; reported as the median (and
   75th/90th percentile) across configs; also the per-round slowdown (median over configs of
   a repeat's cost over the config's fastest repeat: a loaded time window shows as a whole
   round well above 1) and ``fastest two`` (median of the gap between a config's two fastest
   repeats, relative).
3. Tune: the tuners run against the table: "measuring" a config returns its table value,
   ``--stat min`` (default: the fastest repeat; on a shared machine interference only slows
   runs down, and whole rounds ran 2-3.5x slow while other jobs held a core, which a median
   of 5 does not remove) or ``--stat median``. They are
   restricted to the sample by marking every other index visited (every tuner's rule: never
   propose a visited index), so Random samples the sample, GA breeds and mutates until it
   lands in it (or takes a random unvisited sampled config), and XGB (the real cost model:
   itervar features of the proposed configs, rank loss, refit every 64 trials) ranks every
   unvisited sampled config with its model (``SampleOptimizer`` in place of simulated
   annealing, whose one-knob moves would mostly leave a random sample).
4. Reaching a target: target = the median over seeds of Random's best after ``--trials``
   trials; band = target x the uncertainty of the table value (``--stat min``: the median
   relative gap of the two fastest repeats; ``--stat median``: the median relative spread
   ``(max - min) / median``); a run reaches the target at the first trial whose best is
   >= target - band. Per-seed values and their spread; also strict (band 0) and to the
   sample's best.
5. Transfer: XGB on each conv layer with ``load_history`` of the other two layers' table
   (their sampled configs and table values), against XGB without history, both to the XGB
   no-history target. The layers' spaces have the same knob names but different value lists
   (printed); the model transfers through the itervar program features (a fixed-length
   vector), not through knob indices.

The measure phase ends (once every table is complete) by timing the table's best GEMM
against numpy, interleaved (``<cache>/gemm_vs_numpy.json``). Writes
``<out>/autotvm_curves.json`` and ``<out>/autotvm_curves.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ensure_native_blas, machine_description  # noqa: E402

ensure_native_blas()

import numpy as np  # noqa: E402

from tvmpy import autotvm, te  # noqa: E402
from tvmpy.autotvm.feature import itervar_feature_length  # noqa: E402
from tvmpy.autotvm.measure.measure import BuildResult, MeasureInput, MeasureResult  # noqa: E402
from tvmpy.autotvm.tuner import GATuner, RandomTuner, XGBTuner  # noqa: E402
from tvmpy.testing.tuning_table import (  # noqa: E402
    MeasurementTable,
    SampleOptimizer,
    TableMeasure,
    draw_sample,
    noise_band,
    restrict_to_sample,
    round_order,
    trials_to_reach,
)

# (C, H, W, OC, K, stride, pad, ic_bn, oc_bn): ResNet-18 3x3 layers as AlterOpLayout blocks them
CONV_LAYERS = {
    "conv_56x56x64": (64, 56, 56, 64, 3, 1, 1, 16, 16),
    "conv_28x28x128": (128, 28, 28, 128, 3, 1, 1, 16, 16),
    "conv_14x14x256": (256, 14, 14, 256, 3, 1, 1, 16, 16),
}
TUNERS = ("random", "ga", "xgb")
WORKLOADS = ("gemm_1024", *CONV_LAYERS)
RUNNER = {"number": 1, "repeat": 1, "min_repeat_ms": 20}


def conv_args(c, h, w, oc, k, stride, pad, icb, ocb):
    data = te.placeholder((1, c // icb, h, w, icb), name="data")
    kernel = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="kernel")
    return (data, kernel, (stride, stride), (pad, pad, pad, pad), (1, 1), f"NCHW{icb}c",
            f"NCHW{ocb}c", "float32")


def make_task(name: str):
    if name == "gemm_1024":
        return autotvm.task.create("gemm.x86", (1024, 1024, 1024, "float32"), "llvm")
    return autotvm.task.create("conv2d_NCHWc.x86", conv_args(*CONV_LAYERS[name]), "llvm")


def open_table(name: str, task, args) -> MeasurementTable:
    sample = draw_sample(len(task.config_space), args.sample, args.sample_seed)
    header = {"workload": name, "space_size": len(task.config_space), "sample": sample,
              "sample_seed": args.sample_seed, "runner": RUNNER, "machine": machine_description()}
    return MeasurementTable(os.path.join(args.cache, f"{name}.jsonl"), header)


# ---- phase 1+2: build and measure ---------------------------------------------------------------
def build_sample(name: str, task, table: MeasurementTable, so_dir: str, deadline: float) -> bool:
    """Compile every sampled config that has no ``.so`` yet (failures go into the table).
    False if the deadline stopped it."""
    os.makedirs(so_dir, exist_ok=True)
    todo = [i for i in table.sample
            if i not in table.errors and not os.path.exists(os.path.join(so_dir, f"{i}.so"))]
    if not todo:
        return True
    builder = autotvm.LocalBuilder(n_parallel=2, timeout=30)
    builder.set_task(task)
    info_path = os.path.join(so_dir, "arg_info.json")
    try:
        for k in range(0, len(todo), 16):
            if time.time() > deadline:
                return False
            chunk = todo[k:k + 16]
            inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in chunk]
            for i, bres in zip(chunk, builder.build(inputs)):
                if bres.error_no != 0:
                    table.add(i, 0, error_no=bres.error_no, message=str(bres.error))
                    continue
                if not os.path.exists(info_path):
                    json.dump(bres.arg_info, open(info_path, "w"))
                os.replace(bres.filename, os.path.join(so_dir, f"{i}.so"))
            print(f"{name}: built {min(k + 16, len(todo))}/{len(todo)}", flush=True)
    finally:
        builder.close()
    return True


def measure_round(name: str, task, table: MeasurementTable, so_dir: str, r: int,
                  seed: int, deadline: float) -> bool:
    """Time round ``r`` of the sample (every config once, shuffled); False if the deadline
    stopped it."""
    todo = [i for i in round_order(table.sample, r, seed) if not table.done(i, r)]
    if not todo:
        return True
    builder = autotvm.LocalBuilder(n_parallel=1, timeout=30)  # the runner's reference build
    runner = autotvm.LocalRunner(timeout=30, **RUNNER)
    runner.set_task(task, builder)
    info = json.load(open(os.path.join(so_dir, "arg_info.json")))
    arg_info = tuple((tuple(s), d) for s, d in info)
    n = 0
    try:
        for i in todo:
            if time.time() > deadline:
                return False
            tmp = os.path.join(so_dir, f"run-{os.getpid()}.so")
            os.link(os.path.join(so_dir, f"{i}.so"), tmp)  # the runner removes its input
            inp = MeasureInput(task.target, task, task.config_space.get(i))
            (res,) = runner.run([inp], [BuildResult(tmp, arg_info, 0, None, 0.0)])
            if res.error_no == 0:
                table.add(i, r, float(np.mean(res.costs)))
            else:
                table.add(i, r, error_no=res.error_no, message=str(res.costs[0]))
            n += 1
        print(f"{name}: round {r} complete ({n} measured in this run)", flush=True)
    finally:
        runner.close()
        builder.close()
    return True


# ---- phase 3: tuners against the table ----------------------------------------------------------
def make_tuner(kind: str, task, seed: int, sample: list[int], fea_cache: dict, salt: int = 0):
    # distinct random streams per tuner: with one seed, the random first batches of GA and
    # XGB would be Random's first batch; and per workload (``salt``): a tuner restricted to a
    # sample picks positions in the list of unvisited sampled configs, so one stream would
    # visit the same sample positions in every workload
    seed = seed + 1000 * TUNERS.index(kind) + 100_000 * salt
    if kind == "random":
        tuner = RandomTuner(task, seed=seed)
    elif kind == "ga":
        tuner = GATuner(task, pop_size=50, seed=seed)
    else:
        tuner = XGBTuner(task, seed=seed, optimizer=SampleOptimizer(sample))
        tuner.cost_model.fea_cache = fea_cache  # features depend on the config only: share
    restrict_to_sample(tuner, sample)
    return tuner


def tune_curve(kind, task, values, sample, seed, n_trial, fea_cache, history=None, salt=0):
    """Best GFLOP/s (of the table values) after each trial."""
    tuner = make_tuner(kind, task, seed, sample, fea_cache, salt)
    if history:
        tuner.load_history(history)
    measure = TableMeasure(values, n_parallel=8)
    curve: list[float] = []
    best = [0.0]

    def track(_tuner, inputs, results):
        for res in results:
            if res.error_no == 0:
                best[0] = max(best[0], task.flop / res.costs[0] / 1e9)
            curve.append(best[0])

    tuner.tune(n_trial, {"measure_batch": measure, "n_parallel": 8}, callbacks=[track])
    return curve


def history_records(task, values) -> list[tuple]:
    return [(MeasureInput(task.target, task, task.config_space.get(i)),
             MeasureResult((c,), 0, 0.0, 0.0)) for i, c in values.items() if c is not None]


def space_knobs(task) -> dict:
    return {k: [str(e) for e in v.entities] if hasattr(v, "entities") else len(v)
            for k, v in task.config_space.space_map.items()}


def shared_knobs(a: dict, b: dict) -> dict:
    """Per knob of ``a``: how its value list compares with ``b``'s."""
    out = {}
    for k, va in a.items():
        vb = b.get(k)
        out[k] = ("missing" if vb is None else "same values, same order" if va == vb
                  else "same values, other order" if sorted(va) == sorted(vb)
                  else f"{len(set(va) & set(vb))} of {len(va)} values shared ({len(vb)})")
    return out


def reach_stats(curves: list[list[float]], target: float, band: float) -> dict:
    per_seed = [trials_to_reach(c, target, band) for c in curves]
    got = [t for t in per_seed if t is not None]
    return {"per_seed": per_seed, "median": float(np.median(got)) if len(got) == len(per_seed)
            else None, "min": min(got) if got else None, "max": max(got) if got else None,
            "reached": len(got), "runs": len(per_seed)}


def gemm_vs_numpy(task, values, repeat: int = 10) -> dict:
    import tvmpy as tvm

    best = min((c, i) for i, c in values.items() if c is not None)[1]
    cfg = task.config_space.get(best)
    s, args = task.instantiate(cfg)
    f = tvm.build(s, args, "llvm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    A, B, C = tvm.nd.array(a), tvm.nd.array(b), tvm.nd.empty((1024, 1024))
    f(A, B, C)
    err = float(np.abs(C.numpy() - a @ b).max() / np.abs(a @ b).max())
    ev = f.time_evaluator(f.entry_name, tvm.cpu(0), number=3, repeat=1)
    t_tvm, t_np = [], []
    for _ in range(repeat):  # interleaved; pauses: OpenBLAS threads busy-wait after a call
        time.sleep(0.3)
        t_tvm.append(ev(A, B, C).mean)
        time.sleep(0.3)
        t0 = time.perf_counter()
        for _ in range(3):
            a @ b
        t_np.append((time.perf_counter() - t0) / 3)
    flop = 2.0 * 1024 ** 3
    ratio = np.array(t_np) / np.array(t_tvm)
    return {"config": str(cfg), "tvmpy_gflops": flop / np.median(t_tvm) / 1e9,
            "numpy_gflops": flop / np.median(t_np) / 1e9, "ratio_median": float(np.median(ratio)),
            "ratio_min": float(ratio.min()), "ratio_max": float(ratio.max()), "rel_err": err}


def plot(data: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(data["curves"])
    ncol = min(2, len(names))
    nrow = -(-len(names) // ncol)
    fig, axs = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 3.6 * nrow + 0.5), squeeze=False)
    axes = [list(axs.flat)]
    colors = {"random": "tab:gray", "ga": "tab:blue", "xgb": "tab:red",
              "xgb+transfer": "tab:green"}
    for ax, name in zip(axes[0], names):
        w = data["workloads"][name]
        for kind, runs in data["curves"][name].items():
            n = min(len(r) for r in runs)
            arr = np.array([r[:n] for r in runs])
            x = np.arange(1, n + 1)
            ax.plot(x, np.median(arr, 0), color=colors.get(kind), label=kind)
            ax.fill_between(x, arr.min(0), arr.max(0), color=colors.get(kind), alpha=0.15)
        t, band = w["target"], w["band"]
        ax.axhline(t, color="k", lw=0.7, ls="--")
        ax.axhspan(t - band, t, color="k", alpha=0.08)
        lo = min(np.median([r[min(7, len(r) - 1)] for r in runs])
                 for runs in data["curves"][name].values())
        ax.set_ylim(max(0.0, lo * 0.9), w["sample_best"] * 1.03)
        ax.set_title(f"{name} ({w['sample_size']} of {w['space_size']} configs)", fontsize=9)
        ax.set_xlabel("trials")
        ax.grid(alpha=0.3)
    for ax in axs[:, 0]:
        ax.set_ylabel(f"best GFLOP/s found (table {data.get('stat', 'median')})")
    axes[0][len(names) - 1].legend(loc="lower right")
    for ax in axes[0][len(names):]:
        ax.set_visible(False)
    fig.suptitle(f"AutoTVM tuners on a pre-measured table ({data.get('stat', 'median')} of "
                 f"{data['repeats']} interleaved repeats), {data['machine']} ({data['date']})\n"
                 f"median of {len(data['seeds'])} seeds, shade = min..max; dashed: target "
                 f"(Random's median best), grey: noise band", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def tune_phase(args, tasks, tables) -> None:
    data = {"machine": machine_description(), "date": time.strftime("%Y-%m-%d"),
            "seeds": args.seeds, "trials": args.trials, "transfer_trials": args.transfer_trials,
            "repeats": args.repeats, "stat": args.stat, "runner": RUNNER, "curves": {},
            "workloads": {}}
    values = {n: tables[n].costs_by(args.stat, args.repeats) for n in tasks}
    fea = {n: {} for n in tasks}
    for name, task in tasks.items():
        table, sample = tables[name], tables[name].sample
        noise = table.noise(args.repeats)
        # the band: the uncertainty of the table's statistic
        rel = noise["fastest_two"] if args.stat == "min" else noise["median"]
        ok = [c for c in values[name].values() if c is not None]
        gflops = sorted((task.flop / c / 1e9 for c in ok), reverse=True)
        curves = data["curves"][name] = {}
        for kind in args.tuners:
            curves[kind] = []
            for seed in args.seeds:
                tic = time.time()
                curve = tune_curve(kind, task, values[name], sample, seed, args.trials,
                                   fea[name], salt=WORKLOADS.index(name))
                curves[kind].append(curve)
                print(f"{name:16s} {kind:7s} seed {seed}: best {curve[-1]:7.1f} GFLOP/s after "
                      f"{len(curve)} trials ({time.time() - tic:.1f} s)", flush=True)
        target = float(np.median([c[-1] for c in curves["random"]]))
        band = noise_band(target, rel)
        data["workloads"][name] = {
            "space_size": len(task.config_space), "sample_size": len(sample),
            "failed": len(sample) - len(ok), "noise": noise, "band_rel": rel,
            "sample_best": gflops[0],
            "sample_within_band_of_best": sum(g >= gflops[0] * (1 - rel) for g in gflops),
            "target": target, "band": band, "knobs": space_knobs(task),
            "final": {k: [c[-1] for c in v] for k, v in curves.items()},
            "reach": {k: reach_stats(v, target, band) for k, v in curves.items()},
            "reach_strict": {k: reach_stats(v, target, 0.0) for k, v in curves.items()},
            "reach_sample_best": {k: reach_stats(v, gflops[0], noise_band(gflops[0], rel))
                                  for k, v in curves.items()},
        }
    convs = [n for n in tasks if n in CONV_LAYERS]
    if args.transfer_trials and len(convs) > 1:
        for name in convs:
            others = [o for o in convs if o != name]
            history = [r for o in others for r in history_records(tasks[o], values[o])]
            runs = data["curves"][name]["xgb+transfer"] = []
            for seed in args.seeds:
                tic = time.time()
                runs.append(tune_curve("xgb", tasks[name], values[name], tables[name].sample,
                                       seed, args.transfer_trials, fea[name], history,
                                       salt=WORKLOADS.index(name)))
                print(f"{name:16s} xgb+transfer seed {seed}: best {runs[-1][-1]:7.1f} GFLOP/s "
                      f"({len(history)} history records from {others}, "
                      f"{time.time() - tic:.1f} s)", flush=True)
            w = data["workloads"][name]
            xgb_t = float(np.median([c[args.transfer_trials - 1] for c in
                                     data["curves"][name]["xgb"]]))
            xgb_final = float(np.median([c[-1] for c in data["curves"][name]["xgb"]]))
            band = noise_band(xgb_final, w["band_rel"])
            w["transfer"] = {
                "history_from": others, "history_records": len(history),
                "target": xgb_final, "band": band,
                "xgb_at_transfer_trials": xgb_t,
                "reach_xgb": reach_stats(data["curves"][name]["xgb"], xgb_final, band),
                "reach_transfer": reach_stats(runs, xgb_final, band),
                "shared": {o: shared_knobs(w["knobs"], data["workloads"][o]["knobs"])
                           for o in others} | {
                    "feature": f"itervar, {itervar_feature_length()} values"},
            }
    summarize(data)
    numpy_path = os.path.join(args.cache, "gemm_vs_numpy.json")
    if os.path.exists(numpy_path):
        g = data["gemm_vs_numpy"] = json.load(open(numpy_path))
        print(f"\nbest gemm_1024 config of the table {g['config']}: {g['tvmpy_gflops']:.1f} "
              f"GFLOP/s vs numpy {g['numpy_gflops']:.1f} (median ratio "
              f"{g['ratio_median']:.2f}x, {g['ratio_min']:.2f}-{g['ratio_max']:.2f}), rel err "
              f"{g['rel_err']:.1e}")
    out_json = os.path.join(args.out, f"autotvm_curves{args.tag}.json")
    json.dump(data, open(out_json, "w"))
    print(f"wrote {out_json}")
    try_plot(out_json, os.path.join(args.out, f"autotvm_curves{args.tag}.png"))


def try_plot(json_path: str, png_path: str) -> None:
    try:
        plot(json.load(open(json_path)), png_path)
    except ImportError:
        print("matplotlib is missing: no plot (install it, then --phase plot)")
        return
    print(f"wrote {png_path}")


def _fmt(st: dict) -> str:
    vals = ", ".join("never" if t is None else str(t) for t in st["per_seed"])
    med = "-" if st["median"] is None else f"{st['median']:.0f}"
    return f"{med} ({vals})"


def summarize(data: dict) -> None:
    print(f"\ntable statistic: {data['stat']} of {data['repeats']} repeats")
    print("\n| workload | sample / space | noise: median (p90) spread | fastest two | round "
          "slowdowns | sample best | target (Random's median best) | band | Random | GA | XGB | "
          "trials to target: Random | GA | XGB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, w in data["workloads"].items():
        fin = {k: float(np.median(v)) for k, v in w["final"].items()}
        r = w["reach"]
        print(f"| {name} | {w['sample_size']} / {w['space_size']} | "
              f"{100 * w['noise']['median']:.1f}% ({100 * w['noise']['p90']:.1f}%) | "
              f"{100 * w['noise']['fastest_two']:.1f}% | "
              f"{', '.join(f'{x:.2f}' for x in w['noise']['round_slowdown'])} | "
              f"{w['sample_best']:.1f} | {w['target']:.1f} | {w['band']:.1f} | "
              f"{fin.get('random', 0):.1f} | {fin.get('ga', 0):.1f} | {fin.get('xgb', 0):.1f} | "
              f"{_fmt(r['random'])} | {_fmt(r['ga'])} | {_fmt(r['xgb'])} |")
    print("\nstrict (band 0) trials to target:")
    for name, w in data["workloads"].items():
        print(f"  {name}: " + "; ".join(f"{k} {_fmt(v)}" for k, v in w["reach_strict"].items()))
    print("\ntrials to the sample's best (within its band):")
    for name, w in data["workloads"].items():
        print(f"  {name}: " + "; ".join(f"{k} {_fmt(v)}"
                                        for k, v in w["reach_sample_best"].items()))
    print("\ntransfer: trials to reach XGB's no-history median best (within the band)")
    for name, w in data["workloads"].items():
        t = w.get("transfer")
        if t:
            print(f"  {name}: target {t['target']:.1f} band {t['band']:.1f}; XGB no history "
                  f"{_fmt(t['reach_xgb'])}; XGB + history of {t['history_from']} "
                  f"({t['history_records']} records) {_fmt(t['reach_transfer'])}; shared: "
                  f"{t['shared']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--phase", choices=("all", "build", "measure", "tune", "plot"),
                   default="all")
    p.add_argument("--sample", type=int, default=500, help="configs sampled per workload")
    p.add_argument("--sample-seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="measurement rounds (>= 3)")
    p.add_argument("--max-measure-seconds", type=float, default=None,
                   help="stop building/measuring after this long (rerun to resume)")
    p.add_argument("--stat", choices=("min", "median"), default="min",
                   help="the table's value per config: the fastest or the median repeat")
    p.add_argument("--tag", default="", help="suffix of the output file names")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--transfer-trials", type=int, default=100)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    p.add_argument("--tuners", nargs="+", default=list(TUNERS))
    p.add_argument("--cache", default=os.path.join("bench", "autotvm_table"))
    p.add_argument("--out", default="bench")
    args = p.parse_args()
    if args.repeats < 3:
        p.error("--repeats must be >= 3 (the noise is the spread of the repeats)")
    if "random" not in args.tuners:
        p.error("the target is Random's best: --tuners must include random")
    if args.phase == "plot":
        try_plot(os.path.join(args.out, f"autotvm_curves{args.tag}.json"),
                 os.path.join(args.out, f"autotvm_curves{args.tag}.png"))
        return
    deadline = time.time() + (args.max_measure_seconds or float("inf"))
    tasks = {n: make_task(n) for n in args.workloads}
    tables = {n: open_table(n, t, args) for n, t in tasks.items()}
    if args.phase in ("all", "build", "measure"):
        load0, tic = os.getloadavg(), time.time()
        so_dirs = {name: os.path.join(args.cache, f"{name}.so.d") for name in tasks}
        built = all(build_sample(name, task, tables[name], so_dirs[name], deadline)
                    for name, task in tasks.items())
        # round-major: a run stopped early leaves every workload with the same rounds
        if built and args.phase != "build":
            for r in range(args.repeats):
                if not all(measure_round(name, task, tables[name], so_dirs[name], r,
                                         args.sample_seed, deadline)
                           for name, task in tasks.items()):
                    break
        with open(os.path.join(args.cache, "measure_log.jsonl"), "a") as f:
            f.write(json.dumps({"phase": args.phase, "start": tic, "seconds": time.time() - tic,
                                "loadavg_start": load0, "loadavg_end": os.getloadavg()}) + "\n")
        todo = [n for n in tasks if not tables[n].complete(args.repeats)]
        numpy_path = os.path.join(args.cache, "gemm_vs_numpy.json")
        if (args.phase != "build" and not todo and "gemm_1024" in tasks
                and not os.path.exists(numpy_path) and time.time() < deadline):
            values = tables["gemm_1024"].costs_by(args.stat, args.repeats)
            json.dump(gemm_vs_numpy(tasks["gemm_1024"], values), open(numpy_path, "w"))
        if todo:
            print(f"not measured yet: {todo} -- rerun to resume", flush=True)
            if args.phase in ("all", "measure"):
                sys.exit(3)
    if args.phase in ("all", "tune"):
        todo = [n for n in tasks if not tables[n].complete(args.repeats)]
        if todo:
            sys.exit(f"the table of {todo} is not complete: run --phase measure first")
        tune_phase(args, tasks, tables)


if __name__ == "__main__":
    main()
