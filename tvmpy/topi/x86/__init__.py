"""x86 schedules."""

from .attention import schedule_attention  # noqa: E402,F401
from .conv2d import (  # noqa: E402,F401
    schedule_conv1d_ncw,
    schedule_conv1d_transpose_ncw,
    schedule_conv2d_nchw,
    schedule_conv2d_transpose_nchw,
    schedule_conv3d_ncdhw,
    schedule_conv3d_transpose_ncdhw,
    schedule_conv_nd,
    schedule_depthwise_conv2d_nchw,
    schedule_group_conv1d_ncw,
    schedule_group_conv2d_nchw,
    schedule_group_conv2d_transpose_nchw,
)
from .conv2d_nchwc import (  # noqa: E402,F401
    conv2d_NCHWc,
    depthwise_conv2d_NCHWc,
    schedule_conv2d_NCHWc,
    schedule_conv2d_NCHWc_autotvm,
    schedule_depthwise_conv2d_NCHWc,
    schedule_depthwise_conv2d_NCHWc_autotvm,
)
from .conv2d_winograd import (  # noqa: E402,F401
    conv2d_winograd_nchwc_x86,
    schedule_conv2d_winograd_nchwc,
    schedule_conv2d_winograd_nchwc_x86,
)
from .dense import (  # noqa: E402,F401
    batch_matmul_pack,
    dense_pack,
    dense_prepacked,
    matmul_pack,
    panel_width,
    schedule_batch_matmul,
    schedule_dense,
    schedule_dense_pack,
    schedule_matmul,
)
from .gemm import gemm_template, packed_gemm  # noqa: E402,F401
from .injective import (  # noqa: E402,F401
    schedule_broadcast,
    schedule_concatenate,
    schedule_elemwise,
    schedule_injective,
    schedule_injective_from_existing,
)
from .normalization import (  # noqa: E402,F401
    ORT_LANES,
    layer_norm,
    schedule_batch_norm,
    schedule_group_norm,
    schedule_instance_norm,
    schedule_layer_norm,
    schedule_lrn,
)
from .pooling import schedule_adaptive_pool, schedule_global_pool, schedule_pool  # noqa: E402,F401
from .reduction import schedule_reduce  # noqa: E402,F401
from .softmax import schedule_softmax  # noqa: E402,F401
