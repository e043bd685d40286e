"""``tvmpy tune``: tune a model's operators with AutoTVM into a log, locally or on a device fleet
(``--rpc-key KEY --tracker HOST:PORT``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from ._common import CliError, _load_onnx, _resolve_shapes, parse_shape_args


def cmd_tune(args: argparse.Namespace) -> int:
    import importlib

    from .. import autotvm
    from ..autotvm.measure.rpc_runner import NoDeviceLeft
    from ..relay.testing import compare

    tm = importlib.import_module("tvmpy.autotvm.tune_model")
    if getattr(args, "scheduler", "autotvm") == "auto":
        return _tune_auto(args)
    if args.trials < 0:
        raise CliError(f"--trials must be >= 0, got {args.trials}")
    if args.early_stopping is not None and args.early_stopping < 1:
        raise CliError(f"--early-stopping must be >= 1, got {args.early_stopping}")
    parent = os.path.dirname(os.path.abspath(args.log))
    if not os.path.isdir(parent):
        raise CliError(f"--log: directory {parent!r} does not exist")
    model = _load_onnx(args.model)
    shapes = _resolve_shapes(model, parse_shape_args(args.input_shape))
    mod, params = compare.import_onnx(model, shapes)
    t0 = time.perf_counter()
    kw: dict[str, Any] = {"n_trial_per_task": args.trials} if args.per_task else {
        "n_trial_total": args.trials}
    runner = None
    if args.rpc_key or args.tracker:
        kw["measure_option"] = _rpc_measure_option(args)
        runner = kw["measure_option"]["runner"]
    logged = len(_log_errors(args.log))
    try:
        tasks = autotvm.tune_model(mod, params, args.target, log_file=args.log,
                                   tuner=args.tuner, early_stopping=args.early_stopping, **kw)
    except NoDeviceLeft as e:  # the fleet lost every device of the key
        errors = _log_errors(args.log)[logged:]
        print(f"\ntvmpy tune: error: {e}: {sum(1 for x in errors if x)} of the {len(errors)} "
              f"trials of this run failed (all are in {args.log})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ntvmpy tune: interrupted; every finished measurement is in {args.log}: run the "
              "same command again to resume", file=sys.stderr)
        return 130
    if not tasks:
        print(f"{args.model}: no tunable operators on target {args.target!r}; "
              f"nothing written to {args.log}")
        return 0
    print(f"tuned {len(tasks)} task(s) of {args.model} with the {args.tuner} tuner in "
          f"{time.perf_counter() - t0:.1f} s -> {args.log}")
    for i, (task, n, best) in enumerate(tm.best_per_task(tasks, args.log), 1):
        failed = getattr(task, "failed_trials", 0)
        print(f"  [{i}/{len(tasks)}] {task.name} {tm._short_args(task)}: {n} trials"
              + (f" ({failed} of this run's {task.new_trials} failed)" if failed else "")
              + f", best {best / 1e9:.2f} GFLOP/s")
    new = sum(getattr(t, "new_trials", 0) for t in tasks)
    failed = sum(getattr(t, "failed_trials", 0) for t in tasks)
    if runner is not None and runner.no_device is not None:  # lost in the last batch
        print(f"tvmpy tune: error: {runner.no_device}: {failed} of the {new} trials of this "
              f"run failed (all are in {args.log})", file=sys.stderr)
        return 1
    if failed:
        print(f"warning: {failed} of the {new} trials of this run failed (their errors are in "
              f"{args.log})", file=sys.stderr)
    if new and failed == new:
        print("tvmpy tune: error: every trial failed: nothing was measured", file=sys.stderr)
        return 1
    print(f"build with it: tvmpy compile {args.model} --tuning-log {args.log}")
    return 0


def _tune_auto(args: argparse.Namespace) -> int:
    """``--scheduler auto``: every fused subgraph tuned by the auto-scheduler (Ansor's task
    scheduler spreads ``--trials``), logged to (and resumed from) ``--log``."""
    from .. import auto_scheduler
    from ..relay.testing import compare

    if args.trials < 0:
        raise CliError(f"--trials must be >= 0, got {args.trials}")
    if args.rpc_key or args.tracker:
        raise CliError("--scheduler auto measures locally; --rpc-key/--tracker are AutoTVM's")
    if args.tuner not in ("xgb", "random"):
        raise CliError(f"--scheduler auto takes --tuner xgb or random, got {args.tuner!r}")
    parent = os.path.dirname(os.path.abspath(args.log))
    if not os.path.isdir(parent):
        raise CliError(f"--log: directory {parent!r} does not exist")
    model = _load_onnx(args.model)
    shapes = _resolve_shapes(model, parse_shape_args(args.input_shape))
    mod, params = compare.import_onnx(model, shapes)
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, args.target)
    from ..auto_scheduler.relay_integration import format_not_tuned

    skipped = format_not_tuned()  # extern kernels (LSTM/GRU recurrence), symbolic shapes...
    if skipped:
        print(skipped)
    if not tasks:
        print(f"{args.model}: no subgraph to tune on target {args.target!r}")
        return 0
    total = args.trials * len(tasks) if args.per_task else args.trials
    t0 = time.perf_counter()
    sched = auto_scheduler.TaskScheduler(tasks, weights, load_log_file=args.log)
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=sched_budget(total, args.log, tasks),
        early_stopping=args.early_stopping, num_measures_per_round=min(16, max(1, total)),
        measure_callbacks=[auto_scheduler.RecordToFile(args.log)], verbose=1)
    try:
        sched.tune(opts, search_policy="sketch.random" if args.tuner == "random" else "default")
    except KeyboardInterrupt:
        print(f"\ntvmpy tune: interrupted; every finished measurement is in {args.log}: run the "
              "same command again to resume", file=sys.stderr)
        return 130
    print(f"tuned {len(tasks)} subgraph(s) of {args.model} with the auto-scheduler in "
          f"{time.perf_counter() - t0:.1f} s -> {args.log}")
    print(f"build with it: tvmpy compile {args.model} --tuning-log {args.log}")
    return 0


def sched_budget(total: int, log: str, tasks: Any) -> int:
    """The task scheduler counts the log's records of these tasks as trials done (resume):
    this run's budget comes on top of them (records of another CPU are not resumed from)."""
    import json

    if not os.path.exists(log):
        return total
    from ..auto_scheduler.measure_record import cpu_matches

    keys = {t.workload_key for t in tasks}
    target = tasks[0].target if tasks else "llvm"
    n = 0
    with open(log) as f:
        for line in f:
            try:
                key, rec_target = json.loads(line)["i"][0][:2]
                n += key in keys and cpu_matches(str(rec_target), target)
            except (ValueError, KeyError, TypeError, IndexError):
                continue
    return total + n


