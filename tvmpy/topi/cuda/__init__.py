"""GPU computes and schedules (TVM's ``topi.cuda``: used for every target with the key "gpu",
OpenCL and CUDA).

Plain schedules (``relay/op/strategy/gpu.py`` uses them for every operator): ``injective.py``
(fused elementwise chains, one thread per output), ``reduction.py`` (reductions, cross-thread
when the reduced extent is long; softmax and layer_norm one block per row; pooling),
``fallback.py`` (one thread per output for any other operator, a reduction and its elementwise
consumers in one kernel).

AutoTVM templates (task names as TVM's): ``conv2d_nchw.cuda`` (conv2d_direct.py),
``conv2d_nchw_winograd.cuda`` (conv2d_winograd.py: 3x3 stride-1 Winograd),
``depthwise_conv2d_nchw.cuda`` (depthwise_conv2d.py), ``dense.cuda`` and ``batch_matmul.cuda``
(dense.py); on tensor cores (float16, wmma) ``dense_tensorcore.cuda`` and
``batch_matmul_tensorcore.cuda`` (dense_tensorcore.py, intrinsics in tensor_intrin.py). Each ``compute(cfg, ...)`` / ``schedule(cfg, outs)`` pair is called as
``compute(...)`` / ``schedule(outs)`` (tuned configs under ``apply_history_best``, shape-derived
fallbacks otherwise), so relay strategies use them directly (relay/op/strategy/gpu.py).
"""

from .conv2d_direct import conv2d_nchw, schedule_conv2d_nchw  # noqa: F401
from .conv2d_winograd import (  # noqa: F401
    conv2d_nchw_winograd,
    conv2d_nchw_winograd_weight_transform,
    conv2d_nchw_winograd_without_weight_transform,
    schedule_conv2d_nchw_winograd,
    schedule_winograd_weight_transform,
    winograd_tile_size,
)
from .dense import batch_matmul, dense, schedule_batch_matmul, schedule_dense  # noqa: F401
from .dense_tensorcore import (  # noqa: F401
    batch_matmul_tensorcore,
    dense_tensorcore,
    schedule_batch_matmul_tensorcore,
    schedule_dense_tensorcore,
    tensorcore_shape,
)
from .depthwise_conv2d import (  # noqa: F401
    depthwise_conv2d_nchw,
    schedule_depthwise_conv2d_nchw,
)
from .fallback import schedule_fallback  # noqa: F401
from .injective import schedule_broadcast, schedule_elemwise, schedule_injective  # noqa: F401
from .reduction import (  # noqa: F401
    schedule_layer_norm,
    schedule_pool,
    schedule_reduce,
    schedule_softmax,
)
