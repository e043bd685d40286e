"""Quantized ONNX models as users make them: ``onnxruntime.quantization.quantize_static`` (QDQ
or QOperator format, per-channel weights, calibrated on random inputs) or ``quantize_dynamic``,
applied to the float models of ``onnx_models`` (or any ModelProto). Used by bench/int8.py and
the int8 end-to-end tests; nothing is downloaded or read from disk but temporary files that
onnxruntime's quantizer needs."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from .onnx_models import input_feeds

__all__ = ["quantize_static", "quantize_dynamic", "calibration_feeds", "pre_process"]


def calibration_feeds(model: Any, count: int = 8, seed: int = 100) -> list[dict[str, np.ndarray]]:
    """``count`` random input dicts for calibration (the same generator as ``input_feeds``)."""
    return [input_feeds(model, seed + i) for i in range(count)]


def _tmp_io(model: Any) -> tuple[str, str, str]:
    import onnx

    d = tempfile.mkdtemp(prefix="tvmpy_quant_")
    src, dst = os.path.join(d, "model.onnx"), os.path.join(d, "model.q.onnx")
    onnx.save(model, src)
    return d, src, dst


def _load_and_clean(d: str, dst: str) -> Any:
    import shutil

    import onnx

    try:
        return onnx.load(dst)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def pre_process(model: Any) -> Any:
    """``onnxruntime.quantization.quant_pre_process`` of ``model`` -> ModelProto: symbolic shape
    inference and onnxruntime's basic graph optimizations (BatchNormalization folded into the
    convolution before it, constants folded), the step onnxruntime's quantization guide runs
    before ``quantize_static``. Without it a quantized CNN keeps its BatchNormalizations in
    float between QLinearConvs, and onnxruntime runs them with layout Transposes around each."""
    from onnxruntime import quantization as q

    d, src, dst = _tmp_io(model)
    q.quant_pre_process(src, dst)
    return _load_and_clean(d, dst)


def quantize_static(model: Any, calibration: list[dict[str, np.ndarray]] | None = None,
                    fmt: str = "QDQ", per_channel: bool = True, activation: str = "uint8",
                    weight: str = "int8", op_types: list[str] | None = None,
                    symmetric_activation: bool = False, reduce_range: bool = False) -> Any:
    """``onnxruntime.quantization.quantize_static`` of ``model`` (a ModelProto) -> ModelProto.

    ``reduce_range``: 7-bit weights (onnxruntime's advice for x86 without VNNI, whose u8s8
    kernels saturate pair sums beyond int16: only then is its int8 run an exact reference).

    ``fmt``: "QDQ" or "QOperator"; ``activation``/``weight``: "uint8" or "int8" (onnxruntime
    recommends uint8 activations with int8 weights on x86, its VNNI path); calibration by
    min/max on ``calibration`` (default: 8 random input dicts).
    """
    from onnxruntime import quantization as q

    if fmt not in ("QDQ", "QOperator"):
        raise ValueError(f"fmt must be 'QDQ' or 'QOperator', got {fmt!r}")
    types = {"uint8": q.QuantType.QUInt8, "int8": q.QuantType.QInt8}
    if activation not in types or weight not in types:
        raise ValueError(f"activation/weight must be 'uint8' or 'int8', got {activation!r}, "
                         f"{weight!r}")
    feeds = calibration if calibration is not None else calibration_feeds(model)
    if not feeds:
        raise ValueError("quantize_static needs at least one calibration input")

    class Reader(q.CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    d, src, dst = _tmp_io(model)
    q.quantize_static(src, dst, Reader(), quant_format=getattr(q.QuantFormat, fmt),
                      per_channel=per_channel, activation_type=types[activation],
                      weight_type=types[weight], op_types_to_quantize=op_types,
                      reduce_range=reduce_range,
                      extra_options={"ActivationSymmetric": symmetric_activation})
    return _load_and_clean(d, dst)


def quantize_dynamic(model: Any, weight: str = "int8", per_channel: bool = False,
                     reduce_range: bool = False) -> Any:
    """``onnxruntime.quantization.quantize_dynamic`` of ``model`` -> ModelProto (MatMulInteger /
    DynamicQuantizeLinear graphs); ``reduce_range`` as in ``quantize_static``."""
    from onnxruntime import quantization as q

    types = {"uint8": q.QuantType.QUInt8, "int8": q.QuantType.QInt8}
    if weight not in types:
        raise ValueError(f"weight must be 'uint8' or 'int8', got {weight!r}")
    d, src, dst = _tmp_io(model)
    q.quantize_dynamic(src, dst, per_channel=per_channel, weight_type=types[weight],
                      reduce_range=reduce_range)
    return _load_and_clean(d, dst)
