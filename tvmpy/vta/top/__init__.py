"""VTA operators (TVM's ``vta.top``): packed conv2d and dense computes with their VTA schedules
(AutoTVM templates ``conv2d_packed.vta`` / ``dense_packed.vta``)."""

from .vta_conv2d import conv2d_packed, conv2d_packed_compute, schedule_conv2d_packed
from .vta_dense import dense_packed, dense_packed_compute, schedule_dense_packed

__all__ = ["conv2d_packed", "conv2d_packed_compute", "schedule_conv2d_packed", "dense_packed",
           "dense_packed_compute", "schedule_dense_packed"]


def __getattr__(name: str) -> object:
    # ``vta.top.graph_pack`` (TVM's spelling) is a relay pass, above this layer: loaded on first
    # use (tests/test_layering.py allows this one re-export)
    if name in ("graph_pack", "GraphPackError"):
        from . import graphpack

        return getattr(graphpack, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
