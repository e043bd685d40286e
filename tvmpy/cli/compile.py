"""``tvmpy compile``: an ONNX model to one deployable library (graph executor, or the virtual
machine when the graph executor cannot run it)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ._common import (
    ProgressBar,
    _check_output,
    _compile_tuned,
    _compile_vm,
    _load_onnx,
    _model_inputs,
    _resolve_shapes,
    parse_shape_args,
)


def _bytes_text(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _warn_memory(lib: Any) -> None:
    """Warn when the memory plan of a graph library needs more than this machine's memory,
    naming the largest tensor (symbolic dimensions count as 1)."""
    import json

    from ..relay.backend.graph_plan_memory import plan_memory

    try:
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    graph = json.loads(lib.get_graph_json())
    plan = plan_memory(graph)
    if plan.planned_bytes <= phys:
        return
    e = max(range(len(plan.entry_bytes)), key=plan.entry_bytes.__getitem__)
    row = graph["node_row_ptr"]
    nid = max(n for n in range(len(row) - 1) if row[n] <= e)
    shape = graph["attrs"]["shape"][1][e]
    dtype = graph["attrs"]["dltype"][1][e]
    print(f"warning: running this model needs {_bytes_text(plan.planned_bytes)} of memory, more "
          f"than this machine's {_bytes_text(phys)} (largest tensor: output of "
          f"{graph['nodes'][nid]['name']!r}, shape {tuple(shape)} {dtype}, "
          f"{_bytes_text(plan.entry_bytes[e])})", file=sys.stderr)


def cmd_compile(args: argparse.Namespace) -> int:
    from ..relay.build_module import vm_reason
    from ..relay.testing import compare

    model = _load_onnx(args.model)
    # symbolic dims not given stay symbolic: one library serves every size (relay.Any)
    wasm = "-mtriple=wasm" in args.target or args.target.split()[0] == "webgpu"
    shapes = _resolve_shapes(model, parse_shape_args(args.input_shape), symbolic=not wasm)
    ext = ".wasm" if wasm else ".so"  # WebAssembly: runtime/wasm.py; webgpu: the web artefact
    out = args.output or os.path.splitext(args.model)[0] + ext
    _check_output(out)
    mod, params = compare.import_onnx(model, shapes)
    # the graph executor unless the model has control flow, operators sized by input values
    # or operators without a compute: then the virtual machine (one rule: relay's vm_reason)
    reason = vm_reason(mod)
    if reason:
        print(f"executor: vm (the graph executor cannot run this model: {reason})")
        lib, secs = _compile_vm(mod, params, args.opt_level, args.target, args.tuning_log)
    else:
        print("executor: graph (static schedule and memory plan; no control flow or "
              "value-dependent shapes)")
        if args.tuning_log is not None:
            lib, secs = _compile_tuned(mod, params, args.opt_level, args.target, "compile",
                                       args.tuning_log)
        else:
            bar = ProgressBar("compile")
            try:
                lib, secs = compare.build(mod, params, opt_level=args.opt_level,
                                          target=args.target, progress=bar)
            finally:
                bar.close()
    lib.export_library(out)
    if not reason:
        _warn_memory(lib)
    print(f"compiled {args.model} (opt_level {args.opt_level}, target {args.target!r}) in "
          f"{secs:.1f} s -> {out} ({os.path.getsize(out) / 1e6:.1f} MB)")
    if reason:
        print(f"  virtual machine: {lib.stats}")
    for name, (dims, _) in _model_inputs(model).items():
        shape = shapes.get(name)
        shown = shape if shape is not None else "(" + ", ".join(
            str(d) if isinstance(d, int) and d > 0 else f"? ({d})" for d in dims) + ")"
        print(f"  input {name}: {shown}")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``compile`` command to the ``tvmpy`` parser's subcommands ``sub``."""
    c = sub.add_parser("compile", help="compile an ONNX model into one deployable .so")
    c.add_argument("model", help="model.onnx")
    c.add_argument("-o", "--output", help="output library (default: the model's name with .so)")
    c.add_argument("--target", default="llvm",
                   help="e.g. 'llvm' (this machine's CPU), 'llvm -mcpu=x86-64-v3' (any x86-64 "
                   "with AVX2: a library to copy to other machines), 'c'")
    c.add_argument("--opt-level", type=int, choices=range(4), default=3, metavar="{0,1,2,3}")
    c.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                   help="shape of an input (required for inputs with symbolic dimensions)")
    c.add_argument("--tuning-log", metavar="LOG",
                   help="build with the best configs of this AutoTVM log (from `tvmpy tune`)")
    c.set_defaults(func=cmd_compile)
