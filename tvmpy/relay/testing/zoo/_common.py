"""Helpers shared by the model definitions: seeding, batch-norm statistics, image specs."""

from __future__ import annotations

from typing import Any

from .spec import Input, Spec


def seeded(seed: int = 0) -> None:
    """Deterministic random weights for the module built next."""
    import torch

    torch.manual_seed(seed)


def finish(module: Any, inputs: list[Input], dims: dict[str, int] | None = None,
           calibrate: bool = True) -> Spec:
    """The module in eval mode as a Spec. With ``calibrate``, batch-norm layers first take
    their running statistics from one forward pass on random inputs (as a trained network's
    are: a deep stack of randomly initialised layers with mean 0 / variance 1 statistics
    would otherwise let activations grow or vanish with depth)."""
    import numpy as np
    import torch

    spec = Spec(module, inputs, dims or {"batch": 1})
    with torch.no_grad():
        for p in module.parameters():
            # zero-initialised heads / class tokens (ViT, MLP-Mixer) would make the output 0
            if p.dim() >= 2 and not p.any():
                p.normal_(0.0, float(p.shape[-1]) ** -0.5)
    bns = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if calibrate and bns:
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # cumulative average: one pass sets the statistics
        module.train()
        # enough samples for per-channel statistics of the small 1x1 late feature maps, at
        # most ~1.2M input values (two 224x224 images)
        per_sample = sum(int(np.prod(i.concrete({**spec.dims, "batch": 1})))
                         for i in spec.inputs)
        batch = max(2, min(16, 400_000 // max(per_sample, 1)))
        feeds = spec.feeds(seed=99, **{"batch": batch} if "batch" in spec.dims else {})
        with torch.no_grad():
            module(*[torch.from_numpy(v) for v in feeds.values()])
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return spec


def image(size: int, channels: int = 3) -> list[Input]:
    return [Input("input", ("batch", channels, size, size))]


def first_output(module: Any, key: Any) -> Any:
    import torch

    class _Pick(torch.nn.Module):
        def __init__(self, inner: Any):
            super().__init__()
            self.inner = inner

        def forward(self, x: Any) -> Any:  # one input (torch.export's dynamic_shapes match it)
            out = self.inner(x)
            if hasattr(out, "keys") or isinstance(out, (tuple, list)):
                return out[key]
            return getattr(out, key)

    return _Pick(module)
