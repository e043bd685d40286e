"""Build-and-check helper for the nn operator tests: schedule, build for a target, run on seeded
random inputs (outputs pre-filled with NaN, or -77 for integers, so an unwritten element fails), compare with the
numpy reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tvmpy as tvm
from tvmpy import te


def shape_of(t: te.Tensor) -> tuple[int, ...]:
    return tuple(int(s.value) if hasattr(s, "value") else int(s) for s in t.shape)


def check(inputs: Sequence[te.Tensor], out: te.Tensor, schedule: Callable[[Any], Any],
          ref: Callable[..., np.ndarray], target: str = "llvm", rtol: float = 1e-4,
          atol: float = 1e-4, low: float = -1.0, high: float = 1.0, seed: int = 0,
          arrays: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Schedule ``[out]`` with ``schedule``, build, run, assert close to ``ref(*arrays)``."""
    s = schedule([out])
    f = tvm.build(s, [*inputs, out], target)
    rng = np.random.default_rng(seed)
    if arrays is None:
        arrays = [rng.uniform(low, high, shape_of(t)).astype(t.dtype) for t in inputs]
    sentinel = np.nan if np.dtype(out.dtype).kind == "f" else -77
    res = tvm.nd.array(np.full(shape_of(out), sentinel, out.dtype))
    f(*[tvm.nd.array(np.ascontiguousarray(a)) for a in arrays], res)
    expected = ref(*arrays)
    np.testing.assert_allclose(res.numpy(), expected, rtol=rtol, atol=atol)
    return res.numpy()


def nchwc_conv_case(c: int, h: int, w: int, oc: int, kh: int, kw: int, stride: Any,
                    pad: tuple[int, int, int, int], icb: int, ocb: int, bias_relu: bool = True,
                    seed: int = 0) -> tuple[list[te.Tensor], te.Tensor, list[np.ndarray],
                                            np.ndarray]:
    """A plain ``conv2d_NCHWc`` (NCHW{icb}c -> NCHW{ocb}c, padding (top, left, bottom, right)),
    with a fused bias + relu when ``bias_relu``, on seeded random inputs: its placeholders, its
    output, the blocked input arrays and numpy's result in the blocked layout (for
    :func:`check` with ``arrays=``)."""
    from tvmpy import topi
    from tvmpy.topi import testing

    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    k = rng.uniform(-1, 1, (oc, c, kh, kw)).astype("float32")
    b = rng.uniform(-1, 1, (oc,)).astype("float32")
    A = te.placeholder((1, c // icb, h, w, icb), name="A")
    K = te.placeholder((oc // ocb, c // icb, kh, kw, icb, ocb), name="K")
    B = te.placeholder((1, oc // ocb, 1, 1, ocb), name="B")
    out = topi.nn.conv2d_NCHWc(A, K, stride, pad, 1, f"NCHW{icb}c", f"NCHW{ocb}c")
    pt, pl, pb, pr = pad
    want = testing.conv2d_nchw_python(np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))), k,
                                      stride, 0)
    kk = np.ascontiguousarray(
        k.reshape(oc // ocb, ocb, c // icb, icb, kh, kw).transpose(0, 2, 4, 5, 3, 1))
    inputs, arrays = [A, K], [testing.nchw_to_nchwc(x, icb), kk]
    if bias_relu:
        out = topi.nn.relu(out + B)
        want = np.maximum(want + b.reshape(1, oc, 1, 1), 0)
        inputs.append(B)
        arrays.append(b.reshape(1, oc // ocb, 1, 1, ocb))
    return inputs, out, arrays, testing.nchw_to_nchwc(want, ocb)
