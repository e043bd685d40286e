"""Shared inputs of the int8 kernel tests: full-range uint8 data / int8 weights with the extreme
values present (255 and -128 catch a saturating instruction), and AutoTVM's fallback warning
silenced."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

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
