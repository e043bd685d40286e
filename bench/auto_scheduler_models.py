"""Auto-scheduler vs AutoTVM vs onnxruntime on six models (issue 28, point 4).

The full run (the lead's, on a quiet machine; ~2 x 20 min of search per model, resumable):

    env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=. python bench/auto_scheduler_models.py --minutes 20

Per model (``--models`` picks some of resnet18, mobilenet_v2, bert_encoder, effnet_blocks,
dcgan, lstm_lm): extract the fused subgraphs, tune them with the auto-scheduler's
TaskScheduler for ``--minutes`` of wall time, then tune the same model with AutoTVM (XGB
tuner, the time split between its templated tasks by FLOPs) for the same time where AutoTVM
has templates; then build untuned / AutoTVM-tuned / auto-scheduled, check each output against
onnxruntime, and time the four in interleaved rounds at 1 and at 2 threads (one subprocess per
thread count: TVM_NUM_THREADS is read once per process; onnxruntime gets the same
intra_op_num_threads), every call feeding the inputs and fetching the outputs. Prints the
table with ratios and the search time per model, a convergence plot per model
(``<log-dir>/<cpu>/<model>.png``: best estimated latency vs search time; ``..._trials.png``
vs trials), and a per-subgraph report: the auto-scheduled kernels still slower than the
untuned default kernel of the same fused node (graph executor per-node profile), each task's
best latency from the search, and the time per op kind against onnxruntime's profile.

Logs live in ``<log-dir>/<cpu>/`` (``<cpu>``: LLVM's host CPU name and a hash of the CPU's
model name and features, so a log of another CPU is never reused silently; each progress file
also records the CPU and is refused on a mismatch). Everything resumes: a model whose logs
already hold ``--minutes`` of search is not tuned again (``--minutes 0``: measure only), a
killed run continues from its logs (the search time spent is kept per round in
``<model>.as.t<threads>.progress.json`` / ``<model>.autotvm.progress.json``).

Notes: the budget is checked after each search round (auto_scheduler) or measured batch
(AutoTVM), so a tuner may overrun it by one round. Both tuners measure candidates at this
process's thread count (TVM_NUM_THREADS, else all cores). Auto-scheduler records name that
count and apply only to a build for it (TVM's ``num_cores``; auto_scheduler.dispatcher): the
auto-scheduled library timed at each thread count is built from the records measured at that
count, so a count the search did not run at times the default schedules there (search once
per count, e.g. ``TVM_NUM_THREADS=1 ...`` then ``TVM_NUM_THREADS=2 ...`` with one --log-dir:
each resumes its own records). AutoTVM's 1-thread column uses the same schedules. AutoTVM's
curve sums its templated tasks' best latencies once each, the auto-scheduler's is the weighted
sum over every subgraph: their levels differ by construction (the end-to-end table is the
comparison). On a shared machine use ``--jobs 1``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import ensure_native_blas, interleaved_samples, machine_description  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- the models ------------------------------------------------------------------------------
def _showcase(name: str) -> tuple[object, dict]:
    from e2e import CONFIGS

    from tvmpy.relay.testing import onnx_models

    model = CONFIGS[name]()
    return model, onnx_models.input_feeds(model)


def _zoo_spec(spec) -> tuple[object, dict]:
    from tvmpy.relay.testing import zoo

    return zoo.to_onnx(spec), spec.feeds(seed=1)


def effnet_blocks_module():
    """An EfficientNet-B0-style stem and MBConv stack at 224x224 (expand 1x1, depthwise 3x3 /
    5x5 with stride, SiLU, squeeze-and-excitation, project 1x1, residuals), random weights."""
    import torch
    from torch import nn

    class SE(nn.Module):
        def __init__(self, c: int, r: int) -> None:
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Sequential(nn.Conv2d(c, r, 1), nn.SiLU(), nn.Conv2d(r, c, 1),
                                    nn.Sigmoid())

        def forward(self, x):
            return x * self.fc(self.pool(x))

    class MBConv(nn.Module):
        def __init__(self, cin: int, cout: int, expand: int, k: int, stride: int) -> None:
            super().__init__()
            mid = cin * expand
            layers: list = []
            if expand != 1:
                layers += [nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU()]
            layers += [nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False),
                       nn.BatchNorm2d(mid), nn.SiLU(), SE(mid, max(1, cin // 4)),
                       nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.SiLU(),
        MBConv(32, 16, 1, 3, 1), MBConv(16, 24, 6, 3, 2), MBConv(24, 24, 6, 3, 1),
        MBConv(24, 40, 6, 5, 2), MBConv(40, 40, 6, 5, 1), MBConv(40, 80, 6, 3, 2),
        MBConv(80, 80, 6, 3, 1), MBConv(80, 112, 6, 5, 1),
        nn.Conv2d(112, 320, 1, bias=False), nn.BatchNorm2d(320), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(320, 1000))
    for m in net.modules():  # batch norms with non-trivial statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return net.eval()


def _effnet() -> tuple[object, dict]:
    from tvmpy.relay.testing import zoo

    spec = zoo.Spec(effnet_blocks_module(), [zoo.Input("input", ("batch", 3, 224, 224))])
    return _zoo_spec(spec)


def _zoo(name: str) -> Callable[[], tuple[object, dict]]:
    def make() -> tuple[object, dict]:
        from tvmpy.relay.testing import zoo

        return _zoo_spec(zoo.MODELS[name].build("real"))
    return make


MODELS: dict[str, Callable[[], tuple[object, dict]]] = {
    "resnet18": lambda: _showcase("resnet18"),
    "mobilenet_v2": lambda: _showcase("mobilenet_v2"),
    "bert_encoder": lambda: _showcase("bert_encoder"),
    "effnet_blocks": _effnet,   # depthwise conv, SiLU, squeeze-and-excitation
    "dcgan": _zoo("dcgan"),     # transposed convolutions (the DCGAN generator, 64x64 RGB)
    "lstm_lm": _zoo("lstm_lm"),  # a 2-layer LSTM word language model (vocab 10k, 32 steps)
}


# ---- where things live -----------------------------------------------------------------------
def cpu_tag() -> str:
    """``<llvm cpu>-<hash>``: the hash covers the CPU's model name and LLVM's host features."""
    import llvmlite.binding as llvm

    from tvmpy.target.cpu_features import host_feature_string

    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                         "")
    except OSError:
        pass
    digest = hashlib.sha1(f"{model}|{host_feature_string()}".encode()).hexdigest()[:8]
    return f"{llvm.get_host_cpu_name()}-{digest}"


class Progress:
    """A tuner's side file: the CPU, the search seconds spent so far and the curve rows;
    written after every round so that a killed run loses at most one round."""

    def __init__(self, path: str, cpu: str):
        self.path, self.cpu = path, cpu
        self.data: dict = {"cpu": cpu, "spent_s": 0.0, "rows": [], "tasks": []}
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
            if data.get("cpu") != cpu:
                raise SystemExit(f"{path}: tuned on CPU {data.get('cpu')!r}, this is {cpu!r}; "
                                 f"not reusing it (move it away or use another --log-dir)")
            self.data.update(data)

    @property
    def spent(self) -> float:
        return float(self.data["spent_s"])

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)


def search_threads() -> int:
    """The thread count this process's searches measure at (the parallel runtime's)."""
    from tvmpy.runtime.parallel_pool import num_threads

    return num_threads()


def as_progress_path(d: str, name: str, threads: int) -> str:
    """The auto-scheduler side file of ``name``'s search at ``threads``: one per thread count
    (the log is shared: its records name their count), ``<name>.as.t<N>.progress.json``; an
    older ``<name>.as.progress.json`` of a search at that count is resumed."""
    legacy = os.path.join(d, f"{name}.as.progress.json")
    path = os.path.join(d, f"{name}.as.t{threads}.progress.json")
    if not os.path.exists(path) and os.path.exists(legacy):
        with open(legacy) as f:
            if json.load(f).get("search_threads") == threads:
                return legacy
    return path


class _TimeUp(Exception):
    pass


# ---- tuning ----------------------------------------------------------------------------------
def tune_auto_scheduler(mod, params, log: str, prog: Progress, minutes: float,
                        per_round: int, jobs: int, cache_flush: bool = False,
                        cold_weights: bool = False, cpu_time: bool = False) -> None:
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.task_scheduler import PrintTableInfo, TaskSchedulerCallback

    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    prog.data["tasks"] = [{"desc": t.desc, "key": t.workload_key, "weight": w,
                           "flop": t.compute_dag.flop_ct()} for t, w in zip(tasks, weights)]
    left = minutes * 60 - prog.spent
    print(f"auto_scheduler: {len(tasks)} tasks ({sum(weights)} subgraph instances); "
          f"{prog.spent / 60:.1f} min already spent, {max(0.0, left) / 60:.1f} min left",
          flush=True)
    if left <= 5:
        return
    # the thread count the search measures at (this process's): its estimate is a figure at it
    prog.data["search_threads"] = search_threads()
    base, t0 = prog.spent, time.time()

    class Clock(TaskSchedulerCallback):
        def post_round(self, s, task_id):
            prog.data["spent_s"] = base + time.time() - t0
            prog.data["rows"].append([prog.spent, int(s.ct),
                                      [float(c) if c < 1e9 else None for c in s.best_costs]])
            for d, c, n in zip(prog.data["tasks"], s.best_costs, s.task_trials):
                d["best_s"], d["trials"] = (float(c) if c < 1e9 else None), int(n)
            prog.save()
            if time.time() - t0 > left:
                raise _TimeUp

    sched = auto_scheduler.TaskScheduler(tasks, weights, load_log_file=log,
                                         callbacks=[PrintTableInfo(), Clock()])
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=10 ** 7, num_measures_per_round=per_round, verbose=1,
        builder=auto_scheduler.LocalBuilder(timeout=60, n_parallel=jobs),
        # --cache-flush: TVM's advice for network tuning on CPUs (its tune_network_x86
        # tutorial): the weights and outputs evicted before each repeat, as they arrive inside
        # a model whose weights exceed the caches; one call per repeat
        # --cold-weights: each task's weight inputs rotated through copies, so that they come
        # from beyond the private caches as inside the model, its activations warm
        runner=(auto_scheduler.LocalRunner(number=1, repeat=10, enable_cpu_cache_flush=True)
                if cache_flush else
                auto_scheduler.LocalRunner(number=5, repeat=3, min_repeat_ms=20,
                                           cold_weights=cold_weights, cpu_time=cpu_time)),
        measure_callbacks=[auto_scheduler.RecordToFile(log)])
    try:
        sched.tune(opts)
    except _TimeUp:
        pass
    prog.data["spent_s"] = base + time.time() - t0
    prog.save()


def log_task_stats(log: str) -> dict[str, tuple[float | None, int]]:
    """Per workload key of an auto_scheduler log: (best mean cost or None, records)."""
    from tvmpy.auto_scheduler.measure_record import _parse

    out: dict[str, tuple[float | None, int]] = {}
    if not os.path.exists(log):
        return out
    with open(log) as f:
        for line in f:
            try:
                key, _, _, res = _parse(line)
            except (ValueError, KeyError, TypeError, IndexError):
                continue
            best, n = out.get(key, (None, 0))
            if res.error_no == 0 and res.costs:
                c = float(np.mean(res.costs))
                best = c if best is None else min(best, c)
            out[key] = (best, n + 1)
    return out


def tune_autotvm(mod, params, log: str, prog: Progress, minutes: float, jobs: int) -> bool:
    """AutoTVM for ``minutes`` in all, split between the templated tasks by FLOPs (a task's
    unused time goes to the next); False when the model has no templated op."""
    from tvmpy import autotvm
    from tvmpy.autotvm.task import extract_from_program
    from tvmpy.autotvm.tune_model import _load_log, _workload_key, make_tuner
    from tvmpy.transform import PassContext

    with PassContext(opt_level=3):
        tasks = extract_from_program(mod, params=params, target="llvm")
    if not tasks:
        print("autotvm: no templated op in this model", flush=True)
        return False
    tasks = sorted(tasks, key=lambda t: -float(t.flop or 0))
    prog.data["tasks"] = [{"name": t.name, "flop": float(t.flop or 0)} for t in tasks]
    left = minutes * 60 - prog.spent
    print(f"autotvm: {len(tasks)} templated tasks; {prog.spent / 60:.1f} min already spent, "
          f"{max(0.0, left) / 60:.1f} min left", flush=True)
    if left <= 5:
        return True
    flops = [max(1.0, float(t.flop or 0)) for t in tasks]
    by_key: dict = {}
    for inp, res in _load_log(log):
        by_key.setdefault(_workload_key(inp.task), []).append((inp, res))
    option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(n_parallel=jobs, timeout=60),
        runner=autotvm.LocalRunner(number=5, repeat=3, min_repeat_ms=20, timeout=20))
    base, t0, share = prog.spent, time.time(), 0.0
    for i, task in enumerate(tasks):
        share += flops[i] / sum(flops)
        task_end = t0 + left * share
        if time.time() >= task_end:
            continue
        tuner = make_tuner(task, "xgb")
        own = by_key.get(_workload_key(task), [])
        if own:
            tuner.load_history(own)
        n_new = len(task.config_space) - len({int(r[0].config.index) for r in own})
        if n_new <= 0:
            continue

        def record(_tuner, inputs, results, i=i, task_end=task_end):
            for r in results:
                cost = float(np.mean(r.costs)) if r.error_no == 0 and r.costs else None
                prog.data["rows"].append([base + time.time() - t0, i, cost])
            prog.data["spent_s"] = base + time.time() - t0
            prog.save()
            if time.time() >= task_end:
                raise _TimeUp

        print(f"autotvm task {i + 1}/{len(tasks)} {task.name}: {len(own)} from the log, "
              f"{(task_end - time.time()) / 60:.1f} min", flush=True)
        try:
            tuner.tune(n_trial=n_new, measure_option=option,
                       callbacks=[autotvm.callback.log_to_file(log), record])
        except _TimeUp:
            pass
    prog.data["spent_s"] = base + time.time() - t0
    prog.save()
    return True


def as_curve(prog: Progress, fallback: dict[str, float]) -> list[list[float]]:
    """``[seconds, trials, estimate]``: the weighted sum of every task's best latency after
    each round; a task without a valid record yet counts at its first valid record (or, if
    it never got one, at ``fallback[desc]``: its untuned kernel's time), [] if unknown."""
    tasks = prog.data["tasks"]
    rows = prog.data["rows"]
    if not rows or any(len(r[2]) != len(tasks) for r in rows):
        return []
    first: list[float | None] = [None] * len(tasks)
    for r in rows:
        for i, c in enumerate(r[2]):
            if c is not None and first[i] is None:
                first[i] = c
    for i, t in enumerate(tasks):
        if first[i] is None:
            first[i] = fallback.get(t["desc"])
    if any(f is None for f in first):
        return []
    return [[r[0], r[1], sum(t["weight"] * (c if c is not None else f)
                             for t, c, f in zip(tasks, r[2], first))] for r in rows]


def autotvm_curve(prog: Progress) -> list[list[float]]:
    """``[seconds, trials, estimate]``: the sum of the templated tasks' best latencies (each
    task once), a task not yet measured counted at its first valid measurement; tasks the
    budget never reached are left out (the plot's legend says how many are in)."""
    rows = prog.data["rows"]
    first: dict[int, float] = {}
    for _, i, c in rows:
        if c is not None and i not in first:
            first[i] = c
    if not first:
        return []
    best = dict(first)
    out = []
    for k, (t, i, c) in enumerate(rows):
        if c is not None:
            best[i] = min(best[i], c)
        out.append([t, k + 1, sum(best.values())])
    return out


# ---- measuring -------------------------------------------------------------------------------
def build_libs(mod, params, as_log: str, tvm_log: str | None, out_dir: str) -> dict[str, str]:
    import tvmpy as tvm
    from tvmpy import auto_scheduler, autotvm
    from tvmpy.relay.testing import compare

    libs = {}

    def export(name, lib):
        path = os.path.join(out_dir, f"{name}.so")
        lib.export_library(path)
        libs[name] = path

    lib, secs = compare.build(mod, params, opt_level=3)
    export("untuned", lib)
    if tvm_log and os.path.exists(tvm_log) and os.path.getsize(tvm_log):
        with autotvm.apply_history_best(tvm_log):
            lib, _ = compare.build(mod, params, opt_level=3)
        export("autotvm", lib)
    if os.path.exists(as_log) and os.path.getsize(as_log):
        # one library per thread count it is timed at: records apply to a build for the count
        # they were measured at (auto_scheduler.dispatcher); a count the search did not run at
        # keeps the default schedules (warned)
        for t in THREADS:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "auto_scheduler.ApplyHistoryBest: records "
                                        "measured at", RuntimeWarning)
                with auto_scheduler.ApplyHistoryBest(as_log, num_threads=t) as ctx:
                    with tvm.transform.PassContext(
                            opt_level=3, config={"relay.backend.use_auto_scheduler": True}):
                        lib = tvm.relay.build(mod, "llvm", params=params)
            export(f"auto_scheduler@{t}", lib)
            libs[f"applied@{t}"] = str(sum(1 for k in ctx.best if k[3] in (t, None)))
    return libs


