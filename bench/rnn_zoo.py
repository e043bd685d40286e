"""The zoo's recurrent models (lstm_lm, gru_lm, bilstm_tagger at their real sizes: vocab 10000,
embedding 256, 2 layers of hidden 256, 32 steps, batch 1) vs onnxruntime, same run, with the
graph executor's per-node profile: how many kernels, where the time goes.

    TVM_NUM_THREADS=1 PYTHONPATH=. python bench/rnn_zoo.py --threads 1 --cpu-time
    PYTHONPATH=. python bench/rnn_zoo.py --threads 2

Rounds: ``--rounds`` interleaved rounds (bench/common.interleaved_samples), inputs fed and
outputs fetched on both sides; ``--cpu-time`` (one thread only) times them in process CPU time,
which the preemption of a loaded machine does not inflate. Ratio: tvmpy over onnxruntime, best
round over best round, and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    bench_threads,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    zoo_model,
)

ensure_native_blas()

import numpy as np  # noqa: E402

MODELS = ("lstm_lm", "gru_lm", "bilstm_tagger")


def _profile(run: object, top: int) -> str:
    prof = run.module.module.profile(number=20)  # type: ignore[attr-defined]
    rows = prof.sorted_rows()
    total = sum(r["time"] for r in rows) or 1.0
    lines = [f"  kernels: {len(rows)}, sum {total * 1e3:.3f} ms"]
    for r in rows[:top]:
        lines.append(f"  {r['time'] * 1e3:7.3f} ms {r['time'] / total:5.1%}  {r['node']}  "
                     f"-> {tuple(r['shape'])}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--profile", type=int, default=6)
    p.add_argument("--cpu-time", action="store_true")
    a = p.parse_args()
    threads = bench_threads(a.threads)
    clock = bench_clock(a.cpu_time, threads)

    from tvmpy.relay.testing import compare, zoo

    print(f"# {machine_description()}; {threads} thread(s); {a.rounds} rounds; "
          f"{'CPU' if a.cpu_time else 'wall'} time; load {os.getloadavg()[0]:.1f}")
    rows = []
    for name in a.models.split(","):
        z = zoo_model(name)
        model, feeds = z.model, z.feeds
        lib, secs = compare.build(z.mod, z.params, opt_level=3)
        run = compare.tvm_runner(lib)
        ort = compare.ort_runner(model, threads=threads)
        zoo.assert_close(run(feeds), ort(feeds), name)
        s = interleaved_samples({"tvmpy": lambda r=run, f=feeds: r(f),
                                 "ort": lambda o=ort, f=feeds: o(f)},
                                a.rounds, pause=0.2, target_s=0.05, clock=clock)
        ratios = sorted(x / y for x, y in zip(s["tvmpy"], s["ort"]))
        tv, ot = min(s["tvmpy"]), min(s["ort"])
        rows.append((name, tv, ot, tv / ot, float(np.median(ratios))))
        print(f"{name}: build {secs:.1f} s, tvmpy {tv * 1e3:.2f} ms, onnxruntime {ot * 1e3:.2f} "
              f"ms, ratio {tv / ot:.2f} (median round {np.median(ratios):.2f}, "
              f"{ratios[0]:.2f}-{ratios[-1]:.2f})", flush=True)
        if a.profile:
            print(_profile(run, a.profile), flush=True)
    print(f"\n| model | tvmpy (ms) | onnxruntime (ms) | best | median round |  ({threads} "
          f"thread(s))\n|---|---|---|---|---|")
    for name, tv, ot, r, m in rows:
        print(f"| {name} | {tv * 1e3:.2f} | {ot * 1e3:.2f} | {r:.2f} | {m:.2f} |")


if __name__ == "__main__":
    main()
