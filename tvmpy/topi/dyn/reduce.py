"""Reductions over axes given as a run-time tensor (the kernels of ``relay.op.dyn.sum`` etc.).

The output shape is computed before the kernel runs (a data-dependent shape function reads the
axes) and reaches the kernel as the output buffer's symbolic extents, so the kernel itself is
written once per reduce kind and rank:

- ``keepdims=True``: output dim ``o_k`` is 1 where axis ``k`` is reduced, else the input dim
  ``d_k``. Input index ``i_k = o_idx_k + r_k`` with ``r_k`` over ``d_k - o_k + 1`` values (all of
  ``d_k`` where reduced, one value where kept): no read of the axes at all.
- ``keepdims=False``: the output has the kept dims only, in order, so its row-major order is
  that of the keepdims result. The kernel reads the axes into a rank-sized mask (one small
  stage), walks the ``numel(data) / numel(out)`` reduced elements of each output element with
  one reduce axis, and rebuilds the input index from the output's flat index (kept axes) and
  the reduce index (reduced axes) by division and remainder against the mask-selected extents.

Sums accumulate in the data's dtype (relay widens float16 ones to float32 before they get
here: ``relay/transform/float16_accumulation.py``). Reducing nothing (an empty reduced
axis) gives the reducer's identity (0, 1, -inf / +inf; a mean of nothing is 0, as
onnxruntime).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...ir import dtype as dt
from ...tir import op as tir_op
from ...tir.expr import Select, cast, const
from .. import tag

__all__ = ["dyn_reduce", "REDUCE_KINDS"]

_prod = te.comm_reducer(lambda x, y: x * y, lambda d: const(1, d), name="prod")
REDUCE_KINDS = {"sum": te.sum, "mean": te.sum, "max": te.max, "min": te.min, "prod": _prod}


def _product(xs: Sequence[Any]) -> Any:
    out: Any = const(1, "int32")
    for x in xs:
        out = out * x
    return out


def _axes_mask(axes: te.Tensor, rank: int) -> te.Tensor:
    """mask[k] = 1 where some ``axes[j]`` (negative counts from the end) is ``k``."""
    j = te.reduce_axis((0, axes.shape[0]), name="j")

    def f(k: Any) -> Any:
        a = cast(axes[j], "int64")
        a = Select(a < const(0, "int64"), a + const(rank, "int64"), a)
        return te.max(Select(a == cast(k, "int64"), const(1, "int32"), const(0, "int32")),
                      axis=j)

    return te.compute((rank,), f, name="axes_mask")


def dyn_reduce(data: te.Tensor, axes: te.Tensor, out_shape: Sequence[Any], kind: str,
               keepdims: bool) -> te.Tensor:
    """``kind`` (sum, mean, max, min, prod) of ``data`` over the axes listed in ``axes`` (a 1-D
    integer tensor read at run time); ``out_shape``: the output's (symbolic) shape."""
    if kind not in REDUCE_KINDS:
        raise ValueError(f"dyn_reduce: unknown reduce kind {kind!r} (known: "
                         f"{sorted(REDUCE_KINDS)})")
    reducer = REDUCE_KINDS[kind]
    r = len(data.shape)
    d = list(data.shape)
    o = list(out_shape)
    if keepdims and len(o) != r:
        raise ValueError(f"dyn_reduce: keepdims output rank {len(o)} != data rank {r}")
    in_dt = data.dtype
    acc_dt = "uint8" if dt.is_bool(in_dt) else in_dt  # (bool: 0 / 1)

    def load(idx: Any) -> Any:
        v = data[tuple(idx)]
        return cast(v, acc_dt) if acc_dt != in_dt else v

    if keepdims:
        rks = [te.reduce_axis((0, d[k] - o[k] + 1), name=f"r{k}") for k in range(r)]
        count = _product([d[k] - o[k] + 1 for k in range(r)])

        def body(*i: Any) -> Any:
            return reducer(load([i[k] + rks[k] for k in range(r)]), axis=rks)
    else:
        mask = _axes_mask(axes, r)
        red = [mask[k] > 0 for k in range(r)]
        ext_red = [Select(red[k], d[k], 1) for k in range(r)]
        ext_kept = [Select(red[k], 1, d[k]) for k in range(r)]
        # every output element reduces numel(data) / numel(out) elements (0 when a reduced
        # axis is empty; no output element is computed when a kept one is)
        count = tir_op.floordiv(_product(d), tir_op.max(_product(o), 1))
        t = te.reduce_axis((0, count), name="t")

        def body(*i: Any) -> Any:
            flat: Any = const(0, "int32")
            for k in range(len(o)):
                flat = flat * o[k] + i[k]
            idx = []
            for k in range(r):
                from_red = tir_op.floormod(tir_op.floordiv(t, _product(ext_red[k + 1:])), d[k])
                from_out = tir_op.floormod(tir_op.floordiv(flat, _product(ext_kept[k + 1:])),
                                           d[k])
                idx.append(Select(red[k], from_red, from_out))
            return reducer(load(idx), axis=[t])

    acc = te.compute(o, body, name=f"dyn_{kind}", tag=tag.COMM_REDUCE)
    if kind == "mean":
        n = cast(tir_op.max(count, 1), acc_dt)
        return te.compute(o, lambda *i: cast(acc(*i) / n, in_dt), name="dyn_mean_div",
                          tag=tag.ELEMWISE)
    if acc_dt != in_dt:
        return te.compute(o, lambda *i: cast(acc(*i), in_dt), name=f"dyn_{kind}_round",
                          tag=tag.ELEMWISE)
    return acc
