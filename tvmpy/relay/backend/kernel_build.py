"""Compiling ``relay.build``'s kernels: one object file per distinct fused function, taken from
the persistent kernel cache when it holds it, else compiled (in worker processes when that pays).

Each distinct primitive function becomes a :class:`KernelArtifact` (``compile_kernel``: TE
lowering with its chosen implementation, the tir pipeline, LLVM to an object file), and the
graph's library links the artifacts' objects. Per kernel rather than one LLVM module for the
whole graph: kernels never call each other, so nothing is lost to the optimizer, and each one
can come from the cache or from another process.

The cache key (:func:`context_key` + :func:`kernel_key`) covers what decides a kernel's code:
the fused function's structural digest (``ir/digest.py``: operators, attributes, shapes,
dtypes; up to renaming), its symbol, the target string and the CPU it resolves to (triple,
name, instruction-set features), the core count and cache sizes the x86 schedules read from
the host, tvmpy's version and a digest of its source files (a process running older code than
its files uses no cache: ``codegen/kernel_cache.py``), the Python, numpy, llvmlite and LLVM
versions, the PassContext (opt_level, config, required/disabled passes), strict schedules
(also from ``TVMPY_STRICT_SCHEDULES``), the parallel runtime (also ``TVMPY_PARALLEL_RUNTIME``)
and libmvec switch. Builds whose result depends on something
a key cannot capture are not cached (nor sent to workers): a non-default autotvm dispatch
context (tuned configs), ``relay.backend.use_auto_scheduler`` (schedules from a log), PassContext instruments or a ``config`` value that cannot be digested
(e.g. ``tir.add_lower_pass`` functions), and ``DUMP_IR`` / ``DEBUG>=4`` (which ask for the
work to be seen). Strategies or schedules that user code registers at run time are not in the
key: set ``TVMPY_CACHE=0`` while developing those.

Workers (config ``BUILD_WORKERS``; 0: one per CPU this process may use, 1: in-process) start
with config ``BUILD_START_METHOD`` (``fork`` on Linux by default, ``spawn``/``forkserver``
work too) and re-enter the caller's PassContext and ``config`` overrides. The output is the
same whichever process compiled a kernel (artifacts are gathered in the caller's order), and
a worker that dies is an error naming the kernel, not a hang. Workers start only for four or
more kernels to compile, and never from a daemonic process (which may not have children).
autotvm's untuned-workload list and the warnings of a kernel's compilation are replayed in the
caller for kernels compiled elsewhere (a worker, an earlier build through the cache). Under
``spawn``, operators or strategies registered by the calling script itself are unknown to the
workers (``fork``, the Linux default, inherits them).
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
import pickle
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import config
from ...arith.sum_form import freeze_finished, in_cache_scope
from ...codegen.kernel_cache import KernelCache, default_cache, source_fingerprint
from ...ir.digest import Undigestable, structural_digest
from ...target import Target
from ...transform import PassContext
from ...transform.instrument import check_budget

__all__ = ["KernelArtifact", "compile_kernel", "compile_kernels", "context_key", "kernel_key",
           "LazyLowered", "KernelWorkerError", "build_workers"]

_FORMAT = 1  # bump when KernelArtifact changes


class KernelWorkerError(RuntimeError):
    """A kernel worker process died (killed, crashed) before returning its kernel."""


@dataclass
class KernelArtifact:
    """One compiled kernel: its object file and what linking and the metadata need."""

    name: str
    object: bytes
    signature: dict  # runtime.abi Signature.to_json()
    link_libs: list[str]
    machine: tuple[str, str, str]  # (triple, cpu, features) compiled for
    ir: str  # our LLVM IR text (Module.get_source("ll"))
    externs: list[str] = field(default_factory=list)  # external functions called (declared)
    extra_objects: list[bytes] = field(default_factory=list)  # pragma import_c objects
    lowered: bytes = b""  # pickle of the lowered PrimFunc, b"" when too deep to pickle
    fallbacks: list[tuple[str, Any]] = field(default_factory=list)  # untuned autotvm workloads
    notices: list[tuple[type, str]] = field(default_factory=list)  # warnings: (category, text)
    prim: Any = None  # the lowered PrimFunc in the process that compiled it (not pickled)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "prim"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.prim = None


def compile_kernel(func: Any, target: Target, name: str) -> KernelArtifact:
    """Lower one primitive function (named ``name``) and compile it to an object file."""
    from ... import driver
    from ...arith.sum_form import cache_scope
    from ...autotvm.task.dispatcher import FALLBACK
    from ...codegen.abi import signature
    from ...codegen.llvm import compile_funcs
    from .te_compiler import lower_primitive

    root = config.get("DUMP_IR")  # each kernel's tir passes in a folder of its own
    with warnings.catch_warnings(record=True) as caught, \
            FALLBACK.collect() as fallbacks:  # kept with the kernel: see _replay
        warnings.simplefilter("always")
        with cache_scope(), config.config(**({"DUMP_IR": os.path.join(root, "tir", name)}
                                             if root else {})):
            t0 = time.perf_counter()
            prim = lower_primitive(func, target, name)
            check_budget(f"lowering {name}", time.perf_counter() - t0)  # under DEBUG only
            lowered = driver.lower_primfunc(prim, target=target)
        c = compile_funcs([lowered], target)
    return KernelArtifact(name, c.object, signature(lowered).to_json(), list(c.link_libs),
                          tuple(c.machine), c.ir, list(c.declared),
                          list(c.extra_objects), _pickled(lowered),
                          fallbacks=fallbacks,
                          notices=[(w.category, str(w.message)) for w in caught], prim=lowered)


def _warn_again(art: KernelArtifact, autotvm: bool) -> None:
    for category, message in art.notices:
        if autotvm or not message.startswith("autotvm: "):
            warnings.warn(message, category, stacklevel=4)


def _replay(art: KernelArtifact) -> None:
    """What compiling ``art`` told the caller, told again where it was not compiled in this
    process (a worker, the cache): its untuned workloads join autotvm's fallback list (and its
    once-per-run notice), its warnings are re-issued."""
    from ...autotvm.task.dispatcher import FALLBACK

    for tkey, workload in art.fallbacks:  # (the build's one notice line counts them)
        FALLBACK.query(tkey, workload)
    _warn_again(art, autotvm=False)


def _pickled(func: Any) -> bytes:
    """``func`` pickled, or b"" when its expressions nest deeper than pickle can recurse
    (:class:`LazyLowered` then lowers it again when asked)."""
    try:
        return pickle.dumps(func, protocol=5)
    except RecursionError:
        return b""


class LazyLowered(Sequence):
    """The lowered PrimFuncs of a build's kernels, loaded when first read (a build from the
    cache does not pay for loop IR nobody looks at): the PrimFunc where this process compiled
    it, else unpickled from the artifact, else (too deep to pickle) lowered again."""

    def __init__(self, arts: Sequence[KernelArtifact], funcs: Sequence[Any], target: Target):
        self._arts = list(arts)
        self._funcs = list(funcs)
        self._target = target
        self._items: list[Any] | None = None

    def _one(self, art: KernelArtifact, func: Any) -> Any:
        if art.prim is not None:
            return art.prim
        if art.lowered:
            return pickle.loads(art.lowered)
        from ... import driver
        from ...arith.sum_form import cache_scope
        from .te_compiler import lower_primitive

        with cache_scope():
            return driver.lower_primfunc(lower_primitive(func, self._target, art.name),
                                         target=self._target)

    def _load(self) -> list[Any]:
        if self._items is None:
            self._items = [self._one(a, f) for a, f in zip(self._arts, self._funcs)]
        return self._items

    def __getitem__(self, i: Any) -> Any:
        return self._load()[i]

    def __len__(self) -> int:
        return len(self._arts)


# ---- keys -------------------------------------------------------------------------------------
def _dispatch_is_default() -> bool:
    """Whether autotvm answers every workload with its untuned fallback (the root context, no
    config put into it by hand)."""
    from ...autotvm.task import dispatcher

    root = dispatcher._ROOT
    if dispatcher.DispatchContext.current is not root or root is None:
        return False
    return all(getattr(cfg, "is_fallback", False) for cfg in list(root.memory.values()))


def context_key(target: Target) -> str | None:
    """The part of every kernel key shared by one build (see the module docstring), or None
    when this build must not be cached."""
    if config.get("DUMP_IR") or config.get("DEBUG") >= 4:
        return None
    ctx = PassContext.current()
    if ctx.instruments or not _dispatch_is_default():
        return None
    if ctx.config.get("relay.backend.use_auto_scheduler"):
        return None  # the schedules come from an auto_scheduler log the key does not cover
    import llvmlite
    import llvmlite.binding as llvm

    from ...codegen import llvm as cg_llvm
    from ...codegen.llvm_parallel import parallel_runtime
    from .te_compiler import strict_schedules

    try:
        triple, cpu, features = cg_llvm._cpu_of(target)
        parts = ["tvmpy-kernel", _FORMAT, _version(), source_fingerprint(), llvmlite.__version__,
                 ".".join(map(str, llvm.llvm_version_info)), str(target), triple, cpu, features,
                 ctx.opt_level, sorted(ctx.required_pass), sorted(ctx.disabled_pass),
                 sorted(ctx.config.items(), key=lambda kv: str(kv[0])), strict_schedules(),
                 parallel_runtime(), cg_llvm.USE_LIBMVEC, sys.byteorder,
                 # what the x86 schedules read from the host besides its features: the core
                 # count (parallel splits) and cache sizes (blocking), neither in str(target)
                 target.num_cores, target.cache_sizes.l1d, target.cache_sizes.l2, sys.version_info[:2],
                 np.__version__]
        return structural_digest(parts)
    except Undigestable:
        return None


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("tvmpy")
    except metadata.PackageNotFoundError:
        return "unknown"


def kernel_key(context: str, func: Any, name: str) -> str:
    return hashlib.blake2b(f"{context}/{structural_digest(func)}/{name}".encode(),
                           digest_size=20).hexdigest()


# ---- workers ----------------------------------------------------------------------------------
def build_workers() -> int:
    """How many worker processes compile kernels (config ``BUILD_WORKERS``; 0: the CPUs this
    process may run on)."""
    n = int(config.get("BUILD_WORKERS"))
    if n < 0:
        raise ValueError(f"BUILD_WORKERS must be >= 0 (0: one per CPU), got {n}")
    if n == 0:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
    return max(1, n)


def _start_method() -> str:
    method = config.get("BUILD_START_METHOD") or (
        "fork" if sys.platform.startswith("linux") else "spawn")
    if method not in multiprocessing.get_all_start_methods():
        raise ValueError(f"BUILD_START_METHOD: expected one of "
                         f"{', '.join(multiprocessing.get_all_start_methods())}, got {method!r}")
    return method


_WORKER_SCOPES: list[Any] = []  # a worker's PassContext / config scopes, entered for its life


def _worker_init(opt_level: int, required: list[str], disabled: list[str], pc_config: dict,
                 overrides: dict) -> None:
    """A worker re-enters the caller's PassContext and ``config(...)`` overrides."""
    ctx = PassContext(opt_level=opt_level, required_pass=required, disabled_pass=disabled,
                      config=pc_config)
    ctx.__enter__()
    scope = config.config(**overrides)
    scope.__enter__()
    _WORKER_SCOPES[:] = [ctx, scope]


