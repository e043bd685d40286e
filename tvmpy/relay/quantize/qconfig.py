"""``relay.quantize.qconfig``: the quantization settings, as a context manager (TVM's names)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["QConfig", "qconfig", "current_qconfig", "CALIBRATE_MODES", "WEIGHT_SCALES"]

CALIBRATE_MODES = ("global_scale", "kl_divergence", "percentile", "max")
WEIGHT_SCALES = ("power2", "max")


@dataclass(frozen=True)
class QConfig:
    """What ``quantize`` does. ``skip_conv_layers``: indices (graph order) of conv2d layers kept
    in float; ``skip_dense_layer``: keep every dense in float; ``per_channel``: one weight scale
    per output channel; ``round_for_shift``: with ``weight_scale="power2"`` activation scales are
    rounded up to powers of two too, so every requantization is a rounding right shift;
    ``percentile``: the percentile (of |x|) taken as the threshold in "percentile" mode;
    ``dtype_input="uint8"``: anchors read their data as uint8 ``q + 128`` (the form of x86's
    u8 x s8 dot-product instructions), the shift undone exactly by a per-channel constant.
    ``residual_dtype="int8"`` (for VTA, whose stores are int8 only): the second operand of each
    residual ``add`` (TVM's add rule quantizes it as an INPUT) is requantized to int8 at the
    add's scale, and a float operand beside a quantized one is quantized too, so every tensor
    crossing between two convolutions is int8; the default "int32" keeps the residual stream
    in int32 (exact, one requantization fewer)."""

    nbit_input: int = 8
    nbit_weight: int = 8
    nbit_activation: int = 32
    dtype_input: str = "int8"
    dtype_weight: str = "int8"
    dtype_activation: str = "int32"
    calibrate_mode: str = "global_scale"
    global_scale: float = 8.0
    weight_scale: str = "power2"
    skip_conv_layers: tuple[int, ...] = (0,)
    skip_dense_layer: bool = True
    per_channel: bool = False
    round_for_shift: bool = True
    percentile: float = 99.99
    kl_bins: int = 2049
    residual_dtype: str = "int32"

    def __post_init__(self) -> None:
        if self.calibrate_mode not in CALIBRATE_MODES:
            raise ValueError(f"qconfig: unknown calibrate_mode {self.calibrate_mode!r} "
                             f"(choose from {', '.join(CALIBRATE_MODES)})")
        if self.weight_scale not in WEIGHT_SCALES:
            raise ValueError(f"qconfig: unknown weight_scale {self.weight_scale!r} "
                             f"(choose from {', '.join(WEIGHT_SCALES)})")
        if self.nbit_input != 8 or self.nbit_weight != 8 or self.dtype_input not in (
                "int8", "uint8") or self.dtype_weight != "int8":
            raise ValueError("qconfig: only 8-bit inputs (int8 or uint8) and int8 weights are "
                             "realized "
                             f"(got nbit_input={self.nbit_input}, nbit_weight={self.nbit_weight}, "
                             f"dtype_input={self.dtype_input}, dtype_weight={self.dtype_weight})")
        if self.dtype_activation != "int32" or self.nbit_activation != 32:
            raise ValueError("qconfig: activations accumulate in int32 "
                             f"(got dtype_activation={self.dtype_activation})")
        if self.residual_dtype not in ("int32", "int8"):
            raise ValueError(f"qconfig: residual_dtype must be 'int32' or 'int8', got "
                             f"{self.residual_dtype!r}")
        if self.residual_dtype == "int8" and self.dtype_input != "int8":
            raise ValueError("qconfig: residual_dtype='int8' needs dtype_input='int8' "
                             f"(got {self.dtype_input!r})")
        if not self.global_scale > 0:
            raise ValueError(f"qconfig: global_scale must be positive, got {self.global_scale}")
        if not 0 < self.percentile <= 100:
            raise ValueError(f"qconfig: percentile must be in (0, 100], got {self.percentile}")

    def __enter__(self) -> QConfig:
        _STACK.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _STACK.pop()


_STACK: list[QConfig] = [QConfig()]
_NAMES = {f.name for f in fields(QConfig)}


def qconfig(**kwargs: Any) -> QConfig:
    """A QConfig: the current one with ``kwargs`` changed (``with qconfig(...): quantize(...)``)."""
    unknown = sorted(set(kwargs) - _NAMES)
    if unknown:
        raise ValueError(f"qconfig: unknown options {unknown} (known: {sorted(_NAMES)})")
    if "skip_conv_layers" in kwargs:
        v = kwargs["skip_conv_layers"]
        kwargs["skip_conv_layers"] = tuple(int(i) for i in (v or ()))
    return replace(current_qconfig(), **kwargs)


def current_qconfig() -> QConfig:
    """The innermost ``with qconfig(...)`` (defaults outside any)."""
    return _STACK[-1]
