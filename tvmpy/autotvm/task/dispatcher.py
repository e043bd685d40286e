"""Dispatch contexts: which configuration a template uses when it runs (TVM's
``autotvm.task.dispatcher``).

``DispatchContext.current`` is a stack of contexts per thread (``with ctx:`` in one thread is not
seen by another; a new thread starts at the root :data:`FALLBACK`); a template asks
``DispatchContext.current.query(target, workload)``. :class:`ApplyConfig` answers with one fixed
config, :class:`ApplyHistoryBest` with the best measured config of the workload, and the root
:class:`FallbackContext` with a :class:`~tvmpy.autotvm.space.FallbackConfigEntity`, and one log
line per build (not one per operator) saying how many workloads use default schedules.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...target.target import cpu_applies, cpu_of, other_cpu_message, record_cpu
from ..env import GLOBAL_SCOPE
from ..space import ConfigSpace, FallbackConfigEntity
from .conv_layout import conv_record_layout

_LOG = logging.getLogger("tvmpy.autotvm")

__all__ = ["DispatchContext", "ApplyConfig", "ApplyHistoryBest", "FallbackContext",
           "apply_history_best", "clear_fallback_cache", "fallback_summary"]


def _target_key(target: Any) -> str:
    """The part of a target that records are matched on: its kind ("llvm", "c")."""
    if target is None:
        from ...target import resolve_target

        target = resolve_target()
    kind = getattr(target, "kind", None)
    if kind is not None:
        return str(kind)
    return str(target).split()[0] if str(target).strip() else "llvm"


class _Current(threading.local):
    ctx: DispatchContext | None = None  # a new thread: None, read as the root FALLBACK


_CURRENT = _Current()


class _CurrentMeta(type):
    """``DispatchContext.current`` reads and sets the calling thread's innermost context."""

    @property
    def current(cls) -> DispatchContext | None:
        ctx = _CURRENT.ctx
        return ctx if ctx is not None else _ROOT

    @current.setter
    def current(cls, ctx: DispatchContext | None) -> None:
        _CURRENT.ctx = ctx

    @current.deleter
    def current(cls) -> None:  # back to the root (monkeypatch.setattr's undo deletes)
        _CURRENT.ctx = None


_ROOT: DispatchContext | None = None  # the FallbackContext below, once it exists


class DispatchContext(metaclass=_CurrentMeta):
    """Base of the dispatch contexts; ``with ctx:`` makes ``ctx`` the current one (of the
    calling thread)."""

    def __init__(self) -> None:
        self._old_ctx: DispatchContext | None = DispatchContext.current

    def query(self, target: Any, workload: Any) -> ConfigSpace:
        """The config for ``workload`` on ``target`` (asking the enclosing context when this
        one has none)."""
        ret = self._query_inside(target, workload)
        if ret is None:
            if self._old_ctx is None:
                raise RuntimeError("no dispatch context answered: FallbackContext missing")
            ret = self._old_ctx.query(target, workload)
        return ret

    def update(self, target: Any, workload: Any, cfg: ConfigSpace) -> None:
        """Make ``cfg`` the answer for ``workload`` on ``target`` in this context."""
        raise NotImplementedError(f"{type(self).__name__} cannot be updated")

    def best_cost(self, target: Any, workload: Any) -> float | None:
        """Seconds per run of the best measured config of ``workload`` in this context or an
        enclosing one; None when nothing was measured (used to choose between two
        implementations of one operator, e.g. Winograd or direct convolution)."""
        ctx: DispatchContext | None = self
        while ctx is not None:
            c = ctx._cost_inside(target, workload)
            if c is not None:
                return c
            ctx = ctx._old_ctx
        return None

    def _cost_inside(self, target: Any, workload: Any) -> float | None:
        return None

    def query_layout(self, target: Any, key: Any) -> Any:
        """The layout chosen for the operator ``key`` (e.g. a convolution's channel blocks,
        see ``graph_best.py``) by this context or an enclosing one; None: the target's own
        layout policy decides."""
        ctx: DispatchContext | None = self
        while ctx is not None:
            choice = ctx._layout_inside(target, key)
            if choice is not None:
                return choice
            ctx = ctx._old_ctx
        return None

    def _layout_inside(self, target: Any, key: Any) -> Any:
        return None

    def _query_inside(self, target: Any, workload: Any) -> ConfigSpace | None:
        raise NotImplementedError

    def __enter__(self) -> DispatchContext:
        self._old_ctx = DispatchContext.current
        DispatchContext.current = self
        return self

    def __exit__(self, *exc: Any) -> None:
        DispatchContext.current = self._old_ctx


