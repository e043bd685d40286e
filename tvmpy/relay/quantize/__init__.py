"""Automatic quantization of fp32 relay modules to int8 (TVM's ``relay.quantize``).

    with relay.quantize.qconfig(calibrate_mode="kl_divergence", weight_scale="max"):
        qmod = relay.quantize.quantize(mod, params, dataset=[{"x": x0}, {"x": x1}, ...])
    report = relay.quantize.accuracy_report(mod, qmod, params, dataset)
"""

from .calibrate import kl_divergence_threshold  # noqa: F401
from .qconfig import QConfig, current_qconfig, qconfig  # noqa: F401
from .quantize import (  # noqa: F401
    Annotated,
    QuantizeError,
    QuantizeInfo,
    annotate,
    calibrate,
    prerequisite_optimize,
    quantize,
    realize,
    requantize,
    simulate,
)
from .report import AccuracyReport, accuracy_report  # noqa: F401
