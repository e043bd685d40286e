"""Tuner curves from a pre-measured table (benchmarking support, ``bench/autotvm_curves.py``).

Comparing tuners by measuring each proposal when the tuner makes it lets machine drift and
one-off noise decide close races: one tuner's configurations are timed in another time window
than the other's, and each only once. Here a fixed sample of a task's configurations is
measured up front, ``R`` times each, in interleaved rounds (every round times every config once,
in a shuffled order), and the tuners then "measure" by looking up the table (each config's
median or fastest repeat):

* :class:`MeasurementTable` - the repeats of each sampled configuration, in an append-only
  JSON-lines file (one line per measurement, flushed at once: a killed run resumes), with the
  per-config median or minimum and the noise (spread of the repeats, per-round slowdowns).
* :class:`TableMeasure` - a ``measure_batch`` for ``Tuner.tune`` that answers from the table.
* :func:`restrict_to_sample` - keeps a tuner inside the sample (the other indices are marked
  visited, so every tuner's own rule "never propose a visited index" applies), and
  :class:`SampleOptimizer` - a model optimizer that ranks every unvisited sampled config.
* :func:`noise_band` / :func:`trials_to_reach` - "reached a target" only beyond the noise.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..autotvm.measure.measure import MeasureErrorNo, MeasureResult
from ..autotvm.tuner.model_based_tuner import CostModel, ModelOptimizer
from ..contrib.utils import open_for_append

__all__ = ["MeasurementTable", "TableMeasure", "restrict_to_sample", "SampleOptimizer",
           "draw_sample", "noise_band", "trials_to_reach", "round_order"]

# More than this many out-of-sample indices are not enumerated (visited set in memory).
_MAX_RESTRICT = 1 << 24


def draw_sample(space_size: int, size: int, seed: int) -> list[int]:
    """A fixed random sample of ``size`` distinct indices of ``range(space_size)`` (sorted);
    the whole range when ``size >= space_size``."""
    if space_size < 1 or size < 1:
        raise ValueError(f"draw_sample: need space_size >= 1 and size >= 1, got {space_size}, "
                         f"{size}")
    if size >= space_size:
        return list(range(space_size))
    rng = np.random.default_rng(seed)
    return sorted(int(i) for i in rng.choice(space_size, size=size, replace=False))


def round_order(indices: Sequence[int], round_no: int, seed: int) -> list[int]:
    """The order in which round ``round_no`` measures ``indices``: a shuffle of its own, so
    slow drift of the machine hits all configurations alike across rounds."""
    rng = np.random.default_rng([int(seed), int(round_no)])
    order = list(indices)
    rng.shuffle(order)
    return order


class MeasurementTable:
    """Repeated measurements of a sample of one task's configurations.

    The file holds a header line ``{"header": {...}}`` (workload, space size, sample, runner
    settings) and then one line per measurement: ``{"i": index, "r": round, "c": seconds}`` or,
    for a failure, ``{"i": index, "r": round, "e": error_no, "m": message}``. A configuration
    that failed in any round counts as failed (its median is None).
    """

    def __init__(self, path: str, header: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.header: dict[str, Any] = {}
        self.costs: dict[int, dict[int, float]] = {}
        self.errors: dict[int, tuple[int, str]] = {}
        if os.path.exists(path) and os.path.getsize(path) > 0:
            self._load()
            if header is not None:
                for key in ("sample", "space_size", "workload"):
                    if key in header and self.header.get(key) != header[key]:
                        raise ValueError(f"{path}: table was made with another {key}; "
                                         f"delete it or use another cache directory")
        else:
            if header is None:
                raise FileNotFoundError(f"no measurement table at {path}")
            self.header = json.loads(json.dumps(dict(header)))  # JSON-normal (lists)
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "w") as f:
                f.write(json.dumps({"header": self.header}) + "\n")

    def _load(self) -> None:
        with open(self.path) as f:
            lines = f.read().splitlines()
        for n, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if n == len(lines) - 1:  # a line cut by a kill: drop it, it is re-measured
                    with open(self.path, "w") as f:
                        f.write("".join(x + "\n" for x in lines[:-1]))
                    break
                raise ValueError(f"{self.path}:{n + 1}: not a JSON line") from None
            if "header" in rec:
                self.header = rec["header"]
            elif "c" in rec:
                self.costs.setdefault(int(rec["i"]), {})[int(rec["r"])] = float(rec["c"])
            else:
                self.errors[int(rec["i"])] = (int(rec["e"]), str(rec.get("m", "")))

    @property
    def sample(self) -> list[int]:
        return [int(i) for i in self.header.get("sample", [])]

    def done(self, index: int, round_no: int) -> bool:
        """Whether ``index`` has its measurement of ``round_no`` (or failed before)."""
        return index in self.errors or round_no in self.costs.get(index, {})

    def add(self, index: int, round_no: int, cost: float | None = None, error_no: int = 0,
            message: str = "") -> None:
        """Record one measurement (``cost`` seconds) or a failure, appended to the file at once."""
        if cost is not None and error_no == 0:
            if not (np.isfinite(cost) and cost > 0):
                raise ValueError(f"cost must be a positive number of seconds, got {cost!r}")
            rec: dict[str, Any] = {"i": int(index), "r": int(round_no), "c": float(cost)}
            self.costs.setdefault(int(index), {})[int(round_no)] = float(cost)
        else:
            if error_no == 0:
                raise ValueError("a measurement needs a cost or an error_no")
            rec = {"i": int(index), "r": int(round_no), "e": int(error_no), "m": message[:200]}
            self.errors[int(index)] = (int(error_no), message[:200])
        with open_for_append(self.path) as f:
            f.write(json.dumps(rec) + "\n")
            f.flush()

    def complete(self, repeats: int) -> bool:
        """Whether every sampled configuration has ``repeats`` rounds (or failed)."""
        return all(all(self.done(i, r) for r in range(repeats)) for i in self.sample)

    def median_costs(self, repeats: int | None = None) -> dict[int, float | None]:
        """Median cost (seconds) of each sampled config over its rounds ``< repeats`` (all
        when None); None for a failed config or one with no measurement yet."""
        return self.costs_by("median", repeats)

    def costs_by(self, stat: str, repeats: int | None = None) -> dict[int, float | None]:
        """Per sampled config the ``"median"`` or the ``"min"`` of its repeats (rounds
        ``< repeats``); None for a failed config or one not measured yet. The minimum suits a
        shared machine: interference only slows a run down, and a loaded time window slows
        every config timed in it."""
        if stat not in ("median", "min"):
            raise ValueError(f"stat must be 'median' or 'min', got {stat!r}")
        f = np.median if stat == "median" else np.min
        out: dict[int, float | None] = {}
        for i in self.sample:
            c = self._repeats(i, repeats)
            out[i] = None if i in self.errors or not c else float(f(c))
        return out

    def _repeats(self, index: int, repeats: int | None) -> list[float]:
        rounds = self.costs.get(index, {})
        return [c for r, c in sorted(rounds.items()) if repeats is None or r < repeats]

    def relative_spreads(self, repeats: int | None = None) -> dict[int, float]:
        """``(max - min) / median`` of the repeats of each config measured at least twice."""
        out = {}
        for i in self.sample:
            c = self._repeats(i, repeats)
            if i not in self.errors and len(c) >= 2:
                out[i] = float((max(c) - min(c)) / np.median(c))
        return out

    def noise(self, repeats: int | None = None) -> dict[str, Any]:
        """Noise of the repeats across configs: ``median``, ``p75``, ``p90`` of the relative
        spreads; ``fastest_two``: median of ``(second fastest - fastest) / fastest`` (the
        uncertainty of the minimum); ``round_slowdown``: per round, the median over configs
        of ``cost / the config's fastest repeat`` (a loaded time window shows as a round well
        above 1)."""
        s = np.array(list(self.relative_spreads(repeats).values()))
        if s.size == 0:
            nan = float("nan")
            return {"median": nan, "p75": nan, "p90": nan, "fastest_two": nan,
                    "round_slowdown": [], "n": 0}
        two, per_round = [], {}
        for i in self.sample:
            rounds = {r: c for r, c in self.costs.get(i, {}).items()
                      if repeats is None or r < repeats}
            if i in self.errors or len(rounds) < 2:
                continue
            fast = sorted(rounds.values())
            two.append((fast[1] - fast[0]) / fast[0])
            for r, c in rounds.items():
                per_round.setdefault(r, []).append(c / fast[0])
        return {"median": float(np.median(s)), "p75": float(np.percentile(s, 75)),
                "p90": float(np.percentile(s, 90)), "fastest_two": float(np.median(two)),
                "round_slowdown": [float(np.median(per_round[r])) for r in sorted(per_round)],
                "n": int(s.size)}


class TableMeasure:
    """``measure_batch`` answering from a table of costs.

    ``costs`` maps a configuration index to its cost in seconds (the median or the fastest of
    its repeats, :meth:`MeasurementTable.costs_by`), or None for a config
    that failed (answered with ``RUNTIME_DEVICE``). An index outside the table is an error: the
    tuner must be restricted to the sample (:func:`restrict_to_sample`). ``proposed`` lists the
    indices asked for, in order.
    """

    def __init__(self, costs: Mapping[int, float | None], n_parallel: int = 8) -> None:
        self.costs = dict(costs)
        self.n_parallel = int(n_parallel)
        self.proposed: list[int] = []

    def __call__(self, inputs: Sequence[Any]) -> list[MeasureResult]:
        out = []
        for inp in inputs:
            index = int(inp.config.index)
            if index not in self.costs:
                raise KeyError(f"config {index} is not in the measured table (restrict the "
                               f"tuner to the sample)")
            self.proposed.append(index)
            cost = self.costs[index]
            if cost is None:
                out.append(MeasureResult(("failed in the table",),
                                         int(MeasureErrorNo.RUNTIME_DEVICE), 0.0, 0.0))
            else:
                out.append(MeasureResult((cost,), int(MeasureErrorNo.NO_ERROR), 0.0, 0.0))
        return out


def restrict_to_sample(tuner: Any, sample: Iterable[int]) -> None:
    """Keep ``tuner`` inside ``sample``: every other index of its space is marked visited, so
    no tuner proposes it (their common rule). Call before ``load_history`` and ``tune``."""
    size = len(tuner.space)
    keep = {int(i) for i in sample}
    if not keep or min(keep) < 0 or max(keep) >= size:
        raise ValueError(f"sample must be non-empty indices of a space of {size}")
    if size - len(keep) > _MAX_RESTRICT:
        raise ValueError(f"space of {size} too large to restrict by enumeration")
    tuner.visited.update(i for i in range(size) if i not in keep)


class SampleOptimizer(ModelOptimizer):
    """Ranks every candidate index with the cost model and returns the best unvisited ones.

    Used instead of simulated annealing when the tuner is restricted to a sample: a random
    sample is not a product of knob ranges, so SA's one-knob moves mostly leave it; over a few
    hundred candidates an exhaustive ranking is what SA approximates."""

    def __init__(self, candidates: Iterable[int]) -> None:
        self.candidates = [int(i) for i in candidates]

    def find_maximums(self, model: CostModel, num: int, exclusive: set[int]) -> list[int]:
        todo = [i for i in self.candidates if i not in exclusive]
        if not todo or num <= 0:
            return []
        scores = np.asarray(model.predict(todo), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")[: int(num)]
        return [todo[int(k)] for k in order]


def noise_band(target: float, rel_noise: float) -> float:
    """Tolerance below ``target`` within which a best value counts as reaching it:
    ``target * rel_noise`` (``rel_noise`` e.g. the median relative spread of the repeats)."""
    if not rel_noise >= 0:
        raise ValueError(f"rel_noise must be >= 0, got {rel_noise!r}")
    return float(target) * float(rel_noise)


def trials_to_reach(curve: Sequence[float], target: float, band: float = 0.0) -> int | None:
    """First trial (1-based) at which the best-so-far ``curve`` is ``>= target - band``;
    None if never."""
    for k, v in enumerate(curve):
        if v >= target - band:
            return k + 1
    return None
