"""CUDA graphs for the graph executor (``use_cuda_graph``; TVM's
``tvm.contrib.cuda_graph.cuda_graph_executor``).

On a CUDA device every launch of the executor goes to a stream of its own (a blocking
``cuStreamCreate`` stream: ordered with the legacy default stream, so ``numpy()`` of an output,
``copyfrom`` and the events of ``time_evaluator`` see the run's work without extra waits), and
``set_input`` / ``get_output(i, out=...)`` copy on that stream. With CUDA graphs on:

- the **first run of a plan** (the entries and calls for one set of input shapes: one plan for a
  static graph, one per input shapes for a symbolic one) runs every node as usual: this binds each
  launch (module loads, ``cuFuncSetAttribute``, scratch allocations: calls a capture must not
  see) and computes that run's outputs; then the launch sequence is **captured** on the stream
  (``cuStreamBeginCapture_v2`` in thread-local mode ... ``cuStreamEndCapture``) and instantiated
  (``cuGraphInstantiateWithFlags``);
- **every later run** of that plan is one ``cuGraphLaunch`` per captured segment: no Python per
  kernel. ``set_input`` copies into the same device buffers the graph reads, so a replay sees the
  new values; the parameters likewise;
- **what is captured**: runs of consecutive calls whose work is launches only (a CUDA
  ``GPUFunction`` with no host array to copy and no private device copy). Any other call (a host
  function, a call that copies) splits the sequence: the segments before and after it are
  captured as separate graphs and it runs as usual between their launches. (Data-dependent
  shapes never reach the graph executor: ``relay.vm`` runs them.)
- **re-capture**: graphs belong to the plan whose device pointers they hold; a new plan (other
  input shapes, storage re-planned) is captured on its first run, and a plan dropped from the
  cache frees its graphs;
- **failures**: a driver error while a node runs is reported naming the node (plain calls) or
  the captured segment's first and last nodes (a graph launch). When capturing fails (a driver
  without the API, an operation the driver will not capture) the executor warns once, names
  the reason in :meth:`CUDAGraphRunner.info`, and runs that plan's calls as usual.

The switch: ``GraphExecutor(..., use_cuda_graph=True)``, ``graph_executor.create(...,
use_cuda_graph=True)``, ``factory["default"](dev, use_cuda_graph=True)``, or TVM's
``cuda_graph_executor.create``; the default (None) follows the environment variable
``TVMPY_USE_CUDA_GRAPH`` (1/0), off when unset.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..device import Device
    from .storage import _Plan

kDLCUDA = 2
ENV_VAR = "TVMPY_USE_CUDA_GRAPH"


def resolve_use_cuda_graph(flag: bool | None, dev: Device) -> bool:
    """Whether an executor on ``dev`` uses CUDA graphs: ``flag``, or when None the environment
    variable (CUDA devices only). True on another device raises ValueError."""
    if flag is None:
        env = os.environ.get(ENV_VAR, "").strip().lower()
        return env in ("1", "true", "on", "yes") and dev.device_type == kDLCUDA
    if flag and dev.device_type != kDLCUDA:
        raise ValueError(f"use_cuda_graph: CUDA graphs need a CUDA device (tvm.cuda(n)), not "
                         f"{dev}")
    return bool(flag)


def make_stream(dev: Device) -> Any:
    """The executor's own stream on a CUDA device (None elsewhere, or with a driver object
    that has no streams)."""
    if dev.device_type != kDLCUDA:
        return None
    from ..cuda_module import CUDA_API

    return CUDA_API.create_stream(dev.device_id)


def attach_stream(func: Any, raw: list[Any], stream: Any) -> None:
    """Queue the launches of a prepared GPU call on ``stream`` (bound on its first run)."""
    from ..gpu_module import GPUFunction

    if stream is not None and isinstance(func, GPUFunction) and func.module.api_name == "cuda":
        raw[0]["stream"] = stream


def not_capturable(func: Any, raw: tuple) -> str | None:
    """Why the prepared call ``func._cfunc(*raw)`` cannot be captured (None: it can)."""
    from ..gpu_module import GPUFunction

    if not isinstance(func, GPUFunction) or func.module.api_name != "cuda":
        return "not a CUDA function (a host call)"
    state = raw[0]
    if state.get("stream") is None:
        return "its launches are not on the executor's stream"
    if state["host"]:
        return "host arrays are copied in and out per call"
    if state["private"]:
        return "an argument is copied on the device per call"
    return None


class _Captured:
    """One plan's run as steps: graph launches and the calls left out of any graph."""

    __slots__ = ("steps", "labels", "calls", "graphs", "plain")

    def __init__(self) -> None:
        self.steps: list[Callable[[], Any]] = []  # each returns a falsy value on success
        self.labels: list[str] = []
        self.calls: list[tuple | None] = []  # the (cfunc, args) of a plain step
        self.graphs: list[Any] = []  # CUDAGraph objects (keep the instantiated graphs alive)
        self.plain: list[tuple[str, str]] = []  # (node name, why not captured)


