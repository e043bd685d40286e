"""Candidate build time of the auto-scheduler's search (issue 28, point 5).

For five computes (matmul, conv2d+bias+relu, depthwise, softmax, a fused elementwise chain),
sample random annotated sketches (``sample_initial_population``) and report, per compute:

1. ``phases`` (default): one candidate at a time in this process, the CPU seconds of each step
   of a build (replay of the steps, ``lower_primfunc`` with LoopPartition's share, LLVM IR
   generation, LLVM O3, object emission), the wall time of linking the exported library
   (``cc -shared``, its CPU time too) and of loading it: what to optimise.
2. ``measure`` (default): the search's real path, ``ProgramMeasurer`` with ``LocalBuilder``
   worker processes and ``LocalRunner`` (reference check on), the same candidates measured with
   ``n_parallel=1`` (one build at a time: "before") and ``n_parallel=2`` (a batch built by two
   workers, then measured one at a time: "after"), interleaved per compute in the same run.
   Per-build latency (median / p90 of the worker's wall time per build), the worker's CPU
   seconds per build (less sensitive to load), batch throughput (candidates built per second
   of the batch's build wall time) and the sequential measurement time per candidate.

``--modes tasks`` (build workers shared across tasks), ``index`` (i32 vs i64 element
indices) and ``tighten`` (bound inference's split tightening off vs on: build CPU and the
kernels' times, see :func:`tighten`) are A/B comparisons on the same candidates.

``--pipelines``: cheaper pipelines for measurement builds, A/B against the default on the same
candidates: LoopPartition budget 2x (``tir.LoopPartition.max_growth``), LoopPartition off, LLVM
O2: build CPU seconds and the kernel's time relative to the default build's (geometric mean,
worst). ``--ab``: LoopPartition unbounded vs budgeted (z-looppart's comparison).

Usage: ``env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=. python bench/auto_scheduler_build_time.py
[--n 16] [--modes phases,measure] [--pipelines] [--ab]``. The machine is shared: wall figures
are "under load"; compare the CPU-second columns across runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "auto_scheduler"))

import as_workloads as W  # noqa: E402
import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import auto_scheduler  # noqa: E402
from tvmpy.autotvm.measure.local_builder import _build_library  # noqa: E402

CASES = [("matmul 128", W.matmul, (128, 128, 128)),
         ("conv2d+bias+relu 1x64x28x28 k3", W.conv2d_bias_relu, (1, 28, 28, 64, 64, 3, 3, 1, 1)),
         ("depthwise 1x64x56x56 k3", W.depthwise_conv, (1, 64, 56, 56, 3, 1)),
         ("conv1x1 1x128x28x28 -> 64", W.conv2d_bias_relu, (1, 28, 28, 64, 128, 1, 1, 1, 0)),
         ("transposed conv 1x64x14x14 k4 s2", W.conv2d_transpose, (1, 64, 14, 14, 32, 4, 2)),
         ("pool mean 1x16x14x14x16", W.pool_mean, (1, 16, 14, 14, 16)),
         ("softmax 128x1000", W.softmax, (128, 1000)),
         ("elementwise chain 512x512", W.elementwise, (512, 512))]


def _p90(xs: Sequence[float]) -> float:
    return float(np.percentile(list(xs), 90)) if xs else float("nan")


def _med(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# ---- 1. per-phase profile ---------------------------------------------------------------------
def phases(a: argparse.Namespace) -> None:
    from tvmpy.codegen import llvm as L
    from tvmpy.driver import lower_primfunc
    from tvmpy.runtime.module import load_module
    from tvmpy.target import as_target
    from tvmpy.tir.transform import loop_partition as lp

    lp_time = [0.0]
    orig = lp.loop_partition_func

    def timed_lp(*args: Any, **kw: Any) -> Any:
        t0 = time.process_time()
        try:
            return orig(*args, **kw)
        finally:
            lp_time[0] += time.process_time() - t0

    lp.loop_partition_func = timed_lp  # LoopPartition() looks the function up when it is built
    tgt = as_target("llvm")
    tmp = tempfile.mkdtemp()
    keys = ["replay", "lower", "LoopPartition", "IR gen", "O3", "object", "link", "link cpu",
            "load", "total"]
    print("per-phase, one candidate at a time in this process: CPU ms (link, load: wall ms), "
          "medians")
    print(f"{'compute':34s} " + " ".join(f"{k:>13s}" for k in keys) + "  IR lines")
    try:
        for name, f, args in CASES:
            task = W.make_task(f, args)
            states = auto_scheduler.sample_initial_population(task, a.n, seed=a.seed)
            rows: dict[str, list[float]] = {k: [] for k in keys}
            lines = []
            for k, s in enumerate(states):
                lp_time[0] = 0.0
                t = [time.process_time()]
                sch, targs = task.compute_dag.apply_steps_from_state(s)
                t.append(time.process_time())
                fn = lower_primfunc(sch, targs, "default_function", target=tgt)
                t.append(time.process_time())
                tm, triple, cpu, feat = L._target_machine(tgt)
                cg = L._generate([fn], tm, triple, cpu, feat)
                text = cg.text()
                t.append(time.process_time())
                mod = L._optimize(text, tm, cg.imported_llvm)
                t.append(time.process_time())
                tm.emit_object(mod)
                t.append(time.process_time())
                m = L.build([fn], tgt, load=False)  # compiled again: linking needs a Module
                path = os.path.join(tmp, f"c{k}.so")
                c0, w0 = os.times(), time.perf_counter()
                m.export_library(path)
                c1, w1 = os.times(), time.perf_counter()
                load_module(path)
                w2 = time.perf_counter()
                for key, x, y in zip(["replay", "lower", "IR gen", "O3", "object"], t, t[1:]):
                    rows[key].append(y - x)
                rows["LoopPartition"].append(lp_time[0])
                rows["link"].append(w1 - w0)
                rows["link cpu"].append(c1.children_user + c1.children_system + c1.user
                                        + c1.system - c0.children_user - c0.children_system
                                        - c0.user - c0.system)
                rows["load"].append(w2 - w1)
                rows["total"].append(t[-1] - t[0] + rows["link"][-1] + rows["load"][-1])
                lines.append(text.count("\n"))
            print(f"{name:34s} " + " ".join(f"{1e3 * _med(rows[k]):13.0f}" for k in keys)
                  + f"  {int(_med(lines))}", flush=True)
    finally:
        lp.loop_partition_func = orig


# ---- 2. the search's measurement path ---------------------------------------------------------
def measure(a: argparse.Namespace) -> None:
    from tvmpy.auto_scheduler.measure import LocalBuilder, LocalRunner, ProgramMeasurer

    print(f"\nProgramMeasurer + LocalBuilder + LocalRunner (reference check on), {a.n} candidates "
          f"per compute, one batch; n_parallel 1 ('before') and 2 ('after') interleaved")
    print(f"{'compute':34s} {'workers':>7s} {'build med':>9s} {'p90':>6s} {'cpu med':>8s} "
          f"{'p90':>6s} {'cand/s':>7s} {'s/cand':>7s} {'run s/cand':>10s}")
    agg: dict[int, dict[str, list[float]]] = {}
    for name, f, args in CASES:
        task = W.make_task(f, args)
        states = auto_scheduler.sample_initial_population(task, a.n, seed=a.seed)
        for _rnd in range(a.rounds):
            for par in (1, 2):
                b = LocalBuilder(timeout=300, n_parallel=par)
                r = LocalRunner(timeout=60)
                m = ProgramMeasurer(task, b, r)
                try:
                    m.measure(None, states[:par])  # start the workers and the reference
                    b.cpu_times.clear()
                    m.build_times.clear()
                    m.batches.clear()
                    res = m.measure(None, states)
                finally:
                    m.close()
                bad = [x for x in res if x.error_no != 0]
                if bad:
                    print(f"  {len(bad)} candidates failed: {bad[0].error_msg[:200]}")
                st = m.batches[-1]
                g = agg.setdefault(par, {"lat": [], "cpu": [], "wall": [], "n": [], "run": []})
                g["lat"] += m.build_times
                g["cpu"] += b.cpu_times
                g["wall"].append(st.build_wall)
                g["n"].append(st.built)
                g["run"].append(st.run_wall)
                print(f"{name:34s} {par:7d} {_med(m.build_times):9.3f} {_p90(m.build_times):6.2f} "
                      f"{_med(b.cpu_times):8.3f} {_p90(b.cpu_times):6.2f} "
                      f"{st.built / st.build_wall:7.2f} {st.build_wall / max(1, st.built):7.3f} "
                      f"{st.run_wall / st.n:10.3f}", flush=True)
    for par, g in agg.items():
        n = sum(g["n"])
        print(f"{'ALL':34s} {par:7d} {_med(g['lat']):9.3f} {_p90(g['lat']):6.2f} "
              f"{_med(g['cpu']):8.3f} {_p90(g['cpu']):6.2f} {n / sum(g['wall']):7.2f} "
              f"{sum(g['wall']) / n:7.3f} {sum(g['run']) / n:10.3f}")


# ---- 3. task switches: build workers restarted per task (before) or shared (after) ----------
def tasks(a: argparse.Namespace) -> None:
    """TaskScheduler's pattern: one ProgramMeasurer per task, rounds alternating between the
    tasks, one builder for all (n_parallel 2). Before: autotvm's LocalBuilder, which restarts its
    workers whenever the task changes; after: auto_scheduler.LocalBuilder (workers serve every
    task). Same candidates, arms interleaved; CPU = this process + its reaped children (build
    and runner workers, linker) per candidate, wall of the whole loop per candidate."""
    from tvmpy.auto_scheduler.measure import LocalRunner, ProgramMeasurer
    from tvmpy.autotvm.measure.local_builder import LocalBuilder as AutotvmBuilder

    cases = [c for c in CASES if c[0].split()[0] in ("matmul", "softmax", "elementwise",
                                                      "depthwise")]
    tks = [W.make_task(f, args) for _, f, args in cases]
    per = a.per_round
    cands = [auto_scheduler.sample_initial_population(t, per * a.rounds, seed=a.seed) for t in tks]
    sampled = sum(len(c) for c in cands)  # a small space has fewer distinct states than asked
    for (name, _, _), c in zip(cases, cands):
        if len(c) < per * a.rounds:
            print(f"  {name}: {len(c)} distinct states (of {per * a.rounds} asked): its space")
    print(f"\n{len(tks)} tasks, {a.rounds} rounds of {per} candidates each, alternating: "
          f"CPU s / candidate (all processes), wall s / candidate")
    for _rep in range(2):
        for arm, make in (("restart per task", AutotvmBuilder),
                          ("shared workers", auto_scheduler.LocalBuilder)):
            b = make(timeout=300, n_parallel=2)
            ms = [ProgramMeasurer(t, b, LocalRunner(timeout=60), close_builder=False) for t in tks]
            c0, w0, n = _cpu(), time.perf_counter(), 0
            errs: set[str] = set()
            try:
                for r in range(a.rounds):
                    for m, cs in zip(ms, cands):
                        res = m.measure(None, cs[r * per:(r + 1) * per])
                        n += sum(x.error_no == 0 for x in res)
                        errs.update(f"{x.error_no}: {x.error_msg[:90]}" for x in res if x.error_no)
            finally:
                for m in ms:
                    m.close()
                b.close()
            print(f"  {arm:17s} cpu {(_cpu() - c0) / n:.3f}  wall {(time.perf_counter() - w0) / n:.3f}"
                  f"  ({n} of {sampled} sampled built and measured)", flush=True)
            for e in sorted(errs):
                print(f"    failed: {e}")


# ---- 4. element index width: i32 (before) vs i64 (after) ------------------------------------
def index_width(a: argparse.Namespace) -> None:
    """Each candidate built (``_build_library``: lowering, LLVM, export incl. the linker) with
    i32 and with i64 element indices (codegen/llvm_codegen.py ``WIDE_INDEX``), the order
    alternating; CPU seconds of this process and the linker per build."""
    from tvmpy.codegen import llvm_codegen as C

    tmp = tempfile.mkdtemp()
    print("\nelement indices i32 vs i64, same candidates, CPU s per build (median / p90 / max)")
    allc: dict[bool, list[float]] = {False: [], True: []}
    meds: dict[bool, list[float]] = {False: [], True: []}
    try:
        for name, f, args in CASES:
            task = W.make_task(f, args)
            states = auto_scheduler.sample_initial_population(task, a.n, seed=a.seed)
            cpu: dict[bool, list[float]] = {False: [], True: []}
            for k, s in enumerate(states):
                for wide in ((False, True) if k % 2 == 0 else (True, False)):
                    C.WIDE_INDEX = wide
                    sch, targs = task.compute_dag.apply_steps_from_state(s)
                    c0 = _cpu()
                    _build_library(sch, targs, "llvm", os.path.join(tmp, f"w{k}{wide}.so"))
                    cpu[wide].append(_cpu() - c0)
            for w in (False, True):
                allc[w] += cpu[w]
                meds[w].append(_med(cpu[w]))
            print(f"{name:34s} i32 {_med(cpu[False]):.3f} / {_p90(cpu[False]):.2f} / "
                  f"{max(cpu[False]):.2f}   i64 {_med(cpu[True]):.3f} / {_p90(cpu[True]):.2f} / "
                  f"{max(cpu[True]):.2f}", flush=True)
    finally:
        C.WIDE_INDEX = True
    for w, label in ((False, "i32"), (True, "i64")):
        print(f"ALL {label}: median of all builds {_med(allc[w]):.3f} s, median of the per-kind "
              f"medians {_med(meds[w]):.3f} s, p90 {_p90(allc[w]):.2f} s")


# ---- 5. split tightening in bound inference: off (before) vs on (after) ----------------------
def tighten(a: argparse.Namespace) -> None:
    """Each candidate built (``_build_library``: lowering, LLVM, export incl. the linker) with
    bound inference's split tightening off and on (``te/bound.py`` ``TIGHTEN_SPLITS``), the
    order alternating; CPU seconds of this process and the linker per build. Then both kernels
    are loaded, their outputs compared and their times taken (min over ``--rounds`` alternating
    rounds of 3 x 5 calls) where the lowered IR differs (the same IR is the same kernel: its
    timing differences are noise): the kernel a candidate stands for changes (its wasted
    iterations go), so the search measures the faster one."""
    from tvmpy.runtime.module import load_module
    from tvmpy.te import bound as TB

    tmp = tempfile.mkdtemp()
    dev = tvm.cpu(0)
    print("\nsplit tightening off vs on, same candidates: build CPU s (median / p90 / max), "
          "kernel time on/off (geomean, min-max)")
    allc: dict[bool, list[float]] = {False: [], True: []}
    meds: dict[bool, list[float]] = {False: [], True: []}
    ratios_all: list[float] = []
    try:
        for name, f, args in CASES:
            task = W.make_task(f, args)
            states = auto_scheduler.sample_initial_population(task, a.n, seed=a.seed)
            cpu: dict[bool, list[float]] = {False: [], True: []}
            ratios: list[float] = []
            failed = same = 0
            for k, s in enumerate(states):
                paths = {}
                try:
                    for on in ((False, True) if k % 2 == 0 else (True, False)):
                        TB.TIGHTEN_SPLITS = on
                        sch, targs = task.compute_dag.apply_steps_from_state(s)
                        paths[on] = os.path.join(tmp, f"t{name[:6]}{k}{on}.so".replace(" ", "_"))
                        c0 = _cpu()
                        _build_library(sch, targs, "llvm", paths[on])
                        cpu[on].append(_cpu() - c0)
                except Exception:  # noqa: BLE001 - a candidate that fails to build (as-fail's)
                    failed += 1
                    continue
                texts = set()
                for on in (False, True):
                    TB.TIGHTEN_SPLITS = on
                    texts.add(str(tvm.lower(*task.compute_dag.apply_steps_from_state(s))))
                if len(texts) == 1:  # the same loops: the same kernel, nothing to time
                    same += 1
                    continue
                mods = {on: load_module(p) for on, p in paths.items()}
                rng = np.random.default_rng(k)
                ins = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype)
                       for t in targs]
                outs, best = {}, {False: float("inf"), True: float("inf")}
                for _r in range(a.rounds):
                    for on in ((False, True) if _r % 2 == 0 else (True, False)):
                        arrs = [tvm.nd.array(x, dev) for x in ins]
                        ev = mods[on].time_evaluator(mods[on].entry_name, dev, number=5, repeat=3)
                        best[on] = min(best[on], min(ev(*arrs).results))
                        outs[on] = arrs[-1].numpy()
                np.testing.assert_allclose(outs[True], outs[False], rtol=1e-5, atol=1e-5)
                ratios.append(best[True] / best[False])
            for w in (False, True):
                allc[w] += cpu[w]
                meds[w].append(_med(cpu[w]))
            ratios_all += ratios
            r = np.array(ratios) if ratios else np.array([float("nan")])
            print(f"{name:34s} off {_med(cpu[False]):.3f} / {_p90(cpu[False]):.2f} / "
                  f"{max(cpu[False], default=float('nan')):.2f}   on {_med(cpu[True]):.3f} / "
                  f"{_p90(cpu[True]):.2f} / {max(cpu[True], default=float('nan')):.2f}   kernel x"
                  f"{float(np.exp(np.mean(np.log(r)))):.3f} ({r.min():.2f}-{r.max():.2f}) over "
                  f"{len(ratios)} changed, {same} same IR"
                  + (f"  [{failed} failed to build]" if failed else ""), flush=True)
    finally:
        TB.TIGHTEN_SPLITS = True
    for w, label in ((False, "off"), (True, "on")):
        print(f"ALL {label}: median of all builds {_med(allc[w]):.3f} s, median of the per-kind "
              f"medians {_med(meds[w]):.3f} s, p90 {_p90(allc[w]):.2f} s")
    r = np.array(ratios_all or [float("nan")])
    print(f"ALL kernels on/off: geomean x{float(np.exp(np.mean(np.log(r)))):.3f} "
          f"({r.min():.2f}-{r.max():.2f}) over the {len(r)} candidates whose lowered IR changed")


# ---- --pipelines: cheaper measurement builds, A/B -----------------------------------------------
def _o2_build(sch: Any, targs: Any, path: str) -> None:
    """The default build with LLVM's O2 pipeline instead of O3."""
    from tvmpy.codegen import llvm as L

    orig = L._optimize

    def o2(text: str, tm: Any, imported: Sequence[str] = (), **kw: Any) -> Any:
        import llvmlite.binding as llvm

        ctx = llvm.create_context()
        mod = llvm.parse_assembly(text, context=ctx)
        mod.verify()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
        pb.getModulePassManager().run(mod, pb)
        return mod

    L._optimize = o2  # type: ignore[assignment]
    try:
        _build_library(sch, targs, "llvm", path)
    finally:
        L._optimize = orig  # type: ignore[assignment]


