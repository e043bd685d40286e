"""Helpers of the GPU bench scripts (gpu_models.py, gpu_dynamic.py, gpu_mixed_precision.py,
gpu_conv_defaults.py, gpu_tune_conv.py): the target string with the device's ``-arch``, per-call
times as median/min/max, and torch's side timed with CUDA events (cuDNN/cuBLAS, TF32 off).

Kept apart from common.py so that the CPU benches do not read GPU code; tvmpy and torch are
imported where used, so ``--help`` and the CPU fallbacks of these scripts never load torch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np


def device(target: str):
    """``opencl(0)`` for an OpenCL target, else ``cuda(0)``."""
    import tvmpy as tvm

    return tvm.opencl(0) if target.startswith("opencl") else tvm.cuda(0)


def cuda_target(name: str) -> str:
    """``cuda``/``nvptx`` get the device's ``-arch`` when a device is there; any other name
    stays as it is."""
    import tvmpy as tvm

    if name in ("cuda", "nvptx") and tvm.cuda(0).exist:
        from tvmpy.runtime.cuda_module import CUDA_API

        return f"{name} -arch={CUDA_API.arch(0)}"
    return name


def stats(per_call_s: list[float]) -> dict:
    """Seconds per call -> ``{"median_ms", "min_ms", "max_ms"}``."""
    ms = np.asarray(per_call_s) * 1e3
    return {"median_ms": float(np.median(ms)), "min_ms": float(ms.min()),
            "max_ms": float(ms.max())}


def fmt_stats(v: dict) -> str:
    """A :func:`stats` dict as ``median (min-max)`` in ms."""
    return f"{v['median_ms']:.3f} ({v['min_ms']:.3f}-{v['max_ms']:.3f})"


def ratio(a, b) -> str:
    """``a``'s median over ``b``'s when both are :func:`stats` dicts, else ``n/a``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return f"{a['median_ms'] / b['median_ms']:.2f}"
    return "n/a"


def torch_no_tf32(cudnn_benchmark: bool = True) -> None:
    """torch's GPU settings for a fair float32 figure: TF32 off in cuDNN and cuBLAS, and
    ``cudnn.benchmark`` on (left as it is when ``cudnn_benchmark`` is False)."""
    import torch

    if cudnn_benchmark:
        torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def cuda_event_times(fn: Callable[[], object], number: int, repeat: int,
                     ctx: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
                     ) -> list[float]:
    """Seconds per call of ``fn`` (a torch GPU call), one sample per repeat: ``number`` calls
    between two CUDA events, under ``ctx()`` (e.g. autocast), the device synchronized after.
    The caller warms up first."""
    import torch

    times = []
    for _ in range(repeat):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with ctx():
            e0.record()
            for _ in range(number):
                fn()
            e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3 / number)
    return times


def time_torch(model, feeds: dict, number: int, repeat: int, autocast: bool = False) -> dict:
    """The ONNX graph node by node in eager torch on the GPU (``onnx_torch.torch_runner``,
    inputs already there, :func:`torch_no_tf32`), optionally under
    ``torch.autocast(dtype=float16)``: three warm-up runs, then :func:`cuda_event_times`.
    Returns :func:`stats` plus ``"output"``: the first output as numpy (cast to float32 under
    autocast)."""
    import torch

    from tvmpy.relay.testing.onnx_torch import torch_runner

    torch_no_tf32()
    run = torch_runner(model, device="cuda")
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in feeds.items()}

    def ctx():
        return (torch.autocast("cuda", dtype=torch.float16) if autocast
                else contextlib.nullcontext())

    out = None
    with ctx():
        for _ in range(3):
            out = run.forward(tensors)
    torch.cuda.synchronize()
    res = stats(cuda_event_times(lambda: run.forward(tensors), number, repeat, ctx))
    first = out[0].float() if autocast else out[0]
    res["output"] = first.cpu().numpy()
    return res
