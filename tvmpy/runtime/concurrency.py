"""Executors used from several threads: one lock per executor, and detection of interleaved
stateful sequences (runtime/graph_executor/ and runtime/vm.py use :class:`SharedUse`).

TVM's executor API is stateful: ``set_input``; ``run``; ``get_output``. A lock makes each call
atomic (no torn state, no memory corrupted, the kernels' thread pool is shared safely: a
parallel loop started while the pool is busy runs on its caller, runtime/parallel_pool.py), but
a lock alone cannot make two threads' sequences meaningful: thread A's ``set_input``, then
thread B's ``set_input``, then A's ``run`` computes B's input for A. onnxruntime has no such
state: ``InferenceSession.run(outputs, feeds)`` is one call. So:

- ``infer(**inputs)`` (the graph executor and ``GraphModule``) and ``VirtualMachine.invoke`` are
  that one call: inputs in, copies of the outputs out, atomically; safe from any number of
  threads;
- the stateful sequence keeps TVM's semantics for one thread, and when threads interleave it,
  the thread whose data was replaced gets :class:`ConcurrentUseError` instead of another
  thread's result: at ``run``, when an input this thread set since its last run was set again
  by another thread; at ``get_output``, when another thread ran after this thread's last run.
  Nothing is checked for a thread that did not take part (a thread that only reads outputs, or
  one that only runs what another set: a worker given the executor);
- while one thread uses an executor, ``get_output`` returns a view of the output storage (TVM's
  semantics: the next run overwrites it); from the first call of a second thread on, it returns
  a copy taken under the lock, so a value read is never overwritten while being read. Views
  handed out before then that are still referenced keep their values: the executor moves to
  fresh storage (see ``GraphExecutor._detach_views``).

The bookkeeping costs one lock and a few dictionary operations per call.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["ConcurrentUseError", "SharedUse", "ADVICE"]

ADVICE = ("give each thread its own executor (factory['default'](dev) per thread), call "
          "infer(**inputs) (one atomic call, as onnxruntime's InferenceSession.run), or hold "
          "one lock around each whole set_input/run/get_output sequence")


class ConcurrentUseError(RuntimeError):
    """Another thread's calls replaced this thread's inputs or outputs in a shared executor
    (its stateful set_input/run/get_output sequences were interleaved)."""


def _thread_name(ident: int | None) -> str:
    for t in threading.enumerate():
        if t.ident == ident:
            return repr(t.name)
    return f"id {ident}"


class SharedUse:
    """The lock of one executor and what each thread did with its state (see the module
    docstring). Every method is called with ``lock`` held."""

    def __init__(self, what: str):
        self.lock = threading.RLock()
        self.what = what  # "graph executor", "VM": for messages
        self.shared = False  # a second thread has called: outputs are returned as copies
        self._first: int | None = None  # the thread of the first call
        self._version: dict[Hashable, int] = {}  # per input: how often it was set
        self._setter: dict[Hashable, int | None] = {}  # per input: the thread that set it last
        self._gen = 0  # runs so far
        self._runner: int | None = None  # the thread of the last run
        self._tls = threading.local()  # per thread: pending {input: version}, ran (a _gen)
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()  # views handed out, unshared

    def enter(self) -> bool:
        """Note a call from this thread; True when it is the first call of a second thread
        (the executor becomes shared: the caller detaches the views handed out)."""
        me = threading.get_ident()
        if self._first is None:
            self._first = me
            return False
        if self.shared or me == self._first:
            return False
        self.shared = True
        return True

    def track(self, view: Any) -> Any:
        """``view`` (of the executor's storage) handed out while it is not shared."""
        self._views.add(view)
        return view

    def views_alive(self) -> bool:
        return len(self._views) > 0

    def drop_views(self) -> None:
        self._views = weakref.WeakSet()

    def set(self, key: Hashable, mine: bool = True) -> None:
        """This thread sets input ``key`` (``mine``: for its next run; else as configuration,
        e.g. the parameters ``create()`` loads before handing the executor to another
        thread, which no later setting of them makes an error)."""
        v = self._version.get(key, 0) + 1
        self._version[key] = v
        self._setter[key] = threading.get_ident()
        if not mine:
            return
        pending = getattr(self._tls, "pending", None)
        if pending is None:
            pending = self._tls.pending = {}
        pending[key] = v

    def before_run(self, name: Callable[[Any], str] = repr) -> None:
        """This thread runs: ConcurrentUseError when an input it set since its last run was
        set again by another thread (``name(key)`` names the input)."""
        pending = getattr(self._tls, "pending", None)
        if not pending:
            return
        self._tls.pending = {}
        for key, v in pending.items():
            if self._version.get(key) != v:
                raise ConcurrentUseError(
                    f"{self.what}: run(): input {name(key)}, which this thread set, was set "
                    f"again by thread {_thread_name(self._setter.get(key))} before this run; "
                    f"the run would compute with that thread's value. To use one executor "
                    f"from several threads, {ADVICE}")

    def after_run(self) -> None:
        self._gen += 1
        self._runner = threading.get_ident()
        self._tls.ran = self._gen

    def outputs_changed(self) -> None:
        """The outputs were changed other than by a run (an input that is also an output was
        set) by this thread: a thread whose run produced them must not read them as its own."""
        if self._runner != threading.get_ident():
            self._gen += 1
            self._runner = threading.get_ident()

    def check_outputs(self, what: str = "get_output") -> None:
        """ConcurrentUseError when this thread ran and another thread ran since."""
        ran = getattr(self._tls, "ran", None)
        if ran is not None and ran != self._gen:
            raise ConcurrentUseError(
                f"{self.what}: {what}(): the outputs of this thread's last run() were replaced "
                f"by a run() in thread {_thread_name(self._runner)}. To use one executor from "
                f"several threads, {ADVICE}")