def pipelines(a: argparse.Namespace) -> None:
    from tvmpy.runtime.module import load_module

    variants: dict[str, Callable[[Any, Any, str], None]] = {
        "default": lambda s, t, p: _build_library(s, t, "llvm", p),
        "LP budget 2x": lambda s, t, p: _with_ctx({"tir.LoopPartition.max_growth": 2}, [], s, t, p),
        "LP off": lambda s, t, p: _with_ctx({}, ["LoopPartition"], s, t, p),
        "LLVM O2": _o2_build,
    }
    tmp = tempfile.mkdtemp()
    dev = tvm.cpu(0)
    print("\ncheaper measurement pipelines vs the default, same candidates: build CPU s median, "
          "kernel time / default kernel time (geomean, worst)")
    for name, f, args in CASES:
        task = W.make_task(f, args)
        states = auto_scheduler.sample_initial_population(task, a.n, seed=a.seed)
        cpu: dict[str, list[float]] = {v: [] for v in variants}
        kt: dict[str, list[float]] = {v: [] for v in variants}
        rng = np.random.default_rng(0)
        for k, s in enumerate(states):
            for v, fn in variants.items():
                sch, targs = task.compute_dag.apply_steps_from_state(s)
                path = os.path.join(tmp, f"c{k}_{len(cpu[v])}_{v.replace(' ', '_')}.so")
                c0 = _cpu()
                fn(sch, targs, path)
                cpu[v].append(_cpu() - c0)
                mod = load_module(path)
                arrs = [tvm.nd.array(rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype),
                                     dev) for t in targs]
                ev = mod.time_evaluator(mod.entry_name, dev, number=5, repeat=5)
                kt[v].append(min(ev(*arrs).results))
        for v in variants:
            ratio = np.array(kt[v]) / np.array(kt["default"])
            print(f"{name:34s} {v:13s} build cpu {_med(cpu[v]):.3f} s  kernel x"
                  f"{float(np.exp(np.mean(np.log(ratio)))):.2f} (worst x{ratio.max():.2f})",
                  flush=True)


