"""Tuner convergence (the paper's Figure 12): best GFLOP/s found vs number of trials for the
Random, GA and XGB tuners on the 1024^3 GEMM template (``gemm.x86``) and three ResNet-18
convolutions (``conv2d_NCHWc.x86``, the layouts AlterOpLayout gives them), same budget, three
seeds each; then transfer learning (XGB warmed with the records of the other layers) and the
best GEMM against numpy.

    python bench/autotvm_curves.py [--trials 400] [--seeds 0 1 2] [--cache DIR] [--out bench]

Every configuration is measured once (LocalBuilder + LocalRunner, output checked) and the result
is memoized per workload in ``DIR/<workload>.jsonl`` (autotvm's log format): tuners that propose
a configuration measured before, in this run or an earlier one, get the recorded result. The
curves therefore compare search strategies on one set of measurement outcomes (noise of the
shared machine hits every tuner alike), and an interrupted run resumes where it stopped.

Writes ``<out>/autotvm_curves.json`` (curves) and ``<out>/autotvm_curves.png``; prints the
acceptance figures (trials XGB needs to reach Random's 400-trial best; transfer vs no history).
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
from tvmpy.autotvm import record  # noqa: E402
from tvmpy.autotvm.measure import create_measure_batch  # noqa: E402
from tvmpy.autotvm.tuner import GATuner, RandomTuner, XGBTuner  # noqa: E402
from tvmpy.autotvm.tuner.tuner import result_flops  # noqa: E402

# (C, H, W, OC, K, stride, pad, ic_bn, oc_bn): ResNet-18 3x3 layers as AlterOpLayout blocks them
CONV_LAYERS = {
    "conv_56x56x64": (64, 56, 56, 64, 3, 1, 1, 16, 16),
    "conv_28x28x128": (128, 28, 28, 128, 3, 1, 1, 16, 16),
    "conv_14x14x256": (256, 14, 14, 256, 3, 1, 1, 16, 16),
}
TUNERS = ("random", "ga", "xgb")


def conv_args(c, h, w, oc, k, stride, pad, icb, ocb):
    data = te.placeholder((1, c // icb, h, w, icb), name="data")
    kernel = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="kernel")
    return (data, kernel, (stride, stride), (pad, pad, pad, pad), (1, 1), f"NCHW{icb}c",
            f"NCHW{ocb}c", "float32")


def make_task(name: str):
    if name == "gemm_1024":
        return autotvm.task.create("gemm.x86", (1024, 1024, 1024, "float32"), "llvm")
    return autotvm.task.create("conv2d_NCHWc.x86", conv_args(*CONV_LAYERS[name]), "llvm")


class MemoMeasure:
    """``measure_batch`` for the tuners: a config measured before returns its recorded result;
    new ones are measured for real (in one batch) and appended to the cache file at once."""

    def __init__(self, task, path: str, n_parallel: int = 8):
        self.task, self.path, self.n_parallel = task, path, n_parallel
        self.cache: dict[int, tuple] = {}
        if os.path.exists(path):
            for inp, res in record.load_from_file(path):
                self.cache[int(inp.config.index)] = (inp, res)
        self._real = None
        self.n_measured = 0

    def __call__(self, inputs):
        todo = [inp for inp in inputs if int(inp.config.index) not in self.cache]
        if todo:
            if self._real is None:
                option = autotvm.measure_option(
                    builder=autotvm.LocalBuilder(n_parallel=2, timeout=20),
                    runner=autotvm.LocalRunner(number=4, repeat=3, min_repeat_ms=20,
                                               timeout=20))
                self._real = create_measure_batch(self.task, option)
            results = self._real(todo)
            with open(self.path, "a") as f:
                for inp, res in zip(todo, results):
                    self.cache[int(inp.config.index)] = (inp, res)
                    f.write(record.encode(inp, res) + "\n")
                f.flush()
            self.n_measured += len(todo)
        return [self.cache[int(inp.config.index)][1] for inp in inputs]

    def records(self):
        return list(self.cache.values())

    def close(self):
        if self._real is not None:
            self._real.close()
            self._real = None


def make_tuner(kind: str, task, seed: int):
    # distinct random streams per tuner: with one seed, the random first batches of GA and
    # XGB would be Random's first batch
    seed = seed + 1000 * TUNERS.index(kind)
    if kind == "random":
        return RandomTuner(task, seed=seed)
    if kind == "ga":
        return GATuner(task, pop_size=50, seed=seed)
    return XGBTuner(task, seed=seed)


def tune_curve(kind, task, memo, seed, n_trial, history=None):
    """Best GFLOP/s after each trial (length ``n_trial`` unless the space runs out)."""
    tuner = make_tuner(kind, task, seed)
    if history:
        tuner.load_history(history)
    curve: list[float] = []
    best = [0.0]

    def track(_tuner, inputs, results):
        for res in results:
            best[0] = max(best[0], result_flops(task, res) / 1e9)
            curve.append(best[0])

    tic = time.time()
    tuner.tune(n_trial, {"measure_batch": memo, "n_parallel": memo.n_parallel},
               callbacks=[track])
    return curve, time.time() - tic


def trials_to_reach(curve, target):
    for i, v in enumerate(curve):
        if v >= target * (1 - 1e-9):
            return i + 1
    return None


def gemm_vs_numpy(memo, repeat: int = 10) -> dict:
    import tvmpy as tvm

    task = memo.task
    ok = [(inp, res) for inp, res in memo.records() if res.error_no == 0]
    inp, _ = min(ok, key=lambda r: np.mean(r[1].costs))
    s, args = task.instantiate(inp.config)
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
    return {"config": str(inp.config), "tvmpy_gflops": flop / min(t_tvm) / 1e9,
            "numpy_gflops": flop / min(t_np) / 1e9, "rel_err": err}


def plot(data: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(data["curves"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    colors = {"random": "tab:gray", "ga": "tab:blue", "xgb": "tab:red",
              "xgb+transfer": "tab:green"}
    for ax, name in zip(axes[0], names):
        for kind, runs in data["curves"][name].items():
            n = min(len(r) for r in runs)
            arr = np.array([r[:n] for r in runs])
            x = np.arange(1, n + 1)
            ax.plot(x, arr.mean(0), color=colors.get(kind), label=kind)
            ax.fill_between(x, arr.min(0), arr.max(0), color=colors.get(kind), alpha=0.15)
        ax.set_title(name)
        ax.set_xlabel("trials")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("best GFLOP/s found")
    axes[0][-1].legend(loc="lower right")
    fig.suptitle(f"AutoTVM tuners, {data['machine']} ({data['date']}); mean of "
                 f"{len(data['seeds'])} seeds, band = min..max")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--workloads", nargs="+", default=["gemm_1024", *CONV_LAYERS])
    p.add_argument("--tuners", nargs="+", default=list(TUNERS))
    p.add_argument("--transfer-trials", type=int, default=200)
    p.add_argument("--cache", default=os.path.join("bench", "autotvm_cache"))
    p.add_argument("--out", default="bench")
    args = p.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    out_json = os.path.join(args.out, "autotvm_curves.json")
    data = {"machine": machine_description(), "date": time.strftime("%Y-%m-%d"),
            "seeds": args.seeds, "trials": args.trials, "curves": {}, "tune_seconds": {},
            "space_size": {}, "measured": {}}
    if os.path.exists(out_json):  # resume: keep finished curves
        old = json.load(open(out_json))
        if old.get("trials") == args.trials and old.get("seeds") == args.seeds:
            data.update({k: old[k] for k in ("curves", "tune_seconds", "space_size")})
    memos = {}
    for name in args.workloads:
        task = make_task(name)
        memos[name] = MemoMeasure(task, os.path.join(args.cache, f"{name}.jsonl"))
        data["space_size"][name] = len(task.config_space)
        for kind in args.tuners:
            runs = data["curves"].setdefault(name, {}).setdefault(kind, [])
            secs = data["tune_seconds"].setdefault(name, {}).setdefault(kind, [])
            for seed in args.seeds[len(runs):]:
                curve, sec = tune_curve(kind, task, memos[name], seed, args.trials)
                runs.append(curve)
                secs.append(sec)
                print(f"{name:16s} {kind:7s} seed {seed}: best {curve[-1]:7.1f} GFLOP/s "
                      f"after {len(curve)} trials ({sec:.0f} s; {len(memos[name].cache)} "
                      f"configs measured so far of {len(task.config_space)})", flush=True)
                json.dump(data, open(out_json, "w"))
        memos[name].close()
    # transfer: XGB on each conv layer with the records of the other conv layers
    convs = [n for n in args.workloads if n in CONV_LAYERS]
    if args.transfer_trials and len(convs) > 1:
        for name in convs:
            runs = data["curves"][name].setdefault("xgb+transfer", [])
            history = [r for other in convs if other != name for r in memos[other].records()]
            for seed in args.seeds[len(runs):]:
                curve, sec = tune_curve("xgb", memos[name].task, memos[name], seed,
                                        args.transfer_trials, history)
                runs.append(curve)
                data["tune_seconds"][name].setdefault("xgb+transfer", []).append(sec)
                print(f"{name:16s} xgb+transfer seed {seed}: best {curve[-1]:7.1f} GFLOP/s "
                      f"({len(history)} history records, {sec:.0f} s)", flush=True)
                json.dump(data, open(out_json, "w"))
            memos[name].close()
    # acceptance figures
    print("\n| workload | space | Random@400 | GA@400 | XGB@400 | XGB trials to Random@400 "
          "(per seed) | transfer trials to XGB@400 (per seed) |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for name, kinds in data["curves"].items():
        final = {k: float(np.mean([r[-1] for r in v])) for k, v in kinds.items()}
        rnd = [r[-1] for r in kinds.get("random", [])]
        reach = [trials_to_reach(x, t) for x, t in zip(kinds.get("xgb", []), rnd)]
        nohist = [r[-1] for r in kinds.get("xgb", [])]
        tr = [trials_to_reach(x, t) for x, t in zip(kinds.get("xgb+transfer", []), nohist)]
        summary[name] = {"final": final, "xgb_to_random": reach, "transfer_to_xgb": tr}
        print(f"| {name} | {data['space_size'].get(name)} | {final.get('random', 0):.1f} | "
              f"{final.get('ga', 0):.1f} | {final.get('xgb', 0):.1f} | {reach} | {tr} |")
    data["summary"] = summary
    if "gemm_1024" in memos:
        g = gemm_vs_numpy(memos["gemm_1024"])
        data["gemm_vs_numpy"] = g
        print(f"\nbest gemm_1024 config {g['config']}: {g['tvmpy_gflops']:.1f} GFLOP/s vs numpy "
              f"{g['numpy_gflops']:.1f} ({g['tvmpy_gflops'] / g['numpy_gflops']:.2f}x), "
              f"rel err {g['rel_err']:.1e}")
    json.dump(data, open(out_json, "w"))
    plot(data, os.path.join(args.out, "autotvm_curves.png"))
    print(f"wrote {out_json} and {os.path.join(args.out, 'autotvm_curves.png')}")


if __name__ == "__main__":
    main()
