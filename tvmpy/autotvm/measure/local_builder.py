"""``LocalBuilder``: compile candidates in parallel worker processes, with a timeout each.

Each worker (a fresh interpreter, see workers.py) unpickles each task once, the first time it
is asked to build for it (the request carries the task then), then per request instantiates
one config (``task.instantiate(config) -> (schedule, args)``), compiles it with
``tvm.build(s, args, target)`` and exports the library to a temporary ``.so`` that the runner
loads. Outcomes:

- the template raises -> ``INSTANTIATION_ERROR`` (message and the exception type);
- ``tvm.build`` / export raises, or the worker crashes while compiling -> ``COMPILE_HOST``;
- GPU targets (opencl, cuda, nvptx): the lowered kernel exceeds the target's limits (threads
  per block, shared memory per block: ``tir.analysis.verify_gpu_code``) ->
  ``INSTANTIATION_ERROR`` (an invalid point, as TVM); device code generation fails ->
  ``COMPILE_DEVICE``; the export holds the launch plan and the device source;
- no answer within ``timeout`` seconds -> ``BUILD_TIMEOUT``: the worker is killed and replaced.

Workers are recycled after ``max_builds_per_worker`` builds (LLVM keeps memory per module), and
are kept between batches and across tasks: a tuning run of many tasks (``tune_tasks``, the
auto-scheduler's task scheduler) does not pay a worker start per task switch, and a batch
mixing tasks is built in one pass. A worker is restarted for a task only where keeping it
would be unsafe: the task's template (or workload function) has the name of another
definition that worker already loaded (a template re-registered with ``override=True``). Each build runs under the PassContext that is
current when ``build`` is called (its opt level, required/disabled passes and config, e.g.
``tir.LoopPartition.max_growth``), as ``relay.build`` compiles its kernels under its own: a
candidate is measured as it will be deployed. A worker registers the task's template by importing
the module that defines it; a template defined in the user's ``__main__`` (a tuning script, a
notebook) or in a closure is sent by value with cloudpickle instead, so a script written at
module top level tunes without ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import collections
import multiprocessing.connection
import os
import pickle
import shutil
import tempfile
import time
import warnings
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

from .measure import Builder, BuildResult, MeasureErrorNo, MeasureInput
from .workers import WorkerDied, WorkerProcess, get_context

__all__ = ["LocalBuilder"]


# ---- child side ---------------------------------------------------------------------------------
def _builder_init(tmp_dir: str, build_func: bytes | None = None) -> dict:
    from ... import driver  # noqa: F401 - import the compiler once, before the first request
    from ...codegen import llvm  # noqa: F401

    fcompile = None if build_func is None else pickle.loads(build_func)
    return {"tasks": {}, "tmp_dir": tmp_dir, "fcompile": fcompile}


def _load_task(state: dict, tid: int, payload: tuple | None) -> Any:
    """The task ``tid`` of this worker, loaded from ``payload`` (the task pickled, the modules
    that register its template, the templates sent by value) the first time; an exception
    when it could not be loaded (kept: later requests for it get the same answer)."""
    import importlib

    from ..task.task import TASK_TABLE

    tasks = state["tasks"]
    if payload is not None:
        task_bytes, modules, templates = payload
        try:
            for name in modules:  # the module that registers the task's template
                importlib.import_module(name)
            if templates is not None:  # templates of the parent's __main__, by value
                TASK_TABLE.update(pickle.loads(templates))
            tasks[tid] = pickle.loads(task_bytes)
        except Exception as e:  # noqa: BLE001 - reported to the parent
            tasks[tid] = RuntimeError(f"{type(e).__name__}: {e}")
    return tasks.get(tid, RuntimeError(f"task {tid} was never sent to this worker"))


def _arg_info(args: Sequence[Any]) -> tuple:
    info = []
    for a in args:
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise TypeError(f"argument {a!r} is not a tensor or buffer: the measurer only "
                            f"supports tensor arguments")
        info.append((tuple(int(d) for d in a.shape), str(a.dtype)))
    return tuple(info)


def _build_library(s: Any, args: Sequence[Any], target: str, path: str,
                   fcompile: Any = None) -> None:
    """Compile and export to ``path`` (linked by ``fcompile(output, objects, options)`` when
    given: ``LocalBuilder(build_func=...)``). For LLVM targets the objects are linked once,
    straight into the exported file (``tvm.build`` would link and load a library first, then
    export would link again)."""
    from ...codegen import llvm as llvm_codegen
    from ...driver import build, lower_primfunc
    from ...target import as_target

    tgt = as_target(target)
    if tgt.is_gpu:
        _build_gpu(s, args, tgt, path)
        return
    if tgt.kind != "llvm":
        build(s, args, tgt).export_library(path, fcompile)
        return
    funcs = [lower_primfunc(s, args, "default_function", target=tgt)]
    mod = llvm_codegen.build(funcs, tgt, load=False)
    mod.export_library(path, fcompile)


class GPULimitError(ValueError):
    """A GPU candidate exceeds the target's limits (TVM's ``verify_gpu_code`` check): an
    invalid point of the space, reported as ``INSTANTIATION_ERROR``."""


class DeviceCodegenError(RuntimeError):
    """Device code generation (OpenCL/CUDA source, PTX) failed: ``COMPILE_DEVICE``."""


def gpu_limits(tgt: Any) -> dict[str, int]:
    """The ``verify_gpu_code`` constraints of a GPU target: ``target_gpu_limits`` (threads,
    shared memory, CUDA's per-dimension sizes) and the per-thread (local) bytes its code
    generator accepts."""
    from ...codegen.gpu_source import Dialect
    from ...tir.analysis import target_gpu_limits

    private = int(Dialect.max_private_bytes) if tgt.kind in ("opencl", "vulkan") else 64 * 1024
    return {**target_gpu_limits(tgt), "max_local_memory_per_block": private}


def _build_gpu(s: Any, args: Sequence[Any], tgt: Any, path: str) -> None:
    """Lower for the GPU target, check the kernel against the target's limits, then generate
    the host launch plan + device code and export them (the device compiler, e.g. OpenCL's,
    runs when the runner first loads the module on the device)."""
    from ...driver import lower_gpu, lower_primfunc
    from ...tir.analysis import gpu_code_errors

    func = lower_primfunc(s, args, "default_function", target=tgt)
    errs = gpu_code_errors(func, gpu_limits(tgt))
    if errs:
        raise GPULimitError("verify_gpu_code: " + "; ".join(errs))
    mod = lower_gpu([func], tgt)
    try:
        from ...codegen import gpu_build

        lib = gpu_build(tgt.kind)(mod, tgt)
    except Exception as e:  # noqa: BLE001
        raise DeviceCodegenError(f"{type(e).__name__}: {e}") from e
    if tgt.kind == "webgpu":  # the web artefact (load_module knows it by its wasm magic)
        from ...runtime.webgpu_artefact import artefact_bytes

        with open(path, "wb") as f:
            f.write(artefact_bytes(lib))
        return
    lib.export_library(path)


def _enter_pass_context(state: dict, ctx_bytes: bytes | None) -> None:
    """Build under the parent's PassContext (sent with each request; entered again only when
    it changes): a candidate is measured with the passes and options ``relay.build`` under the
    same context compiles it with."""
    if ctx_bytes == state.get("ctx_bytes"):
        return
    from ...transform import PassContext

    old = state.pop("ctx", None)
    if old is not None:
        old.__exit__(None, None, None)
    state["ctx_bytes"] = ctx_bytes
    if ctx_bytes is not None:
        opt_level, required, disabled, cfg = pickle.loads(ctx_bytes)
        ctx = PassContext(opt_level=opt_level, required_pass=required, disabled_pass=disabled,
                          config=cfg)
        ctx.__enter__()
        state["ctx"] = ctx


def _builder_handle(state: dict, msg: tuple) -> tuple:
    _, config, target, ctx_bytes, tid, payload = msg
    t0 = time.perf_counter()
    c0 = _cpu_seconds()
    task = _load_task(state, tid, payload)
    if isinstance(task, BaseException):
        return ("task_error", str(task))
    _enter_pass_context(state, ctx_bytes)
    try:
        s, args = task.instantiate(config)
        info = _arg_info(args)
    except Exception as e:  # noqa: BLE001 - any template error is a result, not a crash
        return ("error", int(MeasureErrorNo.INSTANTIATION_ERROR), f"{type(e).__name__}: {e}",
                time.perf_counter() - t0)
    try:
        fcompile = state.get("fcompile")
        suffix = "." + str(getattr(fcompile, "output_format", "so"))
        fd, path = tempfile.mkstemp(suffix=suffix, dir=state["tmp_dir"])
        os.close(fd)
        _build_library(s, args, target, path, fcompile)
    except Exception as e:  # noqa: BLE001
        code = (MeasureErrorNo.INSTANTIATION_ERROR if isinstance(e, GPULimitError) else
                MeasureErrorNo.COMPILE_DEVICE if isinstance(e, DeviceCodegenError) else
                MeasureErrorNo.COMPILE_HOST)
        return ("error", int(code), f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    return ("ok", path, info, time.perf_counter() - t0, _cpu_seconds() - c0)


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the linker): a build's cost
    that, unlike its wall time, does not grow with the load of other processes."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# ---- parent side -------------------------------------------------------------------------------
_MAIN_MODULES = ("__main__", "__mp_main__")


def _template_modules(task: Any) -> tuple[str, ...]:
    """Modules a worker imports so that the task's template is registered there (a worker
    starts empty)."""
    try:
        func = task.func
    except Exception:  # noqa: BLE001 - a task-like object without a registered template
        return ()
    name = getattr(func, "__module__", None)
    if not name or name in _MAIN_MODULES or name == "builtins":
        return ()
    return (name,)


def _by_value_templates(task: Any) -> bytes | None:
    """``{name: template}`` pickled with cloudpickle when the task's template cannot be imported
    by name in a fresh interpreter (defined in ``__main__`` or a closure); else None."""
    try:
        func = task.func
    except Exception:  # noqa: BLE001
        return None
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", "")
    if module not in _MAIN_MODULES and module is not None and "<locals>" not in qualname:
        return None
    import cloudpickle

    try:
        return cloudpickle.dumps({task.name: func})
    except Exception as e:  # noqa: BLE001
        raise TypeError(f"LocalBuilder: the template {task.name!r} defined in {module} cannot be "
                        f"sent to the build workers ({type(e).__name__}: {e})") from None


def _ndk_build_func() -> Any:
    """TVM's ``build_func="ndk"``: link with the Android NDK compiler in ``TVM_NDK_CC``."""
    from ...contrib import cc

    ndk = os.environ.get("TVM_NDK_CC")
    if not ndk:
        raise ValueError("LocalBuilder(build_func='ndk') needs the Android NDK: set TVM_NDK_CC "
                         "to its clang++ (e.g. <ndk>/toolchains/llvm/prebuilt/linux-x86_64/bin/"
                         "aarch64-linux-android28-clang++); it is not set")
    if shutil.which(ndk.split()[0]) is None:
        raise ValueError(f"LocalBuilder(build_func='ndk'): TVM_NDK_CC={ndk!r} is not an "
                         "executable on PATH")
    return cc.cross_compiler(ndk)