class CUDAGraphRunner:
    """Captures and replays one executor's plans (see the module docstring)."""

    def __init__(self, stream: Any, node_error: Callable[[tuple, Exception], Exception],
                 raise_failed: Callable[[Any, tuple], None]):
        self.stream = stream
        self._node_error = node_error  # (cfunc, args), error -> the error naming the node
        self._raise_failed = raise_failed  # a plain call returned nonzero
        self.captures = 0  # graphs instantiated (all plans)
        self.disabled: str | None = None if stream is not None else \
            "the CUDA driver object has no streams"
        self._last: _Captured | None = None

    def run(self, plan: _Plan, run_plain: Callable[[], None]) -> None:
        rec = plan.cuda_graph
        if rec is None:
            run_plain()  # warm-up: binds every launch outside the capture; this run's outputs
            plan.cuda_graph = rec = self._capture(plan)
        else:
            steps = rec.steps
            try:
                for step in steps:
                    if step():
                        break
                else:
                    self._last = rec
                    return
            except RuntimeError as e:
                k = _index(steps, step)
                call = rec.calls[k]
                if call is not None:
                    raise self._node_error(call, e) from None
                raise type(e)(f"{rec.labels[k]}: {e}") from None
            k = _index(steps, step)
            call = rec.calls[k]
            assert call is not None  # graph launches return None
            self._raise_failed(*call)
        self._last = rec

    def _capture(self, plan: _Plan) -> _Captured:
        from ..cuda_module import CUDA_API, CUDAError

        rec = _Captured()
        why = [not_capturable(f, args) if self.disabled is None else self.disabled
               for f, (_, args) in zip(plan.call_funcs, plan.calls)]
        k, n = 0, len(plan.calls)
        while k < n:
            reason = why[k]
            if reason is not None:
                self._add_plain(rec, plan, k, reason)
                k += 1
                continue
            end = k
            while end < n and why[end] is None:
                end += 1
            seg = plan.calls[k:end]

            def record(seg: list = seg) -> None:
                for cfunc, args in seg:
                    if cfunc(*args):
                        raise CUDAError("a call failed during the capture")

            try:
                graph = CUDA_API.capture_graph(self.stream, record)
            except CUDAError as e:
                nodes = plan.call_nodes[k:end]
                self.disabled = (f"capturing nodes {nodes[0].name!r}..{nodes[-1].name!r} "
                                 f"failed: {e}")
                warnings.warn(f"graph executor: CUDA graphs off, plain launches instead: "
                              f"{self.disabled}", RuntimeWarning, stacklevel=4)
                for j in range(k, end):
                    self._add_plain(rec, plan, j, str(self.disabled))
                k = end
                continue
            self.captures += 1
            first, last = plan.call_nodes[k], plan.call_nodes[end - 1]
            rec.steps.append(graph.launch)
            rec.labels.append(f"CUDA graph of graph nodes {first.nid} ({first.name!r}) to "
                              f"{last.nid} ({last.name!r}), {end - k} calls")
            rec.calls.append(None)
            rec.graphs.append(graph)
            k = end
        return rec

    @staticmethod
    def _add_plain(rec: _Captured, plan: _Plan, k: int, why: str) -> None:
        cfunc, args = plan.calls[k]
        rec.steps.append(functools.partial(cfunc, *args))
        rec.labels.append(plan.call_nodes[k].name)
        rec.calls.append((cfunc, args))
        rec.plain.append((plan.call_nodes[k].name, why))

    def info(self) -> dict:
        """What the last run did: ``graphs`` (kernel nodes per captured graph), ``plain``
        (the calls run outside any graph, with why), ``captures`` (graphs instantiated so
        far, all plans), ``disabled`` (why capturing is off, or None)."""
        rec = self._last
        return {"enabled": True, "captures": self.captures, "disabled": self.disabled,
                "graphs": [g.num_nodes for g in rec.graphs] if rec else [],
                "segments": [lab for lab, c in zip(rec.labels, rec.calls) if c is None]
                if rec else [],
                "plain": list(rec.plain) if rec else []}


def _index(steps: list, step: Any) -> int:
    return next(i for i, s in enumerate(steps) if s is step)