class ApplyConfig(DispatchContext):
    """Every template run inside uses ``config`` (a ConfigEntity, or a ConfigSpace while a task
    is created)."""

    def __init__(self, config: ConfigSpace):
        super().__init__()
        if not isinstance(config, ConfigSpace):
            raise TypeError(f"ApplyConfig needs a ConfigEntity/ConfigSpace, got {type(config).__name__}")
        self._config = config
        self.workload: Any = None

    def _query_inside(self, target: Any, workload: Any) -> ConfigSpace:
        self.workload = workload
        return self._config

    def update(self, target: Any, workload: Any, cfg: ConfigSpace) -> None:
        self._config = cfg


def _mean_cost(res: Any) -> float:
    return float(np.mean([float(c) for c in res.costs]))


_TKey = tuple[str, "str | None"]  # (target kind, the records' CPU or None)


def _record_tkey(target: Any) -> _TKey:
    """Where a record of ``target`` is filed: its kind and the CPU it names (None: an older
    log's record, or a non-CPU target)."""
    return _target_key(target), record_cpu(str(target))


class ApplyHistoryBest(DispatchContext):
    """The best record (lowest mean cost, ``error_no == 0``) per (target kind, CPU, workload).

    ``records``: a log path, a list of paths, or an iterable of ``(MeasureInput,
    MeasureResult)`` pairs. Workloads without a record fall through to the enclosing context.

    Records name the CPU they were tuned on (``record.py``): a build for another CPU does not
    use them (their configs were chosen for other vector units and caches) and falls through
    as if untuned, with one warning per context naming the CPUs; ``include_compatible=True``
    uses them anyway. Records naming no CPU (older logs) apply to any CPU; where both exist,
    the faster of this CPU's and those is used.

    x86 convolutions (``conv_layout.py``): when the records hold several channel blockings of
    one convolution (``graph_tuner.layout_tasks``, or a TVM log, whose ``tile_ic``/``tile_oc``
    knobs are the blocks), the layout pass takes the blocks of the fastest
    (:meth:`query_layout`), as TVM's layout pass takes them from the best config; and a
    convolution whose input arrives in the other form (NCHW or blocked) than the record's
    gets that record's config (the knobs do not depend on it).
    """

    def __init__(self, records: Any, include_compatible: bool = False):
        super().__init__()
        self.include_compatible = include_compatible
        self.best_by_targetkey: dict[tuple[_TKey, Any], tuple[Any, Any]] = {}
        self._best_user: dict[tuple[str, Any], ConfigSpace] = {}
        # (tkey, conv key) -> {(ic_bn, oc_bn): best record}; (.., name, blocks) -> best
        self._conv_blocks: dict[tuple[_TKey, Any], dict[tuple[int, int], tuple[Any, Any]]] = {}
        self._conv_best: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        self._cpus: dict[str, set[str | None]] = {}  # kind -> the CPUs records name
        self._warned = False
        if records is not None:
            self.load(records)

    def load(self, records: Any) -> None:
        """Add records (see the class docstring) to this context."""
        from .. import record

        if isinstance(records, (str, os.PathLike)):
            records = record.load_from_file(records)
        elif isinstance(records, list) and records and isinstance(records[0], (str, os.PathLike)):
            records = [r for p in records for r in record.load_from_file(p)]
        for inp, res in records:
            if res.error_no != 0:
                continue
            tk = _record_tkey(inp.target)
            self._cpus.setdefault(tk[0], set()).add(tk[1])
            key = (tk, inp.task.workload)
            old = self.best_by_targetkey.get(key)
            if old is None or _mean_cost(res) < _mean_cost(old[1]):
                self.best_by_targetkey[key] = (inp, res)
            lay = conv_record_layout(inp.task.workload)
            if lay is not None:
                ck, blocks = (tk, lay[0]), (lay[1], lay[2])
                per = self._conv_blocks.setdefault(ck, {})
                if blocks not in per or _mean_cost(res) < _mean_cost(per[blocks][1]):
                    per[blocks] = (inp, res)
                name_key = (ck, inp.task.name, blocks)
                prev = self._conv_best.get(name_key)
                if prev is None or _mean_cost(res) < _mean_cost(prev[1]):
                    self._conv_best[name_key] = (inp, res)

    def _tkeys(self, target: Any, has: Callable[[_TKey], bool]) -> list[_TKey]:
        """The record keys whose entries (``has``) a build for ``target`` uses: this CPU's and
        CPU-less ones; else, when only other CPUs' exist, none (warned once) or, with
        ``include_compatible``, theirs."""
        kind = _target_key(target)
        cpus = self._cpus.get(kind)
        if not cpus:
            return []
        if target is None:
            from ...target import resolve_target

            target = resolve_target()
        mine = cpu_of(target)
        ok = [(kind, c) for c in cpus if cpu_applies(c, mine) and has((kind, c))]
        if ok:
            return ok
        other = [(kind, c) for c in cpus if not cpu_applies(c, mine) and has((kind, c))]
        if other and not self.include_compatible:
            self._warn_other_cpu(target, mine, [c for _, c in other])
            return []
        return other

    def _warn_other_cpu(self, target: Any, mine: str | None, cpus: list[str | None]) -> None:
        if self._warned:
            return
        self._warned = True
        warnings.warn(other_cpu_message(
            "autotvm.ApplyHistoryBest", cpus, mine, target,
            "those workloads use the enclosing context's configs (untuned fallbacks)"),
            RuntimeWarning, stacklevel=5)

    def _best_of(self, table: dict, target: Any, key_of: Callable[[_TKey], Any]) -> Any:
        """The fastest entry ``table[key_of(tkey)]`` over the keys that apply to ``target``."""
        keys = self._tkeys(target, lambda tk: key_of(tk) in table)
        hits = [table[key_of(tk)] for tk in keys]
        return min(hits, key=lambda r: _mean_cost(r[1])) if hits else None

    def _layout_inside(self, target: Any, key: Any) -> Any:
        per: dict[tuple[int, int], tuple[Any, Any]] = {}
        for tk in self._tkeys(target, lambda tk: (tk, key) in self._conv_blocks):
            for blocks, rec in self._conv_blocks[(tk, key)].items():
                if blocks not in per or _mean_cost(rec[1]) < _mean_cost(per[blocks][1]):
                    per[blocks] = rec
        if len(per) < 2:
            return None  # one blocking tuned: the layout policy's choice stands
        return min(per, key=lambda b: _mean_cost(per[b][1]))

    def _conv_config(self, target: Any, workload: Any) -> ConfigSpace | None:
        lay = conv_record_layout(workload)
        if lay is None:
            return None
        best = self._best_of(self._conv_best, target,
                             lambda tk: ((tk, lay[0]), workload[0], (lay[1], lay[2])))
        return None if best is None else best[0].config

    def _query_inside(self, target: Any, workload: Any) -> ConfigSpace | None:
        if workload is None:
            return None
        key = (_target_key(target), workload)
        if key in self._best_user:
            return self._best_user[key]
        best = self._best_of(self.best_by_targetkey, target, lambda tk: (tk, workload))
        if best is None:
            return self._conv_config(target, workload)
        return best[0].config

    def update(self, target: Any, workload: Any, cfg: ConfigSpace) -> None:
        self._best_user[(_target_key(target), workload)] = cfg

    def _cost_inside(self, target: Any, workload: Any) -> float | None:
        best = self._best_of(self.best_by_targetkey, target, lambda tk: (tk, workload))
        return None if best is None else _mean_cost(best[1])

    def __enter__(self) -> ApplyHistoryBest:
        super().__enter__()
        FALLBACK.begin_deferred()
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        FALLBACK.end_deferred()


