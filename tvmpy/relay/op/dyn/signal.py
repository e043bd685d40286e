"""``dyn.dft(data, axis)`` and ``dyn.stft(signal, frame_step, window | frame_length)``: ONNX DFT
with the axis a run-time tensor (opset 20), ONNX STFT with the frame step / length run-time
tensors. Data-dependent shape functions (the transformed axis, the frame count), FNumpy through
``numpy.fft`` (in the data's precision, as ONNX's reference), computes ``topi.dyn.signal``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, RelayTypeError
from ...ty import Any as AnyDim
from ...ty import TensorType, Type
from .._rel import tensor_arg
from ..registry import OpPattern, make_call, register_op, register_op_attr
from ..shape_func import register_shape_func
from .axes_strategy import register_axes_strategy

__all__ = ["dft", "stft"]


def _scalar(v: np.ndarray) -> int:
    return int(np.asarray(v).reshape(-1)[0])


def _scalar_arg(t: Type, what: str) -> None:
    s = tensor_arg(t, what)
    if not str(s.dtype).startswith(("int", "uint")) or len(s.shape) > 1 or (
            len(s.shape) == 1 and s.shape[0] != 1):
        raise RelayTypeError(f"{what} must be one integer, got {s}")




# ---- dft --------------------------------------------------------------------------------------
def _dft_rel(arg_types: list[Type], attrs: Any) -> Type:
    x = tensor_arg(arg_types[0], "the signal")
    _scalar_arg(arg_types[1], "the axis")
    if len(x.shape) < 2 or x.shape[-1] not in (1, 2):
        raise RelayTypeError(f"dft: the signal's last axis must be 1 (real) or 2 (complex), got "
                             f"{x}")
    last = 1 if attrs.inverse and attrs.onesided else 2
    if not attrs.onesided and not attrs.dft_length:
        return TensorType(list(x.shape[:-1]) + [last], x.dtype)
    return TensorType([AnyDim() for _ in x.shape[:-1]] + [last], x.dtype)


def _dft_axis(attrs: Any, rank: int, axis: np.ndarray) -> int:
    a = _scalar(axis)
    if not (-rank <= a < -1 or 0 <= a < rank - 1):
        raise ValueError(f"{attrs.node or 'dft'}: axis value {a} is out of range (a signal axis "
                         f"of data of rank {rank}, not the last)")
    return a % rank


def _dft_length(attrs: Any, n: int) -> int:
    if attrs.dft_length:
        return int(attrs.dft_length)
    return 2 * (n - 1) if attrs.inverse and attrs.onesided else n


def _dft_shape(attrs: Any, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    x, axis = inputs
    a = _dft_axis(attrs, x.ndim, axis)
    L = _dft_length(attrs, x.shape[a])
    if L < 1:
        raise ValueError(f"{attrs.node or 'dft'}: transform length {L} along axis {a}")
    s = list(x.shape)
    s[a] = L // 2 + 1 if attrs.onesided and not attrs.inverse else L
    s[-1] = 1 if attrs.inverse and attrs.onesided else 2
    return [tuple(s)]


def _complex(x: np.ndarray) -> np.ndarray:
    """The signal as complex numbers of the data's precision: numpy (>= 2) transforms complex64
    in single precision, as ONNX's reference does, so the interpreter reproduces its
    rounding."""
    ct = np.complex128 if x.dtype == np.float64 else np.complex64
    c = x[..., 0].astype(ct)
    return c + ct(1j) * x[..., 1].astype(ct) if x.shape[-1] == 2 else c


def _dft_numpy(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
    x = np.asarray(ins[0])
    a = _dft_axis(attrs, x.ndim, ins[1])
    L = _dft_length(attrs, x.shape[a])
    c = _complex(x)
    if attrs.inverse and attrs.onesided:
        return np.fft.irfft(c, n=L, axis=a)[..., None].astype(x.dtype)
    y = (np.fft.ifft if attrs.inverse else np.fft.fft)(c, n=L, axis=a)
    if attrs.onesided:
        y = np.take(y, np.arange(L // 2 + 1), axis=a)
    return np.stack([y.real, y.imag], -1).astype(x.dtype)


def _dft_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from ....topi.dyn.signal import dyn_dft

    return [dyn_dft(inputs[0], inputs[1], list(out_type.shape), bool(attrs.inverse),
                    bool(attrs.onesided), int(attrs.dft_length))]


register_op("dyn.dft", _dft_rel, OpPattern.OPAQUE, 2,
            {"inverse": False, "onesided": False, "dft_length": 0, "node": ""},
            "a discrete Fourier transform along an axis given as a run-time tensor")
register_op_attr("dyn.dft", "FNumpy", _dft_numpy)
register_shape_func("dyn.dft", _dft_shape, data_dependent=True)
register_axes_strategy("dyn.dft", _dft_compute, reduces=True)


def dft(data: RelayExpr, axis: RelayExpr, inverse: bool = False, onesided: bool = False,
        dft_length: int = 0, node: str = "") -> RelayExpr:
    """ONNX DFT of ``data`` (..., 1 | 2) along the axis in the tensor ``axis``."""
    return make_call("dyn.dft", [data, axis], {"inverse": bool(inverse),
                                               "onesided": bool(onesided),
                                               "dft_length": int(dft_length), "node": str(node)})


# ---- stft -------------------------------------------------------------------------------------
def _stft_rel(arg_types: list[Type], attrs: Any) -> Type:
    sig = tensor_arg(arg_types[0], "the signal")
    _scalar_arg(arg_types[1], "the frame step")
    if len(sig.shape) != 3 or sig.shape[-1] not in (1, 2):
        raise RelayTypeError(f"stft: the signal must be (batch, length, 1 | 2), got {sig}")
    one = attrs.onesided and sig.shape[-1] == 1
    if attrs.has_window:
        w = tensor_arg(arg_types[2], "the window")
        if len(w.shape) != 1:
            raise RelayTypeError(f"stft: the window must be 1-D, got {w}")
        n = w.shape[0]
        bins: Any = (n // 2 + 1 if one else n) if isinstance(n, int) else AnyDim()
    else:
        _scalar_arg(arg_types[2], "the frame length")
        bins = AnyDim()
    return TensorType([sig.shape[0], AnyDim(), bins, 2], sig.dtype)


def _stft_geometry(attrs: Any, sig: np.ndarray, step: np.ndarray, third: np.ndarray
                   ) -> tuple[int, int, int]:
    """(frame step, frame length, frame count), checked."""
    s = _scalar(step)
    flen = int(third.shape[0]) if attrs.has_window else _scalar(third)
    where = attrs.node or "stft"
    if s < 1 or flen < 1 or flen > sig.shape[1]:
        raise ValueError(f"{where}: frame step {s} / frame length {flen} do not fit a signal of "
                         f"length {sig.shape[1]}")
    return s, flen, (sig.shape[1] - flen) // s + 1


def _stft_shape(attrs: Any, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    sig = inputs[0]
    _, flen, frames = _stft_geometry(attrs, sig, inputs[1], inputs[2])
    bins = flen // 2 + 1 if attrs.onesided and sig.shape[-1] == 1 else flen
    return [(sig.shape[0], frames, bins, 2)]


def _stft_numpy(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
    sig = np.asarray(ins[0])
    step, flen, frames = _stft_geometry(attrs, sig, ins[1], ins[2])
    idx = np.arange(frames)[:, None] * step + np.arange(flen)[None, :]
    fr = _complex(sig)[:, idx]                                   # (batch, frames, flen)
    if attrs.has_window:
        fr = fr * np.asarray(ins[2]).astype(fr.real.dtype)
    y = np.fft.fft(fr, axis=-1)
    if attrs.onesided and sig.shape[-1] == 1:
        y = y[..., : flen // 2 + 1]
    return np.stack([y.real, y.imag], -1).astype(sig.dtype)


def _stft_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from ....topi.dyn.signal import dyn_stft

    window = inputs[2] if attrs.has_window else None
    flen = None if attrs.has_window else inputs[2]
    one = bool(attrs.onesided) and int(getattr(inputs[0].shape[-1], "value",
                                               inputs[0].shape[-1])) == 1
    return [dyn_stft(inputs[0], inputs[1], window, flen, list(out_type.shape), one)]


register_op("dyn.stft", _stft_rel, OpPattern.OPAQUE, 3,
            {"onesided": True, "has_window": True, "node": ""},
            "a short-time Fourier transform whose frame step / length are run-time tensors")
register_op_attr("dyn.stft", "FNumpy", _stft_numpy)
register_shape_func("dyn.stft", _stft_shape, data_dependent=True)
register_axes_strategy("dyn.stft", _stft_compute, reduces=True)


def stft(signal: RelayExpr, frame_step: RelayExpr, window_or_length: RelayExpr,
         has_window: bool, onesided: bool = True, node: str = "") -> RelayExpr:
    """ONNX STFT; ``window_or_length``: the window (``has_window``) or the frame length."""
    return make_call("dyn.stft", [signal, frame_step, window_or_length],
                     {"onesided": bool(onesided), "has_window": bool(has_window),
                      "node": str(node)})
