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

``compile`` builds for the graph executor (one static schedule; dims may be expressions of the
input dims) unless ``relay.build_module.vm_reason`` says it cannot run the model (control flow,
sizes decided by values, operators without a compute): then for the Relay VM, exported as one
library with the bytecode inside (runtime/vm_library.py); ``run`` runs either kind.

``compile``/``bench``/``demo`` need onnx (and onnxruntime for the comparisons); ``run`` needs only
tvmpy and numpy. Errors print one ``tvmpy <command>: error: ...`` line and exit with status 2
(``DEBUG=1`` shows the traceback); a ``demo``/``bench`` whose outputs disagree with onnxruntime
exits with status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["main", "ProgressBar", "parse_shape_args", "parse_input_args"]

CHECK_RTOL = 1e-4  # max|tvmpy - onnxruntime| <= CHECK_RTOL * max|onnxruntime| (+ 1e-5)
# the most elements an input may have: its size in bytes (8-byte elements) stays below 2**63
MAX_ELEMENTS = 2**60


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


# ------------------------------------------------------------------------------------------------
# progress


class ProgressBar:
    """relay.build's ``progress(stage, done, total)`` callback drawn as one updating stderr line.

    On a terminal the line is redrawn in place (at most ~20 times a second); otherwise one line
    is written per finished stage so logs stay readable.
    """

    def __init__(self, label: str, stream: Any = None, width: int = 28):
        self.label, self.width = label, width
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()
        self._last = 0.0
        self._drawn = False

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        finished = total > 0 and done >= total
        if self.tty:
            if not finished and now - self._last < 0.05:
                return
            self._last = now
            frac = min(1.0, done / total) if total > 0 else 0.0
            fill = int(frac * self.width)
            bar = "#" * fill + "." * (self.width - fill)
            line = (f"{self.label}: {stage:<12} [{bar}] {done}/{total}  "
                    f"{now - self.t0:5.1f} s")
            self.stream.write("\r" + line[:120].ljust(100))
            self._drawn = True
        elif finished:
            self.stream.write(f"{self.label}: {stage} {done}/{total} ({now - self.t0:.1f} s)\n")
        self.stream.flush()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


# ------------------------------------------------------------------------------------------------
# argument parsing


