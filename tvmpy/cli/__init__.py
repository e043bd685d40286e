"""The ``tvmpy`` command line: compile an ONNX model to one deployable library, run it, time it.

    tvmpy compile model.onnx -o model.so [--target llvm] [--opt-level 3] [--input-shape x=1,3,8,8]
    tvmpy run model.so --input x=x.npy [--output out.npz] [--repeat 10] [--profile 5]
    tvmpy bench model.onnx [--input-shape ...] [--threads N]   # tvmpy opt 0 / 3 vs onnxruntime
                                                 # (and torch), every side on N threads
    tvmpy tune model.onnx --trials 200 --log tune.json [--tuner xgb]   # AutoTVM, whole model
    tvmpy tune ... --rpc-key KEY --tracker HOST:PORT   # measure on a device fleet (tvmpy rpc)
    tvmpy compile model.onnx --tuning-log tune.json   # (and bench) build with the tuned configs
    tvmpy demo [--model resnet18] [--image 224]  # no files: built-in model, check, latency table
    tvmpy fuzz --seconds 600 --seed 0 --jobs 2   # random models through every oracle that applies
    tvmpy quantize model.onnx --calibration data.npz -o model.int8.so   # int8 (relay.quantize)
    tvmpy serve-demo [--port 8000]   # the web demo (web/demo/): wasm + WebGPU in the browser

``compile`` builds for the graph executor (one static schedule; dims may be expressions of the
input dims) unless ``relay.build_module.vm_reason`` says it cannot run the model (control flow,
sizes decided by values, operators without a compute): then for the Relay VM, exported as one
library with the bytecode inside (runtime/vm_library.py); ``run`` runs either kind.

``compile``/``bench``/``demo`` need onnx (and onnxruntime for the comparisons); ``run`` needs only
tvmpy and numpy. Errors print one ``tvmpy <command>: error: ...`` line and exit with status 2
(``DEBUG=1`` shows the traceback); a ``demo``/``bench`` whose outputs disagree with onnxruntime
exits with status 1.

One module per command (``compile.py``, ``quantize.py``, ``run.py``, ``bench.py``, ``tune.py``,
``demo.py``: each its ``cmd_*`` function and its ``add_parser``; ``fuzz`` and ``rpc`` live with
their packages), what they share in ``_common.py``; this module builds the parser and runs the
command, turning every error into one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import bench, compile, demo, quantize, run, serve_demo, tune
from ._common import CliError, ProgressBar, parse_input_args, parse_shape_args

__all__ = ["main", "ProgressBar", "parse_shape_args", "parse_input_args"]


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tvmpy", description="tvmpy: compile an ONNX model to one "
                                "deployable library, run it, time it.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (compile, quantize, run, bench, tune, demo, serve_demo):
        command.add_parser(sub)

    from ..testing.fuzz import cli as fuzz_cli

    z = sub.add_parser("fuzz", help="differential fuzzing: random models vs onnxruntime")
    fuzz_cli.add_arguments(z)
    z.set_defaults(func=fuzz_cli.run)

    from ..rpc import cli as rpc_cli

    rp = sub.add_parser("rpc", help="RPC: device servers (tvmpy rpc server), the fleet's tracker and status")
    rpc_cli.add_arguments(rp)
    rp.set_defaults(func=rpc_cli.run)
    return p


# errors that describe bad input (a model, a file, an argument) rather than a bug in tvmpy
_USER_ERRORS = (ValueError, TypeError, KeyError, IndexError, NotImplementedError, OSError,
                RuntimeError, ArithmeticError, MemoryError, UnicodeError)


def _error_line(e: BaseException, source: str | None = None) -> str:
    """One line for an exception that ends a command (``source``: the file it processed)."""
    if isinstance(e, MemoryError):
        return f"out of memory: {e}" if str(e) else "out of memory"
    if isinstance(e, RecursionError) and "maximum recursion depth" in str(e):
        return (f"{source + ': ' if source else ''}the input is nested too deeply to be "
                f"processed ({e})")
    line = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    if not isinstance(e, _USER_ERRORS):
        line += " (an internal error: DEBUG=1 shows the traceback)"
    return line


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tvmpy`` command (returns the exit status).

    Every error ends the command with one ``tvmpy COMMAND: error: ...`` line and status 2 (no
    traceback unless ``DEBUG`` is set)."""
    args = make_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        print(f"tvmpy {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the command line's one place for every error
        if os.environ.get("DEBUG"):
            raise
        source = getattr(args, "model", None)
        print(f"tvmpy {args.command}: error: {_error_line(e, source)}", file=sys.stderr)
        return 2