def _strip(func_name: str) -> str:
    """A kernel's name without the module prefix: the fused function's name (a task's desc)."""
    return func_name.split("default_", 1)[1] if "default_" in func_name else func_name


def _node_profile(run) -> dict[str, float]:
    prof = run.module.module.profile(number=10)
    out: dict[str, float] = {}
    for r in prof.sorted_rows():
        name = r["func_name"] or r["node"]
        out[name] = out.get(name, 0.0) + float(r["time"])
    return out


_ORT_KIND = {"Conv": "conv", "ConvTranspose": "conv", "MatMul": "matmul/dense",
             "Gemm": "matmul/dense", "FusedMatMul": "matmul/dense", "FusedGemm": "matmul/dense",
             "FusedConv": "conv", "LSTM": "lstm/gru", "GRU": "lstm/gru",
             "Softmax": "softmax", "LayerNormalization": "layer_norm",
             "GlobalAveragePool": "pool", "MaxPool": "pool", "AveragePool": "pool"}


def tvm_kind(name: str) -> str:
    """The op kind of a fused function's name, for the comparison with onnxruntime's ops
    (transposed convolutions count as conv on both sides: relay lowers them to convolutions
    of the stride-interleaved input)."""
    for key, kind in (("conv", "conv"),
                      ("batch_matmul", "matmul/dense"), ("dense", "matmul/dense"),
                      ("matmul", "matmul/dense"), ("softmax", "softmax"),
                      ("layer_norm", "layer_norm"), ("pool", "pool")):
        if key in name:
            return kind
    return "other"