def _resolve_build_func(build_func: Any) -> Any:
    """None for the default linker, else the ``fcompile`` callable."""
    if build_func is None or build_func == "default":
        return None
    if build_func == "ndk":
        return _ndk_build_func()
    if callable(build_func):
        return build_func
    raise ValueError(f"LocalBuilder: build_func must be 'default', 'ndk' or a callable "
                     f"build_func(output, objects, options=None), got {build_func!r}")


def _pickle_by_value(obj: Any, what: str) -> bytes:
    import cloudpickle

    try:
        return cloudpickle.dumps(obj)
    except Exception as e:  # noqa: BLE001
        raise TypeError(f"LocalBuilder: {what} {obj!r} cannot be sent to the build workers "
                        f"({type(e).__name__}: {e})") from None


def pass_context_bytes() -> bytes | None:
    """The current PassContext's options (opt level, required and disabled passes, config;
    not its instruments) as the build workers take them; None for the default context, or
    (warned) when its config cannot be pickled."""
    from ...transform import PassContext

    ctx = PassContext.current()
    if (ctx.opt_level, ctx.required_pass, ctx.disabled_pass, ctx.config) == (2, [], [], {}):
        return None
    import cloudpickle

    try:
        return cloudpickle.dumps((ctx.opt_level, list(ctx.required_pass),
                                  list(ctx.disabled_pass), dict(ctx.config)))
    except Exception as e:  # noqa: BLE001 - as before: the workers' default context, loudly
        warnings.warn(f"LocalBuilder: the PassContext (config {sorted(ctx.config)}) cannot be "
                      f"sent to the build workers ({type(e).__name__}: {e}); candidates are "
                      f"built under the default PassContext", RuntimeWarning, stacklevel=3)
        return None


