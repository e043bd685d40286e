"""``tvmpy run``: run a compiled library (graph executor or virtual machine) on inputs saved with
np.save; print a summary of the outputs, the time, the slowest kernels."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._common import CliError, _vm_arrays, parse_input_args


def _summary(name: str, a: np.ndarray) -> str:
    line = f"{name}: shape {tuple(a.shape)} {a.dtype}"
    if a.size and a.dtype.kind in "fiub":
        f = a.astype(np.float64)
        line += f"  min {f.min():.6g}  max {f.max():.6g}  mean {f.mean():.6g}"
        if a.ndim >= 1 and a.shape[-1] > 1 and a.dtype.kind == "f":
            line += f"  argmax[-1] {np.asarray(a.reshape(-1, a.shape[-1]).argmax(-1))[:5].tolist()}"
    return line


class _GraphRunner:
    """``tvmpy run`` over a graph executor library (relay.build's export)."""

    executor = "graph executor"

    def __init__(self, lib: Any, dev: Any):
        from ..contrib import graph_executor

        self.m = graph_executor.GraphModule(lib["default"](dev))

    def input_info(self) -> tuple[dict[str, Any], dict[str, str]]:
        return self.m.get_input_info()

    def set_inputs(self, feeds: Mapping[str, np.ndarray]) -> None:
        for name, value in feeds.items():
            self.m.set_input(name, value)

    def run(self) -> None:
        self.m.run()

    def outputs(self) -> list[np.ndarray]:
        return [self.m.get_output(i).numpy() for i in range(self.m.get_num_outputs())]

    def profile(self, number: int) -> list[tuple[str, float]]:
        return [(f"{r['node']} -> {tuple(r['shape'])}", r["time"])
                for r in self.m.module.profile(number=number).sorted_rows()]


class _VMRunner:
    """``tvmpy run`` over a VM executable library (relay.vm.compile's export)."""

    executor = "virtual machine"

    def __init__(self, lib: Any, dev: Any):
        from ..runtime.vm import VirtualMachine

        self.vm = VirtualMachine(lib, dev)
        self.main = self.vm.exe.functions[self.vm.exe._index("main")]

    def input_info(self) -> tuple[dict[str, Any], dict[str, str]]:
        shapes: dict[str, Any] = {}
        dtypes: dict[str, str] = {}
        for name, spec in zip(self.main.params, self.main.specs):
            if spec[0] != "tensor":
                raise CliError(f"input {name!r} is a tuple or list of tensors, which `tvmpy run` "
                               "cannot feed; run the model from Python (tvmpy.runtime.vm)")
            shapes[name] = tuple(d if isinstance(d, int) else str(d or "?") for d in spec[2])
            dtypes[name] = str(spec[1])
        return shapes, dtypes

    def set_inputs(self, feeds: Mapping[str, np.ndarray]) -> None:
        self.vm.set_input("main", **feeds)
        self._feeds = dict(feeds)

    def run(self) -> None:
        self.vm.run()

    def outputs(self) -> list[np.ndarray]:
        return _vm_arrays(self.vm.get_outputs())

    def profile(self, number: int) -> list[tuple[str, float]]:
        rows = self.vm.profile(func_name="main", number=number, **self._feeds)
        return sorted(rows.items(), key=lambda kv: -kv[1])


def cmd_run(args: argparse.Namespace) -> int:
    from .. import runtime
    from ..runtime.vm_library import VMExecutableModule

    if not os.path.isfile(args.model):
        raise CliError(f"no such file {args.model!r}")
    feeds = parse_input_args(args.input)
    lib = runtime.load_module(args.model)
    devices = {"cpu": runtime.cpu, "opencl": runtime.opencl, "cuda": runtime.cuda,
               "vulkan": runtime.vulkan, "webgpu": runtime.webgpu}
    if isinstance(lib, VMExecutableModule) and args.device != "cpu":
        raise CliError(f"{args.model} is a virtual machine executable, which runs on the CPU "
                       f"only (not --device {args.device})")
    runner: Any = (_VMRunner if isinstance(lib, VMExecutableModule) else _GraphRunner)(
        lib, devices[args.device](0))
    shapes, dtypes = runner.input_info()

    def shown(shape: Any) -> str:  # symbolic dims (a dynamic batch) as ?
        dims = ["?" if isinstance(d, str) else str(d) for d in shape]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def fits(value: np.ndarray, shape: Any) -> bool:
        return len(value.shape) == len(shape) and all(
            isinstance(w, str) or w == g for w, g in zip(shape, value.shape))

    expected = ", ".join(f"{n} {shown(shapes[n])} {dtypes[n]}" for n in shapes)
    unknown = sorted(set(feeds) - set(shapes))
    missing = [n for n in shapes if n not in feeds]
    if unknown or missing:
        what = ([f"unknown input(s) {unknown}"] if unknown else []) + (
            [f"missing input(s) {missing}"] if missing else [])
        raise CliError(f"{'; '.join(what)}; the model's inputs: {expected}")
    for name, value in feeds.items():
        if not fits(value, shapes[name]) or value.dtype != np.dtype(dtypes[name]):
            bad = next((f"dimension {i} is {g}, expected {w}" for i, (w, g) in
                        enumerate(zip(shapes[name], value.shape))
                        if not isinstance(w, str) and w != g), None)
            if len(value.shape) != len(shapes[name]):
                bad = f"rank {len(value.shape)}, expected {len(shapes[name])}"
            elif bad is None:
                bad = f"dtype {value.dtype}, expected {dtypes[name]}"
            raise CliError(f"--input {name}: expected shape {shown(shapes[name])} "
                           f"{dtypes[name]}, got {value.shape} {value.dtype}: {bad}"
                           + (f" (convert with .astype('{dtypes[name]}'))"
                              if fits(value, shapes[name]) else ""))
    try:  # inputs whose run-time sizes disagree (a shared batch) fail here or in the run
        runner.set_inputs(feeds)
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    times = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        try:
            runner.run()
        except ValueError as e:
            raise CliError(str(e)) from None
        times.append(time.perf_counter() - t0)
    outs = {f"output{i}": a for i, a in enumerate(runner.outputs())}
    msg = f"ran {args.model} ({runner.executor}): first run {times[0] * 1e3:.2f} ms"
    if len(times) > 1:
        msg += f", best of the next {len(times) - 1}: {min(times[1:]) * 1e3:.2f} ms"
    print(msg)
    for name, a in outs.items():
        print("  " + _summary(name, a))
    if args.profile:
        rows = runner.profile(number=10)
        total = sum(t for _, t in rows) or 1.0
        what = "kernels" if runner.executor == "graph executor" else "segments and kernels"
        print(f"slowest {what} (median of 10 runs; {len(rows)} {what}, sum "
              f"{total * 1e3:.2f} ms):")
        for name, t in rows[:args.profile]:
            print(f"  {t * 1e3:8.3f} ms {t / total:6.1%}  {name}")
    if args.output:
        np.savez(args.output, **outs)
        print(f"wrote {args.output} ({', '.join(outs)})")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``run`` command to the ``tvmpy`` parser's subcommands ``sub``."""
    r = sub.add_parser("run", help="run a compiled .so on inputs saved with np.save")
    r.add_argument("model", help="model.so from `tvmpy compile`")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="one per input")
    r.add_argument("--output", metavar="OUT.npz", help="save the outputs (output0, output1, ...)")
    r.add_argument("--repeat", type=int, default=1,
                   help="run this many times and report the best warm time (default 1)")
    r.add_argument("--device", choices=("cpu", "opencl", "cuda", "vulkan", "webgpu"), default="cpu",
                   help="where the graph's tensors live and run (a model compiled with "
                        "--target opencl/cuda/vulkan/webgpu: that device; default cpu)")
    r.add_argument("--profile", type=int, default=0, metavar="N",
                   help="list the N slowest kernels (graph executor) or segments and kernels "
                        "(virtual machine), median of 10 runs (default 0)")
    r.set_defaults(func=cmd_run)
