"""Compile an ONNX model with tvmpy and run it beside onnxruntime (and eager PyTorch): the shared
machinery of ``tvmpy bench`` / ``tvmpy demo``, ``bench/e2e.py`` and the end-to-end tests.

Timing follows bench/common.py: the sides are timed in interleaved rounds (machine load hits them
alike), each round is the mean of ``number`` calls sized to ~0.1 s, the best round is reported,
and a 0.3 s pause precedes each side (onnxruntime's and libgomp's threads busy-wait after a
call and would steal the second core from whoever runs next). Every side's call includes
feeding the inputs and fetching the outputs as numpy arrays, as ``InferenceSession.run`` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["import_onnx", "build", "graph_summary", "tvm_runner", "ort_runner", "errors", "time_sides",
           "latency_table", "Runner"]

Runner = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]
Progress = Callable[[str, int, int], None]


def import_onnx(model: Any, shape: Mapping[str, Any] | None = None) -> tuple[Any, dict]:
    """``relay.frontend.from_onnx`` with weights as parameters (bound as constants by build)."""
    from .. import frontend

    return frontend.from_onnx(model, shape, freeze_params=False)


def build(mod: Any, params: Mapping[str, Any] | None, opt_level: int = 3, target: str = "llvm",
          progress: Progress | None = None, config: Mapping[str, Any] | None = None
          ) -> tuple[Any, float]:
    """``relay.build`` under ``PassContext(opt_level, config)``; returns (factory module,
    seconds)."""
    from ... import transform
    from ..build_module import build as relay_build

    t0 = time.perf_counter()
    with transform.PassContext(opt_level=opt_level, config=dict(config or {})):
        lib = relay_build(mod, target=target, params=dict(params or {}), progress=progress)
    return lib, time.perf_counter() - t0


def graph_summary(lib: Any) -> dict[str, int]:
    """Kernel calls and intermediate memory of a built graph: ``kernels``, ``planned_bytes``
    (storage shared by liveness) and ``naive_bytes`` (one buffer per intermediate tensor);
    graph inputs, parameters and outputs are left out of both byte counts."""
    import json

    from ..backend.graph_plan_memory import plan_memory

    graph = json.loads(lib.get_graph_json())
    plan = plan_memory(graph)
    pinned = [plan.storage_pinned[sid] for sid in plan.storage_id]
    return {"kernels": sum(1 for n in graph["nodes"] if n["op"] == "tvm_op"),
            "planned_bytes": plan.intermediate_planned_bytes,
            "naive_bytes": sum(b for b, pin in zip(plan.entry_bytes, pinned) if not pin)}


def tvm_runner(lib: Any) -> Runner:
    """``run(feeds) -> outputs`` over a factory module or a loaded library (``["default"]``)."""
    from ...contrib import graph_executor
    from ...runtime import cpu

    m = graph_executor.GraphModule(lib["default"](cpu(0)))
    n_out = m.get_num_outputs()

    def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        for k, v in feeds.items():
            m.set_input(k, v)
        m.run()
        return [m.get_output(i).numpy() for i in range(n_out)]

    run.module = m  # type: ignore[attr-defined]
    return run


def ort_runner(model: Any, threads: int = 2) -> Runner:
    """An onnxruntime CPU session with ``intra_op_num_threads=threads`` (all graph optimizations)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, dict(feeds))


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(max |got - want|, that divided by max |want|): the error relative to the output's scale."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        raise ValueError(f"output shape {got.shape} differs from the reference's {want.shape}")
    err = float(np.abs(got - want).max()) if got.size else 0.0
    scale = float(np.abs(want).max()) if want.size else 0.0
    return err, err / scale if scale > 0 else err


def time_sides(runners: Mapping[str, Runner], feeds: Mapping[str, np.ndarray], repeat: int = 5,
               pause: float = 0.3, target_s: float = 0.1) -> dict[str, float]:
    """Best-of-``repeat`` seconds per call of each runner, measured in interleaved rounds."""
    number = {}
    for name, fn in runners.items():
        fn(feeds)  # warm up (first-call allocations, thread pools)
        t = time.perf_counter()
        fn(feeds)
        number[name] = max(1, min(100, int(target_s / max(time.perf_counter() - t, 1e-6))))
    best = dict.fromkeys(runners, float("inf"))
    for _ in range(repeat):
        for name, fn in runners.items():
            time.sleep(pause)
            t = time.perf_counter()
            for _ in range(number[name]):
                fn(feeds)
            best[name] = min(best[name], (time.perf_counter() - t) / number[name])
    return best


def latency_table(times: Mapping[str, float | str], reference: str = "onnxruntime") -> str:
    """A text table: side, latency in ms, time relative to ``reference`` (lower is faster).

    A side whose value is a string (why it was skipped) is listed with that note.
    """
    ref = times.get(reference)
    width = max(len(k) for k in times)
    lines = [f"{'':{width}}  {'latency':>10}  {'x ' + reference:>16}"]
    for name, t in times.items():
        if isinstance(t, str):
            lines.append(f"{name:{width}}  {'-':>10}  {'':>16}  ({t})")
            continue
        rel = f"{t / ref:.2f}" if isinstance(ref, float) and ref > 0 else "-"
        lines.append(f"{name:{width}}  {t * 1e3:7.2f} ms  {rel:>16}")
    return "\n".join(lines)