def _with_ctx(cfg: dict, disabled: list[str], sch: Any, targs: Any, path: str) -> None:
    with tvm.transform.PassContext(config=cfg, disabled_pass=disabled):
        _build_library(sch, targs, "llvm", path)


# ---- --ab: LoopPartition unbounded vs budgeted ------------------------------------------------
def ab(a: argparse.Namespace) -> None:
    """Each candidate lowered, then built (lowering + LLVM + export), under both settings."""
    tmp = tempfile.mkdtemp()
    modes = {"unbounded": None, "budget": "default"}
    total: dict[str, list[float]] = {m: [] for m in modes}
    for name, f, args in CASES:
        task = W.make_task(f, args)
        states = auto_scheduler.sample_initial_population(task, a.n, seed=a.seed)
        rows: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for k, s in enumerate(states):
            for mode, mg in modes.items():
                cfg = {} if mg == "default" else {"tir.LoopPartition.max_growth": mg}
                sch, targs = task.compute_dag.apply_steps_from_state(s)
                with tvm.transform.PassContext(config=cfg):
                    t0 = time.perf_counter()
                    tvm.lower(sch, targs)
                    t1 = time.perf_counter()
                    sch, targs = task.compute_dag.apply_steps_from_state(s)
                    t2 = time.perf_counter()
                    _build_library(sch, targs, "llvm", os.path.join(tmp, f"c{k}_{mode}.so"))
                    t3 = time.perf_counter()
                rows[mode].append((t3 - t2, t1 - t0))
        for mode in modes:
            b = [r[0] for r in rows[mode]]
            lo = [r[1] for r in rows[mode]]
            w = max(range(len(b)), key=lambda i: b[i])
            total[mode] += b
            print(f"{name:34s} {mode:9s} n={len(b):3d}  build median {statistics.median(b):.3f} s"
                  f"  max {b[w]:.3f} (its lowering {lo[w]:.3f})  lowering median "
                  f"{statistics.median(lo):.3f}", flush=True)
    for mode in modes:
        print(f"ALL {mode:9s} n={len(total[mode])} median {statistics.median(total[mode]):.3f} s"
              f"  max {max(total[mode]):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16, help="candidates per compute")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=1, help="measure: rounds of the 1/2 pair")
    ap.add_argument("--modes", default="phases,measure", help="phases,measure,tasks,index,tighten")
    ap.add_argument("--per-round", type=int, default=8, help="tasks: candidates per round")
    ap.add_argument("--pipelines", action="store_true", help="cheaper pipelines, A/B")
    ap.add_argument("--ab", action="store_true", help="unbounded vs budgeted LoopPartition")
    a = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    if a.ab:
        return ab(a)
    if a.pipelines:
        return pipelines(a)
    modes = a.modes.split(",")
    if "phases" in modes:
        phases(a)
    if "measure" in modes:
        measure(a)
    if "tasks" in modes:
        tasks(a)
    if "index" in modes:
        index_width(a)
    if "tighten" in modes:
        tighten(a)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
