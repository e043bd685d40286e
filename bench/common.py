"""Shared helpers for benchmarks: strict schedules, a clean BLAS environment, timing, and result
lines."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

_BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# Every bench script imports this module, so every bench builds with strict schedules: an
# operator schedule that fails is an error (relay.backend.strict_schedules), never a silently
# slow fallback that skews a figure. Inherited by worker processes; TVMPY_STRICT_SCHEDULES=0
# in the environment turns it off.
os.environ.setdefault("TVMPY_STRICT_SCHEDULES", "1")


def ensure_native_blas() -> None:
    """Re-run this script without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE.

    This machine sets them (older OpenBLAS builds misdetect the CPU); they pin numpy's OpenBLAS
    to its Haswell (AVX2) kernels, which would make numpy look ~2x slower than it is. Set
    BENCH_KEEP_BLAS_ENV=1 to measure numpy as the environment configures it instead.
    """
    if os.environ.get("BENCH_KEEP_BLAS_ENV") == "1":
        return
    if any(v in os.environ for v in _BLAS_VARS):
        env = {k: v for k, v in os.environ.items() if k not in _BLAS_VARS}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def bench_threads(requested: int | None = None) -> int:
    """The thread count every side of a benchmark runs on: ``requested`` (a script's
    ``--threads``), else the count tvmpy's parallel loops take by themselves (TVM_NUM_THREADS,
    else OMP_NUM_THREADS, else the CPUs this process may run on). Written to TVM_NUM_THREADS
    (and OMP_NUM_THREADS) before any tvmpy library runs, as ``tvmpy bench`` does; a script
    gives onnxruntime (``intra_op_num_threads``) and torch the same count, so that
    ``TVM_NUM_THREADS=1 python bench/x.py`` compares one thread with one thread."""
    from tvmpy.cli.bench import bench_threads as resolve

    return resolve(requested)


def numpy_blas_threads(set_to: int | None = None) -> int | None:
    """numpy's OpenBLAS thread count, after setting it to ``set_to`` when given; None when
    numpy's BLAS is not a scipy-openblas build whose thread functions can be found (then the
    count is OpenBLAS's own: OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else all CPUs)."""
    import ctypes
    import glob

    import numpy as np

    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs",
                                  "libscipy_openblas*.so*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0))
        except OSError:
            continue
        for suffix in ("64_", ""):
            get = getattr(lib, f"scipy_openblas_get_num_threads{suffix}", None)
            put = getattr(lib, f"scipy_openblas_set_num_threads{suffix}", None)
            if get is None or put is None:
                continue
            if set_to is not None:
                put(ctypes.c_int(set_to))
            return int(get())
    return None


def blas_description() -> str:
    try:
        import numpy as np

        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        kern = os.environ.get("OPENBLAS_CORETYPE", "auto-detected kernel")
        return f"{blas.get('name')} {blas.get('version')} ({kern})"
    except Exception:  # pragma: no cover
        return "unknown BLAS"


def machine_description() -> str:
    import llvmlite.binding as llvm

    return f"{platform.machine()} {llvm.get_host_cpu_name()}, {os.cpu_count()} cores"


def best_time(fn: Callable[[], object], repeat: int = 10, number: int = 1) -> float:
    """Best-of-``repeat`` mean seconds of ``number`` calls (robust against a noisy machine)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return min(times)




# --- fair side-by-side timing (issue 12) ------------------------------------------------------

def ort_session(model: object, threads: int = 2) -> object:
    """An onnxruntime CPU session (all graph optimizations, ``intra_op_num_threads=threads``)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # the default, said
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    data = model if isinstance(model, bytes) else model.SerializeToString()  # type: ignore
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def ort_bound_runner(sess: object, feeds: dict) -> tuple[Callable[[], object], list]:
    """``(run, outputs)``: ``run()`` is ``sess.run_with_iobinding`` with every input bound once
    as an OrtValue and every output bound to a preallocated OrtValue (``outputs``, read them
    with ``.numpy()``), so a timed call pays neither the feed's conversion nor an output
    allocation, as a preallocated tvmpy output does not."""
    import numpy as np
    import onnxruntime as ort

    io = sess.io_binding()  # type: ignore[attr-defined]
    keep = []
    for name, value in feeds.items():
        ov = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value))
        keep.append(ov)
        io.bind_ortvalue_input(name, ov)
    outs = []
    for o in sess.get_outputs():  # type: ignore[attr-defined]
        shape = [int(d) for d in o.shape]
        ov = ort.OrtValue.ortvalue_from_numpy(np.empty(shape, np.float32))
        outs.append(ov)
        io.bind_ortvalue_output(o.name, ov)
    run_with = sess.run_with_iobinding  # type: ignore[attr-defined]

    def run() -> None:
        run_with(io)

    run._keep = (io, keep)  # type: ignore[attr-defined]  # the bound values must stay alive
    return run, outs


