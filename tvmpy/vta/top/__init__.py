"""VTA operators (TVM's ``vta.top``): packed conv2d and dense computes with their VTA schedules
(AutoTVM templates ``conv2d_packed.vta`` / ``dense_packed.vta``)."""

from .vta_conv2d import conv2d_packed, conv2d_packed_compute, schedule_conv2d_packed
from .vta_dense import dense_packed, dense_packed_compute, schedule_dense_packed

__all__ = ["conv2d_packed", "conv2d_packed_compute", "schedule_conv2d_packed", "dense_packed",
           "dense_packed_compute", "schedule_dense_packed"]
