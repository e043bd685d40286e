"""Neural-network operator computes (TVM's ``topi.nn``): convolutions, dense/matmul, pooling,
normalization, softmax. Schedules per target live in ``topi.x86`` (and ``topi.generic``)."""

from .conv2d import (  # noqa: F401
    conv2d,
    conv2d_infer_layout,
    conv2d_NCHWc,
    conv2d_nchw,
    conv_out_size,
    group_conv2d_nchw,
)
from .pad import pad  # noqa: F401
from .utils import get_pad_tuple  # noqa: F401