CALIBRATE_WARMUP = 5
"""Calls of a side before its calibration: one-time costs of the first calls (the graph
executor's native runner is built on a plan's third run, its JIT compile ~45 ms once a process)
must not be taken for the cost of a call. With one warm-up call the tvmpy side calibrated on
that compile got 2 calls a round, each round's first call cold after the pause: lstm_lm's
library timed 2.9 ms where the same library calibrated second timed 2.0 (session 7)."""


def calibrate_number(fn: Callable[[], object], target_s: float) -> int:
    """How many back-to-back calls of ``fn`` take about ``target_s`` (after
    :data:`CALIBRATE_WARMUP` warm-up calls)."""
    for _ in range(CALIBRATE_WARMUP):
        fn()
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= target_s / 4 or n >= 1 << 16:
            break
        n *= 4
    return max(1, min(1 << 16, round(n * target_s / max(t, 1e-9))))


def bench_clock(cpu_time: bool, threads: int) -> Callable[[], float]:
    """The clock of a timed round: wall time (``time.perf_counter``), or with ``cpu_time`` the
    process's CPU time (``time.process_time``), which a loaded machine's preemption does not
    inflate. CPU time is only comparable with one thread on every side (with more, it counts
    the threads' spinning and leaves out their waiting), so it needs ``threads == 1``."""
    if not cpu_time:
        return time.perf_counter
    if threads != 1:
        raise SystemExit(f"--cpu-time compares sides on one thread only (got {threads} threads)")
    return time.process_time


