"""``tvm.testing``: the helpers TVM tutorials use to check results."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["assert_allclose"]


def _as_numpy(x: Any) -> np.ndarray:
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else np.asarray(x)


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``np.testing.assert_allclose`` that also accepts NDArrays and checks shapes first."""
    a, d = _as_numpy(actual), _as_numpy(desired)
    np.testing.assert_equal(np.shape(a), np.shape(d))
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)
