"""``LocalRunner``: time built candidates in a separate, persistent runner process.

The runner process (a fresh interpreter, see workers.py) loads each exported library with
``load_module``, calls it once on random inputs (seeded, never all zeros; the same for every
candidate of a task), optionally compares all argument arrays with the reference outputs, then
times it with ``time_evaluator(number, repeat, min_repeat_ms)``; with
``enable_cpu_cache_flush`` a 64 MiB buffer is streamed through the caches before each repeat
(``f_preproc="cache_flush_cpu_non_first_arg"``; CPU modules only). A GPU module (an OpenCL or
CUDA build, ``GPUHostModule``) runs on its own device (``mod.device``, e.g. ``tvm.opencl(0)``):
the inputs are copied to device memory, and ``time_evaluator`` times on that device (waiting
for the queue before reading the clock); outputs are copied back for the correctness check.
The device compiler rejecting the kernel source (OpenCL's clBuildProgram, on first load) is
``COMPILE_DEVICE``.

``cold_weights`` (not in TVM; CPU modules): the task's weight inputs (its ``weight_inputs``:
argument positions that are the model's constants, set by the auto-scheduler's relay tasks)
are rotated through copies, one per call, so that between two reads of a copy as many weight
bytes are read as inside the model, where every other kernel's weights are read between two
runs of this one (the model's weight bytes per run, ``model_weight_bytes``: :func:`cold_span`);
the other arguments (activations, written last by the kernel before) stay warm. A task without
weight inputs is timed as without the option. Unlike ``enable_cpu_cache_flush`` (everything
evicted, activations and the last-level cache included), this keeps a kernel's own warm state.

Outcomes per candidate: ``NO_ERROR`` with one cost per repeat (seconds per call); the kernel
returns an error or the library does not load -> ``RUNTIME_DEVICE``; the process dies (segfault
in the kernel...) -> ``RUNTIME_DEVICE`` with ``"process crashed (signal N, SIGSEGV)"`` and a new
runner process for the next candidate; no answer within ``timeout`` -> ``RUN_TIMEOUT`` (killed
and respawned); outputs differ from the reference -> ``WRONG_ANSWER``.

Reference (``check_correctness=True``): the task's first config (``config_space.get(0)``, as
TVM), built by the builder and run once on the same inputs; if it cannot be built or run, the
first candidate that runs becomes the reference. The references of the last
``reference_cache_size`` tasks are kept (by task object, in this process and in the runner
process), so a runner shared by tasks that alternate (auto_scheduler's TaskScheduler with one
``runner=``) builds each task's reference once, not on every switch.
"""

from __future__ import annotations

import os
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .measure import Builder, BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, Runner
from .workers import WorkerDied, WorkerProcess, get_context

__all__ = ["LocalRunner", "random_inputs", "compare_outputs"]

_FLOAT_RTOL = 1e-3


def random_inputs(arg_info: Sequence[tuple], seed: int) -> list[np.ndarray]:
    """Random arrays for ``[(shape, dtype), ...]``: floats in [-1, 1), integers in [1, 8),
    booleans random; deterministic for a seed."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in arg_info:
        dt = np.dtype(dtype)
        if dt.kind == "f":
            a = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
        elif dt.kind in "iu":
            a = rng.integers(1, 8, size=shape).astype(dt)
        elif dt.kind == "b":
            a = rng.integers(0, 2, size=shape).astype(dt)
        else:
            raise TypeError(f"random_inputs: unsupported dtype {dtype}")
        out.append(a)
    return out


def compare_outputs(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> str | None:
    """None when every array matches, else a message naming the first mismatching argument.

    Floats: ``|a - e| <= rtol * |e| + rtol * max|e|`` (rtol 1e-3, NaN equals NaN), so that a
    different summation order passes; integers and booleans: exact."""
    if len(actual) != len(expected):
        return f"{len(actual)} arguments, the reference has {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        if a.shape != e.shape or a.dtype != e.dtype:
            return (f"argument {k}: {a.dtype}{list(a.shape)} but the reference is "
                    f"{e.dtype}{list(e.shape)}")
        if e.dtype.kind == "f":
            scale = float(np.nanmax(np.abs(e))) if e.size and not np.all(np.isnan(e)) else 0.0
            ok = np.isclose(a, e, rtol=_FLOAT_RTOL, atol=_FLOAT_RTOL * scale, equal_nan=True)
        else:
            ok = a == e
        if not np.all(ok):
            bad = int(np.size(ok) - np.count_nonzero(ok))
            idx = np.unravel_index(int(np.argmin(ok.ravel())), e.shape) if e.ndim else ()
            return (f"argument {k}: {bad} of {e.size} elements differ from the reference "
                    f"(at {tuple(int(x) for x in idx)}: {a[idx]!r} vs {e[idx]!r})")
    return None


# ---- child side ---------------------------------------------------------------------------------
def _runner_init() -> dict:
    import tvmpy.runtime  # noqa: F401 - import once, before the first request

    return {"refs": {}, "inputs": {}}


MAX_COLD_COPIES = 64
MAX_COLD_BYTES = 512 << 20
"""Bounds of ``cold_weights``' copies (their count, and their bytes together)."""


