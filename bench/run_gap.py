"""Where a graph-executor run's time goes beyond its kernels' sum (issue 28 point 4).

For each model (a library exported by bench/zoo_lib_ab.py ``export``, or ``mobilenet_v2``: the
showcase, built here), one process, interleaved rounds (bench/common.interleaved_samples; at 1
thread the process's CPU time with ``--cpu-time``, else wall time):

- ``e2e``: inputs set, ``run()``, outputs copied out (compare.tvm_runner, as bench/zoo.py);
- ``run``: ``run()`` alone;
- ``loop``: the bare Python loop over the executor's prepared ctypes calls (no lock, no checks);
- ``seq``: the same loop with every call timed (the thread's CPU time with ``--cpu-time``, else
  perf_counter, before and after; the clock's own cost, timed around empty calls, subtracted): the sum of the
  per-kernel times in graph order (what GraphExecutor.profile and bench/zoo_profile.py sum);
- ``hot``: every kernel alone, repeated back to back (``--hot`` calls), summed: the kernels on
  caches that hold their own weights and activations;
- ``empty``: the loop with every call replaced by one of an empty native function that takes the
  same arguments (the dispatch cost, warm: Python loop + ctypes marshalling of the prepared args);
- ``native`` / ``e2e_native``: ``run()`` (and the e2e round) with the plan run as one native
  function (runtime/graph_executor/native_run.py); the other sides use the Python loop: an A/B
  of the native runner on the same executor (same arena, weights, inputs), toggled per call.

With ``--zero-copy``, whole calls only: inputs bound in place vs copied (``_measure_zero_copy``).

    python bench/run_gap.py DIR mobilenet_v2,mnasnet [--threads 1] [--rounds 9] [--cpu-time]
        [--ab-only | --zero-copy]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    bench_threads,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
)

ensure_native_blas()


def _model(name: str, d: str):
    """(library, feeds) of a model: its exported library in ``d``, or the showcase MobileNetV2
    (built and exported there when missing)."""
    import tvmpy
    from tvmpy.relay.testing import compare, onnx_models, zoo

    path = os.path.join(d, name + ".so")
    if name == "mobilenet_v2":
        model = onnx_models.mobilenet_v2(batch=1, image=224)
        feeds = onnx_models.input_feeds(model)
        if not os.path.exists(path):
            mod, params = compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})
            lib, _ = compare.build(mod, params, opt_level=3)
            os.makedirs(d, exist_ok=True)
            lib.export_library(path)
    else:
        spec = zoo.MODELS[name]("real")
        feeds = spec.feeds(seed=1)
    return tvmpy.runtime.load_module(path), feeds


def _empty_calls(calls: list) -> list:
    """Each prepared call with its function replaced by an empty native function of the same
    ctypes signature (libc's ``getpid``-like no-op is not of that signature, so: a ctypes
    function pointer to a ``ret 0`` stub)."""
    import mmap

    buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(b"\x31\xc0\xc3")  # xor eax, eax; ret
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    out = []
    for cfunc, args in calls:
        proto = ctypes.CFUNCTYPE(cfunc.restype, *(cfunc.argtypes or ()))
        out.append((proto(addr), args))
    _empty_calls.keep = buf  # type: ignore[attr-defined]
    return out


def _loop(calls: list) -> None:
    for f, x in calls:
        f(*x)


def _measure(name: str, a: argparse.Namespace, clock: Callable[[], float]) -> None:
    from tvmpy.relay.testing import compare

    lib, feeds = _model(name, a.dir)
    run = compare.tvm_runner(lib)
    gm = run.module.module
    gm.native_after = 1
    for _ in range(3):
        got = run(feeds)
    plan = gm._active  # noqa: SLF001
    native = plan.native
    if not native:
        raise SystemExit(f"{name}: no native runner was built")
    plan.native = False  # the Python loop (as before the native runner)
    for x, y in zip(run(feeds), got):
        np.testing.assert_array_equal(x, y)

    def with_native(fn: Callable[[], object]) -> Callable[[], object]:
        def call() -> object:
            plan.native = native
            try:
                return fn()
            finally:
                plan.native = False
        return call

    calls = gm._calls  # noqa: SLF001
    pc = time.thread_time if a.cpu_time else time.perf_counter
    per_kernel: list[list[float]] = [[] for _ in calls]
    seq_tot: list[float] = []

    def seq(cs: list, record: bool) -> float:
        tot = 0.0
        for k, (f, x) in enumerate(cs):
            t0 = pc()
            f(*x)
            dt = pc() - t0
            tot += dt
            if record:
                per_kernel[k].append(dt)
        return tot

    sides: dict[str, Callable[[], object]] = {
        "e2e": lambda: run(feeds), "e2e_native": with_native(lambda: run(feeds)),
        "run": gm.run, "native": with_native(gm.run)}
    empty = _empty_calls(calls) if os.uname().machine == "x86_64" else None
    if not a.ab_only:
        sides.update({"loop": lambda: _loop(calls),
                      "seq": lambda: seq_tot.append(seq(calls, True))})
        if empty is not None:
            sides["empty"] = lambda: _loop(empty)
    s = interleaved_samples(sides, a.rounds, pause=0.05, target_s=0.1, clock=clock)
    med = {k: statistics.median(v) * 1e3 for k, v in s.items()}
    print(f"{name:18s} load {os.getloadavg()[0]:.1f} kernels {len(calls)}")
    for k, v in s.items():
        print(f"   {k:10s} {med[k]:8.3f} ms [{min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}]")
    for x, y in (("native", "run"), ("e2e_native", "e2e")):
        r = sorted(p / q for p, q in zip(s[x], s[y]))
        print(f"   {x}/{y} per round: median {statistics.median(r):.4f} [{r[0]:.4f}-{r[-1]:.4f}]"
              f", saved {med[y] - med[x]:.3f} ms ({(med[y] - med[x]) / len(calls) * 1e3:.2f} us"
              " per kernel)")
    if a.ab_only:
        return
    bias = statistics.median([seq(empty, False) for _ in range(200)]) if empty else 0.0
    hot = []
    for f, x in calls:
        f(*x)
        ts = []
        for _ in range(a.hot):
            t0 = pc()
            f(*x)
            ts.append(pc() - t0)
        hot.append(statistics.median(ts))
    seq_ms = (statistics.median(seq_tot) - bias) * 1e3
    hot_ms = (sum(hot) - bias) * 1e3
    # what a profiler's table sums: each kernel's median, then the sum (less than the median
    # of the per-run sums: every kernel's occasional slow call is left out)
    med_sum_ms = (sum(statistics.median(t) for t in per_kernel) - bias) * 1e3
    print(f"   seq sum (clock per kernel) {seq_ms:.3f} ms; sum of kernel medians "
          f"{med_sum_ms:.3f}; hot sum {hot_ms:.3f} ms; run-loop {med['run'] - med['loop']:.3f}, "
          f"e2e-run {med['e2e'] - med['run']:.3f}, loop-seqsum {med['loop'] - seq_ms:.3f}, "
          f"seqsum-hot {seq_ms - hot_ms:.3f}", flush=True)


def _measure_zero_copy(name: str, a: argparse.Namespace, clock: Callable[[], float]) -> None:
    """Whole calls (inputs fed, outputs fetched) on one executor, native runner on: ``infer``
    with the inputs bound in place (``zc``: 64-byte aligned copies of the feeds) or copied
    (``copy``: ``zero_copy_inputs`` off, same arrays), toggled per call; ``numpy``: ``infer`` on
    the feeds as drawn (numpy's own allocation: copied unless it happens to be aligned);
    ``tvm_runner``: set_input/run/get_output().numpy() (compare.tvm_runner, bench/zoo.py)."""
    from tvmpy.relay.testing import compare
    from tvmpy.runtime.ndarray import aligned_empty

    lib, feeds = _model(name, a.dir)
    run = compare.tvm_runner(lib)
    gm = run.module.module
    gm.native_after = 1
    aligned = {}
    for k, v in feeds.items():
        aligned[k] = aligned_empty(v.shape, v.dtype)
        aligned[k][...] = v
    want = run(feeds)
    for _ in range(3):
        got = gm.infer(aligned)
    assert gm._active.native, "no native runner"  # noqa: SLF001
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    bound = len(gm._bound)  # noqa: SLF001

    def infer(zc: bool, fs: dict) -> Callable[[], object]:
        def call() -> object:
            gm.zero_copy_inputs = zc
            return gm.infer(fs)
        return call

    sides: dict[str, Callable[[], object]] = {
        "zc": infer(True, aligned), "copy": infer(False, aligned),
        "numpy": infer(True, feeds), "tvm_runner": lambda: run(feeds)}
    s = interleaved_samples(sides, a.rounds, pause=0.05, target_s=0.1, clock=clock)
    med = {k: statistics.median(v) * 1e3 for k, v in s.items()}
    nbytes = sum(v.nbytes for v in feeds.values())
    print(f"{name:18s} load {os.getloadavg()[0]:.1f} inputs {len(feeds)} ({nbytes} bytes, "
          f"{bound} bound)")
    for k, v in s.items():
        print(f"   {k:10s} {med[k]:8.3f} ms [{min(v) * 1e3:.3f}-{max(v) * 1e3:.3f}]")
    r = sorted(p / q for p, q in zip(s["zc"], s["copy"]))
    d = sorted((q - p) * 1e6 for p, q in zip(s["zc"], s["copy"]))
    print(f"   zc/copy per round: median {statistics.median(r):.4f} [{r[0]:.4f}-{r[-1]:.4f}], "
          f"saved {statistics.median(d):.1f} us [{d[0]:.1f}-{d[-1]:.1f}]", flush=True)
    # paired single calls, alternating (the thread's CPU time with --cpu-time): the saving's
    # median over many pairs, each pair on nearly the same machine state
    pc = time.thread_time if a.cpu_time else time.perf_counter
    zc, cp = infer(True, aligned), infer(False, aligned)
    diffs = []
    for k in range(a.pairs):
        ts = []
        for f in ((zc, cp) if k % 2 else (cp, zc)):
            t0 = pc()
            f()
            ts.append(pc() - t0)
        t_zc, t_cp = (ts[0], ts[1]) if k % 2 else (ts[1], ts[0])
        diffs.append((t_cp - t_zc) * 1e6)
    q = statistics.quantiles(diffs, n=4)
    print(f"   paired calls ({a.pairs}): copy - zc median {statistics.median(diffs):.1f} us, "
          f"quartiles [{q[0]:.1f}, {q[2]:.1f}]", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("models")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--hot", type=int, default=20)
    ap.add_argument("--cpu-time", action="store_true")
    ap.add_argument("--ab-only", action="store_true", help="only e2e/run, loop vs native")
    ap.add_argument("--pairs", type=int, default=2000, help="--zero-copy: paired calls")
    ap.add_argument("--zero-copy", action="store_true",
                    help="only whole calls, inputs bound in place vs copied (_measure_zero_copy)")
    a = ap.parse_args()
    threads = bench_threads(a.threads)
    clock = bench_clock(a.cpu_time, threads)
    print(machine_description(), f"{threads} thread(s)", "CPU time" if a.cpu_time else "wall",
          flush=True)
    for name in a.models.split(","):
        (_measure_zero_copy if a.zero_copy else _measure)(name, a, clock)


if __name__ == "__main__":
    main()