def _definition(task: Any) -> tuple[str, Any] | None:
    """(name, object) of the template (autotvm) or workload function (auto-scheduler) a
    worker registers under that name when it loads ``task``; None when it has none."""
    for attr in ("func", "_func"):
        try:
            func = getattr(task, attr, None)
        except Exception:  # noqa: BLE001 - a task without a registered template
            func = None
        if func is not None:
            return str(getattr(task, "name", "")), func
    return None


class _TaskEntry(NamedTuple):
    """A task as the workers get it: its id in this builder, the task, the payload
    ``(pickled task, template modules, by-value templates)``, its :func:`_definition`."""

    tid: int
    task: Any
    payload: tuple
    definition: tuple[str, Any] | None


class _BuildWorker(WorkerProcess):
    """A build worker and the tasks (ids) and definitions (by name) it has loaded."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.started_at = time.monotonic()
        self.task_ids: set[int] = set()
        self.definitions: dict[str, Any] = {}

    def can_take(self, e: _TaskEntry) -> bool:
        """Whether loading ``e``'s task here keeps every loaded name's definition: a template
        re-registered under a known name needs a fresh worker."""
        if e.definition is None or e.tid in self.task_ids:
            return True
        name, obj = e.definition
        return self.definitions.get(name, obj) is obj


def _cleanup(workers: list, tmp_dir: str) -> None:
    for w in workers:
        w.kill()
    workers.clear()
    shutil.rmtree(tmp_dir, ignore_errors=True)


class LocalBuilder(Builder):
    """Build candidates in ``n_parallel`` worker processes (default: the number of CPUs).

    ``timeout``: seconds per candidate (instantiation + compile + export).
    ``max_builds_per_worker``: a worker is replaced after this many builds.
    ``mp_context``: ``"popen"`` (default: a fresh interpreter that does not import the user's
    ``__main__``), or a multiprocessing start method: ``"spawn"`` (re-runs the main script: it
    must guard its tuning code with ``if __name__ == "__main__":``), ``"forkserver"``, ``"fork"``
    (the parent's state is inherited).
    ``startup_timeout``: seconds a new worker may take to import tvmpy and load the task.
    ``build_func`` (TVM's): ``"default"`` (the platform's compiler, a shared library),
    ``"ndk"`` (Android's: the compiler named by ``TVM_NDK_CC``), or a callable
    ``build_func(output, objects, options=None)`` that links the compiled objects into
    ``output`` (as ``tvm.contrib.cc.create_shared``; its ``output_format`` attribute, default
    "so", is the file suffix); it is sent to the build workers by value.
    ``build_kwargs``, ``do_fork``, ``runtime``: TVM's arguments, accepted (``build_kwargs``
    must be empty or None; the workers are always separate processes)."""

    def __init__(self, timeout: float = 10, n_parallel: int | None = None,
                 build_kwargs: dict | None = None, build_func: Any = "default",
                 do_fork: bool = False, runtime: Any = None,
                 max_builds_per_worker: int = 64, mp_context: str | None = None,
                 startup_timeout: float = 120):
        del do_fork
        if build_kwargs:
            raise ValueError(f"LocalBuilder: build_kwargs are not supported (got "
                             f"{sorted(build_kwargs)}); give build options in the target")
        if runtime is not None:
            raise ValueError("LocalBuilder: runtime= (microTVM) is not supported; leave it None")
        self.build_func = _resolve_build_func(build_func)
        self._build_func_bytes = (None if self.build_func is None
                                  else _pickle_by_value(self.build_func, "build_func"))
        if not timeout or timeout <= 0:
            raise ValueError(f"LocalBuilder: timeout must be > 0 seconds, got {timeout!r}")
        n_parallel = n_parallel if n_parallel is not None else (os.cpu_count() or 1)
        if not isinstance(n_parallel, int) or n_parallel < 1:
            raise ValueError(f"LocalBuilder: n_parallel must be a positive int, got {n_parallel!r}")
        if max_builds_per_worker < 1:
            raise ValueError("LocalBuilder: max_builds_per_worker must be >= 1")
        self.timeout = float(timeout)
        self.n_parallel = n_parallel
        self.max_builds_per_worker = int(max_builds_per_worker)
        self.startup_timeout = float(startup_timeout)
        self._ctx = get_context(mp_context)
        self._task: Any = None  # the task of the last set_task / build
        self._tasks: dict[int, _TaskEntry] = {}  # id(task) -> its entry
        self._next_tid = 0
        self._workers: list[_BuildWorker] = []
        self._ctx_bytes: bytes | None = None
        self.cpu_times: list[float] = []  # CPU seconds of each successful build, as they finish
        self.tmp_dir = tempfile.mkdtemp(prefix="tvmpy_autotvm_build_")
        self._finalizer = weakref.finalize(self, _cleanup, self._workers, self.tmp_dir)

    # -- task and workers --
    def set_task(self, task: Any) -> None:
        """Make ``task`` known (pickled once, sent to each worker with its first build of it);
        the workers are kept (see the module docstring)."""
        self._task = task
        self._entry(task)

    def _entry(self, task: Any) -> _TaskEntry:
        e = self._tasks.get(id(task))
        if e is not None and e.task is task:
            return e
        try:
            task_bytes = pickle.dumps(task)
        except Exception as err:  # noqa: BLE001
            raise TypeError(f"LocalBuilder: the task cannot be sent to the build workers "
                            f"({type(err).__name__}: {err}); define the template at module "
                            f"level so that it can be pickled") from None
        self._next_tid += 1
        e = _TaskEntry(self._next_tid, task,
                       (task_bytes, _template_modules(task), _by_value_templates(task)),
                       _definition(task))
        self._tasks[id(task)] = e
        return e

    def _start_worker(self) -> _BuildWorker:
        w = _BuildWorker(self._ctx, _builder_handle, _builder_init,
                         (self.tmp_dir, self._build_func_bytes))
        self._workers.append(w)
        return w

    def _retire(self, w: _BuildWorker, kill: bool) -> None:
        if kill:
            w.kill()
        else:
            w.shutdown()
        self._workers.remove(w)

    def close(self) -> None:
        for w in list(self._workers):
            w.shutdown()
        self._workers.clear()
        self._tasks.clear()
        self._task = None

    # -- building --
    def build(self, measure_inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        inputs = list(measure_inputs)
        self._ctx_bytes = pass_context_bytes()
        entries = [self._entry(inp.task) for inp in inputs]  # an unpicklable task: before work
        if inputs:
            self._task = inputs[-1].task
        results: list[BuildResult | None] = [None] * len(inputs)
        running: dict[_BuildWorker, tuple[int, float]] = {}
        try:
            self._schedule(inputs, entries, results, running)
        except BaseException:
            # interrupted (Ctrl-C) or a worker failed to start: a busy worker's late answer
            # must not be taken for the answer to a later request
            for w in list(running):
                self._retire(w, kill=True)
            raise
        return results  # type: ignore[return-value]

    def _send(self, w: _BuildWorker, inp: MeasureInput, e: _TaskEntry) -> None:
        """Ask ``w`` to build ``inp``; the task goes along the first time ``w`` builds it."""
        payload = None if e.tid in w.task_ids else e.payload
        w.send(("build", inp.config, str(inp.target), self._ctx_bytes, e.tid, payload))
        w.task_ids.add(e.tid)
        if e.definition is not None:
            w.definitions.setdefault(e.definition[0], e.definition[1])

    def _schedule(self, inputs: list[MeasureInput], entries: list[_TaskEntry],
                  results: list[BuildResult | None],
                  running: dict[_BuildWorker, tuple[int, float]]) -> None:
        pending = collections.deque(range(len(inputs)))
        while len(self._workers) < min(self.n_parallel, len(inputs)):
            self._start_worker()
        while pending or running:
            for w in list(self._workers):  # start-up of new workers
                if not w.ready:
                    if w.conn.poll(0) or not w.alive():
                        w.wait_ready(1.0)  # raises RuntimeError on a failed start
                    elif time.monotonic() - w.started_at > self.startup_timeout:
                        w.wait_ready(0.0)
            for w in list(self._workers):  # dispatch
                if pending and w.ready and w not in running:
                    i = pending[0]
                    if not w.can_take(entries[i]):  # another definition under that name
                        self._retire(w, kill=False)
                        self._start_worker()
                        continue
                    pending.popleft()
                    self._send(w, inputs[i], entries[i])
                    running[w] = (i, time.monotonic())
            now = time.monotonic()
            deadlines = [t0 + self.timeout for _, t0 in running.values()]
            wait_for = [w.conn for w in running] + [w.sentinel for w in running]
            starting = [w for w in self._workers if not w.ready]
            wait_for += [w.conn for w in starting] + [w.sentinel for w in starting]
            if starting:
                deadlines.append(now + 0.5)
            multiprocessing.connection.wait(wait_for, max(0.0, min(deadlines) - now)
                                            if deadlines else None)
            now = time.monotonic()
            for w, (i, t0) in list(running.items()):
                try:
                    msg = w.recv(0.0)
                except WorkerDied as e:
                    results[i] = BuildResult(None, (), int(MeasureErrorNo.COMPILE_HOST),
                                             f"build worker {e}", now - t0)
                    del running[w]
                    self._retire(w, kill=True)
                    self._start_worker()
                    continue
                if msg is None:
                    if now - t0 >= self.timeout:
                        results[i] = BuildResult(None, (), int(MeasureErrorNo.BUILD_TIMEOUT),
                                                 f"build timed out after {self.timeout:g} s",
                                                 now - t0)
                        del running[w]
                        self._retire(w, kill=True)
                        self._start_worker()
                    continue
                del running[w]
                if msg[0] == "task_error":
                    raise RuntimeError(f"LocalBuilder: a build worker could not load the task "
                                       f"{getattr(inputs[i].task, 'name', '?')!r}: {msg[1]}")
                if msg[0] == "ok":
                    results[i] = BuildResult(msg[1], msg[2], 0, None, msg[3])
                    self.cpu_times.append(msg[4])
                else:
                    results[i] = BuildResult(None, (), msg[1], msg[2], msg[3])
                if w.jobs_done >= self.max_builds_per_worker:
                    self._retire(w, kill=False)
                    if pending:
                        self._start_worker()