def _log_errors(log: str) -> list[int]:
    """The error number of each record of the tuning log ``log`` ([] when there is none)."""
    from ..autotvm import record

    if not os.path.exists(log):
        return []
    return [int(res.error_no) for _, res in record.load_from_file(log)]


def _rpc_measure_option(args: argparse.Namespace) -> dict:
    """``--rpc-key KEY --tracker HOST:PORT``: measure on the fleet's devices of KEY."""
    from .. import autotvm

    if not (args.rpc_key and args.tracker):
        raise CliError("--rpc-key and --tracker go together (measure on the fleet's devices "
                       "of KEY registered with the tracker at HOST:PORT)")
    host, _, port = args.tracker.rpartition(":")
    if not port.isdigit():
        raise CliError(f"--tracker must be HOST:PORT, got {args.tracker!r}")
    runner = autotvm.RPCRunner(args.rpc_key, host=host or "127.0.0.1", port=int(port),
                               timeout=args.rpc_timeout, device_wait=args.rpc_device_wait)
    try:
        runner.set_task(None)  # the tracker is reachable and has devices of the key
    except (OSError, LookupError, RuntimeError) as e:
        raise CliError(str(e)) from None
    return autotvm.measure_option(builder=autotvm.LocalBuilder(), runner=runner)


def add_parser(sub: Any) -> None:
    """Add the ``tune`` command to the ``tvmpy`` parser's subcommands ``sub``."""
    from ..rpc import ports as rpc_ports

    t = sub.add_parser("tune", help="tune the model's operators with AutoTVM into a log")
    t.add_argument("model", help="model.onnx")
    t.add_argument("--trials", type=int, required=True,
                   help="total measurement budget, split between the tasks by their FLOPs")
    t.add_argument("--per-task", action="store_true",
                   help="--trials is the budget of each task instead of the total")
    t.add_argument("--log", required=True, metavar="LOG",
                   help="AutoTVM log to append to (an existing log is resumed)")
    t.add_argument("--tuner", choices=("xgb", "ga", "random", "grid"), default="xgb")
    t.add_argument("--scheduler", choices=("autotvm", "auto"), default="autotvm",
                   help="autotvm: the operators' templates; auto: the auto-scheduler (Ansor) "
                   "on every fused subgraph, its log applied by `tvmpy compile --tuning-log`")
    t.add_argument("--target", default="llvm", help="compilation target (default: llvm)")
    t.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...")
    t.add_argument("--early-stopping", type=int, metavar="N",
                   help="stop a task after N trials without improvement")
    t.add_argument("--rpc-key", metavar="KEY",
                   help="measure on the fleet's devices of KEY (with --tracker)")
    t.add_argument("--tracker", type=rpc_ports.host_port, metavar="HOST:PORT", help="the fleet's tracker (`tvmpy rpc "
                   "tracker`); devices join it with `tvmpy rpc server --tracker ... --key KEY`")
    t.add_argument("--rpc-timeout", type=float, default=10.0, metavar="S",
                   help="seconds per measurement on a device (default 10)")
    t.add_argument("--rpc-device-wait", type=float, default=30.0, metavar="S",
                   help="seconds to wait for a device of --rpc-key when none is left; then "
                   "the remaining trials fail and the command exits with status 1 (default 30)")
    t.set_defaults(func=cmd_tune)
