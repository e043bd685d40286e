"""Where the build of the ShuffleNet-style shuffle chain (issue 25 point 2) spends its time.

    PYTHONPATH=. python bench/chain_build.py [--stages 200] [--llvm-passes] [--workers N]

Builds ``tests/relay/test_build_shared_values.py``'s chain (channel split, both halves read,
concat, channel shuffle per stage; opt_level 3, target ``llvm``) in this process with one build
worker and the kernel cache off, checks the output against numpy, and prints the CPU seconds of
each phase: relay optimization, TE lowering of the fused groups (schedule, inlining, bound
inference), the tir pipeline per pass, LLVM's O3 pipeline and LLVM's object emission.
``--workers N`` (N > 1): the kernels are compiled in N worker processes instead (the default
build); the phases are then not split, the wall time and the CPU seconds of this process and
of its finished workers are printed. ``--llvm-passes``: also LLVM's own pass timings (the slowest ten). The kernel sizes (tir nodes,
LLVM IR lines) are printed per kernel: the chain's code must stay linear in the stages.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules)

_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "relay")


def _timed(acc: dict, key: str, fn):
    def wrapper(*args, **kwargs):
        t0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[key] += time.process_time() - t0
    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", type=int, default=200)
    ap.add_argument("--llvm-passes", action="store_true")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, _TESTS)
    import numpy as np
    from test_build_shared_values import _ir_size, _shuffle_chain, _shuffle_chain_ref

    import tvmpy as tvm
    from tvmpy import config, driver, relay
    from tvmpy.codegen import llvm as cg_llvm
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.backend import te_compiler
    from tvmpy.transform import instrument

    acc: dict = collections.defaultdict(float)
    te_compiler.lower_primitive = _timed(acc, "te lowering", te_compiler.lower_primitive)
    driver.lower_primfunc = _timed(acc, "tir pipeline", driver.lower_primfunc)
    cg_llvm._optimize = _timed(acc, "llvm O3", cg_llvm._optimize)
    passes: dict = collections.defaultdict(float)
    run = instrument.PassTrace.run

    def traced(self: Any, p: Any, mod: Any) -> Any:
        t0 = time.process_time()
        try:
            return run(self, p, mod)
        finally:
            if self.label.startswith("tir "):
                passes[p.name] += time.process_time() - t0
    instrument.PassTrace.run = traced
    if args.llvm_passes:
        import llvmlite.binding as llvm

        llvm.set_time_passes(True)
    mod = _shuffle_chain(args.stages)
    c0, t0 = time.process_time(), time.perf_counter()
    import resource

    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with config.config(CACHE=0, BUILD_WORKERS=args.workers), \
            tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    kids = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    xv = np.random.default_rng(5).uniform(-2.0, 2.0, (1, 8, 3, 5)).astype("float32")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=xv)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), _shuffle_chain_ref(xv, args.stages),
                               rtol=1e-5, atol=1e-5)
    if args.workers != 1:
        print(f"# {args.stages}-stage shuffle chain, {args.workers} build workers, cache off: "
              f"wall {wall:.2f} s, CPU {cpu:.2f} s (this process) + {kids:.2f} s (workers), "
              f"{len(lib.lowered_funcs)} kernels (matches numpy)")
        return
    print(f"# {args.stages}-stage shuffle chain, in-process, 1 worker, cache off: wall "
          f"{wall:.2f} s, CPU {cpu:.2f} s, {len(lib.lowered_funcs)} kernels (matches numpy)")
    other = cpu - sum(acc.values())
    for k, v in [*acc.items(), ("rest (relay passes, LLVM codegen + emit, link)", other)]:
        print(f"{k:<48}{v:8.2f} s {100 * v / cpu:5.1f}%")
    print("# tir passes (all kernels):")
    for k, v in sorted(passes.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {k:<46}{v:8.2f} s")
    nodes = json.loads(lib.graph_json)["nodes"]
    calls = sum(1 for n in nodes if n["op"] == "tvm_op")
    print(f"# {calls} fused calls, {len(lib.lowered_funcs)} distinct kernels compiled (identical "
          "groups are compiled once); tir nodes per kernel:")
    for f in lib.lowered_funcs:
        print(f"  {f.name[:60]:<62}{_ir_size(f.body):>8}")
    if args.llvm_passes:
        import llvmlite.binding as llvm

        rep = llvm.report_and_reset_timings()
        print("\n".join(rep.splitlines()[:16]))


if __name__ == "__main__":
    main()
