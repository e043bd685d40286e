"""Tuning logs: one JSON object per line per measurement (TVM's ``autotvm.record``).

A line is ``{"input": [target, task_name, args, config], "result": [costs, error_no, all_cost,
timestamp], "version": 1}`` where ``args`` is the task's serialized arguments (tensors as
``["TENSOR", shape, dtype]``) and ``config`` is ``ConfigEntity.to_json_dict()``. Appending a line
and flushing it makes a log survive ``kill -9`` except for a possibly truncated last line, which
:func:`load_from_file` skips with a warning, as any other corrupt line (appending to such a log
starts on a new line: ``contrib.utils.open_for_append``, so the next record is not lost with it); a file in which not one
line is a valid record (garbage, binary, another JSON format) is refused with a ValueError.

Logs written by TVM are read too (:mod:`.tvm_log`): v0.2 lines (TVM 0.7-0.8: ``{"input":
[target, task_name, args, kwargs], "config": {...}, "result": [...], "version": 0.2,
"tvm_version": ...}``) and v0.1 lines (``{"i": ..., "r": ..., "v": 0.1}``). Their task names,
arguments, target strings and knob values are mapped onto this repository's templates; a line
that cannot be mapped (a template here with other knobs, a knob value outside this space) is
skipped with a warning naming its line number and why, the others load.

The target of a record is the target as built (``target.target_as_built``: a CPU target names
the CPU it was tuned on, ``llvm -mcpu=znver4``; the format stays TVM's, whose target strings
carry ``-mcpu`` too). Records of another CPU are not used for this one: ``ApplyHistoryBest``
skips them (one warning; ``include_compatible=True`` applies them), and resuming or transfer
learning leaves them out (:func:`split_by_cpu`). Records naming no CPU (older logs) match any.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Iterator
from typing import IO, Any

import numpy as np

from ..contrib.utils import open_for_append
from ..target.target import cpu_of, other_cpu_message, record_applies, record_cpu, target_as_built
from .space import ConfigEntity

__all__ = ["AUTOTVM_LOG_VERSION", "encode", "decode", "load_from_file", "load_from_lines",
           "save_to_file", "pick_best", "measure_str_key", "split_by_cpu"]

AUTOTVM_LOG_VERSION = 1
MAX_UNMAPPED_WARNINGS = 10

_TASK_CACHE: dict[tuple[str, str, str], Any] = {}


def _json_cost(c: Any) -> Any:
    if (isinstance(c, (int, float, np.integer, np.floating)) and not isinstance(c, bool)
            and math.isfinite(float(c))):
        return float(c)
    return str(c)


def encode(inp: Any, res: Any) -> str:
    """One log line (without the newline) for a measurement."""
    row = {
        "input": [target_as_built(inp.target), inp.task.name, list(inp.task.args), inp.config.to_json_dict()],
        "result": [[_json_cost(c) for c in res.costs], int(res.error_no), float(res.all_cost),
                   float(res.timestamp)],
        "version": AUTOTVM_LOG_VERSION,
    }
    return json.dumps(row, separators=(",", ":"))


def _task_of(target: str, name: str, args: Any) -> Any:
    """A shared Task per (target, name, args): decoded lines of one workload reuse it, and its
    space is rebuilt lazily from the registered template."""
    from .task.task import Task

    key = (target, name, json.dumps(args))
    tsk = _TASK_CACHE.get(key)
    if tsk is None:
        if len(_TASK_CACHE) > 4096:
            _TASK_CACHE.clear()
        tsk = _TASK_CACHE[key] = Task(name, args, target)
    return tsk


def decode(line: str) -> tuple[Any, Any]:
    """``(MeasureInput, MeasureResult)`` of a log line; ValueError for a malformed line."""
    from .measure.measure import MeasureInput, MeasureResult

    try:
        row = json.loads(line)
    except (ValueError, RecursionError) as err:
        raise ValueError(f"malformed autotvm log line: {line[:120]!r} ({err})") from None
    if isinstance(row, dict) and ("config" in row or "i" in row):
        from .tvm_log import decode_tvm

        return decode_tvm(row, line)
    try:
        target, name, args, config = row["input"]
        costs, error_no, all_cost, timestamp = row["result"]
        if not isinstance(name, str) or not isinstance(args, list) or not isinstance(costs, list):
            raise ValueError("expected [target, task name, [args], config] and [[costs], "
                             "error_no, all_cost, timestamp]")
        # a line of the wrong structure fails in these conversions with any of these errors
        cfg = ConfigEntity.from_json_dict(config)
        result = (tuple(costs), int(error_no), float(all_cost), float(timestamp))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as err:
        raise ValueError(f"malformed autotvm log line: {line[:120]!r} ({err})") from None
    tsk = _task_of(str(target), name, args)
    return MeasureInput(tsk.target, tsk, cfg), MeasureResult(*result)


def load_from_lines(lines: Iterable[str], source: str = "<lines>") -> list[tuple[Any, Any]]:
    """Decode lines, skipping blank ones; malformed lines are skipped with one warning.

    Input with lines but not one valid record (garbage, a binary file, JSON of another shape)
    raises ValueError naming ``source``, the first bad line and what is wrong with it; except
    a lone unterminated start of a record (a writer killed while writing the first one)."""
    from .tvm_log import UnmappableRecord

    out = []
    bad: list[int] = []
    unmapped: list[tuple[int, str]] = []
    first_error = ""
    i, line = 0, ""
    for i, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            out.append(decode(line))
        except UnmappableRecord as err:
            unmapped.append((i, str(err)))
        except ValueError as err:
            bad.append(i)
            first_error = first_error or str(err)
    for n, (i_line, why) in enumerate(unmapped):
        if n == MAX_UNMAPPED_WARNINGS:
            warnings.warn(f"autotvm: {len(unmapped) - n} more TVM record(s) of {source} could "
                          "not be mapped and were skipped", stacklevel=3)
            break
        warnings.warn(f"autotvm: skipped line {i_line} of {source}: a TVM record that cannot be "
                      f"mapped onto this repository's templates: {why}", stacklevel=3)
    killed_writer = bad == [i] and not line.endswith("\n") and line.startswith('{"input"')
    if bad and not out and not unmapped and not killed_writer:
        raise ValueError(f"{source} is not an autotvm tuning log: none of its {len(bad)} "
                         f"non-blank line(s) is a valid record; line {bad[0]}: {first_error}")
    if bad:
        warnings.warn(f"autotvm: skipped {len(bad)} corrupt or truncated line(s) of {source} "
                      f"(line {', '.join(map(str, bad[:5]))}{', ...' if len(bad) > 5 else ''})",
                      stacklevel=3)
    return out


def load_from_file(path: str | os.PathLike) -> list[tuple[Any, Any]]:
    """All ``(MeasureInput, MeasureResult)`` records of a log file, in file order."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return load_from_lines(f, str(path))