def _short(workload: Any) -> str:
    text = str(workload)
    return text if len(text) <= 100 else text[:97] + "..."


class FallbackContext(DispatchContext):
    """The root context: a :class:`FallbackConfigEntity` for every workload nobody tuned.

    Untuned is the normal way to build, so the notice is quiet: one log line (logger
    ``tvmpy.autotvm``, level WARNING), never a ``UserWarning`` per workload. Inside a build scope
    (:meth:`build_scope`: ``relay.build``, ``relay.vm.compile``, ``apply_history_best``) every
    untuned workload the build asks for is collected and the outermost scope ends with one
    summary line for that build; outside any scope the first fallback of the run is logged at
    once and later ones only counted. :attr:`fallback_workloads` / :meth:`summary` list them
    all. ``silent = True`` (or ``autotvm.GLOBAL_SCOPE.silent``) mutes the line.

    The root context is shared by every thread: the cache and the counts are guarded by a lock,
    and the build scope is per thread (one thread's build does not hold or swallow another
    thread's line).
    """

    def __init__(self) -> None:
        super().__init__()
        self.memory: dict[tuple[str, Any], FallbackConfigEntity] = {}
        self.fallback_workloads: list[tuple[str, Any]] = []
        self.silent = False
        self._warned = False
        self._lock = threading.RLock()
        self._scope = threading.local()

    @property
    def _defer_depth(self) -> int:
        return getattr(self._scope, "depth", 0)

    @_defer_depth.setter
    def _defer_depth(self, value: int) -> None:
        self._scope.depth = value

    @property
    def _pending(self) -> dict[tuple[str, Any], None]:
        """The untuned workloads of the current build (an ordered set), per thread."""
        if not hasattr(self._scope, "pending"):
            self._scope.pending = {}
        return self._scope.pending

    @_pending.setter
    def _pending(self, value: dict[tuple[str, Any], None]) -> None:
        self._scope.pending = value

    def _query_inside(self, target: Any, workload: Any) -> ConfigSpace:
        key = (_target_key(target), workload)
        with self._lock:
            cfg = self.memory.get(key)
            new = cfg is None
            if cfg is None:
                cfg = FallbackConfigEntity()
                if workload is None:
                    return cfg
                self.memory[key] = cfg
                self.fallback_workloads.append(key)
            collector = getattr(self._scope, "collect", None)
            if collector is not None and key not in collector:
                collector.append(key)
            report = False
            if not (self.silent or GLOBAL_SCOPE.silent):
                if self._defer_depth:
                    self._pending[key] = None
                elif new and not self._warned:
                    report = self._warned = True
        if report:
            self._log([key], "")
        return cfg

    def _log(self, keys: list[tuple[str, Any]], where: str) -> None:
        targets = sorted({t for t, _ in keys})
        if len(keys) == 1:
            head = f"no tuned config for workload {_short(keys[0][1])}"
        else:
            head = f"{len(keys)} workloads have no tuned config"
        _LOG.warning("autotvm: %s%s on target %s; using fallback configurations (untuned "
                     "defaults). autotvm.task.fallback_summary() lists every untuned workload.",
                     head, where, ", ".join(targets))

    def begin_deferred(self) -> None:
        """Collect this thread's fallbacks until the matching :meth:`end_deferred`."""
        self._defer_depth += 1

    def end_deferred(self) -> None:
        """Close a build scope; the outermost one logs the build's single summary line."""
        self._defer_depth = max(0, self._defer_depth - 1)
        if self._defer_depth == 0 and self._pending:
            pending, self._pending = list(self._pending), {}
            with self._lock:
                self._warned = True
            self._log(pending, " in this build")

    @contextlib.contextmanager
    def collect(self) -> Iterator[list[tuple[str, Any]]]:
        """The list of every untuned workload this thread asks for inside (known before or
        not): a kernel compiled in a worker process or kept in the kernel cache reports them,
        and the parent's build counts them again (``relay/backend/kernel_build.py``)."""
        saved = getattr(self._scope, "collect", None)
        out: list[tuple[str, Any]] = []
        self._scope.collect = out
        try:
            yield out
        finally:
            self._scope.collect = saved

    @contextlib.contextmanager
    def build_scope(self) -> Iterator[None]:
        """``with FALLBACK.build_scope():`` around a whole build: one summary line at its end."""
        self.begin_deferred()
        try:
            yield
        finally:
            self.end_deferred()

    def summary(self) -> str:
        """How many workloads fell back, and which."""
        with self._lock:
            keys = list(self.fallback_workloads)
        lines = [f"{len(keys)} workload(s) used fallback configurations"]
        lines += [f"  {t}: {_short(w)}" for t, w in keys]
        return "\n".join(lines)

    def clear_cache(self, target: Any = None, workload: Any = None) -> None:
        """Forget the fallback of one workload, or (no arguments) all of them and the warning."""
        with self._lock:
            if workload is None:
                self.memory.clear()
                self.fallback_workloads.clear()
                self._pending.clear()
                self._warned = False
                return
            key = (_target_key(target), workload)
            self.memory.pop(key, None)
            if key in self.fallback_workloads:
                self.fallback_workloads.remove(key)

    def update(self, target: Any, workload: Any, cfg: ConfigSpace) -> None:
        key = (_target_key(target), workload)
        with self._lock:
            self.memory[key] = cfg  # type: ignore[assignment]


FALLBACK = FallbackContext()
_ROOT = FALLBACK  # every thread's outermost context


def clear_fallback_cache(target: Any = None, workload: Any = None) -> None:
    """Clear the root fallback context (see :meth:`FallbackContext.clear_cache`)."""
    FALLBACK.clear_cache(target, workload)


def fallback_summary() -> str:
    """How many workloads of this run used fallback configurations, and which."""
    return FALLBACK.summary()


def apply_history_best(records: Any, include_compatible: bool = False) -> ApplyHistoryBest:
    """``with autotvm.apply_history_best("tune.log"):`` builds with the best tuned configs
    (of this CPU: see :class:`ApplyHistoryBest` for ``include_compatible``)."""
    return ApplyHistoryBest(records, include_compatible=include_compatible)


