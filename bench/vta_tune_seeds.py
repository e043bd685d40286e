"""Issue 27 point 5(c) over several seeds: merge the per-seed rows that ``bench/vta_tune.py``
prints (one run, or several runs of ``--tuners``/``--seeds`` subsets side by side), give the
speedup over the untuned default per layer and tuner as mean ± standard deviation [min, max]
over the seeds, and plot per layer best cycles (relative to the default) after 1 / 5 / 10 / all
trials: the mean of the seeds and the worst seed, per tuner.

    PYTHONPATH=. python bench/vta_tune_seeds.py out1.txt [out2.txt ...]
        [--png bench/vta_tune_seeds_{layer}.png]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ROW = re.compile(r"^\| (C\d+) \| \d+ \| ([\d,]+) \| (\w+) \| (\d+) \| ([\d,]+) / ([\d,]+) / "
                 r"([\d,]+) \| [\d.]+x \| (\d+) \|")


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def read_rows(paths: list[str]) -> dict[tuple[str, str], dict[int, tuple[float, ...]]]:
    """{(layer, tuner): {seed: (default, best@5, best@10, best@all)}}; a seed seen twice keeps
    its first row (the runs are deterministic per seed)."""
    out: dict[tuple[str, str], dict[int, tuple[float, ...]]] = collections.defaultdict(dict)
    for path in paths:
        with open(path) as f:
            for line in f:
                m = ROW.match(line.strip())
                if m:
                    layer, base, tuner, seed = m.group(1), _num(m.group(2)), m.group(3), int(
                        m.group(4))
                    pts = tuple(_num(m.group(k)) for k in (5, 6, 7))
                    out[(layer, tuner)].setdefault(seed, (base, *pts))
    return out


def _stats(xs: list[float]) -> str:
    a = np.asarray(xs, dtype=float)
    sd = a.std(ddof=1) if len(a) > 1 else 0.0
    return f"{a.mean():.2f} ± {sd:.2f} [{a.min():.2f}, {a.max():.2f}]"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("outputs", nargs="+")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--png", default="bench/vta_tune_seeds_{layer}.png")
    args = ap.parse_args()
    rows = read_rows(args.outputs)
    if not rows:
        print("no vta_tune.py rows found", file=sys.stderr)
        return 1
    print("| layer | tuner | seeds | speedup over the default after 5 trials | after 10 | "
          f"after {args.trials} |")
    print("|---|---|---|---|---|---|")
    from vta_plot import plot

    series: dict[str, list] = collections.defaultdict(list)
    xs = [1, 5, 10, args.trials]
    for (layer, tuner), per_seed in sorted(rows.items()):
        vals = list(per_seed.values())
        speed = [[v[0] / v[k] for v in vals] for k in (1, 2, 3)]
        print(f"| {layer} | {tuner} | {sorted(per_seed)} | {_stats(speed[0])} | "
              f"{_stats(speed[1])} | {_stats(speed[2])} |")
        rel = np.asarray([[1.0] + [v[k] / v[0] for k in (1, 2, 3)] for v in vals])
        series[layer].append((f"{tuner} mean of {len(vals)} seeds", xs,
                              list(rel.mean(axis=0)), "line"))
        series[layer].append((f"{tuner} worst seed", xs, list(rel.max(axis=0)), "line"))
    for layer, ss in series.items():
        ss.append(("untuned default", [1, args.trials], [1.0, 1.0], "line"))
        png = args.png.format(layer=layer)
        how = plot(png, ss, f"AutoTVM on VTA conv2d {layer}: best cycles / default vs trials",
                   "trials", "best cycles / default (lower is better)")
        print(f"wrote {png} ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
