"""Shared inputs of the int8 kernel tests: full-range uint8 data / int8 weights with the extreme
values present (255 and -128 catch a saturating instruction), and AutoTVM's fallback warning
silenced."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

RNG = np.random.default_rng(10)


@pytest.fixture(autouse=True)
def _quiet_fallback() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="autotvm: no tuned config")
        yield


def u8(*shape: int) -> np.ndarray:
    x = RNG.integers(0, 256, shape).astype("uint8")
    x.flat[0] = 255
    return x


def s8(*shape: int) -> np.ndarray:
    w = RNG.integers(-128, 128, shape).astype("int8")
    w.flat[0] = -128
    return w


VNNI = "llvm -mcpu=znver4"


def requant(y: Any, scale: float, zp: int, dtype: str = "uint8") -> Any:
    """The relay requantize chain QNN canonicalization emits (float scale, round half to even)."""
    from tvmpy import relay

    f = relay.round(relay.cast(y, "float32") * relay.const(scale, "float32"))
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    return relay.cast(relay.clip(f + relay.const(float(zp), "float32"), lo, hi), dtype)


def requant_np(y: np.ndarray, scale: float, zp: int, dtype: str = "uint8") -> np.ndarray:
    f = np.rint(y.astype(np.float32) * np.float32(scale)) + np.float32(zp)
    lo, hi = (0, 255) if dtype == "uint8" else (-128, 127)
    return np.clip(f, lo, hi).astype(dtype)


def build(f: Any, target: str = VNNI, opt_level: int = 3) -> Any:
    import tvmpy as tvm
    from tvmpy import relay

    with tvm.transform.PassContext(opt_level=opt_level):
        return relay.build(tvm.IRModule.from_expr(f), target=target)


def run(lib: Any, **inputs: np.ndarray) -> np.ndarray:
    import tvmpy as tvm
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return m.get_output(0).numpy()