def _worker_compile(func: Any, target: str, name: str) -> KernelArtifact:
    return compile_kernel(func, Target(target), name)


def _compile_in_pool(todo: list[tuple[int, Any, str]], target: Target, workers: int,
                     done: Callable[[int, KernelArtifact], None]) -> None:
    ctx = PassContext.current()
    init = (ctx.opt_level, list(ctx.required_pass), list(ctx.disabled_pass), dict(ctx.config),
            config.overrides())
    method = _start_method()
    mp = multiprocessing.get_context(method)
    if method == "fork":  # forked workers' garbage collector leaves the inherited heap alone
        gc.freeze()  # (else it walks, and copies page by page, every object of the parent)
    try:
        _run_pool(todo, target, workers, mp, init, done)
    finally:
        if method == "fork" and not in_cache_scope():  # (else the scope unfreezes)
            gc.unfreeze()


def _run_pool(todo: list[tuple[int, Any, str]], target: Target, workers: int, mp: Any,
              init: tuple, done: Callable[[int, KernelArtifact], None]) -> None:
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp, initializer=_worker_init,
                             initargs=init) as pool:
        futures: list[tuple[int, str, Future]] = [
            (i, name, pool.submit(_worker_compile, func, str(target), name))
            for i, func, name in todo]
        try:
            for i, name, fut in futures:  # noqa: B007 - the kernel named in the error
                done(i, fut.result())
        except BrokenProcessPool as err:
            pool.shutdown(wait=False, cancel_futures=True)
            raise KernelWorkerError(
                f"relay.build: a kernel worker process died while compiling {name} ({err}); "
                "set TVMPY_BUILD_WORKERS=1 to compile in this process") from None
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _can_pickle(values: Any) -> bool:
    try:
        pickle.dumps(values)
        return True
    except Exception:  # noqa: BLE001 - any failure: compile in this process
        return False


