"""XGBoost cost model (TVM's autotvm.tuner.xgboost_cost_model).

Gradient-boosted trees over features of a configuration, trained with a ranking objective
(``rank:pairwise``: only the order of the measured throughputs is learned) or a regression one.

Feature types: ``"itervar"`` (:func:`tvmpy.autotvm.feature.get_itervar_feature_flatten` of the
instantiated schedule), ``"curve"`` (:func:`~tvmpy.autotvm.feature.get_curve_feature`) and
``"knob"`` (``config.get_flatten_feature()``). Features are cached per configuration index. A
configuration whose template fails to instantiate gets a zero row and is flagged: it is left out
of training and predicted :data:`FAILED_SCORE` (the optimizer never proposes it).

Training uses up to ``num_boost_round`` rounds and stops early when the top-``plan_size``
recall on the training set (checked every 5 rounds) has not improved for
``early_stopping_rounds`` rounds (TVM's ``tr-a-recall@k``). ``fit_log`` trains on records of
other tasks (one ranking group per task; the knob features of other tasks do not match, so
``"knob"`` uses only this task's records), for transfer learning: such a model is loaded as the
base model, whose margin is the starting prediction of the model trained later on this task's
measurements.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .. import feature as _feature
from .model_based_tuner import CostModel
from .tuner import result_flops, same_task

logger = logging.getLogger("autotvm")

__all__ = ["XGBoostCostModel", "FAILED_SCORE"]

FAILED_SCORE = -1e9
FEATURE_TYPES = ("itervar", "knob", "curve")
LOSS_TYPES = ("rank", "reg")
_MIN_POOL_BATCH = 16  # fewer new configs than this: extracted in this process


def _xgb() -> Any:
    try:
        import xgboost
    except ImportError as err:  # pragma: no cover - dependency is declared
        raise ImportError("XGBoostCostModel needs xgboost: pip install xgboost-cpu") from err
    return xgboost


def extract_feature(task: Any, config: Any, feature_type: str) -> np.ndarray | None:
    """Feature vector of ``config`` of ``task`` (None when the template fails)."""
    if feature_type == "knob":
        return np.asarray(config.get_flatten_feature(), dtype=np.float32)
    try:
        sch, args = task.instantiate(config)
        if feature_type == "itervar":
            return _feature.get_itervar_feature_flatten(sch, args, take_log=True)
        return _feature.get_curve_feature(sch, args)
    except Exception as err:  # noqa: BLE001 - any template error means "no features"
        logger.debug("feature extraction of config %s failed: %s", getattr(config, "index", "?"),
                     err)
        return None


# features of other tasks' records (transfer learning): whole-model tuning trains each task's
# model on the records of every task tuned before it, so the same records come back task after
# task; extracting them again cost ~15 ms each (a conv2d config) -- minutes per task late in a
# ResNet-18 run. Keyed by (workload, config index, feature type); bounded.
_HISTORY_FEATURES: dict[tuple, np.ndarray | None] = {}
_HISTORY_FEATURES_MAX = 50000


def history_feature(task: Any, config: Any, feature_type: str) -> np.ndarray | None:
    """:func:`extract_feature` of a record of another task, cached for the process."""
    key = (repr(getattr(task, "workload", id(task))), str(getattr(task, "target", "")),
           int(config.index), feature_type)
    if key not in _HISTORY_FEATURES:
        if len(_HISTORY_FEATURES) >= _HISTORY_FEATURES_MAX:
            _HISTORY_FEATURES.clear()
        _HISTORY_FEATURES[key] = extract_feature(task, config, feature_type)
    return _HISTORY_FEATURES[key]


_POOL_TASK: Any = None
_POOL_TYPE = "itervar"


def _pool_extract(index: int) -> np.ndarray | None:
    return extract_feature(_POOL_TASK, _POOL_TASK.config_space.get(index), _POOL_TYPE)


class XGBoostCostModel(CostModel):
    """Parameters
    ----------
    task : autotvm.task.Task
    feature_type : "itervar" | "knob" | "curve"
    loss_type : "rank" | "reg"
    num_threads : int or None
        XGBoost threads, and the worker processes that extract features of new configs (None:
        the machine's CPU count, as TVM; 1: everything in this process). Itervar/curve features
        lower every config (tens to hundreds of ms each in Python), and the simulated annealing
        of each planning round asks for thousands: the workers are forked once, when first
        needed, and kept until :meth:`close` (the tuner calls it when ``tune`` returns).
    log_interval : int
        Log training progress every this many rounds (debug level).
    upper_model : XGBoostCostModel or None
        Share the feature cache of this model (base models spawned for transfer learning).
    num_boost_round, early_stopping_rounds : int
        Training length limits.
    """

    def __init__(self, task: Any, feature_type: str = "itervar", loss_type: str = "rank",
                 num_threads: int | None = None, log_interval: int = 25,
                 upper_model: XGBoostCostModel | None = None, num_boost_round: int = 400,
                 early_stopping_rounds: int = 30, seed: int = 0) -> None:
        super().__init__()
        if feature_type not in FEATURE_TYPES:
            raise ValueError(f"feature_type must be one of {FEATURE_TYPES}, got {feature_type!r}")
        if loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
            raise ValueError(f"num_threads must be a positive int or None, got {num_threads!r}")
        self.task = task
        self.space = task.config_space
        self.feature_type = feature_type
        self.loss_type = loss_type
        self.num_threads = num_threads
        self._workers = num_threads if num_threads is not None else (os.cpu_count() or 1)
        self._pool_obj: Any = None
        self._pool_done: Any = None
        self.log_interval = log_interval
        self.num_boost_round = int(num_boost_round)
        self.early_stopping_rounds = int(early_stopping_rounds)
        self.seed = seed
        self.params: dict[str, Any] = {
            "max_depth": 3, "gamma": 0.0001, "min_child_weight": 1, "subsample": 1.0,
            "eta": 0.3, "lambda": 1.0, "alpha": 0.0, "nthread": self._workers,
            "verbosity": 0, "seed": seed,
        }
        if loss_type == "rank":
            self.params.update(objective="rank:pairwise", lambdarank_pair_method="mean",
                               lambdarank_num_pair_per_sample=8)
        else:
            self.params.update(objective="reg:squarederror")
        self.bst: Any = None
        self.base_model: XGBoostCostModel | None = None
        self._upper = upper_model
        if upper_model is None:
            self.fea_cache: dict[int, np.ndarray | None] = {}
        else:
            self.fea_cache = upper_model.fea_cache
        self.feature_time = 0.0  # seconds spent extracting features (for reports)
        self.n_extracted = 0

    # ---- features ---------------------------------------------------------------------------
    def _fea_len(self) -> int:
        if self.feature_type == "itervar":
            return _feature.itervar_feature_length()
        if self.feature_type == "curve":
            return _feature.curve_feature_length()
        return len(self.space.get(0).get_flatten_feature())

    def _fill_cache(self, indices: Sequence[int]) -> None:
        todo = sorted({int(i) for i in indices if int(i) not in self.fea_cache})
        if not todo:
            return
        tic = time.perf_counter()
        pool = self._pool() if len(todo) >= _MIN_POOL_BATCH else None
        if pool is not None:
            chunk = max(1, len(todo) // (4 * self._workers))
            feas = pool.map(_pool_extract, todo, chunksize=chunk)
        else:
            feas = [extract_feature(self.task, self.space.get(i), self.feature_type) for i in todo]
        for i, f in zip(todo, feas):
            self.fea_cache[i] = f
        self.feature_time += time.perf_counter() - tic
        self.n_extracted += len(todo)

    def _pool(self) -> Any:
        """The feature-extraction workers (forked on first use; None: extract here)."""
        if self._upper is not None:  # a base model of the same task: its upper model's
            return self._upper._pool()
        if (self._workers <= 1 or self.feature_type == "knob"
                or "fork" not in multiprocessing.get_all_start_methods()):
            return None
        if self._pool_obj is None:
            global _POOL_TASK, _POOL_TYPE
            _POOL_TASK, _POOL_TYPE = self.task, self.feature_type  # what the children see
            self._pool_obj = multiprocessing.get_context("fork").Pool(self._workers)
            self._pool_done = weakref.finalize(self, self._pool_obj.terminate)
        return self._pool_obj

    def close(self) -> None:
        """End the feature-extraction workers (they are forked again if needed later)."""
        if self._pool_done is not None:
            self._pool_done()
        self._pool_obj = self._pool_done = None

    def get_features(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(matrix, ok)``: one feature row per index (zeros where extraction failed) and a
        boolean mask of the rows that were extracted."""
        self._fill_cache(indices)
        n = len(indices)
        rows = [self.fea_cache[int(i)] for i in indices]
        width = next((len(r) for r in rows if r is not None), None) or self._fea_len()
        mat = np.zeros((n, width), dtype=np.float32)
        ok = np.zeros(n, dtype=bool)
        for j, r in enumerate(rows):
            if r is not None:
                mat[j] = r
                ok[j] = True
        return mat, ok

    # ---- training ---------------------------------------------------------------------------
    def _train(self, x: np.ndarray, y: np.ndarray, groups: list[int] | None,
               base_margin: np.ndarray | None, plan_size: int) -> Any:
        xgb = _xgb()
        dtrain = xgb.DMatrix(x, label=y)
        if self.loss_type == "rank":
            dtrain.set_group(groups if groups else [len(y)])
        if base_margin is not None:
            dtrain.set_base_margin(base_margin)
        k = max(1, min(int(plan_size), len(y)))
        true_top = set(np.argsort(-y)[:k].tolist())
        state = {"best": -1.0, "best_iter": 0}
        stop_rounds = self.early_stopping_rounds
        log_interval = self.log_interval

        class _RecallStop(xgb.callback.TrainingCallback):
            def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
                if epoch % 5 != 4:
                    return False
                pred = model.predict(dtrain, output_margin=True)
                recall = len(true_top & set(np.argsort(-pred)[:k].tolist())) / k
                if log_interval and epoch % log_interval == 0:
                    logger.debug("xgb round %d: tr-a-recall@%d %.3f", epoch, k, recall)
                if recall > state["best"] + 1e-9:
                    state["best"], state["best_iter"] = recall, epoch
                return epoch - state["best_iter"] >= stop_rounds

        return xgb.train(self.params, dtrain, num_boost_round=self.num_boost_round,
                         callbacks=[_RecallStop()])

    def fit(self, xs: Sequence[int], ys: Sequence[float], plan_size: int) -> None:
        if len(xs) != len(ys):
            raise ValueError(f"fit: {len(xs)} configs but {len(ys)} measurements")
        tic = time.perf_counter()
        xs = [int(i) for i in xs]
        y = np.asarray(ys, dtype=np.float64)
        x, ok = self.get_features(xs)
        y_max = float(np.max(y)) if len(y) else 0.0
        if y_max <= 1e-12 or ok.sum() < 2:
            logger.debug("xgb fit: nothing to learn from (%d rows)", int(ok.sum()))
            return
        y = y / y_max
        x, y = x[ok], y[ok]
        xs_ok = [i for i, o in zip(xs, ok) if o]
        base = self.base_model.predict(xs_ok, output_margin=True) if self.base_model else None
        self.bst = self._train(x, y, None, base, plan_size)
        logger.debug("xgb fit: %d samples, %.2f s (features %.2f s)", len(y),
                     time.perf_counter() - tic, self.feature_time)

    def fit_log(self, records: Iterable[tuple[Any, Any]], plan_size: int,
                min_seed_records: int = 500) -> bool:
        rows: list[np.ndarray] = []
        ys: list[float] = []
        group_of: list[int] = []
        group_ids: dict[Any, int] = {}
        for inp, res in records:
            if self.feature_type == "knob" and not same_task(inp.task, self.task):
                continue
            flops = result_flops(inp.task, res)
            if same_task(inp.task, self.task):
                self._fill_cache([int(inp.config.index)])
                fea = self.fea_cache[int(inp.config.index)]
            else:
                fea = history_feature(inp.task, inp.config, self.feature_type)
            if fea is None:
                continue
            key = repr(getattr(inp.task, "workload", id(inp.task)))
            gid = group_ids.setdefault(key, len(group_ids))
            rows.append(fea)
            ys.append(flops)
            group_of.append(gid)
        if len(rows) < min_seed_records or len(rows) < 2:
            return False
        gid_arr = np.asarray(group_of)
        y = np.asarray(ys, dtype=np.float64)
        for g in range(len(group_ids)):  # normalise per task: throughputs differ across tasks
            m = gid_arr == g
            top = y[m].max()
            y[m] = y[m] / top if top > 0 else 0.0
        order = np.argsort(gid_arr, kind="stable")  # xgboost groups are contiguous
        x = np.stack(rows)[order]
        y, gid_arr = y[order], gid_arr[order]
        groups = [int((gid_arr == g).sum()) for g in range(len(group_ids))]
        self.bst = self._train(x, y, groups, None, plan_size)
        return True

    # ---- prediction -------------------------------------------------------------------------
    def predict(self, xs: Sequence[int], output_margin: bool = False) -> np.ndarray:
        xs = [int(i) for i in xs]
        x, ok = self.get_features(xs)
        if self.bst is None:
            out = np.zeros(len(xs)) if self.base_model is None \
                else self.base_model.predict(xs, output_margin=True)
        else:
            dtest = _xgb().DMatrix(x)
            if self.base_model is not None:
                dtest.set_base_margin(self.base_model.predict(xs, output_margin=True))
            out = self.bst.predict(dtest, output_margin=output_margin).astype(np.float64)
        out = np.asarray(out, dtype=np.float64)
        out[~ok] = FAILED_SCORE
        return out

    def load_basemodel(self, base_model: CostModel) -> None:
        if not isinstance(base_model, XGBoostCostModel):
            raise TypeError(f"base model must be an XGBoostCostModel, got "
                            f"{type(base_model).__name__}")
        self.base_model = base_model
        base_model.fea_cache = self.fea_cache

    def spawn_base_model(self) -> XGBoostCostModel:
        return XGBoostCostModel(self.task, self.feature_type, self.loss_type, self.num_threads,
                                self.log_interval, upper_model=self,
                                num_boost_round=self.num_boost_round,
                                early_stopping_rounds=self.early_stopping_rounds, seed=self.seed)
