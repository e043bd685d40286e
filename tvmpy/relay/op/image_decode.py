"""``image.decode``: ONNX ImageDecoder, a HOST operator (decoded by Pillow, on the CPU host).

``decode(encoded, pixel_format="RGB")``: the bytes of a JPEG / JPEG 2000 / PNG / BMP / TIFF /
WebP / PNM file in a 1-d uint8 tensor -> the ``(height, width, channels)`` uint8 image
(channels: 3 for "RGB" and "BGR", 1 for "Grayscale"). Height and width are in the file: the
type has ``Any`` there and the shape function decodes the header on the host.

There is no kernel and no strategy: the op is a run-time builtin (``TRuntimeBuiltin``: an
executor runs its ``FNumpy``, a Pillow call, on the host, as the VM does for list operators);
that *is* its implementation, in the interpreter too. Pillow decodes exactly what onnx's reference expects (the reference calls Pillow
itself); an RGB/BGR request converts other modes (grayscale, RGBA, palette) to RGB, as the ONNX
specification defines the output channels. Pillow is imported only when an image is decoded.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from ..expr import RelayExpr
from ..ty import Any as AnyDim
from ..ty import TensorType, Type
from ._rel import fail, tensor_arg
from .registry import OpPattern, make_call, register_op, register_op_attr
from .shape_func import register_shape_func

__all__ = ["decode", "decode_np"]

_FORMATS = {"RGB": 3, "BGR": 3, "Grayscale": 1}


def _decode_rel(arg_types: list[Type], attrs: Any) -> Type:
    t = tensor_arg(arg_types[0], "the encoded image")
    if t.dtype != "uint8" or len(t.shape) != 1:
        fail(f"image.decode: the encoded image must be a 1-d uint8 tensor, got "
             f"{t.dtype} {tuple(t.shape)}")
    if attrs.pixel_format not in _FORMATS:
        fail(f"image.decode: pixel_format must be one of {list(_FORMATS)}, got "
             f"{attrs.pixel_format!r}")
    return TensorType([AnyDim("height"), AnyDim("width"), _FORMATS[attrs.pixel_format]], "uint8")


def decode_np(encoded: np.ndarray, pixel_format: str = "RGB") -> np.ndarray:
    """Decode on the host with Pillow (a clear error when it is missing or cannot decode)."""
    try:
        import PIL.Image
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("image.decode (ONNX ImageDecoder) decodes on the host with Pillow: "
                           "pip install pillow") from e
    try:
        img = PIL.Image.open(io.BytesIO(np.ascontiguousarray(encoded, "uint8").tobytes()))
        img.load()
    except Exception as e:  # noqa: BLE001 -- Pillow raises several types for bad data
        raise ValueError(f"image.decode: cannot decode the {np.size(encoded)} bytes as an image "
                         f"({type(e).__name__}: {e})") from e
    if pixel_format == "Grayscale":
        return np.asarray(img.convert("L"), "uint8")[:, :, None]
    rgb = np.asarray(img if img.mode == "RGB" else img.convert("RGB"), "uint8")
    return np.ascontiguousarray(rgb[:, :, ::-1]) if pixel_format == "BGR" else rgb


register_op("image.decode", _decode_rel, OpPattern.OPAQUE, 1, {"pixel_format": "RGB"})
register_op_attr("image.decode", "FNumpy", lambda attrs, ins, t: decode_np(ins[0], attrs.pixel_format))
register_op_attr("image.decode", "TRuntimeBuiltin", True)
register_shape_func("image.decode", lambda attrs, ins: [decode_np(ins[0], attrs.pixel_format).shape],
                    data_dependent=True)


def decode(encoded: RelayExpr, pixel_format: str = "RGB") -> RelayExpr:
    """ONNX ImageDecoder (a host operator: see the module docstring)."""
    return make_call("image.decode", [encoded], {"pixel_format": pixel_format})