def parse_shape_args(items: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """``["x=1,3,224,224", "mask=1,128"]`` -> ``{"x": (1, 3, 224, 224), "mask": (1, 128)}``."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, eq, dims = item.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        except ValueError:
            shape = None
        if not eq or not name or shape is None or any(d < 0 for d in shape):
            raise CliError(f"--input-shape {item!r}: expected NAME=D0,D1,... with integer "
                           "dimensions >= 0, e.g. input=1,3,224,224")
        if name in shapes:
            raise CliError(f"--input-shape: {name!r} given twice")
        if math.prod(shape) > MAX_ELEMENTS or any(d > MAX_ELEMENTS for d in shape):
            raise CliError(f"--input-shape {item!r}: {math.prod(shape)} elements is more than a "
                           "tensor can hold (at most 2**60)")
        shapes[name] = shape
    return shapes


def parse_input_args(items: Sequence[str] | None) -> dict[str, np.ndarray]:
    """``["x=x.npy"]`` -> ``{"x": np.load("x.npy")}`` (a clear error for missing/bad files)."""
    feeds: dict[str, np.ndarray] = {}
    for item in items or []:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            raise CliError(f"--input {item!r}: expected NAME=FILE.npy")
        if name in feeds:
            raise CliError(f"--input: {name!r} given twice")
        if not os.path.isfile(path):
            raise CliError(f"--input {name}: no such file {path!r}")
        try:
            value = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise CliError(f"--input {name}: {path!r} is not a .npy array file ({e})") from None
        if not isinstance(value, np.ndarray):
            raise CliError(f"--input {name}: {path!r} holds several arrays (an .npz); "
                           "save one array per input with np.save")
        feeds[name] = value
    return feeds


# ------------------------------------------------------------------------------------------------
# helpers shared by the commands


def _load_onnx(path: str) -> Any:
    if not os.path.isfile(path):
        raise CliError(f"no such file {path!r}")
    try:
        import onnx
    except ImportError:
        raise CliError("reading ONNX models needs the onnx package (pip install onnx)") from None
    if os.path.getsize(path) == 0:
        raise CliError(f"{path!r} is not an ONNX model (empty file)")
    try:
        model = onnx.load(path)
    except Exception as e:  # protobuf's DecodeError and friends
        raise CliError(f"{path!r} is not a readable ONNX model ({type(e).__name__}: {e})") from None
    if not model.HasField("graph") or not (model.graph.node or model.graph.output):
        raise CliError(f"{path!r} is not an ONNX model (it parses, but holds no graph)")
    return model


def _check_output(path: str) -> None:
    """Refuse an output path that cannot be written before any work (a missing directory...)."""
    from .runtime.linker import check_output_path

    try:
        check_output_path(path, "-o")
    except (ValueError, OSError) as e:
        raise CliError(str(e)) from None


def _model_inputs(model: Any) -> dict[str, tuple[list[Any], str]]:
    """Graph inputs that are not initializers: name -> (dims, numpy dtype); symbolic dims as str."""
    from onnx import helper

    inits = {i.name for i in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in tt.shape.dim]
        out[vi.name] = (dims, str(np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))))
    return out


def _resolve_shapes(model: Any, given: Mapping[str, tuple[int, ...]], symbolic: bool = False
                    ) -> dict[str, tuple[int, ...]]:
    """The input shapes: given ones, else the model's static ones; with ``symbolic`` an input
    with symbolic dims not given is left out (from_onnx keeps those dims as relay.Any)."""
    inputs = _model_inputs(model)
    unknown = sorted(set(given) - set(inputs))
    if unknown:
        raise CliError(f"--input-shape names {unknown}, which are not model inputs "
                       f"(inputs: {sorted(inputs)})")
    shapes = {}
    for name, (dims, _) in inputs.items():
        if name in given:
            if dims and len(given[name]) != len(dims):
                raise CliError(f"--input-shape {name}: the model declares {len(dims)} dimensions "
                               f"{dims}, got {len(given[name])}: {given[name]}")
            shapes[name] = tuple(given[name])
        elif all(isinstance(d, int) and d > 0 for d in dims):
            shapes[name] = tuple(dims)
        elif symbolic:
            continue
        else:
            raise CliError(f"input {name!r} has shape {dims} with symbolic dimensions: give it "
                           f"with --input-shape {name}=" + ",".join(
                               str(d) if isinstance(d, int) and d > 0 else "N" for d in dims))
    return shapes


def _random_feeds(model: Any, shapes: Mapping[str, tuple[int, ...]], seed: int = 1
                  ) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (_, dt) in _model_inputs(model).items():
        shape = shapes[name]
        if np.dtype(dt).kind in "iu":
            feeds[name] = rng.integers(0, 100, size=shape).astype(dt)
        elif np.dtype(dt).kind == "b":
            feeds[name] = rng.random(shape) < 0.5
        else:
            feeds[name] = rng.standard_normal(shape).astype(dt)
    return feeds


def _compile(model: Any, shapes: Mapping[str, tuple[int, ...]], opt_level: int, target: str,
             label: str, tuning_log: str | None = None) -> tuple[Any, float]:
    from .relay.build_module import vm_reason
    from .relay.testing import compare

    mod, params = compare.import_onnx(model, shapes)
    if vm_reason(mod):  # a relay.vm Executable (see cmd_compile)
        return _compile_vm(mod, params, opt_level, target, tuning_log)
    if tuning_log is not None:
        return _compile_tuned(mod, params, opt_level, target, label, tuning_log)
    bar = ProgressBar(label)
    try:
        return compare.build(mod, params, opt_level=opt_level, target=target, progress=bar)
    finally:
        bar.close()


def _compile_vm(mod: Any, params: Any, opt_level: int, target: str, tuning_log: str | None
                ) -> tuple[Any, float]:
    """``relay.vm.compile`` under ``PassContext(opt_level)`` (and the tuning log's configs)."""
    import contextlib

    from . import relay, transform

    if any(k in target.split()[0] for k in ("opencl", "cuda", "vulkan", "metal")) or \
            "-mtriple=wasm" in target:
        raise CliError(f"this model needs the virtual machine, which runs on the host CPU only; "
                       f"target {target!r} is not supported for it (use an 'llvm ...' target)")
    ctx: Any = contextlib.nullcontext()
    if tuning_log is not None:
        from .autotvm.task import dispatcher

        ctx = dispatcher.ApplyHistoryBest(_load_tuning_log(tuning_log))
    t0 = time.perf_counter()
    with ctx, _no_fallback_notice():
        with transform.PassContext(opt_level=opt_level):
            exe = relay.vm.compile(mod, target=target, params=dict(params or {}))
    return exe, time.perf_counter() - t0


@contextlib.contextmanager
def _no_fallback_notice() -> Iterator[None]:
    """Mute autotvm's untuned-workloads log line (the command reports what it needs)."""
    from .autotvm import GLOBAL_SCOPE

    old, GLOBAL_SCOPE.silent = GLOBAL_SCOPE.silent, True
    try:
        yield
    finally:
        GLOBAL_SCOPE.silent = old


def _load_tuning_log(path: str) -> list[Any]:
    from .autotvm import record

    if not os.path.isfile(path):
        raise CliError(f"--tuning-log: no such file {path!r} (write one with `tvmpy tune`)")
    return list(record.load_from_file(path))


def _compile_tuned(mod: Any, params: Any, opt_level: int, target: str, label: str,
                   tuning_log: str) -> tuple[Any, float]:
    """Build under ``apply_history_best(tuning_log)``; report applied / fallback workloads."""
    from .autotvm.task import dispatcher
    from .relay.testing import compare

    records = _load_tuning_log(tuning_log)
    applied: set[Any] = set()
    missed: set[Any] = set()

    class Counting(dispatcher.ApplyHistoryBest):
        def _query_inside(self, tgt: Any, workload: Any) -> Any:
            cfg = super()._query_inside(tgt, workload)
            if workload is not None:
                (missed if cfg is None else applied).add(workload)
            return cfg

    bar = ProgressBar(label)
    try:
        with _no_fallback_notice():  # the untuned workloads are counted in the line below
            with Counting(records) as ctx:
                lib, secs = compare.build(mod, params, opt_level=opt_level, target=target,
                                          progress=bar)
    finally:
        bar.close()
    ok = sum(1 for _, r in records if r.error_no == 0)
    print(f"tuning log {tuning_log}: {len(records)} records ({ok} successful, "
          f"{len(ctx.best_by_targetkey)} tuned workloads); applied tuned configs to "
          f"{len(applied)} workload(s), {len(missed)} tunable workload(s) fell back to the "
          "default schedule")
    return lib, secs


def _bytes_text(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _warn_memory(lib: Any) -> None:
    """Warn when the memory plan of a graph library needs more than this machine's memory,
    naming the largest tensor (symbolic dimensions count as 1)."""
    import json

    from .relay.backend.graph_plan_memory import plan_memory

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


def _summary(name: str, a: np.ndarray) -> str:
    line = f"{name}: shape {tuple(a.shape)} {a.dtype}"
    if a.size and a.dtype.kind in "fiub":
        f = a.astype(np.float64)
        line += f"  min {f.min():.6g}  max {f.max():.6g}  mean {f.mean():.6g}"
        if a.ndim >= 1 and a.shape[-1] > 1 and a.dtype.kind == "f":
            line += f"  argmax[-1] {np.asarray(a.reshape(-1, a.shape[-1]).argmax(-1))[:5].tolist()}"
    return line


# ------------------------------------------------------------------------------------------------
# commands


def cmd_compile(args: argparse.Namespace) -> int:
    from .relay.build_module import vm_reason
    from .relay.testing import compare

    model = _load_onnx(args.model)
    # symbolic dims not given stay symbolic: one library serves every size (relay.Any)
    wasm = "-mtriple=wasm" in args.target
    shapes = _resolve_shapes(model, parse_shape_args(args.input_shape), symbolic=not wasm)
    ext = ".wasm" if "-mtriple=wasm" in args.target else ".so"  # WebAssembly: runtime/wasm.py
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


def _calibration_samples(path: str, shapes: Mapping[str, tuple[int, ...]]
                         ) -> list[dict[str, np.ndarray]]:
    """Samples from an .npz holding one array per input: the input's shape (one sample) or a
    leading sample axis (N, *shape), or (N, *shape[1:]) for a batch-1 input."""
    if not os.path.isfile(path):
        raise CliError(f"no such file {path!r}")
    try:
        z = np.load(path)
    except Exception as e:  # noqa: BLE001 - a bad file is a user error
        raise CliError(f"{path!r} is not a readable .npz ({type(e).__name__}: {e})") from None
    missing = sorted(set(shapes) - set(z.files))
    if missing:
        raise CliError(f"--calibration {path}: no arrays for inputs {missing} (has {z.files})")
    per: dict[str, list[np.ndarray]] = {}
    for name, shape in shapes.items():
        a = z[name]
        if a.shape == tuple(shape):
            per[name] = [a]
        elif a.shape[1:] == tuple(shape):
            per[name] = list(a)
        elif shape and shape[0] == 1 and a.shape[1:] == tuple(shape[1:]):
            per[name] = [a[i:i + 1] for i in range(a.shape[0])]
        else:
            raise CliError(f"--calibration {path}: array {name} has shape {a.shape}; expected "
                           f"{tuple(shape)} or (N, ...) samples of it")
    counts = {len(v) for v in per.values()}
    if len(counts) != 1 or 0 in counts:
        raise CliError(f"--calibration {path}: the inputs hold different or zero sample counts "
                       f"{ {k: len(v) for k, v in per.items()} }")
    n = counts.pop()
    return [{k: v[i] for k, v in per.items()} for i in range(n)]


def cmd_quantize(args: argparse.Namespace) -> int:
    from . import relay
    from .relay.testing import compare

    model = _load_onnx(args.model)
    shapes = _resolve_shapes(model, parse_shape_args(args.input_shape))
    out = args.output or os.path.splitext(args.model)[0] + ".int8.so"
    _check_output(out)
    data = _calibration_samples(args.calibration, shapes) if args.calibration else None
    if data is None and args.calibrate_mode != "global_scale":
        raise CliError(f"--calibrate-mode {args.calibrate_mode} needs --calibration data.npz")
    skip = [int(s) for s in args.skip_conv.split(",") if s.strip()] if args.skip_conv else []
    mod, params = compare.import_onnx(model, shapes)
    t0 = time.perf_counter()
    with relay.quantize.qconfig(calibrate_mode=args.calibrate_mode, weight_scale=args.weight_scale,
                                per_channel=args.per_channel, skip_conv_layers=skip,
                                skip_dense_layer=not args.quantize_dense,
                                global_scale=args.global_scale):
        qmod, info = relay.quantize.quantize(mod, params, dataset=data, return_info=True)
    print(f"quantized {args.model} ({args.calibrate_mode}, weight scale {args.weight_scale}"
          f"{', per channel' if args.per_channel else ''}) in {time.perf_counter() - t0:.1f} s")
    print(f"  {'layer':<12} {'input scale':>12} {'weight scale':>13}")
    for name, s_in, s_w in info.layers:
        print(f"  {name:<12} {s_in:12.6g} {s_w:13.6g}")
    if info.skipped:
        print(f"  kept in float: {', '.join(info.skipped)}")
    if not info.layers:
        print("  warning: no layer was quantized (see --skip-conv / --quantize-dense)")
    feeds = data or [_random_feeds(model, shapes)]
    rep = relay.quantize.accuracy_report(mod, qmod, params, feeds, heldout=args.heldout)
    print(f"  {rep}")
    from . import transform

    with transform.PassContext(opt_level=3):
        lib = relay.build(qmod, target=args.target)
    lib.export_library(out)
    print(f"-> {out} ({os.path.getsize(out) / 1e6:.1f} MB)")
    return 0


class _GraphRunner:
    """``tvmpy run`` over a graph executor library (relay.build's export)."""

    executor = "graph executor"

    def __init__(self, lib: Any, dev: Any):
        from .contrib import graph_executor

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


def _vm_arrays(values: Sequence[Any]) -> list[np.ndarray]:
    """The VM's outputs as numpy arrays, sequences (lists of tensors) flattened in order."""
    out: list[np.ndarray] = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_vm_arrays(v))
        else:
            out.append(v.numpy())
    return out


class _VMRunner:
    """``tvmpy run`` over a VM executable library (relay.vm.compile's export)."""

    executor = "virtual machine"

    def __init__(self, lib: Any, dev: Any):
        from .runtime.vm import VirtualMachine

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
    from . import runtime
    from .runtime.vm_library import VMExecutableModule

    if not os.path.isfile(args.model):
        raise CliError(f"no such file {args.model!r}")
    feeds = parse_input_args(args.input)
    lib = runtime.load_module(args.model)
    devices = {"cpu": runtime.cpu, "opencl": runtime.opencl, "cuda": runtime.cuda}
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


def _vm_runner(exe: Any) -> Any:
    """``run(feeds) -> outputs`` (flattened, numpy) over a relay.vm Executable."""
    from .runtime import cpu
    from .runtime.vm import VirtualMachine

    vm = VirtualMachine(exe, cpu(0))

    def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        vm.run(**feeds)
        return _vm_arrays(vm.get_outputs())

    run.vm = vm  # type: ignore[attr-defined]
    return run


def _env_threads(name: str) -> int:
    """A thread count from the environment as tvmpy's pool reads it (runtime/parallel_pool.py:
    a whole number in 1..4095, else ignored): 0 when unset or not such a number."""
    text = os.environ.get(name, "").strip()
    try:
        n = int(text, 10)
    except ValueError:
        return 0
    return n if 0 < n < 4096 else 0


def bench_threads(requested: int | None) -> int:
    """The thread count every side of ``tvmpy bench`` / ``demo`` runs on.

    ``requested`` (``--threads``), else the count tvmpy's parallel loops take by themselves
    (``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs this process may run on).
    The count is written back to ``TVM_NUM_THREADS`` and ``OMP_NUM_THREADS`` before anything is
    built, so tvmpy's pool (and libgomp, for the C target) start with it; onnxruntime and torch
    are given the same count, so the ratio column compares like with like.
    """
    if requested is not None:
        if requested < 1:
            raise CliError(f"--threads must be at least 1, got {requested}")
        n = requested
    else:
        n = _env_threads("TVM_NUM_THREADS") or _env_threads("OMP_NUM_THREADS")
        if not n:
            affinity = getattr(os, "sched_getaffinity", None)
            n = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    os.environ["TVM_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(n)
    return n


def _threads_label(n: int) -> str:
    return "1 thread" if n == 1 else f"{n} threads"


def _bench(model: Any, shapes: Mapping[str, tuple[int, ...]], args: argparse.Namespace,
           title: str) -> int:
    """Build at each opt level, check against onnxruntime, print the latency table (every side
    on the same thread count, :func:`bench_threads`)."""
    from .relay.testing import compare

    threads = bench_threads(args.threads)
    each = _threads_label(threads)
    ort_name = f"onnxruntime ({each})"
    feeds = _random_feeds(model, shapes)
    for name, value in parse_input_args(getattr(args, "input", None)).items():
        if name not in feeds:
            raise CliError(f"--input {name}: not a model input (inputs: {sorted(feeds)})")
        if value.shape != feeds[name].shape or value.dtype != feeds[name].dtype:
            raise CliError(f"--input {name}: expected shape {feeds[name].shape} "
                           f"{feeds[name].dtype}, got {value.shape} {value.dtype}")
        feeds[name] = value
    try:
        ort = compare.ort_runner(model, threads=threads)
    except ImportError:
        raise CliError("the comparison needs onnxruntime (pip install onnxruntime)") from None
    want = ort(feeds)
    runners: dict[str, Any] = {}
    notes: dict[str, str] = {}
    ok = True
    print(title)
    torch_threads = f"; pytorch: torch.set_num_threads({threads})" if args.torch else ""
    print(f"threads: {threads} on every side (tvmpy: TVM_NUM_THREADS={threads}; onnxruntime: "
          f"intra_op_num_threads={threads}{torch_threads})")
    for level in args.opt_levels:
        lib, secs = _compile(model, shapes, level, args.target, f"build opt_level {level}",
                             tuning_log=getattr(args, "tuning_log", None))
        is_vm = not hasattr(lib, "get_graph_json")
        run = _vm_runner(lib) if is_vm else compare.tvm_runner(lib)
        got = run(feeds)
        worst = (0.0, 0.0)
        for g, w in zip(got, want):
            err, rel = compare.errors(g, w)
            worst = max(worst, (rel, err))
            ok &= err <= CHECK_RTOL * float(np.abs(w).max()) + 1e-5
        if is_vm:
            built = f"built for the virtual machine in {secs:.1f} s; {lib.stats}"
        else:
            g = compare.graph_summary(lib)
            built = (f"built in {secs:.1f} s; {g['kernels']} kernels; intermediates "
                     f"{g['planned_bytes'] / 1e6:.1f} MB planned vs "
                     f"{g['naive_bytes'] / 1e6:.1f} MB unshared")
        print(f"  tvmpy opt_level {level}: {built}\n"
              f"    vs onnxruntime: max abs error {worst[1]:.2e}, max rel error {worst[0]:.2e} "
              "(max|a-b| / max|ref|)")
        runners[f"tvmpy opt_level {level} ({each})"] = run
    runners[ort_name] = ort
    if args.torch:
        torch_name = f"pytorch (eager, {each})"
        try:
            import torch

            from .relay.testing.onnx_torch import torch_runner

            torch.set_num_threads(threads)
            tr = torch_runner(model)
            _, rel = compare.errors(tr(feeds)[0], want[0])
            runners[torch_name] = tr
            print(f"  pytorch eager: max rel error vs onnxruntime {rel:.2e}")
        except ImportError:
            notes[torch_name] = "torch not installed"
        except NotImplementedError as e:
            notes[torch_name] = str(e)[:80]
    print(f"timing: best of {args.repeat} interleaved rounds, batch as given, "
          "inputs fed and outputs fetched in every call")
    times: dict[str, Any] = dict(compare.time_sides(runners, feeds, repeat=args.repeat))
    times.update(notes)
    print(compare.latency_table(times, reference=ort_name))
    if args.profile:
        level = max(args.opt_levels)
        top = runners[f"tvmpy opt_level {level} ({each})"]
        if hasattr(top, "vm"):
            vm_rows = top.vm.profile(number=10, **feeds)
            rows = [{"time": t, "node": k, "shape": ()} for k, t in
                    sorted(vm_rows.items(), key=lambda kv: -kv[1])]
        else:
            rows = top.module.module.profile(number=10).sorted_rows()
        total = sum(r["time"] for r in rows) or 1.0
        what = "segments and kernels" if hasattr(top, "vm") else "kernels"
        print(f"slowest {what} at opt_level {level} (median of 10 runs; {len(rows)} {what}, "
              f"sum {total * 1e3:.2f} ms):")
        for r in rows[:args.profile]:
            shape = f" -> {tuple(r['shape'])}" if r["shape"] else ""
            print(f"  {r['time'] * 1e3:8.3f} ms {r['time'] / total:6.1%}  {r['node']}{shape}")
    if ok:
        print(f"check passed: every tvmpy output is within {CHECK_RTOL:g} x max|output| of "
              "onnxruntime's")
    else:
        print(f"MISMATCH: tvmpy's outputs differ from onnxruntime's by more than {CHECK_RTOL} "
              "relative to the output's scale", file=sys.stderr)
        return 1
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    model = _load_onnx(args.model)
    shapes = _resolve_shapes(model, parse_shape_args(args.input_shape))
    return _bench(model, shapes, args, f"{args.model}: inputs {shapes}")


def cmd_tune(args: argparse.Namespace) -> int:
    import importlib

    from . import autotvm
    from .autotvm.measure.rpc_runner import NoDeviceLeft
    from .relay.testing import compare

    tm = importlib.import_module("tvmpy.autotvm.tune_model")
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


def _log_errors(log: str) -> list[int]:
    """The error number of each record of the tuning log ``log`` ([] when there is none)."""
    from .autotvm import record

    if not os.path.exists(log):
        return []
    return [int(res.error_no) for _, res in record.load_from_file(log)]


def _rpc_measure_option(args: argparse.Namespace) -> dict:
    """``--rpc-key KEY --tracker HOST:PORT``: measure on the fleet's devices of KEY."""
    from . import autotvm

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


def cmd_demo(args: argparse.Namespace) -> int:
    from .relay.testing import onnx_models

    kw: dict[str, Any] = {"batch": args.batch}
    if args.model != "bert_encoder":
        kw["image"] = args.image
    try:
        model = onnx_models.MODELS[args.model](**kw)
    except ImportError:
        raise CliError("the demo needs onnx and onnxruntime (pip install onnx onnxruntime)"
                       ) from None
    shapes = _resolve_shapes(model, {})
    return _bench(model, shapes, args,
                  f"demo: built-in {args.model} (random weights, seed 0), inputs {shapes}")


# ------------------------------------------------------------------------------------------------


def _opt_levels(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or any(not 0 <= v <= 3 for v in levels):
        raise argparse.ArgumentTypeError(f"expected opt levels in 0..3 like '0,3', got {text!r}")
    return levels


def _add_timing_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default="llvm", help="compilation target (default: llvm, host CPU)")
    p.add_argument("--opt-levels", type=_opt_levels, default=[0, 3],
                   help="opt levels to build and time, comma separated (default: 0,3)")
    p.add_argument("--repeat", type=int, default=5, help="timing rounds (best is reported)")
    p.add_argument("--threads", type=int, default=None,
                   help="threads of every side: tvmpy (TVM_NUM_THREADS), onnxruntime "
                        "(intra_op_num_threads) and pytorch (default: TVM_NUM_THREADS, else "
                        "OMP_NUM_THREADS, else the CPUs this process may run on)")
    p.add_argument("--no-torch", dest="torch", action="store_false",
                   help="leave out the eager PyTorch column")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="list the N slowest kernels of the highest opt level (default 0)")


def make_parser() -> argparse.ArgumentParser:
    from .rpc import ports as rpc_ports

    p = argparse.ArgumentParser(prog="tvmpy", description="tvmpy: compile an ONNX model to one "
                                "deployable library, run it, time it.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

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

    q = sub.add_parser("quantize", help="quantize an ONNX model to int8 (relay.quantize) and "
                       "compile it; prints the per-layer scales and the accuracy check")
    q.add_argument("model", help="model.onnx (fp32)")
    q.add_argument("--calibration", metavar="DATA.npz",
                   help="calibration inputs: one array per input, with a leading sample axis")
    q.add_argument("-o", "--output", help="output library (default: model.int8.so)")
    q.add_argument("--target", default="llvm")
    q.add_argument("--calibrate-mode", default="kl_divergence",
                   choices=["kl_divergence", "percentile", "max", "global_scale"])
    q.add_argument("--weight-scale", default="max", choices=["max", "power2"])
    q.add_argument("--global-scale", type=float, default=8.0)
    q.add_argument("--per-channel", action="store_true", help="one weight scale per channel")
    q.add_argument("--skip-conv", default="0", metavar="I,J",
                   help="conv2d layers (graph order) kept in float (default: 0; '' for none)")
    q.add_argument("--quantize-dense", action="store_true", help="quantize dense layers too")
    q.add_argument("--heldout", type=int, default=50, metavar="N",
                   help="random held-out inputs for the accuracy check (default 50)")
    q.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...")
    q.set_defaults(func=cmd_quantize)

    r = sub.add_parser("run", help="run a compiled .so on inputs saved with np.save")
    r.add_argument("model", help="model.so from `tvmpy compile`")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="one per input")
    r.add_argument("--output", metavar="OUT.npz", help="save the outputs (output0, output1, ...)")
    r.add_argument("--repeat", type=int, default=1,
                   help="run this many times and report the best warm time (default 1)")
    r.add_argument("--device", choices=("cpu", "opencl", "cuda"), default="cpu",
                   help="where the graph's tensors live and run (a model compiled with "
                        "--target opencl/cuda: that device; default cpu)")
    r.add_argument("--profile", type=int, default=0, metavar="N",
                   help="list the N slowest kernels (graph executor) or segments and kernels "
                        "(virtual machine), median of 10 runs (default 0)")
    r.set_defaults(func=cmd_run)

    b = sub.add_parser("bench", help="latency of tvmpy (opt 0/3) vs onnxruntime and pytorch")
    b.add_argument("model", help="model.onnx")
    b.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...")
    b.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="an input's value (default: random, floats N(0,1), integers in [0,100))")
    b.add_argument("--tuning-log", metavar="LOG",
                   help="build with the best configs of this AutoTVM log (from `tvmpy tune`)")
    _add_timing_args(b)
    b.set_defaults(func=cmd_bench)

    t = sub.add_parser("tune", help="tune the model's operators with AutoTVM into a log")
    t.add_argument("model", help="model.onnx")
    t.add_argument("--trials", type=int, required=True,
                   help="total measurement budget, split between the tasks by their FLOPs")
    t.add_argument("--per-task", action="store_true",
                   help="--trials is the budget of each task instead of the total")
    t.add_argument("--log", required=True, metavar="LOG",
                   help="AutoTVM log to append to (an existing log is resumed)")
    t.add_argument("--tuner", choices=("xgb", "ga", "random", "grid"), default="xgb")
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

    d = sub.add_parser("demo", help="built-in ResNet-18: compile, check vs onnxruntime, time")
    d.add_argument("--model", choices=("resnet18", "mobilenet_v2", "bert_encoder"),
                   default="resnet18")
    d.add_argument("--image", type=int, default=224, help="image size (default 224)")
    d.add_argument("--batch", type=int, default=1)
    _add_timing_args(d)
    d.set_defaults(func=cmd_demo)

    from .testing.fuzz import cli as fuzz_cli

    z = sub.add_parser("fuzz", help="differential fuzzing: random models vs onnxruntime")
    fuzz_cli.add_arguments(z)
    z.set_defaults(func=fuzz_cli.run)

    from .rpc import cli as rpc_cli

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


if __name__ == "__main__":
    sys.exit(main())
