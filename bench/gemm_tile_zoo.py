"""Zoo models with the matmul / attention register tile at 8 rows (``tile_rows`` as before
2026-11-30: one 512-bit FMA unit assumed) and at the default of this host (12 rows on AVX-512
cores with two FMA units), both builds and onnxruntime in one process, interleaved rounds
(bench/common.interleaved_samples) timed in process CPU time at 1 thread, wall time at more
(``--threads``), inputs fed and outputs fetched on every side.

    PYTHONPATH=. python bench/gemm_tile_zoo.py [--models bert,t5_encoder,...] [--rounds 9] \
        [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
_THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
os.environ["TVM_NUM_THREADS"] = str(_THREADS)  # (read once, at the runtime's first use)
os.environ.setdefault("TVMPY_CACHE", "0")
from common import bench_clock, ensure_native_blas, interleaved_samples  # noqa: E402

ensure_native_blas()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bert,t5_encoder,vit")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1, help="1: CPU time; more: wall time")
    args = ap.parse_args()
    import tvmpy.topi.x86.dense as dense
    from tvmpy.relay.testing import compare, zoo

    default = dense._fma512_units
    print("| model | 8 rows ms | default ms | ORT ms | default/8 (min) | default/8 (median "
          "of rounds) | 8/ORT | default/ORT |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.models.split(","):
        entry = zoo.MODELS[name]
        spec = entry("real")
        model = zoo.to_onnx(spec)
        feeds = spec.feeds(seed=1)
        mod, params = zoo.from_onnx(model, spec)
        built = {}
        for mode in ("8", "default"):
            if mode == "8":
                dense._fma512_units = lambda: 1  # type: ignore[assignment]
            try:
                built[mode] = zoo.build(mod, params, vm=entry.vm)
            finally:
                dense._fma512_units = default  # type: ignore[assignment]
        ort = compare.ort_runner(model, threads=args.threads)
        ref = ort(feeds)
        for b in built.values():
            zoo.assert_close(b.run(feeds), ref, name)
        sides = {m: (lambda b=b, f=feeds: b.run(f)) for m, b in built.items()}
        sides["ORT"] = lambda o=ort, f=feeds: o(f)
        t = interleaved_samples(sides, args.rounds, pause=0.3, target_s=0.1,
                                clock=bench_clock(args.threads == 1, args.threads))
        ms = {k: min(v) * 1e3 for k, v in t.items()}
        per = sorted(a / b for a, b in zip(t["default"], t["8"]))
        print(f"| {name} | {ms['8']:.2f} | {ms['default']:.2f} | {ms['ORT']:.2f} | "
              f"{ms['default'] / ms['8']:.3f} | {per[len(per) // 2]:.3f} "
              f"({per[0]:.2f}-{per[-1]:.2f}) | {ms['8'] / ms['ORT']:.2f} | "
              f"{ms['default'] / ms['ORT']:.2f} |", flush=True)
    print(f"# {args.threads} thread(s), load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
