"""Numpy references of the bit-serial operators, written from their arithmetic meaning (integer
products of the low bits), not from bit planes: an unipolar ``w``-bit weight value ``v`` means
``sum_j 2**j * (2*bit_j(v) - 1) = 2*v - (2**w - 1)``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .nn_ref import conv2d_nchw_python

__all__ = ["bitpack_python", "bitunpack_python", "bitserial_dense_python", "bitserial_conv2d_nchw_python",
           "bitserial_conv2d_nhwc_python"]


def _low(x: np.ndarray, bits: int) -> np.ndarray:
    return np.asarray(x).astype(np.int64) & ((1 << bits) - 1)


def _weight(w: np.ndarray, bits: int, unipolar: bool) -> np.ndarray:
    v = _low(w, bits)
    return 2 * v - ((1 << bits) - 1) if unipolar else v


def bitpack_python(x: np.ndarray, bits: int, pack_axis: int, bit_axis: int,
                   pack_type: str) -> np.ndarray:
    """Bit ``b`` of element ``k * word + j`` of ``pack_axis`` at bit ``word - 1 - j`` of word ``k``."""
    word = np.dtype(pack_type).itemsize * 8
    pack_axis %= np.ndim(x)
    x = np.moveaxis(_low(x, bits), pack_axis, -1)
    c = x.shape[-1]
    words = -(-c // word)
    x = np.concatenate([x, np.zeros(x.shape[:-1] + (words * word - c,), np.int64)], axis=-1)
    x = x.reshape(x.shape[:-1] + (words, word)).astype(np.uint64)
    weights = np.left_shift(np.uint64(1), np.arange(word - 1, -1, -1, dtype=np.uint64))
    planes = [(((x >> np.uint64(b)) & np.uint64(1)) * weights).sum(-1, dtype=np.uint64)
              for b in range(bits)]
    out = np.stack(planes, axis=0).astype(pack_type)  # [bits, ..., words]
    out = np.moveaxis(out, -1, pack_axis + 1)  # words back at pack_axis (bits still first)
    return np.moveaxis(out, 0, bit_axis)


def bitunpack_python(packed: np.ndarray, pack_axis: int, bit_axis: int, extent: int
                     ) -> np.ndarray:
    """The values (int64) that ``bitpack_python(values, bits, pack_axis, bit_axis, ...)`` packed,
    ``extent`` elements along ``pack_axis`` (``pack_axis`` of the unpacked array)."""
    word = packed.dtype.itemsize * 8
    planes = np.moveaxis(packed.astype(np.uint64), bit_axis, 0)  # [bits, ..., words, ...]
    planes = np.moveaxis(planes, pack_axis + 1, -1)  # [bits, ..., words]
    shifts = np.arange(word - 1, -1, -1, dtype=np.uint64)
    bits = (planes[..., None] >> shifts) & np.uint64(1)  # [bits, ..., words, word]
    bits = bits.reshape(bits.shape[:-2] + (-1,))[..., :extent].astype(np.int64)
    values = sum(bits[b] << b for b in range(bits.shape[0]))
    return np.moveaxis(values, -1, pack_axis)


def bitserial_dense_python(data: np.ndarray, weight: np.ndarray, data_bits: int, weight_bits: int,
                           out_dtype: str = "int16", unipolar: bool = True) -> np.ndarray:
    return (_low(data, data_bits) @ _weight(weight, weight_bits, unipolar).T).astype(out_dtype)


def bitserial_conv2d_nchw_python(data: np.ndarray, kernel: np.ndarray, stride: Any, padding: Any,
                                 activation_bits: int, weight_bits: int, out_dtype: str = "int16",
                                 unipolar: bool = True) -> np.ndarray:
    a = _low(data, activation_bits)
    w = _weight(kernel, weight_bits, unipolar)
    return conv2d_nchw_python(a, w, stride, padding).astype(out_dtype)


def bitserial_conv2d_nhwc_python(data: np.ndarray, kernel: np.ndarray, stride: Any, padding: Any,
                                 activation_bits: int, weight_bits: int, out_dtype: str = "int16",
                                 unipolar: bool = True) -> np.ndarray:
    """``data`` NHWC, ``kernel`` HWIO."""
    out = bitserial_conv2d_nchw_python(data.transpose(0, 3, 1, 2), kernel.transpose(3, 2, 0, 1),
                                       stride, padding, activation_bits, weight_bits, out_dtype,
                                       unipolar)
    return out.transpose(0, 2, 3, 1)
