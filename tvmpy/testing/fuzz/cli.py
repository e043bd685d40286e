"""``tvmpy fuzz`` / ``python -m tvmpy.testing.fuzz``: run a fuzzing campaign from the shell.

    tvmpy fuzz --seconds 600 --seed 0 --jobs 2 [--max-nodes 10] [--out fuzz_out]
               [--configs llvm-O3,c-O3] [--timeout 300] [--models N]

Exit status 0 when no model produced a finding, 1 otherwise (2 for bad arguments).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["add_arguments", "run", "main"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    from .oracles import CONFIGS

    p.add_argument("--seconds", type=float, help="stop submitting models after this long")
    p.add_argument("--models", type=int, help="stop after this many models")
    p.add_argument("--seed", type=int, default=0, help="seed of the first model (default 0)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--max-nodes", type=int, default=10, help="operators per model (default 10)")
    p.add_argument("--out", default="fuzz_out",
                   help="directory of findings.jsonl, models/ and summary.json")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help=f"comma-separated oracles (default all: {', '.join(CONFIGS)})")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds one model may take before it counts as a hang (default 300)")


def run(args: Any) -> int:
    from .campaign import progress_line, run_campaign
    from .oracles import CONFIGS

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise ValueError(f"unknown oracle(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(CONFIGS)}")
    if args.seconds is None and args.models is None:
        raise ValueError("give --seconds or --models (or both)")
    summary = run_campaign(seconds=args.seconds, seed=args.seed, jobs=args.jobs,
                           max_nodes=args.max_nodes, out_dir=args.out, configs=configs,
                           timeout=args.timeout, models=args.models, progress=progress_line())
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    print(summary.report())
    print(f"details: {args.out}/findings.jsonl, {args.out}/summary.json")
    return 1 if sum(summary.findings.values()) else 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tvmpy.testing.fuzz",
                                description="differential fuzzing of tvmpy against onnxruntime")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except ValueError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