# ---- the stage --------------------------------------------------------------------------------
def compile_kernels(items: Sequence[tuple[Any, str]], target: Target,
                    progress: Callable[[int, int], None] | None = None,
                    cache: KernelCache | None | bool = True) -> list[KernelArtifact]:
    """The artifacts of ``items`` (primitive function, symbol), in their order: from the
    kernel cache (``cache=True``: the configured one; a KernelCache; False/None: none), else
    compiled here or in worker processes, then stored."""
    report = progress or (lambda done, total: None)
    ckey = context_key(target)
    store = (default_cache() if cache is True else cache or None) if ckey is not None else None
    out: list[KernelArtifact | None] = [None] * len(items)
    keys: list[str | None] = [None] * len(items)
    todo: list[tuple[int, Any, str]] = []
    for i, (func, name) in enumerate(items):
        if store is not None and ckey is not None:
            try:
                keys[i] = kernel_key(ckey, func, name)
            except Undigestable:
                keys[i] = None
            art = _load(store, keys[i]) if keys[i] else None
            if art is not None and art.name == name:
                _replay(art)
                out[i] = art
                continue
        todo.append((i, func, name))
    count = [len(items) - len(todo)]
    report(count[0], len(items))

    def done(i: int, art: KernelArtifact) -> None:
        if art.prim is None:  # compiled in a worker
            _replay(art)
        else:
            _warn_again(art, autotvm=True)
        out[i] = art
        key = keys[i]
        if store is not None and key is not None:
            store.put(key, pickle.dumps((_FORMAT, art), protocol=5))
        count[0] += 1
        report(count[0], len(items))

    workers = min(build_workers(), len(todo))
    if multiprocessing.current_process().daemon:  # (a daemonic process may not have children)
        workers = 1
    if (workers >= 2 and len(todo) >= 4 and ckey is not None
            and _can_pickle((dict(PassContext.current().config), config.overrides()))):
        _compile_in_pool(todo, target, workers, done)
    else:
        for i, func, name in todo:
            done(i, compile_kernel(func, target, name))
            freeze_finished()  # its IR (kept for lowered_funcs): out of later full collections
    if store is not None and todo:
        store.evict()
    return [a for a in out if a is not None]


def _load(store: KernelCache, key: str) -> KernelArtifact | None:
    blob = store.get(key)
    if blob is None:
        return None
    try:
        fmt, art = pickle.loads(blob)
    except Exception:  # noqa: BLE001 - an entry of another format: rebuild it
        return None
    if fmt != _FORMAT or not isinstance(art, KernelArtifact):
        return None
    return art