def interleaved_samples(sides: dict[str, Callable[[], object]], rounds: int,
                        pause: float = 0.15, target_s: float = 0.01,
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each side, one sample per round: every side runs ``rounds`` rounds,
    interleaved with the others (the order rotates each round, so none always runs first), each
    round the mean of a fixed number of back-to-back calls (about ``target_s``; calibrated
    once per side, before any round), after a ``pause`` that lets the previous side's spinning
    worker threads go idle. Every side gets the same number of rounds; nothing is re-measured.
    ``clock`` times the rounds (:func:`bench_clock`: wall or CPU time)."""
    numbers = {k: calibrate_number(fn, target_s) for k, fn in sides.items()}
    names = list(sides)
    out: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        k0 = r % len(names)
        for name in names[k0:] + names[:k0]:
            fn, n = sides[name], numbers[name]
            time.sleep(pause)
            t0 = clock()
            for _ in range(n):
                fn()
            out[name].append((clock() - t0) / n)
    return out


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    """(25th percentile, median, 75th percentile) of ``xs``."""
    import numpy as np

    q = np.percentile(np.asarray(xs, dtype=np.float64), [25, 50, 75])
    return float(q[0]), float(q[1]), float(q[2])


def geomean(xs: list[float]) -> float:
    import math

    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


# --- zoo models as the bench scripts load them ------------------------------------------------

class ZooBench(NamedTuple):
    """One zoo model ready for a bench: its registry entry (``entry.vm``), the spec, the ONNX
    model, the inputs (``spec.feeds(seed=1)``) and, unless skipped, the relay module and
    parameters imported from the ONNX model."""

    entry: Any
    spec: Any
    model: Any
    feeds: dict
    mod: Any
    params: Any


def zoo_model(name: str, size: str = "real", relay: bool = True) -> ZooBench:
    """Zoo model ``name`` at ``size`` exported to ONNX, its seed-1 inputs, and (``relay``) the
    relay import of that ONNX model: the preamble every zoo bench shares."""
    from tvmpy.relay.testing import zoo

    entry = zoo.MODELS[name]
    spec = entry(size)
    model = zoo.to_onnx(spec)
    feeds = spec.feeds(seed=1)
    mod, params = zoo.from_onnx(model, spec) if relay else (None, None)
    return ZooBench(entry, spec, model, feeds, mod, params)


def zoo_switch_ab(models: list[str], variants: dict[str, Callable[[], AbstractContextManager]],
                  rounds: int, threads: int = 1) -> None:
    """A/B of a compile-time switch on whole zoo models: each model built once under each of the
    two ``variants`` (context managers that set the switch during ``zoo.build``), both checked
    against onnxruntime (``threads`` threads), then the three sides timed in interleaved rounds
    (process CPU time at one thread, else wall time). Prints a markdown row per model: best
    round of each side, B/A best over best and the median [min-max] of the per-round ratios,
    each variant over onnxruntime."""
    from tvmpy.relay.testing import compare, zoo

    if os.environ.get("TVM_NUM_THREADS") != str(threads):  # read once, at the runtime's first use
        raise RuntimeError(f"set TVM_NUM_THREADS={threads} before tvmpy's runtime starts: "
                           "with more threads, process CPU time sums them all")
    a, b = variants
    print(f"| model | {a} ms | {b} ms | ORT ms | {b}/{a} (min) | {b}/{a} (median "
          f"of rounds) | {a}/ORT | {b}/ORT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in models:
        z = zoo_model(name)
        built = {}
        for mode, switch in variants.items():
            with switch():
                built[mode] = zoo.build(z.mod, z.params, vm=z.entry.vm)
        ort = compare.ort_runner(z.model, threads=threads)
        ref = ort(z.feeds)
        for c in built.values():
            zoo.assert_close(c.run(z.feeds), ref, name)
        sides = {m: (lambda c=c, f=z.feeds: c.run(f)) for m, c in built.items()}
        sides["ORT"] = lambda o=ort, f=z.feeds: o(f)
        t = interleaved_samples(sides, rounds, pause=0.3, target_s=0.1,
                                clock=bench_clock(threads == 1, threads))
        ms = {k: min(v) * 1e3 for k, v in t.items()}
        per = sorted(y / x for y, x in zip(t[b], t[a]))
        print(f"| {name} | {ms[a]:.2f} | {ms[b]:.2f} | {ms['ORT']:.2f} | "
              f"{ms[b] / ms[a]:.3f} | {per[len(per) // 2]:.3f} "
              f"({per[0]:.2f}-{per[-1]:.2f}) | {ms[a] / ms['ORT']:.2f} | "
              f"{ms[b] / ms['ORT']:.2f} |", flush=True)
    print(f"# {threads} thread(s), load {os.getloadavg()[0]:.2f}")


# --- int8 agreement in output quantization steps (issue 24) ----------------------------------

def output_step(model) -> float | None:
    """The quantization step of the model's (first) output: its DequantizeLinear's scale."""
    import numpy as np
    from onnx import numpy_helper

    out = model.graph.output[0].name
    inits = {i.name: i for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    while out in producer:
        n = producer[out]
        if n.op_type == "DequantizeLinear" and n.input[1] in inits:
            return float(np.max(numpy_helper.to_array(inits[n.input[1]])))
        if n.op_type not in ("Identity", "Reshape", "Flatten"):  # value-preserving: look through
            return None
        out = n.input[0]
    return None


class Agreement:
    """Per-element differences in output quantization steps, accumulated over inputs."""

    def __init__(self, step: float) -> None:
        self.step, self.max, self.sum, self.within, self.n = step, 0.0, 0.0, 0, 0

    def add(self, a: object, b: object) -> None:
        import numpy as np

        d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)) / self.step
        self.max = max(self.max, float(d.max()))
        self.sum += float(d.sum())
        self.within += int(np.count_nonzero(d <= 1.0 + 1e-6))
        self.n += d.size

    def __str__(self) -> str:
        return (f"max {self.max:.2f}, mean {self.sum / self.n:.3f} steps; "
                f"{100 * self.within / self.n:.2f}% within 1 step")


# --- two lowerings of one zoo model in one process ---------------------------------------------

def lowering_forms_ab(model_name: str, forms: dict[str, Callable[[Any, Any], Any]], rounds: int,
                      node_rounds: int) -> None:
    """Two (or more) builds of one zoo model at its real size in ONE process, interleaved, with
    onnxruntime, at 1 thread: ``forms`` maps a name to ``build(mod, params) -> runner`` (a
    callable on the feeds whose ``.module.module`` is the graph executor). Printed: each form's
    cold build time and max abs error against onnxruntime, the whole model's process CPU time
    (:func:`interleaved_samples`; medians [min-max] and the median of per-round ratios to
    onnxruntime), then a per-kernel profile (thread CPU time of each graph-executor call, the
    forms alternating in rounds of 5 runs; medians summed by kind, and each kernel by output
    shape). Sets ``TVM_NUM_THREADS=1`` and ``TVMPY_CACHE=0`` (cold builds)."""
    import re
    import statistics
    from collections import defaultdict

    os.environ["TVM_NUM_THREADS"] = "1"
    os.environ["TVMPY_CACHE"] = "0"
    import numpy as np

    from tvmpy.relay.testing import compare, zoo

    def kind_of(name: str) -> str:
        return re.sub(r"_\d+$", "", re.sub(r"^(tvmgen_default_)?fused_", "", name))

    print(machine_description(), "1 thread", flush=True)
    spec = zoo.MODELS[model_name]("real")
    model = zoo.to_onnx(spec)
    feeds = spec.feeds(seed=1)
    built = {}
    for name, build in forms.items():
        mod, params = zoo.from_onnx(model, spec)
        t0 = time.time()
        built[name] = build(mod, params)
        print(f"{name}: cold build {time.time() - t0:.1f} s", flush=True)
    ort = compare.ort_runner(model, threads=1)
    want = np.asarray(ort(feeds)[0])
    for name, b in built.items():
        got = np.asarray(b(feeds)[0])
        print(f"{name}: max abs error against onnxruntime {float(np.max(np.abs(got - want))):.2e}")
    sides: dict[str, Callable[[], object]] = {k: (lambda b=b: b(feeds)) for k, b in built.items()}
    sides["ort"] = lambda: ort(feeds)
    s = interleaved_samples(sides, rounds, pause=0.2, target_s=0.1, clock=time.process_time)
    for k in built:
        r = sorted(a / o for a, o in zip(s[k], s["ort"]))
        print(f"{k}: {statistics.median(s[k]) * 1e3:.3f} ms [{min(s[k]) * 1e3:.3f}-"
              f"{max(s[k]) * 1e3:.3f}], /onnxruntime {statistics.median(r):.3f} "
              f"[{r[0]:.3f}-{r[-1]:.3f}]")
    print(f"onnxruntime: {statistics.median(s['ort']) * 1e3:.3f} ms")
    state = {}
    for k, b in built.items():
        gm = b.module.module  # (the graph executor behind the runner)
        gm.run()
        state[k] = (gm, [[] for _ in gm._calls])  # noqa: SLF001
    for _ in range(node_rounds):
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
            kind = kind_of(node.func_name or node.name)
            kinds[kind].append(statistics.median(ts))
            shape = tuple(gm._entries[node.outputs[0]].shape)  # noqa: SLF001
            shapes[(kind, shape)].append(statistics.median(ts) * 1e6)
        total = sum(sum(v) for v in kinds.values())
        print(f"== {k}: {len(times)} kernels, summed {total * 1e3:.3f} ms")
        for kind, ts in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {sum(ts) * 1e3:8.3f} ({len(ts):2d}) {kind}")
        for (kind, shape), us in shapes.items():
            print(f"      {kind} {shape}: " + " ".join(f"{u:.1f}" for u in us))
