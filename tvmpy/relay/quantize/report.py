"""How far a quantized module is from its fp32 original: top-1 agreement and logit errors on
the calibration set and on held-out random inputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..module import IRModule

__all__ = ["AccuracyReport", "accuracy_report"]


@dataclass
class AccuracyReport:
    """``top1_*``: fraction of samples whose argmax (over the last axis of the first output)
    matches fp32's; ``max_abs_err`` / ``mean_abs_err``: over every output element of every
    sample; ``logit_range``: max |fp32 output| (to read the errors against)."""

    top1_calibration: float
    top1_heldout: float
    max_abs_err: float
    mean_abs_err: float
    logit_range: float
    n_calibration: int
    n_heldout: int

    def __str__(self) -> str:
        return (f"top-1 agreement with fp32: calibration {self.top1_calibration:.1%} "
                f"({self.n_calibration} samples), held-out {self.top1_heldout:.1%} "
                f"({self.n_heldout} random samples); |int8 - fp32| max {self.max_abs_err:.4g}, "
                f"mean {self.mean_abs_err:.4g} (fp32 outputs up to {self.logit_range:.4g})")


def _runner(mod: IRModule, params: Mapping[str, Any] | None):
    from ... import transform
    from ...contrib import graph_executor
    from ...runtime import cpu
    from .. import build

    with transform.PassContext(opt_level=3):
        lib = build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](cpu(0)))
    names = [p.name_hint for p in mod["main"].params if not params or p.name_hint not in params]

    def run(d: Mapping[str, np.ndarray]) -> np.ndarray:
        m.set_input(**{n: np.asarray(d[n]) for n in names})
        m.run()
        return m.get_output(0).numpy()

    return run, names


def _heldout(data: list[dict[str, np.ndarray]], n: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Random inputs with each input's calibration mean and spread (normal, per input)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        d = {}
        for k, v in data[0].items():
            allv = np.stack([np.asarray(x[k]) for x in data])
            mu, sd = float(allv.mean()), float(allv.std()) or 1.0
            d[k] = rng.normal(mu, sd, np.shape(v)).astype(np.asarray(v).dtype)
        out.append(d)
    return out


def accuracy_report(fp32_mod: IRModule, qmod: IRModule, params: Mapping[str, Any] | None,
                    dataset: Iterable[Mapping[str, np.ndarray]],
                    heldout: Iterable[Mapping[str, np.ndarray]] | int = 100,
                    seed: int = 0) -> AccuracyReport:
    """Compare ``qmod`` with ``fp32_mod`` (and its ``params``) on ``dataset`` and on ``heldout``
    (samples, or how many random ones to draw like the dataset's inputs)."""
    data = [dict(d) for d in dataset]
    if not data:
        raise ValueError("accuracy_report: the dataset is empty")
    held = _heldout(data, heldout, seed) if isinstance(heldout, int) else [dict(d) for d in heldout]
    f32, _ = _runner(fp32_mod, params)
    q, _ = _runner(qmod, None)
    errs: list[np.ndarray] = []
    agree: dict[str, list[float]] = {"cal": [], "held": []}
    rng_max = 0.0
    for tag, ds in (("cal", data), ("held", held)):
        for d in ds:
            a, b = f32(d), q(d)
            errs.append(np.abs(a.astype(np.float64) - b))
            rng_max = max(rng_max, float(np.abs(a).max()))
            same = a.reshape(-1, a.shape[-1]).argmax(-1) == b.reshape(-1, b.shape[-1]).argmax(-1)
            agree[tag].append(float(np.mean(same)))
    e = np.concatenate([x.ravel() for x in errs])
    return AccuracyReport(float(np.mean(agree["cal"])),
                          float(np.mean(agree["held"])) if agree["held"] else float("nan"),
                          float(e.max()), float(e.mean()), rng_max, len(data), len(held))