def _ort_profile(model_path: str, feeds: dict, threads: int, n: int = 20) -> dict[str, float]:
    """Seconds per run per op kind from onnxruntime's own profiler (node events)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(os.path.dirname(model_path), f"ort_prof_{threads}")
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    for _ in range(n):
        sess.run(None, feeds)
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    out: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            kind = _ORT_KIND.get(e.get("args", {}).get("op_name", ""), "other")
            out[kind] = out.get(kind, 0.0) + e["dur"] * 1e-6 / n
    return out


def measure_one(work: str, threads: int, rounds: int) -> dict:
    """In a fresh process (TVM_NUM_THREADS set by the parent): time the built libraries and
    onnxruntime interleaved, check their outputs, profile per node."""
    import onnx

    import tvmpy as tvm
    from tvmpy.relay.testing import compare

    with open(os.path.join(work, "libs.json")) as f:
        libs = json.load(f)
    feeds = dict(np.load(os.path.join(work, "feeds.npz")))
    model_path = os.path.join(work, "model.onnx")
    ort = compare.ort_runner(onnx.load(model_path), threads=threads)
    want = ort(feeds)
    runners = {}
    errs = {}
    # this count's auto-scheduled library (built from the records measured at it)
    applied = libs.get(f"applied@{threads}")
    libs = {k.split("@")[0]: v for k, v in libs.items()
            if "@" not in k or k == f"auto_scheduler@{threads}"}
    for side, path in libs.items():
        run = compare.tvm_runner(tvm.runtime.load_module(path))
        got = run(feeds)
        errs[side] = max(compare.errors(g, w)[1] for g, w in zip(got, want))
        runners[side] = run
    runners["ort"] = ort
    samples = interleaved_samples({k: (lambda f=f: f(feeds)) for k, f in runners.items()},
                                  rounds, pause=0.2, target_s=0.1)
    res = {"threads": threads, "errors": errs, "records_at_threads": applied,
           "median": {k: float(np.median(v)) for k, v in samples.items()},
           "best": {k: float(min(v)) for k, v in samples.items()},
           "ratio_rounds": {k: float(np.median([a / b for a, b in zip(v, samples["ort"])]))
                            for k, v in samples.items() if k != "ort"}}
    res["profile"] = {k: _node_profile(r) for k, r in runners.items() if k != "ort"}
    res["ort_profile"] = _ort_profile(model_path, feeds, threads)
    return res


THREADS = (1, 2)  # the thread counts every model is timed at


def measure(work: str, rounds: int) -> list[dict]:
    out = []
    for t in THREADS:
        env = {**os.environ, "TVM_NUM_THREADS": str(t), "OMP_NUM_THREADS": str(t)}
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure-one", work,
                            "--threads", str(t), "--rounds", str(rounds)],
                           env=env, capture_output=True, text=True)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if p.returncode or line is None:
            raise RuntimeError(f"measurement at {t} thread(s) failed:\n{p.stdout[-3000:]}\n"
                               f"{p.stderr[-3000:]}")
        out.append(json.loads(line[len("RESULT "):]))
    return out


# ---- reporting -------------------------------------------------------------------------------
def plot_model(name: str, as_prog: Progress, tvm_prog: Progress | None, png: str,
               measured: dict[str, float] | None, fallback: dict[str, float]) -> None:
    from vta_plot import plot

    series_t, series_n = [], []
    rows = as_curve(as_prog, fallback)
    if rows:
        series_t.append(("auto_scheduler: weighted sum of all subgraphs' best (est.)",
                         [r[0] / 60 for r in rows], [r[2] * 1e3 for r in rows], "line"))
        series_n.append((series_t[-1][0], [r[1] for r in rows], [r[2] * 1e3 for r in rows],
                         "line"))
    curve = autotvm_curve(tvm_prog) if tvm_prog is not None else []
    if curve:
        n_in = len({i for _, i, c in tvm_prog.data["rows"] if c is not None})
        series_t.append((f"AutoTVM: sum of its templated tasks' best (each once; "
                         f"{n_in}/{len(tvm_prog.data['tasks'])} tasks)",
                         [r[0] / 60 for r in curve], [r[2] * 1e3 for r in curve], "line"))
        series_n.append((series_t[-1][0], [r[1] for r in curve], [r[2] * 1e3 for r in curve],
                         "line"))
    if measured and series_t:
        end = max(s[1][-1] for s in series_t)
        for side in ("untuned", "ort"):
            if side in measured:
                series_t.append((f"measured end to end, {side} (1 thread)", [0, end],
                                 [measured[side] * 1e3] * 2, "line"))
    if not series_t:
        return
    plot(png, series_t, f"{name}: best latency vs search time", "search time (min)",
         "latency (ms)", logy=True)
    plot(png.replace(".png", "_trials.png"), series_n, f"{name}: best latency vs trials",
         "trials", "latency (ms)", logy=True)


def task_kernel(desc: str) -> str:
    """The model kernel's name of a task's ``desc``: the desc up to a note in parentheses (a
    kernel that runs a task several times a call, e.g. ``fused_nn_rnn_scan (topi.rnn_cell, 32
    run(s) a call)``: the recurrence whose task is its time step)."""
    return desc.split(" (", 1)[0]


def subgraph_report(as_prog: Progress, meas: dict) -> list[str]:
    lines = []
    prof = meas["profile"]
    t = meas["threads"]
    if "auto_scheduler" in prof:
        a, u = prof["auto_scheduler"], prof["untuned"]
        worse = sorted(((a[k] - u[k], k) for k in a if k in u and a[k] > 1.05 * u[k]),
                       reverse=True)
        lines.append(f"  {t} thread(s) ({meas.get('records_at_threads', '?')} workloads with "
                     f"records measured at {t} thread(s)): auto-scheduled kernels slower than the "
                     f"untuned default ({len(worse)} of {len(a)}):")
        for _, k in worse[:8]:
            lines.append(f"    {k[:70]:70s} {a[k] * 1e3:8.3f} ms vs {u[k] * 1e3:8.3f} ms "
                         f"({a[k] / u[k]:.2f}x)")
        kinds: dict[str, list[float]] = {}
        for k, v in a.items():
            kinds.setdefault(tvm_kind(k), [0.0, 0.0])[0] += v
        for k, v in meas["ort_profile"].items():
            kinds.setdefault(k, [0.0, 0.0])[1] += v
        tot_a, tot_o = sum(a.values()), sum(meas["ort_profile"].values())
        lines.append(f"    kernel time per run: auto-scheduled {tot_a * 1e3:.3f} ms, untuned "
                     f"{sum(u.values()) * 1e3:.3f} ms, onnxruntime {tot_o * 1e3:.3f} ms")
        # the search's estimate against the same kernels in the model, at the thread count
        # the search measured at (its estimate is a figure at that count only)
        tasks = [d for d in as_prog.data.get("tasks", []) if d.get("best_s")]
        in_model = sum(a.get(task_kernel(d["desc"]), 0.0) for d in tasks)
        est = sum(d["best_s"] * d["weight"] for d in tasks)
        st = as_prog.data.get("search_threads")
        if tasks and st == t:
            lines.append(f"    the tasks' kernels: search's estimate {est * 1e3:.3f} ms (measured at "
                         f"{st} thread(s)), in the model {in_model * 1e3:.3f} ms "
                         f"({in_model / est:.2f}x)")
        lines.append("    by op kind, auto-scheduled vs onnxruntime (kernel time per run, ms): "
                     + ", ".join(f"{k} {x * 1e3:.3f}/{y * 1e3:.3f}"
                                 + (" LOSES" if x > y > 0 else "")
                                 for k, (x, y) in sorted(kinds.items(), key=lambda kv: -kv[1][0])))
    return lines


def task_report(as_prog: Progress, top: int = 8) -> list[str]:
    tasks = [d for d in as_prog.data.get("tasks", []) if d.get("best_s")]
    tasks.sort(key=lambda d: -d["best_s"] * d["weight"])
    lines = ["  heaviest tasks (search's best x weight):"]
    for d in tasks[:top]:
        gf = d["flop"] / d["best_s"] / 1e9
        lines.append(f"    {d['desc'][:60]:60s} x{d['weight']:<3d} {d['best_s'] * 1e3:8.3f} ms "
                     f"{gf:7.2f} GFLOPS {d.get('trials', 0):5d} trials")
    return lines


def run_model(name: str, args, cpu: str) -> dict:
    import onnx

    from tvmpy.relay.testing import compare

    d = os.path.join(args.log_dir, cpu)
    os.makedirs(d, exist_ok=True)
    model, feeds = MODELS[name]()
    mod, params = compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})
    as_log, tvm_log = os.path.join(d, f"{name}.as.json"), os.path.join(d, f"{name}.autotvm.json")
    as_prog = Progress(as_progress_path(d, name, search_threads()), cpu)
    tvm_prog = Progress(os.path.join(d, f"{name}.autotvm.progress.json"), cpu)
    print(f"\n=== {name} ===", flush=True)
    tune_auto_scheduler(mod, params, as_log, as_prog, args.minutes, args.per_round, args.jobs,
                        args.cache_flush, args.cold_weights, args.cpu_time)
    stats = log_task_stats(as_log)  # the log is the truth (resumed runs, killed runs)
    for t in as_prog.data["tasks"]:
        t["best_s"], t["trials"] = stats.get(t["key"], (None, 0))
    as_prog.save()
    has_tvm = not args.no_autotvm and tune_autotvm(mod, params, tvm_log, tvm_prog,
                                                    args.minutes, args.jobs)
    with tempfile.TemporaryDirectory(prefix=f"as_models_{name}_") as work:
        onnx.save(model, os.path.join(work, "model.onnx"))
        np.savez(os.path.join(work, "feeds.npz"), **feeds)
        libs = build_libs(mod, params, as_log, tvm_log if has_tvm else None, work)
        with open(os.path.join(work, "libs.json"), "w") as f:
            json.dump(libs, f)
        meas = measure(work, args.rounds)
    row = {"model": name, "as_min": as_prog.spent / 60,
           "as_trials": sum(d.get("trials", 0) for d in as_prog.data["tasks"]),
           "tvm_min": tvm_prog.spent / 60 if has_tvm else None,
           "tvm_trials": len(tvm_prog.data["rows"]) if has_tvm else None,
           "n_tasks": len(as_prog.data["tasks"]), "measured": meas}
    untuned = {_strip(k): v for k, v in meas[0]["profile"]["untuned"].items()}
    fallback = {t["desc"]: untuned[task_kernel(t["desc"])] / t["weight"]
                for t in as_prog.data["tasks"] if task_kernel(t["desc"]) in untuned}
    plot_model(name, as_prog, tvm_prog if has_tvm else None, os.path.join(d, f"{name}.png"),
               meas[0]["median"], fallback)
    report = task_report(as_prog)
    for m in meas:
        report += subgraph_report(as_prog, m)
    row["report"] = report
    with open(os.path.join(d, f"{name}.result.json"), "w") as f:
        json.dump(row, f, indent=1)
    return row


ERR_TOL = 1e-3  # max |tvm - ort| / max |ort| accepted (float32, different summation orders)


def print_table(rows: list[dict]) -> int:
    """Print the table and the reports; returns the number of wrong outputs."""
    def ms(m, side):
        return f"{m['median'][side] * 1e3:.2f}" if side in m["median"] else "-"

    def ratio(m, side):
        return f"{m['ratio_rounds'][side]:.2f}" if side in m["ratio_rounds"] else "-"

    print("\n| model | thr | untuned | AutoTVM | auto-sched | ORT (ms) | untuned/ORT | AutoTVM/ORT "
          "| auto-sched/ORT | auto-sched/AutoTVM | search AS (min, trials) | AutoTVM (min, trials) "
          "| max rel err |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        for m in r["measured"]:
            med = m["median"]
            vs = (f"{med['auto_scheduler'] / med['autotvm']:.2f}"
                  if "auto_scheduler" in med and "autotvm" in med else "-")
            tv = (f"{r['tvm_min']:.1f}, {r['tvm_trials']}" if r["tvm_min"] is not None else "-")
            print(f"| {r['model']} | {m['threads']} | {ms(m, 'untuned')} | {ms(m, 'autotvm')} | "
                  f"{ms(m, 'auto_scheduler')} | {ms(m, 'ort')} | {ratio(m, 'untuned')} | "
                  f"{ratio(m, 'autotvm')} | {ratio(m, 'auto_scheduler')} | {vs} | "
                  f"{r['as_min']:.1f}, {r['as_trials']} | {tv} | "
                  f"{max(m['errors'].values()):.1e} |")
    bad = [(r["model"], m["threads"], side, e) for r in rows for m in r["measured"]
           for side, e in m["errors"].items() if not e <= ERR_TOL]
    for model, t, side, e in bad:
        print(f"WRONG OUTPUT: {model} {side} at {t} thread(s): max error {e:.2e} of the "
              f"output's scale vs onnxruntime (tolerance {ERR_TOL:g})")
    print("\n(medians of interleaved rounds, ms; ratios: median of the per-round ratios)")
    for r in rows:
        print(f"\n{r['model']} ({r['n_tasks']} auto_scheduler tasks):")
        print("\n".join(r["report"]))
    return len(bad)


def main() -> None:
    ensure_native_blas()  # here, not at import: tests import this module
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--minutes", type=float, default=20.0,
                   help="search time per model and tuner (0: measure the existing logs)")
    p.add_argument("--log-dir", default=os.path.join(HERE, "as_logs"))
    p.add_argument("--per-round", type=int, default=16, help="auto_scheduler trials per round")
    p.add_argument("--jobs", type=int, default=2, help="parallel candidate builds")
    p.add_argument("--rounds", type=int, default=10, help="interleaved timing rounds")
    p.add_argument("--no-autotvm", action="store_true")
    p.add_argument("--cache-flush", action="store_true",
                   help="auto_scheduler measures with the CPU caches flushed before each repeat "
                        "(use a separate --log-dir: the records' costs differ)")
    p.add_argument("--cold-weights", action="store_true",
                   help="auto_scheduler measures each task with its weight inputs rotated through "
                        "copies (from beyond L2, as inside the model; activations warm); use a "
                        "separate --log-dir")
    p.add_argument("--cpu-time", action="store_true",
                   help="auto_scheduler measures candidates with the runner's CPU time (a shared "
                        "machine); needs TVM_NUM_THREADS=1: the search then measures at 1 thread")
    p.add_argument("--measure-one", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure_one:
        print("RESULT " + json.dumps(measure_one(args.measure_one, args.threads, args.rounds)))
        return
    names = [n for n in args.models.split(",") if n]
    bad = [n for n in names if n not in MODELS]
    if bad:
        p.error(f"unknown models {bad}; choose from {list(MODELS)}")
    if args.minutes < 0:
        p.error("--minutes must be >= 0")
    if args.cpu_time and os.environ.get("TVM_NUM_THREADS") != "1":
        p.error("--cpu-time needs TVM_NUM_THREADS=1 (CPU time is a latency on one thread only)")
    cpu = cpu_tag()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()} ({cpu}); "
          f"{args.minutes:g} min search per model and tuner; logs in {args.log_dir}/{cpu}")
    rows = [run_model(n, args, cpu) for n in names]
    if print_table(rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
