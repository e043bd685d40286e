"""``RandomSearch``: the first end-to-end search: random annotations of the sketches,
measured in batches (the evolutionary search over a learned cost model replaces the sampling
later; the measurement, logging and best-state tracking stay)."""

from __future__ import annotations

import random
import statistics
from typing import Any

from .loop_state import State
from .measure import ProgramMeasurer
from .search_task import TuningOptions
from .sketch_policy import generate_sketches, sample_initial_population

__all__ = ["RandomSearch"]


class RandomSearch:
    """Measure ``num_measure_trials`` distinct random states of ``task``'s sketches."""

    def __init__(self, task: Any, seed: int | None = None, verbose: int = 1):
        self.task = task
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.sketches: list[State] | None = None
        self.measured: set[str] = set()
        self.best_state: State | None = None
        self.best_cost = float("inf")
        self.build_times: list[float] = []

    def search(self, options: TuningOptions) -> State | None:
        if options.num_measure_trials <= 0:
            return None
        if self.sketches is None:
            self.sketches = generate_sketches(self.task)
        measurer = ProgramMeasurer(self.task, options.builder, options.runner,
                                   options.measure_callbacks, verbose=options.verbose)
        try:
            trials, stale = 0, 0
            while trials < options.num_measure_trials:
                want = min(options.num_measures_per_round, options.num_measure_trials - trials)
                cands = [s for s in sample_initial_population(
                    self.task, want * 2, self.rng.randrange(1 << 30), self.sketches)
                    if self._key(s) not in self.measured][:want]
                if not cands:
                    stale += 1
                    if stale > 3:
                        break  # the space is exhausted
                    continue
                for s in cands:
                    self.measured.add(self._key(s))
                results = measurer.measure(self, cands)
                trials += len(cands)
                for s, r in zip(cands, results):
                    if r.error_no == 0:
                        c = sum(r.costs) / len(r.costs)
                        if c < self.best_cost:
                            self.best_cost, self.best_state = c, s
        finally:
            self.build_times += measurer.build_times
            measurer.close()
        if self.verbose and self.build_times:
            print(f"RandomSearch: {trials} trials, best {self.best_cost * 1e3:.4g} ms, "
                  f"median build {statistics.median(self.build_times):.3f} s")
        return self.best_state

    @staticmethod
    def _key(s: State) -> str:
        return repr([x.to_record() for x in s.transform_steps])
