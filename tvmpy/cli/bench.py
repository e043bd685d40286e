"""``tvmpy bench``: build an ONNX model at each opt level, check it against onnxruntime and time
every side (tvmpy, onnxruntime, eager pytorch) on the same thread count."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._common import (
    CliError,
    _compile,
    _load_onnx,
    _random_feeds,
    _resolve_shapes,
    _vm_arrays,
    parse_input_args,
    parse_shape_args,
)

CHECK_RTOL = 1e-4  # max|tvmpy - onnxruntime| <= CHECK_RTOL * max|onnxruntime| (+ 1e-5)


def _vm_runner(exe: Any) -> Any:
    """``run(feeds) -> outputs`` (flattened, numpy) over a relay.vm Executable."""
    from ..runtime import cpu
    from ..runtime.vm import VirtualMachine

    vm = VirtualMachine(exe, cpu(0))

    def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        vm.run(**feeds)
        return _vm_arrays(vm.get_outputs())

    run.vm = vm  # type: ignore[attr-defined]
    return run


def _env_threads(name: str) -> int:
    """A thread count from the environment as tvmpy's pool reads it (runtime/parallel_pool.py:
    a whole number in 1..4095, else ignored): 0 when unset or not such a number."""
    text = os.environ.get(name, "").strip()
    try:
        n = int(text, 10)
    except ValueError:
        return 0
    return n if 0 < n < 4096 else 0


def bench_threads(requested: int | None) -> int:
    """The thread count every side of ``tvmpy bench`` / ``demo`` runs on.

    ``requested`` (``--threads``), else the count tvmpy's parallel loops take by themselves
    (``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs this process may run on).
    The count is written back to ``TVM_NUM_THREADS`` and ``OMP_NUM_THREADS`` before anything is
    built, so tvmpy's pool (and libgomp, for the C target) start with it; onnxruntime and torch
    are given the same count, so the ratio column compares like with like.
    """
    if requested is not None:
        if requested < 1:
            raise CliError(f"--threads must be at least 1, got {requested}")
        n = requested
    else:
        n = _env_threads("TVM_NUM_THREADS") or _env_threads("OMP_NUM_THREADS")
        if not n:
            affinity = getattr(os, "sched_getaffinity", None)
            n = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    os.environ["TVM_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(n)
    return n


def _threads_label(n: int) -> str:
    return "1 thread" if n == 1 else f"{n} threads"


def _bench(model: Any, shapes: Mapping[str, tuple[int, ...]], args: argparse.Namespace,
           title: str) -> int:
    """Build at each opt level, check against onnxruntime, print the latency table (every side
    on the same thread count, :func:`bench_threads`)."""
    from ..relay.testing import compare

    threads = bench_threads(args.threads)
    each = _threads_label(threads)
    ort_name = f"onnxruntime ({each})"
    feeds = _random_feeds(model, shapes)
    for name, value in parse_input_args(getattr(args, "input", None)).items():
        if name not in feeds:
            raise CliError(f"--input {name}: not a model input (inputs: {sorted(feeds)})")
        if value.shape != feeds[name].shape or value.dtype != feeds[name].dtype:
            raise CliError(f"--input {name}: expected shape {feeds[name].shape} "
                           f"{feeds[name].dtype}, got {value.shape} {value.dtype}")
        feeds[name] = value
    try:
        ort = compare.ort_runner(model, threads=threads)
    except ImportError:
        raise CliError("the comparison needs onnxruntime (pip install onnxruntime)") from None
    want = ort(feeds)
    runners: dict[str, Any] = {}
    notes: dict[str, str] = {}
    ok = True
    print(title)
    torch_threads = f"; pytorch: torch.set_num_threads({threads})" if args.torch else ""
    print(f"threads: {threads} on every side (tvmpy: TVM_NUM_THREADS={threads}; onnxruntime: "
          f"intra_op_num_threads={threads}{torch_threads})")
    for level in args.opt_levels:
        lib, secs = _compile(model, shapes, level, args.target, f"build opt_level {level}",
                             tuning_log=getattr(args, "tuning_log", None))
        is_vm = not hasattr(lib, "get_graph_json")
        run = _vm_runner(lib) if is_vm else compare.tvm_runner(lib)
        got = run(feeds)
        worst = (0.0, 0.0)
        for g, w in zip(got, want):
            err, rel = compare.errors(g, w)
            worst = max(worst, (rel, err))
            ok &= err <= CHECK_RTOL * float(np.abs(w).max()) + 1e-5
        if is_vm:
            built = f"built for the virtual machine in {secs:.1f} s; {lib.stats}"
        else:
            g = compare.graph_summary(lib)
            built = (f"built in {secs:.1f} s; {g['kernels']} kernels; intermediates "
                     f"{g['planned_bytes'] / 1e6:.1f} MB planned vs "
                     f"{g['naive_bytes'] / 1e6:.1f} MB unshared")
        print(f"  tvmpy opt_level {level}: {built}\n"
              f"    vs onnxruntime: max abs error {worst[1]:.2e}, max rel error {worst[0]:.2e} "
              "(max|a-b| / max|ref|)")
        runners[f"tvmpy opt_level {level} ({each})"] = run
    runners[ort_name] = ort
    if args.torch:
        torch_name = f"pytorch (eager, {each})"
        try:
            import torch

            from ..relay.testing.onnx_torch import torch_runner

            torch.set_num_threads(threads)
            tr = torch_runner(model)
            _, rel = compare.errors(tr(feeds)[0], want[0])
            runners[torch_name] = tr
            print(f"  pytorch eager: max rel error vs onnxruntime {rel:.2e}")
        except ImportError:
            notes[torch_name] = "torch not installed"
        except NotImplementedError as e:
            notes[torch_name] = str(e)[:80]
    print(f"timing: best of {args.repeat} interleaved rounds, batch as given, "
          "inputs fed and outputs fetched in every call")
    times: dict[str, Any] = dict(compare.time_sides(runners, feeds, repeat=args.repeat))
    times.update(notes)
    print(compare.latency_table(times, reference=ort_name))
    if args.profile:
        level = max(args.opt_levels)
        top = runners[f"tvmpy opt_level {level} ({each})"]
        if hasattr(top, "vm"):
            vm_rows = top.vm.profile(number=10, **feeds)
            rows = [{"time": t, "node": k, "shape": ()} for k, t in
                    sorted(vm_rows.items(), key=lambda kv: -kv[1])]
        else:
            rows = top.module.module.profile(number=10).sorted_rows()
        total = sum(r["time"] for r in rows) or 1.0
        what = "segments and kernels" if hasattr(top, "vm") else "kernels"
        print(f"slowest {what} at opt_level {level} (median of 10 runs; {len(rows)} {what}, "
              f"sum {total * 1e3:.2f} ms):")
        for r in rows[:args.profile]:
            shape = f" -> {tuple(r['shape'])}" if r["shape"] else ""
            print(f"  {r['time'] * 1e3:8.3f} ms {r['time'] / total:6.1%}  {r['node']}{shape}")
    if ok:
        print(f"check passed: every tvmpy output is within {CHECK_RTOL:g} x max|output| of "
              "onnxruntime's")
    else:
        print(f"MISMATCH: tvmpy's outputs differ from onnxruntime's by more than {CHECK_RTOL} "
              "relative to the output's scale", file=sys.stderr)
        return 1
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    model = _load_onnx(args.model)
    shapes = _resolve_shapes(model, parse_shape_args(args.input_shape))
    return _bench(model, shapes, args, f"{args.model}: inputs {shapes}")


def _opt_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or any(not 0 <= v <= 3 for v in levels):
        raise argparse.ArgumentTypeError(f"expected opt levels in 0..3 like '0,3', got {text!r}")
    return levels


def _add_timing_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="llvm", help="compilation target (default: llvm, host CPU)")
    p.add_argument("--opt-levels", type=_opt_levels, default=[0, 3],
                   help="opt levels to build and time, comma separated (default: 0,3)")
    p.add_argument("--repeat", type=int, default=5, help="timing rounds (best is reported)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads of every side: tvmpy (TVM_NUM_THREADS), onnxruntime "
                        "(intra_op_num_threads) and pytorch (default: TVM_NUM_THREADS, else "
                        "OMP_NUM_THREADS, else the CPUs this process may run on)")
    p.add_argument("--no-torch", dest="torch", action="store_false",
                   help="leave out the eager PyTorch column")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="list the N slowest kernels of the highest opt level (default 0)")


def add_parser(sub: Any) -> None:
    """Add the ``bench`` command to the ``tvmpy`` parser's subcommands ``sub``."""
    b = sub.add_parser("bench", help="latency of tvmpy (opt 0/3) vs onnxruntime and pytorch")
    b.add_argument("model", help="model.onnx")
    b.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...")
    b.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="an input's value (default: random, floats N(0,1), integers in [0,100))")
    b.add_argument("--tuning-log", metavar="LOG",
                   help="build with the best configs of this AutoTVM log (from `tvmpy tune`)")
    _add_timing_args(b)
    b.set_defaults(func=cmd_bench)
