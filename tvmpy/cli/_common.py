"""What the ``tvmpy`` commands share: the user-error type, the build progress bar, argument
parsing, loading an ONNX model and resolving its input shapes, and building it for the graph
executor or the virtual machine (with or without a tuning log)."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

# the most elements an input may have: its size in bytes (8-byte elements) stays below 2**63
MAX_ELEMENTS = 2**60


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


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
    from ..runtime.linker import check_output_path

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
    from ..relay.build_module import vm_reason
    from ..relay.testing import compare

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

    from .. import relay, transform

    if any(k in target.split()[0] for k in ("opencl", "cuda", "vulkan", "metal", "webgpu")) or \
            "-mtriple=wasm" in target:
        raise CliError(f"this model needs the virtual machine, which runs on the host CPU only; "
                       f"target {target!r} is not supported for it (use an 'llvm ...' target)")
    ctx: Any = contextlib.nullcontext()
    if tuning_log is not None:
        from ..autotvm.task import dispatcher

        ctx = dispatcher.ApplyHistoryBest(_load_tuning_log(tuning_log))
    t0 = time.perf_counter()
    with ctx, _no_fallback_notice():
        with transform.PassContext(opt_level=opt_level):
            exe = relay.vm.compile(mod, target=target, params=dict(params or {}))
    return exe, time.perf_counter() - t0


@contextlib.contextmanager
def _no_fallback_notice() -> Iterator[None]:
    """Mute autotvm's untuned-workloads log line (the command reports what it needs)."""
    from ..autotvm import GLOBAL_SCOPE

    old, GLOBAL_SCOPE.silent = GLOBAL_SCOPE.silent, True
    try:
        yield
    finally:
        GLOBAL_SCOPE.silent = old


def _load_tuning_log(path: str) -> list[Any]:
    from ..autotvm import record

    if not os.path.isfile(path):
        raise CliError(f"--tuning-log: no such file {path!r} (write one with `tvmpy tune`)")
    return list(record.load_from_file(path))


def _compile_tuned(mod: Any, params: Any, opt_level: int, target: str, label: str,
                   tuning_log: str) -> tuple[Any, float]:
    """Build under ``apply_history_best(tuning_log)``; report applied / fallback workloads.
    An auto_scheduler log (``tvmpy tune --scheduler auto``) is applied with
    ``auto_scheduler.ApplyHistoryBest`` and ``relay.backend.use_auto_scheduler``."""
    from ..autotvm.task import dispatcher
    from ..relay.testing import compare

    if is_auto_scheduler_log(tuning_log):
        return _compile_auto_scheduled(mod, params, opt_level, target, label, tuning_log)
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


def is_auto_scheduler_log(path: str) -> bool:
    """Whether ``path``'s first record is in auto_scheduler's format (``{"i": ..., "r": ...}``,
    or the task scheduler's ``{"default": ...}`` line of a default schedule's time)."""
    import json

    if not os.path.isfile(path):
        raise CliError(f"--tuning-log: no such file {path!r} (write one with `tvmpy tune`)")
    with open(path) as f:
        for line in f:
            if line.strip() and not line.lstrip().startswith("#"):
                try:
                    rec = json.loads(line)
                except (ValueError, RecursionError):  # not JSON, or nested too deeply
                    return False
                return isinstance(rec, dict) and ("i" in rec and "r" in rec or "default" in rec)
    return False


def _compile_auto_scheduled(mod: Any, params: Any, opt_level: int, target: str, label: str,
                            tuning_log: str) -> tuple[Any, float]:
    from .. import auto_scheduler
    from ..relay.testing import compare

    ctx = auto_scheduler.ApplyHistoryBest(tuning_log)
    bar = ProgressBar(label)
    try:
        with ctx:
            lib, secs = compare.build(mod, params, opt_level=opt_level, target=target,
                                      progress=bar,
                                      config={"relay.backend.use_auto_scheduler": True})
    finally:
        bar.close()
    print(f"auto_scheduler log {tuning_log}: best records of {len(ctx.best)} subgraph(s) "
          "applied where the model has them (the others keep their default schedule)")
    return lib, secs


def _vm_arrays(values: Sequence[Any]) -> list[np.ndarray]:
    """The VM's outputs as numpy arrays, sequences (lists of tensors) flattened in order."""
    out: list[np.ndarray] = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_vm_arrays(v))
        else:
            out.append(v.numpy())
    return out