def cold_span(weight_bytes: int, model_weight_bytes: int) -> int:
    """How many copies of a task's weights (``weight_bytes`` a call) ``cold_weights`` rotates
    through: enough to span ``model_weight_bytes`` (the weights the model reads between two
    runs of the kernel), 1 to :data:`MAX_COLD_COPIES`, at most :data:`MAX_COLD_BYTES`."""
    if weight_bytes <= 0:
        return 1
    span = min(int(model_weight_bytes), MAX_COLD_BYTES)
    return max(1, min(MAX_COLD_COPIES, -(-span // weight_bytes), MAX_COLD_BYTES // weight_bytes))


def _time_cold(mod: Any, args: list, weights: Sequence[int], model_bytes: int, number: int,
               repeat: int, min_repeat_ms: float, cpu_time: bool = False) -> list[float] | None:
    """Seconds per call for each repeat, the weight arguments rotated (see ``cold_weights``);
    ``cpu_time``: the process's CPU time, not the wall clock (see ``LocalRunner``). None when
    there is nothing to rotate and ``cpu_time`` is off (the caller times as usual)."""
    from tvmpy.runtime import ndarray

    weights = [i for i in weights if 0 <= i < len(args)]
    wbytes = sum(int(args[i].numpy().nbytes) for i in weights)
    copies = cold_span(wbytes, model_bytes)
    if copies < 2 and not cpu_time:
        return None
    f = mod.get_function(mod.entry_name)
    sets = [args]
    for _ in range(copies - 1):
        a = list(args)
        for i in weights:
            a[i] = ndarray.array(args[i].numpy())
        sets.append(a)
    raws = [f.prepare(a)[0] for a in sets]  # (the arrays stay alive in ``sets``)
    cfunc, clock = f._cfunc, (time.process_time if cpu_time else time.perf_counter)
    for raw in raws:  # warm-up: every copy once
        cfunc(*raw)
    n, k, results = int(number), 0, []
    for _ in range(int(repeat)):
        while True:
            t0 = clock()
            for _ in range(n):
                rc = cfunc(*raws[k])
                k = (k + 1) % copies
            elapsed = clock() - t0
            if rc != 0:
                f._raise_error(rc)
            if min_repeat_ms <= 0 or elapsed * 1e3 >= min_repeat_ms:
                break
            n = max(int(min_repeat_ms / max(elapsed * 1e3 / n, 1e-6)) + 1, int(n * 1.618))
        results.append(elapsed / n)
    return results


def _runner_handle(state: dict, msg: tuple) -> tuple:
    if msg[0] == "ref":  # ("ref", key, outputs, how many references to keep)
        refs = state["refs"]
        refs[msg[1]] = msg[2]
        while len(refs) > msg[3]:
            del refs[next(iter(refs))]  # the oldest sent (the parent mirrors this order)
        return ("ok",)
    (_, path, arg_info, number, repeat, min_repeat_ms, flush, seed, ref_key,
     want_outputs, cold, cpu_time) = msg
    from tvmpy import runtime
    from tvmpy.runtime import ndarray

    rt_error = int(MeasureErrorNo.RUNTIME_DEVICE)
    try:
        mod = runtime.load_module(path)
    except Exception as e:  # noqa: BLE001
        return ("error", rt_error, f"cannot load the built library: {type(e).__name__}: {e}")
    key = (tuple(arg_info), seed)
    if key not in state["inputs"]:
        state["inputs"] = {key: random_inputs(arg_info, seed)}
    # a GPU module (GPUHostModule) runs on its device: inputs in device memory, timed there
    dev = getattr(mod, "device", None) or runtime.cpu(0)
    on_gpu = dev.device_type != runtime.cpu(0).device_type
    try:
        args = [ndarray.array(x, dev) for x in state["inputs"][key]]
        mod(*args)  # checked call on fresh copies of the inputs
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {e}"
        if on_gpu and "build failed" in str(e):  # the device compiler (OpenCL) refused it
            return ("error", int(MeasureErrorNo.COMPILE_DEVICE), msg)
        return ("error", rt_error, msg)
    outputs = [a.numpy() for a in args] if (want_outputs or ref_key is not None) else None
    if ref_key is not None:
        ref = state["refs"].get(ref_key)
        if ref is None:
            return ("error", int(MeasureErrorNo.UNKNOWN_ERROR), "runner lost its reference")
        bad = compare_outputs(outputs, ref)
        if bad is not None:
            return ("error", int(MeasureErrorNo.WRONG_ANSWER), bad)
    try:
        costs = _time_cold(mod, args, cold[0] if cold else (), cold[1] if cold else 0, number,
                           repeat, min_repeat_ms, cpu_time) \
            if (cold or cpu_time) and not on_gpu else None
        if costs is None:
            timer = mod.time_evaluator(mod.entry_name, dev, number=number, repeat=repeat,
                                       min_repeat_ms=min_repeat_ms,
                                       f_preproc="cache_flush_cpu_non_first_arg"
                                       if flush and not on_gpu else "")
            costs = list(timer(*args).results)
    except Exception as e:  # noqa: BLE001
        return ("error", rt_error, f"{type(e).__name__}: {e}")
    return ("ok", tuple(costs), outputs if want_outputs else None)


# ---- parent side --------------------------------------------------------------------------------
class LocalRunner(Runner):
    """Time candidates in a runner process (see the module docstring).

    ``number``/``repeat``/``min_repeat_ms``: as ``time_evaluator``; ``timeout``: seconds per
    candidate run (load, check and timing); ``enable_cpu_cache_flush``: flush caches before each
    repeat; ``check_correctness``: compare each candidate with the reference;
    ``cooldown_interval``: seconds to sleep between candidates; ``max_runs_per_worker``: the
    runner process is replaced after this many runs (every loaded library stays mapped);
    ``mp_context``: as for ``LocalBuilder`` (avoid ``"fork"`` for kernels that use OpenMP:
    libgomp runs them serially in a forked child); ``reference_cache_size``: the references
    of this many tasks are kept (the most recently used); ``cold_weights``: the task's weight
    inputs rotated through copies (see the module docstring); ``cpu_time`` (not in TVM; CPU
    modules): time with the runner process's CPU time instead of the wall clock, so that other
    processes sharing the cores do not inflate a cost. Only a latency for kernels that run on
    one thread (``TVM_NUM_THREADS=1``): the CPU time of several threads adds up."""

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0,
                 timeout: float = 10, enable_cpu_cache_flush: bool = False,
                 check_correctness: bool = True, cooldown_interval: float = 0.0,
                 max_runs_per_worker: int = 256, mp_context: str | None = None,
                 startup_timeout: float = 120, seed: int = 0, reference_cache_size: int = 16,
                 cold_weights: bool = False, cpu_time: bool = False):
        for name, v in (("number", number), ("repeat", repeat)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"LocalRunner: {name} must be a positive int, got {v!r}")
        if min_repeat_ms < 0 or cooldown_interval < 0:
            raise ValueError("LocalRunner: min_repeat_ms and cooldown_interval must be >= 0")
        if not isinstance(reference_cache_size, int) or reference_cache_size < 1:
            raise ValueError(f"LocalRunner: reference_cache_size must be a positive int, got "
                             f"{reference_cache_size!r}")
        if not timeout or timeout <= 0:
            raise ValueError(f"LocalRunner: timeout must be > 0 seconds, got {timeout!r}")
        self.number, self.repeat, self.min_repeat_ms = number, repeat, float(min_repeat_ms)
        self.timeout = float(timeout)
        self.enable_cpu_cache_flush = bool(enable_cpu_cache_flush)
        self.cold_weights = bool(cold_weights)
        self.cpu_time = bool(cpu_time)
        self.check_correctness = bool(check_correctness)
        self.cooldown_interval = float(cooldown_interval)
        self.max_runs_per_worker = int(max_runs_per_worker)
        self.startup_timeout = float(startup_timeout)
        self.seed = int(seed)
        self._ctx = get_context(mp_context)
        self._holder: list[WorkerProcess | None] = [None]
        self._task: Any = None
        self._builder: Builder | None = None
        self._ref: list[np.ndarray] | None = None
        self._ref_key = 0
        self._ref_tried = False
        self._keys = 0  # reference keys handed out
        self.reference_cache_size = reference_cache_size
        # id(task) -> (task, reference, its key, tried): the other tasks' references, least
        # recently used first, at most reference_cache_size - 1 of them
        self._refs: OrderedDict[int, tuple[Any, list[np.ndarray] | None, int, bool]] = OrderedDict()
        self._sent: OrderedDict[int, None] = OrderedDict()  # keys the runner process holds
        self._sent_to: WorkerProcess | None = None
        self._finalizer = weakref.finalize(self, _kill_worker, self._holder)

    @property
    def _worker(self) -> WorkerProcess | None:
        return self._holder[0]

    @_worker.setter
    def _worker(self, w: WorkerProcess | None) -> None:
        self._holder[0] = w

    # -- task, reference and process --
    def set_task(self, task: Any, builder: Builder | None = None) -> None:
        if task is not self._task:
            hit = self._refs.pop(id(task), None)
            if self._task is not None:  # keep its reference for when it comes back
                self._refs[id(self._task)] = (self._task, self._ref, self._ref_key,
                                              self._ref_tried)
                while len(self._refs) >= self.reference_cache_size:  # with the new task's
                    self._refs.popitem(last=False)
            if hit is not None and hit[0] is task:
                _, self._ref, self._ref_key, self._ref_tried = hit
            else:
                self._ref, self._ref_key, self._ref_tried = None, 0, False
        self._task, self._builder = task, builder

    def get_build_kwargs(self) -> dict:
        return {}

    def _ensure_worker(self) -> WorkerProcess:
        w = self._worker
        if w is not None and w.jobs_done >= self.max_runs_per_worker:
            w.shutdown()
            w = self._worker = None
        if w is None:
            w = self._start_worker()
        if not w.ready:
            try:
                w.wait_ready(self.startup_timeout)
            except BaseException:
                self._worker = None
                raise
        if w is not self._sent_to:  # a new runner process holds no reference yet
            self._sent.clear()
            self._sent_to = w
        if self._ref is not None and self._ref_key not in self._sent:
            self._send_reference(w)
        return w

    def _send_reference(self, w: WorkerProcess) -> None:
        """Send the current task's reference; the runner process keeps the last
        ``reference_cache_size`` sent (``_sent`` mirrors which)."""
        w.send(("ref", self._ref_key, self._ref, self.reference_cache_size))
        if w.recv(self.startup_timeout) is None:
            raise RuntimeError("runner process did not accept the reference outputs")
        self._sent[self._ref_key] = None
        while len(self._sent) > self.reference_cache_size:
            self._sent.popitem(last=False)

    def _start_worker(self) -> WorkerProcess:
        w = WorkerProcess(self._ctx, _runner_handle, _runner_init, ())
        self._worker = w
        return w

    def _drop_worker(self, respawn: bool = True) -> None:
        """Kill the runner process; start the next one now, so that its start-up overlaps
        with the caller's work (``_ensure_worker`` waits for it)."""
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
        if respawn:
            self._start_worker()

    def close(self) -> None:
        if self._worker is not None:
            self._worker.shutdown()
            self._worker = None

    def _set_reference(self, outputs: list[np.ndarray]) -> None:
        self._keys += 1
        self._ref_key = self._keys
        self._ref = outputs  # sent to the runner process before the next run (_ensure_worker)

    def _make_reference(self, target: Any) -> None:
        """Build and run ``config_space.get(0)`` once; on failure, a candidate becomes it."""
        self._ref_tried = True
        task, builder = self._task, self._builder
        space = getattr(task, "config_space", None)
        if builder is None or space is None or len(space) == 0:
            return
        ref_input = MeasureInput(target, task, space.get(0))
        (bres,) = builder.build([ref_input])
        if bres.error_no != 0:
            return
        status, payload, _ = self._run_one(bres, ref_key=None, want_outputs=True, timed=False)
        _remove(bres.filename)
        if status == 0 and payload[1] is not None:
            self._set_reference(list(payload[1]))

    def _run_one(self, bres: BuildResult, ref_key: int | None, want_outputs: bool,
                 timed: bool = True) -> tuple[int, Any, float]:
        """(error_no, payload, seconds): payload is (costs, outputs) or an error message.
        ``timed=False``: one timed call only (the reference needs its outputs, not timings)."""
        w = self._ensure_worker()
        t0 = time.monotonic()
        w.send(("run", bres.filename, bres.arg_info, self.number if timed else 1,
                self.repeat if timed else 1, self.min_repeat_ms if timed else 0.0, self.enable_cpu_cache_flush, self.seed, ref_key,
                want_outputs, self._cold() if timed else None, self.cpu_time and timed))
        try:
            msg = w.recv(self.timeout)
        except WorkerDied as e:
            self._drop_worker()
            return int(MeasureErrorNo.RUNTIME_DEVICE), f"runner {e}", time.monotonic() - t0
        except BaseException:  # interrupted: its late answer must not answer a later request
            self._drop_worker(respawn=False)
            raise
        elapsed = time.monotonic() - t0
        if msg is None:
            self._drop_worker()
            return (int(MeasureErrorNo.RUN_TIMEOUT), f"run timed out after {self.timeout:g} s",
                    elapsed)
        if msg[0] == "ok":
            return 0, (msg[1], msg[2]), elapsed
        return msg[1], msg[2], elapsed

    def _cold(self) -> tuple[tuple[int, ...], int] | None:
        """``(weight input positions, model weight bytes)`` of the task under ``cold_weights``."""
        if not self.cold_weights:
            return None
        w = tuple(getattr(self._task, "weight_inputs", ()) or ())
        return (w, int(getattr(self._task, "model_weight_bytes", 0) or 0)) if w else None

    # -- running --
    def run(self, measure_inputs: Sequence[MeasureInput],
            build_results: Sequence[BuildResult]) -> list[MeasureResult]:
        if len(measure_inputs) != len(build_results):
            raise ValueError(f"LocalRunner.run: {len(measure_inputs)} inputs but "
                             f"{len(build_results)} build results")
        results = []
        for k, (inp, bres) in enumerate(zip(measure_inputs, build_results)):
            if inp.task is not self._task:
                self.set_task(inp.task, self._builder)
            if bres.error_no != 0:
                results.append(MeasureResult((bres.error or "build failed",), int(bres.error_no),
                                             bres.time_cost, time.time()))
                continue
            if k and self.cooldown_interval:
                time.sleep(self.cooldown_interval)
            try:
                if self.check_correctness and self._ref is None and not self._ref_tried:
                    self._make_reference(inp.target)
                want = self.check_correctness and self._ref is None
                ref_key = self._ref_key if self.check_correctness and self._ref is not None else None
                status, payload, elapsed = self._run_one(bres, ref_key, want)
            finally:
                _remove(bres.filename)
            if status == 0:
                costs, outputs = payload
                if want and outputs is not None:
                    self._set_reference(list(outputs))
                results.append(MeasureResult(tuple(costs), 0, bres.time_cost + elapsed,
                                             time.time()))
            else:
                results.append(MeasureResult((str(payload),), int(status),
                                             bres.time_cost + elapsed, time.time()))
        return results


def _kill_worker(holder: list) -> None:
    if holder[0] is not None:
        holder[0].kill()
        holder[0] = None


def _remove(path: str | None) -> None:
    if path:
        try:
            os.remove(path)
        except OSError:
            pass
