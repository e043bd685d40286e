"""Run an ONNX graph with eager PyTorch ops (the "PyTorch" column of ``tvmpy bench``).

There is no ONNX -> torch converter among the dependencies, so this maps the node types the
built-in models use (CNNs, transformer encoders) to ``torch.nn.functional`` calls, one call per
node, in graph order, under ``torch.inference_mode()``: what an eager ``nn.Module.forward``
would execute. Weights are converted to torch tensors once. A graph with any other node type
(or attribute value) raises ``TorchUnsupported`` listing what is missing, before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["TorchUnsupported", "torch_runner"]


class TorchUnsupported(NotImplementedError):
    """The ONNX graph uses node types or attributes this eager mapping does not cover."""


def _sym_pads(pads: list[int], n: int, what: str) -> list[int]:
    pads = pads or [0] * (2 * n)
    if pads[:n] != pads[n:]:
        raise TorchUnsupported(f"{what}: asymmetric pads {pads}")
    return pads[:n]


def _node_fn(node: Any, attrs: dict[str, Any], consts: dict[str, Any]) -> Callable[..., Any]:
    import torch
    import torch.nn.functional as F

    op = node.op_type
    simple = {"Relu": torch.relu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh, "Erf": torch.erf,
              "Sqrt": torch.sqrt, "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul,
              "Div": torch.div, "Pow": torch.pow, "Identity": lambda x: x}
    if op in simple:
        return simple[op]
    if op == "Conv":
        k = attrs.get("kernel_shape")
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or k is None or len(k) != 2:
            raise TorchUnsupported(f"Conv {node.name!r}: only 2-D convs with explicit pads")
        pad = _sym_pads(attrs.get("pads"), 2, f"Conv {node.name!r}")
        kw = dict(stride=attrs.get("strides", [1, 1]), padding=pad,
                  dilation=attrs.get("dilations", [1, 1]), groups=attrs.get("group", 1))
        return lambda x, w, b=None: F.conv2d(x, w, b, **kw)
    if op == "BatchNormalization":
        eps = attrs.get("epsilon", 1e-5)
        return lambda x, g, b, m, v: F.batch_norm(x, m, v, g, b, False, 0.0, eps)
    if op == "Clip":
        return lambda x, lo=None, hi=None: torch.clamp(x, lo, hi)
    if op in ("MaxPool", "AveragePool"):
        k = attrs["kernel_shape"]
        pad = _sym_pads(attrs.get("pads"), len(k), f"{op} {node.name!r}")
        kw = dict(kernel_size=k, stride=attrs.get("strides", [1] * len(k)), padding=pad,
                  ceil_mode=bool(attrs.get("ceil_mode", 0)))
        if op == "MaxPool":
            return lambda x: F.max_pool2d(x, **kw)
        kw["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
        return lambda x: F.avg_pool2d(x, **kw)
    if op == "GlobalAveragePool":
        return lambda x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True)
    if op == "Flatten":
        ax = attrs.get("axis", 1)
        return lambda x: x.reshape(int(np.prod(x.shape[:ax])), -1)
    if op == "Gemm":
        al, be = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
        ta, tb = attrs.get("transA", 0), attrs.get("transB", 0)

        def gemm(a, b, c=None):
            y = (a.t() if ta else a) @ (b.t() if tb else b)
            y = y * al if al != 1.0 else y
            return y if c is None else y + (c * be if be != 1.0 else c)

        return gemm
    if op == "MatMul":
        return torch.matmul
    if op == "ReduceMean":
        axes, keep = attrs.get("axes"), bool(attrs.get("keepdims", 1))
        if axes is None:
            raise TorchUnsupported(f"ReduceMean {node.name!r}: axes as an input")
        return lambda x: x.mean(dim=tuple(axes), keepdim=keep)
    if op == "Softmax":
        ax = attrs.get("axis", -1)
        return lambda x: torch.softmax(x, dim=ax)
    if op == "LayerNormalization":
        eps, ax = attrs.get("epsilon", 1e-5), attrs.get("axis", -1)
        return lambda x, g, b=None: F.layer_norm(x, x.shape[ax:], g, b, eps)
    if op == "Gather":
        ax = attrs.get("axis", 0)
        return lambda x, i: torch.index_select(x, ax, i.reshape(-1)).reshape(
            *x.shape[:ax], *i.shape, *x.shape[ax + 1:])
    if op == "Transpose":
        perm = attrs.get("perm")
        return lambda x: x.permute(*(perm or range(x.dim() - 1, -1, -1)))
    if op == "Reshape":
        if node.input[1] not in consts or attrs.get("allowzero", 0):
            raise TorchUnsupported(f"Reshape {node.name!r}: shape must be an initializer")
        target = [int(v) for v in consts[node.input[1]]]
        return lambda x, _s: x.reshape([x.shape[i] if d == 0 else d for i, d in enumerate(target)])
    if op == "Concat":
        ax = attrs["axis"]
        return lambda *xs: torch.cat(xs, dim=ax)
    raise TorchUnsupported(f"{op}")


def torch_runner(model: Any, device: str = "cpu") -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """``run(feeds) -> outputs`` executing ``model`` node by node with torch (float32) on
    ``device`` ("cpu", or "cuda" where torch has a GPU: cuDNN/cuBLAS kernels).

    ``run.forward(tensors)`` is the same graph on torch tensors already on ``device``, returning
    torch tensors (no host copies: what a benchmark of the device times)."""
    import torch
    from onnx import helper, numpy_helper

    consts = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    steps, missing = [], {}
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx") or len(node.output) != 1:
            missing.setdefault(node.op_type, []).append(node.name)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        try:
            steps.append((_node_fn(node, attrs, consts), list(node.input), node.output[0]))
        except TorchUnsupported as e:
            missing.setdefault(str(e), []).append(node.name)
    if missing:
        listing = "; ".join(f"{k} ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})"
                            for k, v in sorted(missing.items()))
        raise TorchUnsupported(f"no eager torch mapping for: {listing}")
    weights = {k: torch.from_numpy(np.array(v, order="C")).to(device) for k, v in consts.items()}
    outputs = [o.name for o in model.graph.output]

    def forward(tensors: dict[str, Any]) -> list[Any]:
        env = dict(weights)
        env.update(tensors)
        with torch.inference_mode():
            for fn, ins, out in steps:
                env[out] = fn(*[env[i] if i else None for i in ins])
        return [env[o] for o in outputs]

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        tensors = {k: torch.from_numpy(np.require(v, requirements="CW")).to(device)
                   for k, v in feeds.items()}
        return [t.cpu().numpy() for t in forward(tensors)]

    run.forward = forward  # type: ignore[attr-defined]
    return run