def save_to_file(records: Iterable[tuple[Any, Any]], path: str | os.PathLike,
                 mode: str = "a") -> None:
    """Write records to ``path`` (append by default, after a cut last line: see
    ``contrib.utils.open_for_append``), one line each."""
    with (open_for_append(path) if mode == "a" else open(path, mode, encoding="utf-8")) as f:
        for inp, res in records:
            f.write(encode(inp, res) + "\n")


def split_by_cpu(records: Iterable[tuple[Any, Any]], target: Any, who: str = "autotvm",
                 consequence: str = "they are left out") -> list[tuple[Any, Any]]:
    """``records`` less those of ``target``'s kind tuned for another CPU than ``target``'s
    (``target.record_applies``; records naming no CPU match any), which are left out with one
    warning naming the CPUs and how many. Records of other target kinds are kept: callers
    match tasks (kind included) themselves."""
    kept: list[tuple[Any, Any]] = []
    other: dict[str, int] = {}
    kind = str(target).split()[:1]
    for inp, res in records:
        text = str(inp.target)
        if text.split()[:1] != kind or record_applies(text, target):
            kept.append((inp, res))
        else:
            cpu = str(record_cpu(text))
            other[cpu] = other.get(cpu, 0) + 1
    if other:
        counts = ", ".join(f"{c!r}: {n}" for c, n in sorted(other.items()))
        warnings.warn(other_cpu_message(who, other, cpu_of(target), target,
                                        f"{consequence} ({counts} records)"),
                      RuntimeWarning, stacklevel=3)
    return kept


def measure_str_key(inp: Any, include_config: bool = True) -> str:
    """A string key of a measure input: target, task name, args (and config)."""
    cfg = f" {inp.config.to_json_dict()['entity']}" if include_config else ""
    return f"{inp.target} {inp.task.name} {json.dumps(list(inp.task.args))}{cfg}"


def _mean(costs: Iterable[Any]) -> float:
    vals = [float(c) for c in costs]
    return sum(vals) / len(vals) if vals else math.inf


def _best(records: Iterable[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    from .task.dispatcher import _target_key

    best: dict[tuple[str, str | None, Any], tuple[Any, Any]] = {}
    for inp, res in records:
        if res.error_no != 0:
            continue
        key = (_target_key(inp.target), record_cpu(str(inp.target)), inp.task.workload)
        if key not in best or _mean(res.costs) < _mean(best[key][1].costs):
            best[key] = (inp, res)
    return iter(best.values())


def pick_best(in_file: str | os.PathLike | Iterable[tuple[Any, Any]],
              out_file: str | os.PathLike | IO[str]) -> int:
    """Write the best valid record of each (target kind, CPU, workload) of ``in_file`` to
    ``out_file``; returns how many were written."""
    records = load_from_file(in_file) if isinstance(in_file, (str, os.PathLike)) else in_file
    best = list(_best(records))
    text = "".join(encode(i, r) + "\n" for i, r in best)
    if isinstance(out_file, (str, os.PathLike)):
        with open(out_file, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        out_file.write(text)
    return len(best)
