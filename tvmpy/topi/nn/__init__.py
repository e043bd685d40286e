"""Neural-network operator computes (TVM's ``topi.nn``): convolutions, dense/matmul, pooling,
normalization, softmax. Schedules per target live in ``topi.x86``."""

# TVM also spells the activations and flatten under ``topi.nn``: the same computes (owned by
# topi.elemwise / topi.transform), re-exported for code written against that API
from ..elemwise import leaky_relu, prelu, relu  # noqa: E402,F401
from ..transform import flatten  # noqa: E402,F401
from .attention import attention  # noqa: F401
from .bitserial import (  # noqa: F401
    bitpack,
    bitserial_conv2d_nchw,
    bitserial_conv2d_nhwc,
    bitserial_dense,
)
from .conv2d import (  # noqa: F401
    conv2d,
    conv2d_infer_layout,
    conv2d_nchw,
    conv2d_NCHWc,
    conv_out_size,
    group_conv2d_nchw,
)
from .conv2d_transpose import conv2d_transpose_nchw, stride_interleave  # noqa: F401
from .conv_nd import (  # noqa: F401
    conv1d_ncw,
    conv1d_transpose_ncw,
    conv3d_ncdhw,
    conv3d_transpose_ncdhw,
    conv_nd,
    conv_transpose_nd,
    group_conv1d_ncw,
    group_conv2d_transpose_nchw,
)
from .dense import add_bias, batch_matmul, dense, matmul  # noqa: F401
from .depthwise_conv2d import depthwise_conv2d_nchw, depthwise_conv2d_NCHWc  # noqa: F401
from .dilate import dilate  # noqa: F401
from .local_response_norm import lrn  # noqa: F401
from .normalization import batch_norm, group_norm, instance_norm, layer_norm  # noqa: F401
from .pad import PAD_MODES, pad  # noqa: F401
from .pooling import (  # noqa: F401
    adaptive_pool,
    global_pool,
    pool1d,
    pool2d,
    pool3d,
    pool_out_size,
)
from .softmax import (  # noqa: F401
    log_softmax,
    log_softmax_by_row,
    softmax,
    softmax_by_reciprocal,
)
from .utils import get_pad_tuple  # noqa: F401
from .winograd import (  # noqa: F401
    conv2d_winograd_nchwc,
    conv2d_winograd_weight_transform,
    winograd_matrices,
    winograd_weight_transform_np,
)

batch_flatten = flatten
