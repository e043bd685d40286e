"""GPU computes and schedules (TVM's ``topi.cuda``: used for CUDA and OpenCL targets alike).

AutoTVM templates (task names as TVM's): ``conv2d_nchw.cuda`` (conv2d_direct.py),
``depthwise_conv2d_nchw.cuda`` (depthwise_conv2d.py), ``dense.cuda`` and
``batch_matmul.cuda`` (dense.py). Each ``compute(cfg, ...)`` / ``schedule(cfg, outs)`` pair is
called as ``compute(...)`` / ``schedule(outs)`` (tuned configs under ``apply_history_best``,
shape-derived fallbacks otherwise), so relay strategies use them directly.
"""

from .conv2d_direct import conv2d_nchw, schedule_conv2d_nchw  # noqa: F401
from .dense import batch_matmul, dense, schedule_batch_matmul, schedule_dense  # noqa: F401
from .depthwise_conv2d import (  # noqa: F401
    depthwise_conv2d_nchw,
    schedule_depthwise_conv2d_nchw,
)
