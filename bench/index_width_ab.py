"""i32 vs i64 element indices in the LLVM code generator (codegen/llvm_codegen.py
``WIDE_INDEX``), same run: whole zoo models (relay.build opt_level 3, untuned defaults, graph
executor, 1 thread, process CPU time, interleaved rounds) built both ways in one process with
the kernel cache off; ratio i64 / i32 per model (median of per-round ratios, min-max) and
whether the outputs agree, and the build's CPU seconds each way.

Usage: ``TVMPY_CACHE=0 TVM_NUM_THREADS=1 env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=. python
bench/index_width_ab.py --models resnet18,mobilenet_v3_small,bert --rounds 7``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import interleaved_samples  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,mobilenet_v3_small,bert")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--size", default="real")
    a = ap.parse_args()
    if os.environ.get("TVMPY_CACHE") != "0" or os.environ.get("TVM_NUM_THREADS") != "1":
        raise SystemExit("run with TVMPY_CACHE=0 TVM_NUM_THREADS=1 (see the docstring)")
    from tvmpy.codegen import llvm_codegen as C
    from tvmpy.relay.testing import zoo

    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
          f"{os.getloadavg()[0]:.1f}")
    for name in a.models.split(","):
        entry = zoo.MODELS[name]
        spec = entry(a.size)
        model = zoo.to_onnx(spec)
        feeds = spec.feeds(seed=1)
        built, cpu = {}, {}
        for wide in (False, True):
            C.WIDE_INDEX = wide
            mod, params = zoo.from_onnx(model, spec)
            c0 = time.process_time()
            built[wide] = zoo.build(mod, params, vm=entry.vm)
            cpu[wide] = time.process_time() - c0
        C.WIDE_INDEX = True
        outs = {w: built[w].run(feeds) for w in built}
        same = all(np.allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-4)
                   for x, y in zip(outs[False], outs[True]))
        s = interleaved_samples({"i32": lambda b=built[False], f=feeds: b.run(f),
                                 "i64": lambda b=built[True], f=feeds: b.run(f)}, a.rounds,
                                clock=time.process_time)
        r = [y / x for x, y in zip(s["i32"], s["i64"])]
        print(f"{name:20s} i32 best {1e3 * min(s['i32']):8.2f} ms  i64 best {1e3 * min(s['i64']):8.2f}"
              f" ms  i64/i32 median x{statistics.median(r):.3f} ({min(r):.2f}-{max(r):.2f})  "
              f"build CPU i32 {cpu[False]:.1f} s, i64 {cpu[True]:.1f} s  outputs "
              f"{'agree' if same else 'DIFFER'}", flush=True)


if __name__ == "__main__":
    main()
