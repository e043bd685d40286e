"""Search policies (TVM's ``auto_scheduler.search_policy``).

``SketchPolicy``: Ansor's search. Each round samples random annotations of the sketches,
adds the best measured states, evolves them under the cost model (:mod:`.evolution`) and
measures the best-scored unmeasured states, an ``eps_greedy`` share of them replaced by random
samples; the model is retrained on every measurement. On CPU targets the analytic states of
:mod:`.analytic_init` (register-blocked tiles from the target's vector width and register
file) are measured first and stay parents of every population. ``RandomSearch``: random annotations
only (the baseline the evolution must beat). ``EmptyPolicy``: measures nothing.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from typing import Any

from . import sketch_policy as sketch_policy_module
from .analytic_init import analytic_states
from .cost_model import CostModel, RandomModel, XGBModel
from .evolution import evolutionary_search, state_key
from .loop_state import State
from .measure import MeasureInput, MeasureResult, ProgramMeasurer
from .search_task import TuningOptions
from .sketch_policy import generate_sketches, policy_for_target, sample_initial_population

__all__ = ["SearchPolicy", "SketchPolicy", "RandomSearch", "EmptyPolicy"]


def _mean(res: MeasureResult) -> float:
    return sum(res.costs) / len(res.costs) if res.error_no == 0 and res.costs else math.inf


class SearchPolicy:
    """What the policies share: the measured states, the best one, the search loop."""

    def __init__(self, task: Any, seed: int | None = None, verbose: int = 1):
        self.task = task
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.sketches: list[State] | None = None
        self.measured: set[str] = set()
        self.measured_states: list[tuple[float, State]] = []
        self.best_state: State | None = None
        self.best_cost = math.inf
        self.build_times: list[float] = []
        self.trials = 0
        self.best_ct = 0  # the trial count at which the best state was found

    def _sketches(self) -> list[State]:
        if self.sketches is None:
            self.sketches = generate_sketches(self.task)
        return self.sketches

    def next_batch(self, n: int) -> list[State]:
        raise NotImplementedError

    def record(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Take measurements in (this policy's, or a log's when resuming)."""
        for inp, res in zip(inputs, results):
            self.measured.add(state_key(inp.state))
            self.trials += 1
            c = _mean(res)
            if math.isfinite(c):
                self.measured_states.append((c, inp.state))
                if c < self.best_cost:
                    self.best_cost, self.best_state, self.best_ct = c, inp.state, self.trials

    def continue_search_one_round(self, num_measure: int, measurer: ProgramMeasurer
                                  ) -> tuple[list[MeasureInput], list[MeasureResult]]:
        """Measure up to ``num_measure`` new states (none when the space is exhausted)."""
        cands = self.next_batch(num_measure)
        if not cands:
            return [], []
        results = measurer.measure(self, cands)
        inputs = [MeasureInput(self.task, s) for s in cands]
        self.record(inputs, results)
        self.on_measured(inputs, results)
        return inputs, results

    def on_measured(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        pass

    def search(self, options: TuningOptions) -> State | None:
        """Measure ``options.num_measure_trials`` states in rounds; the best state."""
        if options.num_measure_trials <= 0:
            return self.best_state
        measurer = ProgramMeasurer(self.task, options.builder, options.runner,
                                   options.measure_callbacks, verbose=options.verbose)
        done, stale = 0, 0
        try:
            while done < options.num_measure_trials:
                want = min(options.num_measures_per_round, options.num_measure_trials - done)
                inputs, _ = self.continue_search_one_round(want, measurer)
                if not inputs:
                    stale += 1
                    if stale > 2:
                        break  # the space is exhausted
                    continue
                done += len(inputs)
                if options.early_stopping is not None and options.early_stopping >= 0 \
                        and self.trials - self.best_ct >= options.early_stopping:
                    if self.verbose:
                        print(f"{type(self).__name__}: early stopping after {self.trials} trials")
                    break
        finally:
            self.build_times += measurer.build_times
            measurer.close()
        if self.verbose and self.build_times:
            print(f"{type(self).__name__}: {self.trials} trials, best "
                  f"{self.best_cost * 1e3:.4g} ms, median build "
                  f"{statistics.median(self.build_times):.3f} s")
        return self.best_state

    def _random_unmeasured(self, n: int, exclude: set[str]) -> list[State]:
        out = []
        for s in sample_initial_population(self.task, n * 2, self.rng.randrange(1 << 30),
                                           self._sketches()):
            k = state_key(s)
            if k not in self.measured and k not in exclude:
                exclude.add(k)
                out.append(s)
            if len(out) >= n:
                break
        return out


class RandomSearch(SearchPolicy):
    """Measure distinct random annotations of the task's sketches."""

    def next_batch(self, n: int) -> list[State]:
        return self._random_unmeasured(n, set())


class EmptyPolicy(SearchPolicy):
    """TVM's ``EmptyPolicy``: measures nothing (the task's default schedule stays)."""

    def next_batch(self, n: int) -> list[State]:
        return []


class SketchPolicy(SearchPolicy):
    """Ansor's policy: sketches, random annotation, evolutionary search over the cost model.

    ``params`` (TVM's names; defaults scaled to a 2-core machine: TVM's population is 2048 and
    its iterations 4): ``eps_greedy``, ``sample_init_min_population``,
    ``sample_init_use_measured_ratio``, ``evolutionary_search_population``,
    ``evolutionary_search_num_iters``, ``evolutionary_search_mutation_prob``."""

    DEFAULT_PARAMS: dict[str, Any] = {
        "eps_greedy": 0.05,
        "retry_search_one_round_on_empty": 1,
        "sample_init_min_population": 50,
        "sample_init_use_measured_ratio": 0.2,
        "evolutionary_search_population": 256,
        "evolutionary_search_num_iters": 3,
        "evolutionary_search_mutation_prob": 0.85,
        "analytic_init": 1,
    }

    def __init__(self, task: Any, program_cost_model: CostModel | None = None,
                 params: dict | None = None, seed: int | None = None, verbose: int = 1,
                 init_search_callbacks: Any = None):
        super().__init__(task, seed, verbose)
        unknown = set(params or {}) - set(self.DEFAULT_PARAMS)
        if unknown:
            raise ValueError(f"SketchPolicy: unknown params {sorted(unknown)}; known: "
                             f"{sorted(self.DEFAULT_PARAMS)}")
        self.params = {**self.DEFAULT_PARAMS, **(params or {})}
        self.model = program_cost_model if program_cost_model is not None else XGBModel(seed=seed)
        self._analytic: list[State] | None = None
        for cb in init_search_callbacks or ():
            cb(self)

    def generate_sketches(self, print_for_debug: bool = False) -> list[State]:
        sk = self._sketches()
        if print_for_debug:
            for s in sk:
                print(s, "\n")
        return sk

    def sample_initial_population(self) -> list[State]:
        return sample_initial_population(self.task, int(self.params["sample_init_min_population"]),
                                         self.rng.randrange(1 << 30), self._sketches())

    def analytic_states(self) -> list[State]:
        """The analytic initial states of the task's sketches (none with ``analytic_init=0``
        or a target whose policy is not the CPU one)."""
        if self._analytic is None:
            self._analytic = []
            if int(self.params["analytic_init"]) and \
                    policy_for_target(self.task.target) is sketch_policy_module:
                self._analytic = analytic_states(self.task, self._sketches())
        return self._analytic

    def on_measured(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        self.model.update(inputs, results)

    def next_batch(self, n: int) -> list[State]:
        p = self.params
        for _ in range(1 + int(p["retry_search_one_round_on_empty"])):
            seeds = [s for s in self.analytic_states() if state_key(s) not in self.measured]
            init = [s for s in self.sample_initial_population() if state_key(s) not in self.measured]
            if isinstance(self.model, RandomModel) or not self.measured_states:
                best: list[State] = init  # nothing learned yet: random states
            else:
                n_measured = max(1, int(len(init) * p["sample_init_use_measured_ratio"]))
                top = [s for _, s in sorted(self.measured_states, key=lambda x: x[0])[:n_measured]]
                best = evolutionary_search(
                    top + [s for _, s in self._analytic_measured()] + init,
                    lambda ss: self.model.predict(self.task, ss), n * 2, self.rng,
                    self.task.hardware_params, self.measured,
                    population=int(p["evolutionary_search_population"]),
                    num_iters=int(p["evolutionary_search_num_iters"]),
                    mutation_prob=float(p["evolutionary_search_mutation_prob"]))
            # eps-greedy: the best-scored, and some random states
            n_random = max(0, min(n, int(round(n * p["eps_greedy"]))))
            picked: list[State] = []
            keys: set[str] = set()
            for s in seeds:  # unmeasured analytic states first (the first batch)
                if len(picked) < n:
                    keys.add(state_key(s))
                    picked.append(s)
            for s in best:
                if len(picked) >= n - n_random:
                    break
                k = state_key(s)
                if k not in self.measured and k not in keys:
                    keys.add(k)
                    picked.append(s)
            picked += self._random_unmeasured(n - len(picked), keys)
            if picked:
                return picked
        return []

    def _analytic_measured(self) -> list[tuple[float, State]]:
        """The measured analytic states (cost, state): parents of every population, so the
        evolution mutates from them even when random states crowd the measured top."""
        keys = {state_key(s) for s in self.analytic_states()}
        return [(c, s) for c, s in self.measured_states if state_key(s) in keys]
