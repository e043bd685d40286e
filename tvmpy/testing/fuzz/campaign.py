"""The fuzzing campaign: generate random models, check each against the oracles in worker
processes, record every finding on disk as it happens, summarize.

Each model runs in a worker process (``jobs`` of them, spawned), so that a segfault in compiled
code or a hang only costs that model: the parent kills a worker that exceeds ``timeout``
seconds on one model (a *timeout* finding) and restarts one that died (a *crash* finding, with
its exit signal). Workers are recycled every ``RECYCLE`` models (llvmlite leaks a little per
compile). Models use consecutive seeds from ``seed``, so a campaign is reproducible and a
finding is re-created by its seed alone (``generate(seed, max_nodes)``).

On disk (``out_dir``): ``findings.jsonl`` (one line per model with findings, appended and
flushed as they arrive), ``models/seed_<n>.onnx`` + ``seed_<n>.npz`` (the model and its inputs,
for every model with a finding) and ``summary.json`` at the end.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...contrib.utils import open_for_append
from .oracles import DEFAULT_CONFIGS, Finding

__all__ = ["Summary", "run_campaign", "check_seed", "RECYCLE"]

RECYCLE = 200  # models per worker process before it is replaced


def check_seed(seed: int, max_nodes: int, configs: Sequence[str],
               save_dir: str | None = None, fault: str | None = None) -> dict[str, Any]:
    """Generate the model of ``seed``, check it, return the outcome as a JSON-able dict
    (``seed``, ``ops``, ``findings``, ``seconds``, ``skipped``); a model with findings is saved
    to ``save_dir``."""
    import numpy as np

    from .generator import generate
    from .oracles import check_model, run_reference

    t0 = time.perf_counter()
    out: dict[str, Any] = {"seed": seed, "ops": [], "findings": [], "skipped": ""}
    try:
        case = generate(seed, max_nodes=max_nodes)
        out["ops"] = list(case.ops)
        want = run_reference(case.model, case.feeds)
    except Exception as exc:  # noqa: BLE001 - the generator's fault: counted, not a finding
        out["skipped"] = f"{type(exc).__name__}: {exc}"[:500]
        out["seconds"] = time.perf_counter() - t0
        return out
    if save_dir is not None:  # saved before checking: a crash or hang leaves the model behind
        _save(case, save_dir, seed, np)
    if fault:
        _misbehave(fault)
    not_judged: list[str] = []
    findings = check_model(case.model, case.feeds, configs, seed=seed, reference=want,
                           skipped=not_judged)
    out["findings"] = [f.to_json() for f in findings]
    out["configs_skipped"] = [s[:200] for s in not_judged]
    if save_dir is not None and not findings:
        _unsave(save_dir, seed)
    out["seconds"] = time.perf_counter() - t0
    return out


def _paths(save_dir: str, seed: int) -> tuple[str, str]:
    base = os.path.join(save_dir, "models", f"seed_{seed}")
    return base + ".onnx", base + ".npz"


def _save(case: Any, save_dir: str, seed: int, np: Any) -> None:
    model_path, feeds_path = _paths(save_dir, seed)
    os.makedirs(os.path.dirname(model_path), exist_ok=True)
    with open(model_path, "wb") as fh:
        fh.write(case.model.SerializeToString())
    np.savez(feeds_path, **case.feeds)


def _unsave(save_dir: str, seed: int) -> None:
    for p in _paths(save_dir, seed):
        try:
            os.remove(p)
        except OSError:
            pass


def _worker_main(conn: Any, max_nodes: int, configs: Sequence[str], save_dir: str) -> None:
    import signal
    import warnings

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    warnings.simplefilter("ignore")
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    faults = _injected_faults()
    while True:
        seed = conn.recv()
        if seed is None:
            return
        try:
            res = check_seed(seed, max_nodes, configs, save_dir, fault=faults.get(seed))
        except Exception as exc:  # noqa: BLE001 - a bug of the fuzzer itself: keep going
            res = {"seed": seed, "ops": [], "findings": [], "seconds": 0.0,
                   "skipped": "fuzzer error: " + "".join(
                       traceback.format_exception_only(type(exc), exc)).strip()[:500]}
        try:
            conn.send(res)
        except (BrokenPipeError, EOFError):  # the campaign is gone
            return


FAULTS_ENV = "TVMPY_FUZZ_INJECT"


def _injected_faults() -> dict[int, str]:
    """Seeds on which a worker is to crash or hang, for testing the campaign's handling:
    ``TVMPY_FUZZ_INJECT="5=crash,7=hang"``."""
    out = {}
    for item in os.environ.get(FAULTS_ENV, "").split(","):
        if "=" in item:
            seed, what = item.split("=", 1)
            out[int(seed)] = what.strip()
    return out


def _misbehave(what: str) -> None:
    if what == "crash":
        import ctypes

        ctypes.string_at(0)  # SIGSEGV, as a miscompiled kernel would
    elif what == "hang":
        while True:
            time.sleep(1)


class _Worker:
    def __init__(self, ctx: Any, args: tuple) -> None:
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, *args), daemon=True)
        self.proc.start()
        child.close()
        self.seed: int | None = None
        self.started = 0.0
        self.done = 0

    def submit(self, seed: int) -> None:
        self.seed, self.started = seed, time.monotonic()
        self.parent.send(seed)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.parent.send(None)
            except OSError:
                pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.parent.close()


@dataclass
class Summary:
    """What a campaign did."""

    models: int = 0
    checked: int = 0
    skipped: int = 0
    seconds: float = 0.0
    findings: Counter = field(default_factory=Counter)  # kind -> models
    signatures: dict[str, dict[str, Any]] = field(default_factory=dict)
    ops: Counter = field(default_factory=Counter)
    skip_reasons: Counter = field(default_factory=Counter)
    config_skips: Counter = field(default_factory=Counter)  # "config: why" -> models
    interrupted: bool = False

    def add(self, res: dict[str, Any]) -> None:
        self.models += 1
        if res.get("skipped"):
            self.skipped += 1
            self.skip_reasons[res["skipped"].splitlines()[0][:120]] += 1
            return
        self.checked += 1
        self.ops.update(set(res["ops"]))
        for why in res.get("configs_skipped", ()):
            self.config_skips[why.split(":")[0] + ": " + why.split(":", 1)[-1][:80].strip()] += 1
        kinds = set()
        for fj in res["findings"]:
            f = Finding(**fj)
            kinds.add(f.kind)
            sig = f.signature()
            entry = self.signatures.setdefault(sig, {"count": 0, "seeds": [], "config": f.config,
                                                     "example": f.message[:400]})
            entry["count"] += 1
            if len(entry["seeds"]) < 5:
                entry["seeds"].append(res["seed"])
        for k in kinds:
            self.findings[k] += 1

    def to_json(self) -> dict[str, Any]:
        return {"models": self.models, "checked": self.checked, "skipped": self.skipped,
                "interrupted": self.interrupted,
                "seconds": round(self.seconds, 1), "findings": dict(self.findings),
                "op_types": len(self.ops), "ops": dict(sorted(self.ops.items())),
                "signatures": self.signatures, "skip_reasons": dict(self.skip_reasons),
                "config_skips": dict(self.config_skips)}

    def report(self) -> str:
        bad = sum(self.findings.values())
        lines = [f"{self.models} models in {self.seconds:.0f} s ({self.checked} checked, "
                 f"{self.skipped} skipped by the generator), {len(self.ops)} op types",
                 "findings: " + (", ".join(f"{k} {v}" for k, v in sorted(self.findings.items()))
                                 if bad else "none")]
        for _sig, e in sorted(self.signatures.items(), key=lambda kv: -kv[1]["count"]):
            lines.append(f"  {e['count']:4d}x {e['config']}: {e['example'].splitlines()[0][:150]}"
                         f"  (seeds {', '.join(map(str, e['seeds']))})")
        for reason, n in self.skip_reasons.most_common(5):
            lines.append(f"  skipped {n}x: {reason}")
        if self.config_skips:  # an oracle that could not judge a model (not tvmpy's fault)
            total = sum(self.config_skips.values())
            top = "; ".join(f"{n}x {w}" for w, n in self.config_skips.most_common(3))
            lines.append(f"  oracle not applicable {total}x: {top}")
        return "\n".join(lines)


def run_campaign(seconds: float | None = None, seed: int = 0, jobs: int = 2,
                 max_nodes: int = 10, out_dir: str = "fuzz_out",
                 configs: Sequence[str] = DEFAULT_CONFIGS, timeout: float = 300.0,
                 models: int | None = None,
                 progress: Callable[[Summary], None] | None = None) -> Summary:
    """Check models of seeds ``seed, seed + 1, ...`` until ``seconds`` have passed or
    ``models`` were checked (whichever first; at least one bound is needed)."""
    if seconds is None and models is None:
        raise ValueError("run_campaign needs seconds= or models=")
    os.makedirs(out_dir, exist_ok=True)
    _stop_on_sigterm()
    ctx = mp.get_context("spawn")
    args = (max_nodes, tuple(configs), out_dir)
    workers = [_Worker(ctx, args) for _ in range(max(1, jobs))]
    summary = Summary()
    log = open_for_append(os.path.join(out_dir, "findings.jsonl"))
    t0 = time.monotonic()
    next_seed = seed
    submitted = 0

    def may_submit() -> bool:
        if models is not None and submitted >= models:
            return False
        return seconds is None or time.monotonic() - t0 < seconds

    def record(res: dict[str, Any]) -> None:
        summary.add(res)
        if res["findings"] or res.get("skipped", "").startswith("fuzzer error"):
            log.write(json.dumps(res) + "\n")
            log.flush()
        if progress is not None:
            summary.seconds = time.monotonic() - t0
            progress(summary)

    interrupted = False
    try:
        for w in workers:
            if may_submit():
                w.submit(next_seed)
                next_seed += 1
                submitted += 1
        while any(w.seed is not None for w in workers):
            ready = mp.connection.wait([w.parent for w in workers if w.seed is not None],
                                       timeout=1.0)
            for k, w in enumerate(workers):
                if w.seed is None:
                    continue
                res = None
                if w.parent in ready:
                    try:
                        res = w.parent.recv()
                    except (EOFError, OSError):
                        w.proc.join(2)
                        code = w.proc.exitcode
                        res = _dead(w.seed, "crash", f"worker process died (exit code {code}"
                                    + (f", signal {-code}" if code and code < 0 else "") + ")")
                        w.stop(kill=True)
                        w = workers[k] = _Worker(ctx, args)
                elif time.monotonic() - w.started > timeout:
                    res = _dead(w.seed, "timeout", f"no result after {timeout:.0f} s")
                    w.stop(kill=True)
                    w = workers[k] = _Worker(ctx, args)
                if res is None:
                    continue
                record(res)
                w.seed = None
                w.done += 1
                if w.done >= RECYCLE:
                    w.stop()
                    w = workers[k] = _Worker(ctx, args)
                if may_submit():
                    w.submit(next_seed)
                    next_seed += 1
                    submitted += 1
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: what was checked so far is summarized
        interrupted = True
    finally:
        for w in workers:
            w.stop(kill=w.seed is not None)
        summary.seconds = time.monotonic() - t0
        log.close()
        summary.interrupted = interrupted
        with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
            json.dump(summary.to_json(), fh, indent=1)
    return summary


def _stop_on_sigterm() -> None:
    """SIGTERM ends a campaign the way Ctrl-C does (summary written), from the main thread."""
    import signal

    if _main_thread():
        def handler(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, handler)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _dead(seed: int, kind: str, message: str) -> dict[str, Any]:
    return {"seed": seed, "ops": [], "skipped": "", "seconds": 0.0,
            "findings": [Finding(kind, "*", "unknown", message).to_json()]}


def progress_line(stream: Any = sys.stderr) -> Callable[[Summary], None]:
    """A progress callback printing one status line (rewritten in place on a terminal)."""
    tty = stream.isatty()
    last = [0.0]

    def show(s: Summary) -> None:
        now = time.monotonic()
        if not tty and now - last[0] < 30:
            return
        last[0] = now
        bad = ", ".join(f"{k} {v}" for k, v in sorted(s.findings.items())) or "no findings"
        rate = s.models / s.seconds if s.seconds else 0.0
        text = (f"fuzz: {s.models} models ({rate:.2f}/s), {len(s.ops)} op types, {bad}, "
                f"{s.skipped} skipped")
        stream.write(("\r" + text + "\033[K") if tty else text + "\n")
        stream.flush()

    return show
