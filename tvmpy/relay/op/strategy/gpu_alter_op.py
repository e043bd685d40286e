"""The GPU layout policy (targets with the key "gpu": cuda, nvptx, opencl), registered on the
generic layout hooks of ``alter_layout.py`` (TVM's ``topi/cuda/conv2d_alter_op.py``, its
Winograd case):

* ``nn.conv2d`` that the GPU strategy would run as ``conv2d_nchw_winograd.cuda`` (the
  implementation :func:`~tvmpy.relay.op.strategy.select_implementation` picks for the call: the
  ``"relay.cuda.winograd"`` switch, tuned records, else the untuned rule of ``gpu.py``) becomes
  ``nn.contrib_conv2d_winograd_without_weight_transform(data, U)`` with
  ``U = reshape(nn.contrib_conv2d_winograd_weight_transform(W, m, oc_bn=CO), (a, a, CI, CO))``
  (``a = m + 2``; the transform's blocked layout with one block of all output channels is the
  GPU layout ``[alpha, alpha, CI, CO]``). A constant ``W`` is transformed here (numpy, the same
  product as the x86 Winograd's); a ``W`` known at run time (a graph input) keeps the two calls:
  the transform runs as its own kernel and the reshape is a view; FoldConstant folds them once
  the weight is bound. The tile size ``m`` is the one the operator would have taken
  (``topi.cuda.winograd_tile_size``); the convolution's tuned config is looked up under the
  original ``conv2d_nchw_winograd.cuda`` workload (see
  ``topi.cuda.conv2d_nchw_winograd_without_weight_transform``).

  PassContext ``"relay.cuda.winograd_pre_transform"``: ``True`` (default) rewrites; ``False``
  keeps the transform inside the operator (its first kernel, every call: what the build did
  before; the A/B of ``bench/gpu_models.py --winograd-pre both``).

Nothing else is rewritten: the calls stay in NCHW (no blocked layout on GPUs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....topi.cuda import winograd_tile_size
from ....topi.nn.winograd import winograd_weight_transform_np
from ....transform import PassContext
from ...expr import Call, Constant, ConstData, RelayExpr
from ...op import nn as _nn
from ...op import transform as _tr
from .alter_layout import conv2d_alter_layout

__all__ = ["PRE_TRANSFORM_KEY", "winograd_pre_transform", "alter_conv2d_gpu"]

PRE_TRANSFORM_KEY = "relay.cuda.winograd_pre_transform"
"""The PassContext switch: ``True`` (default) / ``False``."""

WINOGRAD_IMPL = "conv2d_nchw_winograd.cuda"


def winograd_pre_transform() -> bool:
    """The PassContext's :data:`PRE_TRANSFORM_KEY` (default True)."""
    mode = PassContext.current().config.get(PRE_TRANSFORM_KEY, True)
    if mode is not True and mode is not False:
        raise ValueError(f"PassContext config {PRE_TRANSFORM_KEY} must be True or False, "
                         f"got {mode!r}")
    return mode


def _runs_winograd(call: Call, target: Any) -> bool:
    """Whether relay's lowering would run ``call`` (a typed ``nn.conv2d``) as
    ``conv2d_nchw_winograd.cuda``: the strategy's choice for placeholders of its argument types
    (as TVM's ``select_implementation`` in its alter hook)."""
    from ....te import placeholder
    from . import select_implementation

    types = [a.checked_type for a in call.args]
    if not all(hasattr(t, "shape") for t in types):
        return False
    if not all(isinstance(getattr(d, "value", d), int) for t in types for d in t.shape):
        return False
    a = call.attrs
    if a.data_layout != "NCHW" or a.kernel_layout != "OIHW" or a.groups != 1:
        return False
    tensors = [placeholder(tuple(int(d) for d in t.shape), t.dtype, name=f"arg{i}")
               for i, t in enumerate(types)]
    impl = select_implementation(call.op, a, tensors, call.checked_type, target)
    return impl.name == WINOGRAD_IMPL


def _transformed_weight(w: RelayExpr, tile: int, ci: int, co: int) -> RelayExpr:
    alpha = tile + 2
    if isinstance(w, Constant):
        u = winograd_weight_transform_np(w.data.numpy(), tile, co).reshape(alpha, alpha, ci, co)
        return Constant(ConstData(np.ascontiguousarray(u), copy=False))
    u = _nn.contrib_conv2d_winograd_weight_transform(w, tile, co)
    return _tr.reshape(u, (alpha, alpha, ci, co))


@conv2d_alter_layout.register("gpu")
def alter_conv2d_gpu(call: Call, inputs: Any) -> tuple[RelayExpr, None] | None:
    """The rewrite of the module docstring, or None (the call stays as it is)."""
    from ....target import Target

    if not winograd_pre_transform():
        return None
    target = Target.current()
    try:
        if not _runs_winograd(call, target):
            return None
    except ValueError:  # an untyped call (checked_type not known): leave it
        return None
    a = call.attrs
    n, ci, _, _ = (int(d) for d in call.args[0].checked_type.shape)
    co = int(call.args[1].checked_type.shape[0])
    oh, ow = (int(d) for d in call.checked_type.shape[2:])
    tile = winograd_tile_size(oh, ow, n)
    data = inputs.plain(0)
    weight = _transformed_weight(inputs.plain(1), tile, ci, co)
    out = _nn.contrib_conv2d_winograd_without_weight_transform(
        data, weight, tile, strides=a.strides, padding=a.padding, dilation=a.dilation,
        channels=co, out_dtype=a.out_dtype)
    return out, None
